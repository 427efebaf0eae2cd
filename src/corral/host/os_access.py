"""What a script may reach outside the sandbox: files (mounts), environment variables, the clock.

A script's `open()`, `pathlib.Path` and `os` file functions, `os.getenv`/`os.environ`,
`datetime.datetime.now()`, `datetime.date.today()` and `time.time()` are host calls with reserved
names (see `corral.language.hostio`). The session answers them here, from what the host granted at
checkout:

    pool.checkout(
        mounts=[Mount('/srv/reports', '/data', mode='read-only')],
        os_access=OsAccess(environ={'REGION': 'eu'}, clock=True),
    )

- `Mount(host_dir, sandbox_path, mode)`: a host folder seen by the script at `sandbox_path`.
  `'overlay'` (the default): the script reads the host's files and may write, but what it writes
  lives in the session only (copy-on-write, in memory, up to `OVERLAY_LIMIT` bytes); `'read-only'`:
  writes fail with `PermissionError` (EROFS); `'read-write'`: writes go to the host's files.
- `OsAccess`: the environment (`environ=`), the clock (`clock=True`, or a function returning an
  aware datetime), the most bytes one `os.urandom()` may ask (`max_urandom_bytes=`), and, for a
  subclass, files outside the mounts (override `read_file` ...).

Nothing is granted by default: without `os_access`, the environment and the clock raise
`PermissionError` in the script, saying the host has not granted them; without a mount, so do
files. Every path is checked here, on the host: relative paths start at the sandbox's working
folder (the first mount, else `/`; the script moves it with `os.chdir`, within what exists), a
name or path longer than Linux allows is refused before anything else, `..` is resolved as Linux
resolves it (the folder before it must exist: `/data/missing/../f` is a FileNotFoundError) and
never leads out of a mount to a host folder, a path outside every mount is refused, and a host
symlink that leads out of its mount is refused (symlinks inside a mount are followed; the script
never sees a link).
"""

from __future__ import annotations

import asyncio
import datetime
import errno
import os
import posixpath
import stat as stat_module
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..language.hostio import MAX_URANDOM_BYTES
from .deferred import StopFeed

__all__ = ['Mount', 'OsAccess', 'SystemCalls', 'MountMode', 'OVERLAY_LIMIT', 'MAX_FILE', 'MAX_URANDOM_BYTES']

MountMode = Literal['overlay', 'read-only', 'read-write']
_MODES = ('overlay', 'read-only', 'read-write')

#: Bytes of files an overlay mount may hold in memory for one session (their data, and each
#: file's, folder's or deletion's path with `_ENTRY` bytes more).
OVERLAY_LIMIT = 64 * 1024 * 1024
#: The longest sleep a script may ask for (seconds: CPython's `time.sleep` takes no longer).
_MAX_SLEEP = 9223372036.854775
#: Bytes an overlay entry counts beyond its path: its time and its place in a stored state.
_ENTRY = 32
#: Linux's limits on a path (bytes, with its terminating NUL) and on one name in it (bytes).
_PATH_MAX = 4096
_NAME_MAX = 255
#: The largest file a script may read or write in one piece.
MAX_FILE = 32 * 1024 * 1024
#: The permission bits of what a script makes in an overlay, and of folders above the mounts (as a
#: umask of 022 leaves them).
_FILE_PERMISSIONS = 0o644
_DIR_PERMISSIONS = 0o755

_GRANT_FILES = 'the host grants it with checkout(mounts=[Mount(host_dir, sandbox_path)])'
_GRANT_ENVIRON = 'the host grants it with checkout(os_access=OsAccess(environ={...}))'
_GRANT_CLOCK = 'the host grants it with checkout(os_access=OsAccess(clock=True))'


class _Refused(Exception):
    """An error for the script: `exc_type(errno, strerror, filename)`, sent as plain data."""

    def __init__(self, exc_type: type[BaseException], number: int | None, message: str, filename: str | None = None, filename2: str | None = None) -> None:
        super().__init__(message)
        self.payload = [exc_type.__name__, number, message, filename, filename2]


def _os_error(number: int, path: str, message: str | None = None) -> _Refused:
    exc_type: type[OSError] = {
        errno.ENOENT: FileNotFoundError,
        errno.EEXIST: FileExistsError,
        errno.EISDIR: IsADirectoryError,
        errno.ENOTDIR: NotADirectoryError,
        errno.EACCES: PermissionError,
        errno.EPERM: PermissionError,
        errno.EROFS: OSError,
    }.get(number, OSError)
    return _Refused(exc_type, number, message or os.strerror(number), path)


def _denied(path: str, why: str) -> _Refused:
    return _Refused(PermissionError, errno.EACCES, f'Permission denied ({why})', path)


@dataclass(frozen=True)
class Mount:
    """A host folder the script sees at `sandbox_path` (an absolute POSIX path such as `/data`).

    `mode`: `'overlay'` (default: writes stay in the session), `'read-only'`, or `'read-write'`
    (writes reach the host's files).
    """

    host_dir: str | os.PathLike[str]
    sandbox_path: str
    mode: MountMode = 'overlay'

    def __post_init__(self) -> None:
        if self.mode not in _MODES:
            raise ValueError(f"Mount mode must be one of {', '.join(map(repr, _MODES))}, not {self.mode!r}")
        if not isinstance(self.sandbox_path, str) or not self.sandbox_path.startswith('/'):
            raise ValueError(f'Mount sandbox_path must be an absolute POSIX path such as "/data", not {self.sandbox_path!r}')
        if '\x00' in self.sandbox_path:
            raise ValueError('Mount sandbox_path contains a NUL character')
        if not os.path.isdir(self.host_dir):
            raise ValueError(f'Mount host_dir {os.fspath(self.host_dir)!r} is not an existing folder')

    @property
    def path(self) -> str:
        """The normalized sandbox path."""
        return _normalize(self.sandbox_path)


