#!/usr/bin/env python
"""`AsyncMontyWebsocket` against `corral serve`'s /monty-ws/, and the same client's local pool of the
real `monty` binary (`AsyncMonty`): what the network door costs a caller.

    python bench/monty_ws.py              # about a minute
    python bench/monty_ws.py --quick      # seconds

`corral serve` runs from this checkout's source on a loopback port with a store in a temporary
folder. After a warm-up the repetitions alternate between the two, reversing the order every other
time; each cell is the median, in milliseconds, with corral's time over monty's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pydantic_monty
from monty_door import SOURCE, monty_binary


async def trivial(pool: Any) -> float:
    async with pool.checkout() as session:
        await session.feed_run('0')
        started = time.perf_counter()
        await session.feed_run('1 + 1')
        return time.perf_counter() - started


async def host_call(pool: Any) -> float:
    async with pool.checkout() as session:
        await session.feed_run('0')
        started = time.perf_counter()
        await session.feed_run('f(1)', external_lookup={'f': lambda x: x})
        return time.perf_counter() - started


async def checkout_and_feed(pool: Any) -> float:
    started = time.perf_counter()
    async with pool.checkout() as session:
        await session.feed_run('1 + 1')
    return time.perf_counter() - started


FIGURES: dict[str, Callable[[Any], Awaitable[float]]] = {
    'trivial feed (1 + 1)': trivial,
    'host call round trip (f(1))': host_call,
    'checkout + feed + close': checkout_and_feed,
}


def serve(folder: str) -> tuple[subprocess.Popen[bytes], int]:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    env = {**os.environ, 'PYTHONPATH': str(SOURCE)}
    command = [sys.executable, '-m', 'corral', 'serve', '--port', str(port), '--store', f'sqlite:///{folder}/store.db']
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        with socket.socket() as sock:
            if sock.connect_ex(('127.0.0.1', port)) == 0:
                return process, port
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit('corral serve did not start')
        time.sleep(0.05)


async def run(repeat: int, port: int) -> None:
    pools = {
        'monty': pydantic_monty.AsyncMonty(binary_path=monty_binary(), min_processes=1, max_processes=1),
        'corral serve': pydantic_monty.AsyncMontyWebsocket(f'ws://127.0.0.1:{port}/monty-ws/', max_processes=1),
    }
    for pool in pools.values():
        await pool.__aenter__()
    try:
        print('| figure | AsyncMonty + monty (ms) | AsyncMontyWebsocket + corral serve (ms) | corral / monty |')
        print('| --- | ---: | ---: | ---: |')
        for label, figure in FIGURES.items():
            times: dict[str, list[float]] = {name: [] for name in pools}
            for pool in pools.values():
                await figure(pool)  # warm-up
            for index in range(repeat):
                for name in list(pools) if index % 2 == 0 else list(reversed(pools)):
                    times[name].append(await figure(pools[name]))
            monty, corral = (statistics.median(times[name]) * 1000 for name in pools)
            print(f'| {label} | {monty:.2f} | {corral:.2f} | {corral / monty:.2f} |', flush=True)
    finally:
        for pool in pools.values():
            await pool.__aexit__(None, None, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true')
    parser.add_argument('--repeat', type=int, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        process, port = serve(folder)
        try:
            asyncio.run(run(args.repeat or (3 if args.quick else 15), port))
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(30)


if __name__ == '__main__':
    main()
