"""The tenant tables of a store: API keys, per-tenant quota settings, and what tenants use.

A server keeps these in the same database as its sessions, so that every replica sharing a store
agrees on which keys are valid, what each tenant may use, and what it uses now. `SQLiteStore` and
`PostgresStore` have them (the mixins below); `corral.server.keys` and `corral.server.quotas` use
them. The tables hold no secret: a key's row has the SHA-256 digest of its secret, never the secret.
"""

from __future__ import annotations

import builtins
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

from .base import check_holder, check_tenant, check_ttl

if TYPE_CHECKING:
    import sqlite3

    import asyncpg

__all__ = [
    'QUOTA_NAMES',
    'ApiKeyRow',
    'PostgresTenantTables',
    'SQLiteTenantTables',
    'TenantTables',
    'POSTGRES_TENANT_SCHEMA',
    'SQLITE_TENANT_SCHEMA',
]

_T = TypeVar('_T')

#: The quotas a tenant has, in the order they are shown; each is a column of `corral_tenants`.
QUOTA_NAMES = ('concurrent_sessions', 'stored_bytes', 'cpu_seconds_per_hour')

#: A key's row: key id, tenant, created and revoked (seconds since the epoch; revoked None while valid).
ApiKeyRow = tuple[str, str, float, 'float | None']

#: The CPU use of a tenant is summed per minute of the store's clock; the hour is the last 60 minutes.
_MINUTES_PER_HOUR = 60

#: The statements that create the tenant tables in SQLite (one by one: trigger bodies hold ';').
#: `corral_tenant_bytes` keeps each tenant's total of stored bytes (its states in `corral_sessions`
#: and the records appended to them in `corral_records`), kept up to date by triggers in the
#: transaction of every write, because summing the sizes reads one row per session (30 ms for
#: 10,000 sessions) and a quota check runs before every put and append; SQLite has one writer at a
#: time, so the total's row adds no contention. Totals start from the states and records stored
#: when the table is first made.
SQLITE_TENANT_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS corral_api_keys (
    key_id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    digest BLOB NOT NULL,
    created REAL NOT NULL,
    revoked REAL
)""",
    """CREATE TABLE IF NOT EXISTS corral_tenants (
    tenant TEXT PRIMARY KEY,
    concurrent_sessions INTEGER,
    stored_bytes INTEGER,
    cpu_seconds_per_hour REAL
)""",
    """CREATE TABLE IF NOT EXISTS corral_tenant_sessions (
    tenant TEXT NOT NULL,
    holder TEXT NOT NULL,
    expires REAL NOT NULL,
    PRIMARY KEY (tenant, holder)
) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS corral_tenant_cpu (
    tenant TEXT NOT NULL,
    minute INTEGER NOT NULL,
    seconds REAL NOT NULL,
    PRIMARY KEY (tenant, minute)
) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS corral_tenant_bytes (
    tenant TEXT PRIMARY KEY,
    bytes INTEGER NOT NULL
) WITHOUT ROWID""",
    """INSERT INTO corral_tenant_bytes (tenant, bytes)
SELECT tenant, sum(size) FROM (
    SELECT tenant, length(state) AS size FROM corral_sessions
    UNION ALL SELECT tenant, length(record) FROM corral_records
) WHERE NOT EXISTS (SELECT 1 FROM corral_tenant_bytes) GROUP BY tenant""",
    """CREATE TRIGGER IF NOT EXISTS corral_tenant_bytes_insert AFTER INSERT ON corral_sessions BEGIN
    INSERT INTO corral_tenant_bytes (tenant, bytes) VALUES (new.tenant, length(new.state))
    ON CONFLICT (tenant) DO UPDATE SET bytes = bytes + excluded.bytes;
END""",
    """CREATE TRIGGER IF NOT EXISTS corral_tenant_bytes_update AFTER UPDATE ON corral_sessions BEGIN
    UPDATE corral_tenant_bytes SET bytes = bytes - length(old.state) WHERE tenant = old.tenant;
    INSERT INTO corral_tenant_bytes (tenant, bytes) VALUES (new.tenant, length(new.state))
    ON CONFLICT (tenant) DO UPDATE SET bytes = bytes + excluded.bytes;
END""",
    """CREATE TRIGGER IF NOT EXISTS corral_tenant_bytes_delete AFTER DELETE ON corral_sessions BEGIN
    UPDATE corral_tenant_bytes SET bytes = bytes - length(old.state) WHERE tenant = old.tenant;
