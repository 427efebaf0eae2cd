"""Tests for corral.typecheck._server: the warm `ty server` fast path (ty 0.0.99)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pathlib
import re
import shutil
import signal
import stat
import sys
import tempfile

import pytest

from corral.examples.billing import BILLING_STUB
from corral.typecheck._checker import _BUILTINS_TEXT as BUILTINS_TEXT, _module_files, _Slot
from corral.typecheck._server import (
    TyServer,
    is_async_outside_function,
    kill_child,
    without_top_level_awaits,
)

from .scripts import ASYNC_STUBS, TOP_LEVEL_ASYNC

ORDER_STUBS = "\nasync def get_order(order_id: str) -> dict:\n    '''Return one order, with its `status` and number of `items`.'''\n"

BILLING_CODE = "\nfrom billing import list_invoices\n\nunpaid = list_invoices('cus_1', status='unpaid')\nsum(i['amount'] for i in unpaid)\n"
BILLING_CLEAN = (
    "\nfrom billing import list_invoices\n\nunpaid = list_invoices('cus_1', status='open')\n"
    "sum(i['amount_cents'] for i in unpaid) / 100\n"
)
_SEVERITY = {'error': 1, 'warning': 2, 'info': 3}


def _ty_bin() -> str:
    from ty import find_ty_bin

    return os.fsdecode(find_ty_bin())


def _rng(line: int, start: int, end: int, end_line: int | None = None) -> dict:
    return {'start': {'line': line, 'character': start}, 'end': {'line': line if end_line is None else end_line, 'character': end}}


def _rule(code: str) -> dict:
    return {'href': f'https://ty.dev/rules#{code}'}


def _await_diag(rng: dict, what: str = '`await`') -> dict:
    return {
        'code': 'invalid-syntax',
        'data': None,
        'message': f'{what} outside of an asynchronous function',
        'range': rng,
        'severity': 1,
        'source': 'ty',
    }


class Folder:
    """A check folder laid out as TypeChecker lays out a slot: `<root>/check1`
    with an empty ty.toml, beside an empty Python environment `<root>/env`."""

    def __init__(self) -> None:
        self.root = tempfile.mkdtemp(prefix='corral-tyserver-test-')
        site = os.path.join(self.root, 'env', 'lib', 'python3.11', 'site-packages')
        os.makedirs(site)
        with open(os.path.join(self.root, 'env', 'pyvenv.cfg'), 'w') as f:
            f.write(f'home = {os.path.dirname(sys.executable)}\nversion = 3.11.0\n')
        self.site_packages = site
        self.env = {k: os.environ[k] for k in ('PATH', 'LANG', 'LC_ALL', 'TMPDIR') if k in os.environ}
        self.env.update(
            HOME=self.root,
            XDG_CONFIG_HOME=os.path.join(self.root, 'config'),
            NO_COLOR='1',
            TY_MAX_PARALLELISM='1',
        )
        self.path = os.path.join(self.root, 'check1')
        os.mkdir(self.path)
        self.slot = _Slot(self.path)
        self.slot.sync({'ty.toml': ''})

    def layout(self, code: str, stubs: str | None = None, modules: dict[str, str] | None = None) -> list[str]:
        """Write the files of a check (as TypeChecker does); return the stub files changed."""
        wanted = {'ty.toml': '', **_module_files(modules or {}, 'main.py')}
        if stubs is not None:
            wanted['repl_type_stubs.pyi'] = stubs
            wanted['__builtins__.pyi'] = BUILTINS_TEXT
        wanted['main.py'] = code
        return [rel for rel in self.slot.sync(wanted) if rel != 'main.py']

    async def cli(self, extra: tuple[str, ...] = ()) -> list[dict]:
        """`ty check` on the folder as TypeChecker runs it, its concise output
        parsed into LSP-like diagnostics (0-based, code-point positions)."""
        args = [
            'check', '--project', '.', '--output-format', 'concise', '--no-progress', '--color', 'never',
            '--python-version', f'{sys.version_info[0]}.{sys.version_info[1]}', '--python-platform', 'linux',
            '--python', os.path.join(self.root, 'env'), *extra, '--', 'main.py',
        ]  # fmt: skip
        proc = await asyncio.create_subprocess_exec(
            _ty_bin(), *args, cwd=self.path, env=self.env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await proc.communicate()
        assert proc.returncode in (0, 1), err
        found = []
        for line in out.decode().splitlines():
            m = re.match(r'^main\.py:(\d+):(\d+): (\w+)\[([\w-]+)\] (.*)$', line)
            if m:
                start = {'line': int(m[1]) - 1, 'character': int(m[2]) - 1}
                found.append({'range': {'start': start, 'end': start}, 'severity': _SEVERITY[m[3]], 'code': m[4], 'message': m[5]})
        return found

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def _gone(pid: int) -> bool:
    """The process has exited and been reaped (no zombie left)."""
    return not os.path.exists(f'/proc/{pid}')


@pytest.fixture
def folder():
    f = Folder()
    yield f
    f.close()


@pytest.fixture
async def server(folder: Folder):
    srv = await TyServer.start(folder.path, ty_bin=_ty_bin(), env=folder.env)
    pid = srv._proc.pid
    yield srv
    await srv.aclose()
    assert _gone(pid)


async def check(server: TyServer, folder: Folder, code: str, stubs: str | None = None, modules=None) -> list[dict]:
    await server.notify_files_changed(folder.layout(code, stubs, modules))
    return await server.diagnostics(code)


# ------------------------------------------------------------------ seed cases


async def test_position_encoding_is_utf32(server: TyServer) -> None:
    assert server.position_encoding == 'utf-32'


async def test_stub_function_used_without_import(server: TyServer, folder: Folder) -> None:
    diags = await check(server, folder, 'await get_order(42)', ORDER_STUBS)
    assert diags == [
        _await_diag(_rng(0, 0, 19)),
        {
            'code': 'invalid-argument-type',
            'codeDescription': _rule('invalid-argument-type'),
            'data': None,
            'message': 'Argument to function `get_order` is incorrect: Expected `str`, found `Literal[42]`',
            'range': _rng(0, 16, 18),
            'severity': 1,
            'source': 'ty',
        },
    ]
    assert [is_async_outside_function(d) for d in diags] == [True, False]
    assert without_top_level_awaits(diags, 'await get_order(42)') == diags[1:]


async def test_module_stub(server: TyServer, folder: Folder) -> None:
    diags = await check(server, folder, BILLING_CODE, modules={'billing': BILLING_STUB})
    assert diags == [
        {
            'code': 'invalid-argument-type',
            'codeDescription': _rule('invalid-argument-type'),
            'data': None,
            'message': 'Argument to function `list_invoices` is incorrect: '
            'Expected `Literal["paid", "open", "void"] | None`, found `Literal["unpaid"]`',
            'range': _rng(3, 32, 47),
            'severity': 1,
            'source': 'ty',
        },
        {
            'code': 'invalid-key',
            'codeDescription': _rule('invalid-key'),
            'data': None,
            'message': 'Unknown key "amount" for TypedDict `Invoice`',
            'range': _rng(4, 6, 14),
            'severity': 1,
            'source': 'ty',
        },
    ]
    assert await check(server, folder, BILLING_CLEAN, modules={'billing': BILLING_STUB}) == []


async def test_clean_scripts(server: TyServer, folder: Folder) -> None:
    assert await check(server, folder, 'x = 1\nprint(x + 2)\n') == []
    assert await check(server, folder, '') == []
    code = "order = await get_order('o_1')\nprint(len(order), order['status'])\n"
    diags = await check(server, folder, code, ORDER_STUBS)
    assert diags == [_await_diag(_rng(0, 8, 30))]
    assert without_top_level_awaits(diags, code) == []


async def test_top_level_async_constructs(server: TyServer, folder: Folder) -> None:
    code = TOP_LEVEL_ASYNC + 'def inner():\n    return await fetch(2)\n'
    diags = await check(server, folder, code, ASYNC_STUBS)
    assert diags == [
        _await_diag(_rng(0, 8, 22)),
        _await_diag(_rng(1, 0, 17, end_line=2), '`async for`'),
        _await_diag(_rng(3, 0, 8, end_line=4), '`async with`'),
        _await_diag(_rng(5, 17, 40), 'asynchronous comprehension'),
        _await_diag(_rng(7, 11, 25)),
    ]
    assert all(is_async_outside_function(d) for d in diags)
    # Only the one inside `def inner` is a real error.
    assert without_top_level_awaits(diags, code) == [diags[-1]]


async def test_unresolved_import_and_isolated_environment(server: TyServer, folder: Folder) -> None:
    # pytest is installed for the interpreter running this test: the server must
    # not see it (the empty environment), like `ty check --python <env>`.
    for module in ('nope', 'pytest'):
        diags = await check(server, folder, f'import {module}\n')
        assert len(diags) == 1
        diag = diags[0]
        assert (diag['code'], diag['severity'], diag['range']) == ('import-not-found', 1, _rng(0, 7, 7 + len(module)))
        assert diag['message'].split('\n') == [
            f'Cannot resolve imported module `{module}`',
            '',
            'info: Searched in the following paths during module resolution:',
            f'info:   1. {folder.path} (first-party code)',
            'info:   2. vendored://stdlib (stdlib typeshed stubs vendored by ty)',
            f'info:   3. {folder.site_packages} (site-packages)',
            (
                'info: make sure your Python environment is properly configured: '
                'https://docs.astral.sh/ty/modules/#python-environment'
            ),
        ]


#: A name of `typing` that the next Python release adds, by the release the tests run on.
_NEXT_TYPING_NAME = {(3, 11): 'override', (3, 12): 'ReadOnly', (3, 13): 'evaluate_forward_ref'}[sys.version_info[:2]]


async def test_python_version_and_platform(server: TyServer, folder: Folder) -> None:
    # by default, the Python that runs corral (and its workers)
    diags = await check(server, folder, f'from typing import {_NEXT_TYPING_NAME}\n')
    assert [(d['code'], d['range'], d['message'].split('\n')[0]) for d in diags] == [
        ('import-not-found', _rng(0, 19, 19 + len(_NEXT_TYPING_NAME)), f'Module `typing` has no member `{_NEXT_TYPING_NAME}`'),
    ]
    assert f'Python {sys.version_info[0]}.{sys.version_info[1]} was assumed' in diags[0]['message']
    code = 'import sys\nif sys.platform == "win32":\n    import winreg\n    winreg.HKEY_CURRENT_USER\n'
    assert await check(server, folder, code) == []


async def test_editor_hints_are_left_out(server: TyServer, folder: Folder) -> None:
    # The server adds "unused"/"unreachable" hints that `ty check` never shows.
    assert await check(server, folder, 'def f():\n    x = 1\n    return 2\n') == []
    assert await check(server, folder, 'raise SystemExit\nprint(1)\n') == []


async def test_warnings_and_infos_are_kept(server: TyServer, folder: Folder) -> None:
    diags = await check(server, folder, 'reveal_type(1)\n')
    assert [(d['code'], d['severity'], d['range']) for d in diags] == [
        ('undefined-reveal', 2, _rng(0, 0, 11)),
        ('revealed-type', 3, _rng(0, 12, 13)),
    ]
    assert diags[1]['message'] == 'Revealed type: `Literal[1]`'


async def test_ranges_count_code_points(server: TyServer, folder: Folder) -> None:
    code = 's = "😀😀"; y: int = "x"\n'
    diags = await check(server, folder, code)
    assert [(d['code'], d['range']) for d in diags] == [('invalid-assignment', _rng(0, 19, 22))]
    assert code[19:22] == '"x"'


async def test_warm_up(server: TyServer, folder: Folder) -> None:
    folder.layout('', ORDER_STUBS)
    await server.warm_up()
    code = "order = await get_order('o_1')\n"
    assert without_top_level_awaits(await server.diagnostics(code), code) == []


@pytest.fixture(scope='module')
def custom_typeshed():
    """ty's own typeshed, copied out of the binary, with one name added to builtins."""
    from corral.typecheck._typeshed import VendoredTypeshed

    vendored = VendoredTypeshed(_ty_bin())
    archive = vendored._open()
    assert archive is not None
    root = tempfile.mkdtemp(prefix='corral-tyserver-typeshed-')
    for name in archive.namelist():
        if name.endswith('/'):
            continue
        text = vendored.read(name)
        assert text is not None, name
        if name == 'stdlib/builtins.pyi':
            text += '\nSANDBOX_MARKER: int\n'
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w', encoding='utf-8') as f:
            f.write(text)
    yield root
    shutil.rmtree(root, ignore_errors=True)


