"""Files, environment, clock and seed through the host: mounts in each mode, escapes, grants.

Every path a script names is checked on the host (`corral.host.os_access`): these tests try to
leave a mount every way a path can (`..`, absolute paths, symlinks to files and folders outside,
NUL bytes, joins with an absolute part) and check that the host's files change only in
`read-write` mode.
"""

from __future__ import annotations

import datetime
import os
import pathlib
import textwrap
from typing import Any

import pytest

import corral
from corral import Mount, OsAccess
from corral.host.os_access import SystemCalls

pytestmark = pytest.mark.asyncio(loop_scope='module')


@pytest.fixture
def host(tmp_path: pathlib.Path) -> pathlib.Path:
    """A host folder with files, and a secret next to it (outside any mount)."""
    root = tmp_path / 'shared'
    (root / 'reports').mkdir(parents=True)
    (root / 'notes.txt').write_text('host notes\n')
    (root / 'reports' / 'q1.csv').write_text('region,amount\nnorth,10\n')
    (tmp_path / 'secret.txt').write_text('top secret\n')
    (tmp_path / 'secret-dir').mkdir()
    (tmp_path / 'secret-dir' / 'key.txt').write_text('key\n')
    return root


async def run(pool: corral.Pool, code: str, **checkout: Any) -> Any:
    async with pool.checkout(**checkout) as session:
        return await session.feed_run(textwrap.dedent(code), print_callback=lambda stream, text: None)


async def error(pool: corral.Pool, code: str, **checkout: Any) -> str:
    with pytest.raises(corral.SandboxRuntimeError) as info:
        await run(pool, code, **checkout)
    return f'{info.value.exc_type}: {info.value.message}'


def snapshot(root: pathlib.Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() if p.is_file() else '<dir>' for p in sorted(root.rglob('*'))}


# ----- overlay (the default) ------------------------------------------------------------------------

async def test_overlay_writes_stay_in_the_session(pool, host):
    before = snapshot(host)
    code = '''
        import os, pathlib
        pathlib.Path('new.txt').write_text('made in the sandbox')
        with open('notes.txt', 'a') as f:
            f.write('appended\\n')
        os.makedirs('out/deep')
        pathlib.Path('out/deep/x.txt').write_text('x')
        os.remove('reports/q1.csv')
        os.rename('new.txt', 'renamed.txt')
        (sorted(os.listdir('.')), open('notes.txt').read(), os.listdir('reports'), open('renamed.txt').read(),
         os.path.exists('new.txt'), os.getcwd())
    '''
    async with pool.checkout(mounts=Mount(host, '/data')) as session:
        value = await session.feed_run(textwrap.dedent(code))
        # a later feed of the same session sees the session's files
        later = await session.feed_run("open('/data/out/deep/x.txt').read()")
    assert value == (['notes.txt', 'out', 'renamed.txt', 'reports'], 'host notes\nappended\n', [], 'made in the sandbox', False, '/data')
    assert later == 'x'
    assert snapshot(host) == before
    # another session starts from the host's files
    assert await run(pool, "import os\nsorted(os.listdir('.'))", mounts=[Mount(host, '/data')]) == ['notes.txt', 'reports']


async def test_overlay_folder_deleted_then_made_again_is_empty(pool, host):
    code = '''
        import os
        os.remove('reports/q1.csv')
        os.rmdir('reports')
        gone = os.path.exists('reports')
        os.mkdir('reports')
        (gone, os.listdir('reports'))
    '''
    assert await run(pool, code, mounts=[Mount(host, '/data')]) == (False, [])
    assert (host / 'reports' / 'q1.csv').exists()


async def test_overlay_rename_of_a_host_folder(pool, host):
    code = '''
        import os
        os.rename('reports', 'archive')
        (sorted(os.listdir('.')), os.listdir('archive'), open('archive/q1.csv').read())
    '''
    assert await run(pool, code, mounts=[Mount(host, '/data')]) == (['archive', 'notes.txt'], ['q1.csv'], 'region,amount\nnorth,10\n')
    assert sorted(os.listdir(host)) == ['notes.txt', 'reports']


