"""Fixtures for the server tests: the tenant tables on a SQLite file and on a real PostgreSQL server
(started once per test run, as the store tests start theirs)."""

from __future__ import annotations

import asyncpg
import pytest

import corral

from store.postgres_server import PostgresServer

#: Every table a store creates: a test on PostgreSQL starts from an empty database.
TABLES = 'corral_sessions, corral_leases, corral_api_keys, corral_tenants, corral_tenant_sessions, corral_tenant_cpu'


@pytest.fixture(scope='session')
def postgres_server():
    try:
        server = PostgresServer()
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)
    try:
        server.start()
        yield server
    finally:
        server.remove()


@pytest.fixture(params=['sqlite', 'postgres'])
async def store_url(request, tmp_path):
    """The URL of an empty store: a new SQLite file, or the PostgreSQL server with no tables."""
    if request.param == 'sqlite':
        return f'sqlite://{tmp_path}/sessions.db'
    server = request.getfixturevalue('postgres_server')
    connection = await asyncpg.connect(server.url)
    try:
        await connection.execute(f'DROP TABLE IF EXISTS {TABLES}')
    finally:
        await connection.close()
    return server.url


@pytest.fixture
async def store(store_url):
    async with corral.open_store(store_url) as store:
        yield store