async def test_typeshed_option(folder: Folder, custom_typeshed: str) -> None:
    code = 'print(SANDBOX_MARKER + 1)\n'
    folder.layout(code)
    async with await TyServer.start(folder.path, ty_bin=_ty_bin(), env=folder.env, typeshed=custom_typeshed) as srv:
        assert await srv.diagnostics(code) == []
        assert await folder.cli(('--typeshed', custom_typeshed)) == []
    async with await TyServer.start(folder.path, ty_bin=_ty_bin(), env=folder.env) as srv:
        diags = await srv.diagnostics(code)
        assert [(d['code'], d['range'], d['message']) for d in diags] == [
            ('unresolved-reference', _rng(0, 6, 20), 'Name `SANDBOX_MARKER` used when not defined'),
        ]
        assert [d['code'] for d in await folder.cli()] == ['unresolved-reference']


async def test_explicit_python_environment(folder: Folder) -> None:
    site = os.path.join(folder.root, 'other', 'lib', 'python3.11', 'site-packages')
    os.makedirs(os.path.join(site, 'extra_pkg'))
    pathlib.Path(site, 'extra_pkg', '__init__.pyi').write_text('VALUE: int\n')
    pathlib.Path(folder.root, 'other', 'pyvenv.cfg').write_text(f'home = {os.path.dirname(sys.executable)}\nversion = 3.11.0\n')
    code = 'from extra_pkg import VALUE\nVALUE + 1\n'
    folder.layout(code)
    python = os.path.join(folder.root, 'other')
    async with await TyServer.start(folder.path, ty_bin=_ty_bin(), env=folder.env, python=python) as srv:
        assert await srv.diagnostics(code) == []
    async with await TyServer.start(folder.path, ty_bin=_ty_bin(), env=folder.env) as srv:
        assert [d['code'] for d in await srv.diagnostics(code)] == ['import-not-found']


