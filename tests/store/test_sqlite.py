"""What only the SQLite store does: its file, its key file, its default location, a full disk."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import stat
import subprocess
import sys
import tempfile
import textwrap

import pytest

import corral
from corral.store import SQLiteStore, default_database_path


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def as_another_user(uid: int, call, environ: dict[str, str]) -> str:
    """The text of the error `call()` raises (or 'no error') in a child of this process that runs as
    `uid` (when the tests run as root; else as this user) with `environ` as its whole environment."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no return from here
        status = 1
        try:
            os.close(read_end)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            os.environ.clear()
            os.environ.update(environ)
            try:
                call()
                text = 'no error'
            except Exception as e:
                text = f'{type(e).__name__}: {e}'
            os.write(write_end, text.encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, 'rb') as pipe:
        text = pipe.read().decode()
    assert os.waitpid(pid, 0)[1] == 0
    return text


async def test_database_file_is_private_and_in_wal_mode(tmp_path):
    path = tmp_path / 'sessions.db'
    async with SQLiteStore(path) as store:
        await store.put('s1', b'x', holder='h', generation=1)
        assert mode(path) == 0o600
        assert mode(tmp_path / 'sessions.db-wal') == 0o600  # SQLite gives its WAL the database's mode
    with sqlite3.connect(path) as db:
        assert db.execute('PRAGMA journal_mode').fetchone() == ('wal',)


async def test_key_file_is_created_owner_only_and_kept(tmp_path):
    path = tmp_path / 'sessions.db'
    old_umask = os.umask(0)  # a permissive umask must not make the key readable
    try:
        key = SQLiteStore(path).default_state_key()
    finally:
        os.umask(old_umask)
    key_file = tmp_path / 'sessions.db.key'
    assert len(key) == 32
    assert key_file.read_bytes() == key
    assert mode(key_file) == 0o600
    assert SQLiteStore(path).default_state_key() == key  # reopened: the same key
    assert SQLiteStore(tmp_path / 'other.db').default_state_key() != key  # another database: its own key
    assert sorted(p.name for p in tmp_path.iterdir()) == ['other.db.key', 'sessions.db.key']


