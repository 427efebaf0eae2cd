"""The script's files, environment and clock, served by the parent through `OsCall`s."""

from __future__ import annotations

import datetime
import errno
import os
import stat as stat_module
import zoneinfo
from typing import TYPE_CHECKING

from ..host.os_access import OsAccess
from . import monty_v1_pb2 as pb
from .codec import encode

if TYPE_CHECKING:
    from .turns import MontyChild

__all__ = ['ParentOs']

#: The longest system sleep, in seconds, when the policy names no cap.
_SYSTEM_SLEEP_CAP = 10.0


#: The parent's handler caps `os.urandom` itself (`OSAccess(max_urandom_bytes=...)`): any size an
#: `OsCall` carries goes to it.
_NO_URANDOM_CAP = 2**64 - 1


class ParentOs(OsAccess):
    """The script's files, environment and clock, served by the parent through `OsCall`s."""

    threaded = True
    resolves_paths = True  # the parent's mounts resolve them, with their own limits

    def __init__(self, child: MontyChild, policy: pb.OsPolicy) -> None:
        super().__init__(clock=self._clock, max_urandom_bytes=_NO_URANDOM_CAP)
        self._child = child
        self._policy = policy
        zone = policy.timezone
        kind = zone.WhichOneof('zone')
        if kind == 'named':
            self._zone: datetime.tzinfo = zoneinfo.ZoneInfo(zone.named)
        elif kind == 'fixed':
            offset = datetime.timedelta(seconds=zone.fixed.offset_seconds)
            self._zone = datetime.timezone(offset, zone.fixed.name) if zone.fixed.HasField('name') else datetime.timezone(offset)
        else:
            self._zone = datetime.timezone.utc

    def _clock(self) -> datetime.datetime:
        mode = self._policy.WhichOneof('datetime')
        if mode == 'fixed':
            fixed = self._policy.fixed
            instant = datetime.datetime.fromtimestamp(fixed.unix_seconds, datetime.timezone.utc).replace(microsecond=fixed.microsecond)
        elif mode == 'call_host':
            value = self._child.os_call('date_time_now', pb.OsCall.DateTimeNow(tz=pb.TimeZone(offset_seconds=0)), default='datetime.now')
            if not isinstance(value, datetime.datetime):
                raise TypeError(f'the clock answered {type(value).__name__}, not a datetime')
            instant = value if value.tzinfo is not None else value.replace(tzinfo=datetime.timezone.utc)
        else:
            instant = datetime.datetime.now(datetime.timezone.utc)
        return instant.astimezone(self._zone)

    def sleep(self, seconds: float) -> None:
        """The policy's sleep: none (`zero`), the parent's handler's (`call_host`), or the parent's
        wait, cut at the policy's cap (`system`, 10 s unless it names one), which the parent counts
        toward `max_total_sleep` (past it, it ends the feed with an `AbortFeed`)."""
        self._sleep(seconds, awaited=False)

    def async_sleep(self, seconds: float) -> None:
        """As `sleep`, for `asyncio.sleep`: the parent may answer with a future, resolved once the
        script's tasks all wait (gathered sleeps overlap)."""
        self._sleep(seconds, awaited=True)

    def _sleep(self, seconds: float, *, awaited: bool) -> None:
        mode = self._policy.sleep.WhichOneof('mode')
        if mode == 'zero':
            return
        name = 'asyncio.sleep' if awaited else 'time.sleep'
        if mode == 'call_host':
            call = 'async_sleep' if awaited else 'sleep'
        else:
            system = self._policy.sleep.system
            seconds = min(seconds, system.max_micros / 1e6 if system.HasField('max_micros') else _SYSTEM_SLEEP_CAP)
            call = 'async_system_sleep' if awaited else 'system_sleep'
        argument = pb.OsCall.AsyncSleep(delay=seconds) if awaited else pb.OsCall.Sleep(seconds=seconds)
        self._child.os_call(call, argument, default=name)

    def urandom(self, size: int) -> bytes:
        """The parent's entropy (its handler's cap raises the `MemoryError` the script sees)."""
        value = self._child.os_call('urandom', pb.OsCall.Urandom(size=size), default='os.urandom')
        if not isinstance(value, bytes):
            raise TypeError(f'urandom answered {type(value).__name__}, not bytes')
        return value

    def environ(self) -> dict[str, str]:
        value = self._child.os_call('get_environ', None, default='os.environ')
        if not isinstance(value, dict):
            raise TypeError(f'the environment answered {type(value).__name__}, not a dict')
        return value

    def getenv(self, name: str) -> str | None:
        values = pb.Arena()
        (none,) = encode([None], values)
        value = self._child.os_call('getenv', pb.OsCall.Getenv(key=name, default=none), values=values, default='os.getenv')
        return value

    def stat(self, path: str) -> tuple[str, int, float, int]:
        value = self._child.os_call('stat', path, default='path')
        if not isinstance(value, tuple) or len(value) < 9:
            raise TypeError(f'stat answered {type(value).__name__}, not a stat_result')
        mode, size, mtime = value[0], value[6], value[8]
        kind = 'dir' if stat_module.S_ISDIR(mode) else 'file'
        return kind, int(size), float(mtime), stat_module.S_IMODE(mode)

    def exists(self, path: str) -> bool:
        return bool(self._child.os_call('exists', path, default='path'))

    def read_file(self, path: str) -> bytes:
        value = self._child.os_call('read_bytes', path, default='path')
        if not isinstance(value, bytes):
            raise TypeError(f'read_bytes answered {type(value).__name__}, not bytes')
        return value

    def write_file(self, path: str, data: bytes, how: str) -> None:
        if how == 'create' and self._child.os_call('exists', path, default='path'):
            raise FileExistsError(17, 'File exists', path)
        call = 'append_bytes' if how == 'append' else 'write_bytes'
        self._child.os_call(call, pb.OsCall.BytesWrite(path=path, data=data), default='path')

    def list_dir(self, path: str) -> list[tuple[str, str]]:
        """The folder's entries and their kinds, in one `scan` of one level (its first entry, `''`,
        is the folder itself)."""
        value = self._child.os_call('scan', pb.OsCall.Scan(path=path, max_depth=1), default='path')
        if not (isinstance(value, list) and all(isinstance(item, tuple) and len(item) >= 3 and isinstance(item[0], str) for item in value)):
            raise TypeError(f'scan answered {_shape(value)}, not a list of (path, is_dir, is_file, is_symlink) entries')
        root = next((item for item in value if item[0] == ''), None)
        if root is not None and not root[1]:  # a file, or a link to nothing (os.scandir's ENOENT)
            number = errno.ENOTDIR if root[2] else errno.ENOENT
            raise OSError(number, os.strerror(number), path)
        return [(name, 'dir' if is_dir else 'file' if is_file else 'other') for name, is_dir, is_file, *_ in value if name and '/' not in name]

    def make_dir(self, path: str) -> None:
        self._child.os_call('mkdir', pb.OsCall.Mkdir(path=path), default='path')

    def remove(self, path: str) -> None:
        self._child.os_call('unlink', path, default='path')

    def remove_dir(self, path: str) -> None:
        self._child.os_call('rmdir', path, default='path')

    def rename(self, source: str, target: str) -> None:
        self._child.os_call('rename', pb.OsCall.Rename(src=source, dst=target), default='path')


def _shape(value: object) -> str:
    return type(value).__name__ if not isinstance(value, list) else 'a list of ' + ', '.join(sorted({type(item).__name__ for item in value}))
