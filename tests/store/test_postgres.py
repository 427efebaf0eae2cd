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


def lost(server) -> str:
    return (
        f'lost the connection to {where(server)} (connection was closed in the middle of operation: '
        'terminating connection due to administrator command); a write in flight was committed whole or not at all'
    )


async def waiting(admin: asyncpg.Connection) -> int:
    """The pid of the server process of a store call waiting for a lock that `admin` holds."""
    for _ in range(400):
        pid = await admin.fetchval("SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()")
        if pid:
            return pid
        await asyncio.sleep(0.05)
    raise AssertionError('the store call never reached the locked row')


async def rows(admin: asyncpg.Connection, session_id: str) -> tuple[list[tuple], list[tuple], list[str]]:
    """What the tables hold of `session_id`: (state, generation), (generation, record), holder."""
    return (
        [tuple(r) for r in await admin.fetch('SELECT state, generation FROM corral_sessions WHERE session_id = $1', session_id)],
        [tuple(r) for r in await admin.fetch('SELECT generation, record FROM corral_records WHERE session_id = $1 ORDER BY generation', session_id)],
        [r[0] for r in await admin.fetch('SELECT holder FROM corral_leases WHERE session_id = $1', session_id)],
    )


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
                assert await admin.fetchval('SELECT pg_terminate_backend($1)', await waiting(admin))
                with pytest.raises(corral.SandboxStoreError) as info:
                    await put
        finally:
            await admin.close()
        assert info.value.display() == lost(postgres_server)
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


# A new session's first write (taking its lease), an append and a full state are each one statement,
# so one transaction: a connection cut after its first part (the lease inserted, the generation moved
# on) and before its last (waiting for a row another transaction holds) leaves none of it.


async def test_a_first_write_cut_after_its_lease_leaves_no_lease_and_no_state(postgres_server):
    await drop_tables(postgres_server.url)
    async with PostgresStore(postgres_server.url) as store:
        await store.list()  # the tables
        admin = await asyncpg.connect(postgres_server.url)
        try:
            held = admin.transaction()
            await held.start()
            await admin.execute("INSERT INTO corral_sessions VALUES ('', 'f1', 'theirs', now(), 1)")  # not committed
            put = asyncio.create_task(store.put('f1', b'fork', holder='h1', generation=1, ttl=1000))
            assert await admin.fetchval('SELECT pg_terminate_backend($1)', await waiting(admin))
            with pytest.raises(corral.SandboxStoreError) as info:
                await put
            await held.rollback()
            assert info.value.display() == lost(postgres_server)
            assert await rows(admin, 'f1') == ([], [], [])
            await store.put('f1', b'fork', holder='h1', generation=1, ttl=1000)
            assert await rows(admin, 'f1') == ([(b'fork', 1)], [], ['h1'])
        finally:
            await admin.close()


async def test_a_first_write_that_finds_its_id_stored_meanwhile_gives_its_lease_back(postgres_server):
    """The id stored by a writer that took no lease, committed while the first write waits: its
    lease was taken, its state not; the lease is given back and the write refused as stored."""
    await drop_tables(postgres_server.url)
    async with PostgresStore(postgres_server.url) as store:
        await store.list()
        admin = await asyncpg.connect(postgres_server.url)
        try:
            async with admin.transaction():
                await admin.execute("INSERT INTO corral_sessions VALUES ('', 'f1', 'theirs', now(), 1)")
                put = asyncio.create_task(store.put('f1', b'fork', holder='h1', generation=1, ttl=1000))
                await waiting(admin)
            with pytest.raises(corral.SandboxSessionBusyError) as info:
                await put
            assert info.value.display() == (
                "the stored session 'f1' was written by another holder since this one loaded it (the store is at "
                'generation 1; this write follows generation 0): nothing was written; check the session out again'
            )
            assert await rows(admin, 'f1') == ([(b'theirs', 1)], [], [])
        finally:
            await admin.close()


