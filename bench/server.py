#!/usr/bin/env python
"""`corral serve` under load, side by side with a local `Pool` and pydantic-monty's local pool.

    python bench/server.py            # 3 rounds, alternating the sides, 20 and 100 clients
    python bench/server.py --quick    # 1 round, 20 clients
    python bench/server.py --baseline ../other/src    # also a `corral serve` of another checkout, alternated
    python bench/server.py --batches 10 --baseline ../other/src    # only batches in turn (5), on warm sessions

The bench starts real `corral serve` processes on loopback (`--servers`, default 1; clients are
spread over them), each with an SQLite store of its own, and measures, for each side:

1. load: 20, then 100 concurrent clients (`--clients`), each checking out a session and running a realistic script three
   times (10 host calls gathered with `asyncio.gather`, each taking `--call-ms` of host time, then
   a filter and a sum over their results), then closing it: feeds per second over the whole run,
   and the latency of each feed and of each checkout (p50, p99);
2. one client alone: the same script fed 20 times to one session (p50 of a feed);
3. one client alone: a trivial feed (`1 + 1`) 50 times (p50);
4. one client alone: one feed of 200 host calls awaited one after another, each answering at once
   (the time per host call);
5. with `--batches N` (instead of 1-4): one warm session on each side, taking in turn, N times, a
   batch of 150 trivial feeds and a feed of 150 host calls in a row: the median per feed and per
   call, wall and host-side CPU, and the server's addition to each (min–max over the rounds'
   differences to the local Pool's batch of the same round).

For 3 and 4 it also counts the host side's CPU (this process's, and the server's; not the
workers', which both sides run alike): on a busy machine the wall times swing with how soon each
process is scheduled, and the server's chain has two processes to wake where a local Pool has one.

Through the server, each host call travels to the client over the session's WebSocket and its
answer back (calls gathered together travel in one frame); locally, it is a function call in
the host process. The added latency of the server is the server side minus the local `Pool`
side: per feed (2, 3), and per host call (4); its throughput is its feeds per second over the local
`Pool`'s (1). Cells are median (min–max) over the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import corral

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import _percentile, median_cell  # noqa: E402  (the benchmarks' shared measurements)

try:
    from pydantic_monty import AsyncMonty
except ImportError:  # benchmark-only dependency: `pip install -e '.[bench]'`
    AsyncMonty = None

SCRIPT = """\
import asyncio
orders = await asyncio.gather(*[get_order(f'o{K}-{i}') for i in range(10)])
shipped = [o['id'] for o in orders if o['status'] == 'shipped']
{'client': {K}, 'items': sum(o['items'] for o in orders), 'shipped': len(shipped)}"""

SEQUENTIAL = """\
total = 0
for i in range({N}):
    total += await ping(i)
