"""``TyServer``: a long-lived ``ty server`` (LSP over stdio) answering "does this
script have diagnostics?" in about a millisecond once warm.

The client is plain asyncio: JSON-RPC messages framed by ``Content-Length``
headers on the server's stdin/stdout.  One server watches one folder (a
``TypeChecker`` slot, with its ``ty.toml``): ``main.py`` is sent as an open
document with each check; the stub files are read by the server from disk, as
``ty check`` reads them, once the caller has announced a change with
``notify_files_changed``.  Requests are serialised per server; a server that
dies, answers garbage or takes longer than ``timeout`` is killed, and every
later call raises RuntimeError (the caller falls back to ``ty check``).  A server
started with a ``memory`` bound (RLIMIT_DATA, see ``memory_bound``) that runs out
of it dies, and says so (``out_of_memory``).

Positions are negotiated as UTF-32: a diagnostic's ``range`` counts lines from 0
and characters in code points, i.e. indexes into the Python string.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import pathlib
import resource
import signal
import subprocess
import sys
import time
import weakref
from types import EllipsisType
from collections.abc import Callable
from typing import Any, Self

from ._awaits import AWAIT_MESSAGES, ModuleScope
from ._render import split_lines
from ._syntax import Syntax, read

__all__ = [
    'TyServer', 'memory_bound', 'is_async_outside_function', 'lower_priority', 'out_of_memory', 'without_top_level_awaits',
    'process_cpu', 'run_to_end',
]

_SCRIPT = 'main.py'
_ERRORS_KEPT = 40  # lines of the server's stderr kept for error messages
_CREATED, _DELETED = 1, 3  # FileChangeType
_HINT = 4  # DiagnosticSeverity
_WARM_UP = 'import typing\nprint(len([1]), str(1), dict(a=1), list(range(2)), typing.cast(int, 1))\n'


def is_async_outside_function(diag: dict) -> bool:
    """An ``invalid-syntax`` diagnostic for ``await``/``async for``/``async with``/an
    async comprehension outside an async function (valid at module level in corral)."""
    return diag.get('code') == 'invalid-syntax' and diag.get('message') in AWAIT_MESSAGES


def without_top_level_awaits(
    diagnostics: list[dict], text: str, first_line: int = 0, syntax: Syntax | None | EllipsisType = ...
) -> list[dict]:
    """``diagnostics`` less the async-outside-a-function ones located at module
    level of ``text`` (those inside a ``def``/``lambda``/``class`` are real errors).
    ``text`` starts at line ``first_line`` (counted from 0) of the checked file,
    where all of ``diagnostics`` are. ``syntax`` is ``text``'s when already read
    (``SyntaxReader``); else ``text`` is read here, if a diagnostic needs it."""
    kept = []
    scope: ModuleScope | None = None
    for diag in diagnostics:
        if is_async_outside_function(diag):
            if scope is None:
                scope = ModuleScope(read(text) if syntax is ... else syntax, split_lines(text))
            start = diag['range']['start']
            if scope.at_module_level(start['line'] - first_line + 1, start['character'] + 1):
                continue
        kept.append(diag)
    return kept


#: What ty writes to stderr when an allocation fails (Rust's `handle_alloc_error`, then an abort),
#: or when the kernel refuses memory for a thread or a map.
_OUT_OF_MEMORY = ('memory allocation of ', 'Cannot allocate memory')


def out_of_memory(stderr: str) -> bool:
    """Whether a ty process that failed with this text on stderr ran out of memory."""
    return any(marker in stderr for marker in _OUT_OF_MEMORY)


def memory_bound(argv: list[str], memory: int | None) -> list[str]:
    """``argv`` made to run with its heap bounded to ``memory`` bytes (None: as it is): RLIMIT_DATA,
    private writable memory, which is what ty's allocations take (its address space is mostly
    unused reservations: some 800 MB for a server using 40 MB).  A shell sets it (``ulimit -d``)
    and then becomes ty, so the bound holds from ty's first instruction, and ty is still started
    without a fork of the host (a fork of a host with a large heap costs tens of milliseconds;
    the shell, one).  Never above the host's own hard limit."""
    if memory is None:
        return argv
    hard = resource.getrlimit(resource.RLIMIT_DATA)[1]
    if hard != resource.RLIM_INFINITY:
        memory = min(memory, hard)
    return ['/bin/sh', '-c', f'ulimit -d {max(memory // 1024, 1)} && exec "$0" "$@"', *argv]


