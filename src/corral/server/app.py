"""The ASGI app of `corral serve`: sandboxes served over WebSocket, whose host functions run in the client.

Each connection is one session (see `corral.server.protocol`). The server runs the session as a
local `corral.Session` would run: type checks, the worker, limits, the journal and the store all
live here; the session's host functions are stand-ins that send each call to the client and
wait for its answer, and its prints stream to the client as they happen.

    app = create_app()                                   # loopback, single tenant, SQLite store
    app = create_app(store='postgresql://...', authenticate=keys.authenticate, hooks=[metrics])

Nothing is kept between requests but the live sessions' workers: a stored session's state is in
the store after every feed, so any replica sharing the store resumes it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import datetime
import functools
import logging
import os
import posixpath
import shutil
import tempfile
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import fields, replace
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from ..errors import CorralError, SandboxAuthError, SandboxConnectionError, SandboxError, SandboxQuotaError, SandboxStateError, SandboxStoreError, SandboxWorkerError
from ..host.channel import _INLINE_FRAME, _decoding_thread
from ..host.deferred import Deferred, RemoteAnswer, SandboxPaused
from ..host.external import ExternalModule
from ..host.os_access import MAX_URANDOM_BYTES, Mount, OsAccess
from ..host.pool import Pool
from ..host.session import Session
from ..limits import Limits
from ..values import bounded_repr
from ..store import Store
from . import protocol as p
from .listener import DIRECT_LINK, DirectLink
from .monty_ws import PATH as MONTY_PATH, serve_monty
from .origins import OriginGuard

__all__ = [
    'create_app', 'CorralServer', 'ServerHooks', 'Authenticate', 'MAX_OUTBOX', 'GATHER_SECONDS', 'OPEN_TIMEOUT', 'IDLE_TIMEOUT',
    'MAX_PENDING', 'MAX_PENDING_PER_ADDRESS', 'KEY_RECHECK', 'TenantTurns', 'MAX_MOUNT_FILES', 'MAX_TENANT_MOUNT_FILES',
    'MAX_TENANT_MOUNT_BYTES',
]

#: `authenticate(api_key) -> tenant`: `api_key` is the bearer token of the connection's
#: `authorization` header, or None without one. Return the tenant's name (`''`: the single
#: tenant of a server without keys); raise a `corral.CorralError` (`SandboxAuthError`) whose text says why to refuse.
Authenticate = Callable[[str | None], Awaitable[str]]

#: Bytes the server holds for a client that does not read what it is sent (its prints, its host
#: calls); past this the client is cut off and its session ends (`corral serve --max-outbox`).
MAX_OUTBOX = 64 * 1024 * 1024

#: Seconds the server holds a script's host calls while its worker is still running, for the calls
#: it makes together to travel in one frame (see `_Connection._event`): the worker sends its next
#: request (a WAIT) right after them, unless a busy machine leaves it unscheduled for a while (on
#: 2 cores with 8 runnable processes, over 100 ms was seen). Only a call made while the script
#: goes on computing waits this long.
GATHER_SECONDS = 0.5
#: Seconds between looks at whether the worker waits, meanwhile: what a lone call may be held up by.
_GATHER_POLL = 0.0005

#: Seconds the server waits for a client to take the rest of what it was sent, and the close.
CLOSE_SECONDS = 5.0

#: Seconds a session may wait for its client's next request before it is parked (see `create_app`).
IDLE_TIMEOUT = 600.0

#: Seconds after which a connection's API key is checked again, at the client's next frame: a key
#: revoked (or, without one, the first key made) ends its open connections within this time of
#: their next request or answer, with the client's `SandboxAuthError`; one store lookup a second at most.
KEY_RECHECK = 1.0

#: Seconds a new connection has to send its OPEN frame.
OPEN_TIMEOUT = 30.0

#: Connections that have not sent their OPEN frame yet (authenticated or not), from one client
#: address and in all, that the server holds at once (`corral serve --max-pending-per-address`,
#: `--max-pending`); each may wait `OPEN_TIMEOUT` seconds. More are refused as they are accepted,
#: so that connections that never open a session cannot pile up: one address's at most as many
#: as 100 clients opening their sessions together need, and room for ten such addresses in all.
MAX_PENDING_PER_ADDRESS = 128
MAX_PENDING = 1024

#: Files and folders a session's mounts may hold (`corral serve --max-mount-files`; their bytes are
#: bounded by the frame), and files and folders (`--max-tenant-mount-files`) and bytes
#: (`--max-tenant-mount-bytes`) that the mounts of one tenant's open sessions on a server may hold
#: together. Past them an OPEN is refused before a file is written (a `ValueError`, a
#: `SandboxQuotaError`). A tenant's mounts are written one OPEN at a time, in threads of their
#: own: six OPENs of 100,000 empty files each held every OPEN of every tenant for a minute.
MAX_MOUNT_FILES = 100_000
MAX_TENANT_MOUNT_FILES = 400_000
MAX_TENANT_MOUNT_BYTES = 1024**3

_propagator = TraceContextTextMapPropagator()
_log = logging.getLogger('corral.server')

#: The WebSocket close code of an unexpected condition in the server (RFC 6455 7.4.1).
CLOSE_SERVER_ERROR = 1011


class ServerHooks:
    """What the server tells the parts that watch or bound it (metrics, quotas); every method is a
    no-op here: subclass and override what you need, and pass instances as `create_app(hooks=[...])`.

    A hook that raises a `corral.CorralError` (`SandboxQuotaError`, say) refuses what it was asked about (the client gets
    that exception with its text); any other exception is a bug of the hook, and ends the
    connection as a server error. Hooks run on the event loop: they must not block it.
    """

    async def session_requested(self, tenant: str) -> None:
        """A client sent its OPEN frame, not decoded yet: refuse here what the tenant may not open
        at all (its quota of sessions), before the server spends time decoding the frame."""

    async def session_opening(self, tenant: str, options: dict[str, Any]) -> None:
        """A client asks for a session (before any worker starts). `options` are its checkout
        options as `corral.server.protocol` carries them (`session_id`, `ephemeral`, `limits` ...)."""

    async def session_starting(self, tenant: str, session: Session) -> None:
        """The session is about to start: its type checker to check its stubs, its worker to
        start, a stored one (or the one it forks) to be replayed in it. `session_opened` follows
        when it started, else `session_closed` with None."""

    async def session_opened(self, tenant: str, session: Session) -> None:
        """The session started (its worker is up; a stored session holds its lease)."""

    async def session_closed(self, tenant: str, session: Session | None, seconds: float) -> None:
        """The connection ended after `seconds`; `session` is None when it never opened one.
        Called once for every `session_requested` that did not raise."""

    async def feed_starting(self, tenant: str, session: Session) -> None:
        """A feed, a resumption of a paused one, or a load of a state (which replays its feeds) is about to run."""

    async def feed_ended(self, tenant: str, session: Session, outcome: str, seconds: float, host_calls: int) -> None:
        """A feed ended: `outcome` is 'ok', 'paused', or the class name of the exception it raised
        (`'SandboxRuntimeError'` ...); `seconds` of wall time; `host_calls` sent to the client."""


class TenantTurns:
    """Tenants' turns at something every tenant shares (the thread that decodes large frames, the
    one that writes mounts): one at a time per tenant, so that one tenant's many connections queue
    behind each other, not in front of every other tenant's.

        async with server.decoding.turn(tenant):
            ...
    """

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}  # the tenant's lock, and its holder and waiters

    @contextlib.asynccontextmanager
    async def turn(self, tenant: str) -> AsyncIterator[None]:
        """Wait for the tenant's turn, and hold it for the block."""
        lock, users = self._locks.get(tenant) or (asyncio.Lock(), 0)
        self._locks[tenant] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[tenant]
            if users == 1:
                del self._locks[tenant]
            else:
                self._locks[tenant] = (lock, users - 1)


