"""A session's working folder (`os.chdir`, `Session.chdir`) is part of its stored state.

It comes back with a dumped state, with a stored session resumed by id (full states and the
records appended to them), goes back with a feed that is undone, and a state whose folder was
forged (signed again with the pool's key) is refused when malformed and reaches nothing the
mounts do not hold when it names a folder outside them.
"""

import hashlib
import hmac
import struct

import msgpack
import pytest

import corral

KEY = b'test-state-key-0123456789abcdef!'


@pytest.fixture
async def pool(tmp_path):
    async with corral.Pool(state_key=KEY, store=f'sqlite:///{tmp_path}/store.db') as pool:
        yield pool


@pytest.fixture
def mount(tmp_path):
    data = tmp_path / 'data'
    (data / 'reports' / 'q1').mkdir(parents=True)
    (data / 'reports' / 'q1' / 'sales.csv').write_text('north,10\n')
    (data / 'notes.txt').write_text('notes\n')
    (tmp_path / 'secret.txt').write_text('top secret\n')
    return corral.Mount(data, '/data', mode='read-only')


async def test_the_working_folder_comes_back_with_a_dumped_state(pool, mount):
    async with pool.checkout(mounts=mount) as session:
        await session.feed_run("import os\nos.chdir('reports')")
        await session.feed_run("os.chdir('q1')")
        state = await session.dump()
    async with pool.checkout(mounts=mount) as loaded:
        await loaded.load_session(state)
        assert await loaded.feed_run("(os.getcwd(), open('sales.csv').read())") == ('/data/reports/q1', 'north,10\n')
    async with pool.checkout(mounts=mount) as fresh:  # a state is the session's: another starts at the mount
        assert await fresh.feed_run('import os\nos.getcwd()') == '/data'


async def test_a_stored_session_resumed_by_id_keeps_its_working_folder(pool, mount):
    async with pool.checkout(ephemeral=False, mounts=mount) as session:
        session_id = session.session_id
        await session.feed_run("import os\nos.chdir('reports')")  # the full state
        await session.feed_run("os.chdir('q1')")  # a record appended to it
    async with pool.checkout(session_id=session_id, mounts=mount) as resumed:
        assert await resumed.feed_run('os.getcwd()') == '/data/reports/q1'
        await resumed.feed_run("os.chdir('/data')")
        resumed.chdir('/data/reports')  # the host moves it between feeds: stored with the next feed
        await resumed.feed_run('x = 1')
    async with pool.checkout(session_id=session_id, mounts=mount) as again:
        assert await again.feed_run('os.getcwd()') == '/data/reports'


async def test_an_undone_feed_takes_its_chdir_with_it(pool, mount):
    async with pool.checkout(ephemeral=False, mounts=mount, limits=corral.Limits(wall_time=0.5)) as stored:
        await stored.feed_run("import os\nos.chdir('reports')")
        with pytest.raises(corral.SandboxLimitError):
            await stored.feed_run("os.chdir('q1')\nwhile True:\n    pass")
        assert await stored.feed_run('os.getcwd()') == '/data/reports'


def forged(state: bytes, cwd: object) -> bytes:
    """`state` with its working folder replaced, signed again with the pool's key (the envelope:
    magic, format version and body length, the msgpack body, its HMAC-SHA256)."""
    magic, version, length = struct.unpack_from('>8sHI', state)
    body = msgpack.unpackb(state[14 : 14 + length], raw=False)
    assert body['cwd'] == '/data/reports'
    body['cwd'] = cwd
    packed = msgpack.packb(body, use_bin_type=True)
    head = struct.pack('>8sHI', magic, version, len(packed))
    return head + packed + hmac.new(KEY, head + packed, hashlib.sha256).digest()


async def test_a_forged_working_folder_is_refused_or_reaches_nothing_outside_the_mounts(pool, mount):
    async with pool.checkout(mounts=mount) as session:
        await session.feed_run("import os\nos.chdir('reports')")
        state = await session.dump()
    for cwd in ('reports', '/data\x00', 7):
        async with pool.checkout(mounts=mount) as loaded:
            with pytest.raises(corral.SandboxStateError) as info:
                await loaded.load_session(forged(state, cwd))
        assert str(info.value) == 'the session state is malformed (malformed working folder)'
    for cwd, path in (('/', 'secret.txt'), ('/data/reports/../..', 'secret.txt'), ('/etc', 'passwd')):
        async with pool.checkout(mounts=mount) as loaded:
            await loaded.load_session(forged(state, cwd))
            with pytest.raises(corral.SandboxRuntimeError) as info:
                await loaded.feed_run(f'import os\nopen({path!r}).read()')
            assert info.value.exc_type == 'PermissionError'
            assert info.value.message == f"[Errno 13] Permission denied (outside the folders the host mounted: /data): {path!r}"