# ------------------------------------------------------------ changing stubs


async def test_stub_rewritten_between_checks(server: TyServer, folder: Folder) -> None:
    code = 'await get_order(42)'
    assert [d['code'] for d in await check(server, folder, code, ORDER_STUBS)] == [
        'invalid-syntax',
        'invalid-argument-type',
    ]
    int_stubs = ORDER_STUBS.replace('order_id: str', 'order_id: int')
    assert [d['code'] for d in await check(server, folder, code, int_stubs)] == ['invalid-syntax']
    assert [d['code'] for d in await check(server, folder, code, ORDER_STUBS)] == [
        'invalid-syntax',
        'invalid-argument-type',
    ]


async def test_rewrite_with_unchanged_mtime_is_seen(server: TyServer, folder: Folder) -> None:
    """On a file system with coarse timestamps a quick rewrite keeps the old
    modification time, and ty only compares modification times: notify must
    still make the server read the new text."""
    code = 'from m import f\nf("1")\n'
    assert await check(server, folder, code, modules={'m': 'def f(x: str) -> None: ...\n'}) == []
    path = os.path.join(folder.path, 'm.pyi')
    before = os.stat(path)

    def rewrite(text: str) -> None:
        with open(path, 'w') as f:
            f.write(text)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert os.stat(path).st_mtime_ns == before.st_mtime_ns

    # Control: announcing the change without a new timestamp leaves ty on the old text.
    rewrite('def f(x: int) -> None: ...\n')
    await server._notify('workspace/didChangeWatchedFiles', {'changes': [{'uri': 'file://' + path, 'type': 2}]})
    assert await server.diagnostics(code) == []
    # notify_files_changed gives it a fresh timestamp.
    await server.notify_files_changed(['m.pyi'])
    diags = await server.diagnostics(code)
    assert [(d['code'], d['range'], d['message']) for d in diags] == [
        (
            'invalid-argument-type',
            _rng(1, 2, 5),
            'Argument to function `f` is incorrect: Expected `int`, found `Literal["1"]`',
        )
    ]
    assert os.stat(path).st_mtime_ns > before.st_mtime_ns