class CorralServer:
    """What the app serves from (`app.state.corral`): the pool, its hooks, and the live connections.

    `draining` is True once the server stops taking sessions (a readiness probe answers 503 then);
    `ceilings` maps each limit a session may lower but not raise to its ceiling (see
    `create_app(max_limits=...)`); `bounds` is `Limits()` with those ceilings, and `default_limits`
    with each default lowered to its ceiling: what a session gets for a limit it does not set.
    `sessions` counts the connections that hold a session; `decoding` and `uploading` give
    tenants their turns at the thread that decodes large frames and at those that write mounts
    (`TenantTurns`); `mounted` holds each tenant's files and folders, and bytes, of mounts in its
    open sessions here (see `MAX_MOUNT_FILES`); `pending` counts the connections that
    have not sent their OPEN frame yet, and `refused` the connections refused as they were accepted, by reason
    (`'pending_per_address'`, `'pending_total'`: see `MAX_PENDING`).
    """

    def __init__(
        self,
        pool: Pool,
        *,
        authenticate: Authenticate | None,
        hooks: Sequence[ServerHooks],
        max_frame: int,
        max_outbox: int,
        open_timeout: float,
        idle_timeout: float | None,
        max_pending: int = MAX_PENDING,
        max_pending_per_address: int = MAX_PENDING_PER_ADDRESS,
        max_limits: Mapping[str, float] | None = None,
        max_mount_files: int = MAX_MOUNT_FILES,
        max_tenant_mount_files: int = MAX_TENANT_MOUNT_FILES,
        max_tenant_mount_bytes: int = MAX_TENANT_MOUNT_BYTES,
    ) -> None:
        self.pool = pool
        self.ceilings = _ceilings(max_limits or {})
        self.bounds = replace(_DEFAULT_LIMITS, **self.ceilings)
        self.default_limits = replace(
            _DEFAULT_LIMITS, **{name: _lower(getattr(_DEFAULT_LIMITS, name), ceiling) for name, ceiling in self.ceilings.items()}
        )
        self.authenticate = authenticate
        self.hooks = tuple(hooks)
        self.max_frame = max_frame
        self.max_outbox = max_outbox
        self.open_timeout = open_timeout
        self.idle_timeout = idle_timeout
        self.max_pending = max_pending
        self.max_pending_per_address = max_pending_per_address
        self.draining = False
        self.connections: set[_Connection] = set()
        self.pending = 0
        self.refused = {'pending_per_address': 0, 'pending_total': 0}
        self._pending_by_address: dict[str, int] = {}
        self.decoding = TenantTurns()
        self.uploading = TenantTurns()
        self.max_mount_files = max_mount_files
        self.max_tenant_mount_files = max_tenant_mount_files
        self.max_tenant_mount_bytes = max_tenant_mount_bytes
        self.mounted: dict[str, tuple[int, int]] = {}

    @property
    def sessions(self) -> int:
        return sum(1 for connection in self.connections if connection.session is not None)

    async def drain(self, grace: float) -> None:
        """Stop taking sessions (`draining`), give the requests in flight `grace` seconds to end,
        then end every connection, telling its client to take the session up elsewhere (DRAIN):
        a stored session is in the store (a feed still running is undone, and the client runs it
        again elsewhere with the answers it gave); an ephemeral one travels as its state."""
        self.draining = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while any(connection.busy for connection in self.connections) and loop.time() < deadline:
            await asyncio.sleep(0.05)
        for connection in list(self.connections):
            connection.end(_Close(p.CLOSE_DRAIN, None, 'the server is shutting down'))
        deadline = loop.time() + 2 * CLOSE_SECONDS + self.pool.lease_ttl
        while self.connections and loop.time() < deadline:
            await asyncio.sleep(0.05)

    def admit(self, address: str) -> None:
        """Count a connection from `address` as pending (until `pending_ended`); raises
        `SandboxConnectionError` (no script can fix it) when `address`, or every address together,
        has as many pending as the server takes."""
        held = self._pending_by_address.get(address, 0)
        if held >= self.max_pending_per_address:
            self.refused['pending_per_address'] += 1
            raise SandboxConnectionError(
                f"too many connections from {address} wait to open a session ({self.max_pending_per_address}, "
                "the server's limit per address); open fewer at once"
            )
        if self.pending >= self.max_pending:
            self.refused['pending_total'] += 1
            raise SandboxConnectionError(
                f"too many connections wait to open a session ({self.max_pending}, the server's limit); "
                'try again later, or another replica'
            )
        self._pending_by_address[address] = held + 1
        self.pending += 1

    def pending_ended(self, address: str) -> None:
        """A connection `admit` counted sent its OPEN frame, or ended before it did."""
        self.pending -= 1
        held = self._pending_by_address.pop(address) - 1
        if held:
            self._pending_by_address[address] = held

    def checkout(self, tenant: str, **options: Any) -> Session:
        """`pool.checkout(**options)` as `tenant`: its own sessions only (checkout, resume, fork)."""
        return self.pool.checkout(tenant=tenant, **options)


