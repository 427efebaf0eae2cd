#!/usr/bin/env python
"""`corral-monty` against the real `monty` binary, through the same client: pydantic_monty's pool.

    python bench/monty_door.py            # a few minutes
    python bench/monty_door.py --quick    # under a minute

Both pools are alive at once (`pydantic_monty.Monty(binary_path=...)`, one worker each); after a
warm-up the repetitions alternate between them, reversing the order every other time, and each
cell is the median over the repetitions, in milliseconds, with corral's time over monty's.
`corral-monty` runs from this checkout's source (`python -m corral.monty`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import stat
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pydantic_monty

SOURCE = Path(__file__).resolve().parents[1] / 'src'

FIB = 'def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\nfib({n})'
LOOP = 'total = 0\nfor i in range({n}):\n    total += i\ntotal'
CHECKED = 'def area(w: int, h: int) -> int:\n    return w * h\narea(3, 4)'
WALK = "import os\nsum(len(files) for _, _, files in os.walk('/data'))"


class Adder:
    """The host object of the method call figure."""

    def add(self, x: int) -> int:
        return x + 1


def corral_binary(folder: Path) -> Path:
    """An executable running this checkout's `corral-monty` with this Python."""
    path = folder / 'corral-monty'
    path.write_text(f'#!/bin/sh\nPYTHONPATH={SOURCE} exec {sys.executable} -m corral.monty "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def monty_binary() -> Path:
    found = shutil.which('monty', path=os.path.dirname(sys.executable)) or shutil.which('monty')
    if found is None:
        raise SystemExit('the monty binary (pydantic-monty-runtime) is not installed')
    return Path(found)


def figures(quick: bool, tree: Path) -> dict[str, Callable[[pydantic_monty.Monty], Any]]:
    """Each figure: one timed run against a pool (it checks out what it needs); `tree`, a folder
    of 10 folders of 10 files each, is mounted read-only at /data for the walk."""
    fib_n, loop_n = (20, 100_000) if quick else (25, 1_000_000)
    mount = pydantic_monty.MountDir(host_path=tree, virtual_path='/data', mode='read-only')

    def in_session(code: str, feed: dict[str, Any] | None = None, **checkout: Any) -> Callable[[pydantic_monty.Monty], Any]:
        def run(pool: pydantic_monty.Monty) -> float:
            with pool.checkout(**checkout) as session:
                session.feed_run('0', skip_type_check=True)  # the session is up
                started = time.perf_counter()
                session.feed_run(code, external_lookup={'f': lambda x: x}, **(feed or {}))
                return time.perf_counter() - started

        return run

    def warm(code: str, inputs: dict[str, Any] | None = None) -> Callable[[pydantic_monty.Monty], Any]:
        def run(pool: pydantic_monty.Monty) -> float:  # the door's own cost, past a fresh worker's first touches
            with pool.checkout() as session:
                if inputs:  # bound once, for each timed feed to use
                    session.feed_run('0', inputs=inputs)
                times = []
                for _ in range(50):
                    started = time.perf_counter()
                    session.feed_run(code, external_lookup={'f': lambda x: x})
                    times.append(time.perf_counter() - started)
                return statistics.median(times[10:])

        return run

    def checkout_and_feed(pool: pydantic_monty.Monty) -> float:
        started = time.perf_counter()
        with pool.checkout() as session:
            session.feed_run('1 + 1')
        return time.perf_counter() - started

    return {
        'trivial feed (1 + 1)': in_session('1 + 1'),
        'host call round trip (f(1))': in_session('f(1)'),
        'trivial feed, warm session (median of 40)': warm('1 + 1'),
        'host call round trip, warm session (median of 40)': warm('f(1)'),
        'host object method call, warm session (median of 40)': warm('t.add(1)', {'t': pydantic_monty.ClassInstance(Adder(), allowed_methods={'add'})}),
        'checkout + feed + reset': checkout_and_feed,
        f'fib({fib_n})': in_session(FIB.format(n=fib_n)),
        f'{loop_n:,}-step loop': in_session(LOOP.format(n=loop_n)),
        'feed with type check': in_session(CHECKED, type_check=True),
        'same feed, unchecked': in_session(CHECKED),
        'os.walk of a mount (11 folders, 100 files)': in_session(WALK, feed={'mount': mount}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true')
    parser.add_argument('--repeat', type=int, default=None)
    args = parser.parse_args()
    repeat = args.repeat or (3 if args.quick else 9)
    with tempfile.TemporaryDirectory() as folder:
        tree = Path(folder) / 'tree'
        for index in range(100):
            (tree / f'd{index // 10}').mkdir(parents=True, exist_ok=True)
            (tree / f'd{index // 10}' / f'f{index}.txt').write_text('x')
        binaries = {'monty': monty_binary(), 'corral-monty': corral_binary(Path(folder))}
        pools = {name: pydantic_monty.Monty(binary_path=path, min_processes=1, max_processes=1) for name, path in binaries.items()}
        for pool in pools.values():
            pool.__enter__()
        try:
            print('| figure | monty (ms) | corral-monty (ms) | corral / monty |')
            print('| --- | ---: | ---: | ---: |')
            for label, figure in figures(args.quick, tree).items():
                times: dict[str, list[float]] = {name: [] for name in pools}
                for name, pool in pools.items():
                    figure(pool)  # warm-up
                for index in range(repeat):
                    order = list(pools) if index % 2 == 0 else list(reversed(pools))
                    for name in order:
                        times[name].append(figure(pools[name]))
                monty, corral = (statistics.median(times[name]) * 1000 for name in ('monty', 'corral-monty'))
                print(f'| {label} | {monty:.2f} | {corral:.2f} | {corral / monty:.2f} |', flush=True)
        finally:
            for pool in pools.values():
                pool.__exit__(None, None, None)


if __name__ == '__main__':
    main()
