#!/usr/bin/env python
"""Side-by-side benchmark: corral against pydantic-monty (and plain CPython where it applies).

    python bench/run.py            # full run, a few minutes
    python bench/run.py --quick    # under a minute
    python bench/run.py --only 1,4 --json results.json

Every figure is measured in this one process with all implementations alive at once. After a
warm-up of each implementation, the repetitions alternate between implementations (the order is
reversed on every other repetition), so slow drift of the machine hits every implementation alike.
Each cell of the table is the median and the min–max over the repetitions.

The functions here are also used by `tests/test_bench_smoke.py`, which runs every figure once with
tiny parameters so that a broken benchmark shows up in CI.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import contextlib
import dataclasses
import gc
import glob
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import corral

try:
    import pydantic_monty
    from pydantic_monty import AsyncMonty
except ImportError:  # benchmark-only dependency: `pip install -e '.[bench]'`
    pydantic_monty = None
    AsyncMonty = None

MONTY_AVAILABLE = AsyncMonty is not None

__all__ = [
    'MONTY_AVAILABLE',
    'CPythonSide',
    'CorralSide',
    'Figure',
    'FigureResult',
    'MontySide',
    'Params',
    'build_figures',
    'main',
    'render_table',
    'run_figure',
]

perf_counter = time.perf_counter

# ----- workloads ----------------------------------------------------------------------------------

TRIVIAL = '1 + 1'

FIB = """\
def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)
fib({n})"""

LOOP = """\
t = 0
for i in range({steps}):
    t = (t + i * 7) % 1_000_003
t"""

ROUND_TRIP = """\
t = 0
for i in range({calls}):
    t += await f(i)
