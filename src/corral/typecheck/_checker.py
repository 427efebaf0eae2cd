"""``TypeChecker``: run ty on a script against stubs and return its diagnostics.

A check is bounded: in time (``time_limit``: the quick server check, ``ty check`` and the
rendering together; past it every ty process of the check is killed) and in memory (``memory``:
each ty process's heap).  Going past either raises ``SandboxLimitError``; any other failure of ty
(not installed, cannot start, crashed) raises ``SandboxCheckerError``.  Each check has a folder
and a warm ``ty server`` of its own (a slot), so one slow check holds up no other: the others
use other slots, and a check still running after ``TypeChecker.demote_after`` seconds gets the
lowest CPU priority, so that it takes only the CPU the others leave.  The check of a session's
stubs (``check_stubs``) is bounded the same way, and each check reports the CPU its processes used
(``on_cpu``), which a session counts.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import keyword
import os
import re
import shutil
import subprocess
import sys
import tempfile
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from ..errors import SandboxCheckerError, SandboxLimitError
from . import _ran, _render, _sandbox
from ._formats import diagnostic_records
from ._awaits import AWAIT_MESSAGES, ModuleScope
from ._context import relevant_context, unread
from ._reader import SyntaxReader
from ._server import TyServer, lower_priority, memory_bound, out_of_memory, run_to_end, without_top_level_awaits
from ._stdlib import SandboxTypeshed, sandbox_typeshed
from ._syntax import Syntax

__all__ = ['TypeChecker']

STUBS_MODULE = 'repl_type_stubs'
_BUILTINS_FILE = '__builtins__.pyi'
_BUILTINS_TEXT = f'from {STUBS_MODULE} import *\n'
_CONFIG_FILE = 'ty.toml'
_PYTHON_VERSION = f'{sys.version_info[0]}.{sys.version_info[1]}'  # the workers run this interpreter
_SCRIPT_NAME_RE = re.compile(r'^[A-Za-z0-9_][A-Za-z0-9_.-]*\.py$')
_INVALID_SYNTAX_PREFIX = 'error[invalid-syntax]: '
_LSP_SEVERITIES = {1: 'error', 2: 'warning', 3: 'info'}
_CONCISE_RE = re.compile(r'^(.+?):(\d+):(\d+: (?:error|warning|info|fatal)\[[^\]\s]+\] .*)$')
# Environment variables passed through to ty; everything else (TY_*, VIRTUAL_ENV,
# CONDA_PREFIX, XDG_CONFIG_HOME, COLUMNS, ...) is dropped so that the user's
# configuration and Python environment can't change the result.
_PASSTHROUGH_ENV = ('PATH', 'SYSTEMROOT', 'LANG', 'LC_ALL', 'TMPDIR')
_TOO_SLOW = (
    'the type check of the script took longer than the type_check_time limit of {} seconds and was stopped; '
    'the script did not run (a script this slow to check is very long or very branched: split it into smaller scripts)'
)
_TOO_LARGE = (
    'the type check of the script needed more than the type_check_memory limit of {} bytes and was stopped; '
    'the script did not run (a script this costly to check is very long or very branched: split it into smaller scripts)'
)
_STUBS_TOO_SLOW = (
    'the type check of the stubs took longer than the type_check_time limit of {} seconds and was stopped; '
    'the session did not open (stubs this slow to check are very large, or have very large unions or overloads: simplify them)'
)
_STUBS_TOO_LARGE = (
    'the type check of the stubs needed more than the type_check_memory limit of {} bytes and was stopped; '
    'the session did not open (stubs this costly to check are very large, or have very large unions or overloads: simplify them)'
)
_T = TypeVar('_T')


class _OutOfMemory(Exception):
    """A ty process of the check ran out of its memory bound."""



def _find_ty() -> str:
    try:
        from ty import find_ty_bin
    except ImportError as exc:
        raise RuntimeError(
            'ty type checker is not installed: the `ty` package (ty==0.0.99) is missing'
        ) from exc
    try:
        path = os.fsdecode(find_ty_bin())
    except FileNotFoundError as exc:
        raise RuntimeError(f'ty type checker executable not found: {exc}') from exc
    if not os.path.isfile(path):
        raise RuntimeError(f'ty type checker executable not found at {path}')
    return path


def _joined(snippets: Sequence[str]) -> tuple[str, int]:
    """Earlier snippets as the text that goes in front of a new one, and its number of lines."""
    parts = []
    for snippet in snippets:
        snippet = snippet.removeprefix('\ufeff')
        if not snippet.strip():
            continue
        snippet = '\n'.join(_render.split_lines(snippet))  # one kind of newline
        parts.append(snippet if snippet.endswith('\n') else snippet + '\n')
    prefix = ''.join(parts)
    return prefix, prefix.count('\n')


_FUTURE_LINE = re.compile(r'^from[ \t]+__future__[ \t]+import[ \t]+([\w, \t]+?)[ \t]*(#.*)?$', re.MULTILINE)


def _with_futures(prefix: str, offset: int, code: str) -> tuple[str, int]:
    """`prefix + code` and the code's first line, with every one-line `from __future__ import`
    of both moved to a line of its own at the top of the file, where Python wants them (each
    snippet ran as a file of its own): their lines stay, blank, so every line keeps its number."""
    if '__future__' not in prefix and '__future__' not in code:
        return prefix + code, offset
    features: dict[str, None] = {}

    def blank(match: re.Match[str]) -> str:
        features.update(dict.fromkeys(name.strip() for name in match.group(1).split(',') if name.strip()))
        return ''

    text = _FUTURE_LINE.sub(blank, prefix) + _FUTURE_LINE.sub(blank, code)
    if not features:
        return prefix + code, offset
    return f'from __future__ import {", ".join(features)}\n' + text, offset + 1


#: Where the checker finds the types of a package (`Pool(packages=...)`): its folder in the
#: Python environment, or a stubs package (PEP 561) for pandas.
_PACKAGE_TYPES = {'numpy': ('numpy',), 'pandas': ('pandas-stubs', 'pandas'), 'matplotlib': ('matplotlib',)}


def _concise_lines(diagnostics: list[dict], code: str, offset: int, script_name: str) -> list[str]:
    """The warm server's LSP `diagnostics` of `code` (the file's lines from `offset` on) as ty's
    concise lines, numbered in `code`, columns counted in characters as ty counts them."""
    lines = _render.split_lines(code)
    out = []
    for d in diagnostics:
        start = d['range']['start']
        row, column = start['line'] - offset, start['character']
        if not 0 <= row < len(lines) or not isinstance(d.get('code'), str):
            continue
        column = len(lines[row].encode('utf-16-le')[: 2 * column].decode('utf-16-le', 'replace'))
        severity = _LSP_SEVERITIES.get(d.get('severity', 1), 'error')
        message = str(d.get('message', '')).replace('\n', ' ')
        out.append(f'{script_name}:{row + 1}:{column + 1}: {severity}[{d["code"]}] {message}\n')
    return out


def _link_packages(site: str, packages: Sequence[str]) -> None:
    """Link the types of `packages` into the checker's own (otherwise empty) environment, so ty
    checks scripts against numpy's own types, pandas-stubs and matplotlib's stubs, and nothing
    else installed next to corral."""
    import importlib.util

    for package in packages:
        for folder in _PACKAGE_TYPES[package]:
            spec = importlib.util.find_spec(folder.replace('-', '_')) if '-' not in folder else None
            if spec is not None and spec.submodule_search_locations:
                found = list(spec.submodule_search_locations)[0]
            else:
                found = next((os.path.join(entry, folder) for entry in sys.path if os.path.isdir(os.path.join(entry, folder))), None)
            if found is not None:
                os.symlink(found, os.path.join(site, folder))
                break


def _module_files(modules: Mapping[str, str], script_name: str) -> dict[str, str]:
    """Map module stubs to file paths (``a`` -> ``a.pyi``, ``a.b`` -> ``a/b.pyi``
    with ``a/__init__.pyi``)."""
    reserved = {STUBS_MODULE, '__builtins__', script_name[:-3]}
    names = set(modules)
    files: dict[str, str] = {}
    for name, text in modules.items():
        if not isinstance(name, str) or not isinstance(text, str):
            raise TypeError('modules must map module names (str) to stub source (str)')
        parts = name.split('.')
        if not all(p.isidentifier() and not keyword.iskeyword(p) for p in parts):
            raise ValueError(f'invalid module name for a stub: {name!r}')
        if parts[0] in reserved:
            raise ValueError(f'module name {name!r} is reserved')
        is_package = any(other.startswith(name + '.') for other in names)
        path = '/'.join(parts) + ('/__init__.pyi' if is_package else '.pyi')
        files[path] = text
        for depth in range(1, len(parts)):
            parent = '/'.join(parts[:depth]) + '/__init__.pyi'
            files.setdefault(parent, '')
    return files


def _stubs_digest(stubs: str | None, modules: Mapping[str, str]) -> bytes:
    """A hash of a session's stubs and its modules' (what `check_stubs` keeps its answers by)."""
    digest = hashlib.blake2b(digest_size=32)
    for part in ('' if stubs is None else '+' + stubs, *(text for item in sorted(modules.items()) for text in item)):
        data = part.encode('utf-8', 'surrogatepass')
        digest.update(len(data).to_bytes(8, 'little') + data)
    return digest.digest()


class _Slot:
    """A folder holding one check's files; reused between checks with the same memory bound."""

    def __init__(self, path: str, memory: int | None = None) -> None:
        self.path = path
        #: Bytes of heap each ty process started for this slot may use (None: unbounded).
        self.memory = memory
        self.files: dict[str, str] = {}
        #: The slot's warm `ty server` once it has started (see `TypeChecker._serve`).
        self.server: TyServer | None = None
        self.starting: asyncio.Task[None] | None = None
        #: The `ty check` process running for the slot's check.
        self.process: subprocess.Popen[bytes] | None = None
        #: Whether the slot's processes run at the lowest priority (the slot is then not reused).
        self.demoted = False
        #: CPU seconds of the slot's ty processes in its current check (see `TypeChecker.check`).
        self.cpu = 0.0
        #: ty's concise lines of what the warm server found in the current check's code.
        self.quick: list[str] = []
        #: Files changed since the slot's server began to start that it has not been told of: a
        #: server reads the folder while it starts, so a change then may be missed by its read.
        self.unheard: set[str] = set()

    def lower_priority(self) -> None:
        """Let the slot's ty processes, now and later, run only on CPU that others leave."""
        self.demoted = True
        if self.server is not None:
            self.server.lower_priority()
        if self.process is not None and self.process.returncode is None:
            lower_priority(self.process.pid)

    def add_cpu(self, seconds: float) -> None:
        self.cpu += seconds

    def sync(self, wanted: dict[str, str]) -> list[str]:
        """Make the folder hold exactly ``wanted``, writing only what changed; return what changed."""
        changed = [rel for rel in self.files if rel not in wanted]
        changed += [rel for rel, text in wanted.items() if self.files.get(rel) != text]
        for rel in [rel for rel in self.files if rel not in wanted]:
            full = os.path.join(self.path, rel)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(full)
            del self.files[rel]
            parent = os.path.dirname(rel)
            while parent:
                try:
                    os.rmdir(os.path.join(self.path, parent))
                except OSError:
                    break
                parent = os.path.dirname(parent)
        for rel, text in wanted.items():
            if self.files.get(rel) == text:
                continue
            full = os.path.join(self.path, rel)
            if '/' in rel:
                os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, 'w', encoding='utf-8', newline='') as f:
                f.write(text)
            self.files[rel] = text
        return changed

    async def close(self) -> None:
        if self.starting is not None:
            # not cancelled: a start cut short would leave its `ty server` process behind
            with contextlib.suppress(Exception):
                await self.starting
            self.starting = None
        if self.server is not None:
            server, self.server = self.server, None
            await server.aclose()