def create_app(
    *,
    pool: Pool | None = None,
    store: Store | str | None = None,
    authenticate: Authenticate | None = None,
    hooks: Sequence[ServerHooks] = (),
    routes: Sequence[BaseRoute] = (),
    max_frame: int = p.MAX_FRAME,
    max_outbox: int = MAX_OUTBOX,
    open_timeout: float = OPEN_TIMEOUT,
    idle_timeout: float | None = IDLE_TIMEOUT,
    max_pending: int = MAX_PENDING,
    max_pending_per_address: int = MAX_PENDING_PER_ADDRESS,
    max_limits: Mapping[str, float] | None = None,
    allowed_origins: Collection[str] = (),
    max_mount_files: int = MAX_MOUNT_FILES,
    max_tenant_mount_files: int = MAX_TENANT_MOUNT_FILES,
    max_tenant_mount_bytes: int = MAX_TENANT_MOUNT_BYTES,
) -> Starlette:
    """The Starlette app serving sessions at `protocol.PATH` (`/session`), one WebSocket each.

    - `pool`: the `corral.Pool` sessions are checked out of (default: `Pool(store=store)`, started
      with the app, closed with it); `store`: a store or its URL, for that default pool only.
    - `authenticate`: see `Authenticate`. None: every client is the single tenant `''`, and the
      `authorization` header is ignored (serve on loopback only, as `corral serve` does).
    - `hooks`: `ServerHooks` told about sessions and feeds (metrics, quotas).
    - `routes`: more routes to serve beside the session's (`/metrics`, `/healthz`, `/readyz`).
    - `max_frame`: bytes of the largest frame taken from a client; a larger one ends its session
      with an error naming the limit. `max_outbox`: see `MAX_OUTBOX`. `open_timeout`: seconds a
      connection has to open its session. `idle_timeout`: seconds a session may wait for its
      client's next request before it is parked (None: never): its worker ends, and the client
      takes it up again when it next needs it, as after a drain (a stored one from the store, an
      ephemeral one from its state, which the server sends the client as it parks it).
    - `max_pending`, `max_pending_per_address`: connections that have not sent their OPEN frame
      yet, in all and from one client address (see `MAX_PENDING`); more are refused as they are
      accepted, with an error (and a close reason) saying which limit, and close code
      `protocol.CLOSE_BUSY`. Behind a proxy, every client has the proxy's address.
    - `max_limits`: the operator's ceilings on sessions' `Limits`, by field name (`{'memory':
      2 * 1024**3, 'wall_time': 60}`), higher or lower than the defaults. A session's `limits` may
      lower a limit with a ceiling, never raise or lift it (refused with a `ValueError` naming the
      ceiling); a limit it leaves at its default gets the ceiling when that is lower. Without a
      ceiling of their own, `memory`, `cpu_time`, `code_size`, `stub_size`, `type_check_time`,
      `type_check_memory`, `value_items` and `value_size` have the default `Limits()`'s as theirs:
      the host's CPU and memory, which every tenant shares. The ceilings on `value_items` and
      `value_size` also bound what the server decodes from one of the client's frames. Raises `ValueError` for an unknown limit or a
      value that is not a number of 0 or more (a whole one for a count of bytes, calls or items).
    - `max_mount_files`, `max_tenant_mount_files`, `max_tenant_mount_bytes`: see `MAX_MOUNT_FILES`.
    - `allowed_origins`: the web origins (`'https://app.example.com'`) whose pages may open a
      WebSocket here; an upgrade from any other web page (one with an `Origin` header) is refused
      with 403 (see `corral.server.origins`). corral's clients send no `Origin`.

    The app's state holds the `CorralServer` as `app.state.corral`.
    """
    if pool is not None and store is not None:
        raise ValueError('give the pool its store (Pool(store=...)), or a store for the default pool, not both')
    if max_frame <= 0 or max_outbox <= 0 or open_timeout <= 0 or (idle_timeout is not None and idle_timeout <= 0):
        raise ValueError('max_frame, max_outbox, open_timeout and idle_timeout must be positive')
    if max_pending <= 0 or max_pending_per_address <= 0:
        raise ValueError('max_pending and max_pending_per_address must be positive')
    if max_mount_files < 0 or max_tenant_mount_files < 0 or max_tenant_mount_bytes < 0:
        raise ValueError('max_mount_files, max_tenant_mount_files and max_tenant_mount_bytes must be 0 or more')
    own_pool = pool is None
    server = CorralServer(
        pool if pool is not None else Pool(store=store),
        authenticate=authenticate,
        hooks=hooks,
        max_frame=max_frame,
        max_outbox=max_outbox,
        open_timeout=open_timeout,
        idle_timeout=idle_timeout,
        max_pending=max_pending,
        max_pending_per_address=max_pending_per_address,
        max_limits=max_limits,
        max_mount_files=max_mount_files,
        max_tenant_mount_files=max_tenant_mount_files,
        max_tenant_mount_bytes=max_tenant_mount_bytes,
    )

    async def session_endpoint(websocket: WebSocket) -> None:
        await _Connection(server, websocket).run()

    async def monty_endpoint(websocket: WebSocket) -> None:
        await serve_monty(server, websocket, KEY_RECHECK)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if own_pool:
            await server.pool.start()
        try:
            yield
        finally:
            server.draining = True
            for connection in list(server.connections):
                connection.end()
            if own_pool:
                await server.pool.aclose()

    app = Starlette(
        routes=[WebSocketRoute(p.PATH, session_endpoint), WebSocketRoute(MONTY_PATH, monty_endpoint), *routes],
        middleware=[Middleware(OriginGuard, allowed=allowed_origins)],
        lifespan=lifespan,
    )
    app.state.corral = server
    return app


class _Close(Exception):
    """End the connection: send the client `error` (when it still reads) and close with `code`."""

    def __init__(self, code: int, error: BaseException | None, reason: str = '') -> None:
        error = None if error is None else _told(error)
        super().__init__(code, error)
        self.code = code
        self.error = error
        self.reason = reason if error is None else str(error)