END""",
    """CREATE TRIGGER IF NOT EXISTS corral_tenant_bytes_record_insert AFTER INSERT ON corral_records BEGIN
    INSERT INTO corral_tenant_bytes (tenant, bytes) VALUES (new.tenant, length(new.record))
    ON CONFLICT (tenant) DO UPDATE SET bytes = bytes + excluded.bytes;
END""",
    """CREATE TRIGGER IF NOT EXISTS corral_tenant_bytes_record_delete AFTER DELETE ON corral_records BEGIN
    UPDATE corral_tenant_bytes SET bytes = bytes - length(old.record) WHERE tenant = old.tenant;
END""",
)

POSTGRES_TENANT_SCHEMA = """
CREATE TABLE IF NOT EXISTS corral_api_keys (
    key_id text PRIMARY KEY,
    tenant text NOT NULL,
    digest bytea NOT NULL,
    created timestamptz NOT NULL,
    revoked timestamptz
);
CREATE TABLE IF NOT EXISTS corral_tenants (
    tenant text PRIMARY KEY,
    concurrent_sessions bigint,
    stored_bytes bigint,
    cpu_seconds_per_hour float8
);
CREATE TABLE IF NOT EXISTS corral_tenant_sessions (
    tenant text NOT NULL,
    holder text NOT NULL,
    expires timestamptz NOT NULL,
    PRIMARY KEY (tenant, holder)
);
CREATE TABLE IF NOT EXISTS corral_tenant_cpu (
    tenant text NOT NULL,
    minute bigint NOT NULL,
    seconds float8 NOT NULL,
    PRIMARY KEY (tenant, minute)
);
"""

#: The first half of the advisory lock (two int4 keys) taken while a tenant's session slots are
#: counted; the second half is hashtext(tenant).
_SLOT_LOCK = int.from_bytes(b'crl\x02', 'big')


@runtime_checkable
class TenantTables(Protocol):
    """What a store keeps for a multi-tenant server, beside the sessions. Tenants follow the store's
    rule (`check_tenant`); key ids are checked by their caller. Failures raise `SandboxStoreError`."""

    async def add_api_key(self, key_id: str, tenant: str, digest: bytes) -> None:
        """Add a key: its id (unique), its tenant, and the digest of its secret."""
        ...

    async def find_api_key(self, key_id: str) -> tuple[str, bytes, bool] | None:
        """`(tenant, digest, revoked)` of the key, or None when there is no such key."""
        ...

    async def list_api_keys(self) -> builtins.list[ApiKeyRow]:
        """Every key (revoked ones too), by tenant then creation time."""
        ...

    async def revoke_api_key(self, key_id: str) -> bool:
        """Mark the key revoked (from now on, for good). False when there is no such key; a key
        revoked before keeps its first revocation time."""
        ...

    async def count_api_keys(self) -> int:
        """How many keys were ever created (revoked ones count)."""
        ...

    async def set_tenant_quotas(self, tenant: str, quotas: Mapping[str, float | None]) -> None:
        """Set some of the tenant's quotas (names from `QUOTA_NAMES`; None: the server's default)."""
        ...

    async def tenant_quotas(self, tenant: str) -> dict[str, float | None]:
        """The tenant's own quota settings, every name of `QUOTA_NAMES` (None where it has none)."""
        ...

    async def list_tenants(self) -> builtins.list[str]:
        """Every tenant that has a key or quota settings, sorted."""
        ...

    async def stored_bytes(self, tenant: str, *, excluding: str | None = None) -> int:
        """The total size in bytes of the tenant's stored session states and the records appended
        to them, leaving out the session `excluding` (the one about to be replaced, records and all)."""
        ...

    async def take_tenant_slot(self, tenant: str, holder: str, *, limit: int | None, ttl: float) -> tuple[bool, int]:
        """Take one of the tenant's session slots for `holder`, for `ttl` seconds, unless `limit`
        (None: no limit) live slots of other holders are taken already. Returns `(taken, in_use)`,
        `in_use` the live slots of other holders. Counting and taking are one transaction."""
        ...

    async def renew_tenant_slot(self, tenant: str, holder: str, *, limit: int | None, ttl: float) -> tuple[bool, int]:
        """Extend `holder`'s live slot to `ttl` seconds from now. A slot that lapsed (it expired, or
        is gone) is taken again only as `take_tenant_slot` takes one, under `limit`: the places it
        left may have been taken meanwhile. Returns `(held, in_use)`, `in_use` the live slots of
        other holders when the slot had lapsed (0 when it was live)."""
        ...

    async def release_tenant_slot(self, tenant: str, holder: str) -> None:
        """Give back `holder`'s slot (nothing happens when it has none)."""
        ...

    async def add_cpu_seconds(self, tenant: str, seconds: float) -> None:
        """Add `seconds` of CPU to the tenant's use in the current minute."""
        ...

    async def cpu_seconds_last_hour(self, tenant: str) -> float:
        """The tenant's CPU seconds in the last 60 minutes (the current one included)."""
        ...

    async def close(self) -> None:
        """Close the store's connections."""
        ...