class TypeChecker:
    """Runs ty on a script against stubs, giving ty's full diagnostic text."""

    #: Idle folders kept for reuse.
    max_idle_slots: int = 4
    #: Seconds after which a check's ty processes get the lowest CPU priority: a check of a
    #: model's script takes milliseconds, and one that runs on must not slow the others.
    demote_after: float = 1.0
    #: Sets of stubs whose own diagnostics (`check_stubs`) are kept, by a hash of their text.
    stub_checks_kept: int = 64

    def __init__(self, packages: Sequence[str] = ()) -> None:
        self.packages = tuple(packages)
        self._root: str | None = None
        self._free: list[_Slot] = []
        self._count = 0
        self._closed = False
        self._ty_bin: str | None = None
        self._env: dict[str, str] | None = None
        self._finalizer: weakref.finalize | None = None
        self._typeshed: SandboxTypeshed | None = None
        self._typeshed_bin: str | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._slots: set[_Slot] = set()
        self._stub_results: collections.OrderedDict[bytes, str | None] = collections.OrderedDict()
        # stub checks running, by the stubs' hash and the check's limits, and how many wait on each
        self._stub_checks: dict[tuple[bytes, float | None, int | None], tuple[asyncio.Task[str | None], list[int]]] = {}
        self._reader = SyntaxReader()

    # ------------------------------------------------------------------ setup

    def _setup(self) -> str:
        if self._closed:
            raise RuntimeError('TypeChecker is closed')
        if self._ty_bin is None:
            self._ty_bin = _find_ty()
        if self._root is None:
            root = tempfile.mkdtemp(prefix='corral-ty-')
            self._finalizer = weakref.finalize(self, shutil.rmtree, root, True)
            # An empty Python environment: the script sees the stdlib and our
            # stubs, not whatever happens to be installed next to corral.
            site = os.path.join(root, 'env', 'lib', f'python{_PYTHON_VERSION}', 'site-packages')
            os.makedirs(site)
            _link_packages(site, self.packages)
            with open(os.path.join(root, 'env', 'pyvenv.cfg'), 'w') as f:
                f.write(f'home = {os.path.dirname(sys.executable)}\nversion = {_PYTHON_VERSION}.0\n')
            env = {k: os.environ[k] for k in _PASSTHROUGH_ENV if k in os.environ}
            # No user-level ty.toml (it lives under $XDG_CONFIG_HOME/ty or ~/.config/ty).
            env['HOME'] = root
            env['XDG_CONFIG_HOME'] = os.path.join(root, 'config')
            env['NO_COLOR'] = '1'
            env['TY_MAX_PARALLELISM'] = '1'
            self._env = env
            self._root = root
        return self._root

    def _acquire(self, memory: int | None) -> _Slot:
        self._setup()
        for index in range(len(self._free) - 1, -1, -1):
            if self._free[index].memory == memory:
                return self._free.pop(index)
        return self._new_slot(memory)

    def _new_slot(self, memory: int | None) -> _Slot:
        root = self._setup()
        self._count += 1
        path = os.path.join(root, f'check{self._count}')
        os.mkdir(path)
        slot = _Slot(path, memory)
        self._slots.add(slot)
        # Stops ty's project discovery here: no pyproject.toml/ty.toml from a parent folder.
        slot.sync({_CONFIG_FILE: ''})
        return slot

    def _release(self, slot: _Slot, ok: bool) -> None:
        if ok and not slot.demoted and not self._closed and len(self._free) < self.max_idle_slots:
            self._free.append(slot)
        else:
            self._slots.discard(slot)
            if slot.server is not None:
                slot.server.abort()  # perhaps mid-request: no polite shutdown
            self._background(slot.close())
            shutil.rmtree(slot.path, ignore_errors=True)

    def _background(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _serve(self, slot: _Slot) -> TyServer | None:
        """The slot's warm `ty server`, or None while it starts (started here, in the background).

        A clean check through the server takes well under a millisecond, against some 25 ms for a
        `ty check` process; diagnostics still come from `ty check`, whose text is what a model reads.
        """
        if slot.server is not None and slot.server.alive:
            return slot.server
        if slot.starting is None or slot.starting.done():
            slot.server = None
            slot.unheard.clear()  # what is on disk now, the new server reads
            slot.starting = asyncio.get_running_loop().create_task(self._start_server(slot))
        return None

    async def _start_server(self, slot: _Slot) -> None:
        assert self._ty_bin is not None and self._env is not None and self._root is not None
        try:
            server = await TyServer.start(
                slot.path,
                ty_bin=self._ty_bin,
                env=self._env,
                python=os.path.join(self._root, 'env'),
                typeshed=self._typeshed.root if self._typeshed is not None else None,
                memory=slot.memory,
            )
            if slot.demoted:
                server.lower_priority()
        except (RuntimeError, OSError):
            return  # checks keep using `ty check`
        try:
            await server.warm_up()
        except BaseException as error:  # cancelled too (an event loop ending): its process is ended here
            await asyncio.shield(server.aclose())
            if isinstance(error, (RuntimeError, OSError)):
                return
            raise
        slot.server = server

    # ------------------------------------------------------------------ check

    async def check(
        self,
        code: str,
        *,
        script_name: str = 'main.py',
        stubs: str | None = None,
        modules: Mapping[str, str] = {},
        context: Sequence[str] = (),
        time_limit: float | None = None,
        memory: int | None = None,
        on_cpu: Callable[[float], None] | None = None,
        on_concise: Callable[[str], None] | None = None,
    ) -> str | None:
        """Return the rendered diagnostics (str, no trailing newline, diagnostics
        separated by one blank line, no 'Found N diagnostics' line), or None when
        the script is clean.

        ``time_limit`` bounds the check in seconds, ``memory`` the heap of each ty process in
        bytes (None: no bound).  Raises ``SandboxLimitError`` past either (``limit`` is
        ``'type_check_time'`` or ``'type_check_memory'``, as in ``Limits``),
        ``SandboxCheckerError`` when ty is missing or fails, ValueError or TypeError for a bad
        script name or module stubs.  ``on_cpu``, when given, is called once with the CPU
        seconds (user + system) the check's ty processes used, whether it passed, failed or was
        stopped: a `ty check` process's as the kernel accounts it when it ends, what the slot's
        warm `ty server` used since a check last counted it, and the syntax reader's child's for
        a long script. ``on_concise``, when given, is called with ty's own concise text of the
        diagnostics when the check fails: a line each, ``main.py:1:1: error[rule] message``,
        numbered in the script as the full text is; the warm server's words when it found each
        diagnostic of the script, else a second ``ty check``'s (within the same bounds)."""
        if not _SCRIPT_NAME_RE.match(script_name) or script_name[:-3] in (STUBS_MODULE, '__builtins__'):
            raise ValueError(f'invalid script name: {script_name!r}')
        code = code.removeprefix('\ufeff')
        wanted = {_CONFIG_FILE: ''}
        wanted.update(_module_files(modules, script_name))
        if stubs is not None:
            wanted[f'{STUBS_MODULE}.pyi'] = stubs
            wanted[_BUILTINS_FILE] = _BUILTINS_TEXT
        try:
            await self._prepare()  # once per checker: not the script's time
            slot = self._acquire(memory)
        except (RuntimeError, OSError) as exc:
            raise SandboxCheckerError(f'the type checker could not check the script, so it did not run: {exc}') from None
        ok = False
        slot.cpu = 0.0
        try:
            result = await self._bounded(
                slot, self._check(slot, code, script_name, wanted, modules, context, on_concise), time_limit, memory, _TOO_SLOW, _TOO_LARGE
            )
            ok = True
            return result
        except (RuntimeError, OSError) as exc:  # OSError: the checker's own folders (a full disk)
            raise SandboxCheckerError(f'the type checker could not check the script, so it did not run: {exc}') from None
        finally:
            self._count_server(slot)
            if on_cpu is not None:
                on_cpu(slot.cpu)
            self._release(slot, ok)  # a slot cut short is killed with its processes

    async def _bounded(
        self, slot: _Slot, work: Awaitable[_T], time_limit: float | None, memory: int | None, too_slow: str, too_large: str
    ) -> _T:
        """`work` (a check in `slot`) within `time_limit` seconds and `memory` bytes of heap per ty
        process, its ty processes demoted after `demote_after` seconds; `SandboxLimitError` past
        either, with the text `too_slow` or `too_large` (formatted with the limit)."""
        demote = asyncio.get_running_loop().call_later(self.demote_after, slot.lower_priority)
        try:
            async with asyncio.timeout(time_limit) as deadline:
                return await work
        except TimeoutError:
            if not deadline.expired():
                raise
            raise SandboxLimitError(too_slow.format(time_limit), limit='type_check_time', value=time_limit) from None
        except _OutOfMemory:
            raise SandboxLimitError(too_large.format(memory), limit='type_check_memory', value=memory) from None
        finally:
            demote.cancel()

    def _count_server(self, slot: _Slot) -> None:
        """Add to the slot's check what its warm server used since a check last counted it (its start and warm-up included)."""
        server = slot.server
        now = server.cpu_seconds() if server is not None else None
        if now is not None and server is not None:
            slot.add_cpu(max(now - server.counted_cpu, 0.0))
            server.counted_cpu = now

    async def _prepare(self) -> None:
        """Find ty, make the checker's folders and build the sandbox's standard library stubs
        (once per process, in a thread)."""
        self._setup()
        if self._typeshed_bin != self._ty_bin:
            assert self._ty_bin is not None
            try:
                self._typeshed = await asyncio.to_thread(sandbox_typeshed, self._ty_bin)
            except RuntimeError:  # not a ty binary we can read: ty's own typeshed, and its own errors
                self._typeshed = None
            self._typeshed_bin = self._ty_bin

    async def _check(
        self,
        slot: _Slot,
        code: str,
        script_name: str,
        wanted: dict[str, str],
        modules: Mapping[str, str],
        context: Sequence[str],
        on_concise: Callable[[str], None] | None,
    ) -> str | None:
        # The earlier snippets come first in the file so the new code sees their
        # names and types; their own diagnostics are dropped afterwards. The warm
        # server's quick check needs only those the new code depends on.
        known: dict[str, Syntax | None] = {}
        texts = [code, *unread(context, code)]
        while texts:  # off the event loop when long; again what another check made forgotten meanwhile
            known.update(zip(texts, await self._reader.read(texts, slot.add_cpu)))
            texts = [text for text in unread(context, code) if text not in known]
        syntax = known[code]
        quick_prefix, quick_offset = _joined(relevant_context(context, code, known))
        # the server gets the script's text with the request; only `ty check` reads its file
        slot.unheard.update(slot.sync({**wanted, script_name: slot.files.get(script_name, '')}))
        server = self._serve(slot)
        quick_text, quick_offset = _with_futures(quick_prefix, quick_offset, code)
        slot.quick = []
        if server is not None and await self._clean(server, slot, quick_text, code, syntax, quick_offset, script_name, frozenset(modules)):
            return None
        text, offset = _with_futures(*_joined(context), code)
        slot.sync({**wanted, script_name: text})
        stdout = await self._run_ty(slot, script_name)
        result = await self._postprocess(stdout, slot, script_name, code, syntax, offset, frozenset(modules))
        if result is not None and on_concise is not None:
            # the warm server words its diagnostics as ty's concise output does: ask `ty check`
            # only when it did not find each of those of the full text
            found = {line.split('] ', 1)[0] for line in slot.quick}  # 'main.py:1:1: error[rule'
            if {f'{r.path}:{r.line}:{r.column}: {r.severity}[{r.rule}' for r in diagnostic_records(result) if r.path == script_name} <= found:
                on_concise(self._scrub(''.join(slot.quick), slot))
            else:
                on_concise(self._concise(await self._run_ty(slot, script_name, 'concise'), slot, script_name, offset))
        return result

    async def ran_part(self, code: str, line: int | None) -> str:
        """The source of the script `code` that ran before its top-level statement at `line`
        raised, for the next check's context (see `_ran`); '' when nothing can be known to have
        run (`line` is None, the code does not parse, or it could not be read)."""
        if line is None:
            return ''
        try:
            [syntax] = await self._reader.read([code])
        except RuntimeError:
            return ''
        return _ran.ran_part(code, line, syntax)

    async def check_stubs(
        self,
        stubs: str | None,
        modules: Mapping[str, str] = {},
        *,
        time_limit: float | None = None,
        memory: int | None = None,
        on_cpu: Callable[[float], None] | None = None,
    ) -> str | None:
        """ty's diagnostics of the stub files themselves, or None when they have no error.

        A stub ty cannot read (a misspelled import such as `from typing import Litteral`, an
        undefined type, a syntax error) does not fail a script's check: the function it declares
        is then left unchecked, silently. The text is ty's, with the files named as in a script's
        diagnostics (`repl_type_stubs.pyi`, `<module>.pyi`). The answer for the same stubs is kept
        (the last `stub_checks_kept` sets, by a hash of their text), so a pool's checkouts pay for
        it once; checkouts asking for the same stubs with the same limits at once share one check,
        which is stopped when every one of them has given up waiting (cancelled).

        Bounded as a script's check is (`check`): `time_limit`, `memory`, demoted after
        `demote_after` seconds, `SandboxLimitError` past a limit (saying the session did not
        open), `SandboxCheckerError` when ty fails. `on_cpu` is called with the CPU seconds of the
        check's ty process by the checkout that started it (a kept answer costs none)."""
        key = _stubs_digest(stubs, modules)
        if key in self._stub_results:
            self._stub_results.move_to_end(key)
            return self._stub_results[key]
        running = (key, time_limit, memory)
        shared = self._stub_checks.get(running)
        if shared is None:
            task = asyncio.get_running_loop().create_task(self._check_stubs(key, stubs, modules, time_limit, memory, on_cpu))
            shared = self._stub_checks[running] = (task, [0])
            task.add_done_callback(lambda _: self._stub_checks.get(running) is shared and self._stub_checks.pop(running))
        task, waiting = shared
        waiting[0] += 1
        try:
            return await asyncio.shield(task)  # shared: a checkout that gives up leaves it to the others
        except asyncio.CancelledError:
            if waiting[0] == 1 and not task.done():  # the last one waiting: nobody wants it any more
                task.cancel()
                if self._stub_checks.get(running) is shared:  # a checkout asking next starts afresh
                    del self._stub_checks[running]
            raise
        finally:
            waiting[0] -= 1

    async def _check_stubs(
        self,
        key: bytes,
        stubs: str | None,
        modules: Mapping[str, str],
        time_limit: float | None,
        memory: int | None,
        on_cpu: Callable[[float], None] | None,
    ) -> str | None:
        wanted = {_CONFIG_FILE: ''}
        wanted.update(_module_files(modules, 'main.py'))
        if stubs is not None:
            wanted[f'{STUBS_MODULE}.pyi'] = stubs
        if len(wanted) == 1:
            return None
        try:
            await self._prepare()
            # a folder of its own: a slot's warm server would not hear of the files changed here
            slot = self._new_slot(memory)
        except (RuntimeError, OSError) as exc:
            raise SandboxCheckerError(f'the type checker could not check the stubs: {exc}') from None
        self._slots.discard(slot)
        try:
            slot.sync(wanted)
            stdout = await self._bounded(slot, self._run_ty(slot, '.'), time_limit, memory, _STUBS_TOO_SLOW, _STUBS_TOO_LARGE)
        except (RuntimeError, OSError) as exc:
            raise SandboxCheckerError(f'the type checker could not check the stubs: {exc}') from None
        finally:
            shutil.rmtree(slot.path, ignore_errors=True)
            if on_cpu is not None:
                on_cpu(slot.cpu)
        if self._typeshed is not None:
            stdlib = self._typeshed.stdlib
            for root in sorted({stdlib, os.path.realpath(stdlib)}, key=len, reverse=True):
                stdout = stdout.replace(root + os.sep, 'stdlib/')
        diagnostics = [d for d in stdout.strip().split('\n\n') if d and not d.startswith(('Found ', 'All checks passed'))]
        result = None
        if any(d.startswith(('error[', 'fatal[')) for d in diagnostics):
            result = self._scrub('\n\n'.join(diagnostics), slot)
        self._stub_results[key] = result
        while len(self._stub_results) > self.stub_checks_kept:
            self._stub_results.popitem(last=False)
        return result

    async def _clean(
        self,
        server: TyServer,
        slot: _Slot,
        text: str,
        code: str,
        syntax: Syntax | None,
        offset: int,
        script_name: str,
        host_modules: frozenset[str],
    ) -> bool:
        """Whether the warm server finds nothing to report in the new code (False: ask `ty check`);
        it is first told of the slot's files it has not heard of (`_Slot.unheard`)."""
        try:
            stale = [os.path.join(slot.path, rel) for rel in sorted(slot.unheard) if rel != script_name]
            if stale:
                await server.notify_files_changed(stale)
            slot.unheard.clear()
            diagnostics = await server.diagnostics(text)
        except RuntimeError:
            if server.out_of_memory:
                raise _OutOfMemory from None
            self._count_server(slot)
            slot.server = None
            self._background(server.aclose())
            return False
        own = without_top_level_awaits([d for d in diagnostics if d['range']['start']['line'] >= offset], code, offset, syntax)
        slot.quick = _concise_lines(own, code, offset, script_name)
        return not own and not _sandbox.unresolved_imports(code, syntax, script_name, host_modules, (), self.packages)

    async def _run_ty(self, slot: _Slot, script_name: str, output_format: str = 'full') -> str:
        assert self._ty_bin is not None and self._root is not None
        typeshed = ['--typeshed', self._typeshed.root] if self._typeshed is not None else []
        args = [
            'check',
            '--project', '.',
            '--output-format', output_format,
            '--no-progress',
            '--color', 'never',
            '--python-version', _PYTHON_VERSION,
            '--python-platform', 'linux',
            '--python', os.path.join(self._root, 'env'),
            *typeshed,
            '--',
            script_name,
        ]  # fmt: skip
        try:  # not through asyncio's child watcher, which would reap it before its CPU is read (`run_to_end`)
            proc = subprocess.Popen(
                memory_bound([self._ty_bin, *args], slot.memory),
                cwd=slot.path,
                env=self._env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except OSError as exc:
            raise RuntimeError(f'could not start the ty type checker ({self._ty_bin}): {exc}') from exc
        slot.process = proc
        try:
            if slot.demoted:
                lower_priority(proc.pid)
            out, err = await run_to_end(proc, slot.add_cpu)  # the check's deadline, or cancellation: ty is killed
        finally:
            slot.process = None
        stdout = out.decode('utf-8', 'replace')
        if proc.returncode not in (0, 1) and out_of_memory(err.decode('utf-8', 'replace')):
            raise _OutOfMemory
        if proc.returncode not in (0, 1):
            detail = self._scrub(err.decode('utf-8', 'replace').strip() or stdout.strip(), slot)
            raise RuntimeError(
                f'ty type checker failed (exit code {proc.returncode})' + (f': {detail}' if detail else '')
            )
        if any(line.startswith(('error[panic]', 'fatal[panic]')) for line in stdout.splitlines()):
            detail = self._scrub(stdout.strip(), slot)
            raise RuntimeError(f'ty type checker crashed: {detail}')
        return stdout

    # ----------------------------------------------------------- postprocess

    def _stdlib_paths(self, stdout: str) -> str:
        if self._typeshed is not None:
            stdlib = self._typeshed.stdlib
            for root in sorted({stdlib, os.path.realpath(stdlib)}, key=len, reverse=True):
                stdout = stdout.replace(root + os.sep, 'stdlib/')  # shown as ty shows its vendored stubs
        return stdout

    def _concise(self, stdout: str, slot: _Slot, script_name: str, offset: int) -> str:
        """ty's concise output `stdout` without the lines of the earlier snippets (the first
        `offset` lines of the script's file), the others numbered in the new code."""
        lines = []
        for line in self._stdlib_paths(stdout).splitlines():
            match = _CONCISE_RE.match(line)
            if match is None:  # 'Found N diagnostics', 'All checks passed!'
                continue
            path, row, rest = match.groups()
            if path == script_name:
                if int(row) <= offset:
                    continue
                row = str(int(row) - offset)
            lines.append(f'{path}:{row}:{rest}\n')
        return self._scrub(''.join(lines), slot)

    async def _postprocess(
        self, stdout: str, slot: _Slot, script_name: str, code: str, syntax: Syntax | None, offset: int, host_modules: frozenset[str]
    ) -> str | None:
        diagnostics = _render.parse_output(self._stdlib_paths(stdout))
        code_lines = _render.split_lines(code)
        scope: ModuleScope | None = None
        typed_dicts: frozenset[str] | None = None
        kept: list[_render.Diagnostic] = []
        for diag in diagnostics:
            stripped = _render.strip_context(diag, script_name, offset)
            if stripped is None:
                continue
            header = stripped.header
            primary = stripped.primary
            if (
                header.startswith(_INVALID_SYNTAX_PREFIX)
                and header[len(_INVALID_SYNTAX_PREFIX) :] in AWAIT_MESSAGES
                and primary is not None
                and primary.path == script_name
            ):
                if scope is None:
                    scope = ModuleScope(syntax, code_lines)
                if scope.at_module_level(primary.line, primary.col):
                    continue
            _sandbox.annotate(stripped, host_modules, code_lines, script_name, self.packages)
            if typed_dicts is None:
                typed_dicts = _sandbox.typed_dicts([text for rel, text in slot.files.items() if rel.endswith('.pyi')])
            _sandbox.typed_dict_hint(stripped, typed_dicts)
            kept.append(stripped)
        # imports of standard library modules the sandbox does not offer (ty resolves them)
        reported = {
            (d.primary.line, d.primary.col)
            for d in kept
            if d.primary is not None and d.primary.path == script_name and d.header.startswith('error[import-not-found]')
        }
        for synthetic in _sandbox.unresolved_imports(code, syntax, script_name, host_modules, reported, self.packages):
            position = (synthetic.primary.line, synthetic.primary.col) if synthetic.primary else (0, 0)
            index = next(
                (
                    i for i, d in enumerate(kept)
                    if d.primary is not None and d.primary.path == script_name and (d.primary.line, d.primary.col) > position
                ),
                len(kept),
            )
            kept.insert(index, synthetic)
        if not kept:
            return None

        sources: dict[str, list[str] | None] = {}
        for diag in kept:
            for block in diag.blocks:
                for sn in block.snippets:
                    path = sn.path
                    if path in sources:
                        continue
                    if path == script_name:
                        sources[path] = code_lines
                    elif path in slot.files and path != script_name:
                        sources[path] = _render.split_lines(slot.files[path])
                    elif path.startswith('stdlib/') and path.endswith('.pyi'):
                        text = await self._read_typeshed(path)
                        sources[path] = None if text is None else _render.split_lines(text)
                    else:
                        sources[path] = None

        rendered = []
        for diag in kept:
            diag.blocks = [_render.widen(block, sources.get) for block in diag.blocks]
            rendered.append(_render.render_diagnostic(diag))
        return self._scrub('\n\n'.join(rendered), slot)

    async def _read_typeshed(self, path: str) -> str | None:
        if self._typeshed is None:
            return None
        return await asyncio.to_thread(self._typeshed.read, path)

    def _scrub(self, text: str, slot: _Slot) -> str:
        """Remove our temporary folders from ty's text (e.g. the module search
        paths listed for an unresolved import)."""
        root = self._root
        if root is None:
            return text
        env = os.path.join(root, 'env')
        roots = {root, os.path.realpath(root)}
        envs = {env, os.path.realpath(env)}
        slots = {slot.path, os.path.realpath(slot.path)}
        lines = []
        for line in text.split('\n'):
            if any(e in line for e in envs) and line.startswith('info:'):
                continue  # the empty site-packages of our stand-in environment
            for s in sorted(slots, key=len, reverse=True):
                line = line.replace(s + os.sep, '').replace(s, '.')
            for r in sorted(roots, key=len, reverse=True):
                line = line.replace(r, '<tmp>')
            lines.append(line)
        return '\n'.join(lines)

    # ----------------------------------------------------------------- close

    async def aclose(self) -> None:
        """Stop the checker's servers and reader and remove its folders.  It can't be used afterwards."""
        self._closed = True
        await self._reader.aclose()
        for slot in list(self._slots):
            await slot.close()
        self._slots.clear()
        self._free.clear()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        root, self._root = self._root, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if root is not None:
            await asyncio.to_thread(shutil.rmtree, root, True)

    async def __aenter__(self) -> TypeChecker:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
