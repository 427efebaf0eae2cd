"""The embedded session store: one SQLite file, shared safely by the processes of one machine."""

from __future__ import annotations

import asyncio
import builtins
import functools
import os
import stat
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ..errors import SandboxStoreError
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
)
from .keyfile import key_file_path, read_or_create_key
from .tenants import SQLITE_TENANT_SCHEMA, SQLiteTenantTables, _not_flushed

if TYPE_CHECKING:
    import sqlite3

__all__ = ['SQLiteStore', 'default_database_path']

_T = TypeVar('_T')

# The state, its generation, the records appended to it and the lease live in four tables because
# SQLite rewrites a whole row (its blob included) on UPDATE: neither an append, which moves the
# generation on (and its `touched` time, for retention), nor a lease renewal may rewrite a state of tens of MB.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS corral_sessions (
    tenant TEXT NOT NULL,
    session_id TEXT NOT NULL,
    state BLOB NOT NULL,
    updated REAL NOT NULL,
    PRIMARY KEY (tenant, session_id)
);
CREATE TABLE IF NOT EXISTS corral_generations (
    tenant TEXT NOT NULL,
    session_id TEXT NOT NULL,
    generation INTEGER NOT NULL,
    touched REAL,
    PRIMARY KEY (tenant, session_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS corral_records (
    tenant TEXT NOT NULL,
    session_id TEXT NOT NULL,
    generation INTEGER NOT NULL,
    record BLOB NOT NULL,
    PRIMARY KEY (tenant, session_id, generation)
);
CREATE TABLE IF NOT EXISTS corral_leases (
    tenant TEXT NOT NULL,
    session_id TEXT NOT NULL,
    holder TEXT NOT NULL,
    expires REAL NOT NULL,
    PRIMARY KEY (tenant, session_id)
) WITHOUT ROWID;
"""


def default_database_path() -> Path:
    """Where the embedded default store lives: `$XDG_DATA_HOME/corral/sessions.db`, or
    `~/.local/share/corral/sessions.db` when XDG_DATA_HOME is unset or not absolute (the XDG Base
    Directory specification says to ignore a relative one).

    Raises `SandboxStoreError` when there is no such place for this process: no home directory
    (HOME unset and no passwd entry, or HOME naming a directory that does not exist, as for
    `nobody`'s `/nonexistent`), or a home directory owned by another user (root under a `sudo` that
    kept the user's HOME would otherwise put root's files in that user's hands).
    """
    data_home = os.environ.get('XDG_DATA_HOME', '')
    if os.path.isabs(data_home):
        return Path(data_home) / 'corral' / 'sessions.db'
    home = os.path.expanduser('~')
    advice = (
        "set XDG_DATA_HOME to a directory of this user's, or pass a store, "
        "e.g. Pool(store='sqlite:///path/to/sessions.db')"
    )
    if not os.path.isabs(home):
        raise SandboxStoreError(f'the default session store lives under the home directory, and this process has none: {advice}')
    try:
        owner = os.stat(home).st_uid
    except OSError:
        raise SandboxStoreError(
            f'the default session store lives under the home directory, and {home} does not exist: {advice}'
        ) from None
    if owner != os.geteuid():
        raise SandboxStoreError(
            f'the default session store lives under the home directory, and {home} belongs to uid {owner}, '
            f'not to this process\'s user (uid {os.geteuid()}): {advice}'
        )
    return Path(home) / '.local' / 'share' / 'corral' / 'sessions.db'


def _prepare_default_directory(directory: Path) -> None:
    """Create the default store's directory (mode 0700) and refuse one that another user could change."""
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        info = os.stat(directory)
    except OSError as e:
        raise SandboxStoreError(f'cannot create the session store directory {directory}: {e.strerror}') from None
    if info.st_uid != os.geteuid() or stat.S_IMODE(info.st_mode) & 0o022:
        raise SandboxStoreError(
            f'the session store directory {directory} must belong to this process\'s user (uid {os.geteuid()}) '
            f'and be writable by it alone; it belongs to uid {info.st_uid} with mode {stat.S_IMODE(info.st_mode):04o}'
        )


class SQLiteStore(SQLiteTenantTables):
    """A session store in one SQLite file: the embedded default, for the processes of one machine.

        store = SQLiteStore('/var/lib/app/sessions.db')     # or open_store('sqlite:///var/lib/app/sessions.db')
        await store.put('s1', state, holder=token)

    `path` is the database file (created, mode 0600, if missing; its directory must exist), or None
    for `default_database_path()`, whose directory is created (mode 0700) on first use. The file
    uses write-ahead logging (WAL), so readers never wait for a writer, and commits states with
    `synchronous=FULL`, so a stored state survives a crash of the process or the machine. Leases
    (`acquire`, `renew`, `release`) commit with `synchronous=NORMAL`, which under WAL survives a
    crash of the process but not of the machine, whose crash ends every holder of a lease on it
    anyway: a lease costs no flush to the disk, nor does a tenant's session slot. Several
    processes may share the file on one machine (not over a network file system, where SQLite's
    locks do not hold): leases are rows changed by compare-and-set inside write transactions.

    Every call runs on a small pool of threads of the store's own (`threads`, each with its own
    connection), never on the event loop; a write waits up to `busy_timeout` seconds for another
    process's write transaction, then raises `SandboxStoreError`. Lease times are this machine's
    clock (`time.time()`). States of tens of MB are fine (SQLite's limit is 1 GB).

    The signing key for `Pool(state_key=None)` is a file beside the database (`default_state_key`).
    A cancelled call still completes in its thread (a `put` that started is committed or not, whole).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, busy_timeout: float = 10.0, threads: int = 4) -> None:
        if path is not None:
            if os.fspath(path) in ('', ':memory:') or os.fspath(path).startswith('file:'):
                raise ValueError(f'a SQLite store needs the path of a database file; got {os.fspath(path)!r}')
            path = Path(os.path.abspath(path))
        if not (busy_timeout >= 0):
            raise ValueError(f'busy_timeout must be 0 or more seconds; got {busy_timeout!r}')
        if threads < 1:
            raise ValueError(f'threads must be 1 or more; got {threads!r}')
        self._path: Path | None = path
        self._default = path is None
        self.busy_timeout = float(busy_timeout)
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix='corral-sqlite-store')
        self._local = threading.local()
        self._connections: builtins.list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._schema_ready = False
        self._key: bytes | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f'SQLiteStore({str(self._path) if self._path is not None else None!r})'

    @property
    def path(self) -> Path:
        """The database file. For the default store it is found on first use; this raises
        `SandboxStoreError` when there is no place for it (see `default_database_path`)."""
        if self._path is None:
            self._path = default_database_path()
        return self._path

    async def __aenter__(self) -> SQLiteStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- the Store protocol

    async def put(self, session_id: str, state: bytes, *, holder: str, generation: int, tenant: str = '', ttl: float | None = None) -> None:
        """Store `state` as the full state of `(tenant, session_id)` at `generation`, in one
        transaction: the previous state and its records are replaced whole, or kept if the write
        fails; with `ttl`, `holder` takes the lease in it too. Raises `SandboxSessionBusyError` if the session is not at `generation - 1` or another
        holder has a live lease, `SandboxStoreError` if the disk is full or the file stays locked."""
        key = (check_tenant(tenant), check_session_id(session_id))
        state, holder, generation = check_state(state), check_holder(holder), check_generation(generation)
        ttl = None if ttl is None else check_ttl(ttl)

        def put(db: sqlite3.Connection) -> None:
            with _write_transaction(db):
                now = time.time()
                _refuse_other_holder(db, key, holder, now)
                if ttl is not None:
                    _lease(db, key, holder, now + ttl)
                _compare_generation(db, key, generation)
                db.execute(
                    'INSERT INTO corral_sessions (tenant, session_id, state, updated) VALUES (?, ?, ?, ?) '
                    'ON CONFLICT (tenant, session_id) DO UPDATE SET state = excluded.state, updated = excluded.updated',
                    (*key, state, now),
                )
                _set_generation(db, key, generation)
                db.execute('DELETE FROM corral_records WHERE tenant = ? AND session_id = ?', key)

        await self._run(put)

    async def append(self, session_id: str, record: bytes, *, holder: str, generation: int, tenant: str = '') -> None:
        """Append `record` to the stored state of `(tenant, session_id)` at `generation`, in one
        transaction that writes the record's bytes only. Raises as `put` does, and
        `SandboxStateError('no stored session with id ...')` when the session is not stored."""
        key = (check_tenant(tenant), check_session_id(session_id))
        record, holder, generation = check_state(record), check_holder(holder), check_generation(generation)

        def append(db: sqlite3.Connection) -> None:
            with _write_transaction(db):
                now = time.time()
                _refuse_other_holder(db, key, holder, now)
                if _compare_generation(db, key, generation) == 0:
                    raise not_found_error(key[1])
                db.execute(
                    'INSERT INTO corral_records (tenant, session_id, generation, record) VALUES (?, ?, ?, ?)',
                    (*key, generation, record),
                )
                _set_generation(db, key, generation)

        await self._run(append)

    async def get(self, session_id: str, *, tenant: str = '') -> StoredState:
        """The stored `StoredState`, read in one transaction. Raises `SandboxStateError('no stored
        session with id ...')`."""
        key = (check_tenant(tenant), check_session_id(session_id))

        def get(db: sqlite3.Connection) -> StoredState:
            db.execute('BEGIN')  # one snapshot of the tables (WAL: it waits for no writer)
            try:
                return _read(db, key)
            finally:
                db.execute('COMMIT')

        return await self._run(get)

    async def acquire_and_get(self, session_id: str, *, holder: str, ttl: float, tenant: str = '') -> StoredState:
        """Take (or extend) the lease for `ttl` seconds and read the stored `StoredState`, in one
        transaction. Raises as `acquire` and `get` do (no lease is taken then)."""
        key = (check_tenant(tenant), check_session_id(session_id))
        holder, ttl = check_holder(holder), check_ttl(ttl)

        def acquire_and_get(db: sqlite3.Connection) -> StoredState:
            with _not_flushed(db), _write_transaction(db):  # a session not stored raises: the lease is rolled back
                _take_lease(db, key, holder, ttl)
                return _read(db, key)

        return await self._run(acquire_and_get)

    async def acquire(self, session_id: str, *, holder: str, ttl: float, tenant: str = '') -> None:
        """Take (or extend) the lease for `ttl` seconds. Raises `SandboxSessionBusyError` if
        another holder's lease is live; an expired lease is taken over."""
        key = (check_tenant(tenant), check_session_id(session_id))
        holder, ttl = check_holder(holder), check_ttl(ttl)

        def acquire(db: sqlite3.Connection) -> None:
            with _not_flushed(db), _write_transaction(db):
                _take_lease(db, key, holder, ttl)

        await self._run(acquire)

    async def renew(self, session_id: str, *, holder: str, ttl: float, tenant: str = '') -> None:
        """Extend `holder`'s lease to `ttl` seconds from now; `SandboxSessionBusyError` if it was lost."""
        key = (check_tenant(tenant), check_session_id(session_id))
        holder, ttl = check_holder(holder), check_ttl(ttl)

        def renew(db: sqlite3.Connection) -> None:
            with _not_flushed(db):
                cursor = db.execute(
                    'UPDATE corral_leases SET expires = ? WHERE tenant = ? AND session_id = ? AND holder = ?',
                    (time.time() + ttl, *key, holder),
                )
            if cursor.rowcount != 1:
                raise lost_lease_error(key[1])

        await self._run(renew)

    async def release(self, session_id: str, *, holder: str, tenant: str = '') -> None:
        """Give up `holder`'s lease (nothing happens if it does not have it)."""
        key = (check_tenant(tenant), check_session_id(session_id))
        holder = check_holder(holder)

        def release(db: sqlite3.Connection) -> None:
            with _not_flushed(db):
                db.execute('DELETE FROM corral_leases WHERE tenant = ? AND session_id = ? AND holder = ?', (*key, holder))

        await self._run(release)

    async def delete(self, session_id: str, *, tenant: str = '', holder: str | None = None) -> None:
        """Delete the state and the lease. Raises `SandboxStateError('no stored session with id
        ...')` if not stored, `SandboxSessionBusyError` if a holder other than `holder` has a live lease."""
        key = (check_tenant(tenant), check_session_id(session_id))
        holder = None if holder is None else check_holder(holder)

        def delete(db: sqlite3.Connection) -> None:
            with _write_transaction(db):
                if db.execute('SELECT 1 FROM corral_sessions WHERE tenant = ? AND session_id = ?', key).fetchone() is None:
                    raise not_found_error(key[1])
                _refuse_other_holder(db, key, holder, time.time())
                _delete_rows(db, key)

        await self._run(delete)

    async def list(self, *, tenant: str = '') -> builtins.list[str]:
        """The ids of the tenant's stored sessions, sorted."""
        tenant = check_tenant(tenant)

        def list_ids(db: sqlite3.Connection) -> builtins.list[str]:
            rows = db.execute('SELECT session_id FROM corral_sessions WHERE tenant = ? ORDER BY session_id', (tenant,))
            return [row[0] for row in rows]

        return await self._run(list_ids)

    async def delete_untouched(self, seconds: float) -> builtins.list[tuple[str, str]]:
        """Delete the sessions, of every tenant, neither written nor leased in the last `seconds`,
        in one transaction; returns their `(tenant, session_id)`, sorted."""
        seconds = check_ttl(seconds)

        def delete_untouched(db: sqlite3.Connection) -> builtins.list[tuple[str, str]]:
            with _write_transaction(db):
                cutoff = time.time() - seconds
                keys = db.execute(
                    'SELECT s.tenant, s.session_id FROM corral_sessions s LEFT JOIN corral_generations g '
                    'ON g.tenant = s.tenant AND g.session_id = s.session_id '
                    'WHERE max(s.updated, coalesce(g.touched, 0)) < ? AND NOT EXISTS (SELECT 1 FROM corral_leases l '
                    'WHERE l.tenant = s.tenant AND l.session_id = s.session_id AND l.expires >= ?) ORDER BY s.tenant, s.session_id',
                    (cutoff, cutoff),
                ).fetchall()
                for key in keys:
                    _delete_rows(db, key)
            return [(tenant, session_id) for tenant, session_id in keys]

        return await self._run(delete_untouched)

    def default_state_key(self) -> bytes:
        """The 32-byte signing key in `<database>.key` beside the database file, created with mode
        0600 on first use. Raises `SandboxStateError` if that file is readable or writable by group
        or others, belongs to another user, or is not a 32-byte regular file (the message says how
        to fix it). Reads a small file: call it once, when the pool starts."""
        if self._key is None:
            path = self.path
            if self._default:
                _prepare_default_directory(path.parent)
            self._key = read_or_create_key(key_file_path(path))
        return self._key

    async def close(self) -> None:
        """Wait for running calls, then close every connection. Calls after it raise `RuntimeError`."""
        if self._closed:
            return
        self._closed = True
        await asyncio.get_running_loop().run_in_executor(None, self._shut_down)

    # -- the threads

    def _shut_down(self) -> None:
        self._executor.shutdown(wait=True)
        with self._lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            connection.close()

    async def _run(self, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        if self._closed:
            raise RuntimeError('the session store is closed')
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(self._call, operation))

    def _call(self, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        import sqlite3

        connection = self._connection()
        try:
            return operation(connection)
        except sqlite3.Error as e:
            if connection.in_transaction:  # a failed ROLLBACK: start the next call on a new connection
                self._local.connection = None
                with self._lock:
                    self._connections.remove(connection)
                connection.close()
            raise self._translate(e) from None

    def _connection(self) -> sqlite3.Connection:
        import sqlite3

        connection = getattr(self._local, 'connection', None)
        if connection is None:
            try:
                connection = self._connect()
            except sqlite3.Error as e:
                raise self._translate(e) from None
            self._local.connection = connection
        return connection

    def _connect(self) -> sqlite3.Connection:
        # Imported here, not at the top: every worker process imports the corral package, and only
        # the host needs SQLite.
        import sqlite3

        path = self.path
        if self._default:
            _prepare_default_directory(path.parent)
        _create_private_file(path)
        connection = sqlite3.connect(
            path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False, cached_statements=32
        )
        try:
            _until_free(connection, 'PRAGMA journal_mode = WAL', self.busy_timeout)
            connection.execute('PRAGMA synchronous = FULL')
            # After a checkpoint, cut the write-ahead log back to 64 MiB: without a limit it keeps the
            # size of the largest state ever written.
            connection.execute('PRAGMA journal_size_limit = 67108864')
            with self._lock:
                if not self._schema_ready:
                    with _write_transaction(connection):
                        for statement in (*_SCHEMA.split(';'), *SQLITE_TENANT_SCHEMA):
                            if statement.strip():
                                connection.execute(statement)
                        columns = [row[1] for row in connection.execute('PRAGMA table_info(corral_generations)')]
                        if 'touched' not in columns:  # a store made before retention: its sessions count as written when stored
                            connection.execute('ALTER TABLE corral_generations ADD COLUMN touched REAL')
                    self._schema_ready = True
        except BaseException:
            connection.close()
            raise
        with self._lock:
            self._connections.append(connection)
        return connection

    def _translate(self, error: sqlite3.Error) -> SandboxStoreError:
        name = getattr(error, 'sqlite_errorname', '')
        where = f'the session store {self._path}'
        if name == 'SQLITE_FULL':
            text = f'{where} could not write: the disk is full. What was stored before is kept'
        elif name.startswith('SQLITE_BUSY') or name.startswith('SQLITE_LOCKED'):
            text = f'{where} stayed locked by another connection for {self.busy_timeout:g} s (busy_timeout); nothing was changed'
        elif name == 'SQLITE_NOTADB':
            text = f'{where} is not a SQLite database'
        elif name.startswith('SQLITE_CANTOPEN'):
            text = f'{where} cannot be opened: check that its directory exists and this user may write there'
        elif name.startswith('SQLITE_READONLY'):
            text = f'{where} is read-only for this process'
        else:
            text = f'{where} failed ({name or type(error).__name__}): {error}. What was stored before is kept'
        return SandboxStoreError(text)


def _until_free(connection: sqlite3.Connection, statement: str, seconds: float) -> None:
    """Execute `statement`, trying again for up to `seconds` while SQLite answers SQLITE_BUSY at
    once: a switch to WAL needs the file to itself, and when other connections open a new
    database at the same moment SQLite refuses it without calling the busy handler."""
    import sqlite3

    deadline = time.monotonic() + seconds
    while True:
        try:
            connection.execute(statement)
            return
        except sqlite3.OperationalError as error:
            if not getattr(error, 'sqlite_errorname', '').startswith('SQLITE_BUSY') or time.monotonic() > deadline:
                raise
        time.sleep(0.005)


def _create_private_file(path: Path) -> None:
    """Create the database file with mode 0600 when it does not exist, so that the states in it (and
    its WAL files, which SQLite creates with the database's mode) are the owner's only."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    except FileExistsError:
        pass
    except OSError as e:
        raise SandboxStoreError(f'cannot create the session store {path}: {e.strerror}') from None


class _write_transaction:
    """`BEGIN IMMEDIATE` ... `COMMIT`, or `ROLLBACK` on any error: the write lock is taken up front,
    so a compare-and-set inside it sees no other writer, and waits `busy_timeout` for one to finish."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def __enter__(self) -> None:
        self._connection.execute('BEGIN IMMEDIATE')

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        import sqlite3

        try:
            if exc_type is None:
                self._connection.execute('COMMIT')
                return
        except sqlite3.Error:
            self._roll_back()
            raise
        self._roll_back()

    def _roll_back(self) -> None:
        import sqlite3

        if self._connection.in_transaction:
            try:
                self._connection.execute('ROLLBACK')
            except sqlite3.Error:
                pass  # SQLite rolls back by itself after errors such as a full disk


def _read(db: sqlite3.Connection, key: tuple[str, str]) -> StoredState:
    """The session's `StoredState` (in a transaction: one snapshot), or `SandboxStateError` when it is not stored."""
    row = db.execute(
        'SELECT s.state, coalesce(g.generation, 0) FROM corral_sessions s LEFT JOIN corral_generations g '
        'ON g.tenant = s.tenant AND g.session_id = s.session_id WHERE s.tenant = ? AND s.session_id = ?',
        key,
    ).fetchone()
    if row is None:
        raise not_found_error(key[1])
    records = db.execute('SELECT record FROM corral_records WHERE tenant = ? AND session_id = ? ORDER BY generation', key).fetchall()
    return StoredState(row[0], [record for (record,) in records], row[1])


def _lease(db: sqlite3.Connection, key: tuple[str, str], holder: str, expires: float) -> None:
    """Give the lease of `key` to `holder` until `expires` (in a write transaction that checked no other holder has it)."""
    db.execute('INSERT OR REPLACE INTO corral_leases (tenant, session_id, holder, expires) VALUES (?, ?, ?, ?)', (*key, holder, expires))


def _take_lease(db: sqlite3.Connection, key: tuple[str, str], holder: str, ttl: float) -> None:
    """Give the lease of `key` to `holder` for `ttl` seconds from now, in a write transaction;
    `SandboxSessionBusyError` if another holder's lease is live."""
    now = time.time()
    _refuse_other_holder(db, key, holder, now)
    _lease(db, key, holder, now + ttl)


def _compare_generation(db: sqlite3.Connection, key: tuple[str, str], generation: int) -> int:
    """The session's stored generation (0: not stored); `SandboxSessionBusyError` unless it is
    `generation - 1`."""
    row = db.execute(
        'SELECT g.generation FROM corral_sessions s JOIN corral_generations g '
        'ON g.tenant = s.tenant AND g.session_id = s.session_id WHERE s.tenant = ? AND s.session_id = ?',
        key,
    ).fetchone()
    stored = 0 if row is None else row[0]
    if stored != generation - 1:
        raise conflict_error(key[1], stored, generation)
    return stored


def _set_generation(db: sqlite3.Connection, key: tuple[str, str], generation: int) -> None:
    db.execute(
        'INSERT INTO corral_generations (tenant, session_id, generation, touched) VALUES (?, ?, ?, ?) '
        'ON CONFLICT (tenant, session_id) DO UPDATE SET generation = excluded.generation, touched = excluded.touched',
        (*key, generation, time.time()),
    )


def _delete_rows(db: sqlite3.Connection, key: tuple[str, str]) -> None:
    """Delete a session's rows from every table (in a write transaction)."""
    for table in ('corral_sessions', 'corral_records', 'corral_generations', 'corral_leases'):
        db.execute(f'DELETE FROM {table} WHERE tenant = ? AND session_id = ?', key)


def _refuse_other_holder(
    db: sqlite3.Connection, key: tuple[str, str], holder: str | None, now: float
) -> None:
    """Raise `SandboxSessionBusyError` if a holder other than `holder` has a live lease on `key`."""
    row = db.execute('SELECT holder, expires FROM corral_leases WHERE tenant = ? AND session_id = ?', key).fetchone()
    if row is not None and row[0] != holder and row[1] > now:
        raise busy_error(key[1], row[1] - now)
