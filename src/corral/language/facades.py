"""Facades that are more than a filtered module: the ones that reach the host, or hold state.

- `os`, `os.path`, `pathlib`, `glob`: path arithmetic as on Linux, file operations through the
  host (see `hostio`); the sandbox has no symbolic links, file descriptors or processes;
- `time`: `time()`, `monotonic()` and `perf_counter()` read the clocks through the host (a replay reads them from the journal), and `sleep` waits there;
- `datetime`'s clock (`now`, `today`, `utcnow`): `clock_method`, used by the guards (the classes
  are CPython's own, so the methods are swapped where a script reads them);
- `random` and `uuid.uuid4`: seeded once per session by the host;
- `sys`: versions, limits, `stdout`/`stderr` writing to the captured output, `exit`;
- `io`, `pprint`: `open` is the sandbox's, printing goes to the captured output;
- `asyncio.run`: awaited on the feed's loop where the script's top level calls it (see
  `top_level_run`), refused elsewhere as CPython refuses it in a running loop;
- `zoneinfo`: the zones were loaded before the worker was locked down (`preload.py`).

Every builder returns `(module name, {name: value})`; `modules.py` makes the facade module.
"""

from __future__ import annotations

import asyncio as _asyncio
import datetime
import fnmatch as _fnmatch
import glob as _glob_module
import io
import operator
import os
import pathlib
import posixpath
import pprint as _pprint
import random as _random
import stat as _stat
import sys
import time as _time
import types
import uuid as _uuid
from collections.abc import Callable, Iterator
from typing import Any

from . import hostio
from .native import builtin_function, path_error

__all__ = ['BUILDERS', 'TextCalendar', 'clock_method', 'prcal', 'prmonth', 'reveal_type', 'run', 'session_entropy', 'top_level_run']


def _named(module: str, *functions: Any) -> None:
    for function in functions:
        function.__module__ = module


# ----- os and os.path ------------------------------------------------------------------------------

_S_FILE = _stat.S_IFREG | 0o644
_S_DIR = _stat.S_IFDIR | 0o755


def _stat_result(info: list[Any]) -> os.stat_result:
    kind, size, mtime, *permissions = info  # a host that answers without permissions: the defaults
    mode = (_S_DIR if kind == 'dir' else _S_FILE) if not permissions else (_stat.S_IFDIR if kind == 'dir' else _stat.S_IFREG) | permissions[0] & 0o7777
    return os.stat_result((mode, 0, 0, 1, 0, 0, size, mtime, mtime, mtime))


def _path(value: Any, function: str, argument: str = 'path', *, fd: bool = False, none: bool = False) -> str:
    """A path argument of `os.<function>`, or CPython's TypeError for its type (`fd`: CPython's
    function also takes a file descriptor, which the sandbox has none of; `none`: None is '.')."""
    if value is None and none:
        return '.'
    if isinstance(value, (str, bytes)) or hasattr(type(value), '__fspath__'):
        return hostio.fspath(value)
    if fd and isinstance(value, int):
        raise PermissionError(f'{function}() of a file descriptor is not available in the sandbox; use a path')
    raise path_error(value, function, argument, fd=fd, none=none)


def stat(path: Any, *, dir_fd: Any = None, follow_symlinks: bool = True) -> os.stat_result:
    """Status of a file or folder (`st_mode`, `st_size`, `st_mtime` ...)."""
    if dir_fd is not None:
        raise PermissionError('stat() with dir_fd is not available in the sandbox')
    return _stat_result(hostio.stat(_path(path, 'stat', fd=True)))


def lstat(path: Any, *, dir_fd: Any = None) -> os.stat_result:
    """As `stat()`: the sandbox has no symbolic links."""
    return stat(_path(path, 'lstat'), dir_fd=dir_fd)


def getcwd() -> str:
    """The sandbox's working folder (the first mount's, else `/`, until `chdir` moves it)."""
    return hostio.getcwd()


def chdir(path: Any) -> None:
    """Move the working folder, where relative paths start, to an existing folder."""
    hostio.chdir(_path(path, 'chdir', fd=True))


def listdir(path: Any = None) -> list[str]:
    """Names of the entries of a folder (None: the working folder), sorted."""
    return [entry[0] for entry in hostio.scandir(_path(path, 'listdir', fd=True, none=True))]


class DirEntry:
    """An entry `os.scandir()` yields."""

    __slots__ = ('_info', 'name', 'path')

    def __init__(self, folder: str, info: list[Any]) -> None:
        self.name = info[0]
        self.path = posixpath.join(folder, info[0])
        self._info = info

    def is_dir(self, *, follow_symlinks: bool = True) -> bool:
        return self._info[1] == 'dir'

    def is_file(self, *, follow_symlinks: bool = True) -> bool:
        return self._info[1] == 'file'

    def is_symlink(self) -> bool:
        return False

    def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
        if len(self._info) < 4:  # the host listed the kind alone: asked once, as CPython caches it
            self._info = [self._info[0], *hostio.stat(self.path)]
        return _stat_result(self._info[1:])

    def inode(self) -> int:
        return 0

    def __fspath__(self) -> str:
        return self.path

    def __repr__(self) -> str:
        return f'<DirEntry {self.name!r}>'


class _ScandirIterator:
    __slots__ = ('_entries',)

    def __init__(self, entries: list[DirEntry]) -> None:
        self._entries = iter(entries)

    def __iter__(self) -> _ScandirIterator:
        return self

    def __next__(self) -> DirEntry:
        return next(self._entries)

    def __enter__(self) -> _ScandirIterator:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._entries = iter(())


