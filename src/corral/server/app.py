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
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, WebSocketRoute
from starlette.websockets import WebSocket

from ..errors import CorralError, SandboxConnectionError
from ..host.pool import Pool
from ..host.session import Session
from ..store import Store
from . import connection as _connection
from . import protocol as p
from .ceilings import _DEFAULT_LIMITS, _ceilings, _lower
from .connection import GATHER_SECONDS, KEY_RECHECK, _Connection  # exported; read from `_connection`, where they are set
from .ending import _Close
from .hooks import Authenticate, ServerHooks, TenantTurns
from .monty_ws import PATH as MONTY_PATH, serve_monty
from .origins import OriginGuard

__all__ = [
    'create_app', 'CorralServer', 'ServerHooks', 'Authenticate', 'MAX_OUTBOX', 'GATHER_SECONDS', 'OPEN_TIMEOUT', 'IDLE_TIMEOUT',
    'MAX_PENDING', 'MAX_PENDING_PER_ADDRESS', 'KEY_RECHECK', 'TenantTurns', 'MAX_MOUNT_FILES', 'MAX_TENANT_MOUNT_FILES',
    'MAX_TENANT_MOUNT_BYTES',
]

#: Bytes the server holds for a client that does not read what it is sent (its prints, its host
#: calls); past this the client is cut off and its session ends (`corral serve --max-outbox`).
MAX_OUTBOX = 64 * 1024 * 1024

#: Seconds a session may wait for its client's next request before it is parked (see `create_app`).
IDLE_TIMEOUT = 600.0

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
        deadline = loop.time() + 2 * _connection.CLOSE_SECONDS + self.pool.lease_ttl
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

    async def opening_hooks(self, call: Callable[[ServerHooks], Awaitable[None]]) -> None:
        """Ask every hook `call(hook)` about a session a client asks for, before it opens. A hook's
        `CorralError` (a quota refused) is counted as a checkout that failed and raised."""
        try:
            for hook in self.hooks:
                await call(hook)
        except CorralError as error:
            self.pool.observer.checkout_failed(error)
            raise

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
        await serve_monty(server, websocket, _connection.KEY_RECHECK)  # the setting both doors read, at each connection

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
