"""A warm worker's channel while it waits in the pool: its transport is made there, and a worker
that sends anything or closes its channel before a session takes it is never handed out."""

from __future__ import annotations

import asyncio
import os
import select
import signal
import socket
import subprocess
import sys

import pytest

import corral
from corral.host.workers import WorkerProcess


class _Heard(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.BaseTransport | None = None
        self.data: list[bytes] = []
        self.lost = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.data.append(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.set_result(exc)


@pytest.fixture
def sleeper():
    """A real process to hold a pidfd of (the worker's stand-in: the channel's other end is the test's)."""
    process = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])
    yield process
    process.kill()
    process.wait()


def _worker(process: subprocess.Popen[bytes]) -> tuple[WorkerProcess, socket.socket]:
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    return WorkerProcess(os.pidfd_open(process.pid), ours), theirs


async def _turns(count: int = 3) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


async def test_a_session_takes_the_transport_made_in_the_pool_and_hears_the_worker_through_it(sleeper):
    worker, theirs = _worker(sleeper)
    with theirs:
        await worker.connect()
        made = worker.transport
        assert made is not None and worker.alive()
        heard = _Heard()
        assert worker.take_transport(heard) is made
        assert (heard.transport, worker.transport) == (made, None)
        theirs.sendall(b'reply')
        made.write(b'feed')
        await _turns()
        assert (heard.data, theirs.recv(16)) == ([b'reply'], b'feed')
        made.abort()  # the session's now: it closes the transport, then kills the worker
        worker.kill()
        assert await asyncio.wait_for(heard.lost, 5) is None
        assert worker.sock.fileno() == -1 and sleeper.wait(timeout=5) == -signal.SIGKILL


async def test_a_worker_that_sends_before_any_session_took_it_is_not_alive_nor_taken(sleeper):
    worker, theirs = _worker(sleeper)
    with theirs:
        await worker.connect()
        theirs.sendall(b'\x00\x00\x00\x01\x90')  # a whole frame, which no idle worker sends
        await _turns()
        assert not worker.alive()
        assert worker.take_transport(_Heard()) is None
        worker.kill()
        assert worker.transport is None and worker.sock.fileno() == -1


async def test_a_worker_whose_channel_closed_while_it_waited_is_not_alive(sleeper):
    worker, theirs = _worker(sleeper)
    await worker.connect()
    theirs.close()
    await _turns()
    assert not worker.alive()
    assert worker.take_transport(_Heard()) is None
    worker.kill()


async def test_killing_a_waiting_worker_closes_its_transport(sleeper):
    worker, theirs = _worker(sleeper)
    with theirs:
        await worker.connect()
        made = worker.transport
        worker.kill()
        assert made is not None and made.is_closing() and worker.transport is None
        await _turns()
        assert theirs.recv(16) == b''  # the worker's end sees its channel closed
        assert sleeper.wait(timeout=5) == -signal.SIGKILL


async def test_connecting_a_closed_channel_makes_no_transport(sleeper):
    worker, theirs = _worker(sleeper)
    theirs.close()
    worker.sock.close()
    await worker.connect()
    assert worker.transport is None and not worker.alive()
    worker.kill()


async def test_a_pool_worker_that_died_while_waiting_is_skipped_for_a_fresh_one():
    async with corral.Pool(warm_workers=1) as pool:
        async with pool.checkout():
            await pool._refill
        (idle,) = pool._idle
        assert idle.transport is not None
        signal.pidfd_send_signal(idle.pidfd, signal.SIGKILL)
        await asyncio.sleep(0.05)  # its channel's end reaches the host's event loop
        assert not idle.alive()
        async with pool.checkout() as session:
            assert session._worker is not idle
            assert await session.feed_run('2 + 2') == 4


async def test_a_pool_worker_killed_just_before_a_checkout_is_skipped_without_a_turn_of_the_loop():
    """Killed while the host's event loop has not run since: its transport does not know yet, its
    channel's end does; the checkout takes a fresh worker and runs on it."""
    async with corral.Pool(warm_workers=1) as pool:
        async with pool.checkout():
            await pool._refill
        (idle,) = pool._idle
        signal.pidfd_send_signal(idle.pidfd, signal.SIGKILL)
        assert select.select([idle.sock], [], [], 5)[0] == [idle.sock]  # its channel closed; the event loop not run meanwhile
        assert not idle.transport.is_closing()
        async with pool.checkout() as session:
            assert session._worker is not idle
            assert await session.feed_run('2 + 2') == 4


async def test_a_pool_worker_stopped_while_waiting_fails_its_first_feed_at_its_deadline_and_the_next_checkout_runs():
    """A worker stopped (SIGSTOP) in the pool is alive to the host: the checkout that takes it
    never hangs, its feed fails when the wall_time and grace are past, and the worker is killed."""
    async with corral.Pool(warm_workers=1) as pool:
        async with pool.checkout():
            await pool._refill
        (idle,) = pool._idle
        signal.pidfd_send_signal(idle.pidfd, signal.SIGSTOP)
        async with pool.checkout(limits=corral.Limits(wall_time=0.2, grace=0.2)) as session:
            assert session._worker is idle
            with pytest.raises(corral.SandboxLimitError) as error:
                await asyncio.wait_for(session.feed_run('2 + 2'), 5)
            assert str(error.value) == 'TimeoutError: the script ran past the wall_time limit of 0.2 seconds and was killed'
        assert not idle.alive()
        async with pool.checkout() as session:
            assert await session.feed_run('2 + 2') == 4