_ScandirIterator.__name__ = _ScandirIterator.__qualname__ = 'ScandirIterator'


def scandir(path: Any = None) -> _ScandirIterator:
    """The entries of a folder (`DirEntry` objects with `name`, `path`, `is_dir()` ...), sorted."""
    folder = _path(path, 'scandir', fd=True, none=True)
    return _ScandirIterator([DirEntry(folder, info) for info in hostio.scandir(folder)])


def walk(top: Any, topdown: bool = True, onerror: Callable[[OSError], Any] | None = None, followlinks: bool = False) -> Iterator[tuple[str, list[str], list[str]]]:
    """`(folder, subfolders, files)` for a folder and every folder under it."""
    top = hostio.fspath(top)
    try:
        entries = hostio.scandir(top)
    except OSError as error:
        if onerror is not None:
            onerror(error)
        return
    dirs = [info[0] for info in entries if info[1] == 'dir']
    files = [info[0] for info in entries if info[1] != 'dir']
    if topdown:
        yield top, dirs, files
        for name in dirs:
            yield from walk(posixpath.join(top, name), topdown, onerror, followlinks)
    else:
        for name in dirs:
            yield from walk(posixpath.join(top, name), topdown, onerror, followlinks)
        yield top, dirs, files


def mkdir(path: Any, mode: int = 0o777, *, dir_fd: Any = None) -> None:
    """Make a folder (its parent must exist)."""
    folder = _path(path, 'mkdir')
    operator.index(mode)  # CPython's TypeError for a mode that is not an integer
    hostio.call('os.mkdir', folder, False, False)


def makedirs(name: Any, mode: int = 0o777, exist_ok: bool = False) -> None:
    """Make a folder and the missing folders above it."""
    hostio.call('os.mkdir', hostio.fspath(name), True, bool(exist_ok))


def remove(path: Any, *, dir_fd: Any = None) -> None:
    """Delete a file."""
    hostio.call('os.remove', _path(path, 'remove'))


def unlink(path: Any, *, dir_fd: Any = None) -> None:
    """Delete a file."""
    hostio.call('os.remove', _path(path, 'unlink'))


def rmdir(path: Any, *, dir_fd: Any = None) -> None:
    """Delete an empty folder."""
    hostio.call('os.rmdir', _path(path, 'rmdir'))


def removedirs(name: Any) -> None:
    """Delete an empty folder, then its parents while they are empty."""
    rmdir(name)
    head, tail = posixpath.split(hostio.fspath(name))
    if not tail:
        head, tail = posixpath.split(head)
    while head and tail:
        try:
            rmdir(head)
        except OSError:
            break
        head, tail = posixpath.split(head)


def rename(src: Any, dst: Any, *, src_dir_fd: Any = None, dst_dir_fd: Any = None) -> None:
    """Rename a file or folder."""
    hostio.call('os.rename', _path(src, 'rename', 'src'), _path(dst, 'rename', 'dst'), True)


def replace(src: Any, dst: Any, *, src_dir_fd: Any = None, dst_dir_fd: Any = None) -> None:
    """Rename a file or folder, replacing the target."""
    hostio.call('os.rename', _path(src, 'replace', 'src'), _path(dst, 'replace', 'dst'), True)


_named('os', stat, lstat, getcwd, chdir, listdir, scandir, walk, mkdir, makedirs, remove, unlink, rmdir, removedirs, rename, replace, DirEntry)
DirEntry.__module__ = 'os'
_ScandirIterator.__module__ = 'os'


# os.path

def exists(path: Any) -> bool:
    """Whether a file or folder exists (False for any error, as CPython's)."""
    try:
        return hostio.exists(_path(path, 'stat', fd=True))
    except (OSError, ValueError):
        return False


def isfile(path: Any) -> bool:
    """Whether a file exists."""
    try:
        return hostio.stat(_path(path, 'stat', fd=True))[0] == 'file'
    except (OSError, ValueError):
        return False


def isdir(path: Any) -> bool:
    """Whether a folder exists."""
    try:
        return hostio.stat(_path(path, 'stat', fd=True))[0] == 'dir'
    except (OSError, ValueError):
        return False


def islink(path: Any) -> bool:
    """Always False: the sandbox has no symbolic links."""
    return False


def getsize(filename: Any) -> int:
    """The size of a file, in bytes."""
    return hostio.stat(_path(filename, 'stat', fd=True))[1]


def getmtime(filename: Any) -> float:
    """The time a file was last modified (seconds since the epoch)."""
    return hostio.stat(_path(filename, 'stat', fd=True))[2]


def getatime(filename: Any) -> float:
    """As `getmtime()`."""
    return hostio.stat(_path(filename, 'stat', fd=True))[2]


def getctime(filename: Any) -> float:
    """As `getmtime()`."""
    return hostio.stat(_path(filename, 'stat', fd=True))[2]


def abspath(path: Any) -> Any:
    """The absolute, normalized path (relative paths start at the working folder)."""
    path = os.fspath(path)
    if isinstance(path, bytes):
        return os.fsencode(abspath(os.fsdecode(path)))
    if not posixpath.isabs(path):
        path = posixpath.join(getcwd(), path)
    return posixpath.normpath(path)