# ----- read-only ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ('code', 'expected'),
    [
        ("open('notes.txt', 'w')", "OSError: [Errno 30] Read-only file system: 'notes.txt'"),
        ("open('new.txt', 'a')", "OSError: [Errno 30] Read-only file system: 'new.txt'"),
        ("import pathlib\npathlib.Path('x.txt').write_text('x')", "OSError: [Errno 30] Read-only file system: 'x.txt'"),
        ("import os\nos.mkdir('sub')", "OSError: [Errno 30] Read-only file system: 'sub'"),
        ("import os\nos.remove('notes.txt')", "OSError: [Errno 30] Read-only file system: 'notes.txt'"),
        ("import os\nos.rename('notes.txt', 'n.txt')", "OSError: [Errno 30] Read-only file system: 'notes.txt' -> 'n.txt'"),  # both paths, as CPython's rename
        ("import os\nos.makedirs('reports', exist_ok=True)\nos.mkdir('reports')", "FileExistsError: [Errno 17] File exists: 'reports'"),
    ],
)
async def test_read_only_refuses_writes(pool, host, code, expected):
    before = snapshot(host)
    assert await error(pool, code, mounts=[Mount(host, '/data', mode='read-only')]) == expected
    assert snapshot(host) == before


async def test_read_only_reads(pool, host):
    code = "import csv\nlist(csv.DictReader(open('reports/q1.csv')))"
    assert await run(pool, code, mounts=[Mount(host, '/data', mode='read-only')]) == [{'region': 'north', 'amount': '10'}]


async def test_text_reads_translate_newlines_as_cpython_does(pool, host):
    (host / 'special.txt').write_bytes(b'line1\nline2\ttab\r\nwindows\rold')
    code = "import pathlib\n(pathlib.Path('special.txt').read_text(), open('special.txt', newline='').read(), pathlib.Path('special.txt').read_bytes())"
    assert await run(pool, code, mounts=[Mount(host, '/data', mode='read-only')]) == (
        'line1\nline2\ttab\nwindows\nold',
        'line1\nline2\ttab\r\nwindows\rold',
        b'line1\nline2\ttab\r\nwindows\rold',
    )


# ----- read-write ----------------------------------------------------------------------------------------

async def test_read_write_writes_through(pool, host):
    code = '''
        import os, pathlib
        pathlib.Path('out.txt').write_text('to the host')
        with open('notes.txt', 'a') as f:
            f.write('more\\n')
        os.makedirs('made/here')
        os.rename('reports/q1.csv', 'made/here/q1.csv')
        os.remove('out.txt')
        pathlib.Path('kept.txt').write_bytes(b'\\x00\\x01')
    '''
    await run(pool, code, mounts=[Mount(host, '/data', mode='read-write')])
    assert snapshot(host) == {
        'kept.txt': '\x00\x01',
        'made': '<dir>',
        'made/here': '<dir>',
        'made/here/q1.csv': 'region,amount\nnorth,10\n',
        'notes.txt': 'host notes\nmore\n',
        'reports': '<dir>',
    }


# ----- escapes -------------------------------------------------------------------------------------------

OUTSIDE = "PermissionError: [Errno 13] Permission denied (outside the folders the host mounted: /data): '{}'"
LINK = "PermissionError: [Errno 13] Permission denied (a link that leads outside the mounted folder): '{}'"