async def test_module_and_package_added_then_removed(server: TyServer, folder: Folder) -> None:
    code = 'from a.b import f\nimport billing\nf("1")\n'
    # First checked while the modules don't exist: ty caches that.
    diags = await check(server, folder, code)
    assert [(d['code'], d['range']) for d in diags] == [
        ('import-not-found', _rng(0, 5, 8)),
        ('import-not-found', _rng(1, 7, 14)),
    ]
    modules = {'a.b': 'def f(x: str) -> None: ...\n', 'billing': BILLING_STUB}
    assert await check(server, folder, code, modules=modules) == []
    assert os.path.isfile(os.path.join(folder.path, 'a', '__init__.pyi'))
    # Removed again (folder `a` included).
    diags = await check(server, folder, code, modules={'billing': BILLING_STUB})
    assert not os.path.exists(os.path.join(folder.path, 'a'))
    assert [(d['code'], d['range']) for d in diags] == [('import-not-found', _rng(0, 5, 8))]


async def test_stub_file_added_to_existing_package(server: TyServer, folder: Folder) -> None:
    code = 'from a.c import g\ng()\n'
    modules = {'a.b': 'def f(x: str) -> None: ...\n'}
    assert [d['code'] for d in await check(server, folder, code, modules=modules)] == ['import-not-found']
    modules['a.c'] = 'def g() -> None: ...\n'
    assert await check(server, folder, code, modules=modules) == []