def realpath(filename: Any, *, strict: bool = False) -> Any:
    """As `abspath()`: the sandbox has no symbolic links."""
    path = abspath(filename)
    if strict:
        hostio.stat(path)
    return path


def relpath(path: Any, start: Any = None) -> str:
    """`path` relative to `start` (default: the working folder)."""
    if not path:
        raise ValueError('no path specified')
    return posixpath.relpath(abspath(path), abspath(start if start is not None else posixpath.curdir))


def samefile(f1: Any, f2: Any) -> bool:
    """Whether two paths name the same existing file or folder."""
    hostio.stat(f1)
    hostio.stat(f2)
    return abspath(f1) == abspath(f2)


def lexists(path: Any) -> bool:
    """As `exists()`."""
    return exists(path)


_named('os.path', exists, isfile, isdir, islink, getsize, getmtime, getatime, getctime, abspath, realpath, relpath, samefile, lexists)

_OS_PATH_PURE = (
    'normcase', 'isabs', 'join', 'splitdrive', 'split', 'splitext', 'basename', 'dirname', 'commonprefix',
    'commonpath', 'normpath', 'curdir', 'pardir', 'sep', 'pathsep', 'defpath', 'altsep', 'extsep', 'devnull',
    'supports_unicode_filenames',
)


def _os_path() -> dict[str, Any]:
    names = {name: getattr(posixpath, name) for name in _OS_PATH_PURE}
    names.update(
        exists=exists, lexists=lexists, isfile=isfile, isdir=isdir, islink=islink, getsize=getsize,
        getmtime=getmtime, getatime=getatime, getctime=getctime, abspath=abspath, realpath=realpath,
        relpath=relpath, samefile=samefile,
    )
    return names


def _os() -> dict[str, Any]:
    return {
        'sep': os.sep, 'altsep': os.altsep, 'extsep': os.extsep, 'pathsep': os.pathsep, 'linesep': os.linesep,
        'curdir': os.curdir, 'pardir': os.pardir, 'defpath': os.defpath, 'devnull': os.devnull, 'name': os.name,
        'SEEK_SET': os.SEEK_SET, 'SEEK_CUR': os.SEEK_CUR, 'SEEK_END': os.SEEK_END,
        'F_OK': os.F_OK, 'R_OK': os.R_OK, 'W_OK': os.W_OK, 'X_OK': os.X_OK,
        'fspath': os.fspath, 'fsencode': os.fsencode, 'fsdecode': os.fsdecode, 'PathLike': os.PathLike,
        'error': OSError, 'stat_result': os.stat_result, 'DirEntry': DirEntry, 'strerror': os.strerror,
        # the functions CPython writes in C are dressed as its built-in functions (see native.py)
        **{function.__name__: builtin_function(function, getattr(os, function.__name__)) for function in (
            getcwd, chdir, listdir, scandir, stat, lstat, mkdir, remove, unlink, rmdir, rename, replace, urandom)},
        'walk': walk, 'makedirs': makedirs, 'removedirs': removedirs,
        'getenv': hostio.getenv, 'environ': hostio.environ,
    }


_named('os', hostio.getenv)


# ----- pathlib ---------------------------------------------------------------------------------------

def _has_magic(part: str) -> bool:
    return any(c in part for c in '*?[')


def _select(folder: str, shown: str, parts: list[str], *, recursive: bool, hidden: bool, pathlib_rules: bool, seen: set[str]) -> Iterator[str]:
    """Paths under `folder` (shown as `shown`) matching pattern `parts`, depth first, sorted."""
    if not parts:
        if shown not in seen:
            seen.add(shown)
            yield shown
        return
    part, rest = parts[0], parts[1:]
    join = posixpath.join
    if part == '**' and recursive:
        if not rest and pathlib_rules:
            # pathlib: a pattern ending with '**' matches folders only
            yield from _select(folder, shown, [], recursive=recursive, hidden=hidden, pathlib_rules=pathlib_rules, seen=seen)
        else:
            yield from _select(folder, shown, rest, recursive=recursive, hidden=hidden, pathlib_rules=pathlib_rules, seen=seen)
        try:
            entries = hostio.scandir(folder)
        except (OSError, ValueError):
            return
        for name, kind, *_ in entries:
            if not hidden and name.startswith('.'):
                continue
            if kind == 'dir':
                yield from _select(join(folder, name), join(shown, name), parts, recursive=recursive, hidden=hidden, pathlib_rules=pathlib_rules, seen=seen)
            elif not rest and not pathlib_rules:
                path = join(shown, name)
                if path not in seen:
                    seen.add(path)
                    yield path
        return
    if _has_magic(part) or (part == '**'):
        try:
            entries = hostio.scandir(folder)
        except (OSError, ValueError):
            return
        for name, kind, *_ in entries:
            if not hidden and name.startswith('.') and not part.startswith('.'):
                continue
            if not _fnmatch.fnmatchcase(name, part):
                continue
            if rest and kind != 'dir':
                continue
            yield from _select(join(folder, name), join(shown, name), rest, recursive=recursive, hidden=hidden, pathlib_rules=pathlib_rules, seen=seen)
        return
    target = join(folder, part)
    if rest:
        if isdir(target):
            yield from _select(target, join(shown, part), rest, recursive=recursive, hidden=hidden, pathlib_rules=pathlib_rules, seen=seen)
    elif part == '' or exists(target):
        yield from _select(target, join(shown, part) if part else shown, rest, recursive=recursive, hidden=hidden, pathlib_rules=pathlib_rules, seen=seen)


