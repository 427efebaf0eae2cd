"""numpy, pandas and matplotlib in the sandbox: what a pool with `packages` costs and saves.

    python bench/packages.py            # a few minutes
    python bench/packages.py --quick    # under a minute

Prints a Markdown table (progress to stderr):

1. A data question's first answer: checkout plus a first feed that imports pandas and groups a
   10,000-row frame, from a pool with `packages=['pandas', 'matplotlib']` (its zygote started, its
   warm workers waiting), against plain CPython running the same script in a fresh process
   (`python -c`, the import included), and against the same script in a kept session.
2. The zygote's start: plain, and with the packages loaded (imports, fonts, warm-ups).
3. An idle warm worker's memory, USS (the pages it alone holds: Private_Clean + Private_Dirty of
   /proc/PID/smaps_rollup, or an upper bound where that is not readable: `run.process_memory`) and
   RSS, with packages and without.
4. Checkouts per second (checkout, feed `1`, close, one after another), with packages and without.

Each cell is the median (min-max) of the repetitions, which alternate between the sides. Ratios
are of medians. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

import corral

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import memory_note, process_memory  # noqa: E402  (the benchmarks' shared measurements)

SCRIPT = """
import numpy as np
import pandas as pd
frame = pd.DataFrame({'region': np.array(['north', 'south', 'east', 'west'])[np.arange(10_000) % 4], 'amount': np.arange(10_000)})
totals = frame.groupby('region')['amount'].sum()
int(totals['north'])
"""
PACKAGES = ['pandas', 'matplotlib']


@dataclass
class Params:
    repeats: int = 15
    rate_seconds: float = 5.0

    @classmethod
    def quick(cls) -> Params:
        return cls(repeats=5, rate_seconds=2.0)

    @classmethod
    def tiny(cls) -> Params:
        return cls(repeats=1, rate_seconds=0.2)


def _cell(samples: list[float], unit: str, scale: float = 1.0) -> str:
    values = [sample * scale for sample in samples]
    return f'{statistics.median(values):.1f} {unit} ({min(values):.1f}-{max(values):.1f})'


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


async def _settled(pool: corral.Pool) -> None:
    """Wait for the pool's refill (its forks compete for the CPU with the next sample)."""
    refill = pool._refill
    if refill is not None and not refill.done():
        await asyncio.wait([refill])  # a refill cancelled for a sooner one (a release, a miss) raises nothing here


async def first_answer(packages: corral.Pool, params: Params) -> dict[str, list[float]]:
    """Figure 1: seconds to the first answer, three ways."""
    samples: dict[str, list[float]] = {'sandbox': [], 'python': [], 'kept': []}
    async with packages.checkout() as kept:
        await kept.feed_run(SCRIPT)  # warm
        for repeat in range(params.repeats):
            order = ('sandbox', 'python', 'kept') if repeat % 2 == 0 else ('kept', 'python', 'sandbox')
            for side in order:
                await _settled(packages)
                start = time.perf_counter()
                if side == 'sandbox':
                    async with packages.checkout() as session:
                        value = await session.feed_run(SCRIPT)
                elif side == 'kept':
                    value = await kept.feed_run(SCRIPT)
                else:
                    done = await asyncio.to_thread(subprocess.run, [sys.executable, '-c', SCRIPT + '\nprint(int(totals["north"]))'], capture_output=True, text=True, check=True)
                    value = int(done.stdout)
                samples[side].append(time.perf_counter() - start)
                assert value == 12495000, value
    return samples


