"""What a script reaches only through the host: files, the environment, the clock, the session's seed.

A locked-down worker cannot open a file or read the environment, and should not read the clock
(a session replays deterministically from its journal). So `open()`, the `os` and `pathlib` file
functions, `os.getenv`/`os.environ`, `datetime.datetime.now()`, `datetime.date.today()`,
`time.time()`, `time.sleep()` and the seed of `random` are *system calls*: host calls whose names start with
`PREFIX` (a NUL, which no Python identifier contains, so no script or host function can name
one). The host routes them to the session's `OsAccess` (see `corral.host.os_access`), which checks
every path against its mounts, and answers with plain data:

    [True, value]                                          the operation's result
    [False, [exc_type, errno, strerror, filename, filename2]]  an error, raised here as
                                                           `exc_type(errno, strerror, filename)`

The worker installs its `_call_sync` with `install()`. File contents live in the worker while a
file is open: `open()` fetches them from the host, writes go back on `flush()`, `close()`, when
the file object is dropped, and at the end of the feed.
"""

from __future__ import annotations

import builtins
import datetime
import io
import os
import weakref
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import Any

from ..described import FileValue
from .native import builtin_function

__all__ = [
    'MAX_URANDOM_BYTES',
    'PREFIX',
    'SYSTEM_CALLS',
    'call',
    'flush_open_files',
    'install',
    'monotonic_ns',
    'now',
    'open',
    'sleep',
    'session_seed',
]

#: The first character of every system call's name.
PREFIX = '\x00'

#: The system calls, by name (without PREFIX), with their arguments.
SYSTEM_CALLS = {
    'os.stat': 'path',
    'os.read': 'path',
    'os.write': "path, data, how ('truncate', 'append' or 'create')",
    'os.scandir': 'path',
    'os.mkdir': 'path, parents, exist_ok',
    'os.remove': 'path',
    'os.rmdir': 'path',
    'os.rename': 'source, target, replace',
    'os.getcwd': '',
    'os.chdir': 'path',
    'os.exists': 'path',
    'os.getenv': 'name',
    'os.environ': '',
    'clock.now': '',
    'clock.monotonic': '',
    'clock.sleep': 'seconds (a float, finite and not negative)',
    'clock.async_sleep': 'seconds (a float, finite and positive): an async call, the others are sync',
    'random.seed': '',
    'os.urandom': 'size (an int, from 0 to the OsAccess\'s max_urandom_bytes)',
}

#: The largest file a script may read or write in one piece (a frame carries it whole).
MAX_FILE = 32 * 1024 * 1024

_call: Callable[[str, tuple[Any, ...], dict[str, Any]], Any] | None = None
_call_async: Callable[[str, tuple[Any, ...], dict[str, Any]], Awaitable[Any]] | None = None
_output: Callable[..., None] | None = None
#: Whether the script's sleeps wait in the host (the session's `OsAccess` overrides `sleep` or
#: `async_sleep`), set by the worker for each feed; else they wait here, on the worker's own clock.
host_sleeps = False
#: The most bytes one `os.urandom()` gives unless `OsAccess(max_urandom_bytes=...)` says otherwise (1 MiB).
MAX_URANDOM_BYTES = 1024 * 1024
#: Whether the script's `os.urandom` bytes come from the host (its `OsAccess` overrides `urandom`),
#: and the most bytes one call gives, set by the worker for each feed.
host_urandom = False
max_urandom_bytes = MAX_URANDOM_BYTES


def install(
    call_sync: Callable[[str, tuple[Any, ...], dict[str, Any]], Any],
    call_async: Callable[[str, tuple[Any, ...], dict[str, Any]], Awaitable[Any]] | None = None,
) -> None:
    """Connect system calls to the worker's channel (its blocking host call, and its async one)."""
    global _call, _call_async
    _call, _call_async = call_sync, call_async


def set_output(print_function: Callable[..., None]) -> None:
    """Where `sys.stdout.write` and `pprint` send text: the worker's print."""
    global _output
    _output = print_function


_script_name = 'main.py'


def set_script_name(name: str) -> None:
    """How the script's tracebacks name its code (`checkout(script_name=...)`), for warnings and logs."""
    global _script_name
    _script_name = name


def script_name() -> str:
    return _script_name


def write_output(text: str, file: Any = None) -> None:
    """Send `text` to the captured output; `file` is `sys.stderr`'s facade for text written there."""
    if _output is None:
        raise RuntimeError('the sandbox has no output channel')
    _output(text, end='', file=file)


