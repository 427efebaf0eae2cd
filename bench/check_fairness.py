#!/usr/bin/env python
"""How long one session's heavy type check holds up another session's checked feeds.

    python bench/check_fairness.py                      # both scripts below
    python bench/check_fairness.py --branches 3500      # one script, of 3,500 `if` branches

Session A feeds a script of N `if x == i: y = y + i` branches (16,000 is some 500 KB, the script
that made ty take 3 GB and 27 s; 3,500 is some 110 KB, under the default `code_size`, and still
takes ty tens of seconds), with type checking on and the default limits. Meanwhile session B
feeds a trivial checked script (`1 + 1`) over and over, 20 ms apart, and a ticker task on the
host's event loop wakes every 5 ms. The figures: B's feed time alone (median) and while A's check
runs (median and max), the longest the ticker overslept (the host's event loop was blocked that
long), the peak memory of the ty processes, and what A got and after how long. A run whose
check is not stopped by then is given up after `--observe` seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

import corral

TRIVIAL = '1 + 1'


def branches(count: int) -> str:
    """A script of `count` `if` branches that all narrow and rebind one variable."""
    lines = ['x = int("3")', 'y = 0']
    lines += [f'if x == {i}:\n    y = y + {i}' for i in range(count)]
    return '\n'.join(lines) + '\ny\n'


def _children_rss(name: str = 'ty') -> int:
    """Bytes of resident memory of this process's child processes called `name`."""
    total = 0
    me = os.getpid()
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        try:
            with open(f'/proc/{pid}/stat') as file:
                stat = file.read()
            comm = stat[stat.index('(') + 1 : stat.rindex(')')]
            ppid = int(stat[stat.rindex(')') + 2 :].split()[1])
            if comm == name and ppid == me:
                with open(f'/proc/{pid}/statm') as file:
                    total += int(file.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')
        except (OSError, ValueError, IndexError):
            continue
    return total


async def _timed(session: corral.Session, code: str) -> float:
    started = time.perf_counter()
    assert await session.feed_run(code) == 2
    return time.perf_counter() - started


async def measure(pool: corral.Pool, count: int, observe: float) -> dict[str, object]:
    heavy = branches(count)
    async with pool.checkout(type_check=True) as a, pool.checkout(type_check=True) as b:
        for _ in range(5):  # warm: the slots' servers, the workers
            await _timed(b, TRIVIAL)
            await asyncio.sleep(0.02)
        alone = []
        for _ in range(20):
            alone.append(await _timed(b, TRIVIAL))
            await asyncio.sleep(0.02)

        stall = 0.0
        peak = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal stall, peak
            last = time.perf_counter()
            while not stop.is_set():
                await asyncio.sleep(0.005)
                now = time.perf_counter()
                stall = max(stall, now - last - 0.005)
                last = now
                peak = max(peak, _children_rss())

        async def heavy_feed() -> str:
            try:
                await a.feed_run(heavy, print_callback=lambda stream, text: None)
            except corral.SandboxError as error:
                return f'{type(error).__name__}: {str(error).splitlines()[0][:160]}'
            return 'ran'

        tick = asyncio.create_task(ticker())
        started = time.perf_counter()
        task = asyncio.create_task(heavy_feed())
        during = []
        while not task.done() and time.perf_counter() - started < observe:
            during.append(await _timed(b, TRIVIAL))
            await asyncio.sleep(0.02)
        if task.done():
            outcome = task.result()
        else:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            outcome = f'still checking after {observe:g} s: given up'
        took = time.perf_counter() - started
        stop.set()
        await tick
    return {
        'branches': count,
        'bytes': len(heavy.encode()),
        'alone_median': statistics.median(alone),
        'during_median': statistics.median(during) if during else None,
        'during_max': max(during) if during else None,
        'during_n': len(during),
        'stall': stall,
        'ty_peak': peak,
        'outcome': outcome,
        'took': took,
    }


def _ms(seconds: object) -> str:
    return '—' if seconds is None else f'{seconds * 1000:.1f} ms'  # type: ignore[operator]


async def main(counts: list[int], observe: float) -> None:
    async with corral.Pool() as pool:
        print('| script | B alone, median | B during A, median | B during A, max (n) | longest host loop stall | ty peak RSS | A got, after |')
        print('|---|---|---|---|---|---|---|')
        for count in counts:
            r = await measure(pool, count, observe)
            print(
                f"| {r['branches']:,} branches, {r['bytes'] / 1024:.0f} KiB | {_ms(r['alone_median'])} | {_ms(r['during_median'])} "
                f"| {_ms(r['during_max'])} ({r['during_n']}) | {_ms(r['stall'])} | {r['ty_peak'] / 1024**2:.0f} MiB "  # type: ignore[operator]
                f"| {r['outcome']}, {r['took']:.1f} s |",
                flush=True,
            )


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--branches', type=int, action='append', help='branches of A\'s script (repeatable); default 16000 and 3500')
    parser.add_argument('--observe', type=float, default=30.0, help='seconds to watch before giving A\'s check up (default 30)')
    args = parser.parse_args()
    asyncio.run(main(args.branches or [16000, 3500], args.observe))