def _told(error: BaseException) -> BaseException:
    """What a client is told of `error`: the error itself, unless it is a failure of the server's
    own parts, whose text names them (a store's database user, host, port and name; a bug's
    details): then a text that names none, and the details go to the server's log."""
    if isinstance(error, SandboxStoreError):
        _log.error('the session store failed: %s', error)
        return SandboxStoreError("the corral server's session store failed; try again later (the server's log has the details)")
    if p.error_message(error)[1] == 'SandboxError' and not isinstance(error, CorralError):  # neither corral's nor built-in
        _log.error('a session connection failed', exc_info=error)
        return _failed(error)
    return error


def _failed(error: BaseException) -> SandboxError:
    return SandboxError(f"the corral server failed ({type(error).__name__}); the server's log has the details")


def _check_version(version: Any) -> None:
    """Refuse a client of another protocol version than the server's, naming both."""
    if version != p.PROTOCOL_VERSION:
        raise _Close(
            p.CLOSE_PROTOCOL,
            SandboxError(
                f'this corral server speaks protocol version {p.PROTOCOL_VERSION}, the client version {version!r}: '
                'use a corral client of the same version as the server'
            ),
        )


class _Gone(Exception):
    """The client closed the connection."""


class _Closing(Exception):
    """The client asked to end the session (CLOSE): it is told when the session has ended (CLOSED)."""


class _SyncProxy:
    """A sync host function of the session: the script waits for it (the session awaits the answer).
    The call goes to the client as it is made, and the future returned is its answer."""

    __slots__ = ('_connection', '_name')

    def __init__(self, connection: _Connection, name: str) -> None:
        self._connection = connection
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._connection.call(self._name, args, kwargs)


class _AsyncProxy(_SyncProxy):
    """An async host function of the session (`is_async_callable` says so): it too returns the
    future, so that the call is queued for the client as the session runs it, not in a task's turn."""

    __slots__ = ()
    corral_awaited = True


def _proxies(connection: _Connection, functions: Any, prefix: str = '') -> dict[str, _SyncProxy]:
    if not (isinstance(functions, dict) and all(isinstance(k, str) and isinstance(v, bool) for k, v in functions.items())):
        raise ValueError('functions must map names to whether they are async')
    return {name: (_AsyncProxy if is_async else _SyncProxy)(connection, prefix + name) for name, is_async in functions.items()}