total"""


def script(client: int) -> str:
    return SCRIPT.replace('{K}', str(client))


def expected(client: int) -> dict[str, int]:
    ids = [f'o{client}-{i}' for i in range(10)]
    return {'client': client, 'items': sum(len(i) for i in ids), 'shipped': sum(1 for i in ids if len(i) % 2)}


def tools(call_seconds: float) -> dict[str, Callable[..., Any]]:
    async def get_order(order_id: str) -> dict[str, Any]:
        await asyncio.sleep(call_seconds)
        return {'id': order_id, 'status': 'shipped' if len(order_id) % 2 else 'open', 'items': len(order_id)}

    async def ping(i: int) -> int:
        return i

    return {'get_order': get_order, 'ping': ping}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def corral_serve(folder: str, source: str | None = None) -> Any:
    """A `corral serve` process on a free loopback port (of the corral in folder `source`, default
    this one): its ws:// URL, until the block ends."""
    port = free_port()
    env = {**os.environ, 'PYTHONPATH': source} if source else None
    log = open(os.path.join(folder, f'serve-{port}.log'), 'wb')
    store = f'sqlite:///{folder}/store-{port}.db'
    # the server's one tenant may hold a session for each client of the load (its default quota is 20)
    subprocess.run([sys.executable, '-m', 'corral', 'tenants', 'set', '', '--concurrent-sessions', '1000', '--store', store], check=True, stdout=subprocess.DEVNULL, env=env)
    command = [sys.executable, '-m', 'corral', 'serve', '--port', str(port), '--store', store]
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                log.flush()
                raise RuntimeError(f'corral serve exited with {process.returncode}: {open(log.name).read()}')
            with socket.socket() as sock:
                if sock.connect_ex(('127.0.0.1', port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError('corral serve did not listen within 60 s')
            time.sleep(0.05)
        url = f'ws://127.0.0.1:{port}'
        SERVER_PIDS[url] = process.pid
        yield url
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


#: The process id of each `corral serve` by its URL: its CPU counts as the host side's (`Side.cpu`).
SERVER_PIDS: dict[str, int] = {}


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) process `pid` has used, from /proc (Linux)."""
    with open(f'/proc/{pid}/stat') as file:
        fields = file.read().rpartition(')')[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


class Side:
    """Pools of one kind: `pools` to spread the clients over."""

    name: str
    pools: list[Any]
    pids: list[int] = []

    def cpu(self) -> float:
        """CPU seconds of the host side: this process's, and each server's (the workers' are not counted)."""
        return time.process_time() + sum(process_cpu(pid) for pid in self.pids)

    async def stop(self) -> None:
        for pool in self.pools:
            await pool.aclose()


class LocalSide(Side):
    name = 'local Pool'

    def __init__(self) -> None:
        self.pools = [corral.Pool()]


class ServerSide(Side):
    name = 'corral serve'

    def __init__(self, urls: list[str], name: str = 'corral serve') -> None:
        self.name = name
        self.pools = [corral.RemotePool(url) for url in urls]
        self.pids = [SERVER_PIDS[url] for url in urls if url in SERVER_PIDS]


class MontySide(Side):
    name = 'monty'

    def __init__(self) -> None:
        self.pools = [AsyncMonty()]

    async def start(self) -> None:
        await self.pools[0].__aenter__()

    async def stop(self) -> None:
        await self.pools[0].__aexit__(None, None, None)


async def load(side: Side, clients: int, feeds: int, lookup: dict[str, Callable[..., Any]]) -> dict[str, float]:
    """`clients` concurrent clients, each: check out, `feeds` feeds of the script, close."""
    feed_latencies: list[float] = []
    checkout_latencies: list[float] = []

    async def client(k: int) -> None:
        pool = side.pools[k % len(side.pools)]
        before = time.perf_counter()
        async with pool.checkout() as session:
            checkout_latencies.append(time.perf_counter() - before)
            for _ in range(feeds):
                before = time.perf_counter()
                value = await session.feed_run(script(k), external_lookup=lookup)
                feed_latencies.append(time.perf_counter() - before)
                if value != expected(k):
                    raise AssertionError(f'client {k} got {value!r}')

    started = time.perf_counter()
    await asyncio.gather(*(client(k) for k in range(clients)))
    wall = time.perf_counter() - started
    return {
        'feeds/s': clients * feeds / wall,
        'feed p50': _percentile(feed_latencies, 0.5),
        'feed p99': _percentile(feed_latencies, 0.99),
        'checkout p50': _percentile(checkout_latencies, 0.5),
        'checkout p99': _percentile(checkout_latencies, 0.99),
    }


async def alone(side: Side, lookup: dict[str, Callable[..., Any]], feeds: int = 20, trivial: int = 50, calls: int = 200) -> dict[str, float]:
    """One client: `feeds` feeds of the script on one session (p50), `trivial` feeds of `1 + 1`
    (p50), and one feed of `calls` host calls in a row."""
    latencies = []
    trivial_latencies = []
    async with side.pools[0].checkout() as session:
        for _ in range(feeds):
            before = time.perf_counter()
            if await session.feed_run(script(0), external_lookup=lookup) != expected(0):
                raise AssertionError('wrong result')
            latencies.append(time.perf_counter() - before)
        cpu = side.cpu()
        for _ in range(trivial):
            before = time.perf_counter()
            if await session.feed_run('1 + 1') != 2:
                raise AssertionError('wrong result')
            trivial_latencies.append(time.perf_counter() - before)
        trivial_cpu = (side.cpu() - cpu) / trivial
        before, cpu = time.perf_counter(), side.cpu()
        total = await session.feed_run(SEQUENTIAL.replace('{N}', str(calls)), external_lookup=lookup)
        per_call = (time.perf_counter() - before) / calls
        call_cpu = (side.cpu() - cpu) / calls
        if total != sum(range(calls)):
            raise AssertionError('wrong sum')
    return {
        'alone feed p50': _percentile(latencies, 0.5),
        'trivial feed p50': _percentile(trivial_latencies, 0.5),
        'trivial feed cpu': trivial_cpu,
        'per host call': per_call,
        'per host call cpu': call_cpu,
    }


async def measure(side: Side, clients: int | tuple[int, ...], feeds: int, call_seconds: float) -> dict[str, float]:
    """The measures of `side`: the load's (1) keyed `'<measure> @<clients>'` for each count of
    `clients`, and one client's alone (2-4)."""
    lookup = tools(call_seconds)
    # warm up: the zygote (or the server's) and the type checker start, the first workers fork
    async with side.pools[0].checkout() as session:
        await session.feed_run(script(0), external_lookup=lookup)
    result = {}
    for count in (clients,) if isinstance(clients, int) else clients:
        result.update({f'{key} @{count}': value for key, value in (await load(side, count, feeds, lookup)).items()})
        await asyncio.sleep(0.5)  # the pools refill their warm workers
    result.update(await alone(side, lookup))
    return result


BATCH = 150


async def batches(sides: list[Side], rounds: int) -> str:
    """`rounds` times, on each side's warm session in turn: `BATCH` trivial feeds, and one feed of
    `BATCH` host calls in a row (see 5 in the module's text); the report's table."""
    lookup = tools(0.0)
    sessions = []
    for side in sides:
        session = await side.pools[0].checkout().__aenter__()
        await session.feed_run(SEQUENTIAL.replace('{N}', str(BATCH)), external_lookup=lookup)
        sessions.append(session)
    taken: dict[str, dict[str, list[float]]] = {side.name: {'feed': [], 'feed cpu': [], 'call': [], 'call cpu': []} for side in sides}
    try:
        for index in range(rounds):
            order = list(zip(sides, sessions))
            for side, session in order[index % len(order):] + order[:index % len(order)]:
                before, cpu = time.perf_counter(), side.cpu()
                for _ in range(BATCH):
                    if await session.feed_run('1 + 1') != 2:
                        raise AssertionError('wrong result')
                taken[side.name]['feed'].append((time.perf_counter() - before) / BATCH)
                taken[side.name]['feed cpu'].append((side.cpu() - cpu) / BATCH)
                before, cpu = time.perf_counter(), side.cpu()
                if await session.feed_run(SEQUENTIAL.replace('{N}', str(BATCH)), external_lookup=lookup) != sum(range(BATCH)):
                    raise AssertionError('wrong sum')
                taken[side.name]['call'].append((time.perf_counter() - before) / BATCH)
                taken[side.name]['call cpu'].append((side.cpu() - cpu) / BATCH)
    finally:
        for session in sessions:
            await session.__aexit__(None, None, None)
    local = taken['local Pool']
    lines = [
        f'{rounds} rounds in turn of {BATCH} trivial feeds and of a feed of {BATCH} host calls in a row, one warm session each; '
        'median (min–max) per feed and per call; added: median (min–max) of each round\'s difference to the local Pool\'s',
        '',
        '| side | trivial feed | host CPU per feed | added per feed | host call | host CPU per call | added per call |',
        '|---|---|---|---|---|---|---|',
    ]
    for side in sides:
        mine = taken[side.name]
        added = {key: [a - b for a, b in zip(mine[key], local[key])] for key in ('feed', 'call')}
        lines.append(
            f'| {side.name} | {median_cell([v * 1e6 for v in mine["feed"]], "µs")} | {median_cell([v * 1e6 for v in mine["feed cpu"]], "µs")} '
            f'| {median_cell([v * 1e6 for v in added["feed"]], "µs") if side.name != "local Pool" else "—"} '
            f'| {median_cell([v * 1e6 for v in mine["call"]], "µs")} | {median_cell([v * 1e6 for v in mine["call cpu"]], "µs")} '
            f'| {median_cell([v * 1e6 for v in added["call"]], "µs") if side.name != "local Pool" else "—"} |'
        )
    return '\n'.join(lines)


LOAD_ROWS = (
    ('feeds/s', 'feeds per second — higher is better', '/s', 1),
    ('feed p50', 'feed latency p50', 'ms', 1000),
    ('feed p99', 'feed latency p99', 'ms', 1000),
    ('checkout p50', 'checkout latency p50', 'ms', 1000),
    ('checkout p99', 'checkout latency p99', 'ms', 1000),
)
ALONE_ROWS = (
    ('alone feed p50', 'one client: feed latency p50', 'ms', 1000),
    ('trivial feed p50', 'one client: trivial feed (`1 + 1`) p50', 'ms', 1000),
    ('trivial feed cpu', 'one client: host-side CPU per trivial feed (server + client)', 'µs', 1e6),
    ('per host call', 'one client: per host call (200 in a row)', 'µs', 1e6),
    ('per host call cpu', 'one client: host-side CPU per host call (server + client)', 'µs', 1e6),
)


def rows(clients: tuple[int, ...]) -> list[tuple[str, str, str, float]]:
    """The report's rows: each load measure for each count of clients, then one client's."""
    return [(f'{key} @{count}', f'{count} clients: {label}', unit, scale) for count in clients for key, label, unit, scale in LOAD_ROWS] + list(ALONE_ROWS)


def median_of(results: list[dict[str, float]], key: str) -> float | None:
    return statistics.median(r[key] for r in results) if results else None


def report(results: dict[str, list[dict[str, float]]], clients: tuple[int, ...], servers: int, call_ms: float, side: str = 'corral serve') -> str:
    server, local, monty = results[side], results['local Pool'], results['monty']
    lines = [
        f'{" and ".join(map(str, clients))} concurrent clients × 3 feeds of a script with 10 gathered host calls ({call_ms:g} ms each), '
        f'{servers} `{side}` process(es) on loopback',
        '',
        f'| measure | {side} | local Pool | monty (local) | serve / local | serve / monty |',
        '|---|---|---|---|---|---|',
    ]
    for key, label, unit, scale in rows(clients):
        s, l, m = median_of(server, key), median_of(local, key), median_of(monty, key)
        lines.append(
            f'| {label} | {median_cell([r[key] * scale for r in server], unit)} | {median_cell([r[key] * scale for r in local], unit)} '
            f'| {median_cell([r[key] * scale for r in monty], unit)} | {f"{s / l:.2f}×" if s and l else "—"} | {f"{s / m:.2f}×" if s and m else "—"} |'
        )
    added = {key: median_of(server, key) - median_of(local, key) for key in ('alone feed p50', 'trivial feed p50', 'trivial feed cpu', 'per host call', 'per host call cpu')}
    throughput = ', '.join(f'{median_of(server, f"feeds/s @{count}") / median_of(local, f"feeds/s @{count}"):.2f}× with {count} clients' for count in clients)
    lines += [
        '',
        f'Added by the server (targets: 100 µs per host call, 0.5 ms per trivial feed; 0.8× the feeds per second): '
        f'{added["per host call"] * 1e6:.0f} µs per host call made in a row ({added["per host call cpu"] * 1e6:.0f} µs of CPU), '
        f'{added["trivial feed p50"] * 1000:.2f} ms per trivial feed ({added["trivial feed cpu"] * 1e6:.0f} µs of CPU), '
        f'{added["alone feed p50"] * 1000:.2f} ms per feed of the script, one client alone; feeds per second {throughput} of the local Pool\'s.',
    ]
    return '\n'.join(lines)


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true', help='1 round, 20 clients')
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--clients', default='20,100', help='counts of concurrent clients, comma-separated (default 20,100)')
    parser.add_argument('--servers', type=int, default=1, help='corral serve processes (default 1)')
    parser.add_argument('--call-ms', type=float, default=1.0, help='host time of each gathered call, ms (default 1)')
    parser.add_argument('--baseline', metavar='SRC', help="also measure `corral serve` of the corral in folder SRC (another checkout's src), alternated with this one's")
    parser.add_argument('--batches', type=int, metavar='N', help='only N rounds of batches in turn (5 in the text), no load')
    args = parser.parse_args(argv)
    rounds, clients = (1, (20,)) if args.quick else (args.rounds, tuple(int(count) for count in args.clients.split(',')))
    results: dict[str, list[dict[str, float]]] = {'corral serve': [], 'local Pool': [], 'monty': [], 'baseline serve': []}
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as servers:
        urls = [servers.enter_context(corral_serve(folder)) for _ in range(args.servers)]
        baseline = [servers.enter_context(corral_serve(folder, args.baseline)) for _ in range(args.servers)] if args.baseline else []
        if args.batches:
            sides = [LocalSide(), ServerSide(urls), *([ServerSide(baseline, 'baseline serve')] if baseline else [])]
            try:
                print(await batches(sides, args.batches))
            finally:
                for side in sides:
                    await side.stop()
            return
        for index in range(rounds):
            makers: list[Callable[[], Side]] = [lambda: ServerSide(urls), LocalSide]
            if baseline:
                makers.insert(1 if index % 2 else 0, lambda: ServerSide(baseline, 'baseline serve'))
            if AsyncMonty is not None:
                makers.append(MontySide)
            for make in makers:
                side = make()
                print(f'round {index + 1}/{rounds}: {side.name}', file=sys.stderr)
                if isinstance(side, MontySide):
                    await side.start()
                try:
                    results[side.name].append(await measure(side, clients, 3, args.call_ms / 1000))
                finally:
                    await side.stop()
    print(report(results, clients, args.servers, args.call_ms))
    if baseline:
        print(f'\nThe baseline, {args.baseline}:\n')
        print(report(results, clients, args.servers, args.call_ms, 'baseline serve'))


if __name__ == '__main__':
    asyncio.run(main())
