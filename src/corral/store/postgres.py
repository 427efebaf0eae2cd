"""The session store for many machines: PostgreSQL, through asyncpg (the `postgres` extra)."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import CorralError, SandboxStateError, SandboxStoreError
from .base import (
    StoredState,
    busy_error,
    check_generation,
    check_holder,
    check_session_id,
    check_state,
    check_tenant,
    check_ttl,
    conflict_error,
    lost_lease_error,
    not_found_error,
    redact_url,
)
from .tenants import POSTGRES_TENANT_SCHEMA, PostgresTenantTables

if TYPE_CHECKING:
    import asyncpg

__all__ = ['PostgresStore']

_T = TypeVar('_T')

# Three tables: a lease renewal never touches the row of a large state, and an append moves the
# generation on in it without writing the state again (a large value is TOASTed, and an UPDATE
# that leaves it alone keeps it where it is).
_SCHEMA = """
CREATE TABLE IF NOT EXISTS corral_sessions (
    tenant text NOT NULL,
    session_id text NOT NULL,
    state bytea NOT NULL,
    updated timestamptz NOT NULL,
    generation bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, session_id)
);
CREATE TABLE IF NOT EXISTS corral_records (
    tenant text NOT NULL,
    session_id text NOT NULL,
    generation bigint NOT NULL,
    record bytea NOT NULL,
    PRIMARY KEY (tenant, session_id, generation)
);
CREATE TABLE IF NOT EXISTS corral_leases (
    tenant text NOT NULL,
    session_id text NOT NULL,
    holder text NOT NULL,
    expires timestamptz NOT NULL,
    PRIMARY KEY (tenant, session_id)
);
"""

_HAS_GENERATION = """
SELECT true FROM information_schema.columns
WHERE table_schema = current_schema() AND table_name = 'corral_sessions' AND column_name = 'generation'
"""

#: The advisory lock (a bigint of our choosing: b'corral\x00\x01') held while the schema is created,
#: because CREATE TABLE IF NOT EXISTS run by two replicas at once can fail on a duplicate type.
_SCHEMA_LOCK = int.from_bytes(b'corral\x00\x01', 'big')

# Seconds left on the live lease of another holder than $3 (NULL holder: anyone's), or no row.
_OTHER_LIVE_LEASE = """
SELECT extract(epoch FROM expires - now())::float8 FROM corral_leases
WHERE tenant = $1 AND session_id = $2 AND holder IS DISTINCT FROM $3 AND expires > now()
FOR UPDATE
"""


# Of two holders racing for a new or an expired lease one wins: ON CONFLICT locks the existing row
# and checks the WHERE against its newest version.
_TAKE_LEASE_FROM = """
INSERT INTO corral_leases (tenant, session_id, holder, expires)
SELECT $1, $2, $3, now() + make_interval(secs => $4){}
ON CONFLICT (tenant, session_id) DO UPDATE SET holder = EXCLUDED.holder, expires = EXCLUDED.expires
WHERE corral_leases.holder = EXCLUDED.holder OR corral_leases.expires <= now()
RETURNING true
"""
_TAKE_LEASE = _TAKE_LEASE_FROM.format('')

# A lease written in a statement of its own (taken, renewed, given back) commits without waiting
# for its flush to disk (synchronous_commit off for its own transaction, as SQLite's leases commit
# without a flush): others see it at once, and a crash of the database server can lose the last
# fraction of a second of leases only, never a state or a record (each written durably). A holder
# whose lease was lost so finds its renewal refused, and stores nothing more; a write of another
# holder meanwhile is still refused by the generation the store is at. A release lost so leaves
# the lease to expire.
_UNFLUSHED = "(SELECT set_config('synchronous_commit', 'off', true)) AS unflushed"
_TAKE_LEASE_UNFLUSHED = _TAKE_LEASE_FROM.format(f' FROM {_UNFLUSHED}')
_RENEW = (
    f'UPDATE corral_leases SET expires = now() + make_interval(secs => $4) FROM {_UNFLUSHED} '
    'WHERE tenant = $1 AND session_id = $2 AND holder = $3'
)
_RELEASE = f'DELETE FROM corral_leases USING {_UNFLUSHED} WHERE tenant = $1 AND session_id = $2 AND holder = $3'

# A session's rows in one statement (one snapshot): its state (part 0), then its records in order.
# Rows, not an array: a bytea[] made asyncpg ask the server for the array type's codec on each new
# connection's first read (three more round trips, 10-17 ms).
_READ_ROWS = """
SELECT 0 AS part, generation, state FROM corral_sessions WHERE tenant = $1 AND session_id = $2{when}
UNION ALL SELECT 1, generation, record FROM corral_records WHERE tenant = $1 AND session_id = $2{when}
ORDER BY part, generation
"""
_READ = _READ_ROWS.format(when='')

# A checkout by id in one statement: the lease taken (unflushed), and the rows read, with a row of
# part -1 when the lease was taken, its generation 1 when the statement's snapshot (taken before the
# lease) saw another holder's live lease that was gone by the lease's insert: released or taken
# over meanwhile, after writes the snapshot may miss, so the caller reads the rows again. Without
# it, the rows are those a read after the lease gives (any write the snapshot misses is one made
# without a live lease, which a read after the lease can miss as well; the generation then refuses
# the stale writer, as it does there).
_TAKE_LEASE_AND_READ = (
    f'WITH lease AS ({_TAKE_LEASE_UNFLUSHED}), '
    'moved AS (SELECT FROM corral_leases WHERE tenant = $1 AND session_id = $2 AND holder <> $3 AND expires > now()) '
    'SELECT -1 AS part, (SELECT count(*) FROM moved) AS generation, NULL::bytea AS state FROM lease UNION ALL'
    + _READ_ROWS.format(when=' AND EXISTS (SELECT FROM lease)')  # no rows sent for a lease refused
)

# The writes a stored session makes, each one statement, so one round trip and its own transaction
# (committed durably, all of it or none: no other transaction sees a part). Each writes nothing
# unless all of it can be written; then the caller does it again step by step, which raises the
# error that says why. The parts run in order, each taking the rows the one before returned.

# A new session's first write, taking its lease (a fork's, or a new session's): the lease row
# inserted only when there is none (a lease of its own to extend, or another's, is the slow path's),
# and the state only when the lease was. A session created meanwhile by a writer that took no lease
# leaves the lease taken and no state: the caller gives that lease back.
_PUT_NEW_WITH_LEASE = """
WITH lease AS (
    INSERT INTO corral_leases (tenant, session_id, holder, expires)
    SELECT $1, $2, $3, now() + make_interval(secs => $4)
    WHERE NOT EXISTS (SELECT FROM corral_sessions WHERE tenant = $1 AND session_id = $2)
    ON CONFLICT (tenant, session_id) DO NOTHING RETURNING true
), created AS (
    INSERT INTO corral_sessions (tenant, session_id, state, updated, generation)
    SELECT $1, $2, $5::bytea, now(), 1 FROM lease
    ON CONFLICT (tenant, session_id) DO NOTHING RETURNING true
)
SELECT EXISTS (SELECT FROM lease), EXISTS (SELECT FROM created)
"""

# Another holder's live lease on the session, its row locked (as the step-by-step writes lock it):
# the first part of `_PUT_NEXT` and `_APPEND`, which write nothing while there is one.
_OTHER_HOLDER = """
WITH other AS (
    SELECT FROM corral_leases WHERE tenant = $1 AND session_id = $2 AND holder IS DISTINCT FROM $3 AND expires > now() FOR UPDATE
)"""

# A full state after `$4 - 1`, no lease taken: the row updated (locked, and its generation checked
# again on its newest version should another write have moved it meanwhile) when no other holder
# has a live lease (whose row is locked, as the step-by-step write locks it), the records dropped
# when it was.
_PUT_NEXT = _OTHER_HOLDER + """, replaced AS (
    UPDATE corral_sessions SET state = $5, updated = now(), generation = $4
    WHERE tenant = $1 AND session_id = $2 AND generation = $4 - 1 AND NOT EXISTS (SELECT FROM other)
    RETURNING true
), dropped AS (
    DELETE FROM corral_records WHERE tenant = $1 AND session_id = $2 AND EXISTS (SELECT FROM replaced)
)
SELECT EXISTS (SELECT FROM replaced)
"""

# A record after `$4 - 1`: the generation moved on as `_PUT_NEXT` moves it, the record inserted when it was.
_APPEND = _OTHER_HOLDER + """, moved AS (
    UPDATE corral_sessions SET generation = $4, updated = now()
    WHERE tenant = $1 AND session_id = $2 AND generation = $4 - 1 AND NOT EXISTS (SELECT FROM other)
    RETURNING true
), appended AS (
    INSERT INTO corral_records (tenant, session_id, generation, record) SELECT $1, $2, $4, $5::bytea FROM moved RETURNING true
)
SELECT EXISTS (SELECT FROM appended)
"""


class PostgresStore(PostgresTenantTables):
    """A session store in PostgreSQL, shared by any number of processes on any number of machines.

        store = PostgresStore('postgresql://corral:secret@db.internal:5432/corral')
        await store.acquire('s1', holder=token, ttl=30)

    `dsn` is a `postgresql://` (or `postgres://`) URL as libpq reads it. The store keeps a pool of
    `min_size` to `max_size` connections (asyncpg), opened on first use, and creates its tables
    (`corral_sessions`, `corral_records`, `corral_leases`) then if they are missing, under an advisory lock so that
    replicas starting together do not collide. Lease times use the database server's clock
    (`now()`), so machines whose clocks disagree still agree on who holds a lease; a lease is taken
    by a conditional upsert, so of two holders racing for it exactly one wins.

    Failures raise `SandboxStoreError` naming the server (never the password): unreachable,
    credentials refused, connection lost mid-call (a write in flight was committed whole or not at
    all), or an error of the server's (e.g. its disk is full). The next call opens new connections,
    so the store recovers when the server does. There is no signing key in the database: pass
    `Pool(state_key=...)` (`default_state_key` raises and says so). Use a store from one event loop
    (its connections belong to the loop that opened them).

    Needs asyncpg: `pip install -e '.[postgres]' in corral's clone`.
    """

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        connect_timeout: float = 10.0,
        command_timeout: float | None = 60.0,
    ) -> None:
        try:
            import asyncpg  # noqa: F401
        except ImportError:
            raise ImportError("the PostgreSQL session store needs asyncpg: pip install -e '.[postgres]' in corral's clone") from None
        if not 1 <= min_size <= max_size:
            raise ValueError(f'need 1 <= min_size <= max_size; got min_size={min_size}, max_size={max_size}')
        self._dsn = dsn
        self._where = redact_url(dsn)
        self._pool_args: dict[str, Any] = dict(
            min_size=min_size, max_size=max_size, timeout=connect_timeout, command_timeout=command_timeout
        )
        self._pool: asyncpg.Pool | None = None
        self._opening: asyncio.Lock | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f'PostgresStore({self._where!r})'

    async def __aenter__(self) -> PostgresStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- the Store protocol

    async def put(self, session_id: str, state: bytes, *, holder: str, generation: int, tenant: str = '', ttl: float | None = None) -> None:
        """Store `state` as the full state of `(tenant, session_id)` at `generation`, in one
        transaction: the previous state and its records are replaced whole, or kept if anything
        fails; with `ttl`, `holder` takes the lease in it too. `SandboxSessionBusyError` if the session is not at `generation - 1` or another holder
        has a live lease (its rows are locked while the state is written, so they cannot change meanwhile).

        One round trip when it is written: a new session's first write taking its lease, or a
        full state replacing the one before without a lease taken, is one statement (a statement is
        its own transaction, committed durably: all of it or none). Anything else, or one that
        writes nothing, is done again in a transaction of several statements, which raises why."""
        key = (check_tenant(tenant), check_session_id(session_id))
        state, holder, generation = check_state(state), check_holder(holder), check_generation(generation)
        ttl = None if ttl is None else check_ttl(ttl)

        async def put(db: asyncpg.Connection) -> None:
            if await _put_at_once(db, key, state, holder, generation, ttl):
                return
            async with db.transaction():  # refused, or raced: the checks one by one raise the error that says why
                if ttl is None:
                    await _refuse_other_holder(db, key, holder)
                else:  # refused as well when another holder has it, and its row locked as well
                    await _take_lease(db, key, holder, ttl)
                if generation == 1:  # a new session: of two holders racing to create it, one inserts
                    created = await db.fetchval(
                        'INSERT INTO corral_sessions (tenant, session_id, state, updated, generation) '
                        'VALUES ($1, $2, $3, now(), 1) ON CONFLICT (tenant, session_id) DO NOTHING RETURNING true',
                        *key,
                        state,
                    )
                    if not created:
                        await _compare_generation(db, key, generation)
                    return
                await _compare_generation(db, key, generation)
                await db.execute(
                    'UPDATE corral_sessions SET state = $3, updated = now(), generation = $4 WHERE tenant = $1 AND session_id = $2',
                    *key,
                    state,
                    generation,
                )
                await db.execute('DELETE FROM corral_records WHERE tenant = $1 AND session_id = $2', *key)

        await self._run(put)

    async def append(self, session_id: str, record: bytes, *, holder: str, generation: int, tenant: str = '') -> None:
        """Append `record` to the stored state of `(tenant, session_id)` at `generation`, in one
        statement (one round trip) that writes the record's bytes only. Raises as `put` does, and
        `SandboxStateError('no stored session with id ...')` when the session is not stored."""
        key = (check_tenant(tenant), check_session_id(session_id))
        record, holder, generation = check_state(record), check_holder(holder), check_generation(generation)

        async def append(db: asyncpg.Connection) -> None:
            if await db.fetchval(_APPEND, *key, holder, generation, record):
                return
            async with db.transaction():  # refused, or raced: the checks one by one raise the error that says why
                await _refuse_other_holder(db, key, holder)
                if await _compare_generation(db, key, generation) == 0:
                    raise not_found_error(key[1])
                await db.execute(
                    'INSERT INTO corral_records (tenant, session_id, generation, record) VALUES ($1, $2, $3, $4)',
                    *key,
                    generation,
                    record,
                )
                await db.execute(
                    'UPDATE corral_sessions SET generation = $3, updated = now() WHERE tenant = $1 AND session_id = $2',
                    *key,
                    generation,
                )

        await self._run(append)

    async def get(self, session_id: str, *, tenant: str = '') -> StoredState:
        """The stored `StoredState`, read in one transaction (one snapshot). Raises
        `SandboxStateError('no stored session with id ...')`."""
        key = (check_tenant(tenant), check_session_id(session_id))

        async def get(db: asyncpg.Connection) -> StoredState:
            stored = await _read(db, key)
            if stored is None:
                raise not_found_error(key[1])
            return stored

        return await self._run(get)

    async def acquire_and_get(self, session_id: str, *, holder: str, ttl: float, tenant: str = '') -> StoredState:
        """Take (or extend) the lease for `ttl` seconds of the server's clock and read the stored
        `StoredState`, in one statement (one round trip; see `_TAKE_LEASE_AND_READ`). Raises as
        `acquire` and `get` do (no lease is left then)."""
        key = (check_tenant(tenant), check_session_id(session_id))
        holder, ttl = check_holder(holder), check_ttl(ttl)

        async def acquire_and_get(db: asyncpg.Connection) -> StoredState:
            rows = await db.fetch(_TAKE_LEASE_AND_READ, *key, holder, ttl)
            try:
                if not rows or rows[0][0] != -1:  # refused, or raced: the lease alone says why, or takes it now
                    await _take_lease(db, key, holder, ttl, unflushed=True)
                    stored = await _read(db, key)
                elif rows[0][1]:  # another holder's lease gone since the snapshot: the rows read after it
                    stored = await _read(db, key)
                else:
                    stored = _stored(rows[1:])
                if stored is None:
                    raise not_found_error(key[1])
            except BaseException:
                with contextlib.suppress(Exception):  # a connection lost: the lease expires after its TTL
                    await db.execute(_RELEASE, *key, holder)
                raise
            return stored

        return await self._run(acquire_and_get)

    async def acquire(self, session_id: str, *, holder: str, ttl: float, tenant: str = '') -> None:
        """Take (or extend) the lease for `ttl` seconds of the server's clock.
        `SandboxSessionBusyError` if another holder's lease is live; an expired one is taken over."""
        key = (check_tenant(tenant), check_session_id(session_id))
        holder, ttl = check_holder(holder), check_ttl(ttl)

        await self._run(lambda db: _take_lease(db, key, holder, ttl, unflushed=True))

    async def renew(self, session_id: str, *, holder: str, ttl: float, tenant: str = '') -> None:
        """Extend `holder`'s lease to `ttl` seconds from now; `SandboxSessionBusyError` if it was lost."""
        key = (check_tenant(tenant), check_session_id(session_id))
        holder, ttl = check_holder(holder), check_ttl(ttl)

        async def renew(db: asyncpg.Connection) -> None:
            status = await db.execute(_RENEW, *key, holder, ttl)
            if status != 'UPDATE 1':
                raise lost_lease_error(key[1])

        await self._run(renew)

    async def release(self, session_id: str, *, holder: str, tenant: str = '') -> None:
        """Give up `holder`'s lease (nothing happens if it does not have it)."""
        key = (check_tenant(tenant), check_session_id(session_id))
        holder = check_holder(holder)

        await self._run(lambda db: db.execute(_RELEASE, *key, holder))

    async def delete(self, session_id: str, *, tenant: str = '', holder: str | None = None) -> None:
        """Delete the state and the lease. Raises `SandboxStateError('no stored session with id
        ...')` if not stored, `SandboxSessionBusyError` if a holder other than `holder` has a live lease."""
        key = (check_tenant(tenant), check_session_id(session_id))
        holder = None if holder is None else check_holder(holder)

        async def delete(db: asyncpg.Connection) -> None:
            async with db.transaction():
                found = await db.fetchval(
                    'SELECT true FROM corral_sessions WHERE tenant = $1 AND session_id = $2 FOR UPDATE', *key
                )
                if not found:
                    raise not_found_error(key[1])
                await _refuse_other_holder(db, key, holder)
                await db.execute('DELETE FROM corral_sessions WHERE tenant = $1 AND session_id = $2', *key)
                await db.execute('DELETE FROM corral_records WHERE tenant = $1 AND session_id = $2', *key)
                await db.execute('DELETE FROM corral_leases WHERE tenant = $1 AND session_id = $2', *key)

        await self._run(delete)

    async def list(self, *, tenant: str = '') -> builtins.list[str]:
        """The ids of the tenant's stored sessions, sorted by code point (as the SQLite store does)."""
        tenant = check_tenant(tenant)

        async def list_ids(db: asyncpg.Connection) -> builtins.list[str]:
            rows = await db.fetch(
                'SELECT session_id FROM corral_sessions WHERE tenant = $1 ORDER BY session_id COLLATE "C"', tenant
            )
            return [row[0] for row in rows]

        return await self._run(list_ids)

    async def delete_untouched(self, seconds: float) -> builtins.list[tuple[str, str]]:
        """Delete the sessions, of every tenant, neither written nor leased in the last `seconds` (of
        the database server's clock), in one transaction; returns their `(tenant, session_id)`, sorted."""
        seconds = check_ttl(seconds)

        async def delete_untouched(db: asyncpg.Connection) -> builtins.list[tuple[str, str]]:
            async with db.transaction():
                rows = await db.fetch(
                    'DELETE FROM corral_sessions s WHERE s.updated < now() - make_interval(secs => $1) '
                    'AND NOT EXISTS (SELECT 1 FROM corral_leases l WHERE l.tenant = s.tenant AND l.session_id = s.session_id '
                    'AND l.expires >= now() - make_interval(secs => $1)) RETURNING s.tenant, s.session_id',
                    seconds,
                )
                tenants, ids = [row[0] for row in rows], [row[1] for row in rows]
                for table in ('corral_records', 'corral_leases'):
                    await db.execute(
                        f'DELETE FROM {table} t USING unnest($1::text[], $2::text[]) AS gone(tenant, session_id) '
                        'WHERE t.tenant = gone.tenant AND t.session_id = gone.session_id',
                        tenants,
                        ids,
                    )
            return sorted((row[0], row[1]) for row in rows)

        return await self._run(delete_untouched)

    def default_state_key(self) -> bytes:
        """Always raises `SandboxStateError`: a key kept in the database would let anyone who can
        write the database forge states, so a PostgreSQL store needs `Pool(state_key=...)`."""
        raise SandboxStateError(
            'a PostgreSQL session store keeps no state key: pass Pool(state_key=...), 32 random bytes '
            '(e.g. from secrets.token_bytes(32)) kept outside the database, the same on every machine '
            'that shares the store'
        )

    async def close(self) -> None:
        """Close the connection pool (waiting for calls in progress). Calls after it raise `RuntimeError`."""
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    # -- connections

    async def _run(self, operation: Callable[[asyncpg.Connection], Awaitable[_T]]) -> _T:
        import asyncpg

        if self._closed:
            raise RuntimeError('the session store is closed')
        try:
            pool = await self._open()
            async with pool.acquire() as connection:
                return await operation(connection)
        except CorralError:
            raise
        except (OSError, asyncio.TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as e:
            raise self._translate(e) from None

    async def _open(self) -> asyncpg.Pool:
        import asyncpg

        if self._pool is not None:
            return self._pool
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._pool is None:
                pool = await asyncpg.create_pool(self._dsn, reset=_keep_session, **self._pool_args)
                try:
                    async with pool.acquire() as connection, connection.transaction():
                        await connection.execute('SELECT pg_advisory_xact_lock($1)', _SCHEMA_LOCK)
                        await connection.execute(_SCHEMA + POSTGRES_TENANT_SCHEMA)
                        if not await connection.fetchval(_HAS_GENERATION):  # a database of a corral before generations
                            await connection.execute('ALTER TABLE corral_sessions ADD COLUMN generation bigint NOT NULL DEFAULT 0')
                except BaseException:
                    await pool.close()
                    raise
                if self._closed:
                    await pool.close()
                    raise RuntimeError('the session store is closed')
                self._pool = pool
        return self._pool

    def _translate(self, error: BaseException) -> SandboxStoreError:
        import asyncpg

        where = f'the PostgreSQL session store at {self._where}'
        # A connection cut inside a transaction surfaces as the InterfaceError of its failed
        # rollback; the cut itself is its context.
        while isinstance(error, asyncpg.InterfaceError) and error.__context__ is not None:
            error = error.__context__
        if isinstance(error, (asyncpg.InvalidPasswordError, asyncpg.InvalidAuthorizationSpecificationError)):
            return SandboxStoreError(f'{where} refused the credentials: {error}')
        if isinstance(error, asyncpg.InvalidCatalogNameError):
            return SandboxStoreError(f'{where} has no such database: {error}')
        lost = (asyncpg.PostgresConnectionError, asyncpg.AdminShutdownError, asyncpg.InterfaceError, ConnectionError)
        if isinstance(error, lost) and not isinstance(error, ConnectionRefusedError):
            return SandboxStoreError(
                f'lost the connection to {where} ({error}); a write in flight was committed whole or not at all'
            )
        if isinstance(error, asyncio.TimeoutError):
            command_timeout = self._pool_args['command_timeout']
            return SandboxStoreError(
                f'{where} did not answer in time (connect_timeout {self._pool_args["timeout"]:g} s, command_timeout '
                f'{"none" if command_timeout is None else f"{command_timeout:g} s"}); a write in flight was committed '
                'whole or not at all'
            )
        if isinstance(error, OSError):
            reason = 'connection refused' if isinstance(error, ConnectionRefusedError) else error.strerror or str(error)
            return SandboxStoreError(f'cannot reach {where}: {reason}')
        if isinstance(error, asyncpg.DiskFullError):
            return SandboxStoreError(f'{where} could not write: its disk is full. What was stored before is kept')
        return SandboxStoreError(f'{where} failed ({type(error).__name__}): {error}. What was stored before is kept')


async def _keep_session(db: asyncpg.Connection) -> None:
    """A connection given back to the pool is reset by asyncpg's own step first (a transaction left
    open is rolled back); its reset query (session settings, advisory locks, cursors, listeners)
    would cost a round trip after every call, and this store's statements leave none of those."""


async def _put_at_once(db: asyncpg.Connection, key: tuple[str, str], state: bytes, holder: str, generation: int, ttl: float | None) -> bool:
    """Write `state` in one statement (`_PUT_NEW_WITH_LEASE`, `_PUT_NEXT`) where one does it; False
    when nothing was written (refused, raced, or a write one statement does not do)."""
    if ttl is None and generation > 1:
        return await db.fetchval(_PUT_NEXT, *key, holder, generation, state)
    if ttl is None or generation != 1:
        return False
    taken, created = await db.fetchrow(_PUT_NEW_WITH_LEASE, *key, holder, ttl, state)
    if taken and not created:
        await db.execute(_RELEASE, *key, holder)
    return created


async def _read(db: asyncpg.Connection, key: tuple[str, str]) -> StoredState | None:
    """The session's `StoredState`, read in one statement (one snapshot), or None when it is not stored."""
    return _stored(await db.fetch(_READ, *key))


def _stored(rows: builtins.list[Any]) -> StoredState | None:
    """The `StoredState` of rows `_READ_ROWS` gave (ordered), or None when there is no state row."""
    if not rows or rows[0][0] != 0:
        return None
    return StoredState(rows[0][2], [row[2] for row in rows[1:]], rows[0][1])


async def _take_lease(db: asyncpg.Connection, key: tuple[str, str], holder: str, ttl: float, *, unflushed: bool = False) -> None:
    """Give `holder` the lease of `key` for `ttl` seconds, unless another holder's is live (`SandboxSessionBusyError`).
    `unflushed` (outside a transaction only): the lease's commit does not wait for its flush to disk."""
    while True:
        taken = await db.fetchval(_TAKE_LEASE_UNFLUSHED if unflushed else _TAKE_LEASE, *key, holder, ttl)
        if taken:
            return
        seconds_left = await db.fetchval(_OTHER_LIVE_LEASE, *key, holder)
        if seconds_left is not None:
            raise busy_error(key[1], seconds_left)
        # The other holder released or lost it in between: try again.


async def _compare_generation(db: asyncpg.Connection, key: tuple[str, str], generation: int) -> int:
    """The session's stored generation (0: not stored), its row locked until the transaction ends;
    `SandboxSessionBusyError` unless it is `generation - 1`."""
    stored = await db.fetchval(
        'SELECT generation FROM corral_sessions WHERE tenant = $1 AND session_id = $2 FOR UPDATE', *key
    )
    stored = 0 if stored is None else stored
    if stored != generation - 1:
        raise conflict_error(key[1], stored, generation)
    return stored


async def _refuse_other_holder(db: asyncpg.Connection, key: tuple[str, str], holder: str | None) -> None:
    """Raise `SandboxSessionBusyError` if a holder other than `holder` has a live lease on `key`;
    inside a transaction, lock the lease row until it ends."""
    seconds_left = await db.fetchval(_OTHER_LIVE_LEASE, *key, holder)
    if seconds_left is not None:
        raise busy_error(key[1], seconds_left)