class _Connection:
    """One client's connection and the session it holds."""

    def __init__(self, server: CorralServer, websocket: WebSocket) -> None:
        self.server = server
        self.ws = websocket
        self.tenant = ''
        self.session: Session | None = None
        self._loop = asyncio.get_running_loop()
        self._events: list[list[Any]] = []
        self._calls_queued = False
        self._calls_since = 0.0
        self._flush_handle: asyncio.Handle | None = None
        self._outbox: deque[bytes] = deque()
        self._outbox_bytes = 0
        self._cut_off = False  # the client did not read: nothing more is sent
        self._wake = asyncio.Event()
        self._calls: dict[int, RemoteAnswer] = {}
        self._next_call = 0
        self._feed_calls = 0
        self._held: dict[str, list[list[Any]]] = {}
        self._request: asyncio.Task[None] | None = None
        self._main: asyncio.Task[None] | None = None
        self._ending: _Close | None = None
        self._serving = False  # until the session ends: `end()` may cancel the connection's task
        self._mount_dir: str | None = None
        self._uploading: concurrent.futures.Future[tuple[list[Mount], int]] | None = None
        self._mounted: tuple[int, int] | None = None  # files and folders, bytes: counted in `CorralServer.mounted`
        self._key: str | None = None
        self._key_checked = 0.0
        self._headers_trace = {k: v for k, v in websocket.headers.items() if k in ('traceparent', 'tracestate')}
        # `corral serve`'s link to the client's socket (`listener.DirectLink`): frames written and
        # answers taken without a task between; None under another ASGI server
        self._direct: DirectLink | None = (websocket.scope.get('extensions') or {}).get(DIRECT_LINK)
        self._receiving = False  # `_serve` waits for the client's next frame
        self._idle: asyncio.Timeout | None = None  # its wait's deadline (`idle_timeout`)

    # ----- the connection's life ------------------------------------------------------------

    async def run(self) -> None:
        await self.ws.accept()
        self.server.connections.add(self)
        writer = self._loop.create_task(self._write_loop())
        self._main = asyncio.current_task()
        started = time.monotonic()
        opening = closing = pending = False
        close = _Close(1000, None)
        address = self.ws.client.host if self.ws.client is not None else ''
        self._serving = True
        try:
            if self.server.draining:
                raise _Close(p.CLOSE_DRAIN, SandboxError('the corral server is shutting down; connect again (to another replica)'))
            try:
                self.server.admit(address)
            except SandboxConnectionError as error:
                _log.info('refused (connections): %s', error)
                raise _Close(p.CLOSE_BUSY, error) from None
            pending = True
            self.tenant = await self._authenticate()
            data = await asyncio.wait_for(self._frame(), self.server.open_timeout)
            pending = False
            self.server.pending_ended(address)
            kind = self._kind(data)
            if kind in (p.LIST, p.DELETE):  # the tenant's stored sessions, with no session opened
                self._respond(await self._manage(await self._decode(data)))
                raise _Close(1000, None)
            if kind != p.OPEN:
                raise _Close(p.CLOSE_PROTOCOL, SandboxError('the first frame of a connection must be OPEN'))
            # what the tenant may not open at all is refused before its options are decoded
            await self._hooks_opening(lambda hook: hook.session_requested(self.tenant))
            opening = True
            options = self._open_options(await self._decode(data))
            await self._hooks_opening(lambda hook: hook.session_opening(self.tenant, options))
            await self._open(options)
            await self._serve()
        except _Close as error:
            close = error
        except _Gone:
            pass
        except _Closing:
            closing = True
        except asyncio.TimeoutError:
            close = _Close(p.CLOSE_PROTOCOL, SandboxError(f'the client sent no OPEN frame within {self.server.open_timeout:g} seconds'))
        except asyncio.CancelledError:
            close = self._ending or _Close(p.CLOSE_DRAIN, None, 'the server is shutting down')
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
        except CorralError as error:
            close = _Close(p.CLOSE_ENDED, error)
        except Exception as error:  # a bug (of a hook, say): this connection ends, the server goes on
            _log.exception('a session connection failed')
            close = _Close(CLOSE_SERVER_ERROR, _failed(error))
        finally:
            if pending:
                self.server.pending_ended(address)
            self._serving = False
            if self._direct is not None:
                self._direct.take = None
            await self._end_session(drain=close.code == p.CLOSE_DRAIN)
            self.server.connections.discard(self)
            if opening:
                for hook in self.server.hooks:
                    await hook.session_closed(self.tenant, self.session, time.monotonic() - started)
        if close.error is not None and close.code != p.CLOSE_SLOW:
            self._respond(p.error_message(close.error))
        elif closing:  # the session has ended and its slot is free: a checkout the client makes next finds it so
            self._send(p.encode([p.CLOSED]))
        await self._finish_writing(writer, close.code != p.CLOSE_SLOW)
        reason = close.reason.encode('utf-8')[:120].decode('utf-8', 'ignore')  # a close frame's reason is short
        with contextlib.suppress(Exception):  # a client that does not read does not take the close either
            await asyncio.wait_for(self.ws.close(close.code, reason), CLOSE_SECONDS)

    def end(self, close: _Close | None = None) -> None:
        """End the connection from outside its task (the server shuts down, the client stopped
        reading); only the first call counts, and none once the connection is ending anyway."""
        if self._main is not None and self._serving:
            self._serving = False
            self._ending = close
            self._main.cancel()

    @property
    def busy(self) -> bool:
        """Whether a request of the client's runs."""
        return self._request is not None and not self._request.done()

    async def _end_session(self, *, drain: bool) -> None:
        if self._request is not None and not self._request.done():
            self._request.cancel()
            await asyncio.gather(self._request, return_exceptions=True)
        for future in self._calls.values():
            future.cancel()
        if self.session is not None:
            if drain:
                state = None
                if self.session.ephemeral:
                    with contextlib.suppress(SandboxError, RuntimeError):  # one that cannot be dumped ends here
                        state = await self.session.dump()
                self._send(p.encode([p.DRAIN, state]))
            await self.session.aclose()
        if self._uploading is not None:  # its mounts are written before they are removed
            with contextlib.suppress(Exception):
                await asyncio.wrap_future(self._uploading)
        if self._mount_dir is not None:  # in the thread too: removing many files holds up no session
            await asyncio.wrap_future(_UPLOADS.submit(shutil.rmtree, self._mount_dir, ignore_errors=True))
        if self._mounted is not None:
            files, size = self.server.mounted.pop(self.tenant)
            left = (files - self._mounted[0], size - self._mounted[1])
            if left != (0, 0):
                self.server.mounted[self.tenant] = left
            self._mounted = None

    async def _finish_writing(self, writer: asyncio.Task[None], wait: bool) -> None:
        self._flush()
        if wait and self._outbox:
            self._wake.set()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._drained(), CLOSE_SECONDS)
        writer.cancel()
        await asyncio.gather(writer, return_exceptions=True)

    async def _drained(self) -> None:
        while self._outbox:
            await asyncio.sleep(0.01)

    async def _hooks_opening(self, call: Callable[[ServerHooks], Awaitable[None]]) -> None:
        try:
            for hook in self.server.hooks:
                await call(hook)
        except CorralError as error:  # refused (a quota): counted as a checkout that failed
            self.server.pool.observer.checkout_failed(error)
            raise

    async def _authenticate(self) -> str:
        if self.server.authenticate is None:
            return ''
        header = self.ws.headers.get('authorization')
        self._key = header[7:].strip() if header is not None and header[:7].lower() == 'bearer ' else None
        self._key_checked = time.monotonic()
        try:
            tenant = await self.server.authenticate(self._key)
        except CorralError as error:
            self.server.pool.observer.checkout_failed(error)
            raise _Close(p.CLOSE_UNAUTHORIZED, error) from None
        if not isinstance(tenant, str):
            raise TypeError(f'authenticate must return the tenant as a str, not {type(tenant).__name__}')
        return tenant

    async def _recheck_key(self) -> None:
        """Authenticate the connection's key again when `KEY_RECHECK` seconds have passed since it
        last was: a key revoked meanwhile, or one that now gives another tenant, ends the connection
        with the client's `SandboxAuthError`. A store that fails to answer leaves it as it was."""
        if self.server.authenticate is None or time.monotonic() - self._key_checked < KEY_RECHECK:
            return
        self._key_checked = time.monotonic()
        try:
            tenant = await self.server.authenticate(self._key)
        except SandboxStoreError as error:
            _log.warning('the API key of a connection could not be checked again: %s', error)
            return
        except CorralError as error:
            raise _Close(p.CLOSE_UNAUTHORIZED, error) from None
        if tenant != self.tenant:
            raise _Close(p.CLOSE_UNAUTHORIZED, SandboxAuthError(f'the API key of this connection now belongs to another tenant than {self.tenant!r}'))

    # ----- frames in and out -------------------------------------------------------------------

    async def _frame(self) -> bytes:
        """The client's next frame, not decoded yet (see `_kind`, `_decode`)."""
        self._receiving = True
        try:
            message = await self.ws.receive()
        except (WebSocketDisconnect, RuntimeError):
            raise _Gone from None
        finally:
            self._receiving = False
        if message['type'] == 'websocket.disconnect':
            raise _Gone
        data = message.get('bytes')
        if data is None:
            raise _Close(p.CLOSE_PROTOCOL, SandboxError('the client sent a text frame; corral frames are binary (msgpack)'))
        if len(data) > self.server.max_frame:
            raise _Close(
                p.CLOSE_TOO_LARGE,
                SandboxError(f"the client sent a frame of {len(data)} bytes, larger than the server's limit of {self.server.max_frame} bytes (corral serve --max-frame)"),
            )
        return data

    def _kind(self, data: bytes) -> int:
        """The kind of a frame's message, read without decoding the rest: what the server refuses
        by kind or by its tenant's quotas, it refuses before it spends time decoding."""
        try:
            return p.kind_of(data)
        except ValueError as error:
            raise _Close(p.CLOSE_PROTOCOL, SandboxError(f'the client sent a malformed frame (ValueError: {error})')) from None

    async def _decode(self, data: bytes) -> list[Any]:
        """A frame's message. One over `_INLINE_FRAME` bytes is decoded in the thread that decodes
        workers' large frames, a few KiB at a time (`Decoder.decode_in_steps`): one client's frame
        of 330,000 small maps held the event loop, and every other session's feeds, for 3 s. A
        tenant's large frames take their turns there one at a time (`CorralServer.decoding`)."""
        items, size = self._bounds(data)
        try:
            if len(data) <= _INLINE_FRAME:
                return p.decode(data, items=items, size=size)
            decode = functools.partial(p.decode, data, items=items, size=size, in_steps=True)
            async with self.server.decoding.turn(self.tenant):
                return await self._loop.run_in_executor(_decoding_thread(), decode)
        except Exception as error:
            why = f'{type(error).__name__}: {error}' if str(error) else type(error).__name__
            raise _Close(p.CLOSE_PROTOCOL, SandboxError(f'the client sent a malformed frame ({why})')) from None

    def _bounds(self, data: bytes) -> tuple[int, int]:
        """The items and bytes the server decodes from `data` at most: a client's limits may lower
        the server's bounds, never lift them (a session's value_items=None would let one frame of
        1-byte arrays take gigabytes and hold the event loop of every session for seconds)."""
        bounds = self.server.bounds
        limits = self.session.limits if self.session is not None else bounds
        return _lower(limits.value_items, bounds.value_items) + 1024, 2 * _lower(limits.value_size, bounds.value_size) + len(data)

    def _take(self, data: bytes) -> bool:
        """The direct link's `take` (see `listener.DirectLink`), while `_serve` waits for the next
        frame: the client's answers to the host calls of a request, settled as their frame is
        parsed, and a request, started, as `_serve` would (a turn of the event loop and ASGI's
        receive sooner). Any other frame, and one that `_serve` would refuse or must look at first
        (too large, malformed, out of turn, the key's check due), is left to `_serve`, which says
        what is wrong."""
        if not self._receiving or len(data) > min(_INLINE_FRAME, self.server.max_frame):
            return False
        if self.server.authenticate is not None and time.monotonic() - self._key_checked >= KEY_RECHECK:
            return False
        try:
            kind = p.kind_of(data)
            if kind not in ((p.ANSWERS,) if self.busy else (p.FEED, p.RESUME, p.DUMP, p.LOAD)):
                return False
            items, size = self._bounds(data)
            message = p.decode(data, items=items, size=size)
            answers = self._checked_answers(message) if kind == p.ANSWERS else []
        except (Exception, _Close):
            return False
        if kind != p.ANSWERS:
            self._request = self._loop.create_task(self._handle(message))
            if self._idle is not None and self.server.idle_timeout is not None:  # idle from now, as `_serve` would wait
                self._idle.reschedule(self._loop.time() + self.server.idle_timeout)
            return True
        for future, call_id, how, value in answers:
            self._settle_call(future, call_id, how, value)
        return True

    def _send(self, data: bytes) -> None:
        if self._cut_off:
            return
        if not self._outbox and self._direct is not None and self._direct.write(data):
            return
        self._outbox.append(data)
        self._outbox_bytes += len(data)
        if self._outbox_bytes > self.server.max_outbox:
            self._cut_off = True
            self.end(_Close(p.CLOSE_SLOW, None))
        self._wake.set()

    async def _write_loop(self) -> None:
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self._outbox:
                    data = self._outbox[0]
                    await self.ws.send_bytes(data)
                    self._outbox.popleft()
                    self._outbox_bytes -= len(data)
        except (WebSocketDisconnect, RuntimeError, OSError):  # the client is gone: its reader finds out
            self._outbox.clear()

    def _event(self, event: list[Any]) -> None:
        """Queue a host call or a print. Prints go out at once; host calls once the worker waits on
        the host (so the calls of an `asyncio.gather` share a frame), or `GATHER_SECONDS` after the
        first. A sync call's worker waits already: it goes out now."""
        self._events.append(event)
        if event[0] != p.CALL:
            if self._flush_handle is None:
                self._flush_handle = self._loop.call_soon(self._flush_when_waiting)
            return
        if not self._calls_queued:
            self._calls_queued = True
            self._calls_since = time.monotonic()
        if self.session is not None and self.session.worker_waiting:
            self._flush()
        elif self._flush_handle is None or not isinstance(self._flush_handle, asyncio.TimerHandle):
            # its WAIT comes next, and sends it (`_worker_waits`); else the next look does
            if self._flush_handle is not None:
                self._flush_handle.cancel()
            self._flush_handle = self._loop.call_later(_GATHER_POLL, self._flush_when_waiting)

    def _flush_when_waiting(self) -> None:
        self._flush_handle = None
        session = self.session
        if self._calls_queued and session is not None and time.monotonic() - self._calls_since < GATHER_SECONDS and not session.worker_waiting:
            self._flush_handle = self._loop.call_later(_GATHER_POLL, self._flush_when_waiting)
            return
        self._flush()

    def _worker_waits(self) -> None:
        """The worker sent a WAIT: host calls held for it go out now, in one frame, not at the next
        look (`_GATHER_POLL`, which the event loop's millisecond timers stretch to 1 ms and more).
        Each call the worker made before it reached `call` as the session took it in."""
        if self._calls_queued:
            self._flush()

    def _flush(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        if self._events:
            events, self._events, calls, self._calls_queued = self._events, [], self._calls_queued, False
            self._send(p.encode([p.EVENTS, events]))
            if calls and self._direct is not None and not self._outbox:  # sent: the client answers at once
                self._direct.wait_briefly()

    def _respond(self, message: list[Any]) -> None:
        """Send a response; it ends with the calls the session is paused on (none when it is not)."""
        self._flush()  # what the script printed and called comes first
        pending = p.pending_items(self.session.pending_calls) if self.session is not None else []
        self._send(p.encode([*message, pending]))

    # ----- opening the session -----------------------------------------------------------------

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

    # ----- requests ----------------------------------------------------------------------------

    async def _serve(self) -> None:
        while True:
            try:  # a timeout, not wait_for: that ran every frame's receive in a task of its own
                async with asyncio.timeout(self.server.idle_timeout) as self._idle:
                    data = await self._frame()
            except TimeoutError:
                if self.busy:
                    continue
                # parked: its client takes it up again when it needs it
                raise _Close(p.CLOSE_DRAIN, None, f'the session was idle for {self.server.idle_timeout:g} seconds') from None
            kind = self._kind(data)
            if kind in (p.FEED, p.RESUME, p.DUMP, p.LOAD) and self.busy:
                raise _Close(p.CLOSE_PROTOCOL, SandboxError('the client sent a request while another was running'))
            if kind not in (p.ANSWERS, p.CLOSE, p.FEED, p.RESUME, p.DUMP, p.LOAD):
                raise _Close(p.CLOSE_PROTOCOL, SandboxError(f'the client sent a frame of unknown kind {kind!r}'))
            if kind != p.CLOSE:
                await self._recheck_key()
            message = await self._decode(data)
            if kind == p.ANSWERS:
                self._answers(message)
            elif kind == p.CLOSE:
                _shape(message, 1)
                raise _Closing
            else:
                self._request = self._loop.create_task(self._handle(message))

    async def _handle(self, message: list[Any]) -> None:
        session = self.session
        assert session is not None
        try:
            response = await self._run(session, message)
        except _Close as close:
            self.end(close)
            return
        self._respond(response)

    async def _run(self, session: Session, message: list[Any]) -> list[Any]:
        kind = message[0]
        if kind == p.DUMP:
            _shape(message, 1)
            return await self._outcome(session.dump())
        if kind == p.LOAD:  # a feed for the hooks: it replays the state's feeds
            _, state = _shape(message, 2)
            trace, held = None, []
            run = lambda: session.load_session(state)  # noqa: E731
        elif kind == p.FEED:
            _, code, functions, trace, held = _shape(message, 5)
            lookup = self._lookup(functions)
            run = lambda: session.feed_run(code, external_lookup=lookup, print_callback=self._print)  # noqa: E731
        else:
            _, values, errors, functions, trace, held = _shape(message, 6)
            if not (isinstance(values, dict) and isinstance(errors, dict)):
                raise _Close(p.CLOSE_PROTOCOL, SandboxError('the RESUME frame is malformed'))
            raised = {call_id: _error(payload) for call_id, payload in errors.items()}
            lookup = None if functions is None else self._lookup(functions)
            run = lambda: session.resume(values, errors=raised, external_lookup=lookup, print_callback=self._print)  # noqa: E731
        context = _propagator.extract(trace if isinstance(trace, dict) and trace else self._headers_trace)
        token = otel_context.attach(context)
        started = time.monotonic()
        self._feed_calls = 0
        for call_id in [call_id for call_id, future in self._calls.items() if future.done()]:  # cut off as an earlier feed ended
            del self._calls[call_id]
        self._held = self._held_answers(held)
        outcome = 'ok'
        try:
            try:
                for hook in self.server.hooks:
                    await hook.feed_starting(self.tenant, session)
            except CorralError as error:  # refused (a quota): counted as a feed that failed
                if kind != p.LOAD:
                    self.server.pool.observer.feed_ended(time.monotonic() - started, error)
                raise
            if kind != p.LOAD and session.ephemeral and session.journal_bytes > self.server.pool.max_state_bytes:
                raise SandboxStateError(
                    f'this session keeps {session.journal_bytes:,} bytes of scripts and what came into them, more than the '
                    f"{self.server.pool.max_state_bytes:,} (max_state_bytes) a session of this server may keep: "
                    'it runs no more feeds; open a new session'
                )
            value = await run()
            unused = [entry for entries in self._held.values() for entry in entries]
            if unused:
                outcome = 'SandboxWorkerError'
                return p.error_message(SandboxWorkerError(_diverged(unused)))
            return [p.RESULT, value, None if kind == p.LOAD else session.value_repr]
        except SandboxPaused:
            outcome = 'paused'
            return [p.PAUSED]
        except BaseException as error:
            outcome = type(error).__name__
            if isinstance(error, Exception):
                return p.error_message(_told(error))
            raise
        finally:
            self._held = {}
            otel_context.detach(token)
            for hook in self.server.hooks:
                await hook.feed_ended(self.tenant, session, outcome, time.monotonic() - started, self._feed_calls)

    async def _outcome(self, awaitable: Awaitable[Any]) -> Any:
        try:
            return [p.RESULT, await awaitable, None]
        except Exception as error:
            return p.error_message(_told(error))

    def _lookup(self, functions: Any) -> dict[str, _SyncProxy]:
        try:
            return _proxies(self, functions)
        except ValueError as error:
            raise _Close(p.CLOSE_PROTOCOL, SandboxError(f'the client sent a malformed frame ({error})')) from None

    def _print(self, stream: str, text: str) -> None:
        self._event([p.OUTPUT, stream, text])

    # ----- host calls --------------------------------------------------------------------------

    def _held_answers(self, held: Any) -> dict[str, list[list[Any]]]:
        """The answers a client gave to host calls of this request's first attempt, on a server
        that went away: `[name, args, kwargs, how, value]` each, by function name."""
        if not isinstance(held, list):
            raise _Close(p.CLOSE_PROTOCOL, SandboxError('the held answers are malformed'))
        by_name: dict[str, list[list[Any]]] = {}
        for entry in held:
            if not (isinstance(entry, list) and len(entry) == 5 and isinstance(entry[0], str) and isinstance(entry[1], list) and isinstance(entry[2], dict)):
                raise _Close(p.CLOSE_PROTOCOL, SandboxError('the held answers are malformed'))
            if entry[3] not in ('ok', 'error', 'deferred') or (entry[3] == 'error' and not _is_error_payload(entry[4])):
                raise _Close(p.CLOSE_PROTOCOL, SandboxError('the held answers are malformed'))
            by_name.setdefault(entry[0], []).append(entry)
        return by_name

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> RemoteAnswer:
        """Send a host call to the client; the future is its answer. A call the client already
        answered in this request's first attempt (same function, equal arguments) is answered with
        what it answered then, and does not run again."""
        future = RemoteAnswer(loop=self._loop)
        entries = self._held.get(name)
        if entries:
            for index, (_, held_args, held_kwargs, how, value) in enumerate(entries):
                if held_args == list(args) and held_kwargs == kwargs:
                    del entries[index]
                    self._settle_call(future, -1, how, value)
                    return future
        call_id = self._next_call
        self._next_call += 1
        self._feed_calls += 1
        self._calls[call_id] = future  # until it is answered (`_settle_call`), or the next request starts
        self._event([p.CALL, call_id, name, list(args), kwargs])
        return future

    def _answers(self, message: list[Any]) -> None:
        for future, call_id, how, value in self._checked_answers(message):
            self._settle_call(future, call_id, how, value)

    def _checked_answers(self, message: list[Any]) -> list[tuple[RemoteAnswer, int, str, Any]]:
        """The answers of an ANSWERS frame to calls still waiting, `(future, call_id, how, value)`
        each, all checked before any is settled; raises `_Close` for a frame that breaks the rules."""
        _, answers = _shape(message, 2)
        if not isinstance(answers, list):
            raise _Close(p.CLOSE_PROTOCOL, SandboxError('the ANSWERS frame is malformed'))
        checked: list[tuple[RemoteAnswer, int, str, Any]] = []
        taken: set[int] = set()
        for answer in answers:
            if not (isinstance(answer, list) and len(answer) == 3 and type(answer[0]) is int):  # a bool is no call id
                raise _Close(p.CLOSE_PROTOCOL, SandboxError('the ANSWERS frame is malformed'))
            call_id, how, value = answer
            if not 0 <= call_id < self._next_call:
                raise _Close(p.CLOSE_PROTOCOL, SandboxError(f'the client answered call {call_id}, which the server never made'))
            future = self._calls.get(call_id)
            if future is None or future.done() or call_id in taken:
                continue  # a call of a feed that has ended, or already answered
            if how not in ('ok', 'error', 'deferred'):
                raise _Close(p.CLOSE_PROTOCOL, SandboxError(f'the client answered call {call_id} in an unknown way {how!r}'))
            if how == 'error' and not _is_error_payload(value):
                raise _Close(p.CLOSE_PROTOCOL, SandboxError('the client sent a malformed error answer'))
            taken.add(call_id)
            checked.append((future, call_id, how, value))
        return checked

    def _settle_call(self, future: RemoteAnswer, call_id: int, how: Any, value: Any) -> None:
        """Answer a call; the session sends the answer to the worker before this returns."""
        self._calls.pop(call_id, None)
        if future.done():  # let go by the session as an answer before it in the frame was taken
            return
        if how == 'ok':
            future.settle(value)
        elif how == 'error':
            future.settle(error=_error(value))
        elif how == 'deferred':
            future.settle(error=Deferred(value))
        else:
            raise _Close(p.CLOSE_PROTOCOL, SandboxError(f'the client answered call {call_id} in an unknown way {how!r}'))


#: Where the sessions' checkout options are made, off the event loop; their mounts are not written here.
_PREPARING = concurrent.futures.ThreadPoolExecutor(thread_name_prefix='corral-options')
#: Where the sessions' mounts are written and removed: one upload of a tenant's at a time
#: (`CorralServer.uploading`), so that one tenant's uploads hold one of these threads at most.
_UPLOADS = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix='corral-mounts')