t"""

CONCURRENT = """\
import asyncio
r = await asyncio.gather(*[slow({k} * 1000 + i) for i in range({calls})])
r"""

TYPE_CHECK_STUBS = 'async def get_order(order_id: str) -> dict: ...\n'
TYPE_CHECK_SCRIPT = "await get_order('o1')"


async def echo(x: Any) -> Any:
    return x


async def get_order(order_id: str) -> dict[str, Any]:
    return {'id': order_id, 'total': 12.5}


def _fib(n: int) -> int:
    return n if n < 2 else _fib(n - 1) + _fib(n - 2)


def _loop(steps: int) -> int:
    t = 0
    for i in range(steps):
        t = (t + i * 7) % 1_000_003
    return t


@dataclasses.dataclass(frozen=True)
class Params:
    """Sizes of the workloads. `Params.tiny()` is for the smoke test."""

    fib_n: int = 25
    loop_steps: int = 3_000_000
    round_trip_calls: int = 1000
    concurrency_sessions: int = 200
    concurrency_calls: int = 10
    concurrency_sleep: float = 0.01
    concurrency_limit: int = 16
    throughput_ops: int = 80

    @classmethod
    def tiny(cls) -> Params:
        return cls(
            fib_n=10,
            loop_steps=1000,
            round_trip_calls=10,
            concurrency_sessions=4,
            concurrency_calls=3,
            concurrency_sleep=0.001,
            concurrency_limit=2,
            throughput_ops=2,
        )


class BenchError(Exception):
    """A result came back wrong: the figure is not worth reporting."""


def _check(value: Any, expected: Any, what: str) -> None:
    if value != expected:
        raise BenchError(f'{what}: expected {expected!r}, got {value!r}')


# ----- memory helpers ------------------------------------------------------------------------------


def smaps_rollup(pid: int) -> dict[str, int]:
    """Fields of /proc/PID/smaps_rollup, in bytes."""
    fields = {}
    with open(f'/proc/{pid}/smaps_rollup') as file:
        for line in file:
            parts = line.split()
            if len(parts) >= 3 and parts[0].endswith(':') and parts[2] == 'kB':
                fields[parts[0][:-1]] = int(parts[1]) * 1024
    return fields


#: Said under a report whose USS and PSS were read from /proc/PID/status (`process_memory`).
STATUS_NOTE = (
    "USS and PSS are the workers' RssAnon (/proc/PID/status: every anonymous page they map, the "
    "zygote's shared ones too, an upper bound of both): this user may not read a worker's "
    'smaps_rollup (a worker is not dumpable), root may'
)
#: Whether a reading since the start fell back to /proc/PID/status (`memory_note`).
_read_status = [False]


def process_memory(pid: int) -> dict[str, float]:
    """USS (Private_Clean + Private_Dirty), PSS and RSS of a process, in MiB, from
    /proc/PID/smaps_rollup. Where the kernel refuses it (a user other than root reading a worker,
    which is not dumpable: proc(5)), from /proc/PID/status: USS and PSS are then its RssAnon, an
    upper bound of both, and `memory_note()` says so."""
    mib = 1024 * 1024
    try:
        fields = smaps_rollup(pid)
    except PermissionError:
        _read_status[0] = True
        with open(f'/proc/{pid}/status') as file:
            status = {parts[0][:-1]: int(parts[1]) * 1024 for parts in map(str.split, file) if len(parts) == 3 and parts[2] == 'kB'}
        return {'uss': status['RssAnon'] / mib, 'pss': status['RssAnon'] / mib, 'rss': status['VmRSS'] / mib}
    return {
        'uss': (fields['Private_Clean'] + fields['Private_Dirty']) / mib,
        'pss': fields['Pss'] / mib,
        'rss': fields['Rss'] / mib,
    }


def memory_note() -> str | None:
    """`STATUS_NOTE` when a `process_memory` reading came from /proc/PID/status, else None."""
    return STATUS_NOTE if _read_status[0] else None


def children(pid: int) -> list[int]:
    """Live children of `pid`, forked by any of its threads."""
    found = []
    for path in glob.glob(f'/proc/{pid}/task/*/children'):
        try:
            with open(path) as file:
                found.extend(int(p) for p in file.read().split())
        except OSError:
            pass
    live = []
    for child in sorted(set(found)):
        try:
            with open(f'/proc/{child}/stat') as file:
                state = file.read().rpartition(')')[2].split()[0]
        except OSError:
            continue
        if state not in ('Z', 'X'):
            live.append(child)
    return live


def _cmdline(pid: int) -> bytes:
    try:
        with open(f'/proc/{pid}/cmdline', 'rb') as file:
            return file.read()
    except OSError:
        return b''


def _exe(pid: int) -> str:
    try:
        return os.readlink(f'/proc/{pid}/exe')
    except OSError:
        return ''


# ----- implementations ------------------------------------------------------------------------------


class Side:
    """One implementation under test. `sandbox` sides run scripts through sessions."""

    name = ''
    sandbox = True

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def settle(self, pause: float = 0.0) -> None:
        """Wait for background work a sample started (refilling a pool, a worker starting up or
        being reset), so it does not land in the next implementation's sample: corral's pool
        refill, then `pause` seconds."""
        if pause:
            await asyncio.sleep(pause)

    def checkout(self, *, type_check: bool = False, stubs: str | None = None, many_calls: bool = False) -> Any:
        raise NotImplementedError

    async def feed(self, session: Any, code: str, lookup: Mapping[str, Callable[..., Any]] | None = None) -> Any:
        return await session.feed_run(code, external_lookup=dict(lookup) if lookup else None)

    def variant(self, kind: str, params: Params) -> Side:
        """A new side of the same implementation with its own pool, configured for figure `kind`."""
        raise NotImplementedError

    def session_pid(self, session: Any) -> int:
        raise NotImplementedError

    def idle_worker_pids(self) -> list[int]:
        raise NotImplementedError

    async def __aenter__(self) -> Side:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()


class CorralSide(Side):
    name = 'corral'

    def __init__(self, *, limit: int | None = None, **pool_kwargs: Any) -> None:
        self.pool_kwargs = pool_kwargs
        self.pool: corral.Pool | None = None
        self.limit = limit
        self._semaphore: asyncio.Semaphore | None = None
        self._before: set[int] = set()

    async def start(self) -> None:
        self._before = set(children(os.getpid()))
        self.pool = corral.Pool(**self.pool_kwargs)
        if self.limit is not None:
            # corral has no cap on live workers yet: this keeps figure 8 comparable to monty's
            # max_processes.
            self._semaphore = asyncio.Semaphore(self.limit)

    async def stop(self) -> None:
        if self.pool is not None:
            await self.pool.aclose()
            self.pool = None

    async def settle(self, pause: float = 0.0) -> None:
        refill = getattr(self.pool, '_refill', None)
        if refill is not None and not refill.done():
            await asyncio.wait([refill])
        await super().settle(pause)  # the new worker's own start-up (lockdown) runs after the fork

    @contextlib.asynccontextmanager
    async def checkout(self, *, type_check: bool = False, stubs: str | None = None, many_calls: bool = False) -> AsyncIterator[Any]:
        assert self.pool is not None
        kwargs: dict[str, Any] = {}
        if type_check:
            kwargs = {'type_check': True, 'type_check_stubs': stubs}
        if many_calls:
            kwargs['limits'] = corral.Limits(host_calls=None)
        async with contextlib.AsyncExitStack() as stack:
            if self._semaphore is not None:
                await stack.enter_async_context(self._semaphore)
            session = await stack.enter_async_context(self.pool.checkout(**kwargs))
            yield session

    def variant(self, kind: str, params: Params) -> Side:
        if kind == 'concurrency':
            return CorralSide(limit=params.concurrency_limit)
        return CorralSide()

    def session_pid(self, session: Any) -> int:
        return session._worker.pid

    def zygote_pid(self) -> int:
        """The pool's zygote (the process that forks workers): `pool._zygote.pid`, else the
        `corral.worker` child of this process that appeared after the pool was made."""
        pid = getattr(getattr(self.pool, '_zygote', None), 'pid', None)
        if pid is not None:
            return pid
        found = [
            pid
            for pid in children(os.getpid())
            if pid not in self._before and b'corral.worker' in _cmdline(pid)
        ]
        if not found:
            raise BenchError("cannot find the pool's zygote process")
        return found[-1]

    def idle_worker_pids(self) -> list[int]:
        return children(self.zygote_pid())


class MontySide(Side):
    name = 'monty'

    def __init__(self, **pool_kwargs: Any) -> None:
        self.pool_kwargs = pool_kwargs
        self.pool: Any = None
        self._before: set[int] = set()
        self._binary = ''

    async def start(self) -> None:
        if AsyncMonty is None:
            raise RuntimeError('pydantic-monty is not installed (pip install -e ".[bench]")')
        from pydantic_monty._binary import find_monty_binary

        self._binary = os.path.realpath(find_monty_binary())
        # workers of pools that already exist are not this side's
        self._before = set(children(os.getpid()))
        self.pool = AsyncMonty(**self.pool_kwargs)
        await self.pool.__aenter__()

    async def stop(self) -> None:
        if self.pool is not None:
            await self.pool.__aexit__(None, None, None)
            self.pool = None

    def checkout(self, *, type_check: bool = False, stubs: str | None = None, many_calls: bool = False) -> Any:
        kwargs: dict[str, Any] = {}
        if type_check:
            kwargs = {'type_check': True, 'type_check_stubs': stubs}
        if many_calls:
            # monty caps suspensions (host calls, lookups) at 1000 per checkout by default
            kwargs['limits'] = {'max_suspensions': 10**9}
        return self.pool.checkout(**kwargs)

    def variant(self, kind: str, params: Params) -> Side:
        if kind == 'concurrency':
            return MontySide(max_processes=params.concurrency_limit)
        if kind == 'ephemeral':
            # a fresh worker for every checkout, two kept warm like corral's default pool
            return MontySide(min_processes=2, max_checkouts_per_worker=1)
        return MontySide()

    def session_pid(self, session: Any) -> int:
        pid = session.worker_pid
        if pid is None:
            raise BenchError('monty reports no worker pid for the session')
        return pid

    def idle_worker_pids(self) -> list[int]:
        return [
            pid
            for pid in children(os.getpid())
            if pid not in self._before and os.path.realpath(_exe(pid)) == self._binary
        ]


class CPythonSide(Side):
    """Plain CPython: `exec` of the same script in this process."""

    name = 'CPython'
    sandbox = False

    def variant(self, kind: str, params: Params) -> Side:
        return CPythonSide()


def exec_script(source: str) -> Any:
    """Compile and run `source` in a fresh namespace; the value of its last expression."""
    tree = ast.parse(source)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    namespace: dict[str, Any] = {}
    exec(compile(tree, '<bench>', 'exec'), namespace)  # noqa: S102 - the CPython baseline
    return None if last is None else eval(compile(last, '<bench>', 'eval'), namespace)


# ----- figures -----------------------------------------------------------------------------------

#: Seconds every side pauses after a sample that checked out a session (see `Side.settle`).
SETTLE_PAUSE = 0.002

#: A sample: metric name -> value (seconds, MiB or per-second), plus optional notes ('_' keys).
Sample = dict[str, Any]
Sampler = Callable[[], Awaitable[Sample]]
SamplerFactory = Callable[[Side, Params], contextlib.AbstractAsyncContextManager[Sampler | None]]


@dataclasses.dataclass(frozen=True)
class Target:
    """`corral <metric> / <against> <other_metric>` must be at most `limit`."""

    against: str  # 'monty' or 'CPython'
    limit: float
    other_metric: str | None = None

    def describe(self) -> str:
        return f'≤{self.limit:g}× {self.against}' + (f' {self.other_metric.upper()}' if self.other_metric else '')


@dataclasses.dataclass(frozen=True)
class Row:
    label: str
    metric: str
    unit: str  # 'time', 'MiB' or 'rate'
    targets: tuple[Target, ...] = ()


@dataclasses.dataclass(frozen=True)
class Figure:
    number: str
    title: str
    factory: SamplerFactory
    rows: tuple[Row, ...]
    reps: int
    quick_reps: int
    warmup: int = 2
    quick_warmup: int = 1
    #: seconds each side pauses after each sample (after corral's pool refill); 0 for figures
    #: whose timed part checks out nothing
    pause: float = SETTLE_PAUSE


@contextlib.asynccontextmanager
async def _none() -> AsyncIterator[None]:
    yield None


def sandbox_only(factory: SamplerFactory) -> SamplerFactory:
    def wrapped(side: Side, params: Params) -> contextlib.AbstractAsyncContextManager[Sampler | None]:
        if not side.sandbox:
            return _none()
        return factory(side, params)

    return wrapped


@contextlib.asynccontextmanager
async def warm_session(side: Side, **checkout: Any) -> AsyncIterator[Any]:
    """A session whose worker already ran one (untimed) feed: a new worker's first feed pays
    one-off costs, which figure 2 measures; then the pool's background work is let finish."""
    async with side.checkout(**checkout) as session:
        await side.feed(session, 'None')
        await side.settle(SETTLE_PAUSE)
        yield session


