"""Opening a connection's session: the OPEN frame's checkout options (limits within the server's
ceilings, external modules, `os_access`), the client's mounts uploaded within the server's quotas,
and LIST and DELETE of the tenant's stored sessions, which open none."""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime
import os
import posixpath
import tempfile
from dataclasses import fields, replace
from typing import Any

from ..errors import CorralError, SandboxError, SandboxQuotaError
from ..host.external import ExternalModule
from ..host.os_access import MAX_URANDOM_BYTES, Mount, OsAccess
from ..limits import Limits
from . import protocol as p
from .calls import _proxies
from .ceilings import _DEFAULT_LIMITS
from .ending import _check_version, _Close


class Opening:
    """The part of `_Connection` that opens its session (or answers LIST and DELETE).

    It uses the connection's `server`, `tenant` and `session`, its mounts (`_mount_dir`,
    `_uploading`, `_mounted`), and, once the session is open, `_respond`, `_take` (the direct
    link's), `_worker_waits` and `_direct`.
    """

    async def _manage(self, message: list[Any]) -> list[Any]:
        """The answer to LIST or DELETE, on the connection's tenant's stored sessions."""
        name = 'LIST' if message[0] == p.LIST else 'DELETE'
        if len(message) != (2 if name == 'LIST' else 3) or (name == 'DELETE' and not isinstance(message[2], str)):
            raise _Close(p.CLOSE_PROTOCOL, SandboxError(f'the {name} frame is malformed'))
        _check_version(message[1])
        store = self.server.pool.store
        try:
            if name == 'LIST':
                return [p.SESSIONS, await store.list(tenant=self.tenant)]
            await store.delete(message[2], tenant=self.tenant)
        except ValueError as error:  # a malformed id
            raise _Close(p.CLOSE_ENDED, error) from None
        return [p.DELETED]

    def _open_options(self, message: list[Any]) -> dict[str, Any]:
        if message[0] != p.OPEN or len(message) != 3:
            raise _Close(p.CLOSE_PROTOCOL, SandboxError('the first frame of a connection must be OPEN'))
        _, version, options = message
        _check_version(version)
        if not isinstance(options, dict):
            raise _Close(p.CLOSE_PROTOCOL, SandboxError('the OPEN frame is malformed: its options are not a map'))
        return options

    async def _open(self, options: dict[str, Any]) -> None:
        try:
            # in threads: many modules or a mount's many files must not hold up the other sessions
            checkout = await asyncio.wrap_future(_PREPARING.submit(self._checkout_options, options))
            checkout['mounts'] = await self._upload(options.get('mounts'))
        except CorralError as error:  # over a tenant's bound on its mounts
            raise _Close(p.CLOSE_ENDED, error) from None
        except Exception as error:
            if type(error) in (TypeError, ValueError):  # the options do not fit (raised as checkout raises them)
                raise _Close(p.CLOSE_ENDED, error) from None
            why = str(error) if isinstance(error, _Malformed) else f'{type(error).__name__}: {error}'
            raise _Close(p.CLOSE_PROTOCOL, SandboxError(f'the OPEN frame is malformed ({why})')) from None
        try:
            session = self.server.checkout(self.tenant, **checkout)
        except (TypeError, ValueError, RuntimeError) as error:
            raise _Close(p.CLOSE_ENDED, error) from None
        for hook in self.server.hooks:
            await hook.session_starting(self.tenant, session)
        try:
            await session.__aenter__()
        except (CorralError, ValueError, TypeError, RuntimeError) as error:
            raise _Close(p.CLOSE_ENDED, error) from None
        self.session = session
        session.on_worker_waiting = self._worker_waits
        if self._direct is not None:
            self._direct.take = self._take
        for hook in self.server.hooks:
            await hook.session_opened(self.tenant, session)
        self._respond([p.OPENED, session.session_id, session.random_seed, self.server.max_frame])

    def _checkout_options(self, options: dict[str, Any]) -> dict[str, Any]:
        known = {'type_check', 'type_check_stubs', 'modules', 'ephemeral', 'session_id', 'fork', 'limits', 'script_name', 'random_seed', 'os_access', 'mounts'}
        unknown = set(options) - known
        if unknown:
            raise _Malformed(f'unknown options {sorted(unknown)}')
        modules = {}
        for name, item in (options.get('modules') or {}).items():
            if not (isinstance(item, list) and len(item) in (2, 3) and (len(item) == 2 or isinstance(item[2], dict))):
                raise _Malformed(f'module {name!r} is malformed')
            stubs, functions, *values = item  # its values, when it has any
            modules[name] = ExternalModule(_proxies(self, functions, f'{name}.'), stubs=stubs, values=values[0] if values else None)
        limits = options.get('limits')
        defaults = self.server.default_limits
        if limits is None:
            limits = None if defaults == _DEFAULT_LIMITS else defaults
        else:
            if not isinstance(limits, dict):
                raise _Malformed('limits must be a map')
            names = {field.name for field in fields(Limits)}
            if not set(limits) <= names:
                raise TypeError(f'unknown limits {sorted(set(limits) - names)}; the limits are the fields of corral.Limits')
            limits = replace(defaults, **limits)  # a limit the session leaves out is the server's default
            for name, ceiling in self.server.ceilings.items():
                value = getattr(limits, name)
                if value is None or value > ceiling:
                    raise ValueError(
                        f"limits.{name}={value!r} is over this server's ceiling of {ceiling!r}: "
                        f'a session of corral serve may lower its {name}, not raise or lift it'
                    )
        return {
            'type_check': bool(options.get('type_check', False)),
            'type_check_stubs': options.get('type_check_stubs'),
            'external_modules': modules,
            'ephemeral': options.get('ephemeral'),
            'session_id': options.get('session_id'),
            'fork': bool(options.get('fork', False)),
            'limits': limits,
            'script_name': options.get('script_name', 'main.py'),
            'random_seed': options.get('random_seed'),
            'os_access': self._os_access(options.get('os_access')),
        }

    def _os_access(self, item: Any) -> OsAccess | None:
        """The client's `OsAccess`: its environment, clock (the client's UTC offset, in seconds), cwd
        and `max_urandom_bytes` (a client before it sends the first three)."""
        if item is None:
            return None
        if not (isinstance(item, list) and len(item) in (3, 4)):
            raise _Malformed('os_access is malformed')
        environ, offset, cwd, *urandom = item
        max_urandom_bytes = urandom[0] if urandom else MAX_URANDOM_BYTES
        if type(max_urandom_bytes) is not int or not 0 <= max_urandom_bytes < 2**64:
            raise _Malformed('os_access max_urandom_bytes is malformed')
        clock: Any = False
        if offset is not None:
            if not isinstance(offset, int):
                raise _Malformed('os_access clock is malformed')
            zone = datetime.timezone(datetime.timedelta(seconds=offset))
            clock = lambda: datetime.datetime.now(zone)  # noqa: E731
        return OsAccess(environ=environ, clock=clock, cwd=cwd, max_urandom_bytes=max_urandom_bytes)

    async def _upload(self, items: Any) -> list[Mount]:
        """The client's mounts (see `_mounts`), written in the uploads' threads, which no OPEN
        without mounts waits for, one upload of the tenant's at a time (`CorralServer.uploading`),
        within the server's bounds on files per session and on files and bytes per tenant."""
        if not items:
            return []
        if not isinstance(items, list) or not all(isinstance(item, list) and len(item) == 4 and isinstance(item[2], list) and isinstance(item[3], list) for item in items):
            raise _Malformed('mounts must be a list' if not isinstance(items, list) else 'a mount is malformed')
        for sandbox_path, mode, _, _ in items:
            if mode == 'read-write':
                raise ValueError(
                    f'the read-write mount at {sandbox_path} cannot be served remotely (the server cannot write your files); '
                    "use mode='overlay' or 'read-only'"
                )
        entries = sum(len(files) + len(dirs) for _, _, files, dirs in items)
        server = self.server
        if entries > server.max_mount_files:
            raise ValueError(
                f'the mounts hold {entries:,} files and folders; a session of this server may upload {server.max_mount_files:,} '
                '(corral serve --max-mount-files)'
            )
        async with server.uploading.turn(self.tenant):
            held_files, held_bytes = server.mounted.get(self.tenant, (0, 0))
            if held_files + entries > server.max_tenant_mount_files:
                raise self._over_mounts('mount_files', held_files, entries, server.max_tenant_mount_files, 'files and folders')
            self._uploading = _UPLOADS.submit(self._mounts, items, server.max_tenant_mount_bytes - held_bytes)
            try:
                mounts, size = await asyncio.wrap_future(self._uploading)
            except _OverBytes as over:
                raise self._over_mounts('mount_bytes', held_bytes, over.size, server.max_tenant_mount_bytes, 'bytes') from None
            self._mounted = (entries, size)
            held_files, held_bytes = server.mounted.get(self.tenant, (0, 0))  # less, if another session ended meanwhile
            server.mounted[self.tenant] = (held_files + entries, held_bytes + size)
        return mounts

    def _over_mounts(self, quota: str, held: int, more: int, limit: int, what: str) -> SandboxQuotaError:
        return SandboxQuotaError(
            f"the open sessions of tenant {self.tenant!r} on this server hold {held:,} {what} of mounts, and these mounts' {more:,} "
            f'would bring that to {held + more:,}; its limit is {limit:,} (corral serve --max-tenant-{quota.replace("_", "-")})',
            tenant=self.tenant,
            quota=quota,
            limit=limit,
            used=held,
        )

    def _mounts(self, items: list[Any], bytes_left: int) -> tuple[list[Mount], int]:
        """The client's mounts (shapes checked by `_upload`), their files written to a folder of
        this connection's (removed when it ends), and their bytes. Raises `_OverBytes` before
        writing anything when the files hold more than `bytes_left` bytes."""
        size = 0
        for _, _, files, _ in items:
            for file in files:
                if not (isinstance(file, list) and len(file) == 3 and isinstance(file[1], bytes)):
                    raise _Malformed('a mount file is malformed')
                size += len(file[1])
        if size > bytes_left:
            raise _OverBytes(size)
        mounts = []
        for index, item in enumerate(items):
            sandbox_path, mode, files, dirs = item
            if self._mount_dir is None:
                self._mount_dir = tempfile.mkdtemp(prefix='corral-mounts-')
            root = os.path.join(self._mount_dir, str(index))
            os.mkdir(root)
            rel: Any = None
            try:
                for rel, mtime in dirs:
                    path = _inside(root, rel)
                    os.makedirs(path, exist_ok=True)
                    os.utime(path, (mtime, mtime))
                for rel, data, mtime in files:
                    path = _inside(root, rel)
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                    with os.fdopen(descriptor, 'wb') as file:
                        file.write(data)
                    os.utime(path, (mtime, mtime))
            except OSError as error:  # paths that collide (a file where a folder is): the server's own paths are not shown
                raise _Malformed(f'the mount path {rel!r} cannot be written ({error.strerror})') from None
            mounts.append(Mount(root, sandbox_path, mode))
        return mounts, size


#: Where the sessions' checkout options are made, off the event loop; their mounts are not written here.
_PREPARING = concurrent.futures.ThreadPoolExecutor(thread_name_prefix='corral-options')
#: Where the sessions' mounts are written and removed: one upload of a tenant's at a time
#: (`CorralServer.uploading`), so that one tenant's uploads hold one of these threads at most.
_UPLOADS = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix='corral-mounts')


class _Malformed(ValueError):
    """A frame's content does not have the protocol's shape."""


class _OverBytes(Exception):
    """A client's mounts hold more bytes than its tenant has left (`size`: theirs)."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


def _inside(root: str, rel: Any) -> str:
    """`root/rel` for a relative path that stays inside `root`."""
    if not isinstance(rel, str) or not rel or '\x00' in rel or rel.startswith('/') or posixpath.normpath(rel) != rel or rel.split('/')[0] == '..':
        raise _Malformed(f'a mount path {rel!r} is not a plain relative path')
    return os.path.join(root, rel)
