"""A deferred call is answered once: the answers a resumption gives are stored before they reach the
worker, so a resumed feed that is stopped (wall_time, cpu_time, a dead worker, a host that dies)
leaves the stored session at its state before that feed, with the call answered for good, and the
same answer given again, to this session or to any later checkout of it, is refused. Run against
the SQLite store and a real PostgreSQL server.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import corral

KEY = b'test-state-key-0123456789abcdef!'
CHILD = str(Path(__file__).parent / 'child.py')
#: The script pauses on `send_email`, then goes on with whatever the stop is made of.
PAUSE = 'x = 1\nsent = send_email("a@b.c")\n'
STOPS = {
    'wall_time': (corral.Limits(wall_time=1), 'while True:\n    pass'),
    'cpu_time': (corral.Limits(cpu_time=1, wall_time=30), 'while True:\n    pass'),
    'dead worker': (corral.Limits(), 'import time\ntime.sleep(30)'),
}
WHY = {
    'wall_time': 'feed 2 was stopped by the wall_time limit at a point no replay can reproduce',
    'cpu_time': 'feed 2 was stopped by the cpu_time limit at a point no replay can reproduce',
    'dead worker': 'feed 2 was stopped by SandboxWorkerError at a point no replay can reproduce',
}
STORED_WHY = 'the feed that took them went on and did not end (a limit or a dead worker stopped it, or its host stopped)'


@pytest.fixture
async def pool(url):
    async with corral.Pool(state_key=KEY, store=url, warm_workers=0) as pool:
        yield pool


def send_email(to):
    raise corral.Deferred({'to': to})


TOOLS = {'send_email': send_email}


def answered_text(why: str) -> str:
    return (
        f'call id(s) [0] were answered already: {why}, so the session went back to its state before that feed '
        'and the calls are not pending any more; a call is answered once'
    )


async def paused_session(pool, stop: str) -> str:
    """A stored session whose second feed paused on `send_email` (call 0): its id."""
    limits, rest = STOPS[stop]
    async with pool.checkout(ephemeral=False, limits=limits) as session:
        await session.feed_run('before = 1')
        with pytest.raises(corral.SandboxPaused):
            await session.feed_run(PAUSE + rest, external_lookup=TOOLS)
        return session.session_id


@pytest.mark.slow
@pytest.mark.parametrize('stop', list(STOPS))
async def test_an_answer_whose_feed_is_stopped_is_not_taken_again_here_or_in_a_later_checkout(pool, stop):
    session_id = await paused_session(pool, stop)
    async with pool.checkout(session_id=session_id, limits=STOPS[stop][0]) as session:
        assert [call.call_id for call in session.pending_calls] == [0]
        if stop == 'dead worker':
            asyncio.get_running_loop().call_later(0.5, os.kill, session._worker.pid, signal.SIGKILL)
        with pytest.raises(corral.SandboxLimitError if stop != 'dead worker' else corral.SandboxWorkerError):
            await session.resume({0: 'sent'}, external_lookup=TOOLS)
        assert session.alive and not session.paused and session.pending_calls == []
        with pytest.raises(RuntimeError) as again:
            await session.resume({0: 'sent'})
        assert str(again.value) == answered_text(f'the feed went on with the answers and was stopped ({WHY[stop]})')
        assert await session.feed_run('before') == 1
        with pytest.raises(corral.SandboxRuntimeError):
            await session.feed_run('x')  # the stopped feed is undone
    async with pool.checkout(session_id=session_id) as later:
        assert not later.paused and later.pending_calls == []
        assert await later.feed_run('before') == 1


@pytest.mark.slow
async def test_a_later_checkout_refuses_the_same_answer_again_naming_the_call(pool):
    session_id = await paused_session(pool, 'wall_time')
    async with pool.checkout(session_id=session_id, limits=STOPS['wall_time'][0]) as session:
        with pytest.raises(corral.SandboxLimitError):
            await session.resume({0: 'sent'}, external_lookup=TOOLS)
    for answer in ({'values': {0: 'sent'}}, {'errors': {0: PermissionError('no')}}):
        async with pool.checkout(session_id=session_id) as later:
            with pytest.raises(RuntimeError) as again:
                await later.resume(**answer)
            assert str(again.value) == answered_text(STORED_WHY)
            assert later.alive
    async with pool.checkout(session_id=session_id) as later:  # a feed after the refusal: the note goes
        assert await later.feed_run('before + 1') == 2
    async with pool.checkout(session_id=session_id) as later:
        with pytest.raises(RuntimeError) as not_paused:
            await later.resume({0: 'sent'})
        assert str(not_paused.value) == 'this session is not paused: resume() answers the deferred calls of a paused feed'


@pytest.mark.slow
async def test_answers_are_stored_before_they_reach_the_worker(pool, url):
    """What the store holds while the resumed feed runs: the session before the paused feed, call 0 answered."""
    session_id = await paused_session(pool, 'wall_time')
    seen = []

    async def look():
        async with corral.Pool(state_key=KEY, store=url, warm_workers=0) as other:
            async with other.checkout(session_id=session_id, fork=True) as fork:
                with pytest.raises(RuntimeError) as again:
                    await fork.resume({0: 'sent'})
                seen.append(str(again.value))
                seen.append((fork.paused, await fork.feed_run('before')))

    async with pool.checkout(session_id=session_id, limits=corral.Limits(wall_time=10)) as session:
        task = asyncio.ensure_future(session.resume({0: 'sent'}, external_lookup=TOOLS))  # on into its loop
        await asyncio.sleep(0.5)
        await look()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert seen == [answered_text(STORED_WHY), (False, 1)]


async def test_a_resumed_feed_that_ends_or_pauses_again_is_stored_whole(pool):
    asked = []

    def approve(what):
        asked.append(what)
        raise corral.Deferred()

    async with pool.checkout(ephemeral=False) as session:
        with pytest.raises(corral.SandboxPaused):
            await session.feed_run('a = approve("one")\nb = approve("two")\n[a, b]', external_lookup={'approve': approve})
        session_id = session.session_id
    async with pool.checkout(session_id=session_id) as session:
        with pytest.raises(corral.SandboxPaused) as second:
            await session.resume({0: 1}, external_lookup={'approve': approve})
        assert [call.call_id for call in second.value.calls] == [1]
    async with pool.checkout(session_id=session_id) as session:
        assert [call.call_id for call in session.pending_calls] == [1]
        with pytest.raises(KeyError):
            await session.resume({0: 1})
        assert await session.resume({1: 2}) == [1, 2]
    async with pool.checkout(session_id=session_id) as session:
        assert await session.feed_run('[a, b]') == [1, 2]
    assert asked == ['one', 'two']


@pytest.mark.slow
async def test_a_host_that_dies_after_its_answer_went_in_leaves_the_call_answered(tmp_path):
    """The host process is killed while the resumed feed runs: a new one finds the call answered."""
    store = tmp_path / 'store.db'
    url = f'sqlite://{store}'
    async with corral.Pool(state_key=KEY, store=url, warm_workers=0) as pool:
        session_id = await paused_session(pool, 'wall_time')
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join(sys.path)}
    child = subprocess.Popen(
        [sys.executable, CHILD, 'answer', str(store), session_id], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert child.stdout.readline() == 'answered\n'
    finally:
        child.kill()
        child.wait()
    async with corral.Pool(state_key=KEY, store=url, warm_workers=0, lease_ttl=1.0) as pool:
        for _ in range(100):  # the dead host's lease runs out
            try:
                async with pool.checkout(session_id=session_id) as later:
                    with pytest.raises(RuntimeError) as again:
                        await later.resume({0: 'sent'})
                    assert str(again.value) == answered_text(STORED_WHY)
                    assert await later.feed_run('before') == 1
                break
            except corral.SandboxSessionBusyError:
                await asyncio.sleep(0.1)
        else:
            pytest.fail('the lease of the dead host never ran out')


async def test_a_resumption_with_no_answers_leaves_the_pause_stored(pool, url):
    """Nothing is written: a host that died in the meantime would otherwise leave the pause lost."""
    session_id = await paused_session(pool, 'wall_time')
    async with corral.open_store(url) as store:
        generation = (await store.get(session_id)).generation
        async with pool.checkout(session_id=session_id) as session:
            with pytest.raises(corral.SandboxPaused) as again:
                await session.resume({})
            assert [call.call_id for call in again.value.calls] == [0]
        assert (await store.get(session_id)).generation == generation + 1  # the pause again, and only that
    async with pool.checkout(session_id=session_id) as later:
        assert [call.call_id for call in later.pending_calls] == [0]


async def test_the_files_a_stopped_resumed_feed_wrote_are_gone_here_and_in_the_store(pool, tmp_path):
    (tmp_path / 'data').mkdir()
    mount = corral.Mount(tmp_path / 'data', '/data')
    code = "open('/data/before.txt', 'w').write('b')\nsent = send_email('a@b.c')\nwhile True:\n    pass"
    read = "import os\nsorted(os.listdir('/data'))"
    async with pool.checkout(ephemeral=False, mounts=mount, limits=corral.Limits(wall_time=1)) as session:
        with pytest.raises(corral.SandboxPaused) as paused:
            await session.feed_run(code, external_lookup=TOOLS)
        with pytest.raises(corral.SandboxLimitError):
            await session.resume({paused.value.calls[0].call_id: 'sent'})
        session_id = session.session_id
    async with pool.checkout(session_id=session_id, mounts=mount) as later:  # as the store has it right after the stop
        assert await later.feed_run(read) == []
    assert list((tmp_path / 'data').iterdir()) == []