#: Figure 1 moves to a new session (a new worker for corral) every this many feeds, so that the
#: median is not the luck of one worker's CPU placement.
ROTATE_EVERY = 50


@sandbox_only
@contextlib.asynccontextmanager
async def trivial_feed(side: Side, params: Params) -> AsyncIterator[Sampler]:
    async with contextlib.AsyncExitStack() as outer:
        state: dict[str, Any] = {'stack': None, 'session': None, 'feeds': 0}

        async def rotate() -> None:
            if state['stack'] is not None:
                await state['stack'].aclose()
            stack = contextlib.AsyncExitStack()
            await outer.enter_async_context(stack)
            state['stack'] = stack
            state['session'] = await stack.enter_async_context(warm_session(side))
            state['feeds'] = 0

        async def sample() -> Sample:
            if state['session'] is None or state['feeds'] >= ROTATE_EVERY:
                await rotate()
            state['feeds'] += 1
            session = state['session']
            t0 = perf_counter()
            value = await side.feed(session, TRIVIAL)
            elapsed = perf_counter() - t0
            _check(value, 2, 'trivial feed')
            return {'time': elapsed}

        yield sample


@sandbox_only
@contextlib.asynccontextmanager
async def checkout_feed_close(side: Side, params: Params) -> AsyncIterator[Sampler]:
    async def sample() -> Sample:
        t0 = perf_counter()
        async with side.checkout() as session:
            value = await side.feed(session, TRIVIAL)
        elapsed = perf_counter() - t0
        _check(value, 2, 'checkout + feed')
        return {'time': elapsed}

    yield sample