class Path(pathlib.PurePosixPath):
    """A path of the sandbox: `pathlib.Path`, reading and writing through the host."""

    __slots__ = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is Path:
            cls = PosixPath
        return pathlib.PurePath.__new__(cls, *args)  # 3.12 and later take the parts in `__init__`

    @classmethod
    def cwd(cls) -> Any:
        """The working folder."""
        return cls(getcwd())

    def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
        return stat(self)

    def lstat(self) -> os.stat_result:
        return stat(self)

    def exists(self) -> bool:
        try:
            return hostio.exists(self)
        except ValueError:  # a NUL in the path, as CPython's pathlib answers it
            return False

    def is_file(self) -> bool:
        return isfile(self)

    def is_dir(self) -> bool:
        return isdir(self)

    def is_symlink(self) -> bool:
        return False

    def iterdir(self) -> Iterator[Any]:
        for name in listdir(self):
            yield self / name

    def glob(self, pattern: str) -> Iterator[Any]:
        """Paths under this folder matching `pattern` ('*.csv', '**/*.json'), sorted."""
        parts = self._pattern_parts(pattern)
        for path in _select(str(self), '', parts, recursive=True, hidden=True, pathlib_rules=True, seen=set()):
            yield self / path if path else self

    def rglob(self, pattern: str) -> Iterator[Any]:
        """`glob('**/' + pattern)`."""
        parts = self._pattern_parts(pattern)
        for path in _select(str(self), '', ['**', *parts], recursive=True, hidden=True, pathlib_rules=True, seen=set()):
            yield self / path if path else self

    def _pattern_parts(self, pattern: str) -> list[str]:
        if not pattern:
            raise ValueError(f'Unacceptable pattern: {pattern!r}')
        pure = pathlib.PurePosixPath(pattern)
        if pure.is_absolute():
            raise NotImplementedError('Non-relative patterns are unsupported')
        return list(pure.parts)

    def open(self, mode: str = 'r', buffering: int = -1, encoding: str | None = None, errors: str | None = None, newline: str | None = None) -> Any:
        return hostio.open(self, mode, buffering, encoding, errors, newline)

    def read_text(self, encoding: str | None = None, errors: str | None = None) -> str:
        with self.open(encoding=encoding, errors=errors) as f:
            return f.read()

    def read_bytes(self) -> bytes:
        return hostio.read_bytes(self)

    def write_text(self, data: str, encoding: str | None = None, errors: str | None = None, newline: str | None = None) -> int:
        if not isinstance(data, str):
            raise TypeError(f'data must be str, not {type(data).__name__}')
        with self.open(mode='w', encoding=encoding, errors=errors, newline=newline) as f:
            return f.write(data)

    def write_bytes(self, data: Any) -> int:
        view = bytes(memoryview(data))
        hostio.write_bytes(self, view)
        return len(view)

    def touch(self, mode: int = 0o666, exist_ok: bool = True) -> None:
        if exists(self):
            if not exist_ok:
                raise FileExistsError(17, 'File exists', str(self))
            return
        hostio.write_bytes(self, b'', 'append')

    def mkdir(self, mode: int = 0o777, parents: bool = False, exist_ok: bool = False) -> None:
        hostio.call('os.mkdir', str(self), bool(parents), bool(exist_ok))

    def unlink(self, missing_ok: bool = False) -> None:
        try:
            remove(self)
        except FileNotFoundError:
            if not missing_ok:
                raise

    def rmdir(self) -> None:
        rmdir(self)

    def rename(self, target: Any) -> Any:
        rename(self, target)
        return type(self)(target)

    def replace(self, target: Any) -> Any:
        replace(self, target)
        return type(self)(target)

    def absolute(self) -> Any:
        if self.is_absolute():
            return self
        return type(self)(getcwd(), self)

    def resolve(self, strict: bool = False) -> Any:
        return type(self)(realpath(self, strict=strict))

    def samefile(self, other_path: Any) -> bool:
        return samefile(self, other_path)


class PosixPath(Path):
    """The class of `Path(...)` objects, as on Linux."""

    __slots__ = ()


Path.__module__ = PosixPath.__module__ = 'pathlib'


def _pathlib() -> dict[str, Any]:
    return {
        'PurePath': pathlib.PurePath,
        'PurePosixPath': pathlib.PurePosixPath,
        'PureWindowsPath': pathlib.PureWindowsPath,
        'Path': Path,
        'PosixPath': PosixPath,
    }


# ----- glob and fnmatch ------------------------------------------------------------------------------

def glob(pathname: Any, *, root_dir: Any = None, dir_fd: Any = None, recursive: bool = False, include_hidden: bool = False) -> list[Any]:
    """Paths matching a pattern ('data/*.csv', '**/*.json' with recursive=True), sorted."""
    return list(iglob(pathname, root_dir=root_dir, dir_fd=dir_fd, recursive=recursive, include_hidden=include_hidden))


