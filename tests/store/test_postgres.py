"""What only the PostgreSQL store does: a server that is unreachable, refuses us, or goes away."""

from __future__ import annotations

import asyncio
import os

import asyncpg
import pytest

import corral
from corral.store import PostgresStore

from .conftest import drop_tables
from .postgres_server import _free_port


def where(server) -> str:
    return f'the PostgreSQL session store at postgresql://corral@127.0.0.1:{server.port}/postgres'


async def test_unreachable_server():
    port = _free_port()
    async with PostgresStore(f'postgresql://corral:secret@127.0.0.1:{port}/postgres', connect_timeout=5) as store:
        with pytest.raises(corral.SandboxStoreError) as info:
            await store.get('s1')
    assert info.value.display() == (
        f'cannot reach the PostgreSQL session store at postgresql://corral@127.0.0.1:{port}/postgres: connection refused'
    )


async def test_wrong_password_is_not_shown(postgres_server):
    url = postgres_server.url.replace(postgres_server.password, 'not-the-password')
    async with PostgresStore(url) as store:
        with pytest.raises(corral.SandboxStoreError) as info:
            await store.list()
    assert info.value.display() == f'{where(postgres_server)} refused the credentials: password authentication failed for user "corral"'


async def test_no_such_database(postgres_server):
    async with PostgresStore(postgres_server.url.replace('/postgres', '/sessions')) as store:
        with pytest.raises(corral.SandboxStoreError) as info:
            await store.list()
    assert info.value.display() == (
        f'the PostgreSQL session store at postgresql://corral@127.0.0.1:{postgres_server.port}/sessions has no such '
        'database: database "sessions" does not exist'
    )


def test_no_default_state_key():
    with pytest.raises(corral.SandboxStateError) as info:
        PostgresStore('postgresql://localhost/x').default_state_key()
    assert info.value.display() == (
        'a PostgreSQL session store keeps no state key: pass Pool(state_key=...), 32 random bytes (e.g. from '
        'secrets.token_bytes(32)) kept outside the database, the same on every machine that shares the store'
    )


async def test_connection_lost_in_the_middle_of_a_put_loses_nothing(postgres_server):
    await drop_tables(postgres_server.url)
    async with PostgresStore(postgres_server.url) as store:
        await store.put('s1', b'old', holder='h', generation=1)
        admin = await asyncpg.connect(postgres_server.url)
        try:
            async with admin.transaction():
                # Hold the row so that the put below waits in the middle of its transaction, its
                # 5 MB sent, until its connection is cut.
                await admin.execute("SELECT 1 FROM corral_sessions WHERE session_id = 's1' FOR UPDATE")
                put = asyncio.create_task(store.put('s1', os.urandom(5 << 20), holder='h', generation=2))
                pid = None
                for _ in range(400):
                    pid = await admin.fetchval(
                        "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
                    )
                    if pid:
                        break
                    await asyncio.sleep(0.05)
                assert pid, 'the put never reached the locked row'
                assert await admin.fetchval('SELECT pg_terminate_backend($1)', pid)
                with pytest.raises(corral.SandboxStoreError) as info:
                    await put
        finally:
            await admin.close()
        assert info.value.display() == (
            f'lost the connection to {where(postgres_server)} (connection was closed in the middle of operation: '
            'terminating connection due to administrator command); '
            'a write in flight was committed whole or not at all'
        )
        assert (await store.get('s1')).state == b'old'  # the next call has a new connection, and the old state


async def test_server_gone_and_back(postgres_server):
    await drop_tables(postgres_server.url)
    async with PostgresStore(postgres_server.url, connect_timeout=5) as store:
        await store.put('s1', b'kept', holder='h', generation=1)
        postgres_server.stop()
        try:
            await asyncio.sleep(0.2)  # the pool hears its connections close
            with pytest.raises(corral.SandboxStoreError) as info:
                await store.put('s1', b'new', holder='h', generation=2)
            assert info.value.display() == f'cannot reach {where(postgres_server)}: connection refused'
        finally:
            postgres_server.start(same_port=True)
        assert (await store.get('s1')).state == b'kept'
        await store.put('s1', b'new', holder='h', generation=2)
        assert (await store.get('s1')).state == b'new'


async def test_a_server_that_does_not_answer_in_time(postgres_server):
    await drop_tables(postgres_server.url)
    async with PostgresStore(postgres_server.url, command_timeout=0.5) as store:
        await store.put('s1', b'old', holder='h', generation=1)
        admin = await asyncpg.connect(postgres_server.url)
        try:
            async with admin.transaction():
                await admin.execute("SELECT 1 FROM corral_sessions WHERE session_id = 's1' FOR UPDATE")
                with pytest.raises(corral.SandboxStoreError) as info:
                    await store.put('s1', b'new', holder='h', generation=2)  # waits for the row past its command_timeout
        finally:
            await admin.close()
        assert info.value.display() == (
            f'{where(postgres_server)} did not answer in time (connect_timeout 10 s, command_timeout 0.5 s); '
            'a write in flight was committed whole or not at all'
        )
        assert (await store.get('s1')).state == b'old'
        await store.put('s1', b'new', holder='h', generation=2)
        assert (await store.get('s1')).state == b'new'