@sandbox_only
@contextlib.asynccontextmanager
async def round_trip(side: Side, params: Params) -> AsyncIterator[Sampler]:
    calls = params.round_trip_calls
    code = ROUND_TRIP.format(calls=calls)
    expected = calls * (calls - 1) // 2

    async def sample() -> Sample:
        async with warm_session(side, many_calls=True) as session:
            t0 = perf_counter()
            value = await side.feed(session, code, {'f': echo})
            elapsed = perf_counter() - t0
        _check(value, expected, 'round trip')
        return {'time': elapsed / calls}

    yield sample


def _compute(source: str, expected: Any, what: str) -> SamplerFactory:
    @contextlib.asynccontextmanager
    async def factory(side: Side, params: Params) -> AsyncIterator[Sampler]:
        if not side.sandbox:

            async def sample() -> Sample:
                t0 = perf_counter()
                value = exec_script(source)
                elapsed = perf_counter() - t0
                _check(value, expected, what)
                return {'time': elapsed}

            yield sample
            return

        async def sample() -> Sample:
            async with warm_session(side) as session:
                t0 = perf_counter()
                value = await side.feed(session, source)
                elapsed = perf_counter() - t0
            _check(value, expected, what)
            return {'time': elapsed}

        yield sample

    return factory


def fib(side: Side, params: Params) -> contextlib.AbstractAsyncContextManager[Sampler | None]:
    return _compute(FIB.format(n=params.fib_n), _fib(params.fib_n), 'fib')(side, params)


def loop(side: Side, params: Params) -> contextlib.AbstractAsyncContextManager[Sampler | None]:
    return _compute(LOOP.format(steps=params.loop_steps), _loop(params.loop_steps), 'loop')(side, params)


async def _timed_feed(side: Side, session: Any) -> float:
    t0 = perf_counter()
    value = await side.feed(session, TYPE_CHECK_SCRIPT, {'get_order': get_order})
    elapsed = perf_counter() - t0
    _check(value, {'id': 'o1', 'total': 12.5}, 'type-checked feed')
    return elapsed


@sandbox_only
@contextlib.asynccontextmanager
async def type_check_first(side: Side, params: Params) -> AsyncIterator[Sampler]:
    """Each repetition: the first feed of a new session, with and without type checking."""

    async def sample() -> Sample:
        async with side.checkout(type_check=True, stubs=TYPE_CHECK_STUBS) as session:
            checked = await _timed_feed(side, session)
        await side.settle(SETTLE_PAUSE)
        async with side.checkout() as session:
            unchecked = await _timed_feed(side, session)
        return {'added': checked - unchecked, '_with': checked, '_without': unchecked}

    yield sample