class OsAccess:
    """The host's answer to a script's environment, clock and file calls outside mounts.

    - `environ`: the variables `os.getenv`/`os.environ` see (None: not granted).
    - `clock`: True for the host's clock (local time with its UTC offset), a function returning an
      aware `datetime` (a fixed or simulated clock), or False (not granted).
    - `mounts`: host folders (see `Mount`); also accepted by `checkout(mounts=...)`.
    - `cwd`: the sandbox's working folder (default: the first mount's path, else `/`).
    - `max_urandom_bytes`: the most bytes one `os.urandom(size)` gives (default 1 MiB); a larger
      `size` is a `MemoryError` in the script. Raises `TypeError` unless an int, `ValueError` if negative.

    Subclass to serve files that are not under a mount (a virtual filesystem): override
    `stat`, `read_file`, `write_file`, `list_dir`, `make_dir`, `remove`, `remove_dir`, `rename`
    (and `exists`, when a cheaper answer than `stat` exists); paths arrive absolute and normalized
    (`..` resolved by its text, as such a filesystem has no folders to look up). Raise
    `FileNotFoundError`, `PermissionError` ... as the script should see them. Override
    `getenv`/`environ` or `now` for a dynamic environment or clock, `sleep` (and `async_sleep`)
    for the script's sleeps, `urandom` for the script's `os.urandom` bytes.
    A subclass whose methods wait on the event loop (answers asked of a remote caller) sets
    `threaded = True`: the session then calls them in a thread, never on the loop. One that
    resolves paths itself, with its own limits (a caller that serves files from folders of its
    own), sets `resolves_paths = True`: its methods then receive paths absolute (a relative one
    joined to the working folder) but as the script wrote them, `..` and all, unchecked for
    length when the session has no mount of its own, and must keep them inside its folders.
    """

    threaded = False
    resolves_paths = False

    def __init__(
        self,
        *,
        environ: Mapping[str, str] | None = None,
        clock: bool | Callable[[], datetime.datetime] = False,
        mounts: Iterable[Mount] = (),
        cwd: str | None = None,
        max_urandom_bytes: int = MAX_URANDOM_BYTES,
    ) -> None:
        if environ is not None:
            for key, value in environ.items():
                if not isinstance(key, str) or not isinstance(value, str):
                    raise TypeError('OsAccess environ must map str to str')
        self._environ = None if environ is None else dict(environ)
        if not (isinstance(clock, bool) or callable(clock)):
            raise TypeError('OsAccess clock must be True, False or a function returning an aware datetime')
        self._clock = clock
        self.mounts = tuple(mounts)
        for mount in self.mounts:
            if not isinstance(mount, Mount):
                raise TypeError(f'OsAccess mounts must be Mount objects, not {type(mount).__name__}')
        if cwd is not None and (not isinstance(cwd, str) or not cwd.startswith('/')):
            raise ValueError(f'OsAccess cwd must be an absolute POSIX path, not {cwd!r}')
        self.cwd = cwd
        if type(max_urandom_bytes) is not int:
            raise TypeError(f'max_urandom_bytes must be an int, not {type(max_urandom_bytes).__name__}')
        if max_urandom_bytes < 0:
            raise ValueError('max_urandom_bytes must be non-negative')
        self.max_urandom_bytes = max_urandom_bytes

    def __repr__(self) -> str:
        granted = []
        if self._environ is not None:
            granted.append(f'environ={sorted(self._environ)}')
        if self._clock:
            granted.append('clock')
        if self.mounts:
            granted.append(f'mounts={list(self.mounts)}')
        return f'OsAccess({", ".join(granted)})'

    # ----- sleeps --------------------------------------------------------------------------------

    def sleep(self, seconds: float) -> Awaitable[None] | None:
        """The script's `time.sleep(seconds)` (`seconds` finite and not negative), asked only of an
        `OsAccess` that overrides `sleep` or `async_sleep` (the sleeps of any other wait in the
        worker, as CPython's do): the host waits, so a session replayed from its journal does not
        wait again, and a feed ends only once the sleeps of the tasks it leaves are over. The default returns
        `asyncio.sleep(seconds)`, which the session awaits; an override may cap or skip the wait,
        block (the calls of a `threaded` OsAccess run in a thread), raise the error the script
        should see, or end the feed (`StopFeed`, a budget of sleeps spent)."""
        return asyncio.sleep(seconds)

    def async_sleep(self, seconds: float) -> Awaitable[None] | None:
        """The script's `asyncio.sleep(seconds)` (`seconds` positive; the script's other tasks run
        meanwhile): as `sleep`, which it calls unless overridden."""
        return self.sleep(seconds)

    # ----- randomness ----------------------------------------------------------------------------

    def urandom(self, size: int) -> bytes:
        """The script's `os.urandom(size)` (`size` from 0 to `max_urandom_bytes`), asked only of an
        `OsAccess` that overrides it: elsewhere the worker draws the bytes from the session's seeded
        generator, so a replayed session draws the same ones, and the host's entropy is never read.
        An override returns exactly `size` bytes (recorded in the journal, so a replay does not ask
        again), or raises the error the script should see."""
        raise NotImplementedError('OsAccess.urandom is asked only where a subclass overrides it')

    # ----- environment ---------------------------------------------------------------------------

    def environ(self) -> dict[str, str]:
        """All environment variables the script may see."""
        if self._environ is None:
            raise PermissionError(f'the host has not granted access to environment variables; {_GRANT_ENVIRON}')
        return dict(self._environ)

    def getenv(self, name: str) -> str | None:
        """One environment variable, or None."""
        return self.environ().get(name)

    # ----- clock ---------------------------------------------------------------------------------

    def now(self) -> datetime.datetime:
        """The current time, an aware datetime in the zone the sandbox calls local."""
        clock = self._clock
        if clock is True:
            return datetime.datetime.now().astimezone()
        if callable(clock):
            return clock()
        raise PermissionError(
            f'the host has not granted clock access (datetime.now(), date.today(), time.time()); {_GRANT_CLOCK}'
        )

    # ----- files outside the mounts (override to serve them) ------------------------------------

    def _no_files(self, path: str) -> OSError:
        return _NoFiles(errno.EACCES, 'Permission denied', path)

    def stat(self, path: str) -> tuple[str, int, float] | tuple[str, int, float, int]:
        """`('file' | 'dir', size, mtime)` of a path, or `(kind, size, mtime, permissions)` with
        its permission bits (`0o644` ...; the default is 0o644 for a file, 0o755 for a folder);
        raise FileNotFoundError when missing."""
        raise self._no_files(path)

    def exists(self, path: str) -> bool:
        """Whether a path exists (`Path.exists()`): `stat` answers it unless overridden; a
        FileNotFoundError or NotADirectoryError is False, other errors reach the script."""
        try:
            self.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return False
        return True

    def read_file(self, path: str) -> bytes:
        raise self._no_files(path)

    def write_file(self, path: str, data: bytes, how: str) -> None:
        """`how`: 'truncate' (replace the content), 'append', or 'create' (FileExistsError if it exists)."""
        raise self._no_files(path)

    def list_dir(self, path: str) -> list[str] | list[tuple[str, str]]:
        """The names in a folder, or `(name, 'file' | 'dir' | 'other')` pairs when the listing knows
        the kinds (each name's `stat` is then asked only when the script wants more of it)."""
        raise self._no_files(path)

    def make_dir(self, path: str) -> None:
        raise self._no_files(path)

    def remove(self, path: str) -> None:
        raise self._no_files(path)

    def remove_dir(self, path: str) -> None:
        raise self._no_files(path)

    def rename(self, source: str, target: str) -> None:
        raise self._no_files(source)


