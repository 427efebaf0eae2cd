"""Replicas sharing one store: a session stored through one resumes through another, and a feed
cut short by a replica that drains or dies finishes on another with each host call made once."""

from __future__ import annotations

import asyncio
import signal

import pytest

import corral
from corral import RemotePool

from .conftest import Balancer, running_server


def key_file(folder) -> str:
    """A state key every replica is given: a PostgreSQL store keeps none of its own."""
    path = folder / 'state.key'
    path.write_bytes(b'k' * 32)
    return str(path)


@pytest.mark.slow
async def test_a_session_stored_through_one_replica_resumes_through_another(tmp_path, shared_store):
    store = shared_store
    key = ('--state-key-file', key_file(tmp_path))
    with running_server(tmp_path, *key, store=store) as a, running_server(tmp_path, *key, store=store) as b:
        async with RemotePool(a.url) as pool, pool.checkout(ephemeral=False) as session:
            await session.feed_run('x = [1, 2]')
            session_id = session.session_id
        async with RemotePool(b.url) as pool, pool.checkout(session_id=session_id) as session:
            assert await session.feed_run('x + [3]') == [1, 2, 3]


@pytest.mark.slow
async def test_a_replica_killed_mid_feed(tmp_path, shared_store):
    store = shared_store
    key = ('--state-key-file', key_file(tmp_path), '--lease-ttl', '2')
    with running_server(tmp_path, *key, store=store) as a, running_server(tmp_path, *key, store=store) as b:
        calls = []

        async def step(name: str) -> str:
            calls.append(name)
            if name == 'two':  # the replica running the feed dies before this answer reaches it
                a.process.kill()
            return name.upper()

        async with Balancer([a.port, b.port]) as service, RemotePool(service.url) as pool, pool.checkout(ephemeral=False) as session:
            await session.feed_run('x = 1')
            value = await session.feed_run("a = await step('one')\nb = await step('two')\nx = 2\na + b", external_lookup={'step': step})
            assert (value, calls) == ('ONETWO', ['one', 'two'])  # finished on the other replica, each call once
            assert await session.feed_run('x') == 2
        assert a.process.wait() == -signal.SIGKILL


@pytest.mark.slow
async def test_a_replica_killed_mid_resumption_leaves_its_answer_given(tmp_path, shared_store):
    store = shared_store
    key = ('--state-key-file', key_file(tmp_path), '--lease-ttl', '2')
    with running_server(tmp_path, *key, store=store) as a, running_server(tmp_path, *key, store=store) as b:
        calls = []

        def approve() -> str:
            raise corral.Deferred()

        async def step(name: str) -> str:
            calls.append(name)
            a.process.kill()  # the replica running the resumed feed dies before this answer reaches it
            return name.upper()

        tools = {'approve': approve, 'step': step}
        async with Balancer([a.port, b.port]) as service, RemotePool(service.url) as pool, pool.checkout(ephemeral=False) as session:
            await session.feed_run('x = 1')
            with pytest.raises(corral.SandboxPaused):
                await session.feed_run("x = 2\nok = approve()\nawait step('two')", external_lookup=tools)
            with pytest.raises(RuntimeError) as again:
                await session.resume({0: 'yes'}, external_lookup=tools)
            assert str(again.value) == (
                'call id(s) [0] were answered already: the feed that took them went on and did not end (a limit or a dead worker '
                'stopped it, or its host stopped), so the session went back to its state before that feed and the calls are not '
                'pending any more; a call is answered once'
            )
            assert calls == ['two']
            assert await session.feed_run('x') == 1
        assert a.process.wait() == -signal.SIGKILL