#: The defaults of a session's limits; with the server's ceilings, its bounds (`CorralServer.bounds`).
_DEFAULT_LIMITS = Limits()
#: The limits a client may lower but not raise even without an operator's ceiling (their ceiling is
#: then the default): the CPU and memory its worker and its type check take from the host, which
#: every tenant shares (a tenant's CPU quota is checked as a feed starts, so a feed's own
#: `cpu_time` is what bounds it), the bytes of each script (kept for the session's life: see
#: `_run`), and the items and bytes of the values the server decodes from
#: its worker and its client (a session's `value_items=None` let one result of 8 million empty
#: lists grow the server by 580 MB).
_CEILINGS = ('memory', 'cpu_time', 'code_size', 'stub_size', 'type_check_time', 'type_check_memory', 'value_items', 'value_size')


def _ceilings(max_limits: Mapping[str, float]) -> dict[str, float]:
    """The ceilings of `create_app(max_limits=...)`, each of the type of its limit's default; `_CEILINGS` by default."""
    names = [field.name for field in fields(Limits)]
    ceilings: dict[str, float] = {name: getattr(_DEFAULT_LIMITS, name) for name in _CEILINGS}
    for name, value in max_limits.items():
        if name not in names:
            raise ValueError(f'unknown limit {name!r} for a ceiling; the limits are the fields of corral.Limits: {", ".join(names)}')
        whole = isinstance(getattr(_DEFAULT_LIMITS, name), int)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 <= value < float('inf')) or (whole and value != int(value)):
            raise ValueError(f'the ceiling of {name} must be {"a whole number" if whole else "a number"} of 0 or more, not {value!r}')
        ceilings[name] = int(value) if whole else float(value)
        try:  # in the range a session's limit may take
            Limits(**{name: ceilings[name]})
        except ValueError as error:
            raise ValueError(f'the ceiling of {name} is out of range: {error}') from None
    return ceilings


