"""What one script's large value costs the host: the longest stall of its event loop, and its memory.

    python bench/large_values.py [--items N]

Runs each script below in a session of its own while a ticker task on the host's event loop wakes
every millisecond, and prints, for each, how the feed ended, how long it took, the longest gap
between two ticks (the longest the event loop was blocked) and the host process's peak resident
memory (`ru_maxrss`) after it. The first is the attack that a value of many references to one
empty list makes: one small frame that decodes into millions of objects. The others are the
largest values the default limits let through, and values that break the other rules.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import time

import corral

SCRIPTS = {
    'many references to one empty list': '[[]] * {items}',
    'a dict of them': 'dict.fromkeys(range({items}), [])',
    '1,000,000 empty lists (the largest value_items allows)': '[[]] * 1_000_000',
    '999,000 ints': 'list(range(999_000))',
    'a dict of 300,000 entries': '{{i: str(i) for i in range(300_000)}}',
    'a 60 MiB string': "'x' * (60 * 1024**2)",
    'a host function returning 1,000,000 lists': 'rows()',
    'a value that contains itself': 'x = []\nx.append(x)\nx',
    '60 tuples around 500-deep lists': 't = []\nfor i in range(500):\n    t = [t]\nfor i in range(60):\n    t = (t,)\nt',
}


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _run(pool: corral.Pool, code: str) -> tuple[str, float, float]:
    worst = 0.0
    running = True

    async def ticker() -> None:
        nonlocal worst
        last = time.perf_counter()
        while running:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            worst = max(worst, now - last)
            last = now

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    start = time.perf_counter()
    try:
        async with pool.checkout(limits=corral.Limits(wall_time=30)) as session:
            value = await session.feed_run(code, external_lookup={'rows': lambda: [[]] * 1_000_000})
            outcome = f'returned a {type(value).__name__} of {len(value):,}'
    except corral.SandboxError as error:
        outcome = f'{type(error).__name__}: {error.display().splitlines()[-1][:110]}'
    elapsed = time.perf_counter() - start
    await asyncio.sleep(0.01)
    running = False
    await tick
    return outcome, elapsed, worst


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--items', type=int, default=40_000_000, help='references in the first two scripts')
    parser.add_argument('--only', help='run only the scripts whose name contains this text')
    args = parser.parse_args()
    print('| script | outcome | feed | longest event-loop stall | host peak RSS after |')
    print('|---|---|---|---|---|')
    async with corral.Pool(warm_workers=0) as pool:
        for name, code in SCRIPTS.items():
            if args.only and args.only not in name:
                continue
            outcome, elapsed, worst = await _run(pool, code.format(items=f'{args.items:_}'))
            print(f'| {name} | {outcome} | {elapsed:.2f} s | {worst * 1000:.1f} ms | {_peak_rss_mib():.0f} MiB |', flush=True)


if __name__ == '__main__':
    asyncio.run(main())
