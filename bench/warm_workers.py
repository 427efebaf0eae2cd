#!/usr/bin/env python
"""Warm workers that follow demand, side by side with a fixed warm count, in one run.

    python bench/warm_workers.py            # 3 rounds of each, alternating
    python bench/warm_workers.py --quick    # 1 round, bursts of 20

Each round starts a pool, lets it fill its warm workers, then:

1. burst A: 50 checkouts back to back (50 agents arriving at once: each session is entered as
   soon as the one before it is, and all stay open), then each runs `1 + 1` and all close;
2. the pool refills; the idle workers it keeps, and their memory (USS: what killing them frees;
   PSS), are measured ("after the burst");
3. burst B, the same, 0.2 s later (within the decay period: the pool remembers burst A);
4. after the decay has run its course, the idle workers and their memory again ("after the decay").

The fixed side is `Pool(warm_workers=2, max_warm_workers=2)` (a pool that keeps two ready, as
before); the demand side is `Pool(warm_workers=2, max_warm_workers=8, warm_decay=DECAY)`. The
checkout latency is the time to enter a session (`async with pool.checkout()`), p50 and p99 over
a burst. Cells are median (min–max) over the rounds; ratios are demand / fixed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from typing import Any

import corral

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import _percentile, median_cell, memory_note, process_memory  # noqa: E402  (the benchmarks' shared measurements)

FLOOR = 2
CAP = 8


def sides(decay: float) -> dict[str, dict[str, Any]]:
    return {
        'fixed': {'warm_workers': FLOOR, 'max_warm_workers': FLOOR},
        'demand': {'warm_workers': FLOOR, 'max_warm_workers': CAP, 'warm_decay': decay},
    }


async def settled(pool: corral.Pool) -> None:
    """Wait for the pool's refill to end."""
    while pool._refill is not None and not pool._refill.done():
        await asyncio.wait([pool._refill])


def idle_memory(pool: corral.Pool) -> dict[str, float]:
    """The idle workers the pool keeps, and their summed USS and PSS in MiB."""
    memories = [process_memory(worker.pid) for worker in pool._idle if worker.pid is not None]
    return {
        'idle': float(len(pool._idle)),
        'uss': sum(m['uss'] for m in memories),
        'pss': sum(m['pss'] for m in memories),
    }


async def burst(pool: corral.Pool, checkouts: int) -> dict[str, float]:
    """`checkouts` sessions entered back to back (timed), then each runs `1 + 1`, then all close."""
    latencies = []
    open_sessions = []
    started = time.perf_counter()
    try:
        for _ in range(checkouts):
            before = time.perf_counter()
            session = pool.checkout()
            await session.__aenter__()
            latencies.append(time.perf_counter() - before)
            open_sessions.append(session)
        total = time.perf_counter() - started
        for session in open_sessions:
            if await session.feed_run('1 + 1') != 2:
                raise AssertionError('1 + 1 != 2')
    finally:
        for session in open_sessions:
            await session.aclose()
    return {
        'total': total,
        'p50': _percentile(latencies, 0.5),
        'p99': _percentile(latencies, 0.99),
        'first p50': _percentile(latencies[:CAP], 0.5),
    }


async def one_round(options: dict[str, Any], checkouts: int, decay_wait: float) -> dict[str, float]:
    """One round on a new pool (see the module docstring); every measurement by name."""
    result: dict[str, float] = {}
    async with corral.Pool(**options) as pool:
        async with pool.checkout() as session:  # starts the zygote
            await session.feed_run('1 + 1')
        await settled(pool)
        await asyncio.sleep(0.1)  # the warm workers finish their own start-up
        for name, value in (await burst(pool, checkouts)).items():
            result[f'A {name}'] = value
        await settled(pool)
        await asyncio.sleep(0.1)
        for name, value in idle_memory(pool).items():
            result[f'after burst {name}'] = value
        await asyncio.sleep(0.1)
        for name, value in (await burst(pool, checkouts)).items():
            result[f'B {name}'] = value
        await settled(pool)
        await asyncio.sleep(decay_wait)
        await settled(pool)
        for name, value in idle_memory(pool).items():
            result[f'after decay {name}'] = value
    return result


ROWS = (
    ('A total', 'burst A: total time', 'ms', 1000),
    ('A p50', 'burst A: checkout latency p50', 'ms', 1000),
    ('A p99', 'burst A: checkout latency p99', 'ms', 1000),
    ('A first p50', f'burst A: checkout latency p50 of its first {CAP}', 'ms', 1000),
    ('B total', 'burst B (0.2 s later): total time', 'ms', 1000),
    ('B p50', 'burst B: checkout latency p50', 'ms', 1000),
    ('B p99', 'burst B: checkout latency p99', 'ms', 1000),
    ('B first p50', f'burst B: checkout latency p50 of its first {CAP}', 'ms', 1000),
    ('after burst idle', 'idle workers after burst A', '', 1),
    ('after burst uss', 'their memory, USS', 'MiB', 1),
    ('after burst pss', 'their memory, PSS', 'MiB', 1),
    ('after decay idle', 'idle workers after the decay', '', 1),
    ('after decay uss', 'their memory, USS', 'MiB', 1),
    ('after decay pss', 'their memory, PSS', 'MiB', 1),
)


def table(results: dict[str, list[dict[str, float]]], checkouts: int) -> str:
    lines = [
        f'| {checkouts} back-to-back checkouts | fixed ({FLOOR} warm) | demand ({FLOOR}–{CAP} warm) | ratio (demand/fixed) |',
        '|---|---|---|---|',
    ]
    for key, label, unit, scale in ROWS:
        fixed = [r[key] for r in results['fixed']]
        demand = [r[key] for r in results['demand']]
        ratio = statistics.median(demand) / statistics.median(fixed) if statistics.median(fixed) else float('nan')
        lines.append(f'| {label} | {median_cell([v * scale for v in fixed], unit)} | {median_cell([v * scale for v in demand], unit)} | {ratio:.2f}× |')
    if memory_note():
        lines.append(f'\n{memory_note()}.')
    return '\n'.join(lines)


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true', help='1 round, bursts of 20')
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--checkouts', type=int, default=50)
    parser.add_argument('--decay', type=float, default=1.0, help='warm_decay of the demand side, seconds (default 1)')
    args = parser.parse_args(argv)
    rounds, checkouts = (1, 20) if args.quick else (args.rounds, args.checkouts)
    # CAP - FLOOR = 6 extra workers halve away in three periods (6 -> 3 -> 1 -> 0); one more for the timer
    decay_wait = 4 * args.decay
    results: dict[str, list[dict[str, float]]] = {'fixed': [], 'demand': []}
    for index in range(rounds):
        for name, options in sides(args.decay).items():
            print(f'round {index + 1}/{rounds}: {name}', file=sys.stderr)
            results[name].append(await one_round(options, checkouts, decay_wait))
    print(table(results, checkouts))


if __name__ == '__main__':
    asyncio.run(main())