def lower_priority(pid: int) -> None:
    """Give every thread of process ``pid`` the lowest CPU priority (nice 19), so that it runs only
    on what other processes leave.  Nice values are per thread on Linux, and ty checks on threads
    of its own; one that ended or is gone is left alone.  Not undone: an ordinary user cannot
    raise a priority again."""
    try:
        threads = os.listdir(f'/proc/{pid}/task')
    except OSError:
        threads = [str(pid)]
    for tid in threads:
        with contextlib.suppress(OSError, ValueError):
            os.setpriority(os.PRIO_PROCESS, int(tid), 19)


def _frame(message: dict) -> bytes:
    body = json.dumps(message, ensure_ascii=False).encode('utf-8')
    return b'Content-Length: %d\r\n\r\n%b' % (len(body), body)


def process_cpu(pid: int) -> float | None:
    """The CPU seconds (user + system, all threads) process ``pid`` has used, from fields 14 and
    15 of ``/proc/<pid>/stat`` (clock ticks; proc(5)); None when it cannot be read."""
    try:
        with open(f'/proc/{pid}/stat', 'rb') as stat:
            fields = stat.read().rpartition(b')')[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')
    except (OSError, IndexError, ValueError):
        return None


async def run_to_end(proc: subprocess.Popen[bytes], on_cpu: Callable[[float], None]) -> tuple[bytes, bytes]:
    """Read the stdout and stderr of the child ``proc`` (started with both piped) to their end,
    reap it and set its ``returncode``; ``on_cpu`` is called with the CPU seconds (user + system)
    it used, from the kernel's account of it as it is reaped (``wait4``), which no reading of
    ``/proc`` can give for a process that ends. The child must not be known to asyncio's child
    watcher, which would reap it first. Cancelled, the child is killed, and reaped all the same."""
    loop = asyncio.get_running_loop()
    reaped = loop.create_task(_reap(proc, on_cpu))
    reading = asyncio.gather(_read_to_end(proc.stdout), _read_to_end(proc.stderr))
    try:
        out, err = await reading
        await asyncio.shield(reaped)  # a cancellation here must not stop the reaping
    except BaseException:
        kill_child(proc)
        reading.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.shield(reaped)
        raise
    return out, err


async def _read_to_end(pipe: Any) -> bytes:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**31, loop=loop)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), pipe)
    try:
        return await reader.read()
    finally:
        transport.close()


async def _reap(proc: subprocess.Popen[bytes], on_cpu: Callable[[float], None]) -> None:
    loop = asyncio.get_running_loop()
    descriptor = os.pidfd_open(proc.pid)  # the child is not reaped before this does it: its pid is its own
    try:
        ended = loop.create_future()
        loop.add_reader(descriptor, lambda: ended.done() or ended.set_result(None))
        try:
            await ended
        finally:
            loop.remove_reader(descriptor)
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        os.close(descriptor)
    proc.returncode = os.waitstatus_to_exitcode(status)
    on_cpu(usage.ru_utime + usage.ru_stime)