@pytest.mark.parametrize('mode', ['overlay', 'read-only', 'read-write'])
@pytest.mark.parametrize(
    ('code', 'expected'),
    [
        ("open('../secret.txt').read()", OUTSIDE.format('../secret.txt')),
        ("open('/data/../secret.txt').read()", OUTSIDE.format('/data/../secret.txt')),
        ("open('reports/../../secret.txt').read()", OUTSIDE.format('reports/../../secret.txt')),
        ("open('../' * 20 + 'etc/passwd').read()", OUTSIDE.format('../' * 20 + 'etc/passwd')),
        ("open('/etc/passwd').read()", OUTSIDE.format('/etc/passwd')),
        ("import pathlib\n(pathlib.Path('/data') / '/etc/passwd').read_text()", OUTSIDE.format('/etc/passwd')),
        ("open('//etc/passwd').read()", OUTSIDE.format('//etc/passwd')),
        ("open('../secret.txt', 'w')", OUTSIDE.format('../secret.txt')),
        ("import os\nos.listdir('../secret-dir')", OUTSIDE.format('../secret-dir')),
        ("import os\nos.rename('notes.txt', '../stolen.txt')", "OSError: [Errno 18] Invalid cross-device link (a rename cannot leave its mount): 'notes.txt' -> '../stolen.txt'"),
        ("open('link-file').read()", LINK.format('link-file')),
        ("open('link-dir/key.txt').read()", LINK.format('link-dir/key.txt')),
        ("import os\nos.listdir('link-dir')", LINK.format('link-dir')),
        ("open('link-file', 'w').write('x')", LINK.format('link-file')),
        ("open('link-dir/new.txt', 'w').write('x')", LINK.format('link-dir/new.txt')),
        ("open('notes.txt\\x00.png').read()", 'ValueError: embedded null byte'),
        ("import os\nos.chdir('..')\nopen('secret.txt').read()", OUTSIDE.format('secret.txt')),
        ("import os\nos.chdir('reports')\nopen('../../secret.txt').read()", OUTSIDE.format('../../secret.txt')),
        ("import os\nos.chdir('/etc')", OUTSIDE.format('/etc')),
        ("import os\nos.chdir('link-dir')", LINK.format('link-dir')),
        ("open('link-dir/../secret.txt').read()", LINK.format('link-dir/../secret.txt')),
        ("open('missing/../../secret.txt').read()", "FileNotFoundError: [Errno 2] No such file or directory: 'missing/../../secret.txt'"),
        ("open('notes.txt/../../secret.txt').read()", "NotADirectoryError: [Errno 20] Not a directory: 'notes.txt/../../secret.txt'"),
    ],
)
async def test_paths_cannot_escape_the_mount(pool, host, mode, code, expected):
    os.symlink(host.parent / 'secret.txt', host / 'link-file')
    os.symlink(host.parent / 'secret-dir', host / 'link-dir')
    if mode == 'read-only' and "'w')" in code and expected.startswith('PermissionError: [Errno 13] Permission denied (a link'):
        expected = "OSError: [Errno 30] Read-only file system: '" + expected.rpartition(": '")[2]  # refused before the link is followed
    before = snapshot(host.parent)
    assert await error(pool, code, mounts=[Mount(host, '/data', mode=mode)]) == expected
    assert snapshot(host.parent) == before


async def test_links_outside_are_not_listed_as_files(pool, host):
    os.symlink(host.parent / 'secret.txt', host / 'link-file')
    code = "import os\n(sorted(os.listdir('.')), os.path.exists('link-file'), os.path.isfile('link-file'))"
    assert await run(pool, code, mounts=[Mount(host, '/data')]) == (['notes.txt', 'reports'], False, False)


async def test_links_inside_the_mount_are_followed(pool, host):
    os.symlink(host / 'notes.txt', host / 'alias.txt')
    os.symlink(host / 'reports', host / 'alias-dir')
    code = "(open('alias.txt').read(), open('alias-dir/q1.csv').read().splitlines()[0])"
    assert await run(pool, code, mounts=[Mount(host, '/data')]) == ('host notes\n', 'region,amount')


async def test_root_lists_the_mounts(pool, host, tmp_path):
    other = tmp_path / 'other'
    other.mkdir()
    code = "import os\n(os.listdir('/'), os.listdir('..'), os.listdir('/mnt'), os.path.isdir('/mnt'), os.getcwd(), os.path.exists('/etc'))"
    mounts = [Mount(host, '/data'), Mount(other, '/mnt/other', mode='read-only')]
    assert await run(pool, code, mounts=mounts) == (['data', 'mnt'], ['data', 'mnt'], ['other'], True, '/data', False)