def iglob(pathname: Any, *, root_dir: Any = None, dir_fd: Any = None, recursive: bool = False, include_hidden: bool = False) -> Iterator[Any]:
    """As `glob()`, one path at a time."""
    if dir_fd is not None:
        raise PermissionError('glob() with dir_fd is not available in the sandbox')
    pattern = os.fspath(pathname)
    as_bytes = isinstance(pattern, bytes)
    if as_bytes:
        pattern = os.fsdecode(pattern)
    if not pattern:
        return
    absolute = pattern.startswith('/')
    base = '/' if absolute else (hostio.fspath(root_dir) if root_dir is not None else '.')
    parts = [part for part in pattern.split('/') if part] if absolute else pattern.split('/')
    if not absolute and parts and parts[-1] == '':
        parts = parts[:-1]
        trailing = True
    else:
        trailing = pattern.endswith('/') and not absolute
    for path in _select(base, '/' if absolute else '', parts, recursive=recursive, hidden=include_hidden, pathlib_rules=False, seen=set()):
        if not path or (trailing and not isdir(posixpath.join(base, path))):
            continue  # CPython's glob never yields the empty match of a leading '**'
        result = path + '/' if trailing else path
        yield os.fsencode(result) if as_bytes else result


_named('glob', glob, iglob)


def _glob() -> dict[str, Any]:
    return {'glob': glob, 'iglob': iglob, 'escape': _glob_module.escape}


# ----- time and the datetime clock ---------------------------------------------------------------

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def time() -> float:
    """Seconds since the epoch, from the host's clock."""
    return hostio.now().timestamp()


def time_ns() -> int:
    """Nanoseconds since the epoch, from the host's clock."""
    return (hostio.now() - _EPOCH) // datetime.timedelta(microseconds=1) * 1000


def gmtime(secs: float | None = None) -> _time.struct_time:
    """UTC time as a `struct_time`; without `secs`, the host's current time."""
    return _time.gmtime(time() if secs is None else secs)


def strftime(format: str, t: Any = None) -> str:
    """Format a `struct_time` (without one: the host's local time now)."""
    if t is None:
        t = hostio.now().timetuple()
    return _time.strftime(format, t)


def monotonic() -> float:
    """Seconds of the host's monotonic clock (`perf_counter` is the same clock)."""
    return hostio.monotonic_ns() / 1e9


def monotonic_ns() -> int:
    """Nanoseconds of the host's monotonic clock."""
    return hostio.monotonic_ns()


def perf_counter() -> float:
    """Seconds of the host's monotonic clock, for measuring intervals."""
    return hostio.monotonic_ns() / 1e9


def perf_counter_ns() -> int:
    """Nanoseconds of the host's monotonic clock, for measuring intervals."""
    return hostio.monotonic_ns()


#: The longest sleep CPython's `time.sleep` takes (its nanoseconds fit an int64).
_MAX_SLEEP = 9223372036.854775


def sleep(secs: Any, /) -> None:
    """Wait `secs` seconds: here, or in the host where the session's `OsAccess` sees sleeps (see
    `hostio.sleep`), with CPython's errors for a bad length."""
    if not hostio.host_sleeps:
        return _time.sleep(secs)
    if isinstance(secs, float):
        if secs != secs:
            raise ValueError('Invalid value NaN (not a number)')
        seconds, too_long = float(secs), 'timestamp out of range for platform time_t'
    else:
        seconds, too_long = operator.index(secs), 'timestamp too large to convert to C _PyTime_t'
    if seconds > _MAX_SLEEP:
        raise OverflowError(too_long)
    if seconds < 0:
        raise ValueError('sleep length must be non-negative')
    hostio.sleep(float(seconds))


_named('time', time, time_ns, gmtime, strftime, monotonic, monotonic_ns, perf_counter, perf_counter_ns, sleep)


def _time_module() -> dict[str, Any]:
    return {
        'time': time, 'time_ns': time_ns, 'gmtime': gmtime, 'strftime': strftime,
        'monotonic': monotonic, 'monotonic_ns': monotonic_ns,
        'perf_counter': perf_counter, 'perf_counter_ns': perf_counter_ns,
        'process_time': _time.process_time, 'process_time_ns': _time.process_time_ns,
        'sleep': sleep, 'strptime': _time.strptime, 'struct_time': _time.struct_time,
    }


def clock_method(cls: type, name: str) -> Callable[..., Any]:
    """The sandbox's `cls.now` / `cls.today` / `cls.utcnow` (cls is `date`, `datetime` or a subclass)."""
    is_datetime = issubclass(cls, datetime.datetime)

    def build(value: datetime.datetime) -> Any:
        if not is_datetime:
            day = value.date()
            return day if cls is datetime.date else cls(day.year, day.month, day.day)
        if cls is datetime.datetime:
            return value
        return cls(value.year, value.month, value.day, value.hour, value.minute, value.second, value.microsecond, value.tzinfo, fold=value.fold)

    if name == 'now':

        def now(tz: Any = None) -> Any:
            """The current time from the host's clock: naive local time, or in zone `tz`."""
            if tz is not None and not isinstance(tz, datetime.tzinfo):
                raise TypeError(f"tzinfo argument must be None or of a tzinfo subclass, not type '{type(tz).__name__}'")
            current = hostio.now()
            return build(current.replace(tzinfo=None) if tz is None else current.astimezone(tz))

        function = now
    elif name == 'utcnow':

        def utcnow() -> Any:
            """The current UTC time from the host's clock, naive."""
            return build(hostio.now().astimezone(datetime.timezone.utc).replace(tzinfo=None))

        function = utcnow
    else:

        def today() -> Any:
            """Today's date (the current naive local time for a datetime), from the host's clock."""
            return build(hostio.now().replace(tzinfo=None))

        function = today
    function.__qualname__ = f'{cls.__name__}.{name}'
    function.__module__ = 'datetime'
    return function


# ----- random and uuid ---------------------------------------------------------------------------------