async def test_main_py_in_paths_is_ignored(server: TyServer, folder: Folder) -> None:
    folder.layout('x: int = "on disk"\n')
    await server.notify_files_changed(['main.py', os.path.join(folder.path, 'main.py')])
    assert await server.diagnostics('x: int = 1\n') == []  # the text given wins over the disk


# -------------------------------------------------------- agreement with CLI

AGREEMENT_CASES = [
    ('await get_order(42)', ORDER_STUBS, None),
    ("order = await get_order('o_1')\nprint(len(order), order['status'])\n", ORDER_STUBS, None),
    (BILLING_CODE, None, {'billing': BILLING_STUB}),
    (BILLING_CLEAN, None, {'billing': BILLING_STUB}),
    ('x = 1\nprint(x + 2)\n', None, None),
    ('import nope\n', None, None),
    ('import pytest\n', None, None),
    ('def f():\n    await get_order("x")\n', ORDER_STUBS, None),
    ('import asyncio\nasync def g():\n    yield 1\nasync for i in g():\n    pass\nasync with asyncio.Lock():\n    pass\n', None, None),
    ('def f():\n    x = 1\n    return 2\nraise SystemExit\nprint(1)\n', None, None),
    ('import asyncio\nasyncio.get_event_loop()\n', None, None),
    ('reveal_type(1)\n', None, None),
    ('x = 1  # type: ignore\n', None, None),
    ('import random\nif random.random():\n    y = 1\nprint(y)\n', None, None),
    ('def (:\n', None, None),
    ('from a.b import f\nf(1)\n', None, {'a.b': 'def f(x: str) -> None: ...\n'}),
    ('from a.b import f\nf("1")\n', None, {'a.b': 'def f(x: str) -> None: ...\n'}),
    ('from typing import override\n', None, None),
    ('print(get_order)\nlen(1)\n', ORDER_STUBS, None),
    ('x = 1\r\ny: str = x\r\n', None, None),
    ('s = "😀😀"; y: int = "x"\n', None, None),
    ('import bad\nbad.f()\n', None, {'bad': 'def f( -> int: ...\n'}),
    ('get_order("x")\n', ORDER_STUBS, None),
]