class _NoFiles(PermissionError):
    """Raised by OsAccess's file methods that a subclass did not override: no file access there."""


_NOT_GRANTED = OsAccess()


def _normalize(path: str) -> str:
    path = posixpath.normpath(path)
    if path.startswith('//'):
        path = '/' + path.lstrip('/')
    return path


def _parts(path: str) -> tuple[str, ...]:
    return tuple(part for part in path.split('/') if part)


# ----- one mount, as a session sees it --------------------------------------------------------------

class _MountView:
    """Files of one mount for one session: the host folder, and the session's overlay."""

    def __init__(self, mount: Mount, system: SystemCalls) -> None:
        self.mount = mount
        self.path = mount.path
        self.mode = mount.mode
        self.root = os.path.realpath(mount.host_dir)
        self._system = system
        # overlay state, keyed by the path relative to the mount ('' is the mount itself)
        self._files: dict[str, tuple[bytes, float]] = {}
        self._dirs: dict[str, float] = {}
        self._deleted: set[str] = set()  # the host's version of these paths (and below) is hidden

    # host side --------------------------------------------------------------------------------

    def _host(self, rel: str, shown: str) -> str:
        """The host path of `rel`, with symlinks resolved; refused when it leaves the mount."""
        full = os.path.join(self.root, *_parts(rel))
        real = os.path.realpath(full)
        if real != self.root and not real.startswith(self.root.rstrip(os.sep) + os.sep):
            raise _denied(shown, 'a link that leads outside the mounted folder')
        return real

    def _host_stat(self, rel: str, shown: str) -> os.stat_result | None:
        try:
            return os.stat(self._host(rel, shown))
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as error:
            raise _os_error(error.errno or errno.EIO, shown) from None

    def _hidden(self, rel: str) -> bool:
        """Whether the host's version of `rel` is hidden by the overlay (deleted, or replaced above)."""
        if not self._deleted:
            return False
        parts = _parts(rel)
        return any('/'.join(parts[:i]) in self._deleted for i in range(len(parts) + 1))

    # lookups ----------------------------------------------------------------------------------

    def lookup(self, rel: str, shown: str) -> tuple[str, int, float, int] | None:
        """`(kind, size, mtime, permissions)` as the script sees `rel`, or None."""
        if rel in self._files:
            data, mtime = self._files[rel]
            return ('file', len(data), mtime, _FILE_PERMISSIONS)
        if rel in self._dirs:
            return ('dir', 0, self._dirs[rel], _DIR_PERMISSIONS)
        if self._hidden(rel):
            return None
        st = self._host_stat(rel, shown)
        if st is None:
            return None
        permissions = stat_module.S_IMODE(st.st_mode)
        if stat_module.S_ISDIR(st.st_mode):
            return ('dir', 0, st.st_mtime, permissions)
        if stat_module.S_ISREG(st.st_mode):
            return ('file', st.st_size, st.st_mtime, permissions)
        return ('other', 0, st.st_mtime, permissions)

    def _absent(self, rel: str, shown: str) -> _Refused:
        """The error for `rel`, which is not there: `NotADirectoryError` when a folder on its way
        is a file, `FileNotFoundError` otherwise, as the kernel tells them apart."""
        parts = _parts(rel)
        for depth in range(1, len(parts)):
            info = self.lookup('/'.join(parts[:depth]), shown)
            if info is None:
                break
            if info[0] != 'dir':
                return _os_error(errno.ENOTDIR, shown)
        return _os_error(errno.ENOENT, shown)

    def read(self, rel: str, shown: str) -> bytes:
        if rel in self._files:
            return self._files[rel][0]
        info = self.lookup(rel, shown)
        if info is None:
            raise self._absent(rel, shown)
        if info[0] == 'dir':
            raise _os_error(errno.EISDIR, shown)
        if info[0] != 'file':
            raise _denied(shown, 'not a regular file')
        if info[1] > MAX_FILE:
            raise _os_error(errno.EFBIG, shown, f'File too large for the sandbox (more than {MAX_FILE} bytes)')
        try:
            with open(self._host(rel, shown), 'rb') as f:
                return f.read(MAX_FILE + 1)[:MAX_FILE]
        except OSError as error:
            raise _os_error(error.errno or errno.EIO, shown) from None

    def entries(self, rel: str, shown: str) -> list[list[Any]]:
        info = self.lookup(rel, shown)
        if info is None:
            raise self._absent(rel, shown)
        if info[0] != 'dir':
            raise _os_error(errno.ENOTDIR, shown)
        names: dict[str, list[Any]] = {}
        if not self._hidden(rel) and rel not in self._dirs:
            try:
                host_names = os.listdir(self._host(rel, shown))
            except OSError as error:
                raise _os_error(error.errno or errno.EIO, shown) from None
            for name in host_names:
                child = f'{rel}/{name}' if rel else name
                if child in self._deleted:
                    continue
                try:
                    found = self.lookup(child, posixpath.join(shown, name))
                except _Refused:  # a link leading outside the mount: not shown
                    continue
                if found is not None and found[0] in ('file', 'dir'):
                    names[name] = [name, *found]
        prefix = f'{rel}/' if rel else ''
        for table in (self._files, self._dirs):
            for key in table:
                if key.startswith(prefix) and key != rel and '/' not in key[len(prefix):]:
                    name = key[len(prefix):]
                    found = self.lookup(key, posixpath.join(shown, name))
                    if found is not None:
                        names[name] = [name, *found]
        return [names[name] for name in sorted(names)]

    # writes -----------------------------------------------------------------------------------

    def _writable(self, shown: str) -> None:
        if self.mode == 'read-only':
            raise _os_error(errno.EROFS, shown, 'Read-only file system')

    def _parent_is_dir(self, rel: str, shown: str) -> None:
        if not rel:
            return
        parent = rel.rpartition('/')[0]
        info = self.lookup(parent, posixpath.dirname(shown))
        if info is None:
            raise self._absent(parent, shown)
        if info[0] != 'dir':
            raise _os_error(errno.ENOTDIR, shown)

    def write(self, rel: str, shown: str, data: bytes, how: str) -> None:
        self._writable(shown)
        info = self.lookup(rel, shown)
        if info is not None and info[0] == 'dir':
            raise _os_error(errno.EISDIR, shown)
        if info is not None and info[0] != 'file':  # a FIFO or device: opening it could block the host
            raise _denied(shown, 'not a regular file')
        if how == 'create' and info is not None:
            raise _os_error(errno.EEXIST, shown)
        self._parent_is_dir(rel, shown)
        if self.mode == 'read-write':
            flags = {'truncate': 'wb', 'append': 'ab', 'create': 'xb'}[how]
            try:
                with open(self._host(rel, shown), flags) as f:
                    f.write(data)
            except OSError as error:
                raise _os_error(error.errno or errno.EIO, shown) from None
            return
        if how == 'append' and not data and info is not None:
            return  # open(path, 'a') on an existing file: nothing to copy into the overlay yet
        old = b''
        if how == 'append' and info is not None:
            old = self.read(rel, shown)
        content = old + data
        if len(content) > MAX_FILE:
            raise _os_error(errno.EFBIG, shown, f'File too large for the sandbox (more than {MAX_FILE} bytes)')
        previous = len(self._files[rel][0]) + len(rel) + _ENTRY if rel in self._files else 0
        self._system.grow(len(content) + len(rel) + _ENTRY - previous, shown)
        self._files[rel] = (content, time.time())

    def mkdir(self, rel: str, shown: str) -> None:
        if self.lookup(rel, shown) is not None:
            raise _os_error(errno.EEXIST, shown)
        self._writable(shown)
        self._parent_is_dir(rel, shown)
        if self.mode == 'read-write':
            try:
                os.mkdir(self._host(rel, shown))
            except OSError as error:
                raise _os_error(error.errno or errno.EIO, shown) from None
            return
        self._system.grow(len(rel) + _ENTRY, shown)
        self._dirs[rel] = time.time()

    def remove(self, rel: str, shown: str) -> None:
        self._writable(shown)
        info = self.lookup(rel, shown)
        if info is None:
            raise self._absent(rel, shown)
        if info[0] == 'dir':
            raise _os_error(errno.EISDIR, shown)
        if self.mode == 'read-write':
            try:
                os.remove(self._host(rel, shown))
            except OSError as error:
                raise _os_error(error.errno or errno.EIO, shown) from None
            return
        freed = len(self._files[rel][0]) + len(rel) + _ENTRY if rel in self._files else 0
        self._system.grow((0 if rel in self._deleted else len(rel) + _ENTRY) - freed, shown)
        self._files.pop(rel, None)
        self._deleted.add(rel)

    def rmdir(self, rel: str, shown: str) -> None:
        self._writable(shown)
        info = self.lookup(rel, shown)
        if info is None:
            raise self._absent(rel, shown)
        if info[0] != 'dir':
            raise _os_error(errno.ENOTDIR, shown)
        if not rel:
            raise _os_error(errno.EBUSY, shown, 'Device or resource busy (a mounted folder)')
        if self.entries(rel, shown):
            raise _os_error(errno.ENOTEMPTY, shown)
        if self.mode == 'read-write':
            try:
                os.rmdir(self._host(rel, shown))
            except OSError as error:
                raise _os_error(error.errno or errno.EIO, shown) from None
            return
        freed = len(rel) + _ENTRY if rel in self._dirs else 0
        self._system.grow((0 if rel in self._deleted else len(rel) + _ENTRY) - freed, shown)
        self._dirs.pop(rel, None)
        self._deleted.add(rel)