async def zygote_start(params: Params) -> dict[str, list[float]]:
    """Figure 2: seconds from `Pool.start()` to a zygote ready to fork."""
    samples: dict[str, list[float]] = {'plain': [], 'packages': []}
    for repeat in range(max(1, params.repeats // 3)):
        for side in (('plain', 'packages') if repeat % 2 == 0 else ('packages', 'plain')):
            async with corral.Pool(warm_workers=0, packages=PACKAGES if side == 'packages' else ()) as pool:
                start = time.perf_counter()
                await pool.start()
                samples[side].append(time.perf_counter() - start)
    return samples


async def idle_memory(pools: dict[str, corral.Pool]) -> dict[str, tuple[float, float]]:
    """Figure 3: an idle warm worker's (USS, RSS) in MiB, per pool (`run.process_memory`)."""
    found = {}
    for side, pool in pools.items():
        async with pool.checkout():
            pass
        await _settled(pool)
        worker = pool._idle[-1]
        await asyncio.sleep(0.2)
        memory = process_memory(worker.pid)
        found[side] = memory['uss'], memory['rss']
    return found


async def checkout_rate(pools: dict[str, corral.Pool], params: Params) -> dict[str, list[float]]:
    """Figure 4: checkouts per second, in rounds that alternate between the pools."""
    samples: dict[str, list[float]] = {side: [] for side in pools}
    for repeat in range(max(1, params.repeats // 5)):
        for side in (list(pools) if repeat % 2 == 0 else list(pools)[::-1]):
            pool = pools[side]
            count, start = 0, time.perf_counter()
            while time.perf_counter() - start < params.rate_seconds:
                async with pool.checkout() as session:
                    await session.feed_run('1')
                count += 1
            samples[side].append(count / (time.perf_counter() - start))
    return samples


async def run(params: Params) -> str:
    lines = ['| figure | with packages | plain / CPython | ratio |', '| --- | --- | --- | --- |']
    async with corral.Pool(packages=PACKAGES) as packages, corral.Pool() as plain:
        await packages.start()
        await plain.start()
        _progress('1: first answer')
        answer = await first_answer(packages, params)
        sandbox, python, kept = (statistics.median(answer[side]) for side in ('sandbox', 'python', 'kept'))
        lines.append(f"| 1. checkout + first feed (import pandas, group 10,000 rows) vs `python -c` | {_cell(answer['sandbox'], 'ms', 1000)} | {_cell(answer['python'], 'ms', 1000)} | {python / sandbox:.1f}x faster |")
        lines.append(f"| 1. the same script in a kept session vs `python -c` | {_cell(answer['kept'], 'ms', 1000)} | {_cell(answer['python'], 'ms', 1000)} | {python / kept:.1f}x faster |")
        _progress('3: idle worker memory')
        memory = await idle_memory({'packages': packages, 'plain': plain})
        (uss_p, rss_p), (uss_0, rss_0) = memory['packages'], memory['plain']
        lines.append(f'| 3. idle warm worker USS | {uss_p:.1f} MiB | {uss_0:.1f} MiB | {uss_p / uss_0:.2f}x |')
        lines.append(f'| 3. idle warm worker RSS | {rss_p:.1f} MiB | {rss_0:.1f} MiB | {rss_p / rss_0:.2f}x |')
        _progress('4: checkouts per second')
        rate = await checkout_rate({'packages': packages, 'plain': plain}, params)
        ratio = statistics.median(rate['packages']) / statistics.median(rate['plain'])
        lines.append(f"| 4. checkouts per second (checkout, feed `1`, close) | {_cell(rate['packages'], '/s')} | {_cell(rate['plain'], '/s')} | {ratio:.2f}x |")
    _progress('2: zygote start')
    start = await zygote_start(params)
    lines.append(f"| 2. zygote start (`Pool.start()`) | {_cell(start['packages'], 's')} | {_cell(start['plain'], 's')} | {statistics.median(start['packages']) / statistics.median(start['plain']):.1f}x |")
    lines.append('')
    lines.append(f'n = {params.repeats} for figure 1; the plain column of figure 1 is CPython in a fresh process.')
    if memory_note():
        lines.append(f'Figure 3: {memory_note()}.')
    return '\n'.join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true', help='fewer repetitions (under a minute)')
    args = parser.parse_args()
    print(asyncio.run(run(Params.quick() if args.quick else Params())))


if __name__ == '__main__':
    main()