async def test_an_append_cut_after_its_generation_leaves_the_generation_and_no_record(postgres_server):
    await drop_tables(postgres_server.url)
    async with PostgresStore(postgres_server.url) as store:
        await store.put('s1', b'old', holder='h1', generation=1)
        admin = await asyncpg.connect(postgres_server.url)
        try:
            held = admin.transaction()
            await held.start()
            await admin.execute("INSERT INTO corral_records VALUES ('', 's1', 2, 'theirs')")  # the append's key, not committed
            append = asyncio.create_task(store.append('s1', b'mine', holder='h1', generation=2))
            assert await admin.fetchval('SELECT pg_terminate_backend($1)', await waiting(admin))
            with pytest.raises(corral.SandboxStoreError) as info:
                await append
            await held.rollback()
            assert info.value.display() == lost(postgres_server)
            assert await rows(admin, 's1') == ([(b'old', 1)], [], [])
            await store.append('s1', b'mine', holder='h1', generation=2)
            assert await store.get('s1') == corral.StoredState(b'old', [b'mine'], 2)
        finally:
            await admin.close()


async def test_a_write_cancelled_while_it_waits_writes_nothing_and_its_connection_serves_on(postgres_server):
    """A connection goes back to the pool without asyncpg's reset query: a call cancelled while
    its statement waits leaves the next calls on that pool a clean connection."""
    await drop_tables(postgres_server.url)
    async with PostgresStore(postgres_server.url, max_size=1) as store:
        await store.put('s1', b'old', holder='h1', generation=1)
        admin = await asyncpg.connect(postgres_server.url)
        try:
            async with admin.transaction():
                await admin.execute("SELECT 1 FROM corral_sessions WHERE session_id = 's1' FOR UPDATE")
                for write in (store.append('s1', b'r', holder='h1', generation=2), store.put('s1', b'new', holder='h1', generation=2)):
                    task = asyncio.create_task(write)
                    await waiting(admin)
                    task.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await task
            assert await store.get('s1') == corral.StoredState(b'old', [], 1)
            await store.append('s1', b'r', holder='h1', generation=2)
            await store.put('s1', b'new', holder='h1', generation=3)
            assert await store.get('s1') == corral.StoredState(b'new', [], 3)
            assert await rows(admin, 's1') == ([(b'new', 3)], [], [])
        finally:
            await admin.close()


async def test_a_lease_alone_commits_unflushed_and_states_flushed(postgres_server):
    """A lease taken, renewed or given back in a statement of its own turns synchronous_commit off
    for its transaction only; a state's write (and a lease taken with it) leaves it on."""
    from corral.store.postgres import (
        _APPEND,
        _PUT_NEW_WITH_LEASE,
        _PUT_NEXT,
        _RELEASE,
        _RENEW,
        _TAKE_LEASE,
        _TAKE_LEASE_AND_READ,
        _TAKE_LEASE_UNFLUSHED,
    )

    await drop_tables(postgres_server.url)
    async with PostgresStore(postgres_server.url) as store:
        await store.list()
    db = await asyncpg.connect(postgres_server.url)
    try:
        for statement, args, during in (
            (_TAKE_LEASE_UNFLUSHED, ('', 's1', 'h1', 30.0), 'off'),
            (_RENEW, ('', 's1', 'h1', 30.0), 'off'),
            (_TAKE_LEASE_AND_READ, ('', 's1', 'h1', 30.0), 'off'),
            (_RELEASE, ('', 's1', 'h1'), 'off'),
            (_TAKE_LEASE, ('', 's2', 'h1', 30.0), 'on'),
            (_PUT_NEW_WITH_LEASE, ('', 's3', 'h1', 30.0, b'x'), 'on'),
            (_APPEND, ('', 's3', 'h1', 2, b'r'), 'on'),
            (_PUT_NEXT, ('', 's3', 'h1', 3, b'y'), 'on'),
        ):
            async with db.transaction():
                await db.execute(statement, *args)
                assert await db.fetchval('SHOW synchronous_commit') == during
            assert await db.fetchval('SHOW synchronous_commit') == 'on'
        assert await rows(db, 's1') == ([], [], [])  # taken, renewed, read and given back
        assert await rows(db, 's3') == ([(b'y', 3)], [], ['h1'])
    finally:
        await db.close()


