"""`time.sleep` waits in the host, through the session's `OsAccess.sleep`, where the application
overrides it: it caps, skips or counts the script's sleeps, and a session replayed from its journal
does not wait again. Other sessions' sleeps wait in the worker, as CPython's do."""

from __future__ import annotations

import asyncio
import time

import pytest

import corral
from corral import Limits, OsAccess, SandboxLimitError, SandboxRuntimeError, StopFeed
from corral.host.os_access import SystemCalls


class Recorded(OsAccess):
    """Sleeps recorded and not waited; past `budget` seconds in all, the feed ends."""

    def __init__(self, budget: float = 60.0) -> None:
        super().__init__()
        self.asked: list[float] = []
        self.budget = budget

    def sleep(self, seconds: float) -> None:
        self.asked.append(seconds)
        if sum(self.asked) > self.budget:
            raise StopFeed('TimeoutError', f'sleep limit exceeded: {sum(self.asked)} s > {self.budget} s')


async def test_a_sleep_nobody_watches_waits_in_the_worker(session) -> None:
    start = time.monotonic()
    waited = await session.feed_run('import time, asyncio\nt = time.monotonic()\ntime.sleep(0.2)\nawait asyncio.sleep(0.1)\ntime.monotonic() - t')
    assert 0.3 <= waited < 5
    assert time.monotonic() - start >= 0.3
    assert session._system.host_sleeps is False and session._next_call == 2  # the two clock reads: no sleep reached the host


async def test_an_os_access_sees_each_sleep_and_may_skip_or_stop_it(pool) -> None:
    access = Recorded(budget=10_000)
    async with pool.checkout(os_access=access) as session:
        start = time.monotonic()
        assert await session.feed_run('import time\n[time.sleep(3600), time.sleep(2), time.sleep(0.5)]') == [None, None, None]
        assert access.asked == [3600.0, 2.0, 0.5]
        assert time.monotonic() - start < 5
    access = Recorded(budget=0.25)
    async with pool.checkout(os_access=access) as session:
        with pytest.raises(SandboxRuntimeError) as info:
            await session.feed_run('import time\nfor _ in range(3):\n    try:\n        time.sleep(0.125)\n    except BaseException:\n        pass')
        assert str(info.value).splitlines()[-1] == 'TimeoutError: sleep limit exceeded: 0.375 s > 0.25 s'
        assert access.asked == [0.125, 0.125, 0.125]


@pytest.mark.parametrize(
    ('argument', 'error'),
    [
        ('-1', 'ValueError: sleep length must be non-negative'),
        ('float("nan")', 'ValueError: Invalid value NaN (not a number)'),
        ('"1"', "TypeError: 'str' object cannot be interpreted as an integer"),
        ('1e20', 'OverflowError: timestamp out of range for platform time_t'),
        ('10**20', 'OverflowError: timestamp too large to convert to C _PyTime_t'),
    ],
)
async def test_a_length_cpython_refuses_is_refused_as_cpython_does(pool, argument: str, error: str) -> None:
    access = Recorded()
    async with pool.checkout(os_access=access) as session:
        with pytest.raises(SandboxRuntimeError) as info:
            await session.feed_run(f'import time\ntime.sleep({argument})')
        assert str(info.value).splitlines()[-1] == error
        assert access.asked == []
        assert await session.feed_run('time.sleep(True)') is None  # an int (a bool too) is a length
        assert access.asked == [1.0]


@pytest.mark.slow
async def test_the_wall_time_cuts_a_sleep_the_script_cannot_catch(pool) -> None:
    async with pool.checkout(limits=Limits(wall_time=1)) as session:
        start = time.monotonic()
        with pytest.raises(SandboxLimitError) as info:
            await session.feed_run('import time\ntry:\n    time.sleep(30)\nexcept BaseException:\n    pass\n1')
        assert info.value.limit == 'wall_time'
        assert time.monotonic() - start < 5
        assert await session.feed_run('2') == 2  # the worker stopped the script: the session goes on


async def test_a_replayed_session_does_not_sleep_again(tmp_path) -> None:
    first, second = Recorded(), Recorded()
    async with corral.SQLiteStore(tmp_path / 'sessions.db') as store:  # closed: its threads end with it
        async with corral.Pool(store=store) as pool:
            async with pool.checkout(ephemeral=False, os_access=first) as session:
                assert await session.feed_run('import time, asyncio\ntime.sleep(1.5)\nawait asyncio.sleep(2)\nx = 1') is None
                session_id = session.session_id
        assert first.asked == [1.5, 2.0]
        async with corral.Pool(store=store) as pool:  # no checkpoint: the journal is replayed
            async with pool.checkout(session_id=session_id, os_access=second) as session:
                assert await session.feed_run('x') == 1
    assert second.asked == []  # answered from the journal


class Awaited(OsAccess):
    """asyncio.sleep's lengths recorded, each waited a tenth as long."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[float] = []

    def async_sleep(self, seconds: float) -> object:
        self.asked.append(seconds)
        return asyncio.sleep(seconds / 10)


async def test_gathered_async_sleeps_wait_together_in_the_host(pool) -> None:
    access = Awaited()
    code = (
        'import asyncio, time\nt = time.monotonic()\n'
        'r = await asyncio.gather(asyncio.sleep(3, "a"), asyncio.sleep(3, "b"), asyncio.sleep(0, "c"))\n'
        '[r, time.monotonic() - t]'
    )
    async with pool.checkout(os_access=access) as session:
        result, waited = await session.feed_run(code)
        assert result == ['a', 'b', 'c']
        assert 0.3 <= waited < 0.6  # the two waits overlapped
        assert access.asked == [3.0, 3.0]  # a sleep of 0 is CPython's bare yield, in the sandbox
        code = 'async def f():\n    await asyncio.sleep(30)\ntry:\n    await asyncio.wait_for(f(), 0.1)\nexcept TimeoutError:\n    r = "timed out"\nr'
        assert await session.feed_run(code) == 'timed out'


async def test_an_async_sleep_waits_as_a_sleep_unless_overridden(pool) -> None:
    access = Recorded(budget=10_000)
    async with pool.checkout(os_access=access) as session:
        assert await session.feed_run('import asyncio\nasyncio.run(asyncio.sleep(3600, "woken"))') == 'woken'
        assert access.asked == [3600.0]


@pytest.mark.parametrize(
    ('call', 'seconds'),
    [('clock.sleep', -1.0), ('clock.sleep', float('inf')), ('clock.sleep', float('nan')), ('clock.sleep', 1), ('clock.sleep', '1'),
     ('clock.async_sleep', 0.0), ('clock.async_sleep', 1e300)],
)
def test_a_worker_asking_for_a_sleep_no_script_can_ask_for_is_refused(call: str, seconds: object) -> None:
    """The worker's requests are untrusted: a sleep length the sandbox's own checks let through is
    a finite float, not negative (an async one positive), at most CPython's longest."""
    access = Recorded()
    system = SystemCalls(access, [], seed=1)
    assert system.call(call, [seconds]) == [False, ['TypeError', None, f'{call}: a sleep length must be a finite float, {"not negative" if call == "clock.sleep" else "positive"}, not {seconds!r}', None, None]]
    assert access.asked == []