def test_key_file_made_by_two_processes_at_once_is_one_key(tmp_path):
    script = textwrap.dedent(
        """
        import sys
        from corral.store import SQLiteStore
        sys.stdin.readline()
        print(SQLiteStore(sys.argv[1]).default_state_key().hex())
        """
    )
    makers = [
        subprocess.Popen([sys.executable, '-c', script, str(tmp_path / 's.db')], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    for maker in makers:
        maker.stdin.write('\n')
        maker.stdin.flush()
    keys = {maker.communicate(timeout=60)[0].strip() for maker in makers}
    assert keys == {(tmp_path / 's.db.key').read_bytes().hex()}
    assert sorted(p.name for p in tmp_path.iterdir()) == ['s.db.key']  # no temporary file left


@pytest.mark.parametrize('bits', [0o640, 0o604, 0o620, 0o602, 0o610, 0o601, 0o644])
def test_key_file_open_to_others_is_refused(tmp_path, bits):
    key_file = tmp_path / 'sessions.db.key'
    key_file.write_bytes(os.urandom(32))
    os.chmod(key_file, bits)
    with pytest.raises(corral.SandboxStateError) as info:
        SQLiteStore(tmp_path / 'sessions.db').default_state_key()
    assert info.value.display() == (
        f'the state key file {key_file} is accessible to group or others (mode {bits:04o}); anyone who can read it '
        f'can forge stored sessions. Make it owner-only (chmod 600 {key_file}) and, if others may have read it, '
        'replace it'
    )


def test_key_file_with_owner_execute_bit_is_accepted(tmp_path):
    key_file = tmp_path / 'sessions.db.key'
    key_file.write_bytes(b'k' * 32)
    os.chmod(key_file, 0o700)
    assert SQLiteStore(tmp_path / 'sessions.db').default_state_key() == b'k' * 32


def test_key_file_of_the_wrong_size_or_kind_is_refused(tmp_path):
    key_file = tmp_path / 'sessions.db.key'
    store = SQLiteStore(tmp_path / 'sessions.db')
    key_file.write_bytes(b'k' * 31)
    os.chmod(key_file, 0o600)
    with pytest.raises(corral.SandboxStateError) as info:
        store.default_state_key()
    assert info.value.display() == f'the state key file {key_file} holds 31 bytes, not 32: it is not a key corral made'
    key_file.unlink()
    target = tmp_path / 'elsewhere'
    target.write_bytes(b'k' * 32)
    os.chmod(target, 0o600)
    key_file.symlink_to(target)
    with pytest.raises(corral.SandboxStateError) as info:
        store.default_state_key()
    assert info.value.display() == f'the state key file {key_file} is a symbolic link; it must be a regular file'
    key_file.unlink()
    key_file.mkdir(mode=0o700)
    with pytest.raises(corral.SandboxStateError) as info:
        store.default_state_key()
    assert info.value.display() == f'the state key file {key_file} is not a regular file'


def test_key_file_of_another_user_is_refused(tmp_path):
    if os.geteuid() != 0:
        pytest.skip('only root can give a file to another user')
    key_file = tmp_path / 'sessions.db.key'
    key_file.write_bytes(os.urandom(32))
    os.chmod(key_file, 0o600)
    os.chown(key_file, 65534, 65534)
    with pytest.raises(corral.SandboxStateError) as info:
        SQLiteStore(tmp_path / 'sessions.db').default_state_key()
    assert info.value.display() == (
        f"the state key file {key_file} belongs to uid 65534, not to this process's user (uid 0); whoever owns it "
        'knows the key. Remove it to have a new one made, or pass Pool(state_key=...)'
    )


@pytest.mark.forks
def test_key_file_cannot_be_created():
    # As root a directory's mode stops nothing: the child runs as another user, in a directory of
    # root's that it may enter but not write (or, for an ordinary user, in one of its own made read-only).
    with tempfile.TemporaryDirectory() as directory:
        os.chmod(directory, 0o555)
        try:
            store = SQLiteStore(os.path.join(directory, 's.db'))
            text = as_another_user(54321 if os.geteuid() == 0 else os.geteuid(), store.default_state_key, {})
        finally:
            os.chmod(directory, 0o700)
    assert text == f'SandboxStateError: cannot create the state key file {directory}/s.db.key: Permission denied'


def test_key_file_cannot_be_read(tmp_path):
    (tmp_path / 'a-file').write_text('not a directory')
    with pytest.raises(corral.SandboxStateError) as info:
        SQLiteStore(tmp_path / 'a-file' / 's.db').default_state_key()
    assert info.value.display() == f'cannot read the state key file {tmp_path}/a-file/s.db.key: Not a directory'


async def test_not_a_database(tmp_path):
    path = tmp_path / 'notes.txt'
    path.write_text('these are not sessions\n' * 100)
    async with SQLiteStore(path) as store:
        with pytest.raises(corral.SandboxStoreError) as info:
            await store.list()
    assert info.value.display() == f'the session store {path} is not a SQLite database'
    assert path.read_text() == 'these are not sessions\n' * 100


async def test_missing_directory_is_not_created(tmp_path):
    path = tmp_path / 'typo' / 'sessions.db'
    async with SQLiteStore(path) as store:
        with pytest.raises(corral.SandboxStoreError) as info:
            await store.put('s1', b'x', holder='h', generation=1)
    assert info.value.display() == f'cannot create the session store {path}: No such file or directory'
    assert not path.parent.exists()


async def test_a_write_waits_for_another_process_then_gives_up(tmp_path):
    path = tmp_path / 's.db'
    async with SQLiteStore(path, busy_timeout=0.2) as store:
        await store.put('s1', b'old', holder='h', generation=1)
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute('BEGIN IMMEDIATE')  # another process's write transaction
        try:
            with pytest.raises(corral.SandboxStoreError) as info:
                await store.put('s1', b'new', holder='h', generation=2)
            assert info.value.display() == (
                f'the session store {path} stayed locked by another connection for 0.2 s (busy_timeout); nothing was changed'
            )
            assert (await store.get('s1')).state == b'old'  # readers never wait (WAL)
        finally:
            blocker.execute('ROLLBACK')
            blocker.close()
        await store.put('s1', b'new', holder='h', generation=2)
        assert (await store.get('s1')).state == b'new'


_FULL_DISK = textwrap.dedent(
    """
    import asyncio, json, os, sys
    import corral

    async def main(directory):
        results = {}
        async with corral.SQLiteStore(os.path.join(directory, 's.db')) as store:
            await store.put('kept', b'k' * 100_000, holder='h', generation=1)
            for session_id, size in [('new', 4_000_000), ('kept', 4_000_000)]:
                try:
                    await store.put(session_id, b'x' * size, holder='h', generation=1 if session_id == 'new' else 2)
                    results[session_id] = 'stored'
                except corral.SandboxStoreError as e:
                    results[session_id] = e.display()
            results['kept-size'] = len((await store.get('kept')).state)
            results['list'] = await store.list()
            await store.put('small', b's', holder='h', generation=1)  # a write that fits still works
            results['small'] = (await store.get('small')).state.decode()
            with open(os.path.join(directory, 'filler'), 'wb', buffering=0) as filler:
                try:
                    while True:
                        filler.write(b'f' * 4096)
                except OSError:
                    pass
            try:
                store.default_state_key()
            except corral.SandboxStateError as e:
                results['key'] = e.display()
            results['files'] = sorted(name for name in os.listdir(directory) if 'key' in name)
        print(json.dumps(results))

    asyncio.run(main(sys.argv[1]))
    """
)


def test_full_disk_loses_nothing(tmp_path):
    """A real full disk: a 1 MiB tmpfs in a mount namespace of the test's own."""
    directory = tmp_path / 'small-disk'
    directory.mkdir()
    unshare = ['unshare', '--mount', '--propagation', 'private']
    if os.geteuid() != 0:
        unshare[1:1] = ['--user', '--map-root-user']
    command = [*unshare, 'sh', '-c', 'mount -t tmpfs -o size=1m none "$1" && exec "$2" -c "$3" "$1"', 'sh',
               str(directory), sys.executable, _FULL_DISK]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    full = f'the session store {directory}/s.db could not write: the disk is full. What was stored before is kept'
    assert json.loads(result.stdout) == {
        'new': full,
        'kept': full,
        'kept-size': 100_000,
        'list': ['kept'],
        'small': 's',
        'key': f'cannot create the state key file {directory}/s.db.key: No space left on device',
        'files': [],  # nor a temporary file left behind
    }


def test_default_location(monkeypatch, tmp_path):
    monkeypatch.setenv('XDG_DATA_HOME', str(tmp_path / 'data'))
    assert default_database_path() == tmp_path / 'data' / 'corral' / 'sessions.db'
    monkeypatch.setenv('XDG_DATA_HOME', 'relative/data')  # not absolute: ignored, as the XDG specification says
    monkeypatch.setenv('HOME', str(tmp_path))
    assert default_database_path() == tmp_path / '.local' / 'share' / 'corral' / 'sessions.db'
    monkeypatch.delenv('XDG_DATA_HOME')
    assert default_database_path() == tmp_path / '.local' / 'share' / 'corral' / 'sessions.db'


async def test_default_store_creates_its_directory_owner_only(monkeypatch, tmp_path):
    monkeypatch.delenv('XDG_DATA_HOME', raising=False)
    monkeypatch.setenv('HOME', str(tmp_path))
    store = corral.open_store()
    assert isinstance(store, SQLiteStore)
    async with store:
        await store.put('s1', b'x', holder='h', generation=1)
        key = store.default_state_key()
    directory = tmp_path / '.local' / 'share' / 'corral'
    assert mode(directory) == 0o700
    assert sorted(p.name for p in directory.iterdir()) == ['sessions.db', 'sessions.db.key']
    assert (directory / 'sessions.db.key').read_bytes() == key
    async with corral.open_store() as again:
        assert (await again.get('s1')).state == b'x'


async def test_default_store_refuses_a_directory_others_may_change(monkeypatch, tmp_path):
    monkeypatch.delenv('XDG_DATA_HOME', raising=False)
    monkeypatch.setenv('HOME', str(tmp_path))
    directory = tmp_path / '.local' / 'share' / 'corral'
    directory.mkdir(parents=True)
    os.chmod(directory, 0o777)
    async with corral.open_store() as store:
        with pytest.raises(corral.SandboxStoreError) as info:
            await store.list()
    assert info.value.display() == (
        f"the session store directory {directory} must belong to this process's user (uid {os.geteuid()}) and be "
        'writable by it alone; it belongs to uid %d with mode 0777' % os.geteuid()
    )


ADVICE = (
    "set XDG_DATA_HOME to a directory of this user's, or pass a store, e.g. "
    "Pool(store='sqlite:///path/to/sessions.db')"
)


async def test_default_store_without_a_home(monkeypatch):
    monkeypatch.delenv('XDG_DATA_HOME', raising=False)
    monkeypatch.setenv('HOME', '/nonexistent')  # nobody's home on Debian
    store = corral.open_store()  # opening does not need the place yet
    with pytest.raises(corral.SandboxStoreError) as info:
        await store.list()
    text = f'the default session store lives under the home directory, and /nonexistent does not exist: {ADVICE}'
    assert info.value.display() == text
    with pytest.raises(corral.SandboxStoreError) as info:
        store.default_state_key()
    assert info.value.display() == text
    await store.close()
    assert not os.path.exists('/nonexistent')


@pytest.mark.forks
def test_default_store_of_a_user_without_home_or_passwd_entry():
    # A container's arbitrary uid: no HOME, and no passwd entry to find a home in.
    if os.geteuid() != 0:
        pytest.skip('only root can run a child as a uid without a passwd entry')
    assert as_another_user(54321, default_database_path, {}) == (
        f'SandboxStoreError: the default session store lives under the home directory, and this process has '
        f'none: {ADVICE}'
    )


def test_default_store_refuses_a_home_of_another_user(monkeypatch, tmp_path):
    # Root under a sudo that kept the user's HOME: root's files would land in that user's hands.
    if os.geteuid() != 0:
        pytest.skip('only root can give a directory to another user')
    os.chown(tmp_path, 65534, 65534)
    monkeypatch.delenv('XDG_DATA_HOME', raising=False)
    monkeypatch.setenv('HOME', str(tmp_path))
    with pytest.raises(corral.SandboxStoreError) as info:
        default_database_path()
    assert info.value.display() == (
        f"the default session store lives under the home directory, and {tmp_path} belongs to uid 65534, not to "
        f"this process's user (uid 0): {ADVICE}"
    )


async def test_several_threads_and_stores_share_one_file(tmp_path):
    path = tmp_path / 's.db'
    stores = [SQLiteStore(path) for _ in range(3)]
    try:
        await asyncio.gather(*(
            store.put(f's{i}-{j}', bytes([j]) * 1000, holder='h', generation=1) for i, store in enumerate(stores) for j in range(20)
        ))
        assert len(await stores[0].list()) == 60
        assert (await stores[2].get('s0-7')).state == b'\x07' * 1000
    finally:
        for store in stores:
            await store.close()


@pytest.mark.forks
def test_an_ordinary_user_uses_the_default_store():
    # Run as another uid with a home of its own (as root), or as this ordinary user.
    uid = 54321 if os.geteuid() == 0 else os.geteuid()

    async def scenario(home: str) -> None:
        async with corral.open_store() as store:
            await store.acquire('s1', holder='h', ttl=60)
            await store.put('s1', b'state', holder='h', generation=1)
            assert (await store.get('s1')).state == b'state'
            assert await store.list() == ['s1']
            assert len(store.default_state_key()) == 32
        directory = os.path.join(home, '.local', 'share', 'corral')
        assert sorted(os.listdir(directory)) == ['sessions.db', 'sessions.db.key'], os.listdir(directory)
        assert {mode(directory), mode(os.path.join(directory, 'sessions.db.key'))} == {0o700, 0o600}

    with tempfile.TemporaryDirectory() as home:
        os.chmod(home, 0o700)
        os.chown(home, uid, uid)
        text = as_another_user(uid, lambda: asyncio.run(scenario(home)), {'HOME': home})
    assert text == 'no error'


async def test_stores_opening_a_new_database_at_once_all_switch_it_to_wal(tmp_path):
    """Six stores' first writes to one new file, twenty times over: SQLite refuses the switch to
    WAL at once (SQLITE_BUSY, no busy handler) while another connection is making the same
    switch, which failed a store's first write as if the file had stayed locked."""
    for round_ in range(20):
        url = f'sqlite://{tmp_path}/new{round_}.db'
        stores = [corral.open_store(url) for _ in range(6)]
        try:
            await asyncio.gather(*(store.put(f's{i}', b'x', holder='h', generation=1) for i, store in enumerate(stores)))
            assert await stores[0].list() == [f's{i}' for i in range(6)]
        finally:
            await asyncio.gather(*(store.close() for store in stores))


async def test_a_store_made_before_retention_gets_its_touched_column(tmp_path):
    """A database whose generations table has no `touched` column (made before retention) gets it
    on opening; its sessions count as touched when their state was written."""
    path = tmp_path / 'old.db'
    db = sqlite3.connect(path)
    db.executescript(
        'CREATE TABLE corral_sessions (tenant TEXT NOT NULL, session_id TEXT NOT NULL, state BLOB NOT NULL, updated REAL NOT NULL, '
        'PRIMARY KEY (tenant, session_id));'
        'CREATE TABLE corral_generations (tenant TEXT NOT NULL, session_id TEXT NOT NULL, generation INTEGER NOT NULL, '
        'PRIMARY KEY (tenant, session_id)) WITHOUT ROWID;'
        "INSERT INTO corral_sessions VALUES ('', 'ancient', x'00', 1000.0), ('', 'recent', x'00', 4e9);"
        "INSERT INTO corral_generations VALUES ('', 'ancient', 1), ('', 'recent', 1);"
    )
    db.commit()
    db.close()
    async with corral.open_store(f'sqlite:///{path}') as store:
        assert await store.delete_untouched(3600) == [('', 'ancient')]
        await store.append('recent', b'r', holder='h', generation=2)
        assert await store.get('recent') == corral.StoredState(b'\x00', [b'r'], 2)
    columns = [row[1] for row in sqlite3.connect(path).execute('PRAGMA table_info(corral_generations)')]
    assert columns == ['tenant', 'session_id', 'generation', 'touched']


async def _steps(db, run, kept):
    """The first four words of each statement `run()` has the connection `db` execute that `kept` keeps."""
    seen: list[str] = []
    db.set_trace_callback(seen.append)
    try:
        await run()
    finally:
        db.set_trace_callback(None)
    return [' '.join(statement.split()[:4]) for statement in seen if kept(statement)]


async def test_tenant_slots_commit_without_a_flush(tmp_path):
    """A tenant's session slot, taken, renewed and released, is committed at synchronous=NORMAL as a
    lease is (a machine's crash ends its holder too), and the connection is back at FULL after each."""
    store = SQLiteStore(tmp_path / 's.db', threads=1)
    try:
        await store.put('s1', b'state', holder='h', generation=1)
        [db] = store._connections

        async def slots():
            assert await store.take_tenant_slot('t', 'h1', limit=1, ttl=30) == (True, 0)
            assert await store.take_tenant_slot('t', 'h2', limit=1, ttl=30) == (False, 1)
            assert await store.renew_tenant_slot('t', 'h1', limit=1, ttl=30) == (True, 0)
            await store.release_tenant_slot('t', 'h1')

        steps = await _steps(
            db, slots,
            lambda statement: statement.startswith(('PRAGMA', 'BEGIN', 'COMMIT', 'ROLLBACK', 'INSERT OR REPLACE INTO corral_tenant_sessions', 'UPDATE corral_tenant_sessions'))
            or statement.startswith('DELETE FROM corral_tenant_sessions') and 'holder' in statement,  # the release, not the sweep of lapsed slots
        )
        assert steps == [
            'PRAGMA synchronous = NORMAL', 'BEGIN IMMEDIATE', 'INSERT OR REPLACE INTO', 'COMMIT', 'PRAGMA synchronous = FULL',  # taken
            'PRAGMA synchronous = NORMAL', 'BEGIN IMMEDIATE', 'COMMIT', 'PRAGMA synchronous = FULL',  # refused
            'PRAGMA synchronous = NORMAL', 'BEGIN IMMEDIATE', 'UPDATE corral_tenant_sessions SET expires', 'COMMIT', 'PRAGMA synchronous = FULL',  # renewed
            'PRAGMA synchronous = NORMAL', 'DELETE FROM corral_tenant_sessions WHERE', 'PRAGMA synchronous = FULL',  # released
        ]
        assert db.execute('PRAGMA synchronous').fetchone() == (2,)  # FULL
        assert await store.take_tenant_slot('t', 'h2', limit=1, ttl=30) == (True, 0)
    finally:
        await store.close()


async def test_leases_commit_without_a_flush_and_states_with_one(tmp_path):
    """A lease is committed at synchronous=NORMAL (no fsync; a machine's crash ends its holders
    too), a state at FULL, and the connection is back at FULL after every lease."""
    store = SQLiteStore(tmp_path / 's.db', threads=1)
    try:
        await store.put('s1', b'state', holder='h', generation=1)
        [db] = store._connections

        async def leases():
            await store.acquire('s1', holder='h', ttl=30)
            await store.renew('s1', holder='h', ttl=30)
            await store.append('s1', b'record', holder='h', generation=2)
            await store.release('s1', holder='h')

        steps = await _steps(
            db, leases,
            lambda statement: statement.startswith(('PRAGMA', 'BEGIN', 'COMMIT', 'INSERT OR REPLACE INTO corral_leases', 'UPDATE corral_leases', 'DELETE FROM corral_leases')),
        )
        assert steps == [
            'PRAGMA synchronous = NORMAL', 'BEGIN IMMEDIATE', 'INSERT OR REPLACE INTO', 'COMMIT', 'PRAGMA synchronous = FULL',  # acquire
            'PRAGMA synchronous = NORMAL', 'UPDATE corral_leases SET expires', 'PRAGMA synchronous = FULL',  # renew
            'BEGIN IMMEDIATE', 'COMMIT',  # append, at FULL
            'PRAGMA synchronous = NORMAL', 'DELETE FROM corral_leases WHERE', 'PRAGMA synchronous = FULL',  # release
        ]
        assert db.execute('PRAGMA synchronous').fetchone() == (2,)  # FULL
        await store.acquire('s1', holder='h', ttl=30)
        with pytest.raises(corral.SandboxSessionBusyError):  # a refused lease leaves FULL too
            await store.acquire('s1', holder='other', ttl=30)
        assert db.execute('PRAGMA synchronous').fetchone() == (2,)
        assert (await store.get('s1')).records == [b'record']
    finally:
        await store.close()
