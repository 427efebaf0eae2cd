"""`StopFeed`: a host function ends the feed at its call with an error of its own, which the script
cannot catch (a host's own budget ran out), and the session goes on."""

from __future__ import annotations

import asyncio
import datetime

import pytest

import corral
from corral import OsAccess, SandboxRuntimeError, StopFeed


def budget(count: int):
    """A host function that answers `count` calls, then stops the feed."""
    calls = 0

    def fetch(url: str) -> str:
        nonlocal calls
        calls += 1
        if calls > count:
            raise StopFeed('RuntimeError', f'call limit {count} exceeded')
        return url

    return fetch


SWALLOW = """
n = 0
while True:
    try:
        fetch('x')
    except BaseException:
        n = -1
    n += 1
"""


async def test_the_script_cannot_catch_it_and_the_session_goes_on(session) -> None:
    with pytest.raises(SandboxRuntimeError) as info:
        await session.feed_run(SWALLOW, external_lookup={'fetch': budget(3)})
    assert (info.value.exc_type, info.value.message) == ('RuntimeError', 'call limit 3 exceeded')
    assert info.value.display().splitlines()[-1] == 'RuntimeError: call limit 3 exceeded'
    assert await session.feed_run('n') == 3  # its handler did not run
    assert await session.feed_run('fetch("y")', external_lookup={'fetch': budget(1)}) == 'y'


async def test_an_async_call_gathered_with_others_stops_the_feed(session) -> None:
    async def slow(x: int) -> int:
        return x

    async def stop(x: int) -> int:
        raise StopFeed('TimeoutError', 'the sleeps passed their budget')

    code = 'import asyncio\ntry:\n    r = await asyncio.gather(slow(1), stop(2), return_exceptions=True)\nexcept BaseException as e:\n    r = e\nr'
    with pytest.raises(SandboxRuntimeError) as info:
        await session.feed_run(code, external_lookup={'slow': slow, 'stop': stop})
    assert (info.value.exc_type, info.value.message) == ('TimeoutError', 'the sleeps passed their budget')
    assert await session.feed_run('1 + 1') == 2


async def test_an_os_access_method_stops_the_feed(pool) -> None:
    class Clock(OsAccess):
        def now(self) -> datetime.datetime:
            raise StopFeed('PermissionError', 'the clock is closed for this session')

    async with pool.checkout(os_access=Clock()) as session:
        with pytest.raises(SandboxRuntimeError) as info:
            await session.feed_run('import time\ntry:\n    time.time()\nexcept Exception:\n    pass\n"on"')
        assert (info.value.exc_type, info.value.message) == ('PermissionError', 'the clock is closed for this session')


async def test_a_stored_session_replays_to_the_same_state(tmp_path) -> None:
    async with corral.SQLiteStore(tmp_path / 'sessions.db') as store:  # closed: its threads end with it
        async with corral.Pool(store=store) as pool:
            async with pool.checkout(ephemeral=False) as session:
                with pytest.raises(SandboxRuntimeError):
                    await session.feed_run(SWALLOW, external_lookup={'fetch': budget(2)})
                session_id = session.session_id
        async with corral.Pool(store=store) as pool:  # another pool replays the journal, the stop with it
            async with pool.checkout(session_id=session_id) as session:
                assert await session.feed_run('n') == 2


@pytest.mark.parametrize('exc_type', ['', 'not a name', '1Error', None])
def test_an_exc_type_that_is_no_exception_name_is_refused(exc_type: object) -> None:
    with pytest.raises(ValueError) as info:
        StopFeed(exc_type, 'm')  # type: ignore[arg-type]
    assert str(info.value) == f'StopFeed exc_type must be an exception name such as RuntimeError, not {exc_type!r}'


@pytest.mark.parametrize(
    ('limits', 'second', 'last_line'),
    [
        (corral.Limits(), 'stop(2)', 'TimeoutError: the sleeps passed their budget'),
        (corral.Limits(host_calls=1), 'slow(2)', 'RuntimeError: the script made more than the host_calls limit of 1 host call'),
        (corral.Limits(wall_time=0.5), 'asyncio.sleep(5)', 'TimeoutError: the script ran past the wall_time limit of 0.5 seconds'),
    ],
    ids=['StopFeed', 'host_calls', 'wall_time'],
)
async def test_a_stop_in_a_gather_the_script_wraps_leaves_nothing_on_its_stderr(pool, limits, second: str, last_line: str) -> None:
    """A stop raised while the feed's task waits in the event loop ends the feed once: asyncio does
    not print the feed task's exception to the script's stderr ("never retrieved")."""

    async def slow(x: int) -> int:
        await asyncio.sleep(0.05)
        return x

    async def stop(x: int) -> int:
        raise StopFeed('TimeoutError', 'the sleeps passed their budget')

    printed: list[tuple[str, str]] = []
    code = f'import asyncio\ntry:\n    r = await asyncio.gather(slow(1), {second}, return_exceptions=True)\nexcept BaseException as e:\n    r = e\nr'
    async with pool.checkout(limits=limits) as session:
        with pytest.raises((SandboxRuntimeError, corral.SandboxLimitError)) as info:
            await session.feed_run(code, external_lookup={'slow': slow, 'stop': stop}, print_callback=lambda stream, text: printed.append((stream, text)))
        assert str(info.value).splitlines()[-1] == last_line
        assert printed == []
        assert await session.feed_run('1 + 1') == 2