def call(name: str, *args: Any) -> Any:
    """Make system call `name` (without PREFIX) and return its result, or raise its error."""
    if _call is None:
        raise PermissionError(f'{_what(name)}: the sandbox is not connected to a host')
    reply = _call(PREFIX + name, args, {})
    if type(reply) is not list or len(reply) != 2:
        raise RuntimeError(f'malformed answer from the host to {name}')
    ok, value = reply
    if ok:
        return value
    raise _error(value)


def _what(name: str) -> str:
    return {'clock.now': 'reading the clock', 'random.seed': 'seeding random'}.get(name, name)


def _error(info: Any) -> BaseException:
    try:
        exc_type, errno, message, filename, filename2 = info
    except (TypeError, ValueError):
        return RuntimeError(f'malformed error from the host: {info!r}')
    cls = getattr(builtins, str(exc_type), None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = OSError
    if errno is not None and issubclass(cls, OSError):
        if filename2 is not None:
            return cls(errno, message, filename, None, filename2)
        if filename is not None:
            return cls(errno, message, filename)
        return cls(errno, message)
    return cls(message)


# ----- paths ---------------------------------------------------------------------------------------

def fspath(path: Any) -> str:
    """A path argument as the host receives it: a str (bytes are decoded as the OS would)."""
    value = os.fspath(path)
    if isinstance(value, bytes):
        value = os.fsdecode(value)
    if '\x00' in value:
        raise ValueError('embedded null byte')
    return value


# ----- the clock and the seed ----------------------------------------------------------------------

def now() -> datetime.datetime:
    """The host's current time, an aware datetime in the zone the host calls local."""
    value = call('clock.now')
    if type(value) is not datetime.datetime or value.tzinfo is None:
        raise RuntimeError('the host answered the clock with something other than an aware datetime')
    return value


def monotonic_ns() -> int:
    """Nanoseconds of the host's monotonic clock. Read through the host, as every value that
    changes from run to run is, so a session replayed from its journal reads the same values."""
    value = call('clock.monotonic')
    if type(value) is not int:
        raise RuntimeError('the host answered the monotonic clock with something other than an int')
    return value


def sleep(seconds: float) -> None:
    """Wait `seconds` (a float, finite and not negative): the host waits, and its `OsAccess` may
    cap, skip or count the wait; a session replayed from its journal does not wait again. Only
    where `host_sleeps` is set: sleeps nobody watches wait in the worker, so that a task a feed
    leaves sleeping does not hold the feed open (a feed ends with no host call waiting)."""
    call('clock.sleep', seconds)


async def sleep_async(seconds: float) -> None:
    """Wait `seconds` (a float, finite and positive) while the script's other tasks run: the host
    waits, as for `sleep`."""
    if _call_async is None:
        raise PermissionError(f'{_what("clock.async_sleep")}: the sandbox is not connected to a host')
    reply = await _call_async(PREFIX + 'clock.async_sleep', (seconds,), {})
    if type(reply) is not list or len(reply) != 2:
        raise RuntimeError('malformed answer from the host to clock.async_sleep')
    if not reply[0]:
        raise _error(reply[1])


def urandom(size: int) -> bytes:
    """`size` bytes from the host's `OsAccess.urandom` (only where `host_urandom` is set): the
    journal records them, so a session replayed from it gets the same bytes."""
    value = call('os.urandom', size)
    if type(value) is not bytes or len(value) != size:
        raise RuntimeError('the host answered os.urandom with something other than the bytes asked')
    return value


def session_seed() -> int:
    value = call('random.seed')
    if type(value) is not int:
        raise RuntimeError('the host answered the seed with something other than an int')
    return value


# ----- files ---------------------------------------------------------------------------------------

_open_files: weakref.WeakSet[_HostFile] = weakref.WeakSet()


class _HostFile(io.BytesIO):
    """An open file of the sandbox: its bytes, fetched from the host, written back on flush/close."""

    def __init__(self, path: str, name: Any, mode: str, data: bytes, *, readable: bool, writable: bool, append: bool) -> None:
        super().__init__(data)
        self.name = name
        self.mode = mode
        self._path = path
        self._readable = readable
        self._writable = writable
        self._append = append
        self._base = len(data)  # append mode: bytes already on the host
        self._dirty = False
        if append:
            self.seek(0, io.SEEK_END)
        if writable:
            _open_files.add(self)

    def __repr__(self) -> str:
        return f'<sandbox file name={self.name!r} mode={self.mode!r}>'

    # reading
    def readable(self) -> bool:
        self._check_open()
        return self._readable

    def _check_read(self) -> None:
        if not self._readable:
            raise io.UnsupportedOperation('not readable')

    def read(self, size: int | None = -1, /) -> bytes:
        self._check_read()
        return super().read(size)

    def read1(self, size: int | None = -1, /) -> bytes:
        self._check_read()
        return super().read1(size)

    def readline(self, size: int | None = -1, /) -> bytes:
        self._check_read()
        return super().readline(size)

    def readlines(self, hint: int | None = -1, /) -> list[bytes]:
        self._check_read()
        return super().readlines(hint)

    def readinto(self, buffer: Any, /) -> int:
        self._check_read()
        return super().readinto(buffer)

    def __next__(self) -> bytes:
        self._check_read()
        return super().__next__()

    # writing
    def writable(self) -> bool:
        self._check_open()
        return self._writable

    def _check_write(self) -> None:
        if not self._writable:
            raise io.UnsupportedOperation('not writable')

    def write(self, data: Any, /) -> int:
        self._check_write()
        if self._append:
            self.seek(0, io.SEEK_END)
        written = super().write(data)
        self._dirty = True
        if self.tell() > MAX_FILE:
            raise OSError(27, f'File too large for the sandbox (more than {MAX_FILE} bytes)', self.name)
        return written

    def writelines(self, lines: Any, /) -> None:
        for line in lines:
            self.write(line)

    def truncate(self, size: int | None = None, /) -> int:
        self._check_write()
        self._dirty = True
        return super().truncate(size)

    def flush(self) -> None:
        self._check_open()
        if self._dirty:
            self._dirty = False
            if self._append:
                data = self.getvalue()
                call('os.write', self._path, data[self._base :], 'append')
                self._base = len(data)
            else:
                call('os.write', self._path, self.getvalue(), 'truncate')

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self._dirty:
                self.flush()
        finally:
            _open_files.discard(self)
            super().close()

    def fileno(self) -> int:
        raise io.UnsupportedOperation('fileno: a sandbox file has no file descriptor')

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError('I/O operation on closed file.')

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


_HostFile.__name__ = _HostFile.__qualname__ = 'SandboxFile'
_HostFile.__module__ = 'io'


def flush_open_files() -> None:
    """Write back what open files hold (the end of a feed); errors are the script's to see next time."""
    for file in list(_open_files):
        try:
            if not file.closed:
                file.flush()
        except Exception:
            pass


def _open(
    file: Any,
    mode: str = 'r',
    buffering: int = -1,
    encoding: str | None = None,
    errors: str | None = None,
    newline: str | None = None,
    closefd: bool = True,
    opener: Any = None,
) -> Any:
    """`open()`: a file under one of the host's mounts (or served by its os_access handler).

    The content is read from the host when the file is opened and written back on flush() and
    close() (and when the file object is dropped, as CPython does).
    """
    if isinstance(file, int) and not isinstance(file, bool):
        raise PermissionError('open() of a file descriptor is not available in the sandbox; open files by their path')
    if opener is not None:
        raise PermissionError('open() with an opener is not available in the sandbox; open files by their path')
    if not isinstance(mode, str):
        raise TypeError(f"open() argument 'mode' must be str, not {_argument_type(mode)}")
    if not isinstance(buffering, int):
        raise TypeError(f"'{type(buffering).__name__}' object cannot be interpreted as an integer")
    if encoding is not None and not isinstance(encoding, str):
        raise TypeError(f"open() argument 'encoding' must be str or None, not {_argument_type(encoding)}")
    if errors is not None and not isinstance(errors, str):
        raise TypeError(f"open() argument 'errors' must be str or None, not {_argument_type(errors)}")
    if newline is not None and not isinstance(newline, str):
        raise TypeError(f"open() argument 'newline' must be str or None, not {_argument_type(newline)}")
    modes = set(mode)
    if modes - set('axrwb+t') or len(mode) > len(modes):
        raise ValueError(f'invalid mode: {mode!r}')
    creating, reading, writing, appending = 'x' in modes, 'r' in modes, 'w' in modes, 'a' in modes
    updating = '+' in modes
    text, binary = 't' in modes, 'b' in modes
    if text and binary:
        raise ValueError("can't have text and binary mode at once")
    if creating + reading + writing + appending > 1:
        raise ValueError('must have exactly one of create/read/write/append mode')
    if not (creating or reading or writing or appending):
        raise ValueError('Must have exactly one of create/read/write/append mode and at most one plus')
    if binary and encoding is not None:
        raise ValueError("binary mode doesn't take an encoding argument")
    if binary and errors is not None:
        raise ValueError("binary mode doesn't take an errors argument")
    if binary and newline is not None:
        raise ValueError("binary mode doesn't take a newline argument")
    if newline not in (None, '', '\n', '\r', '\r\n'):
        raise ValueError(f'illegal newline value: {newline}')
    if not binary and encoding is not None:
        import codecs

        codecs.lookup(encoding)  # LookupError: unknown encoding, before touching the file
    path = fspath(file)
    name = file if isinstance(file, (str, bytes)) else path
    data = b''
    if reading:
        data = _read(path)
    elif writing:
        call('os.write', path, b'', 'truncate')
    elif creating:
        call('os.write', path, b'', 'create')
    else:
        call('os.write', path, b'', 'append')
        if updating:
            data = _read(path)
    raw = _HostFile(
        path,
        name,
        mode.replace('t', '') if binary else mode,
        data,
        readable=reading or updating,
        writable=not reading or updating,
        append=appending,
    )
    if binary:
        return raw
    wrapper = io.TextIOWrapper(raw, encoding=encoding or 'utf-8', errors=errors, newline=newline)
    wrapper.mode = mode  # type: ignore[misc]
    return wrapper


def describe_file(value: Any) -> FileValue | None:
    """A file `open()` returned, as the host receives it (`corral.FileValue`); None for anything else."""
    raw = value.buffer if type(value) is io.TextIOWrapper else value
    if type(raw) is not _HostFile:
        return None
    mode = value.mode if type(value.mode) is str else raw.mode  # a text file's mode is an attribute the script may set
    return FileValue(raw._path, mode, 0 if raw.closed else raw.tell())


_open.__name__ = _open.__qualname__ = 'open'
#: `open()`, dressed as CPython's built-in function (see `native.py`); `io.open` is the same object.
open = builtin_function(_open, io.open)


def _argument_type(value: Any) -> str:
    """How CPython's argument parser names a wrong argument's type (None as `None`)."""
    return 'None' if value is None else type(value).__name__


def _read(path: str) -> bytes:
    data = call('os.read', path)
    if type(data) is not bytes:
        raise RuntimeError('the host answered a read with something other than bytes')
    return data


def read_bytes(path: Any) -> bytes:
    return _read(fspath(path))


def write_bytes(path: Any, data: bytes, how: str = 'truncate') -> None:
    if len(data) > MAX_FILE:
        raise OSError(27, f'File too large for the sandbox (more than {MAX_FILE} bytes)', fspath(path))
    call('os.write', fspath(path), data, how)


# ----- directories and metadata --------------------------------------------------------------------

def stat(path: Any) -> list[Any]:
    """[kind, size, mtime, permissions] of a path; kind is 'file' or 'dir'. FileNotFoundError when missing."""
    return call('os.stat', fspath(path))


def exists(path: Any) -> bool:
    """Whether a path exists; errors other than its absence (PermissionError ...) are raised."""
    return call('os.exists', fspath(path)) is True


def scandir(path: Any) -> list[list[Any]]:
    """[[name, kind, size, mtime], ...], sorted by name."""
    return call('os.scandir', fspath(path))


def getcwd() -> str:
    return call('os.getcwd')


def chdir(path: Any) -> None:
    """Move the working folder (the session's, kept by the host) to an existing folder."""
    call('os.chdir', fspath(path))


# ----- the environment -----------------------------------------------------------------------------

class Environ(MutableMapping[str, str]):
    """`os.environ`: the host's environment, read through its os_access handler.

    Assignments and deletions stay in the session; the host's environment never changes.
    """

    def __init__(self) -> None:
        self._set: dict[str, str] = {}
        self._deleted: set[str] = set()

    def _host(self) -> dict[str, str]:
        value = call('os.environ')
        if type(value) is not dict:
            raise RuntimeError('the host answered os.environ with something other than a dict')
        return value

    def _merged(self) -> dict[str, str]:
        merged = {k: v for k, v in self._host().items() if k not in self._deleted}
        merged.update(self._set)
        return merged

    def __getitem__(self, key: str) -> str:
        if not isinstance(key, str):
            raise TypeError(f'str expected, not {type(key).__name__}')
        if key in self._set:
            return self._set[key]
        if key in self._deleted:
            raise KeyError(key)
        value = call('os.getenv', key)
        if value is None:
            raise KeyError(key)
        return value

    def __setitem__(self, key: str, value: str) -> None:
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f'str expected, not {type(value if isinstance(key, str) else key).__name__}')
        self._set[key] = value
        self._deleted.discard(key)

    def __delitem__(self, key: str) -> None:
        self[key]  # KeyError when missing
        self._set.pop(key, None)
        self._deleted.add(key)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._merged()))

    def __len__(self) -> int:
        return len(self._merged())

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        try:
            self[key]
        except KeyError:
            return False
        return True

    def copy(self) -> dict[str, str]:
        return self._merged()

    def __repr__(self) -> str:
        return f'environ({self._merged()!r})'


Environ.__module__ = 'os'
Environ.__name__ = Environ.__qualname__ = '_Environ'

environ = Environ()


def getenv(key: str, default: Any = None) -> Any:
    """`os.getenv`: the host's environment variable `key`, or `default`."""
    try:
        return environ[key]
    except KeyError:
        return default