_state: dict[str, Any] = {}  # 'seed', 'entropy', 'main': made on first use


def _session_seed() -> int:
    if 'seed' not in _state:
        _state['seed'] = hostio.session_seed()
    return _state['seed']


def session_entropy() -> _random.Random:
    """Draws seeds for `seed()`, `Random()`, `uuid4()` and numpy's generators, apart from the
    `random` module's own sequence; seeded from the session's seed (so a replay draws the same)."""
    if 'entropy' not in _state:
        _state['entropy'] = _random.Random(_session_seed() ^ 0x5DEECE66D5DEECE66D)
    return _state['entropy']


class Random(_random.Random):
    """`random.Random`; without a seed it draws one from the session's seed (reproducible)."""

    def __init__(self, x: Any = None) -> None:
        super().__init__(session_entropy().getrandbits(128) if x is None else x)

    def seed(self, a: Any = None, version: int = 2) -> None:
        super().seed(session_entropy().getrandbits(128) if a is None else a, version)


Random.__module__ = 'random'

_RANDOM_FUNCTIONS = (
    'betavariate', 'choice', 'choices', 'expovariate', 'gammavariate', 'gauss', 'getrandbits', 'getstate',
    'lognormvariate', 'normalvariate', 'paretovariate', 'randbytes', 'randint', 'random', 'randrange', 'sample',
    'seed', 'setstate', 'shuffle', 'triangular', 'uniform', 'vonmisesvariate', 'weibullvariate',
)

_random_facades: list[types.ModuleType] = []


def _main_generator() -> Random:
    """The generator behind the module's functions, seeded with the session's seed."""
    main = _state.get('main')
    if main is None:
        main = _state['main'] = Random(_session_seed())
        # from now on the module's functions are the generator's own (fast) methods
        for module in _random_facades:
            for name in _RANDOM_FUNCTIONS:
                setattr(module, name, getattr(main, name))
    return main


def _random_function(name: str) -> Callable[..., Any]:
    def function(*args: Any, **kwargs: Any) -> Any:
        return getattr(_main_generator(), name)(*args, **kwargs)

    method = getattr(_random.Random, name)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = method.__doc__
    function.__module__ = 'random'
    return function


def _random_module() -> dict[str, Any]:
    names: dict[str, Any] = {name: _random_function(name) for name in _RANDOM_FUNCTIONS}
    names['Random'] = Random
    return names


def register_random(module: types.ModuleType) -> None:
    """Called with the random facade once it is built, so its functions can be swapped later."""
    _random_facades.append(module)
    main = _state.get('main')
    if main is not None:
        for name in _RANDOM_FUNCTIONS:
            setattr(module, name, getattr(main, name))


def urandom(size: Any, /) -> bytes:
    """`size` random bytes, with CPython's errors for a bad size: the session's `OsAccess`'s where
    it overrides `urandom`, else drawn from the session's seeded generator (as `uuid4()`'s are), so
    a replay draws the same bytes and the host's entropy is never read. A size past the host's
    `max_urandom_bytes` is a MemoryError."""
    size = operator.index(size)
    if size < 0:
        raise ValueError('negative argument not allowed')
    if size > hostio.max_urandom_bytes:
        raise MemoryError(f'os.urandom() size exceeds max_urandom_bytes ({hostio.max_urandom_bytes})')
    if hostio.host_urandom:
        return hostio.urandom(size)
    return session_entropy().randbytes(size)


def uuid4() -> _uuid.UUID:
    """A random UUID, from the session's seeded generator."""
    return _uuid.UUID(bytes=session_entropy().randbytes(16), version=4)


uuid4.__module__ = 'uuid'


# ----- sys ---------------------------------------------------------------------------------------------

class _Output:
    """`sys.stdout` / `sys.stderr`: text written here goes to the script's captured output."""

    __slots__ = ('_name',)

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    @property
    def encoding(self) -> str:
        return 'utf-8'

    @property
    def errors(self) -> str:
        return 'strict'

    @property
    def closed(self) -> bool:
        return False

    def write(self, text: str, /) -> int:
        if not isinstance(text, str):
            raise TypeError(f'write() argument must be str, not {type(text).__name__}')
        hostio.write_output(text, self)
        return len(text)

    def writelines(self, lines: Any, /) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def fileno(self) -> int:
        raise io.UnsupportedOperation('fileno: the sandbox\'s output has no file descriptor')

    def __repr__(self) -> str:
        return f"<sandbox output name='{self._name}'>"


_Output.__name__ = _Output.__qualname__ = 'SandboxOutput'
_Output.__module__ = 'sys'

stdout = _Output('<stdout>')
stderr = _Output('<stderr>')


#: The script's recursion limit: [the one it asked for, the session's `Limits.recursion`, the
#: interpreter's depth under the script's top level] (`runtime.Worker` sets the last two per feed).
_recursion = [None, 1000, 0]


def recursion_limit(cap: int, base: int) -> int:
    """The interpreter's limit for a feed whose script starts `base` deep, under `Limits.recursion`
    `cap`: the script's own `sys.setrecursionlimit`, kept across feeds, where it is lower."""
    _recursion[1], _recursion[2] = cap, base
    wanted = _recursion[0]
    return base + (cap if wanted is None else min(wanted, cap))


def getrecursionlimit() -> int:
    """`sys.getrecursionlimit`: the script's limit (at most the session's `Limits.recursion`)."""
    wanted, cap, _ = _recursion
    return cap if wanted is None else min(wanted, cap)


