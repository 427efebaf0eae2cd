"""Fixtures for the store tests: one contract, run against a SQLite file and a real PostgreSQL server.

The PostgreSQL server (tests/conftest.py) is started once per test run (initdb in a temporary
directory, a free loopback port) and removed at the end. Without PostgreSQL's binaries the
PostgreSQL tests fail, saying what to install; they are never skipped.
"""

from __future__ import annotations

import dataclasses

import pytest

import corral

from .postgres_server import drop_tables


@dataclasses.dataclass
class Backend:
    """One store's database: `open()` gives a new store on it (as another process would)."""

    name: str
    url: str

    def open(self) -> corral.Store:
        return corral.open_store(self.url)


@pytest.fixture(params=['sqlite', 'postgres'])
async def backend(request, tmp_path):
    if request.param == 'sqlite':
        return Backend('sqlite', f'sqlite://{tmp_path}/sessions.db')
    server = request.getfixturevalue('postgres_server')
    await drop_tables(server.url)
    return Backend('postgres', server.url)


@pytest.fixture
async def store(backend):
    async with backend.open() as store:
        yield store