@sandbox_only
@contextlib.asynccontextmanager
async def type_check_again(side: Side, params: Params) -> AsyncIterator[Sampler]:
    """A later feed of a session (the checked context grows by one script per feed)."""
    async with side.checkout(type_check=True, stubs=TYPE_CHECK_STUBS) as checked_session:
        async with side.checkout() as plain_session:

            async def sample() -> Sample:
                checked = await _timed_feed(side, checked_session)
                unchecked = await _timed_feed(side, plain_session)
                return {'added': checked - unchecked, '_with': checked, '_without': unchecked}

            yield sample


async def _wait_for(predicate: Callable[[], Any], timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        await asyncio.sleep(0.02)


@sandbox_only
@contextlib.asynccontextmanager
async def idle_memory(side: Side, params: Params) -> AsyncIterator[Sampler]:
    """A fresh pool; one checkout + feed + close, then the pool's idle worker(s), as in steady state.

    corral's idle workers are forks that never ran a script (a session's worker is never reused);
    monty's idle worker is the one that served the checkout (workers are reused).
    """
    async with side.variant('memory', params) as fresh:
        async with fresh.checkout() as session:
            _check(await fresh.feed(session, TRIVIAL), 2, 'memory warm-up feed')
        await fresh.settle()
        await asyncio.sleep(0.3)

        async def sample() -> Sample:
            pids = await _wait_for(fresh.idle_worker_pids)
            if not pids:
                raise BenchError('no idle worker process found')
            memories = [process_memory(pid) for pid in pids]
            result: Sample = {
                'uss': statistics.median(m['uss'] for m in memories),
                'rss': statistics.median(m['rss'] for m in memories),
                '_workers': len(pids),
            }
            if isinstance(fresh, CorralSide):
                zygote = process_memory(fresh.zygote_pid())
                result['_zygote_uss'] = zygote['uss']
                result['_zygote_rss'] = zygote['rss']
            return result

        yield sample


@sandbox_only
@contextlib.asynccontextmanager
async def session_memory(side: Side, params: Params) -> AsyncIterator[Sampler]:
    """The worker of a checked-out session, idle after one `1 + 1` feed."""
    async with side.variant('memory', params) as fresh:

        async def sample() -> Sample:
            async with fresh.checkout() as session:
                _check(await fresh.feed(session, TRIVIAL), 2, 'session memory feed')
                await asyncio.sleep(0.05)
                memory = process_memory(fresh.session_pid(session))
            await fresh.settle()
            return {'uss': memory['uss'], 'rss': memory['rss']}

        yield sample


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@sandbox_only
@contextlib.asynccontextmanager
async def concurrency(side: Side, params: Params) -> AsyncIterator[Sampler]:
    delay = params.concurrency_sleep

    async def slow(x: int) -> int:
        await asyncio.sleep(delay)
        return x

    async with side.variant('concurrency', params) as pool_side:

        async def one(k: int, t0: float) -> tuple[float, bool]:
            code = CONCURRENT.format(k=k, calls=params.concurrency_calls)
            async with pool_side.checkout() as session:
                value = await pool_side.feed(session, code, {'slow': slow})
            expected = [k * 1000 + i for i in range(params.concurrency_calls)]
            return perf_counter() - t0, value == expected

        async def sample() -> Sample:
            t0 = perf_counter()
            results = await asyncio.gather(*(one(k, t0) for k in range(params.concurrency_sessions)))
            wall = perf_counter() - t0
            await pool_side.settle()
            wrong = sum(1 for _, ok in results if not ok)
            if wrong:
                raise BenchError(f'{wrong} of {len(results)} concurrent sessions returned a wrong result')
            latencies = [latency for latency, _ in results]
            return {
                'wall': wall,
                'p50': _percentile(latencies, 0.5),
                'p99': _percentile(latencies, 0.99),
                '_correct': len(results),
            }

        yield sample


def _ephemeral(clients: int) -> SamplerFactory:
    @sandbox_only
    @contextlib.asynccontextmanager
    async def factory(side: Side, params: Params) -> AsyncIterator[Sampler]:
        async with side.variant('ephemeral', params) as pool_side:

            async def client(ops: int) -> None:
                for _ in range(ops):
                    async with pool_side.checkout() as session:
                        _check(await pool_side.feed(session, TRIVIAL), 2, 'ephemeral feed')

            async def sample() -> Sample:
                per_client = max(1, params.throughput_ops // clients)
                t0 = perf_counter()
                await asyncio.gather(*(client(per_client) for _ in range(clients)))
                elapsed = perf_counter() - t0
                await pool_side.settle()
                return {'rate': per_client * clients / elapsed}

            yield sample

    return factory


def build_figures(params: Params) -> list[Figure]:
    """The figures of the table, in order."""
    p = params

    def time_row(label: str, *targets: Target) -> Row:
        return Row(label, 'time', 'time', targets)

    def vs_monty(limit: float) -> Target:
        return Target('monty', limit)
    return [
        Figure('1', 'trivial feed', trivial_feed, (time_row('1. trivial feed (`1 + 1`) on a session, per feed', vs_monty(0.5)),), reps=2000, quick_reps=150, warmup=20, quick_warmup=10, pause=0.0),
        Figure('2', 'checkout + feed + close', checkout_feed_close, (time_row('2. checkout + `1 + 1` + close', vs_monty(0.8)),), reps=600, quick_reps=60, warmup=10, quick_warmup=5),
        Figure('3', 'host-call round trip', round_trip, (time_row(f'3. host-call round trip (loop of {p.round_trip_calls:,} `await f(i)`), per call', vs_monty(0.5)),), reps=40, quick_reps=6),
        Figure('4', 'fib', fib, (time_row(f'4. fib({p.fib_n}) recursive, one feed', vs_monty(0.5), Target('CPython', 1.5)),), reps=60, quick_reps=8),
        Figure('5', 'loop', loop, (time_row(f'5. {p.loop_steps:,}-step integer loop, one feed', vs_monty(0.5), Target('CPython', 1.5)),), reps=21, quick_reps=3, warmup=1, quick_warmup=1),
        Figure('6a', 'type check, first feed', type_check_first, (Row('6a. added cost of type checking, first feed of a session', 'added', 'time', (vs_monty(1.0),)),), reps=50, quick_reps=6),
        Figure('6b', 'type check, later feed', type_check_again, (Row('6b. added cost of type checking, later feed of a session', 'added', 'time', (vs_monty(1.0),)),), reps=100, quick_reps=12),
        Figure('7a', 'idle warm worker memory', idle_memory, (
            Row('7a. idle warm worker, USS', 'uss', 'MiB', (Target('monty', 1.0, 'rss'),)),
            Row('7a. idle warm worker, RSS', 'rss', 'MiB'),
        ), reps=9, quick_reps=2, warmup=0, quick_warmup=0),
        Figure('7b', 'session worker memory', session_memory, (
            Row('7b. session worker after one feed, USS', 'uss', 'MiB'),
            Row('7b. session worker after one feed, RSS', 'rss', 'MiB'),
        ), reps=9, quick_reps=2, warmup=1, quick_warmup=0),
        Figure('8', 'concurrency', concurrency, (
            Row(f'8. {p.concurrency_sessions} concurrent sessions × {p.concurrency_calls} gathered {p.concurrency_sleep * 1000:g} ms host calls ({p.concurrency_limit} workers max), wall time', 'wall', 'time', (vs_monty(1.0),)),
            Row('8. … per-session latency p50', 'p50', 'time'),
            Row('8. … per-session latency p99', 'p99', 'time'),
        ), reps=15, quick_reps=2, warmup=1, quick_warmup=1),
        Figure('9a', 'ephemeral checkouts, sequential', _ephemeral(1), (Row('9a. ephemeral checkouts (fresh worker, `1 + 1`, close), 1 client, per second — higher is better', 'rate', 'rate'),), reps=15, quick_reps=3, warmup=1, quick_warmup=1),
        Figure('9b', 'ephemeral checkouts, 2 clients', _ephemeral(2), (Row('9b. ephemeral checkouts, 2 concurrent clients, per second — higher is better', 'rate', 'rate'),), reps=15, quick_reps=3, warmup=1, quick_warmup=1),
    ]


# ----- running -------------------------------------------------------------------------------------


@dataclasses.dataclass
class FigureResult:
    figure: Figure
    samples: dict[str, list[Sample]]  # side name -> samples
    errors: dict[str, str]  # side name -> error text
    seconds: float = 0.0

    def values(self, side: str, metric: str) -> list[float]:
        return [sample[metric] for sample in self.samples.get(side, []) if metric in sample]

    def median(self, side: str, metric: str) -> float | None:
        values = self.values(side, metric)
        return statistics.median(values) if values else None


async def run_figure(
    figure: Figure,
    sides: list[Side],
    params: Params,
    *,
    reps: int,
    warmup: int,
    raise_errors: bool = False,
) -> FigureResult:
    """Measure one figure on every side, alternating between sides on each repetition."""
    started = perf_counter()
    samplers: dict[str, Sampler] = {}
    samples: dict[str, list[Sample]] = {}
    errors: dict[str, str] = {}
    by_name = {side.name: side for side in sides}

    def failed(name: str, error: BaseException) -> None:
        if raise_errors:
            raise error
        errors[name] = f'{type(error).__name__}: {error}'.splitlines()[0][:200]
        samplers.pop(name, None)

    async with contextlib.AsyncExitStack() as stack:
        for side in sides:
            try:
                sampler = await stack.enter_async_context(figure.factory(side, params))
            except Exception as error:  # noqa: BLE001 - reported in the table
                failed(side.name, error)
                continue
            if sampler is not None:
                samplers[side.name] = sampler
                samples[side.name] = []
        for name in list(samplers):
            try:
                for _ in range(warmup):
                    await samplers[name]()
                    await by_name[name].settle(figure.pause)
            except Exception as error:  # noqa: BLE001 - reported in the table
                failed(name, error)
        order = list(samplers)
        for rep in range(reps):
            for name in order if rep % 2 == 0 else order[::-1]:
                if name not in samplers:
                    continue
                try:
                    samples[name].append(await samplers[name]())
                    await by_name[name].settle(figure.pause)
                except Exception as error:  # noqa: BLE001 - reported in the table
                    failed(name, error)
        # (contexts close here: sessions and pools made for the figure)
    return FigureResult(figure, samples, errors, perf_counter() - started)


# ----- the table -----------------------------------------------------------------------------------


def median_cell(values: list[float], unit: str = '') -> str:
    """A table cell for `values` (already in `unit`): `median unit (min–max)`, the median alone for one
    value, `—` for none; 0 decimals from 100 up (and for counts, `unit` ''), 1 from 10, else 2."""
    if not values:
        return '—'
    median = statistics.median(values)
    digits = 0 if not unit or median >= 100 else 1 if median >= 10 else 2
    unit_text = f' {unit}' if unit else ''
    if len(values) == 1:
        return f'{median:.{digits}f}{unit_text}'
    return f'{median:.{digits}f}{unit_text} ({min(values):.{digits}f}–{max(values):.{digits}f})'


def _format_value(value: float, unit: str, scale: tuple[str, float] | None = None) -> str:
    if unit == 'MiB':
        return f'{value:.1f}'
    if unit == 'rate':
        return f'{value:,.0f}'
    assert scale is not None
    number = value / scale[1]
    if abs(number) >= 100:
        return f'{number:.0f}'
    if abs(number) >= 10:
        return f'{number:.1f}'
    return f'{number:.2f}'


def _time_scale(median: float) -> tuple[str, float]:
    magnitude = abs(median)
    if magnitude >= 1:
        return 's', 1.0
    if magnitude >= 1e-3:
        return 'ms', 1e-3
    return 'µs', 1e-6


def _cell(result: FigureResult, side: str, row: Row) -> str:
    if side in result.errors and not result.values(side, row.metric):
        return f'error: {result.errors[side]}'
    values = result.values(side, row.metric)
    if not values:
        return '—'
    median = statistics.median(values)
    if row.unit == 'time':
        scale = _time_scale(median)
        unit = f' {scale[0]}'
    else:
        scale = None
        unit = ' MiB' if row.unit == 'MiB' else '/s'
    text = _format_value(median, row.unit, scale) + unit
    if len(values) > 1:
        text += f' ({_format_value(min(values), row.unit, scale)}–{_format_value(max(values), row.unit, scale)})'
    if side in result.errors:
        text += f' [then error: {result.errors[side]}]'
    return text


def _ratio(result: FigureResult, row: Row, against: str, other_metric: str | None = None) -> float | None:
    ours = result.median('corral', row.metric)
    theirs = result.median(against, other_metric or row.metric)
    if ours is None or theirs is None or theirs == 0:
        return None
    return ours / theirs


def _ratio_text(ratio: float | None) -> str:
    return '—' if ratio is None else f'{ratio:.2f}×'


def _target_text(result: FigureResult, row: Row) -> str:
    if not row.targets:
        return '—'
    parts = []
    for target in row.targets:
        ratio = _ratio(result, row, target.against, target.other_metric)
        if ratio is None:
            parts.append(f'{target.describe()} (n/a)')
        else:
            shown = f' = {ratio:.2f}×' if target.other_metric else ''
            parts.append(f'{target.describe()}{shown} {"✅" if ratio <= target.limit else "❌"}')
    return '; '.join(parts)


def render_table(results: list[FigureResult]) -> str:
    lines = [
        '| figure | corral | monty | CPython | ratio (corral/monty) | ratio (corral/CPython) | target |',
        '|---|---|---|---|---|---|---|',
    ]
    for result in results:
        for row in result.figure.rows:
            lines.append(
                '| '
                + ' | '.join(
                    [
                        row.label,
                        _cell(result, 'corral', row),
                        _cell(result, 'monty', row),
                        _cell(result, 'CPython', row),
                        _ratio_text(_ratio(result, row, 'monty')),
                        _ratio_text(_ratio(result, row, 'CPython')),
                        _target_text(result, row),
                    ]
                )
                + ' |'
            )
    return '\n'.join(lines)


def _median_note(result: FigureResult, side: str, key: str) -> float | None:
    values = [sample[key] for sample in result.samples.get(side, []) if key in sample]
    return statistics.median(values) if values else None


def render_notes(results: list[FigureResult]) -> str:
    notes = []
    for result in results:
        number = result.figure.number
        reps = {side: len(samples) for side, samples in result.samples.items()}
        line = f'- {number} ({result.figure.title}): n = ' + ', '.join(f'{side} {n}' for side, n in reps.items())
        extras = []
        if number.startswith('6'):
            for side in ('corral', 'monty'):
                with_, without = _median_note(result, side, '_with'), _median_note(result, side, '_without')
                if with_ is not None and without is not None:
                    extras.append(f'{side}: checked feed {with_ * 1e3:.2f} ms vs unchecked {without * 1e3:.2f} ms (medians)')
        if number == '7a':
            zygote_uss, zygote_rss = _median_note(result, 'corral', '_zygote_uss'), _median_note(result, 'corral', '_zygote_rss')
            if zygote_uss is not None:
                extras.append(f'corral zygote (shared by all workers): USS {zygote_uss:.1f} MiB, RSS {zygote_rss:.1f} MiB')
            for side in ('corral', 'monty'):
                workers = _median_note(result, side, '_workers')
                if workers is not None:
                    extras.append(f'{side}: {workers:g} idle worker(s) measured')
        if number in ('7a', '7b') and memory_note():
            extras.append(memory_note())
        if number == '8':
            for side in ('corral', 'monty'):
                correct = _median_note(result, side, '_correct')
                if correct is not None:
                    extras.append(f'{side}: all {correct:g} session results correct in every repetition')
        for side, error in result.errors.items():
            extras.append(f'{side} error: {error}')
        extras.append(f'{result.seconds:.1f} s')
        notes.append(line + '; ' + '; '.join(extras))
    return '\n'.join(notes)


def _source_state() -> str:
    """corral's git commit, and whether the working tree has changes on top of it."""
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=root, capture_output=True, text=True, timeout=5, check=False).stdout.strip()
        dirty = subprocess.run(['git', 'status', '--porcelain', '--', 'src'], cwd=root, capture_output=True, text=True, timeout=5, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return 'corral (no git)'
    if not head:
        return 'corral (no git)'
    changed = len(dirty.splitlines())
    return f'corral {head}' + (f' + {changed} changed file(s) under src/' if changed else '')


def _machine() -> str:
    cpu = platform.processor() or ''
    try:
        with open('/proc/cpuinfo') as file:
            for line in file:
                if line.startswith('model name'):
                    cpu = line.split(':', 1)[1].strip()
                    break
    except OSError:
        pass
    monty = getattr(pydantic_monty, '__version__', 'not installed') if pydantic_monty else 'not installed'
    return (
        f'{_source_state()}, Python {platform.python_version()} ({sys.executable}), pydantic-monty {monty}, '
        f'{os.cpu_count()} CPUs ({cpu}), {platform.system()} {platform.release()}'
    )


async def run_all(quick: bool, only: set[str] | None, json_path: str | None) -> list[FigureResult]:
    params = Params()
    figures = [f for f in build_figures(params) if only is None or f.number in only or f.number.rstrip('ab') in only]
    sides: list[Side] = [CorralSide()]
    monty_error = None
    if MONTY_AVAILABLE:
        sides.append(MontySide())
    else:
        monty_error = 'pydantic-monty is not installed (pip install -e ".[bench]")'
    sides.append(CPythonSide())
    started = perf_counter()
    load_before = os.getloadavg()
    results = []
    async with contextlib.AsyncExitStack() as stack:
        for side in sides:
            await stack.enter_async_context(side)
        for figure in figures:
            reps = figure.quick_reps if quick else figure.reps
            warmup = figure.quick_warmup if quick else figure.warmup
            print(f'figure {figure.number}: {figure.title} ({reps} reps) …', file=sys.stderr, flush=True)
            gc.collect()
            result = await run_figure(figure, sides, params, reps=reps, warmup=warmup)
            if monty_error:
                result.errors['monty'] = monty_error
            results.append(result)
    total = perf_counter() - started
    print(f'## corral vs pydantic-monty{" (--quick)" if quick else ""}\n')
    load_after = os.getloadavg()
    print(
        _machine()
        + f'; total {total:.0f} s; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after'
        + ' (other work on the machine moves the figures)\n'
    )
    print(render_table(results))
    print('\nNotes (median and min–max over n repetitions; ratios are of medians):\n')
    print(render_notes(results))
    if json_path:
        with open(json_path, 'w') as file:
            json.dump(
                {
                    'quick': quick,
                    'machine': _machine(),
                    'figures': [
                        {'number': r.figure.number, 'title': r.figure.title, 'samples': r.samples, 'errors': r.errors}
                        for r in results
                    ],
                },
                file,
                indent=1,
            )
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true', help='fewer repetitions: under a minute')
    parser.add_argument('--only', help='comma-separated figure numbers, e.g. 1,3,6a')
    parser.add_argument('--json', metavar='PATH', help='also write the raw samples as JSON')
    args = parser.parse_args(argv)
    only = set(args.only.split(',')) if args.only else None
    asyncio.run(run_all(args.quick, only, args.json))


if __name__ == '__main__':
    main()
