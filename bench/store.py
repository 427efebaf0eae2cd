#!/usr/bin/env python
"""Latency of the session stores: put and get of a 10 KB and a 10 MB state, an append of a 10 KB
record to the 10 MB state (what a stored feed writes), and a lease's acquire and release, on the SQLite store (a file in a temporary directory) and the PostgreSQL store (a
server this script starts on loopback, as the tests do, or `--postgres URL`).

    python bench/store.py            # 200 repetitions of the small operations, 20 of the 10 MB ones
    python bench/store.py --quick    # a few seconds
    python bench/store.py --postgres postgresql://user:pw@host/db --json results.json

Both stores commit durably (SQLite with synchronous=FULL, PostgreSQL with its default fsync), so the
figures include a flush to disk per write. States are random bytes, which nothing can compress.
Repetitions alternate between the stores. Each cell is the median (min–max); the last column is the
ratio of medians, PostgreSQL / SQLite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import corral

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.store.postgres_server import PostgresServer  # noqa: E402

SIZES = {'10 KB': 10 * 1024, '10 MB': 10 * 1024 * 1024}


async def measure(stores: dict[str, corral.Store], repetitions: dict[str, int]) -> dict[str, dict[str, list[float]]]:
    """Seconds per call: {operation: {store name: [samples]}}."""
    samples: dict[str, dict[str, list[float]]] = {}

    async def sample(operation: str, name: str, call: Callable[[], Awaitable[object]]) -> None:
        start = time.perf_counter()
        await call()
        samples.setdefault(operation, {}).setdefault(name, []).append(time.perf_counter() - start)

    generations: dict[tuple[str, str], int] = {}

    def write(name: str, store: corral.Store, session_id: str, data: bytes, *, append: bool = False) -> Awaitable[None]:
        generation = generations[name, session_id] = generations.get((name, session_id), 0) + 1
        if append:
            return store.append(session_id, data, holder='bench', generation=generation)
        return store.put(session_id, data, holder='bench', generation=generation)

    for label, size in SIZES.items():
        state = os.urandom(size)
        session_id = 'bench-' + label.replace(' ', '')
        for name, store in stores.items():  # warm up: connections open, tables made, the row exists
            await write(name, store, session_id, state)
            await store.get(session_id)
        for repetition in range(repetitions[label]):
            order = list(stores.items())
            if repetition % 2:
                order.reverse()
            for name, store in order:
                await sample(f'put {label}', name, lambda: write(name, store, session_id, state))
                await sample(f'get {label}', name, lambda: store.get(session_id))
    record = os.urandom(SIZES['10 KB'])
    for repetition in range(repetitions['10 KB']):
        for name, store in stores.items():
            await sample('append 10 KB to 10 MB', name, lambda: write(name, store, 'bench-10MB', record, append=True))
    for repetition in range(repetitions['10 KB']):
        for name, store in stores.items():
            await sample('acquire + release', name, lambda: _lease(store))
    return samples


async def _lease(store: corral.Store) -> None:
    await store.acquire('bench-lease', holder='bench', ttl=30)
    await store.release('bench-lease', holder='bench')


def _format(seconds: float) -> str:
    if seconds >= 1:
        return f'{seconds:.2f} s'
    if seconds >= 1e-3:
        return f'{seconds * 1e3:.3g} ms'
    return f'{seconds * 1e6:.3g} µs'


def render(samples: dict[str, dict[str, list[float]]]) -> str:
    names = ['sqlite', 'postgres']
    lines = ['| operation | ' + ' | '.join(names) + ' | ratio (postgres/sqlite) |', '|---|' + '---|' * (len(names) + 1)]
    for operation, by_store in samples.items():
        cells = []
        for name in names:
            values = by_store[name]
            cells.append(f'{_format(statistics.median(values))} ({_format(min(values))}–{_format(max(values))})')
        ratio = statistics.median(by_store['postgres']) / statistics.median(by_store['sqlite'])
        lines.append(f'| {operation} | ' + ' | '.join(cells) + f' | {ratio:.2f}× |')
    n = ', '.join(f'{op}: n={len(v["sqlite"])}' for op, v in samples.items())
    return '\n'.join(lines) + f'\n\nRepetitions: {n}.'


async def run(args: argparse.Namespace) -> dict[str, dict[str, list[float]]]:
    repetitions = {'10 KB': 20, '10 MB': 3} if args.quick else {'10 KB': 200, '10 MB': 20}
    server = None
    if args.postgres is None:
        server = PostgresServer()
        server.start()
    try:
        with tempfile.TemporaryDirectory(prefix='corral-bench-store-') as directory:
            stores: dict[str, corral.Store] = {
                'sqlite': corral.open_store(f'sqlite://{directory}/sessions.db'),
                'postgres': corral.open_store(args.postgres or server.url),
            }
            try:
                return await measure(stores, repetitions)
            finally:
                for store in stores.values():
                    await store.close()
    finally:
        if server is not None:
            server.remove()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true', help='few repetitions: a few seconds')
    parser.add_argument('--postgres', metavar='URL', help='an existing PostgreSQL database instead of a server of our own')
    parser.add_argument('--json', metavar='FILE', help='write the raw samples (seconds) here')
    args = parser.parse_args(argv)
    samples = asyncio.run(run(args))
    print(render(samples))
    if args.json:
        Path(args.json).write_text(json.dumps(samples, indent=1))


if __name__ == '__main__':
    main()