async def test_nested_mounts_choose_the_deepest(pool, host, tmp_path):
    inner = tmp_path / 'inner'
    inner.mkdir()
    (inner / 'i.txt').write_text('inner')
    code = "import os\n(open('/data/reports/x/i.txt').read(), sorted(os.listdir('/data/reports')))"
    mounts = [Mount(host, '/data'), Mount(inner, '/data/reports/x')]
    assert await run(pool, code, mounts=mounts) == ('inner', ['q1.csv', 'x'])


async def test_mount_arguments_are_checked(tmp_path):
    with pytest.raises(ValueError, match='absolute POSIX path'):
        Mount(tmp_path, 'data')
    with pytest.raises(ValueError, match="mode must be one of 'overlay', 'read-only', 'read-write'"):
        Mount(tmp_path, '/data', mode='rw')  # type: ignore[arg-type]
    with pytest.raises(ValueError, match='not an existing folder'):
        Mount(tmp_path / 'missing', '/data')


# ----- environment, clock, seed ------------------------------------------------------------------------

async def test_environment_and_clock_granted(pool):
    moment = datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    access = OsAccess(environ={'TOKEN_NAME': 'x'}, clock=lambda: moment)
    code = "import os, datetime, time\n(os.environ['TOKEN_NAME'], datetime.datetime.now().isoformat(), time.time())"
    assert await run(pool, code, os_access=access) == ('x', '2030-01-02T03:04:05', moment.timestamp())


async def test_the_real_clock(pool):
    code = 'import datetime\ndatetime.datetime.now(datetime.timezone.utc)'
    before = datetime.datetime.now(datetime.timezone.utc)
    value = await run(pool, code, os_access=OsAccess(clock=True))
    assert before <= value <= datetime.datetime.now(datetime.timezone.utc)


async def test_a_missing_environment_variable_is_cpythons_key_error(pool):
    with pytest.raises(corral.SandboxRuntimeError) as info:
        await run(pool, "import os\nos.environ['MISSING']", os_access=OsAccess(environ={}))
    assert (info.value.exc_type, info.value.message, str(info.value).splitlines()[-1]) == ('KeyError', "'MISSING'", "KeyError: 'MISSING'")


async def test_env_granted_but_not_clock(pool):
    message = await error(pool, 'import time\ntime.time()', os_access=OsAccess(environ={}))
    assert message.startswith('PermissionError: the host has not granted clock access')


async def test_random_is_seeded_per_session(pool):
    code = 'import random, uuid\n(random.random(), random.randint(1, 10**9), str(uuid.uuid4()), random.Random().random())'
    first = await run(pool, code, random_seed=99)
    assert await run(pool, code, random_seed=99) == first
    assert await run(pool, code, random_seed=100) != first
    async with pool.checkout() as a, pool.checkout() as b:
        assert a.random_seed != b.random_seed
        assert await a.feed_run(code) != await b.feed_run(code)


async def test_seeding_in_the_script_matches_cpython(pool):
    import random

    random.seed(5)
    expected = [random.random() for _ in range(3)]
    assert await run(pool, 'import random\nrandom.seed(5)\n[random.random() for _ in range(3)]') == expected


async def test_os_urandom_draws_from_the_session_seed_and_a_replay_draws_the_same(pool, tmp_path):
    code = 'import os, random\n(os.urandom(8), os.urandom(0), len(os.urandom(1 << 20)), random.random())'
    first = await run(pool, code, random_seed=7)
    assert await run(pool, code, random_seed=7) == first
    assert await run(pool, code, random_seed=8) != first
    assert first[1:3] == (b'', 1 << 20) and len(first[0]) == 8
    # the bytes do not move the `random` module's own sequence
    assert first[3] == await run(pool, 'import random\nrandom.random()', random_seed=7)
    async with corral.SQLiteStore(tmp_path / 'sessions.db') as store:  # closed: its threads end with it
        async with corral.Pool(store=store) as stored:
            async with stored.checkout(ephemeral=False) as session:
                drawn = await session.feed_run('import os\nx = os.urandom(16)\nx')
                session_id = session.session_id
        async with corral.Pool(store=store) as stored:  # no checkpoint: the journal is replayed
            async with stored.checkout(session_id=session_id) as session:
                assert await session.feed_run('x') == drawn


