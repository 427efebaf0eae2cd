#!/usr/bin/env python
"""Stored sessions, side by side with pydantic-monty: dump and load, replay, stored feeds.

    python bench/sessions.py            # 1, 10 and 50 feeds, 5 repetitions each
    python bench/sessions.py --quick    # 1 and 10 feeds, 2 repetitions
    python bench/sessions.py --replay-only   # corral's dump, load and replays of 10 and 50 feeds alone
    python bench/sessions.py --postgres --checkouts-only   # checkouts by id and forks on PostgreSQL
    python bench/sessions.py --in-a-row-only   # checkouts in a row (back to back, 50 ms apart) and the trivial feed

Prints a Markdown table of medians (min–max) and the ratios corral / monty:

- dump and load_session of a session of 1, 10 and 50 feeds of an agent-like script (five host
  calls gathered, a loop over their results, a class), time and size: corral's load of a state
  its pool made (the dumped session's live checkpoint), and of the same state once more, which
  replays its journal;
- `checkout(session_id=...)` and `checkout(session_id=..., fork=True)` of a stored session of 10
  and 50 feeds, just closed: from its live checkpoint, and replayed (a pool that keeps none); on
  SQLite (a file in a temporary directory), or with `--postgres` on a PostgreSQL server this
  script starts on loopback as the tests do (`--postgres URL`: that server's);
- what a load costs against what the feeds cost when they ran: wall time (the host calls took
  a millisecond each; a replay answers them from the record) and CPU time (host process plus
  worker, from /proc/<pid>/schedstat);
- a feed of a stored session (written to the store after every feed) against an ephemeral one,
  late in sessions of 10, 50 and 500 feeds (`--stored-only` measures this alone);
- 50 checkouts in a row, each running `1 + 1` and closing, back to back and with 50 ms between
  them (as an agent calls its tool), and a trivial feed (`1 + 1`) on a session.

corral's state is a journal replayed in a fresh worker; monty's is a copy of its heap. So corral's
load grows with the work the feeds did, monty's with the size of what they left behind.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import corral
from corral.host.compiled import COMPILED_FEEDS

try:
    from pydantic_monty import AsyncMonty
except ImportError:  # benchmark-only dependency: `pip install -e '.[bench]'`
    AsyncMonty = None

KEY = b'bench-state-key-0123456789abcdef'

FEED = """
import asyncio
orders = await asyncio.gather(*[get_order(f'o{I}-{k}') for k in range(5)])
class Summary:
    def __init__(self, items):
        self.items = items
    def total(self):
        return sum(o['items'] for o in self.items)