@pytest.mark.slow
async def test_agrees_with_cli(server: TyServer, folder: Folder) -> None:
    """Same diagnostics as `ty check` (position, severity, code, first message
    line) once top-level awaits are dropped from both, on one warm server."""

    def key(d: dict) -> tuple:
        start = d['range']['start']
        return (start['line'] + 1, start['character'] + 1, d['severity'], d['code'], d['message'].split('\n')[0])

    for code, stubs, modules in AGREEMENT_CASES:
        ours = without_top_level_awaits(await check(server, folder, code, stubs, modules), code)
        theirs = without_top_level_awaits(await folder.cli(), code)
        assert sorted(map(key, ours)) == sorted(map(key, theirs)), code


# ---------------------------------------------------------------- robustness


async def test_concurrent_calls_are_serialised(server: TyServer, folder: Folder) -> None:
    folder.layout('')

    async def one(i: int) -> list[str]:
        return [d['message'] for d in await server.diagnostics(f'y: int = "s{i}"\n')]

    results = await asyncio.gather(*(one(i) for i in range(20)))
    assert results == [[f'Object of type `Literal["s{i}"]` is not assignable to `int`'] for i in range(20)]


async def test_cancelled_call_leaves_server_usable(server: TyServer, folder: Folder) -> None:
    folder.layout('')
    assert [d['code'] for d in await server.diagnostics('x: str = 1\n')] == ['invalid-assignment']
    for delay in (0, 0.0005, 0.002):
        task = asyncio.create_task(server.diagnostics('x = 1\n' + 'import json\n' * 200))
        await asyncio.sleep(delay)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        # Whatever the cancelled call had sent, the next one checks its own text.
        assert [d['code'] for d in await server.diagnostics('x: str = 1\n')] == ['invalid-assignment']
        assert await server.diagnostics('x = 1\n') == []


async def test_error_response_leaves_server_usable(server: TyServer, folder: Folder) -> None:
    folder.layout('')
    with pytest.raises(RuntimeError, match=r'^ty server failed on corral/noSuchMethod: '):
        await server._request('corral/noSuchMethod', {})
    assert server.alive
    assert await server.diagnostics('x = 1\n') == []


async def test_text_that_is_not_utf8_encodable(server: TyServer, folder: Folder) -> None:
    folder.layout('')
    assert [d['code'] for d in await server.diagnostics('x: str = 1\n')] == ['invalid-assignment']
    with pytest.raises(UnicodeEncodeError):
        await server.diagnostics('x = "\ud800"\n')
    assert [d['code'] for d in await server.diagnostics('x: str = 1\n')] == ['invalid-assignment']
    assert await server.diagnostics('x = 1\n') == []


async def test_crashed_server_raises(server: TyServer, folder: Folder) -> None:
    folder.layout('')
    assert await server.diagnostics('x = 1\n') == []
    pid = server._proc.pid
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(RuntimeError, match=r'^the ty server exited \(code -9\)'):
        await server.diagnostics('x = 2\n')
    assert not server.alive
    with pytest.raises(RuntimeError, match='exited'):
        await server.notify_files_changed(['ty.toml'])
    await server.aclose()
    assert _gone(pid)


async def test_hung_server_times_out(server: TyServer, folder: Folder) -> None:
    folder.layout('')
    assert await server.diagnostics('x = 1\n') == []
    pid = server._proc.pid
    server.timeout = 0.5
    os.kill(pid, signal.SIGSTOP)
    try:
        with pytest.raises(RuntimeError, match=r'did not answer textDocument/diagnostic within 0.5s'):
            await server.diagnostics('x = 2\n')
        with pytest.raises(RuntimeError, match='did not answer'):
            await server.diagnostics('x = 3\n')
    finally:
        await server.aclose()  # killed even while stopped
    assert _gone(pid)