def setrecursionlimit(limit: int, /) -> None:
    """`sys.setrecursionlimit`, within the session's `Limits.recursion`: a higher limit gives that one."""
    limit = operator.index(limit)
    if limit < 1:
        raise ValueError('recursion limit must be greater or equal than 1')
    _, cap, base = _recursion
    try:
        sys.setrecursionlimit(base + min(limit, cap))
    except RecursionError as error:  # CPython's words, with the script's depth (less this function's frame)
        depth = int(str(error).split('depth ')[1].split(':')[0]) - base - 1
        raise RecursionError(f'cannot set the recursion limit to {limit} at the recursion depth {depth}: the limit is too low') from None
    _recursion[0] = limit


_named('sys', getrecursionlimit, setrecursionlimit)


def _sys() -> dict[str, Any]:
    return {
        'version': sys.version, 'version_info': sys.version_info, 'hexversion': sys.hexversion,
        'platform': sys.platform, 'byteorder': sys.byteorder, 'maxsize': sys.maxsize,
        'maxunicode': sys.maxunicode, 'float_info': sys.float_info, 'int_info': sys.int_info,
        'hash_info': sys.hash_info, 'float_repr_style': sys.float_repr_style,
        'getsizeof': sys.getsizeof, 'intern': sys.intern, 'exit': sys.exit,
        'getrecursionlimit': getrecursionlimit, 'setrecursionlimit': setrecursionlimit,
        'getdefaultencoding': sys.getdefaultencoding,
        'get_int_max_str_digits': sys.get_int_max_str_digits, 'set_int_max_str_digits': sys.set_int_max_str_digits,
        'stdout': stdout, 'stderr': stderr,
    }


# ----- calendar and typing: what prints goes to the captured output -----------------------------

import calendar as _calendar  # noqa: E402


class TextCalendar(_calendar.TextCalendar):
    """`calendar.TextCalendar`; `prweek`, `prmonth` and `pryear` print to the script's output."""

    def prweek(self, theweek: Any, width: int) -> None:
        stdout.write(self.formatweek(theweek, width))

    def prmonth(self, theyear: int, themonth: int, w: int = 0, l: int = 0) -> None:
        stdout.write(self.formatmonth(theyear, themonth, w, l))

    def pryear(self, theyear: int, w: int = 2, l: int = 1, c: int = 6, m: int = 3) -> None:
        stdout.write(self.formatyear(theyear, w, l, c, m))


def prmonth(theyear: int, themonth: int, w: int = 0, l: int = 0) -> None:
    """Print a month's calendar."""
    stdout.write(_calendar.month(theyear, themonth, w, l))


def prcal(theyear: int, w: int = 0, l: int = 0, c: int = 6, m: int = 3) -> None:
    """Print a year's calendar."""
    stdout.write(_calendar.calendar(theyear, w, l, c, m))


def reveal_type(obj: Any, /) -> Any:
    """Print the runtime type of `obj` (to the script's output) and return it."""
    stderr.write(f'Runtime type is {type(obj).__name__!r}\n')
    return obj


TextCalendar.__module__ = 'calendar'
_named('calendar', prmonth, prcal)
reveal_type.__module__ = 'typing'


# ----- io and pprint ---------------------------------------------------------------------------------

def _io() -> dict[str, Any]:
    return {
        'open': hostio.open, 'StringIO': io.StringIO, 'BytesIO': io.BytesIO, 'TextIOWrapper': io.TextIOWrapper,
        'IOBase': io.IOBase, 'RawIOBase': io.RawIOBase, 'BufferedIOBase': io.BufferedIOBase,
        'TextIOBase': io.TextIOBase, 'UnsupportedOperation': io.UnsupportedOperation,
        'SEEK_SET': io.SEEK_SET, 'SEEK_CUR': io.SEEK_CUR, 'SEEK_END': io.SEEK_END,
        'DEFAULT_BUFFER_SIZE': io.DEFAULT_BUFFER_SIZE,
    }


class PrettyPrinter(_pprint.PrettyPrinter):
    """`pprint.PrettyPrinter`; its default stream is the script's captured output."""

    def __init__(self, indent: int = 1, width: int = 80, depth: int | None = None, stream: Any = None, *, compact: bool = False, sort_dicts: bool = True, underscore_numbers: bool = False) -> None:
        super().__init__(indent, width, depth, stdout if stream is None else stream, compact=compact, sort_dicts=sort_dicts, underscore_numbers=underscore_numbers)


PrettyPrinter.__module__ = 'pprint'


def pprint(object: Any, stream: Any = None, indent: int = 1, width: int = 80, depth: int | None = None, *, compact: bool = False, sort_dicts: bool = True, underscore_numbers: bool = False) -> None:
    """Pretty-print `object` to the script's output (or `stream`)."""
    PrettyPrinter(stream=stream, indent=indent, width=width, depth=depth, compact=compact, sort_dicts=sort_dicts, underscore_numbers=underscore_numbers).pprint(object)


def pp(object: Any, *args: Any, sort_dicts: bool = False, **kwargs: Any) -> None:
    """`pprint()` with `sort_dicts=False`."""
    pprint(object, *args, sort_dicts=sort_dicts, **kwargs)


_named('pprint', pprint, pp)


def _pprint_module() -> dict[str, Any]:
    return {
        'pprint': pprint, 'pp': pp, 'PrettyPrinter': PrettyPrinter, 'pformat': _pprint.pformat,
        'saferepr': _pprint.saferepr, 'isreadable': _pprint.isreadable, 'isrecursive': _pprint.isrecursive,
    }