def _check_quotas(quotas: Mapping[str, float | None]) -> dict[str, float | None]:
    unknown = set(quotas) - set(QUOTA_NAMES)
    if unknown:
        raise ValueError(f'unknown quota(s) {sorted(unknown)}; the quotas are {list(QUOTA_NAMES)}')
    return {name: quotas[name] for name in QUOTA_NAMES if name in quotas}


def _upsert_quotas(values: Mapping[str, float | None], placeholder: Callable[[int], str]) -> str:
    columns = ', '.join(values)
    places = ', '.join(placeholder(i) for i in range(2, len(values) + 2))
    updates = ', '.join(f'{name} = excluded.{name}' for name in values)
    return (
        f'INSERT INTO corral_tenants (tenant, {columns}) VALUES ({placeholder(1)}, {places}) '
        f'ON CONFLICT (tenant) DO UPDATE SET {updates}'
    )


class SQLiteTenantTables:
    """The tenant tables in SQLite, for `SQLiteStore` (whose `_run` runs a call on its threads)."""

    if TYPE_CHECKING:

        async def _run(self, operation: Callable[[sqlite3.Connection], _T]) -> _T: ...

    async def add_api_key(self, key_id: str, tenant: str, digest: bytes) -> None:
        tenant = check_tenant(tenant)

        def add(db: sqlite3.Connection) -> None:
            db.execute(
                'INSERT INTO corral_api_keys (key_id, tenant, digest, created) VALUES (?, ?, ?, ?)',
                (key_id, tenant, digest, time.time()),
            )

        await self._run(add)

    async def find_api_key(self, key_id: str) -> tuple[str, bytes, bool] | None:
        def find(db: sqlite3.Connection) -> tuple[str, bytes, bool] | None:
            row = db.execute('SELECT tenant, digest, revoked FROM corral_api_keys WHERE key_id = ?', (key_id,)).fetchone()
            return None if row is None else (row[0], row[1], row[2] is not None)

        return await self._run(find)

    async def list_api_keys(self) -> builtins.list[ApiKeyRow]:
        def list_keys(db: sqlite3.Connection) -> builtins.list[ApiKeyRow]:
            rows = db.execute('SELECT key_id, tenant, created, revoked FROM corral_api_keys ORDER BY tenant, created, key_id')
            return [tuple(row) for row in rows]  # type: ignore[misc]

        return await self._run(list_keys)

    async def revoke_api_key(self, key_id: str) -> bool:
        def revoke(db: sqlite3.Connection) -> bool:
            now = time.time()
            cursor = db.execute('UPDATE corral_api_keys SET revoked = coalesce(revoked, ?) WHERE key_id = ?', (now, key_id))
            return cursor.rowcount == 1

        return await self._run(revoke)

    async def count_api_keys(self) -> int:
        return await self._run(lambda db: db.execute('SELECT count(*) FROM corral_api_keys').fetchone()[0])

    async def set_tenant_quotas(self, tenant: str, quotas: Mapping[str, float | None]) -> None:
        tenant, values = check_tenant(tenant), _check_quotas(quotas)
        if not values:
            return
        statement = _upsert_quotas(values, lambda i: '?')
        await self._run(lambda db: db.execute(statement, (tenant, *values.values())))

    async def tenant_quotas(self, tenant: str) -> dict[str, float | None]:
        tenant = check_tenant(tenant)

        def read(db: sqlite3.Connection) -> dict[str, float | None]:
            row = db.execute(f'SELECT {", ".join(QUOTA_NAMES)} FROM corral_tenants WHERE tenant = ?', (tenant,)).fetchone()
            return dict(zip(QUOTA_NAMES, row or (None,) * len(QUOTA_NAMES)))

        return await self._run(read)

    async def list_tenants(self) -> builtins.list[str]:
        def read(db: sqlite3.Connection) -> builtins.list[str]:
            rows = db.execute('SELECT tenant FROM corral_tenants UNION SELECT tenant FROM corral_api_keys ORDER BY tenant')
            return [row[0] for row in rows]

        return await self._run(read)

    async def stored_bytes(self, tenant: str, *, excluding: str | None = None) -> int:
        tenant = check_tenant(tenant)

        def total(db: sqlite3.Connection) -> int:
            # The total the triggers keep, less the excluded state and its records (length() of a
            # BLOB reads its size from the row's header, not the blob).
            row = db.execute(
                'SELECT coalesce((SELECT bytes FROM corral_tenant_bytes WHERE tenant = ?), 0) - '
                'coalesce((SELECT length(state) FROM corral_sessions WHERE tenant = ? AND session_id = ?), 0) - '
                'coalesce((SELECT sum(length(record)) FROM corral_records WHERE tenant = ? AND session_id = ?), 0)',
                (tenant, tenant, excluding, tenant, excluding),
            ).fetchone()
            return int(row[0])

        return await self._run(total)

    async def take_tenant_slot(self, tenant: str, holder: str, *, limit: int | None, ttl: float) -> tuple[bool, int]:
        tenant, holder, ttl = check_tenant(tenant), check_holder(holder), check_ttl(ttl)

        def take(db: sqlite3.Connection) -> tuple[bool, int]:
            with _not_flushed(db):  # a slot, like a lease, ends with its holder in a machine's crash
                db.execute('BEGIN IMMEDIATE')  # the write lock first: no other process counts meanwhile
                with db:  # COMMIT, or ROLLBACK on an error
                    return _sqlite_take_slot(db, tenant, holder, limit, ttl)

        return await self._run(take)

    async def renew_tenant_slot(self, tenant: str, holder: str, *, limit: int | None, ttl: float) -> tuple[bool, int]:
        tenant, holder, ttl = check_tenant(tenant), check_holder(holder), check_ttl(ttl)

        def renew(db: sqlite3.Connection) -> tuple[bool, int]:
            with _not_flushed(db):
                db.execute('BEGIN IMMEDIATE')
                with db:
                    now = time.time()
                    live = db.execute(
                        'UPDATE corral_tenant_sessions SET expires = ? WHERE tenant = ? AND holder = ? AND expires > ?', (now + ttl, tenant, holder, now)
                    )
                    return (True, 0) if live.rowcount == 1 else _sqlite_take_slot(db, tenant, holder, limit, ttl)

        return await self._run(renew)

    async def release_tenant_slot(self, tenant: str, holder: str) -> None:
        tenant, holder = check_tenant(tenant), check_holder(holder)

        def release(db: sqlite3.Connection) -> None:
            with _not_flushed(db):
                db.execute('DELETE FROM corral_tenant_sessions WHERE tenant = ? AND holder = ?', (tenant, holder))

        await self._run(release)

    async def add_cpu_seconds(self, tenant: str, seconds: float) -> None:
        tenant = check_tenant(tenant)

        def add(db: sqlite3.Connection) -> None:
            minute = int(time.time() // 60)
            db.execute('BEGIN IMMEDIATE')
            with db:
                db.execute(
                    'INSERT INTO corral_tenant_cpu (tenant, minute, seconds) VALUES (?, ?, ?) '
                    'ON CONFLICT (tenant, minute) DO UPDATE SET seconds = seconds + excluded.seconds',
                    (tenant, minute, seconds),
                )
                db.execute('DELETE FROM corral_tenant_cpu WHERE tenant = ? AND minute <= ?', (tenant, minute - _MINUTES_PER_HOUR))

        await self._run(add)

    async def cpu_seconds_last_hour(self, tenant: str) -> float:
        tenant = check_tenant(tenant)

        def total(db: sqlite3.Connection) -> float:
            minute = int(time.time() // 60)
            row = db.execute(
                'SELECT coalesce(sum(seconds), 0) FROM corral_tenant_cpu WHERE tenant = ? AND minute > ?',
                (tenant, minute - _MINUTES_PER_HOUR),
            ).fetchone()
            return float(row[0])

        return await self._run(total)


@contextlib.contextmanager
def _not_flushed(connection: sqlite3.Connection) -> Iterator[None]:
    """Commit the writes inside at `synchronous=NORMAL` (no fsync: under WAL, durable against a
    crash of the process, not of the machine), then back to the connection's `FULL`: for leases
    and tenants' session slots, which a machine's crash ends with their holders."""
    connection.execute('PRAGMA synchronous = NORMAL')
    try:
        yield
    finally:
        connection.execute('PRAGMA synchronous = FULL')


def _sqlite_take_slot(db: sqlite3.Connection, tenant: str, holder: str, limit: int | None, ttl: float) -> tuple[bool, int]:
    """`take_tenant_slot` in a transaction that holds the write lock."""
    now = time.time()
    db.execute('DELETE FROM corral_tenant_sessions WHERE tenant = ? AND expires <= ?', (tenant, now))
    in_use = db.execute('SELECT count(*) FROM corral_tenant_sessions WHERE tenant = ? AND holder != ?', (tenant, holder)).fetchone()[0]
    if limit is not None and in_use >= limit:
        return False, in_use
    db.execute('INSERT OR REPLACE INTO corral_tenant_sessions VALUES (?, ?, ?)', (tenant, holder, now + ttl))
    return True, in_use


# The current minute of the database server's clock: every replica counts in the same minutes.
_PG_MINUTE = 'floor(extract(epoch FROM now()) / 60)::bigint'


class PostgresTenantTables:
    """The tenant tables in PostgreSQL, for `PostgresStore` (whose `_run` lends a pooled connection).
    Times are the database server's clock (`now()`), as the leases' are."""

    if TYPE_CHECKING:

        async def _run(self, operation: Callable[[asyncpg.Connection], Awaitable[_T]]) -> _T: ...

    async def add_api_key(self, key_id: str, tenant: str, digest: bytes) -> None:
        tenant = check_tenant(tenant)
        await self._run(
            lambda db: db.execute(
                'INSERT INTO corral_api_keys (key_id, tenant, digest, created) VALUES ($1, $2, $3, now())', key_id, tenant, digest
            )
        )

    async def find_api_key(self, key_id: str) -> tuple[str, bytes, bool] | None:
        row = await self._run(
            lambda db: db.fetchrow('SELECT tenant, digest, revoked IS NOT NULL FROM corral_api_keys WHERE key_id = $1', key_id)
        )
        return None if row is None else (row[0], row[1], row[2])

    async def list_api_keys(self) -> builtins.list[ApiKeyRow]:
        rows = await self._run(
            lambda db: db.fetch(
                'SELECT key_id, tenant, extract(epoch FROM created)::float8, extract(epoch FROM revoked)::float8 '
                'FROM corral_api_keys ORDER BY tenant COLLATE "C", created, key_id'
            )
        )
        return [tuple(row) for row in rows]  # type: ignore[misc]

    async def revoke_api_key(self, key_id: str) -> bool:
        status = await self._run(
            lambda db: db.execute('UPDATE corral_api_keys SET revoked = coalesce(revoked, now()) WHERE key_id = $1', key_id)
        )
        return status == 'UPDATE 1'

    async def count_api_keys(self) -> int:
        return await self._run(lambda db: db.fetchval('SELECT count(*) FROM corral_api_keys'))

    async def set_tenant_quotas(self, tenant: str, quotas: Mapping[str, float | None]) -> None:
        tenant, values = check_tenant(tenant), _check_quotas(quotas)
        if not values:
            return
        statement = _upsert_quotas(values, lambda i: f'${i}')
        await self._run(lambda db: db.execute(statement, tenant, *values.values()))

    async def tenant_quotas(self, tenant: str) -> dict[str, float | None]:
        tenant = check_tenant(tenant)
        row = await self._run(
            lambda db: db.fetchrow(f'SELECT {", ".join(QUOTA_NAMES)} FROM corral_tenants WHERE tenant = $1', tenant)
        )
        return dict(zip(QUOTA_NAMES, tuple(row) if row is not None else (None,) * len(QUOTA_NAMES)))

    async def list_tenants(self) -> builtins.list[str]:
        rows = await self._run(
            lambda db: db.fetch(
                'SELECT tenant FROM (SELECT tenant FROM corral_tenants UNION SELECT tenant FROM corral_api_keys) AS named '
                'ORDER BY tenant COLLATE "C"'
            )
        )
        return [row[0] for row in rows]

    async def stored_bytes(self, tenant: str, *, excluding: str | None = None) -> int:
        tenant = check_tenant(tenant)
        # octet_length() of a bytea reads the stored size, without fetching a TOASTed state.
        total = await self._run(
            lambda db: db.fetchval(
                'SELECT (SELECT coalesce(sum(octet_length(state)), 0) FROM corral_sessions '
                'WHERE tenant = $1 AND session_id IS DISTINCT FROM $2) + '
                '(SELECT coalesce(sum(octet_length(record)), 0) FROM corral_records '
                'WHERE tenant = $1 AND session_id IS DISTINCT FROM $2)',
                tenant,
                excluding,
            )
        )
        return int(total)

    async def take_tenant_slot(self, tenant: str, holder: str, *, limit: int | None, ttl: float) -> tuple[bool, int]:
        tenant, holder, ttl = check_tenant(tenant), check_holder(holder), check_ttl(ttl)

        return await self._run(lambda db: _pg_take_slot(db, tenant, holder, limit, ttl))

    async def renew_tenant_slot(self, tenant: str, holder: str, *, limit: int | None, ttl: float) -> tuple[bool, int]:
        tenant, holder, ttl = check_tenant(tenant), check_holder(holder), check_ttl(ttl)

        async def renew(db: asyncpg.Connection) -> tuple[bool, int]:
            live = await db.execute(
                'UPDATE corral_tenant_sessions SET expires = now() + make_interval(secs => $3) '
                'WHERE tenant = $1 AND holder = $2 AND expires > now()',
                tenant,
                holder,
                ttl,
            )
            return (True, 0) if live == 'UPDATE 1' else await _pg_take_slot(db, tenant, holder, limit, ttl)

        return await self._run(renew)

    async def release_tenant_slot(self, tenant: str, holder: str) -> None:
        tenant, holder = check_tenant(tenant), check_holder(holder)
        await self._run(lambda db: db.execute('DELETE FROM corral_tenant_sessions WHERE tenant = $1 AND holder = $2', tenant, holder))

    async def add_cpu_seconds(self, tenant: str, seconds: float) -> None:
        tenant = check_tenant(tenant)

        async def add(db: asyncpg.Connection) -> None:
            async with db.transaction():
                await db.execute(
                    f'INSERT INTO corral_tenant_cpu (tenant, minute, seconds) VALUES ($1, {_PG_MINUTE}, $2) '
                    'ON CONFLICT (tenant, minute) DO UPDATE SET seconds = corral_tenant_cpu.seconds + EXCLUDED.seconds',
                    tenant,
                    float(seconds),
                )
                await db.execute(
                    f'DELETE FROM corral_tenant_cpu WHERE tenant = $1 AND minute <= {_PG_MINUTE} - $2', tenant, _MINUTES_PER_HOUR
                )

        await self._run(add)

    async def cpu_seconds_last_hour(self, tenant: str) -> float:
        tenant = check_tenant(tenant)
        total = await self._run(
            lambda db: db.fetchval(
                f'SELECT coalesce(sum(seconds), 0)::float8 FROM corral_tenant_cpu WHERE tenant = $1 AND minute > {_PG_MINUTE} - $2',
                tenant,
                _MINUTES_PER_HOUR,
            )
        )
        return float(total)


async def _pg_take_slot(db: asyncpg.Connection, tenant: str, holder: str, limit: int | None, ttl: float) -> tuple[bool, int]:
    """`take_tenant_slot` on one connection."""
    async with db.transaction():
        # One counter at a time per tenant, on every replica: the count stays true until COMMIT.
        await db.execute('SELECT pg_advisory_xact_lock($1, hashtext($2))', _SLOT_LOCK, tenant)
        await db.execute('DELETE FROM corral_tenant_sessions WHERE tenant = $1 AND expires <= now()', tenant)
        in_use = await db.fetchval('SELECT count(*) FROM corral_tenant_sessions WHERE tenant = $1 AND holder <> $2', tenant, holder)
        if limit is not None and in_use >= limit:
            return False, in_use
        await _upsert_slot(db, tenant, holder, ttl)
        return True, in_use


async def _upsert_slot(db: asyncpg.Connection, tenant: str, holder: str, ttl: float) -> None:
    await db.execute(
        'INSERT INTO corral_tenant_sessions (tenant, holder, expires) VALUES ($1, $2, now() + make_interval(secs => $3)) '
        'ON CONFLICT (tenant, holder) DO UPDATE SET expires = EXCLUDED.expires',
        tenant,
        holder,
        ttl,
    )