@pytest.mark.parametrize(
    ('code', 'expected'),
    [
        ('os.urandom(-1)', 'ValueError: negative argument not allowed'),
        ('os.urandom("4")', "TypeError: 'str' object cannot be interpreted as an integer"),
        ('os.urandom(1.0)', "TypeError: 'float' object cannot be interpreted as an integer"),
        ('os.urandom(9)', 'MemoryError: os.urandom() size exceeds max_urandom_bytes (8)'),
        ('os.urandom(2**64)', 'MemoryError: os.urandom() size exceeds max_urandom_bytes (8)'),
        ('raise MemoryError("mine")', 'MemoryError: mine'),  # the script's own, not the memory limit
    ],
)
async def test_os_urandom_errors_are_cpythons_and_the_cap_is_the_os_access(pool, code, expected):
    assert await error(pool, f'import os\n{code}', os_access=OsAccess(max_urandom_bytes=8)) == expected
    assert await run(pool, 'import os\nlen(os.urandom(8))', os_access=OsAccess(max_urandom_bytes=8)) == 8


async def test_an_os_access_may_serve_os_urandom_and_a_replay_does_not_ask_again(pool, tmp_path):
    class Entropy(OsAccess):
        def __init__(self, answer=None):
            super().__init__(max_urandom_bytes=64)
            self.asked = []
            self.answer = answer

        def urandom(self, size):
            self.asked.append(size)
            return b'\x07' * size if self.answer is None else self.answer

    access = Entropy()
    assert await run(pool, 'import os\n[os.urandom(3), os.urandom(0)]', os_access=access) == [b'\x07\x07\x07', b'']
    assert access.asked == [3, 0]
    assert await error(pool, 'import os\nos.urandom(65)', os_access=access) == 'MemoryError: os.urandom() size exceeds max_urandom_bytes (64)'
    assert access.asked == [3, 0]  # refused before the host was asked
    assert await error(pool, 'import os\nos.urandom(2)', os_access=Entropy(answer='xx')) == (
        'TypeError: os.urandom: Entropy.urandom(2) must return 2 bytes, not str')
    assert await error(pool, 'import os\nos.urandom(2)', os_access=Entropy(answer=b'x')) == (
        'TypeError: os.urandom: Entropy.urandom(2) must return 2 bytes, not 1 bytes')
    first, second = Entropy(), Entropy()
    async with corral.SQLiteStore(tmp_path / 'sessions.db') as store:
        async with corral.Pool(store=store) as stored:
            async with stored.checkout(ephemeral=False, os_access=first) as session:
                assert await session.feed_run('import os\nx = os.urandom(4)\nx') == b'\x07' * 4
                session_id = session.session_id
        async with corral.Pool(store=store) as stored:
            async with stored.checkout(session_id=session_id, os_access=second) as session:
                assert await session.feed_run('x') == b'\x07' * 4
    assert (first.asked, second.asked) == ([4], [])


@pytest.mark.parametrize(
    ('limit', 'expected'),
    [(-1, "ValueError('max_urandom_bytes must be non-negative')"), (1.5, "TypeError('max_urandom_bytes must be an int, not float')"),
     (True, "TypeError('max_urandom_bytes must be an int, not bool')"), (None, "TypeError('max_urandom_bytes must be an int, not NoneType')")],
)
async def test_max_urandom_bytes_is_checked(limit, expected):
    with pytest.raises((TypeError, ValueError)) as info:
        OsAccess(max_urandom_bytes=limit)
    assert repr(info.value) == expected
    assert OsAccess().max_urandom_bytes == 1 << 20