# ----- zoneinfo ----------------------------------------------------------------------------------------

def available_timezones() -> set[str]:
    """The keys of every time zone the sandbox has."""
    from . import preload  # on first use: the host, which lists this facade's names, never loads the zones

    return set(preload.ZONE_KEYS)


available_timezones.__module__ = 'zoneinfo'


def _zoneinfo() -> dict[str, Any]:
    import zoneinfo

    return {
        'ZoneInfo': zoneinfo.ZoneInfo,
        'ZoneInfoNotFoundError': zoneinfo.ZoneInfoNotFoundError,
        'available_timezones': available_timezones,
    }


# ----- asyncio.run ---------------------------------------------------------------------------------

_RUN_HINT = (
    'the script already runs in an event loop: call asyncio.run(main()) at the top level of the script, '
    'where the sandbox awaits it on that loop, or await the coroutine (await main())'
)


def run(main: Any, *, debug: bool | None = None) -> Any:
    """`asyncio.run()` called anywhere but a statement of the script's top level (where the
    rewrite awaits it on the feed's loop instead: `top_level_run`): the loop is already
    running, as in CPython."""
    if _asyncio.iscoroutine(main):
        main.close()  # never awaited: no "coroutine was never awaited" warning
    raise RuntimeError(f'asyncio.run() cannot be called from a running event loop: {_RUN_HINT}')


def top_level_run(main: Any, *, debug: bool | None = None) -> Any:
    """The coroutine `asyncio.run(main)` at the script's top level runs: the feed's task awaits
    it, and the script gets its value. `debug` changes nothing (the loop is the worker's).
    Raises ValueError for anything but a coroutine, with CPython's words."""
    if not _asyncio.iscoroutine(main):
        raise ValueError(f'a coroutine was expected, got {main!r}')
    return main


async def async_sleep(delay: Any, result: Any = None) -> Any:
    """`asyncio.sleep(delay, result)`: where the session's `OsAccess` sees sleeps, a positive delay
    waits in the host (see `hostio.sleep_async`) while the script's other tasks run; else, and for
    0 or less (CPython's bare yield) or NaN, CPython's own."""
    if not hostio.host_sleeps or delay <= 0 or delay != delay:
        return await _asyncio.sleep(delay, result)
    await hostio.sleep_async(min(float(delay), _MAX_SLEEP))
    return result


async_sleep.__name__ = async_sleep.__qualname__ = 'sleep'
async_sleep.__module__ = run.__module__ = top_level_run.__module__ = 'asyncio'
top_level_run.__name__ = top_level_run.__qualname__ = 'run'


# ----- asyncio.get_running_loop --------------------------------------------------------------------

_THREADS_HINT = 'threads are not available in the sandbox; await the work in a task (asyncio.create_task, asyncio.gather)'


class _RunningLoop:
    """What `asyncio.get_running_loop()` gives a script: the feed's loop as far as scripts use it
    (its clock, tasks, futures and callbacks), never the loop object itself, whose other methods
    reach the worker (sockets, signals, subprocesses, executors, its own exception handler)."""

    __slots__ = ('_loop',)

    def __init__(self, loop: Any) -> None:
        self._loop = loop

    def time(self) -> float:
        return self._loop.time()

    def create_task(self, coro: Any, *, name: str | None = None, context: Any = None) -> Any:
        return self._loop.create_task(coro, name=name, context=context)

    def create_future(self) -> Any:
        return self._loop.create_future()

    def call_soon(self, callback: Any, *args: Any, context: Any = None) -> Any:
        return self._loop.call_soon(callback, *args, context=context)

    def call_later(self, delay: float, callback: Any, *args: Any, context: Any = None) -> Any:
        return self._loop.call_later(delay, callback, *args, context=context)

    def call_at(self, when: float, callback: Any, *args: Any, context: Any = None) -> Any:
        return self._loop.call_at(when, callback, *args, context=context)

    def is_running(self) -> bool:
        return self._loop.is_running()

    def is_closed(self) -> bool:
        return self._loop.is_closed()

    def get_debug(self) -> bool:
        return False

    def run_in_executor(self, executor: Any, func: Any, *args: Any) -> Any:
        raise RuntimeError(f'run_in_executor() is not available: {_THREADS_HINT}')

    def __repr__(self) -> str:
        return f'<_UnixSelectorEventLoop running={self.is_running()} closed={self.is_closed()} debug=False>'


_RunningLoop.__name__ = _RunningLoop.__qualname__ = '_UnixSelectorEventLoop'
_RunningLoop.__module__ = 'asyncio.unix_events'


def get_running_loop() -> Any:
    """`asyncio.get_running_loop()`: the feed's loop as scripts use it (`_RunningLoop`); outside a
    coroutine or callback, CPython's RuntimeError."""
    return _RunningLoop(_asyncio.get_running_loop())


get_running_loop.__module__ = 'asyncio'


#: Facades built here: module name -> a function returning the facade's names and values.
BUILDERS: dict[str, Callable[[], dict[str, Any]]] = {
    'os': _os,
    'os.path': _os_path,
    'pathlib': _pathlib,
    'glob': _glob,
    'time': _time_module,
    'random': _random_module,
    'sys': _sys,
    'io': _io,
    'pprint': _pprint_module,
    'zoneinfo': _zoneinfo,
}
