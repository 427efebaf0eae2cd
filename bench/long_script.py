#!/usr/bin/env python
"""How long the type check of a long script holds up the host's event loop, and what a short one costs.

    python bench/long_script.py                         # this corral
    python bench/long_script.py --compare OTHER/src     # this corral and another, alternating, with ratios

A ticker task on the host's event loop sleeps 1 ms over and over; the longest gap between two of
its wake-ups, less the 1 ms, is how long the loop was held (every other session on the host waits
that long). Measured while a `TypeChecker` (its `ty server` warm) checks:

- `long`: a script of 3,000 assignment lines (some 120 KB, under the default `code_size` of
  128 KiB), each round a new one;
- `long context`: a short script after five such scripts of the same session (600 KB of context,
  more than the index of a context is kept for), each round new ones;
- `idle`: nothing (the noise floor of the machine);

and the time a check of a typical script of 1-3 KB takes (`short`, median of `--short` checks,
each of a new script). With `--compare`, the other corral's source folder is measured in a child
process between rounds of this one, and the table gives after/before ratios (this / other).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time

STUBS = 'def price(item: str) -> float: ...\nasync def stock(item: str) -> int: ...\n'


def long_script(seed: int, lines: int = 3000) -> str:
    """Some 40 characters a line: `total_0001 = price("item_1") * 2 + 17`."""
    return ''.join(f'total_{i:04d} = price("item_{i % 97}") * {seed % 9 + 1} + {i}\n' for i in range(lines))


def short_script(seed: int) -> str:
    """A typical model-written script of some 1.5 KB."""
    body = '\n'.join(
        f'count_{i} = await stock("item_{i}")\nif count_{i} > {seed}:\n    totals.append(price("item_{i}") * count_{i})'
        for i in range(20)
    )
    return f'totals: list[float] = []\n{body}\nsum(totals)\n'


class Ticker:
    """The longest gap between wake-ups of a task that sleeps 1 ms, less the 1 ms (seconds)."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(0.001)
            self.longest = max(self.longest, time.perf_counter() - started - 0.001)

    async def __aenter__(self) -> Ticker:
        self._task = asyncio.get_running_loop().create_task(self._run())
        await asyncio.sleep(0.005)  # it ticks before what it measures starts
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def measure(rounds: int, shorts: int, seed: int) -> dict[str, list[float]]:
    from corral.typecheck import TypeChecker

    checker = TypeChecker()
    results: dict[str, list[float]] = {'long': [], 'long context': [], 'idle': [], 'short': []}
    try:
        await checker.check('1', stubs=STUBS)
        for slot in checker._slots:  # the warm server's start is not what is measured
            if slot.starting is not None:
                await slot.starting
        await checker.check(long_script(seed - 1), stubs=STUBS)  # a first long read (a child's start)
        for n in range(rounds):
            code = long_script(seed + n)  # made before the ticker starts: making it holds the loop too
            async with Ticker() as ticker:
                await checker.check(code, stubs=STUBS)
            results['long'].append(ticker.longest)
            context = [long_script(seed + n * 10 + k) for k in range(5)]
            async with Ticker() as ticker:
                await checker.check('total_0001 + 1', stubs=STUBS, context=context)
            results['long context'].append(ticker.longest)
            async with Ticker() as ticker:
                await asyncio.sleep(1.0)
            results['idle'].append(ticker.longest)
        for n in range(shorts):
            started = time.perf_counter()
            await checker.check(short_script(seed + n), stubs=STUBS)
            results['short'].append(time.perf_counter() - started)
    finally:
        await checker.aclose()
    return results


def _other(source: str, rounds: int, shorts: int, seed: int) -> dict[str, list[float]]:
    env = {**os.environ, 'PYTHONPATH': source}
    argv = [sys.executable, __file__, '--json', '--rounds', str(rounds), '--short', str(shorts), '--seed', str(seed)]
    return json.loads(subprocess.run(argv, env=env, check=True, capture_output=True, text=True).stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--rounds', type=int, default=5, help='checks of a long script (and of a long context) per side')
    parser.add_argument('--short', type=int, default=40, help='checks of a short script per side')
    parser.add_argument('--compare', metavar='SRC', help="another corral's source folder (the `before`)")
    parser.add_argument('--alternations', type=int, default=3, help='with --compare: turns of each side')
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--json', action='store_true', help='print the raw figures (seconds) as JSON')
    args = parser.parse_args()
    if not args.compare:
        results = asyncio.run(measure(args.rounds, args.short, args.seed))
        if args.json:
            print(json.dumps(results))
            return
        sides = {'this': results}
    else:
        sides = {'this': {}, 'other': {}}
        for turn in range(args.alternations):
            seed = args.seed + 1000 * turn  # new scripts each turn, the same for both sides
            print(f'turn {turn + 1}/{args.alternations}', file=sys.stderr)
            for name, results in (('other', _other(args.compare, args.rounds, args.short, seed)), ('this', asyncio.run(measure(args.rounds, args.short, seed)))):
                for key, values in results.items():
                    sides[name].setdefault(key, []).extend(values)
    header = '| figure | ' + ' | '.join(sides) + (' | this / other |' if len(sides) == 2 else ' |')
    print(header)
    print('|' + '---|' * (header.count('|') - 1))
    for key, label, pick in [
        ('long', 'longest loop stall, long script (ms, max)', max),
        ('long', 'longest loop stall, long script (ms, median of rounds)', statistics.median),
        ('long context', 'longest loop stall, long context (ms, max)', max),
        ('idle', 'longest loop stall, idle (ms, max)', max),
        ('short', 'check of a 1.5 KB script (ms, median)', statistics.median),
        ('short', 'check of a 1.5 KB script (ms, p90)', lambda v: statistics.quantiles(v, n=10)[-1]),
    ]:
        values = [pick(side[key]) * 1000 for side in sides.values()]
        ratio = f' | {values[0] / values[1]:.2f}' if len(values) == 2 and values[1] else ''
        print(f'| {label} | ' + ' | '.join(f'{v:.1f}' for v in values) + ratio + ' |')


if __name__ == '__main__':
    main()