# ----- the session's system calls -------------------------------------------------------------------

def _overlay_room() -> tuple[int, str]:
    return OVERLAY_LIMIT, f"the session's files hold at most {OVERLAY_LIMIT} bytes"


class SystemCalls:
    """Answers one session's system calls (`\\x00os.read` ...) from its `OsAccess` and mounts.

    `call(name, args)` returns `[True, value]` or `[False, [exc_type, errno, strerror, filename,
    filename2]]`; arguments come from an untrusted worker and are checked here.
    """

    def __init__(self, os_access: OsAccess | None, mounts: Sequence[Mount], seed: int) -> None:
        self.os_access = os_access if os_access is not None else _NOT_GRANTED
        all_mounts = [*self.os_access.mounts, *mounts]
        paths = [mount.path for mount in all_mounts]
        if len(set(paths)) != len(paths):
            raise ValueError(f'two mounts share a sandbox path: {sorted(paths)}')
        self.overlay_bytes = 0  # of every overlay mount, as OVERLAY_LIMIT counts them
        #: `(bytes, why)`: how much the overlay mounts may hold, and the reason an ENOSPC names (a
        #: stored session lowers it to what its state has room for).
        self.room: Callable[[], tuple[int, str]] = _overlay_room
        # longest sandbox path first, so /data/raw wins over /data
        self._mounts = sorted((_MountView(mount, self) for mount in all_mounts), key=lambda view: len(view.path), reverse=True)
        self.cwd = _normalize(self.os_access.cwd or (all_mounts[0].path if all_mounts else '/'))
        #: Whether the script's sleeps come here: only to an `OsAccess` that overrides a sleep.
        self.host_sleeps = type(self.os_access).sleep is not OsAccess.sleep or type(self.os_access).async_sleep is not OsAccess.async_sleep
        #: Whether the script's `os.urandom` bytes come here: only from an `OsAccess` that overrides `urandom`.
        self.host_urandom = type(self.os_access).urandom is not OsAccess.urandom
        self.seed = seed

    def grow(self, size: int, shown: str) -> None:
        """Count `size` more bytes of overlay (less when negative); ENOSPC, naming `room()`'s
        reason, when they would pass its bytes."""
        if size > 0:
            room, why = self.room()
            if self.overlay_bytes + size > room:
                raise _os_error(errno.ENOSPC, shown, f'No space left on device ({why})')
        self.overlay_bytes += size

    def mounts(self) -> list[list[str]]:
        """`[sandbox_path, mode]` of each mount, longest path first."""
        return [[view.path, view.mode] for view in self._mounts]

    def overlay(self) -> dict[str, list[Any]]:
        """The overlay writes of each overlay mount: `{sandbox_path: [files, dirs, deleted]}`, with
        `files` as `[[path, data, mtime], ...]`, `dirs` as `[[path, mtime], ...]`, paths relative to the mount."""
        return {
            view.path: [
                [[rel, data, mtime] for rel, (data, mtime) in sorted(view._files.items())],
                [[rel, mtime] for rel, mtime in sorted(view._dirs.items())],
                sorted(view._deleted),
            ]
            for view in self._mounts
            if view.mode == 'overlay'
        }

    def restore_overlay(self, overlay: dict[str, list[Any]]) -> None:
        """Set the overlay mounts' writes to what `overlay()` returned, by sandbox path.

        Raises `ValueError` when data does not have `overlay()`'s shape or names a mount that is not an overlay here.
        """
        views = {view.path: view for view in self._mounts if view.mode == 'overlay'}
        for view in views.values():  # what the overlay held before is replaced
            view._files, view._dirs, view._deleted = {}, {}, set()
        self.overlay_bytes = 0
        for path, (files, dirs, deleted) in overlay.items():
            view = views.get(path)
            if view is None:
                raise ValueError(f'no overlay mount at {path!r}')
            for rel, data, mtime in files:
                if not (isinstance(rel, str) and isinstance(data, bytes) and isinstance(mtime, float)):
                    raise ValueError('malformed overlay file')
                view._files[rel] = (data, mtime)
                self.overlay_bytes += len(data) + len(rel) + _ENTRY
            for rel, mtime in dirs:
                if not (isinstance(rel, str) and isinstance(mtime, float)):
                    raise ValueError('malformed overlay folder')
                view._dirs[rel] = mtime
                self.overlay_bytes += len(rel) + _ENTRY
            if not all(isinstance(rel, str) for rel in deleted):
                raise ValueError('malformed overlay deletion')
            view._deleted.update(deleted)
            self.overlay_bytes += sum(len(rel) + _ENTRY for rel in view._deleted)

    def call(self, name: str, args: list[Any]) -> list[Any]:
        handler = _HANDLERS.get(name)
        if handler is None:
            return [False, ['NameError', None, f'unknown system call {name!r}', None, None]]
        try:
            return [True, handler(self, *args)]
        except _Refused as refused:
            return [False, refused.payload]
        except StopFeed:  # not an error of the call's: the feed ends there
            raise
        except TypeError as error:
            return [False, ['TypeError', None, f'{name}: {error}', None, None]]
        except OSError as error:  # from an OsAccess subclass
            return [False, [_builtin_name(error), error.errno, error.strerror or str(error), _text(error.filename), _text(error.filename2)]]
        except Exception as error:
            return [False, [_builtin_name(error), None, str(error), None, None]]

    # paths ------------------------------------------------------------------------------------

    def _path(self, raw: Any) -> str:
        """The absolute, normalized sandbox path `raw` names (a relative one starts at the working
        folder), resolved as Linux resolves it: a name or path too long is refused first, then
        each folder that a `..` leaves must exist in its mount (FileNotFoundError, or
        NotADirectoryError for a file). Outside the mounts, `..` is resolved by its text."""
        if not isinstance(raw, str):
            raise TypeError(f'a path must be a str, not {type(raw).__name__}')
        if '\x00' in raw:
            raise _Refused(ValueError, None, 'embedded null byte')
        if not raw:
            raise _os_error(errno.ENOENT, raw)
        if self._mounts or not self.os_access.resolves_paths:
            encoded = raw.encode('utf-8', 'surrogateescape')
            if len(encoded) >= _PATH_MAX or any(len(part) > _NAME_MAX for part in encoded.split(b'/')):
                raise _os_error(errno.ENAMETOOLONG, raw)  # as the kernel refuses it, before `..` is resolved
        joined = raw if raw.startswith('/') else posixpath.join(self.cwd, raw)
        parts = joined.split('/')
        if '..' not in parts:
            return _normalize(joined)
        resolved: list[str] = []
        for part in parts:
            if part == '..':
                if resolved:
                    self._leave('/' + '/'.join(resolved), raw)
                    resolved.pop()
            elif part and part != '.':
                resolved.append(part)
        return '/' + '/'.join(resolved)

    def _leave(self, folder: str, raw: str) -> None:
        """Refuse a `..` out of `folder` when a mount has no folder there, as Linux refuses it."""
        found = self._find(folder)
        if found is None:
            return
        view, rel = found
        info = view.lookup(rel, raw)
        if info is None:
            raise _os_error(errno.ENOENT, raw)
        if info[0] != 'dir':
            raise _os_error(errno.ENOTDIR, raw)

    def _given(self, raw: str, path: str) -> str:
        """What the OsAccess receives for `path` (outside the mounts): the path itself, or, for one
        that `resolves_paths`, the script's path as written, made absolute."""
        if self.os_access.resolves_paths:
            return raw if raw.startswith('/') else posixpath.join(self.cwd, raw)
        return path

    def _find(self, path: str) -> tuple[_MountView, str] | None:
        for view in self._mounts:
            if path == view.path or path.startswith(view.path.rstrip('/') + '/'):
                return view, path[len(view.path):].strip('/')
        return None

    def _above_mounts(self, path: str) -> list[str] | None:
        """Names under `path` when it is a folder above some mount (`/` above `/data`), else None."""
        prefix = path.rstrip('/') + '/'
        names = {view.path[len(prefix):].split('/')[0] for view in self._mounts if view.path.startswith(prefix)}
        return sorted(names) if names else None

    # files ------------------------------------------------------------------------------------

    def _stat(self, raw: Any) -> list[Any]:
        """`[kind, size, mtime, permissions]` of a path (kind 'file' or 'dir')."""
        return self._info(raw, self._path(raw))

    def _info(self, raw: str, path: str) -> list[Any]:
        found = self._find(path)
        if found is None:
            if self._above_mounts(path) is not None:
                return ['dir', 0, 0.0, _DIR_PERMISSIONS]
            return self._handler_stat(raw, self._given(raw, path))
        view, rel = found
        info = view.lookup(rel, raw)
        if info is None:
            raise view._absent(rel, raw)
        if info[0] not in ('file', 'dir'):
            raise _os_error(errno.ENOENT, raw)
        return list(info)

    def _handler_stat(self, shown: str, given: str) -> list[Any]:
        """The OsAccess's `stat` of `given`, as `[kind, size, mtime, permissions]`."""
        answer = self._handler(shown, given, self.os_access.stat, given)
        if not (isinstance(answer, (tuple, list)) and len(answer) in (3, 4)):
            raise TypeError(f'{type(self.os_access).__name__}.stat returned {answer!r}, not (kind, size, mtime[, permissions])')
        kind, size, mtime, *permissions = answer
        return [kind, size, mtime, permissions[0] if permissions else _DIR_PERMISSIONS if kind == 'dir' else _FILE_PERMISSIONS]

    def _exists(self, raw: Any) -> bool:
        """`Path.exists()`: False when the path or a folder on its way is missing (or a file)."""
        try:
            path = self._path(raw)
            if self._find(path) is None and self._above_mounts(path) is None:
                given = self._given(raw, path)
                return bool(self._handler(raw, given, self.os_access.exists, given))
            self._info(raw, path)
        except _Refused as refused:
            if refused.payload[0] in ('FileNotFoundError', 'NotADirectoryError'):
                return False
            raise
        return True

    def _read(self, raw: Any) -> bytes:
        path = self._path(raw)
        found = self._find(path)
        if found is None:
            if self._above_mounts(path) is not None:
                raise _os_error(errno.EISDIR, raw)
            given = self._given(raw, path)
            data = self._handler(raw, given, self.os_access.read_file, given)
            if not isinstance(data, bytes):
                raise TypeError(f'{type(self.os_access).__name__}.read_file returned {type(data).__name__}, not bytes')
            return data
        view, rel = found
        return view.read(rel, raw)

    def _write(self, raw: Any, data: Any, how: Any) -> None:
        path = self._path(raw)
        if not isinstance(data, bytes):
            raise TypeError(f'file data must be bytes, not {type(data).__name__}')
        if how not in ('truncate', 'append', 'create'):
            raise TypeError(f'unknown write mode {how!r}')
        found = self._find(path)
        if found is None:
            if self._above_mounts(path) is not None:
                raise _os_error(errno.EISDIR, raw)
            given = self._given(raw, path)
            self._handler(raw, given, self.os_access.write_file, given, data, how)
            return
        view, rel = found
        view.write(rel, raw, data, how)

    def _scandir(self, raw: Any) -> list[list[Any]]:
        path = self._path(raw)
        found = self._find(path)
        if found is None:
            above = self._above_mounts(path)
            if above is not None:
                return [[name, 'dir', 0, 0.0, _DIR_PERMISSIONS] for name in above]
            given = self._given(raw, path)
            entries = []
            for item in self._handler(raw, given, self.os_access.list_dir, given):
                if isinstance(item, str):
                    entries.append([item, *self._handler_stat(posixpath.join(raw, item), posixpath.join(given, item))])
                elif isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str) and item[1] in ('file', 'dir', 'other'):
                    entries.append(list(item))  # the kind alone: a DirEntry's stat() asks for the rest
                else:
                    raise TypeError(f'{type(self.os_access).__name__}.list_dir gave {item!r}, not a name or a (name, kind) pair')
            return sorted(entries)
        view, rel = found
        entries = view.entries(rel, raw)
        # mounts nested inside this folder appear in it
        above = self._above_mounts(path) or []
        known = {entry[0] for entry in entries}
        entries += [[name, 'dir', 0, 0.0, _DIR_PERMISSIONS] for name in above if name not in known]
        return sorted(entries)

    def _mkdir(self, raw: Any, parents: Any, exist_ok: Any) -> None:
        path = self._path(raw)
        if parents:
            parts = _parts(path)
            for depth in range(1, len(parts) + 1):
                partial = '/' + '/'.join(parts[:depth])
                try:
                    self._mkdir_one(partial, partial if depth < len(parts) else raw)
                except _Refused as refused:
                    if refused.payload[0] != 'FileExistsError':
                        raise
                    if depth == len(parts):
                        if not exist_ok or self._stat(partial)[0] != 'dir':
                            raise
            return
        try:
            self._mkdir_one(path, raw)
        except _Refused as refused:
            if not (exist_ok and refused.payload[0] == 'FileExistsError' and self._stat(path)[0] == 'dir'):
                raise

    def _mkdir_one(self, path: str, shown: str) -> None:
        found = self._find(path)
        if found is None:
            if self._above_mounts(path) is not None:
                raise _os_error(errno.EEXIST, shown)
            self._handler(shown, path, self.os_access.make_dir, path)
            return
        view, rel = found
        view.mkdir(rel, shown)

    def _remove(self, raw: Any) -> None:
        path = self._path(raw)
        found = self._find(path)
        if found is None:
            if self._above_mounts(path) is not None:
                raise _os_error(errno.EISDIR, raw)
            given = self._given(raw, path)
            self._handler(raw, given, self.os_access.remove, given)
            return
        view, rel = found
        view.remove(rel, raw)

    def _rmdir(self, raw: Any) -> None:
        path = self._path(raw)
        found = self._find(path)
        if found is None:
            if self._above_mounts(path) is not None:
                raise _os_error(errno.EBUSY, raw, 'Device or resource busy (a folder above a mount)')
            given = self._given(raw, path)
            self._handler(raw, given, self.os_access.remove_dir, given)
            return
        view, rel = found
        view.rmdir(rel, raw)

    def _rename(self, raw_source: Any, raw_target: Any, replace: Any) -> None:
        """`os.rename`/`os.replace`: an error names both paths, as CPython's does
        (`[Errno 2] No such file or directory: 'a' -> 'b'`)."""
        try:
            self._rename_paths(raw_source, raw_target, replace)
        except _Refused as refused:
            if refused.payload[1] is not None and refused.payload[0] != 'PermissionError':  # an errno, not a grant refused
                refused.payload[3:] = [raw_source, raw_target]
            raise

    def _rename_paths(self, raw_source: Any, raw_target: Any, replace: Any) -> None:
        source, target = self._path(raw_source), self._path(raw_target)
        found_source, found_target = self._find(source), self._find(target)
        if found_source is None and found_target is None:
            given = self._given(raw_source, source)
            self._handler(raw_source, given, self.os_access.rename, given, self._given(raw_target, target))
            return
        if found_source is None or found_target is None:
            raise _os_error(errno.EXDEV, raw_source, 'Invalid cross-device link (a rename cannot leave its mount)')
        view, rel = found_source
        target_view, target_rel = found_target
        if view is not target_view:
            raise _os_error(errno.EXDEV, raw_source, 'Invalid cross-device link (a rename cannot leave its mount)')
        info = view.lookup(rel, raw_source)
        if info is None:
            raise view._absent(rel, raw_source)
        if not rel:
            raise _os_error(errno.EBUSY, raw_source, 'Device or resource busy (a mounted folder)')
        if target_rel == rel or target_rel.startswith(rel + '/'):
            if target_rel == rel:
                return
            raise _Refused(OSError, errno.EINVAL, 'Invalid argument', raw_source, raw_target)
        view._writable(raw_source)
        existing = view.lookup(target_rel, raw_target)
        if existing is not None:
            if existing[0] == 'dir' and info[0] != 'dir':
                raise _os_error(errno.EISDIR, raw_target)
            if existing[0] != 'dir' and info[0] == 'dir':
                raise _os_error(errno.ENOTDIR, raw_target)
            if existing[0] == 'dir' and view.entries(target_rel, raw_target):
                raise _os_error(errno.ENOTEMPTY, raw_target)
        if view.mode == 'read-write':
            view._parent_is_dir(target_rel, raw_target)
            try:
                os.replace(view._host(rel, raw_source), view._host(target_rel, raw_target))
            except OSError as error:
                raise _os_error(error.errno or errno.EIO, raw_source) from None
            return
        view._parent_is_dir(target_rel, raw_target)
        if existing is not None:
            (view.rmdir if existing[0] == 'dir' else view.remove)(target_rel, raw_target)
        self._move(view, rel, target_rel, raw_source, raw_target, info[0])

    def _move(self, view: _MountView, rel: str, target: str, shown: str, target_shown: str, kind: str) -> None:
        """Overlay rename: copy into the overlay at the target, then delete the source."""
        if kind == 'file':
            view.write(target, target_shown, view.read(rel, shown), 'truncate')
            view.remove(rel, shown)
            return
        view.mkdir(target, target_shown)
        for name, child_kind, *_ in view.entries(rel, shown):
            self._move(view, f'{rel}/{name}', f'{target}/{name}', posixpath.join(shown, name), posixpath.join(target_shown, name), child_kind)
        view.rmdir(rel, shown)

    def _handler(self, raw: str, path: str, method: Callable[..., Any], *args: Any) -> Any:
        """Call an OsAccess method; its OSError names the path as the script wrote it."""
        try:
            return method(*args)
        except _NoFiles:
            if self._mounts:
                folders = ', '.join(sorted(view.path for view in self._mounts))
                raise _denied(raw, f'outside the folders the host mounted: {folders}') from None
            raise _denied(raw, f'the host has not granted file access; {_GRANT_FILES}') from None
        except OSError as error:
            if error.errno is None:  # an error of the handler's own words: the script sees them
                raise _Refused(_error_class(error), None, str(error)) from None
            filename = raw if error.filename in (path, None) else _text(error.filename)
            raise _Refused(_error_class(error), error.errno, error.strerror or str(error), filename, _text(error.filename2)) from None

    def _getcwd(self) -> str:
        return self.cwd

    def _chdir(self, raw: Any) -> None:
        """`os.chdir`: the working folder moves to an existing folder, normalized."""
        path = self._path(raw)
        if self._info(raw, path)[0] != 'dir':
            raise _os_error(errno.ENOTDIR, raw)
        self.cwd = path

    def chdir(self, path: str) -> None:
        """Start relative paths at `path` from now on (see `Session.chdir`)."""
        if not isinstance(path, str) or not path.startswith('/'):
            raise ValueError(f'the working folder must be an absolute POSIX path, not {path!r}')
        self.cwd = _normalize(path)

    # environment, clock, seed -----------------------------------------------------------------

    def _getenv(self, name: Any) -> str | None:
        if not isinstance(name, str):
            raise TypeError(f'str expected, not {type(name).__name__}')
        value = self.os_access.getenv(name)
        if value is not None and not isinstance(value, str):
            raise TypeError(f'{type(self.os_access).__name__}.getenv returned {type(value).__name__}, not str')
        return value

    def _environ(self) -> dict[str, str]:
        value = dict(self.os_access.environ())
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise TypeError(f'{type(self.os_access).__name__}.environ must map str to str')
        return value

    def _now(self) -> datetime.datetime:
        value = self.os_access.now()
        if not isinstance(value, datetime.datetime) or value.tzinfo is None or value.utcoffset() is None:
            raise TypeError(f'{type(self.os_access).__name__}.now must return an aware datetime, not {value!r}')
        offset = value.utcoffset()
        return value.replace(tzinfo=datetime.timezone(offset)) if offset is not None else value

    def _sleep(self, seconds: Any) -> Awaitable[None] | None:
        if type(seconds) is not float or not 0.0 <= seconds <= _MAX_SLEEP:
            raise TypeError(f'a sleep length must be a finite float, not negative, not {seconds!r}')
        return self.os_access.sleep(seconds)

    def _async_sleep(self, seconds: Any) -> Awaitable[None] | None:
        if type(seconds) is not float or not 0.0 < seconds <= _MAX_SLEEP:
            raise TypeError(f'a sleep length must be a finite float, positive, not {seconds!r}')
        return self.os_access.async_sleep(seconds)

    def _seed(self) -> int:
        return self.seed

    def _urandom(self, size: Any) -> bytes:
        limit = self.os_access.max_urandom_bytes
        if type(size) is not int or size < 0:
            raise TypeError(f'a urandom size must be an int, not negative, not {size!r}')
        if size > limit:
            raise MemoryError(f'os.urandom() size exceeds max_urandom_bytes ({limit})')
        value = self.os_access.urandom(size)
        if type(value) is not bytes or len(value) != size:
            raise TypeError(f'{type(self.os_access).__name__}.urandom({size}) must return {size} bytes, not {_shape_of(value)}')
        return value


