"""Helpers shared by the red-team tests."""

from __future__ import annotations

import contextlib
import os
import pathlib
import socket
import subprocess
from collections.abc import AsyncIterator, Callable
from typing import Any

import corral
from corral.host.workers import WorkerProcess


async def run(pool: corral.Pool, code: str, lookup: dict[str, Callable[..., Any]] | None = None, **checkout: Any) -> Any:
    async with pool.checkout(**checkout) as session:
        return await session.feed_run(code, external_lookup=lookup, print_callback=lambda stream, text: None)


async def refusal(pool: corral.Pool, code: str, lookup: dict[str, Callable[..., Any]] | None = None, **checkout: Any) -> corral.SandboxError:
    """Run an attack that must fail; return the error (the script returned no value)."""
    try:
        value = await run(pool, code, lookup, **checkout)
    except (corral.SandboxSyntaxError, corral.SandboxRuntimeError) as error:
        return error
    raise AssertionError(f'the attack was not refused; it returned {value!r}')


def last_line(error: corral.SandboxError, count: int = 1) -> str:
    """The last line of the error's text (the last `count` lines: an exception and its note)."""
    return '\n'.join(error.display().rstrip('\n').splitlines()[-count:])


def marker_path(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / 'corral-escaped'
    assert not path.exists()
    return path


@contextlib.asynccontextmanager
async def fake_worker_session(pool: corral.Pool, wall_time: float) -> AsyncIterator[tuple[corral.Session, socket.socket]]:
    """A session whose "worker" is the test: yields (session, the worker's end of the channel)."""
    host_end, worker_end = socket.socketpair()
    host_end.setblocking(False)
    sleeper = subprocess.Popen(['sleep', '60'])
    process = WorkerProcess(os.pidfd_open(sleeper.pid), host_end)

    async def take(limits):
        return process

    original = pool._take_worker
    pool._take_worker = take
    try:
        async with pool.checkout(limits=corral.Limits(wall_time=wall_time)) as session:
            yield session, worker_end
    finally:
        pool._take_worker = original
        worker_end.close()
        sleeper.wait(timeout=5)