def kill_child(proc: asyncio.subprocess.Process | subprocess.Popen[bytes]) -> None:
    """SIGKILL the child `proc` unless it has ended; asyncio's child watcher reaps it.

    Not `proc.kill()`: on Python 3.11 `Popen.send_signal` first polls the child, which reaps one
    that has just exited behind the watcher's back, and the watcher then logs `Unknown child
    process pid ..., will report returncode 255` on the application's stderr (and loses the exit
    code). The pid cannot be reused before the watcher has reaped it."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)


class TyServer:
    """A long-lived `ty server` over one folder; answers whether a script has diagnostics."""

    #: Seconds one request (or the start) may take before the server is killed.
    timeout: float = 30.0

    def __init__(self, folder: str, proc: asyncio.subprocess.Process, settings: dict) -> None:
        self.folder = folder
        self._proc = proc
        self._settings = settings
        self._next_id = 0
        self._pending: dict[int, asyncio.Future] = {}
        self._lock = asyncio.Lock()
        self._stderr: collections.deque[str] = collections.deque(maxlen=_ERRORS_KEPT)
        self._error: str | None = None  # why the server is unusable
        self._version = 0
        self._last_stamp = 0
        self._script = os.path.join(folder, _SCRIPT)
        self._uri = pathlib.Path(self._script).as_uri()
        self._text: str | None = None  # main.py's text as the server has it
        #: 'utf-32' (characters are code points) unless the server refused it.
        self.position_encoding = 'utf-16'
        self._tasks = [
            asyncio.create_task(self._read_loop()),
            asyncio.create_task(self._stderr_loop()),
        ]
        self._finalizer = weakref.finalize(self, kill_child, proc)
        #: The server's CPU seconds up to the last check that counted them (`TypeChecker.check`'s `on_cpu`).
        self.counted_cpu = 0.0

    # ------------------------------------------------------------------ start

    @classmethod
    async def start(
        cls,
        folder: str,
        *,
        ty_bin: str,
        env: dict[str, str],
        python: str | None = None,
        python_version: str = f'{sys.version_info[0]}.{sys.version_info[1]}',
        python_platform: str = 'linux',
        typeshed: str | None = None,
        memory: int | None = None,
    ) -> TyServer:
        """Start ``ty server`` for ``folder`` (holding ``ty.toml``) and initialise it.

        The options match ``ty check``'s: ``python`` is the Python environment to
        resolve imports in (``--python``; by default the ``env`` folder beside
        ``folder``, as laid out by ``TypeChecker``, when there is one),
        ``typeshed`` a typeshed folder to use instead of ty's own (``--typeshed``).
        They are given to the server as inline configuration, which overrides
        any ``ty.toml`` setting.  ``memory`` bounds the server's heap (``memory_bound``)."""
        folder = os.path.abspath(folder)
        if python is None:
            sibling = os.path.join(os.path.dirname(folder), 'env')
            python = sibling if os.path.isfile(os.path.join(sibling, 'pyvenv.cfg')) else None
        environment = {'python-version': python_version, 'python-platform': python_platform}
        if python is not None:
            environment['python'] = python
        if typeshed is not None:
            environment['typeshed'] = typeshed
        settings = {'configuration': {'environment': environment}}
        try:
            proc = await asyncio.create_subprocess_exec(
                *memory_bound([ty_bin, 'server'], memory), cwd=folder, env=env,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
        except OSError as exc:
            raise RuntimeError(f'could not start the ty server ({ty_bin}): {exc}') from exc
        server = cls(folder, proc, settings)
        try:
            root = pathlib.Path(folder).as_uri()
            result = await server._request('initialize', {
                'processId': os.getpid(),
                'rootUri': root,
                'workspaceFolders': [{'uri': root, 'name': os.path.basename(folder)}],
                'capabilities': {
                    'general': {'positionEncodings': ['utf-32', 'utf-16']},
                    'textDocument': {'diagnostic': {'dynamicRegistration': False}},
                    'workspace': {'configuration': True, 'didChangeWatchedFiles': {'dynamicRegistration': True}},
                },
                'initializationOptions': {'logLevel': 'error', **settings},
            })  # fmt: skip
            server.position_encoding = result.get('capabilities', {}).get('positionEncoding', 'utf-16')
            await server._notify('initialized', {})
        except BaseException:
            await server.aclose()
            raise
        return server

    # ------------------------------------------------------------------- API

    async def diagnostics(self, text: str) -> list[dict]:
        """LSP Diagnostic objects for ``main.py`` holding ``text``: those ``ty check``
        reports (errors, warnings, infos), top-level ``await`` ones included (see
        ``without_top_level_awaits``).  The editor-only hints (unused names,
        unreachable code: severity 4, no code) are left out."""
        async with self._lock:
            self._check()
            report = await self._request('textDocument/diagnostic', {'textDocument': {'uri': self._uri}}, before=self._script_change(text))
            if not isinstance(report, dict) or report.get('kind') != 'full':
                raise RuntimeError(f'ty server gave an unexpected diagnostic report: {report!r}'[:500])
            return [d for d in report.get('items', []) if d.get('severity') != _HINT]

    async def warm_up(self) -> None:
        """Check a small script once, so that ty has read and analysed builtins
        and the stubs: the first real check then takes ~1-5 ms instead of ~30 ms.
        Best run in the background right after ``start``, once the stubs are written."""
        await self.diagnostics(_WARM_UP)

    async def notify_files_changed(self, paths: list[str]) -> None:
        """Tell the server that these files (absolute, or relative to the folder)
        were written, created or removed on disk.

        Sends ``workspace/didChangeWatchedFiles`` for them and for their folders
        below ``self.folder`` (a new package folder must be announced for its
        modules to resolve).  ty tells versions of a file or folder apart by
        modification time only, so each one still on disk first gets a fresh,
        strictly increasing timestamp: a rewrite within the file system's
        timestamp granularity is seen too."""
        events: dict[str, int] = {}
        for path in paths:
            full = os.path.normpath(os.path.join(self.folder, path))
            if full == self._script:
                continue  # main.py's text comes with each diagnostics() call
            events[full] = _CREATED if os.path.lexists(full) else _DELETED
            parent = os.path.dirname(full)
            while parent != self.folder and parent.startswith(self.folder + os.sep):
                events.setdefault(parent, _CREATED if os.path.isdir(parent) else _DELETED)
                parent = os.path.dirname(parent)
        if not events:
            return
        async with self._lock:
            self._check()
            for full in [*events, self.folder]:
                if full == self.folder or full.startswith(self.folder + os.sep):
                    self._stamp(full)
            changes = [{'uri': pathlib.Path(full).as_uri(), 'type': kind} for full, kind in events.items()]
            await self._notify('workspace/didChangeWatchedFiles', {'changes': changes})

    def _stamp(self, path: str) -> None:
        """Give ``path`` a modification time that no earlier version of it had."""
        try:
            current = os.stat(path, follow_symlinks=False).st_mtime_ns
        except OSError:
            return
        stamp = max(time.time_ns(), self._last_stamp + 1, current + 1)
        with contextlib.suppress(OSError):
            os.utime(path, ns=(stamp, stamp), follow_symlinks=False)
            self._last_stamp = stamp

    def lower_priority(self) -> None:
        """Let the server run only on CPU that other processes leave (``lower_priority``)."""
        if self._proc.returncode is None:
            lower_priority(self._proc.pid)

    def abort(self) -> None:
        """Kill the server now, mid-request or not (``aclose`` still reaps it)."""
        self._broken('the ty server was stopped')
        kill_child(self._proc)

    def cpu_seconds(self) -> float | None:
        """The CPU seconds (user + system) the server has used since it started; None once it ended."""
        return process_cpu(self._proc.pid) if self._proc.returncode is None else None

    @property
    def out_of_memory(self) -> bool:
        """Whether the server died because it ran out of memory (its ``memory`` bound)."""
        return self._proc.returncode is not None and out_of_memory('\n'.join(self._stderr))

    async def aclose(self) -> None:
        """Stop the server (politely if it answers at once, else kill it) and reap it."""
        proc = self._proc
        try:
            if self._error is None:
                self._error = 'the ty server is closed'
                if proc.returncode is None:
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(self._raw_request('shutdown', None), 1.0)
                        await self._send({'jsonrpc': '2.0', 'method': 'exit'})
                        await asyncio.wait_for(proc.wait(), 1.0)
        finally:
            if proc.stdin is not None:
                proc.stdin.close()
            kill_child(proc)
            await proc.wait()
            self._finalizer.detach()
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            self._fail_pending()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def alive(self) -> bool:
        return self._error is None and self._proc.returncode is None

    # -------------------------------------------------------------- plumbing

    def _script_change(self, text: str) -> bytes:
        """The message that gives the server ``text`` as main.py's content (empty if it has it)."""
        if self._text == text:
            return b''
        self._version += 1
        if self._text is None:
            method = 'textDocument/didOpen'
            params: dict = {'textDocument': {'uri': self._uri, 'languageId': 'python', 'version': self._version, 'text': text}}
        else:
            method = 'textDocument/didChange'
            params = {'textDocument': {'uri': self._uri, 'version': self._version}, 'contentChanges': [{'text': text}]}
        data = _frame({'jsonrpc': '2.0', 'method': method, 'params': params})  # may raise UnicodeEncodeError
        # Recorded before writing: once written, the message reaches the server
        # even if the request is cancelled while waiting for the pipe.
        self._text = text
        return data

    def _check(self) -> None:
        if self._error is not None:
            raise RuntimeError(self._error)

    async def _send(self, message: dict) -> None:
        await self._write(_frame(message))

    async def _write(self, data: bytes) -> None:
        stdin = self._proc.stdin
        assert stdin is not None
        try:
            stdin.write(data)
            await stdin.drain()
        except (ConnectionError, RuntimeError) as exc:
            # Most likely dead: the reader then gives the exit code and stderr.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._tasks[0]), 1.0)
            self._broken(f'the ty server stopped reading its input ({exc})')
            kill_child(self._proc)
            raise RuntimeError(self._error) from None

    async def _notify(self, method: str, params: Any) -> None:
        self._check()
        await self._send({'jsonrpc': '2.0', 'method': method, 'params': params})

    async def _request(self, method: str, params: Any, *, before: bytes = b'') -> Any:
        """Send request ``method`` (preceded, in the same write, by the framed messages
        ``before``) and return its result."""
        self._check()
        try:
            async with asyncio.timeout(self.timeout):  # no task of its own, unlike wait_for
                return await self._raw_request(method, params, before)
        except TimeoutError:
            self._broken(f'the ty server did not answer {method} within {self.timeout:g}s')
            kill_child(self._proc)
            raise RuntimeError(self._error) from None

    async def _raw_request(self, method: str, params: Any, before: bytes = b'') -> Any:
        self._next_id += 1
        id_ = self._next_id
        future = asyncio.get_running_loop().create_future()
        self._pending[id_] = future
        try:
            message = {'jsonrpc': '2.0', 'id': id_, 'method': method}
            if params is not None:
                message['params'] = params
            await self._write(before + _frame(message))
            response = await future
        finally:
            self._pending.pop(id_, None)
        if 'error' in response:
            error = response['error'] or {}
            raise RuntimeError(f'ty server failed on {method}: {error.get("message", error)}')
        return response.get('result')

    def _broken(self, reason: str) -> None:
        if self._error is None:
            tail = '\n'.join(self._stderr)
            self._error = reason + (f'\n{tail}' if tail else '')
        self._fail_pending()

    def _fail_pending(self) -> None:
        for future in self._pending.values():
            if not future.done():
                future.set_exception(RuntimeError(self._error or 'the ty server is closed'))
                future.exception()  # a caller that gave up waiting must not leave it unretrieved
        self._pending.clear()

    async def _read_message(self) -> dict | None:
        stdout = self._proc.stdout
        assert stdout is not None
        length = None
        while True:
            line = await stdout.readline()
            if not line:
                return None
            if line in (b'\r\n', b'\n'):
                if length is None:
                    continue
                break
            name, _, value = line.decode('ascii', 'replace').partition(':')
            if name.strip().lower() == 'content-length':
                length = int(value.strip())
        return json.loads(await stdout.readexactly(length))

    async def _read_loop(self) -> None:
        try:
            while True:
                message = await self._read_message()
                if message is None:
                    break
                if 'method' in message:
                    if 'id' in message:
                        await self._answer(message)
                    continue  # notifications: logs, progress
                future = self._pending.get(message.get('id'))  # type: ignore[arg-type]
                if future is not None and not future.done():
                    future.set_result(message)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - anything unexpected: the server is unusable
            self._broken(f'bad message from the ty server: {exc!r}')
            kill_child(self._proc)
            return
        returncode = await self._proc.wait()
        with contextlib.suppress(Exception):  # the stderr tail explains a crash
            await asyncio.wait_for(asyncio.shield(self._tasks[1]), 1.0)
        self._broken(f'the ty server exited (code {returncode})')

    async def _answer(self, message: dict) -> None:
        """Reply to a request from the server."""
        method = message['method']
        if method == 'workspace/configuration':
            items = (message.get('params') or {}).get('items', [])
            result: Any = [self._settings for _ in items]
        else:  # client/registerCapability, window/workDoneProgress/create, */refresh
            result = None
        with contextlib.suppress(RuntimeError):
            await self._send({'jsonrpc': '2.0', 'id': message['id'], 'result': result})

    async def _stderr_loop(self) -> None:
        stderr = self._proc.stderr
        assert stderr is not None
        while line := await stderr.readline():
            self._stderr.append(line.decode('utf-8', 'replace').rstrip())