async def test_a_custom_os_access_serves_virtual_files(pool):
    class Virtual(OsAccess):
        files = {'/v/a.txt': b'alpha'}

        def stat(self, path):
            if path in self.files:
                return ('file', len(self.files[path]), 0.0)
            if path == '/v':
                return ('dir', 0, 0.0)
            raise FileNotFoundError(2, 'No such file or directory', path)

        def read_file(self, path):
            self.stat(path)
            return self.files[path]

        def list_dir(self, path):
            return [name.rpartition('/')[2] for name in self.files]

        def write_file(self, path, data, how):
            self.files[path] = (self.files.get(path, b'') if how == 'append' else b'') + data

    code = "import os\nopen('/v/b.txt', 'w').write('beta')\n(open('/v/a.txt').read(), sorted(os.listdir('/v')), os.path.exists('/v/nope'))"
    assert await run(pool, code, os_access=Virtual()) == ('alpha', ['a.txt', 'b.txt'], False)
    assert await error(pool, "open('/v/nope')", os_access=Virtual()) == "FileNotFoundError: [Errno 2] No such file or directory: '/v/nope'"


async def test_output_of_sys_stdout_pprint_and_print_in_order(pool):
    printed: list[tuple[str, str]] = []
    code = '''
        import sys, pprint, calendar
        print('one')
        sys.stdout.write('two\\n')
        pprint.pprint({'three': 3})
        print('four', file=sys.stderr)
        calendar.prmonth(2024, 2)
    '''
    async with pool.checkout() as session:
        await session.feed_run(textwrap.dedent(code), print_callback=lambda stream, text: printed.append((stream, text)))
    text = ''.join(t for _, t in printed)
    assert text.startswith("one\ntwo\n{'three': 3}\nfour\n   February 2024\nMo Tu We Th Fr Sa Su\n")


@pytest.mark.parametrize('mode', ['overlay', 'read-write'])
async def test_writing_to_a_fifo_on_the_host_is_refused_not_blocking(pool, host, mode):
    os.mkfifo(host / 'pipe')
    message = await error(pool, "open('/data/pipe', 'w').write('x')", mounts=[Mount(host, '/data', mode=mode)], limits=corral.Limits(wall_time=5))
    assert message == "PermissionError: [Errno 13] Permission denied (not a regular file): '/data/pipe'"


async def test_a_name_or_path_too_long_for_linux_is_refused_before_dotdot_is_resolved(pool, host):
    mounts = [Mount(str(host), '/data', mode='read-only')]
    long_name = 'a' * 256 + '/../notes.txt'
    assert await error(pool, f'open({long_name!r}).read()', mounts=mounts) == f"OSError: [Errno 36] File name too long: '{long_name}'"
    long_path = 'a/' * 1000 + '../' * 1000 + 'notes.txt'
    assert await error(pool, f'open({long_path!r}).read()', mounts=mounts) == f"OSError: [Errno 36] File name too long: '{long_path}'"


async def test_chdir_moves_where_relative_paths_start(pool, host):
    async with pool.checkout(mounts=[Mount(str(host), '/data', mode='read-only')]) as session:
        session.chdir('/data/reports')
        assert await session.feed_run("import os\n[os.getcwd(), open('q1.csv').read()]") == ['/data/reports', 'region,amount\nnorth,10\n']
        with pytest.raises(ValueError) as relative:
            session.chdir('reports')
        assert str(relative.value) == "the working folder must be an absolute POSIX path, not 'reports'"