@pytest.mark.slow
async def test_a_drained_replica_hands_its_sessions_to_another(tmp_path, shared_store):
    store = shared_store
    key = ('--state-key-file', key_file(tmp_path))
    with running_server(tmp_path, *key, '--drain-grace', '0.2', store=store) as a, running_server(tmp_path, *key, store=store) as b:
        calls = []

        async def step(name: str) -> str:
            calls.append(name)
            if name == 'two':  # the replica is told to stop, and its grace runs out while this call runs
                a.process.send_signal(signal.SIGTERM)
                await asyncio.sleep(1.0)
            return name.upper()

        async with Balancer([a.port, b.port]) as service, RemotePool(service.url) as pool:
            async with pool.checkout(ephemeral=False) as stored, pool.checkout() as ephemeral:
                await ephemeral.feed_run('y = 5')
                value = await stored.feed_run("a = await step('one')\nb = await step('two')\na + b", external_lookup={'step': step})
                assert (value, calls) == ('ONETWO', ['one', 'two'])
                assert await ephemeral.feed_run('y + 1') == 6  # its state travelled with the drain
                await asyncio.to_thread(a.process.wait, 30)
                assert await stored.feed_run('b') == 'TWO'
        assert a.process.returncode == -signal.SIGTERM  # uvicorn ends with the signal it was stopped by, once it has drained
        assert 'Traceback' not in a.output()


async def test_an_ephemeral_session_on_a_killed_replica_is_lost_with_a_clear_error(tmp_path):
    with running_server(tmp_path) as a:
        async with RemotePool(a.url, resume_timeout=1) as pool, pool.checkout() as session:
            await session.feed_run('x = 1')
            a.process.kill()
            await asyncio.to_thread(a.process.wait)
            try:
                await session.feed_run('x')
            except corral.SandboxWorkerError as error:
                text = str(error)
    assert text == 'this session cannot run scripts: the connection to the corral server was lost (no close frame); check out a new session'


async def test_a_retried_feed_that_takes_another_path_names_the_calls_it_did_not_make_again(server):
    from websockets.asyncio.client import connect

    from corral.server import protocol

    held = [['step', ['one'], {}, 'ok', 'ONE'], ['step', ['two'], {'loud': True}, 'ok', 'TWO']]
    async with connect(server.url + protocol.PATH, compression=None) as ws:
        await ws.send(protocol.encode([protocol.OPEN, protocol.PROTOCOL_VERSION, {}]))
        assert protocol.decode(await ws.recv())[0] == protocol.OPENED
        await ws.send(protocol.encode([protocol.FEED, "await step('one')", {'step': True}, {}, held]))
        response = protocol.decode(await ws.recv())
    assert response == [
        protocol.ERROR,
        'SandboxWorkerError',
        "the feed was taken up again on another server after the first went away, and took another path: step('two', loud=True) "
        'ran once in your process during the first attempt, but the second attempt did not call it again; the feed ran, '
        'but the effects of those calls are not in its result',
        {},
        [],
    ]


@pytest.mark.slow
async def test_a_session_fed_within_its_idle_timeout_is_not_parked(tmp_path):
    # each request is taken as its frame is parsed, while the server's wait for the next frame goes
    # on: the request restarts that wait's idle time, as a frame the wait itself took does
    with running_server(tmp_path, '--idle-timeout', '0.5') as a:
        async with RemotePool(a.url) as pool, pool.checkout() as session:
            for i in range(8):
                assert await session.feed_run(f'x = {i}\nx') == i
                await asyncio.sleep(0.25)
                assert session._lost is None


@pytest.mark.slow
async def test_an_idle_session_is_parked_and_taken_up_again_when_next_used(tmp_path):
    with running_server(tmp_path, '--idle-timeout', '0.5') as a:
        async with RemotePool(a.url) as pool, pool.checkout() as ephemeral, pool.checkout(ephemeral=False) as stored:
            await ephemeral.feed_run('x = 1')
            await stored.feed_run('y = 2')
            for _ in range(200):  # the server parks both (bounded wait)
                if ephemeral._lost is not None and stored._lost is not None:
                    break
                await asyncio.sleep(0.05)
            assert str(ephemeral._lost) == 'this session cannot run scripts: the corral server let it go (the session was idle for 0.5 seconds); check out a new session'
            assert (await ephemeral.feed_run('x + 1'), await stored.feed_run('y + 1')) == (2, 3)
