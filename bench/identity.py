#!/usr/bin/env python
"""What the sandbox's identity values cost: `id()`, identity hashes and default reprs from a counter.

    python bench/identity.py            # 7 repetitions of each workload
    python bench/identity.py --quick    # 2 repetitions, smaller workloads

In a worker, the hash of an object hashed by identity, its `id()` and its default repr come from a
per-session counter (see `corral.language.identity`), so that a stored session's replay gives the
same values. Each workload runs as one feed of a corral session and, alternating with it, in
plain CPython in this process; the table gives the medians (min–max) and the ratio corral / CPython.
Run it against two versions of corral to see what the counter adds (the ratio moves; the
feed's fixed cost, a millisecond or so, is in every corral figure).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import corral

CLASS = 'class Task:\n    def __init__(self, n):\n        self.n = n\n'
WORKLOADS = {
    'make 1M script objects': CLASS + 'for i in range({big}):\n    Task(i)\n',
    'set of 100k script objects': CLASS + 'tasks = [Task(i) for i in range({small})]\nlen(set(tasks))\n',
    'set of the same 100k again': CLASS + 'tasks = [Task(i) for i in range({small})]\nfirst = set(tasks)\nlen(set(tasks)) + len(first)\n',
    'dict of 100k object() keys': 'keys = {{object(): i for i in range({small})}}\nlen(keys)\n',
    'id() of 100k objects': CLASS + 'tasks = [Task(i) for i in range({small})]\nlen({{id(t) for t in tasks}})\n',
    'set of 10k functions': 'def make(i):\n    def f():\n        return i\n    return f\nlen({{make(i) for i in range({tiny})}})\n',
}


def plain(code: str) -> float:
    """Seconds plain CPython takes to run `code` (compiled first, as the worker's scripts are)."""
    compiled = compile(code, '<bench>', 'exec')
    start = time.perf_counter()
    exec(compiled, {'__name__': '__main__'})
    return time.perf_counter() - start


async def measure(sizes: dict[str, int], repeats: int) -> list[tuple[str, list[float], list[float]]]:
    """Each workload, at `sizes`, `repeats` times in a corral feed and in plain CPython, after a
    warm-up round of each: `(name, corral seconds, CPython seconds)`."""
    rows = []
    limits = corral.Limits(wall_time=120)
    async with corral.Pool() as pool:
        for name, template in WORKLOADS.items():
            code = template.format(**sizes)
            ours: list[float] = []
            theirs: list[float] = []
            for _ in range(repeats + 1):
                async with pool.checkout(limits=limits) as session:
                    start = time.perf_counter()
                    await session.feed_run(code)
                    ours.append(time.perf_counter() - start)
                theirs.append(plain(code))
            rows.append((name, ours[1:], theirs[1:]))
    return rows


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument('--quick', action='store_true')
    args = parser.parse_args()
    repeats = 2 if args.quick else 7
    sizes = {'big': 100_000, 'small': 10_000, 'tiny': 1_000} if args.quick else {'big': 1_000_000, 'small': 100_000, 'tiny': 10_000}
    print('| workload | corral (ms) | CPython (ms) | corral / CPython |')
    print('|---|---|---|---|')
    for name, ours, theirs in await measure(sizes, repeats):
        a, b = statistics.median(ours), statistics.median(theirs)
        print(
            f'| {name} | {a * 1e3:.1f} ({min(ours) * 1e3:.1f}–{max(ours) * 1e3:.1f}) '
            f'| {b * 1e3:.1f} ({min(theirs) * 1e3:.1f}–{max(theirs) * 1e3:.1f}) | {a / b:.2f} |'
        )


if __name__ == '__main__':
    asyncio.run(main())