async def test_no_call_makes_a_new_connection_ask_the_server_for_a_codec(postgres_server):
    """asyncpg asks the server for the codec of a type it does not know (an array of bytea) once per
    connection, in three more round trips and 10-17 ms: the first read of each new connection."""
    await drop_tables(postgres_server.url)
    async with PostgresStore(postgres_server.url, max_size=1) as store:
        await store.put('s1', b'full', holder='h1', generation=1, ttl=30)
        await store.append('s1', b'r2', holder='h1', generation=2)
        assert await store.get('s1') == corral.StoredState(b'full', [b'r2'], 2)
        await store.renew('s1', holder='h1', ttl=30)
        assert await store.acquire_and_get('s1', holder='h1', ttl=30) == corral.StoredState(b'full', [b'r2'], 2)
        await store.put('s1', b'next', holder='h1', generation=3)
        await store.release('s1', holder='h1')
        await store.acquire('s1', holder='h2', ttl=30)
        assert await store.list() == ['s1']
        assert await store.delete_untouched(3600) == []
        await store.delete('s1', holder='h2')

        async def asked(db: asyncpg.Connection) -> list[str]:
            return [row[0] for row in await db.fetch("SELECT statement FROM pg_prepared_statements WHERE strpos(statement, 'typeinfo' || '_tree') > 0")]

        assert await store._run(asked) == []


async def test_a_checkout_by_id_reads_what_a_holder_wrote_before_giving_its_lease_up_meanwhile(postgres_server):
    """The lease and the rows are one statement, whose snapshot is taken before its lease: a holder
    that writes and gives its lease up while the statement waits for the lease row is not missed."""
    await drop_tables(postgres_server.url)
    async with PostgresStore(postgres_server.url) as store:
        await store.put('s1', b'full', holder='h1', generation=1, ttl=1000)
        admin = await asyncpg.connect(postgres_server.url)
        try:
            async with admin.transaction():  # h1's last append and its release, committed while h2 waits
                await admin.execute("UPDATE corral_sessions SET generation = 2 WHERE session_id = 's1'")
                await admin.execute("INSERT INTO corral_records VALUES ('', 's1', 2, 'r2')")
                await admin.execute("DELETE FROM corral_leases WHERE session_id = 's1'")
                taken = asyncio.create_task(store.acquire_and_get('s1', holder='h2', ttl=1000))
                await waiting(admin)
            assert await taken == corral.StoredState(b'full', [b'r2'], 2)
            assert await rows(admin, 's1') == ([(b'full', 2)], [(2, b'r2')], ['h2'])
        finally:
            await admin.close()


async def test_two_stores_racing_one_fork_id_leave_one_winner_and_the_others_refusal_each_time(postgres_server):
    """Two stores (as two processes: each its own connections) write the first state of the same
    new id with a lease at once, round after round: one writes its state and holds the lease, the
    other is refused as busy and leaves nothing of its own; a checkout by id of a third holder, and
    an append of the loser, racing the winner's append, are refused with the same text."""
    await drop_tables(postgres_server.url)
    async with PostgresStore(postgres_server.url) as one, PostgresStore(postgres_server.url) as two:
        await one.list()
        admin = await asyncpg.connect(postgres_server.url)
        try:
            for n in range(12):
                session_id = f'race{n}'
                busy = f"the stored session '{session_id}' is checked out elsewhere: another holder has its lease, which expires in 1000 s unless that holder renews it"
                results = await asyncio.gather(
                    one.put(session_id, b'one', holder='h1', generation=1, ttl=1000),
                    two.put(session_id, b'two', holder='h2', generation=1, ttl=1000),
                    return_exceptions=True,
                )
                winner = [i for i, result in enumerate(results) if result is None]
                assert len(winner) == 1, results
                loser = results[1 - winner[0]]
                held, other = ('h1', 'h2') if winner == [0] else ('h2', 'h1')
                assert type(loser) is corral.SandboxSessionBusyError
                assert loser.display() == busy
                assert await rows(admin, session_id) == ([(b'one' if held == 'h1' else b'two', 1)], [], [held])
                store = one if held == 'h1' else two
                appended, taken, stale = await asyncio.gather(
                    store.append(session_id, b'r2', holder=held, generation=2),
                    (two if store is one else one).acquire_and_get(session_id, holder='h3', ttl=1000),
                    (two if store is one else one).append(session_id, b'theirs', holder=other, generation=2),
                    return_exceptions=True,
                )
                assert appended is None
                assert [type(taken), type(stale)] == [corral.SandboxSessionBusyError] * 2
                assert (taken.display(), stale.display()) == (busy, busy)
                assert await rows(admin, session_id) == ([(b'one' if held == 'h1' else b'two', 2)], [(2, b'r2')], [held])
        finally:
            await admin.close()