def _lower(limit: int | None, bound: int | None) -> int:
    """The smaller of a session's limit and the server's bound (None: no limit)."""
    assert bound is not None
    return bound if limit is None else min(limit, bound)


class _Malformed(ValueError):
    """A frame's content does not have the protocol's shape."""


class _OverBytes(Exception):
    """A client's mounts hold more bytes than its tenant has left (`size`: theirs)."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


def _shape(message: list[Any], length: int) -> list[Any]:
    if len(message) != length:
        raise _Close(p.CLOSE_PROTOCOL, SandboxError(f'the client sent a malformed frame (kind {message[0]} with {len(message)} items, expected {length})'))
    return message


def _is_error_payload(payload: Any) -> bool:
    return isinstance(payload, list) and len(payload) == 2 and isinstance(payload[0], str) and isinstance(payload[1], list)


def _error(payload: Any) -> Exception:
    """The exception a host function raised in the client, `[class name, args]` as `exception_payload` made it."""
    if not _is_error_payload(payload):
        raise _Close(p.CLOSE_PROTOCOL, SandboxError('the client sent a malformed error answer'))
    return p.builtin_exception(payload[0], payload[1])


def _diverged(unused: list[list[Any]]) -> str:
    calls = ', '.join(f'{name}({bounded_repr(args, limit=200)[1:-1]}{", " if args and kwargs else ""}{", ".join(f"{k}={bounded_repr(v, limit=200)}" for k, v in kwargs.items())})' for name, args, kwargs, _, _ in unused)
    return (
        f'the feed was taken up again on another server after the first went away, and took another path: {calls} '
        'ran once in your process during the first attempt, but the second attempt did not call it again; the feed ran, '
        'but the effects of those calls are not in its result'
    )


def _inside(root: str, rel: Any) -> str:
    """`root/rel` for a relative path that stays inside `root`."""
    if not isinstance(rel, str) or not rel or '\x00' in rel or rel.startswith('/') or posixpath.normpath(rel) != rel or rel.split('/')[0] == '..':
        raise _Malformed(f'a mount path {rel!r} is not a plain relative path')
    return os.path.join(root, rel)