def _fake_server(tmp_path, body: str) -> str:
    path = tmp_path / 'fake-ty'
    path.write_text(f'#!/bin/sh\n{body}\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture
def spawned(monkeypatch) -> list[asyncio.subprocess.Process]:
    """The processes started through asyncio during the test."""
    procs: list[asyncio.subprocess.Process] = []
    real = asyncio.create_subprocess_exec

    async def spy(*args, **kwargs):
        proc = await real(*args, **kwargs)
        procs.append(proc)
        return proc

    monkeypatch.setattr(asyncio, 'create_subprocess_exec', spy)
    return procs


@pytest.mark.parametrize(
    ('body', 'message'),
    [
        ('echo "boom" >&2; exit 3', r'^the ty server exited \(code 3\)\nboom$'),
        ("printf 'Content-Length: 5\\r\\n\\r\\nnope!'; exec sleep 30", '^bad message from the ty server: JSONDecodeError'),
        ('exec sleep 30', r'^the ty server did not answer initialize within 0.3s$'),
    ],
)
async def test_broken_server_fails_start(tmp_path, folder: Folder, spawned, monkeypatch, body: str, message: str) -> None:
    monkeypatch.setattr(TyServer, 'timeout', 0.3)
    with pytest.raises(RuntimeError, match=message):
        await TyServer.start(folder.path, ty_bin=_fake_server(tmp_path, body), env=folder.env)
    assert len(spawned) == 1
    assert spawned[0].returncode is not None
    assert _gone(spawned[0].pid)


async def test_missing_binary(folder: Folder) -> None:
    with pytest.raises(RuntimeError, match='could not start the ty server'):
        await TyServer.start(folder.path, ty_bin='/nonexistent/ty', env=folder.env)


async def test_aclose_is_idempotent_and_final(folder: Folder) -> None:
    srv = await TyServer.start(folder.path, ty_bin=_ty_bin(), env=folder.env)
    pid = srv._proc.pid
    await srv.aclose()
    await srv.aclose()
    assert _gone(pid)
    assert srv._proc.returncode == 0  # shut down politely
    with pytest.raises(RuntimeError, match='closed'):
        await srv.diagnostics('x = 1\n')


async def test_cancelled_aclose_still_reaps(folder: Folder) -> None:
    srv = await TyServer.start(folder.path, ty_bin=_ty_bin(), env=folder.env)
    pid = srv._proc.pid
    task = asyncio.create_task(srv.aclose())
    await asyncio.sleep(0)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert _gone(pid)


async def test_aclose_of_unresponsive_server(folder: Folder) -> None:
    srv = await TyServer.start(folder.path, ty_bin=_ty_bin(), env=folder.env)
    pid = srv._proc.pid
    os.kill(pid, signal.SIGSTOP)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await srv.aclose()
    assert loop.time() - started < 3
    assert srv._proc.returncode == -signal.SIGKILL
    assert _gone(pid)


async def test_context_manager(folder: Folder) -> None:
    async with await TyServer.start(folder.path, ty_bin=_ty_bin(), env=folder.env) as srv:
        folder.layout('')
        assert await srv.diagnostics('x = 1\n') == []
        pid = srv._proc.pid
    assert _gone(pid)


async def test_killing_a_child_that_just_ended_keeps_its_exit_code_and_logs_nothing(caplog):
    # `proc.kill()` polls first on Python 3.11 and can reap a child that has just exited behind
    # asyncio's child watcher, which then logs "Unknown child process pid ..., will report
    # returncode 255" on the application's stderr (a README example printed it once).
    codes = []
    with caplog.at_level(logging.WARNING, logger='asyncio'):
        for _ in range(100):
            proc = await asyncio.create_subprocess_exec('true')
            await asyncio.sleep(0.001 * (_ % 3))  # around the moment it exits
            kill_child(proc)
            codes.append(await proc.wait())
        proc = await asyncio.create_subprocess_exec('sleep', '30')
        kill_child(proc)
        assert await proc.wait() == -signal.SIGKILL
        kill_child(proc)  # ended: nothing to do
    assert set(codes) <= {0, -signal.SIGKILL}
    assert [record.getMessage() for record in caplog.records] == []
