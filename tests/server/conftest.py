"""Real `corral serve` processes on loopback, started by the tests, each with a store of its own, and
the stores they share: SQLite files and the test run's PostgreSQL server (tests/conftest.py)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any
from dataclasses import dataclass
from pathlib import Path

import pytest

import corral

from store.postgres_server import drop_tables

pytest.importorskip('uvicorn')
pytest.importorskip('websockets')

#: Seconds a server has to start listening (it imports corral and starts its zygote).
START_SECONDS = 60


@dataclass
class Server:
    url: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


@contextlib.asynccontextmanager
async def serving_app(app: Any, pool: corral.Pool, ws: Any = None) -> AsyncIterator[str]:
    """`app` (a `create_app`) on uvicorn in this process on a free loopback port, `pool` started
    with it and closed after; yields its address, `127.0.0.1:PORT`. `ws`: uvicorn's WebSocket
    protocol, `corral serve`'s (`WebSocketProtocol`, with its direct link) by default."""
    import uvicorn

    from corral.server.listener import WebSocketProtocol

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host='127.0.0.1', port=port, lifespan='on', log_level='warning', ws=ws or WebSocketProtocol))
    await pool.start()
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            assert not task.done(), task
            await asyncio.sleep(0.01)
        yield f'127.0.0.1:{port}'
    finally:
        server.should_exit = True
        await task
        await pool.aclose()


@contextlib.contextmanager
def running_server(folder: Path, *options: str, store: str | None = None) -> Iterator[Server]:
    """A `corral serve` on a free loopback port, stopped (SIGTERM, then SIGKILL) when the block ends."""
    port = free_port()
    log = folder / f'serve-{port}.log'
    store = store or f'sqlite:///{folder}/store.db'
    command = [sys.executable, '-m', 'corral', 'serve', '--port', str(port), '--store', store, *options]
    with log.open('wb') as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=os.environ.copy())
    server = Server(f'ws://127.0.0.1:{port}', port, process, log)
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            if process.poll() is not None:
                raise RuntimeError(f'corral serve exited with {process.returncode}:\n{server.output()}')
            with socket.socket() as sock:
                if sock.connect_ex(('127.0.0.1', port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f'corral serve did not listen within {START_SECONDS} seconds:\n{server.output()}')
            time.sleep(0.05)
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


async def _emptied(url: str) -> str:
    """`url`, its database emptied: a test on PostgreSQL starts from no tables."""
    await drop_tables(url)
    return url


@pytest.fixture(params=['sqlite', 'postgres'])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an empty store: a new SQLite file, or the PostgreSQL server with no tables."""
    if request.param == 'sqlite':
        return f'sqlite://{tmp_path}/sessions.db'
    return await _emptied(request.getfixturevalue('postgres_server').url)


@pytest.fixture
async def store(store_url: str):
    async with corral.open_store(store_url) as store:
        yield store


@pytest.fixture(params=['sqlite', 'postgres'])
async def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of a store that replicas share: a SQLite file, or an emptied PostgreSQL database."""
    if request.param == 'sqlite':
        return f'sqlite:///{tmp_path}/shared.db'
    return await _emptied(request.getfixturevalue('postgres_server').url)


@pytest.fixture(scope='module')
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp('serve')) as running:
        yield running


class Balancer:
    """What a Kubernetes Service does for the replicas behind it, on loopback: each connection goes
    to the first replica (by port, in order) that accepts it. `url` is the address clients use."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self._server: asyncio.Server | None = None
        self.url = ''

    async def __aenter__(self) -> Balancer:
        self._server = await asyncio.start_server(self._handle, '127.0.0.1', 0)
        self.url = f'ws://127.0.0.1:{self._server.sockets[0].getsockname()[1]}'
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for port in self.ports:
            try:
                upstream_reader, upstream_writer = await asyncio.open_connection('127.0.0.1', port)
                break
            except OSError:
                continue
        else:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()