#: What answers each system call: a function of the session's `SystemCalls` and the call's arguments
#: (made once, not a dict of bound methods at every checkout).
_HANDLERS: dict[str, Callable[..., Any]] = {
    'os.stat': SystemCalls._stat,
    'os.read': SystemCalls._read,
    'os.write': SystemCalls._write,
    'os.scandir': SystemCalls._scandir,
    'os.mkdir': SystemCalls._mkdir,
    'os.remove': SystemCalls._remove,
    'os.rmdir': SystemCalls._rmdir,
    'os.rename': SystemCalls._rename,
    'os.getcwd': SystemCalls._getcwd,
    'os.chdir': SystemCalls._chdir,
    'os.exists': SystemCalls._exists,
    'os.getenv': SystemCalls._getenv,
    'os.environ': SystemCalls._environ,
    'clock.now': SystemCalls._now,
    'clock.monotonic': lambda calls, *args: time.monotonic_ns(*args),
    'clock.sleep': SystemCalls._sleep,
    'clock.async_sleep': SystemCalls._async_sleep,
    'random.seed': SystemCalls._seed,
    'os.urandom': SystemCalls._urandom,
}


def _shape_of(value: Any) -> str:
    return f'{len(value)} bytes' if type(value) is bytes else type(value).__name__


def _error_class(error: OSError) -> type[OSError]:
    import builtins

    for cls in type(error).__mro__:
        if getattr(builtins, cls.__name__, None) is cls and issubclass(cls, OSError):
            return cls
    return OSError


def _builtin_name(error: BaseException) -> str:
    import builtins

    for cls in type(error).__mro__:
        if getattr(builtins, cls.__name__, None) is cls:
            return cls.__name__
    return 'Exception'


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return os.fsdecode(value) if isinstance(value, (str, bytes)) else str(value)
