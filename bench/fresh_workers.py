#!/usr/bin/env python
"""What a fresh worker costs, against the fork floor of this machine, in one run.

    python bench/fresh_workers.py            # 5 repetitions of 40 sessions and 200 forks
    python bench/fresh_workers.py --quick    # 2 repetitions of 10 sessions and 50 forks

- The fork floor: a process of the zygote's size (it imports and builds what the zygote does:
  `PRELOAD_MODULES`, `runtime.prepare_worker()`, then `gc.freeze()`, started as the zygote is) forks a child that exits at
  once (`os._exit`) and waits for it, without CPython's at-fork handlers, as the zygote forks.
  CPU per fork: the parent's (the fork and the wait) and the child's (its exit), from
  `getrusage`.
- A session: `checkout()` + `1 + 1` + close on a pool, one after the other. CPU per session: the
  host process's, the zygote's (its fork of the worker that replaces the one taken) and the
  worker's over its life until its session closes (its start, warm-up and feed, from
  /proc/<pid>/schedstat; its exit is not readable there: the kernel reaps it), and the worker's
  minor page faults by then (copies of pages it shared with the zygote, and new ones).

The repetitions alternate between the two; cells are median (min–max).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import time

import corral

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import median_cell, process_memory  # noqa: E402  (the benchmarks' shared measurements)
from sessions import cpu_ns  # noqa: E402

FLOOR = """
import importlib.util, sys
# as the zygote starts (corral.host.workers.ZYGOTE_PROGRAM): the corral package's __init__ not run
sys.modules['corral'] = importlib.util.module_from_spec(importlib.util.find_spec('corral'))
import gc, os, resource, time
from corral.worker import runtime, zygote
for name in runtime.PRELOAD_MODULES:
    __import__(name)
runtime.prepare_worker()
gc.collect()
gc.freeze()
count = int(sys.argv[1])
sys.stdout.write('ready\\n'); sys.stdout.flush()
sys.stdin.readline()
parent, child = time.process_time_ns(), resource.getrusage(resource.RUSAGE_CHILDREN)
for _ in range(count):
    pid = zygote._fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
after = resource.getrusage(resource.RUSAGE_CHILDREN)
children = (after.ru_utime + after.ru_stime - child.ru_utime - child.ru_stime) * 1e9
print((time.process_time_ns() - parent) / count, children / count)
"""


def fork_floor(count: int) -> dict[str, float]:
    """Microseconds of CPU per fork + exit + wait of a zygote-sized process, and its RSS in MiB."""
    process = subprocess.Popen([sys.executable, '-P', '-c', FLOOR, str(count)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdin is not None
    assert process.stdout.readline() == 'ready\n'
    memory = process_memory(process.pid)
    process.stdin.write('go\n')
    process.stdin.flush()
    parent, child = map(float, process.stdout.readline().split())
    process.wait()
    return {'parent': parent / 1e3, 'child': child / 1e3, 'total': (parent + child) / 1e3, 'rss': memory['rss'], 'uss': memory['uss']}


def minor_faults(pid: int) -> int:
    """Minor page faults of process `pid` so far (the 10th field of /proc/<pid>/stat)."""
    with open(f'/proc/{pid}/stat') as f:
        return int(f.read().rpartition(')')[2].split()[7])


async def sessions(pool: corral.Pool, count: int) -> dict[str, float]:
    """Microseconds of CPU per checkout + `1 + 1` + close: host, zygote and worker; the worker's
    minor page faults; and the zygote's RSS in MiB."""
    zygote = pool._zygote.pid
    assert zygote is not None
    host0, zygote0 = time.process_time_ns(), cpu_ns(zygote)
    worker_cpu, faults = 0, 0
    for _ in range(count):
        async with pool.checkout() as session:
            assert await session.feed_run('1 + 1') == 2
            pid = session._worker.pid
            worker_cpu += cpu_ns(pid)
            faults += minor_faults(pid)
    host, zygote_cpu = time.process_time_ns() - host0, cpu_ns(zygote) - zygote0
    return {
        'host': host / count / 1e3,
        'zygote': zygote_cpu / count / 1e3,
        'worker': worker_cpu / count / 1e3,
        'total': (host + zygote_cpu + worker_cpu) / count / 1e3,
        'faults': faults / count,
        'rss': process_memory(zygote)['rss'],
        'uss': process_memory(zygote)['uss'],
    }


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--quick', action='store_true')
    args = parser.parse_args(argv)
    reps, count, forks = (2, 10, 50) if args.quick else (5, 40, 200)
    floors: list[dict[str, float]] = []
    runs: list[dict[str, float]] = []
    async with corral.Pool(warm_workers=1) as pool:
        for _ in range(2):  # the zygote started and warm
            async with pool.checkout() as session:
                await session.feed_run('1 + 1')
        for rep in range(reps):
            for side in ('floor', 'corral') if rep % 2 == 0 else ('corral', 'floor'):
                if side == 'floor':
                    floors.append(fork_floor(forks))
                else:
                    runs.append(await sessions(pool, count))
    floor = statistics.median(f['total'] for f in floors)
    print('| per fresh worker | CPU | / fork floor |')
    print('| --- | --- | --- |')
    print(f"| fork floor: fork + exit + wait of a zygote-sized process (RSS {median_cell([f['rss'] for f in floors], 'MiB')}) | {median_cell([f['total'] for f in floors], 'µs')} | 1.00× |")
    print(f"| … the parent's part (fork, wait) | {median_cell([f['parent'] for f in floors], 'µs')} | — |")
    print(f"| … the child's part (exit) | {median_cell([f['child'] for f in floors], 'µs')} | — |")
    for key, label in (
        ('total', f"a session (checkout + `1 + 1` + close), all but the worker's exit (zygote RSS {median_cell([r['rss'] for r in runs], 'MiB')})"),
        ('host', '… host process'),
        ('zygote', '… zygote (the fork)'),
        ('worker', '… worker, until its session closed'),
    ):
        values = [r[key] for r in runs]
        print(f'| {label} | {median_cell(values, "µs")} | {statistics.median(values) / floor:.2f}× |')
    print(f"| worker's minor page faults by then | {median_cell([r['faults'] for r in runs])} | — |")


if __name__ == '__main__':
    asyncio.run(main())