async def test_chdir_moves_the_working_folder_to_folders_that_exist_and_it_stays_there(pool, host):
    async with pool.checkout(mounts=[Mount(str(host), '/data', mode='read-only')]) as session:
        code = "import os\nos.chdir('reports/.//')\n(os.getcwd(), open('q1.csv').read(), os.listdir())"
        assert await session.feed_run(code) == ('/data/reports', 'region,amount\nnorth,10\n', ['q1.csv'])
        assert await session.feed_run("from pathlib import Path\n(os.getcwd(), str(Path.cwd()), os.path.abspath('x'))") == ('/data/reports', '/data/reports', '/data/reports/x')
        await session.feed_run("os.chdir('..')")
        assert await session.feed_run('os.getcwd()') == '/data'
        for target, expected in [
            ('notes.txt', "NotADirectoryError: [Errno 20] Not a directory: 'notes.txt'"),
            ('missing', "FileNotFoundError: [Errno 2] No such file or directory: 'missing'"),
            ('missing/..', "FileNotFoundError: [Errno 2] No such file or directory: 'missing/..'"),
            ('', "FileNotFoundError: [Errno 2] No such file or directory: ''"),
            ('bad\x00', 'ValueError: embedded null byte'),
            ('a' * 256, f"OSError: [Errno 36] File name too long: '{'a' * 256}'"),
            (3.5, 'TypeError: chdir: path should be string, bytes, os.PathLike or integer, not float'),
        ]:
            with pytest.raises(corral.SandboxRuntimeError) as info:
                await session.feed_run(f'os.chdir({target!r})')
            assert f'{info.value.exc_type}: {info.value.message}' == expected
        assert await session.feed_run('os.getcwd()') == '/data'  # a refused chdir leaves it where it was
        await session.feed_run("os.chdir('/')")  # the folder above the mounts exists, and holds only them
        assert await session.feed_run("(os.getcwd(), os.listdir(), open('data/notes.txt').read())") == ('/', ['data'], 'host notes\n')


async def test_dotdot_through_a_missing_folder_or_a_file_fails_as_on_linux_and_changes_nothing(pool, host):
    before = snapshot(host.parent)
    for code, expected in [
        ("open('/data/missing/../notes.txt').read()", "FileNotFoundError: [Errno 2] No such file or directory: '/data/missing/../notes.txt'"),
        ("import os\nos.listdir('missing/..')", "FileNotFoundError: [Errno 2] No such file or directory: 'missing/..'"),
        ("import os\nos.stat('notes.txt/../reports')", "NotADirectoryError: [Errno 20] Not a directory: 'notes.txt/../reports'"),
        ("import os\nos.mkdir('missing/../made')", "FileNotFoundError: [Errno 2] No such file or directory: 'missing/../made'"),
        ("import os\nos.rename('notes.txt', 'missing/../moved.txt')", "FileNotFoundError: [Errno 2] No such file or directory: 'notes.txt' -> 'missing/../moved.txt'"),
        ("open('reports/q1.csv/../new.txt', 'w')", "NotADirectoryError: [Errno 20] Not a directory: 'reports/q1.csv/../new.txt'"),
        ("import pathlib\npathlib.Path('missing/../notes.txt').exists()", None),
    ]:
        if expected is None:
            assert await run(pool, code, mounts=[Mount(host, '/data', mode='read-write')]) is False
        else:
            assert await error(pool, code, mounts=[Mount(host, '/data', mode='read-write')]) == expected
    assert snapshot(host.parent) == before
    assert await run(pool, "open('reports/../notes.txt').read()", mounts=[Mount(host, '/data')]) == 'host notes\n'


async def test_stat_shows_the_permission_bits(pool, host):
    (host / 'notes.txt').chmod(0o600)
    (host / 'reports').chmod(0o750)
    code = """
        import os
        open('new.txt', 'w').write('x')
        os.mkdir('made')
        [oct(os.stat(p).st_mode) for p in ('notes.txt', 'reports', 'new.txt', 'made', '/')] + [oct(e.stat().st_mode) for e in os.scandir('.')]
    """
    assert await run(pool, code, mounts=[Mount(host, '/data')]) == ['0o100600', '0o40750', '0o100644', '0o40755', '0o40755', '0o40755', '0o100644', '0o100600', '0o40750']