async def test_a_holder_whose_lease_lapsed_writes_nothing_in_one_statement_or_step_by_step(postgres_server):
    """A holder whose lease lapsed and was taken by another has its full state and its append
    refused as busy while the other holds it, and as stale once the other wrote and gave it up;
    another tenant's writer and checkout of the same id find none of it (its own tenant's store is
    at generation 0). Nothing of theirs is kept, no lease of theirs left."""
    await drop_tables(postgres_server.url)
    async with PostgresStore(postgres_server.url) as one, PostgresStore(postgres_server.url) as two:
        await one.put('s1', b'first', holder='h1', generation=1, ttl=0.2)
        await asyncio.sleep(0.4)
        assert await two.acquire_and_get('s1', holder='h2', ttl=1000) == corral.StoredState(b'first', [], 1)
        busy = "the stored session 's1' is checked out elsewhere: another holder has its lease, which expires in 1000 s unless that holder renews it"
        lost_lease = "the lease on the stored session 's1' was lost: it expired and another holder took it over, or it was released"
        for write, text in [
            (one.put('s1', b'late', holder='h1', generation=2), busy),
            (one.append('s1', b'late', holder='h1', generation=2), busy),
            (one.renew('s1', holder='h1', ttl=10), lost_lease),
        ]:
            with pytest.raises(corral.SandboxSessionBusyError) as info:
                await write
            assert info.value.display() == text
        await two.append('s1', b'r2', holder='h2', generation=2)
        await two.release('s1', holder='h2')
        stale = (
            "the stored session 's1' was written by another holder since this one loaded it (the store is at "
            'generation 2; this write follows generation 1): nothing was written; check the session out again'
        )
        for write in (one.put('s1', b'late', holder='h1', generation=2), one.append('s1', b'late', holder='h1', generation=2)):
            with pytest.raises(corral.SandboxSessionBusyError) as info:
                await write
            assert info.value.display() == stale
        elsewhere = (
            "the stored session 's1' was written by another holder since this one loaded it (the store is at "
            'generation 0; this write follows generation 2): nothing was written; check the session out again'
        )
        for call, error, text in [
            (lambda: one.append('s1', b'theirs', holder='h9', generation=3, tenant='acme'), corral.SandboxSessionBusyError, elsewhere),
            (lambda: one.put('s1', b'theirs', holder='h9', generation=3, tenant='acme'), corral.SandboxSessionBusyError, elsewhere),
            (lambda: one.acquire_and_get('s1', holder='h9', ttl=1000, tenant='acme'), corral.SandboxStateError, "no stored session with id 's1'"),
        ]:
            with pytest.raises(error) as info:
                await call()
            assert info.value.display() == text
        assert await one.get('s1') == corral.StoredState(b'first', [b'r2'], 2)
        admin = await asyncpg.connect(postgres_server.url)
        try:
            assert await rows(admin, 's1') == ([(b'first', 2)], [(2, b'r2')], [])
        finally:
            await admin.close()


async def test_a_checkout_by_id_cut_while_it_waits_for_the_lease_leaves_no_lease_and_the_next_takes_it(postgres_server):
    await drop_tables(postgres_server.url)
    async with PostgresStore(postgres_server.url) as store:
        await store.put('s1', b'full', holder='h1', generation=1, ttl=1000)
        await store.release('s1', holder='h1')
        admin = await asyncpg.connect(postgres_server.url)
        try:
            held = admin.transaction()
            await held.start()
            await admin.execute("INSERT INTO corral_leases VALUES ('', 's1', 'h9', now() + interval '1000 seconds')")  # not committed
            taken = asyncio.create_task(store.acquire_and_get('s1', holder='h2', ttl=1000))
            assert await admin.fetchval('SELECT pg_terminate_backend($1)', await waiting(admin))
            with pytest.raises(corral.SandboxStoreError) as info:
                await taken
            await held.rollback()
            assert info.value.display() == lost(postgres_server)
            assert await rows(admin, 's1') == ([(b'full', 1)], [], [])
            assert await store.acquire_and_get('s1', holder='h2', ttl=1000) == corral.StoredState(b'full', [], 1)
            assert await rows(admin, 's1') == ([(b'full', 1)], [], ['h2'])
        finally:
            await admin.close()
