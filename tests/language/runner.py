"""Run a conformance case in the sandbox and in plain CPython, the same way, and compare.

A case is a small script and what it must give: the value of its last expression (as it crosses
the sandbox boundary: `values.pack`/`unpack`, so a named tuple is a tuple), the exception it must
raise (`'ValueError: message'`), and what it prints. In CPython the script runs with top-level
await (in a fresh event loop when it uses it), in a fresh namespace, with stdout and stderr captured together (the sandbox
merges them into its captured output); cases that use files run in a copy of `FILES`, which the
sandbox sees as its working folder (a mount).
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import dataclasses
import datetime
import io
import linecache
import os
import pathlib
import shutil
import sys
import tempfile
import textwrap
import warnings
from typing import Any

import corral
from corral.values import pack, unpack

#: The files a case with `files=True` finds in its working folder.
FILES = {
    'notes.txt': 'first line\nsecond line\nthird line\n',
    'data/sales.csv': 'region,amount\nnorth,10\nsouth,25\nnorth,5\n',
    'data/config.json': '{"name": "report", "limit": 3}',
    'data/raw/readme.md': '# raw\n',
    'data/.hidden': 'secret\n',
    'bytes.bin': b'\x00\x01\x02\xff',
}

#: Where the sandbox sees those files (its working folder).
MOUNT = '/work'

#: What a case with `grants=True` gets from the host: environment variables and a fixed clock.
ENVIRON = {'REGION': 'eu-west', 'DEBUG': '1'}
CLOCK = datetime.datetime(2024, 5, 17, 9, 30, 15, 250000, tzinfo=datetime.timezone(datetime.timedelta(hours=2)))

_MISSING = object()
#: Placeholder while a case is written: `python -m tests.language.fill FILE` fills it with what CPython gives.
TODO = object()


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    code: str
    expected: Any = _MISSING
    raises: str | None = None
    output: str = ''
    files: bool = False
    #: runs in the sandbox only (what it checks is the sandbox's own behavior)
    sandbox_only: bool = False
    #: the host grants the environment (`ENVIRON`) and a fixed clock (`CLOCK`); sandbox only
    grants: bool = False


def case(id: str, code: str, expected: Any = _MISSING, *, raises: str | None = None, output: str = '', files: bool = False, sandbox_only: bool = False, grants: bool = False) -> Case:
    if (expected is _MISSING) == (raises is None):
        raise ValueError(f'case {id}: give either an expected value or raises=')
    return Case(id, textwrap.dedent(code).strip() + '\n', expected, raises, output, files, sandbox_only or grants, grants)


@dataclasses.dataclass
class Outcome:
    value: Any = None
    error: str | None = None
    output: str = ''

    def check(self, c: Case) -> None:
        if c.raises is not None:
            assert self.error == c.raises, f'{c.id}: raised {self.error!r}, expected {c.raises!r} (value {self.value!r})'
        else:
            assert self.error is None, f'{c.id}: raised {self.error}'
            assert self.value == c.expected and type(self.value) is type(c.expected), f'{c.id}: {self.value!r} != {c.expected!r}'
        assert self.output == c.output, f'{c.id}: printed {self.output!r}, expected {c.output!r}'


def make_files(root: pathlib.Path) -> None:
    for relative, content in FILES.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


# ----- the sandbox ---------------------------------------------------------------------------------

async def run_sandbox(pool: corral.Pool, c: Case, tmp: pathlib.Path) -> Outcome:
    printed: list[str] = []
    checkout: dict[str, Any] = {'random_seed': 1234}
    if c.files:
        root = tmp / 'files'
        make_files(root)
        checkout['mounts'] = [corral.Mount(root, MOUNT)]
    if c.grants:
        checkout['os_access'] = corral.OsAccess(environ=ENVIRON, clock=lambda: CLOCK)
    async with pool.checkout(**checkout) as session:
        try:
            value = await session.feed_run(c.code, print_callback=lambda stream, text: printed.append(text))
        except corral.SandboxRuntimeError as error:
            return Outcome(error=f'{error.exc_type}: {error.message}', output=''.join(printed))
        except corral.SandboxSyntaxError as error:
            return Outcome(error=error.display().rstrip('\n').splitlines()[-1], output=''.join(printed))
    return Outcome(value=value, output=''.join(printed))


# ----- plain CPython -------------------------------------------------------------------------------

def run_cpython(c: Case) -> Outcome:
    buffer = io.StringIO()
    cwd = os.getcwd()
    tmp = tempfile.mkdtemp(prefix='corral-cpython-')
    try:
        if c.files:
            make_files(pathlib.Path(tmp))
            os.chdir(tmp)
        try:
            with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer), _as_a_script(c.code):
                value = _run(c.code)
        except SyntaxError as error:
            return Outcome(error=f'SyntaxError: {error.msg}', output=buffer.getvalue())
        except BaseException as error:  # the script's own exception
            return Outcome(error=f'{type(error).__name__}: {error}', output=buffer.getvalue())
        try:
            value = unpack(pack(value, side='sandbox'))
        except (TypeError, ValueError) as error:
            message = f'the value of the last expression cannot leave the sandbox: {error}'
            return Outcome(error=f'TypeError: {message}', output=buffer.getvalue())
        return Outcome(value=value, output=buffer.getvalue())
    finally:
        os.chdir(cwd)
        shutil.rmtree(tmp, ignore_errors=True)


#: The warnings filters a fresh interpreter starts with (`python -W` unset; the test runner has its own).
_SCRIPT_FILTERS = [
    ('default', None, DeprecationWarning, '__main__', 0),
    ('ignore', None, DeprecationWarning, None, 0),
    ('ignore', None, PendingDeprecationWarning, None, 0),
    ('ignore', None, ImportWarning, None, 0),
    ('ignore', None, ResourceWarning, None, 0),
]


@contextlib.contextmanager
def _as_a_script(code: str):
    """Warnings shown as `python main.py` shows them: its filters, and main.py's lines."""
    linecache.cache['main.py'] = (len(code), None, code.splitlines(True), 'main.py')
    with warnings.catch_warnings():
        warnings.filters[:] = _SCRIPT_FILTERS
        warnings._filters_mutated()
        # to stderr, where the test runner's own catch of warnings would record them
        warnings.showwarning = lambda message, category, filename, lineno, file=None, line=None: sys.stderr.write(
            warnings.formatwarning(message, category, filename, lineno, line)
        )
        try:
            yield
        finally:
            linecache.cache.pop('main.py', None)


def _run(code: str) -> Any:
    tree = ast.parse(code)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    body = compile(tree, 'main.py', 'exec', flags=flags, dont_inherit=True)
    tail = compile(last, 'main.py', 'eval', flags=flags, dont_inherit=True) if last is not None else None
    namespace: dict[str, Any] = {'__name__': '__main__', '__doc__': None}  # as a script without a docstring has
    if not (body.co_flags | (tail.co_flags if tail is not None else 0)) & 0x80:
        # no top-level await: run as CPython runs a script, with no event loop (asyncio.run works)
        eval(body, namespace)
        return eval(tail, namespace) if tail is not None else None

    async def main() -> Any:
        result = eval(body, namespace)
        if body.co_flags & 0x80:
            await result
        if tail is None:
            return None
        result = eval(tail, namespace)
        if tail.co_flags & 0x80:
            result = await result
        return result

    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()