async def test_path_exists_raises_what_is_not_an_absence_as_cpython_does(pool, host):
    code = "import os, pathlib\n(os.path.exists('/etc'), pathlib.Path('/data/nope').exists(), pathlib.Path('/etc').exists())"
    assert await error(pool, code, mounts=[Mount(host, '/data')]) == OUTSIDE.format('/etc')
    assert await run(pool, "import os, pathlib\n(os.path.exists('/etc'), pathlib.Path('/data/nope').exists(), pathlib.Path('bad\\x00').exists())", mounts=[Mount(host, '/data')]) == (False, False, False)


async def test_an_os_access_sees_normalized_paths_or_resolves_them_itself(pool):
    seen: list[tuple[str, str]] = []

    class Virtual(OsAccess):
        def stat(self, path):
            seen.append(('stat', path))
            return ('dir', 0, 0.0, 0o700)

        def exists(self, path):
            seen.append(('exists', path))
            return True

    class Resolving(Virtual):
        resolves_paths = True

    code = "import os, pathlib\nos.chdir('/v/w/')\n(pathlib.Path('x/../y').exists(), oct(os.stat('/v//./z').st_mode), os.getcwd())"
    assert await run(pool, code, os_access=Virtual()) == (True, '0o40700', '/v/w')
    assert seen == [('stat', '/v/w'), ('exists', '/v/w/y'), ('stat', '/v/z')]
    seen.clear()
    assert await run(pool, "import os\nos.stat('/v/' + 'a' * 5000)\n" + code, os_access=Resolving()) == (True, '0o40700', '/v/w')
    assert seen == [('stat', '/v/' + 'a' * 5000), ('stat', '/v/w/'), ('exists', '/v/w/x/../y'), ('stat', '/v//./z')]


async def test_an_os_access_may_list_kinds_and_is_asked_a_stat_only_when_the_script_wants_one(pool):
    asked: list[str] = []

    class Listing(OsAccess):
        def list_dir(self, path):
            asked.append(f'list {path}')
            return {'/v': [('b.txt', 'file'), ('sub', 'dir'), ('gone', 'other')], '/v/sub': [('a.txt', 'file')]}[path]

        def stat(self, path):
            asked.append(f'stat {path}')
            return ('file', 5, 1.5)

    code = "import os\n(list(os.walk('/v')), sorted(os.listdir('/v')), [(e.name, e.is_file(), e.is_dir()) for e in os.scandir('/v')])"
    assert await run(pool, code, os_access=Listing()) == (
        [('/v', ['sub'], ['b.txt', 'gone']), ('/v/sub', [], ['a.txt'])],
        ['b.txt', 'gone', 'sub'],
        [('b.txt', True, False), ('gone', False, False), ('sub', False, True)],
    )
    assert asked == ['list /v', 'list /v/sub', 'list /v', 'list /v']
    asked.clear()
    code = "import os\nentry = next(os.scandir('/v'))\n(entry.stat().st_size, entry.stat().st_size)"
    assert await run(pool, code, os_access=Listing()) == (5, 5)
    assert asked == ['list /v', 'stat /v/b.txt']

    class Wrong(OsAccess):
        def list_dir(self, path):
            return [('a', 'link')]

    assert await error(pool, "import os\nos.listdir('/v')", os_access=Wrong()) == "TypeError: os.scandir: Wrong.list_dir gave ('a', 'link'), not a name or a (name, kind) pair"


async def test_a_system_call_a_worker_asks_with_the_wrong_arguments_or_by_an_unknown_name_is_answered_with_its_error():
    """The worker's requests are untrusted: the answer names the call and Python's own words."""
    system = SystemCalls(None, [], seed=1)
    assert system.call('os.getcwd', []) == [True, '/']
    assert system.call('os.getcwd', [1]) == [False, ['TypeError', None, 'os.getcwd: SystemCalls._getcwd() takes 1 positional argument but 2 were given', None, None]]
    assert system.call('clock.monotonic', [1]) == [False, ['TypeError', None, 'clock.monotonic: time.monotonic_ns() takes no arguments (1 given)', None, None]]
    assert system.call('os.nope', []) == [False, ['NameError', None, "unknown system call 'os.nope'", None, None]]