s{I} = Summary(orders)
shipped{I} = [o['id'] for o in orders if o['status'] == 'shipped']
report = {'feed': {I}, 'total': s{I}.total(), 'shipped': len(shipped{I})}
report
"""


async def get_order(order_id: str) -> dict[str, Any]:
    await asyncio.sleep(0.001)  # a host call that takes a millisecond
    return {'id': order_id, 'status': 'shipped' if len(order_id) % 2 else 'open', 'items': len(order_id)}


TOOLS = {'get_order': get_order}


def feed(i: int) -> str:
    return FEED.replace('{I}', str(i))


def cpu_ns(pid: int) -> int:
    """Nanoseconds process `pid` has run on a CPU (the first field of /proc/<pid>/schedstat)."""
    with open(f'/proc/{pid}/schedstat') as f:
        return int(f.read().split()[0])


def host_cpu_ns() -> int:
    return time.process_time_ns()


async def corral_round(pool: corral.Pool, feeds: int) -> dict[str, float]:
    async with pool.checkout() as session:
        pid = session._worker.pid
        cpu0, host0, t0 = cpu_ns(pid), host_cpu_ns(), time.perf_counter()
        for i in range(feeds):
            await session.feed_run(feed(i), external_lookup=TOOLS)
        ran = time.perf_counter() - t0
        ran_cpu = cpu_ns(pid) - cpu0 + host_cpu_ns() - host0
        t0 = time.perf_counter()
        state = await session.dump()
        dumped = time.perf_counter() - t0
    async with pool.checkout() as loaded:  # the dumped session's worker, its checkpoint, takes over
        cpu0, host0, t0 = cpu_ns(pid), host_cpu_ns(), time.perf_counter()
        await loaded.load_session(state)
        load = time.perf_counter() - t0
        assert loaded._worker.pid == pid
        load_cpu = cpu_ns(pid) - cpu0 + host_cpu_ns() - host0
        assert (await loaded.feed_run('report'))['feed'] == feeds - 1
    COMPILED_FEEDS.clear()  # the first replay of these scripts on this host: it compiles them
    times = {}
    for name in ('replay', 'replay_kept'):
        async with pool.checkout() as replayed:  # the checkpoint was used once: this load replays
            pid = replayed._worker.pid
            cpu0, host0, t0 = cpu_ns(pid), host_cpu_ns(), time.perf_counter()
            await replayed.load_session(state)
            times[name] = time.perf_counter() - t0
            times[f'{name}_cpu'] = (cpu_ns(pid) - cpu0 + host_cpu_ns() - host0) / 1e9
            assert (await replayed.feed_run('report'))['feed'] == feeds - 1
    return {'dump': dumped, 'load': load, 'size': len(state), 'ran': ran, 'ran_cpu': ran_cpu / 1e9, 'load_cpu': load_cpu / 1e9, **times}


async def stored_round(pool: corral.Pool, cold: corral.Pool | None, feeds: int) -> dict[str, float]:
    """Seconds to enter `checkout(session_id=...)` and `fork=True` of a stored session of `feeds`
    feeds just closed: from its live checkpoint (`pool`), and replayed (`cold`, a pool on the same
    store that keeps no checkpoints; None: not measured)."""
    async with pool.checkout(ephemeral=False) as session:
        for i in range(feeds):
            await session.feed_run(feed(i), external_lookup=TOOLS)
        session_id = session.session_id
    times = {}
    chosen_pools = (('resume', pool, False), ('fork', pool, True), ('resume_replay', cold, False), ('fork_replay', cold, True))
    for name, chosen, fork in chosen_pools[:2] if cold is None else chosen_pools:
        t0 = time.perf_counter()
        async with chosen.checkout(session_id=session_id, fork=fork) as loaded:
            times[name] = time.perf_counter() - t0
            assert (await loaded.feed_run('report'))['feed'] == feeds - 1
    return times


async def checkouts(pool: Any, count: int = 50, gap: float = 0.0) -> float:
    """Seconds per checkout of `count` in a row, each running `1 + 1` and closing, `gap` seconds
    apart (the gaps not counted)."""
    spent = 0.0
    for _ in range(count):
        if gap:
            await asyncio.sleep(gap)
        t0 = time.perf_counter()
        async with pool.checkout() as session:
            assert await session.feed_run('1 + 1') == 2
        spent += time.perf_counter() - t0
    return spent / count


async def trivial_feed(pool: Any, count: int = 200) -> float:
    """Seconds per `1 + 1` fed to one session, the median of `count`."""
    async with pool.checkout() as session:
        await session.feed_run('1 + 1')
        times = []
        for _ in range(count):
            t0 = time.perf_counter()
            await session.feed_run('1 + 1')
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


async def monty_round(pool: Any, feeds: int) -> dict[str, float]:
    async with pool.checkout() as session:
        t0 = time.perf_counter()
        for i in range(feeds):
            await session.feed_run(feed(i), external_lookup=TOOLS)
        ran = time.perf_counter() - t0
        t0 = time.perf_counter()
        state = await session.dump()
        dumped = time.perf_counter() - t0
    async with pool.checkout() as loaded:
        t0 = time.perf_counter()
        await loaded.load_session(state)
        load = time.perf_counter() - t0
        assert (await loaded.feed_run('report'))['feed'] == feeds - 1
    return {'dump': dumped, 'load': load, 'size': len(state), 'ran': ran}


async def stored_feed_cost(pool: corral.Pool, feeds: int) -> dict[str, float]:
    """What a late feed costs (the median of the last tenth of the feeds, at least 5) of a session
    `feeds` long: seconds ephemeral and stored, and of the stored one the bytes written to the
    store and the seconds spent writing them (a machine under load disturbs the seconds, never the bytes)."""
    times: dict[str, list[float]] = {'ephemeral': [], 'stored': []}
    written: list[int] = []
    writing: list[float] = []
    store = pool._get_store()
    tail = max(5, feeds // 10)

    def counted(method: Any) -> Any:
        async def write(session_id: str, data: bytes, **options: Any) -> None:
            t0 = time.perf_counter()
            await method(session_id, data, **options)
            writing[-1] += time.perf_counter() - t0
            written[-1] += len(data)

        return write

    originals = {name: getattr(store, name) for name in ('put', 'append') if hasattr(store, name)}
    for name, method in originals.items():
        setattr(store, name, counted(method))
    try:
        for kind in ('ephemeral', 'stored'):
            async with pool.checkout(ephemeral=kind == 'ephemeral') as session:
                for i in range(feeds):
                    written.append(0)
                    writing.append(0.0)
                    t0 = time.perf_counter()
                    await session.feed_run(feed(i), external_lookup=TOOLS)
                    if i >= feeds - tail:
                        times[kind].append(time.perf_counter() - t0)
    finally:
        for name in originals:
            delattr(store, name)
    late_writes = written[-tail:]
    return {
        **{kind: statistics.median(values) for kind, values in times.items()},
        'bytes': statistics.median(late_writes),
        'write': statistics.median(writing[-tail:]),
    }


def cell(values: list[float], scale: float = 1.0, unit: str = 'ms') -> str:
    med = statistics.median(values) * scale
    return f'{med:.2f} {unit} ({min(values) * scale:.2f}–{max(values) * scale:.2f})'


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--quick', action='store_true')
    parser.add_argument('--stored-only', action='store_true', help='only the stored feed against the ephemeral one')
    parser.add_argument('--replay-only', action='store_true', help="only corral's dump, load and replays (the first two tables, no monty)")
    parser.add_argument(
        '--checkouts-only', action='store_true', help="only the checkouts by id and forks from their checkpoints, and monty's load_session"
    )
    parser.add_argument('--in-a-row-only', action='store_true', help='only the checkouts in a row and the trivial feed, side by side with monty')
    parser.add_argument('--postgres', nargs='?', const='', metavar='URL', help='the store on PostgreSQL: a server started on loopback, or at URL')
    args = parser.parse_args(argv)
    sizes, reps = ((1, 10), 2) if args.quick else ((1, 10, 50), 5)
    if args.replay_only or args.checkouts_only:
        sizes = (10,) if args.quick else (10, 50)
    with tempfile.TemporaryDirectory() as folder, _store(folder, args.postgres) as opened:
        async with opened as store, corral.Pool(state_key=KEY, store=store) as pool:
            monty = AsyncMonty() if AsyncMonty is not None and not args.replay_only else None
            if monty is not None:
                await monty.__aenter__()
            try:
                rows = []
                for feeds in () if args.stored_only or args.in_a_row_only else sizes:
                    results: dict[str, list[dict[str, float]]] = {'corral': [], 'monty': []}
                    for rep in range(reps):
                        order = ['corral', 'monty'] if rep % 2 == 0 else ['monty', 'corral']
                        for side in order:
                            if side == 'corral' and args.checkouts_only:
                                pass
                            elif side == 'corral':
                                results['corral'].append(await corral_round(pool, feeds))
                            elif monty is not None:
                                results['monty'].append(await monty_round(monty, feeds))
                    rows.append((feeds, results))
                    print(f'{feeds} feeds done', file=sys.stderr)
                stored: dict[int, list[dict[str, float]]] = {}
                churn: dict[str, dict[str, list[float]]] = {side: {'back': [], 'apart': [], 'trivial': []} for side in ('corral', 'monty')}
                if args.checkouts_only:
                    for feeds in sizes:
                        stored[feeds] = [await stored_round(pool, None, feeds) for _ in range(reps)]
                elif not args.stored_only and not args.replay_only:
                    async with corral.Pool(state_key=KEY, store=store, checkpoints=None) as cold:
                        for feeds in () if args.in_a_row_only else (10,) if args.quick else (10, 50):
                            stored[feeds] = [await stored_round(pool, cold, feeds) for _ in range(reps)]
                    print('stored checkouts done', file=sys.stderr)
                    for rep in range(reps):
                        sides = [('corral', pool), ('monty', monty)] if monty is not None else [('corral', pool)]
                        for side, chosen in sides if rep % 2 == 0 else sides[::-1]:
                            churn[side]['back'].append(await checkouts(chosen))
                            churn[side]['apart'].append(await checkouts(chosen, gap=0.05))
                            churn[side]['trivial'].append(await trivial_feed(chosen))
                    print('checkouts done', file=sys.stderr)
                lengths = () if args.replay_only or args.checkouts_only or args.in_a_row_only else (10, 50) if args.quick else (10, 50, 500)
                costs = {n: [await stored_feed_cost(pool, n) for _ in range(1 if n >= 500 else reps)] for n in lengths}
            finally:
                if monty is not None:
                    await monty.__aexit__(None, None, None)
    measured = [(feeds, results) for feeds, results in rows if results['corral']]  # none with --checkouts-only
    if measured:
        print('| feeds | measure | corral | monty | corral / monty |')
        print('| --- | --- | --- | --- | --- |')
    for feeds, results in measured:
        c, m = results['corral'], results['monty']
        for key, label, scale, unit in (
            ('dump', 'dump', 1e3, 'ms'),
            ('load', 'load_session (corral: its checkpoint)', 1e3, 'ms'),
            ('replay', 'load_session (corral: replayed, its scripts compiled on the host)', 1e3, 'ms'),
            ('replay_kept', 'load_session (corral: replayed again, compiled scripts kept)', 1e3, 'ms'),
            ('size', 'state size', 1 / 1024, 'KiB'),
        ):
            cv = [r[key] for r in c]
            mv = [r['load' if key.startswith('replay') else key] for r in m]
            ratio = f'{statistics.median(cv) / statistics.median(mv):.2f}×' if mv else '—'
            print(f'| {feeds} | {label} | {cell(cv, scale, unit)} | {cell(mv, scale, unit) if mv else "not installed"} | {ratio} |')
    if measured:
        print()
        print('| feeds | replayed | the feeds ran (wall) | replayed load (wall) | replay / ran, wall | the feeds ran (CPU, host + worker) | replayed load (CPU) | replay / ran, CPU | load from the checkpoint (CPU) |')
        print('| --- | --- | --- | --- | --- | --- | --- | --- | --- |')
    for feeds, results in measured:
        c = results['corral']
        for key, label in (('replay', 'first (compiles)'), ('replay_kept', 'again (code kept)')):
            ran, load = [r['ran'] for r in c], [r[key] for r in c]
            ran_cpu, load_cpu = [r['ran_cpu'] for r in c], [r[f'{key}_cpu'] for r in c]
            print(
                f'| {feeds} | {label} | {cell(ran, 1e3)} | {cell(load, 1e3)} | {statistics.median(load) / statistics.median(ran):.2f}× '
                f'| {cell(ran_cpu, 1e3)} | {cell(load_cpu, 1e3)} | {statistics.median(load_cpu) / statistics.median(ran_cpu):.2f}× '
                f'| {cell([r["load_cpu"] for r in c], 1e3)} |'
            )
    if stored:
        print()
        print("| feeds | stored session, just closed | corral, from its checkpoint | corral, replayed | monty's load_session | checkpoint / monty | replayed / monty |")
        print('| --- | --- | --- | --- | --- | --- | --- |')
        loads = {feeds: [r['load'] for r in results['monty']] for feeds, results in rows}
        for feeds, samples in stored.items():
            mv = loads.get(feeds, [])
            for key, label in (('resume', 'checkout(session_id=...)'), ('fork', 'checkout(session_id=..., fork=True)')):
                live, cold = [r[key] for r in samples], [r[f'{key}_replay'] for r in samples if f'{key}_replay' in r]
                ratios = (f'{statistics.median(v) / statistics.median(mv):.2f}×' if mv and v else '—' for v in (live, cold))
                print(f'| {feeds} | {label} | {cell(live, 1e3)} | {cell(cold, 1e3) if cold else "—"} | {cell(mv, 1e3) if mv else "—"} | {" | ".join(ratios)} |')
    if churn['corral']['back']:
        print()
        print('| measure | corral | monty | corral / monty |')
        print('| --- | --- | --- | --- |')
        for key, label, scale, unit in (
            ('back', '50 checkouts + `1 + 1` + close, back to back, per checkout', 1e3, 'ms'),
            ('apart', 'the same, 50 ms between checkouts, per checkout', 1e3, 'ms'),
            ('trivial', 'trivial feed (`1 + 1`), median of 200', 1e6, 'µs'),
        ):
            cv, mv = churn['corral'][key], churn['monty'][key]
            ratio = f'{statistics.median(cv) / statistics.median(mv):.2f}×' if mv else '—'
            print(f'| {label} | {cell(cv, scale, unit)} | {cell(mv, scale, unit) if mv else "not installed"} | {ratio} |')
    if not costs:
        return
    print()
    print('| session length (feeds) | a late feed, ephemeral | a late feed, stored | stored / ephemeral | added | written to the store | writing it |')
    print('| --- | --- | --- | --- | --- | --- | --- |')
    for length, samples in costs.items():
        eph, sto = [c['ephemeral'] for c in samples], [c['stored'] for c in samples]
        size, write = [c['bytes'] for c in samples], [c['write'] for c in samples]
        print(
            f'| {length} | {cell(eph, 1e3)} | {cell(sto, 1e3)} | {statistics.median(sto) / statistics.median(eph):.2f}× '
            f'| {(statistics.median(sto) - statistics.median(eph)) * 1e3:.2f} ms | {cell(size, 1 / 1024, "KiB")} | {cell(write, 1e3)} |'
        )


@contextlib.contextmanager
def _store(folder: str, postgres: str | None) -> Iterator[Any]:
    """The store: SQLite in `folder`; with `postgres`, a PostgreSQL store at that URL, or ('') on a
    server started on loopback for the run (as the tests start theirs) and removed after it."""
    from corral.store import open_store

    if postgres is None:
        yield open_store(f'sqlite:///{os.path.join(folder, "sessions.db")}')
        return
    if postgres:
        yield open_store(postgres)
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.store.postgres_server import PostgresServer

    server = PostgresServer()
    try:
        server.start()
        yield open_store(server.url)
    finally:
        server.remove()


if __name__ == '__main__':
    asyncio.run(main())
