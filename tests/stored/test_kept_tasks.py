"""Tasks a session keeps between feeds, in stored sessions: a dump, a checkpoint and a replay
rebuild them where they waited, and a feed a limit stops is undone with what it did to them."""

import asyncio

import pytest

import corral

KEY = b'kept-tasks-state-key-0123456789a'

#: A worker task: each time `go` is set it fetches the next number from the host, and it sleeps on
#: a timer of the event loop's clock between rounds.
WORKER = '''
import asyncio
go = asyncio.Event()
seen = []
async def worker():
    n = 0
    while True:
        await go.wait()
        go.clear()
        seen.append((await fetch(n))['twice'])
        n += 1
        await asyncio.sleep(0.05)
task = asyncio.create_task(worker())
len(seen)
'''
#: A feed that lets the worker task run one round.
ROUND = 'go.set()\nawait asyncio.sleep(0.1)\nseen'


@pytest.fixture
def store_url(tmp_path):
    return f'sqlite:///{tmp_path}/store.db'


async def test_a_dumped_session_loads_with_its_tasks_where_they_waited_and_they_go_on(store_url):
    calls = []

    async def fetch(n):
        calls.append(n)
        return {'twice': 2 * n}

    async with corral.Pool(state_key=KEY, store=store_url, checkpoints=None) as pool:
        async with pool.checkout() as session:
            assert await session.feed_run(WORKER, external_lookup={'fetch': fetch}) == 0
            assert await session.feed_run(ROUND, external_lookup={'fetch': fetch}) == [0]
            assert await session.feed_run(ROUND, external_lookup={'fetch': fetch}) == [0, 2]
            state = await session.dump()
        async with pool.checkout() as loaded:
            await loaded.load_session(state)  # replayed: every answer from the journal, no call made again
            assert calls == [0, 1]
            assert await loaded.feed_run('seen, task.done()') == ([0, 2], False)
            assert await loaded.feed_run(ROUND, external_lookup={'fetch': fetch}) == [0, 2, 4]
    assert calls == [0, 1, 2]


@pytest.mark.parametrize('checkpoints', [None, corral.CheckpointLimits()])
async def test_a_stored_session_checked_out_again_has_its_tasks_from_a_checkpoint_or_a_replay(store_url, checkpoints):
    calls = []

    async def fetch(n):
        calls.append(n)
        return {'twice': 2 * n}

    async with corral.Pool(state_key=KEY, store=store_url, checkpoints=checkpoints) as pool:
        async with pool.checkout(ephemeral=False) as session:
            await session.feed_run(WORKER, external_lookup={'fetch': fetch})
            assert await session.feed_run(ROUND, external_lookup={'fetch': fetch}) == [0]
            session_id, pid = session.session_id, session._worker.pid
        async with pool.checkout(session_id=session_id) as again:
            assert (again._worker.pid == pid) is (checkpoints is not None)  # the worker kept, or a new one replayed
            assert await again.feed_run(ROUND, external_lookup={'fetch': fetch}) == [0, 2]
            assert await again.feed_run('task.done()') is False
    assert calls == [0, 1]


async def test_a_stopped_feed_is_undone_with_what_it_did_to_the_kept_tasks(store_url):
    # The stop ends every task (those kept from earlier feeds too) at a point no replay
    # reproduces; a stored session goes back to its state before that feed, tasks included.
    async def fetch(n):
        return {'twice': 2 * n}

    async with corral.Pool(state_key=KEY, store=store_url, checkpoints=None) as pool:
        async with pool.checkout(ephemeral=False, limits=corral.Limits(wall_time=0.5)) as stored:
            await stored.feed_run(WORKER, external_lookup={'fetch': fetch})
            assert await stored.feed_run(ROUND, external_lookup={'fetch': fetch}) == [0]
            with pytest.raises(corral.SandboxLimitError):
                await stored.feed_run('go.set()\nwhile True:\n    pass', external_lookup={'fetch': fetch})
            assert await stored.feed_run('seen, task.done(), go.is_set()') == ([0], False, False)
            assert await stored.feed_run(ROUND, external_lookup={'fetch': fetch}) == [0, 2]
        async with pool.checkout(limits=corral.Limits(wall_time=0.5)) as ephemeral:
            await ephemeral.feed_run(WORKER, external_lookup={'fetch': fetch})
            with pytest.raises(corral.SandboxLimitError):
                await ephemeral.feed_run('while True:\n    pass')
            assert await ephemeral.feed_run('task.done(), task.cancelled()') == (True, True)
