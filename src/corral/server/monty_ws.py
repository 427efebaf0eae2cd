"""Monty's wire protocol over WebSocket, at `PATH` on `corral serve`: the door the clients of
Monty's protocol dial (`pydantic_monty.AsyncMontyWebsocket`, `logfire.agent_sandboxes()`).

One binary message per frame, each one protobuf message (a `ParentRequest` from the client, a
`ChildEvent` to it), no length prefix; one connection serves one client's checkouts with the same
turn machine as the stdio child (`MontyChild`), over the server's shared pool. The
`Authorization: Bearer ...` token is a corral API key, checked by the server's own `authenticate`:
the same tenants, quotas (the server's hooks) and anonymous-on-loopback rule as corral's own
protocol. A refused caller is answered with a `FatalError` naming why, then the connection closes
(4401 for a key, as corral's protocol does). `Persistence.STORED` checks out a stored session of
the caller's tenant, named in the `Ok`'s `session_id`. The `traceparent` header continues the
caller's trace in each feed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from starlette.websockets import WebSocket, WebSocketDisconnect

from ..errors import CorralError, SandboxStoreError
from ..host.session import Session
from ..monty import monty_v1_pb2 as pb
from ..monty.turns import Closed, MontyChild, parse_request
from . import protocol as p

if TYPE_CHECKING:
    from .app import CorralServer

__all__ = ['PATH', 'serve_monty']

#: Where the server answers Monty's protocol (the path `logfire.agent_sandboxes()` derives).
PATH = '/monty-ws/'

_log = logging.getLogger('corral.server')
_propagator = TraceContextTextMapPropagator()
_SESSION_ID = re.compile(rb'[0-9a-f]{32}')


class WebSocketLink:
    """One client's requests and events over a WebSocket (see `turns.Link`): the first request
    within the server's `open_timeout`, none larger than its `max_frame`; events wait in an
    outbox of at most `max_outbox` bytes, sent by a task of their own."""

    def __init__(self, server: CorralServer, websocket: WebSocket, opened: Callable[[], None]) -> None:
        self._server = server
        self._ws = websocket
        self._opened: Callable[[], None] | None = opened  # called once, when the first request came (or the link closed)
        self._outbox: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._outbox_bytes = 0
        self.cut_off = False

    async def receive(self) -> pb.ParentRequest | None:
        """The next request; None when the client closed, sent nothing in time, or did not read."""
        if self.cut_off:
            return None
        try:
            if self._opened is not None:
                try:
                    message = await asyncio.wait_for(self._ws.receive(), self._server.open_timeout)
                except asyncio.TimeoutError:
                    return None
                finally:
                    opened, self._opened = self._opened, None
                    opened()
            else:
                message = await self._ws.receive()
        except (WebSocketDisconnect, RuntimeError):
            return None
        if message['type'] == 'websocket.disconnect':
            return None
        data = message.get('bytes')
        if data is None:
            raise ValueError('a text frame: each frame is one binary protobuf ParentRequest')
        if len(data) > self._server.max_frame:
            raise OverflowError(f"a request of {len(data)} bytes is larger than the server's limit of {self._server.max_frame} bytes (corral serve --max-frame)")
        return parse_request(data)

    def send(self, event: pb.ChildEvent) -> None:
        if self.cut_off:
            return
        data = event.SerializeToString()
        self._outbox_bytes += len(data)
        if self._outbox_bytes > self._server.max_outbox:  # the client does not read: it gets nothing more
            self.cut_off = True
            self._outbox.put_nowait(None)
            return
        self._outbox.put_nowait(data)

    async def write(self) -> None:
        """Send the outbox's events until `close()` (or the client is cut off)."""
        while (data := await self._outbox.get()) is not None:
            self._outbox_bytes -= len(data)
            await self._ws.send_bytes(data)

    def close(self) -> None:
        self._outbox.put_nowait(None)


class _ServedChild(MontyChild):
    """The turn machine with a tenant: checkouts through the server's hooks, feeds in the caller's trace."""

    def __init__(self, server: CorralServer, link: WebSocketLink, tenant: str, key: str | None, key_recheck: float, trace: dict[str, str]) -> None:
        super().__init__(server.pool, link)
        self._server = server
        self._tenant = tenant
        self._key, self._key_recheck, self._key_checked = key, key_recheck, time.monotonic()
        self._trace = trace
        self._opened_at: dict[Session, float] = {}  # when each session was requested
        self._fork: str | None = None
        self._fork_modules: dict[str, str | None] = {}  # the stubs of each module the fork was offered
        self.draining = False  # the next request is answered with ShutdownDump
        self.feeding = False
        self._feed_outcome = 'ok'  # how the feed running ended, for the hooks: 'ok' or the error's type

    def _ended(self, event: pb.ChildEvent) -> None:
        kind = event.WhichOneof('kind')
        if kind == 'error':
            self._feed_outcome = event.error.exception.exc_type
        elif kind == 'typing_error':
            self._feed_outcome = 'TypingError'
        super()._ended(event)

    async def _handle(self, request: pb.ParentRequest) -> None:
        if self.draining:
            await self._hand_over()
        await self._recheck_key()
        await super()._handle(request)

    async def _recheck_key(self) -> None:
        """Authenticate the connection's key again when `key_recheck` seconds have passed since it
        last was: a key revoked meanwhile, or one that now gives another tenant, ends the connection
        with a `FatalError`. A store that fails to answer leaves it as it was."""
        server = self._server
        if server.authenticate is None or time.monotonic() - self._key_checked < self._key_recheck:
            return
        self._key_checked = time.monotonic()
        try:
            tenant = await server.authenticate(self._key)
        except SandboxStoreError as error:
            _log.warning('the API key of a connection could not be checked again: %s', error)
            return
        except CorralError as error:
            self._fatal(str(error))
        if tenant != self._tenant:
            self._fatal(f'the API key of this connection now belongs to another tenant than {self._tenant!r}')

    async def _hand_over(self) -> None:
        """The server drains: the session goes on at another replica. A stored one is in the store:
        `ShutdownDump` names its id, which the client's `auto_resume` loads at another replica; an
        ephemeral one travels as its signed state (the client's `MontyShutdown.dump`, to load)."""
        session = self._session
        if session is None:
            self._fatal('the corral server is shutting down; connect again (to another replica)')
        event = pb.ChildEvent(shutdown=pb.ShutdownDump())
        if not session.ephemeral:
            event.shutdown.dump = session.session_id.encode()
        else:
            with contextlib.suppress(CorralError, RuntimeError):  # one that cannot be dumped ends here
                event.shutdown.dump = await session.dump()
        await self._end_session()
        self._send(event)
        raise Closed

    def _checkout(self, config: pb.Configure) -> Session:
        options = self._checkout_options(config)
        if self._fork is not None:  # a new stored session from the tenant's stored one, offered its modules
            restored = self._fork_modules
            offer = lambda modules: self._offer_state_modules(session, modules, restored)  # noqa: E731
            session = self._server.checkout(self._tenant, session_id=self._fork, fork=True, modules=offer, **options)
            return session
        return self._server.checkout(self._tenant, ephemeral=config.persistence != pb.PERSISTENCE_STORED, **options)

    async def _load(self, load: pb.Load) -> None:
        """`Load` of a stored session's id (what `session_id` named): a new stored session of the
        tenant's from it, in place of the fresh one the client configured, offered the modules the
        stored session had as a dump's `Load` offers them; a signed state loads as the stdio child
        loads it."""
        if _SESSION_ID.fullmatch(load.state) is None:
            await super()._load(load)
            return
        self._fork, self._fork_modules = load.state.decode(), {}
        try:
            session = await self._open(self._config)
        except (ValueError, TypeError, CorralError) as error:  # the session configured goes on
            self._refused(error)
            return
        finally:
            self._fork = None
        await self._end_session()
        self._started_from_state(session, self._config, self._fork_modules)

    async def _open(self, config: pb.Configure) -> Session:
        hooks, tenant = self._server.hooks, self._tenant
        await self._server.opening_hooks(lambda hook: hook.session_requested(tenant))
        started = time.monotonic()
        try:
            await self._server.opening_hooks(lambda hook: hook.session_opening(tenant, {'persistence': pb.Persistence.Name(config.persistence)}))
            session = self._checkout(config)
            for hook in hooks:
                await hook.session_starting(tenant, session)
            await session.__aenter__()
            for hook in hooks:
                await hook.session_opened(tenant, session)
        except BaseException:
            for hook in hooks:
                await hook.session_closed(tenant, None, time.monotonic() - started)
            raise
        self._opened_at[session] = started
        return session

    async def _close(self, session: Session) -> None:
        await super()._close(session)
        for hook in self._server.hooks:
            await hook.session_closed(self._tenant, session, time.monotonic() - self._opened_at.pop(session))

    async def _feed(self, feed: pb.Feed) -> None:
        session = self._session
        assert session is not None
        started, self._feed_outcome = time.monotonic(), 'ok'
        calls = self._next_call  # the parent's calls of the session so far
        try:
            for hook in self._server.hooks:
                await hook.feed_starting(self._tenant, session)
        except CorralError as error:  # refused (a quota): counted as a feed that failed
            self._server.pool.observer.feed_ended(time.monotonic() - started, error)
            self._error('RuntimeError', str(error))
            return
        token = otel_context.attach(_propagator.extract(self._trace))
        self.feeding = True
        try:
            await super()._feed(feed)
        except BaseException as error:
            self._feed_outcome = type(error).__name__
            raise
        finally:
            self.feeding = False
            otel_context.detach(token)
            for hook in self._server.hooks:
                await hook.feed_ended(self._tenant, session, self._feed_outcome, time.monotonic() - started, self._next_call - calls)


class _Connection:
    """What the server sees of a connection (`CorralServer.connections`): its session, whether a
    feed runs, and `end()`: a drain hands the session over at the client's next request, when no
    feed runs; else (a feed past the drain's grace, the server stopping) the connection ends."""

    def __init__(self, child: _ServedChild, task: asyncio.Task[Any] | None) -> None:
        self._child = child
        self._task = task

    @property
    def session(self) -> Session | None:
        return self._child._session

    @property
    def busy(self) -> bool:
        return self._child.feeding

    def end(self, close: Any = None) -> None:
        if getattr(close, 'code', None) == p.CLOSE_DRAIN and not self.busy:
            self._child.draining = True
        elif self._task is not None:
            self._task.cancel()


async def serve_monty(server: CorralServer, websocket: WebSocket, key_recheck: float) -> None:
    """Serve one connection of Monty's protocol until the client shuts it down or goes; its API key
    is checked again before a request when `key_recheck` seconds have passed since it last was."""
    await websocket.accept()
    address = websocket.client.host if websocket.client is not None else ''
    pending = False

    def opened() -> None:
        nonlocal pending
        if pending:
            pending = False
            server.pending_ended(address)

    link = WebSocketLink(server, websocket, opened)
    writer = asyncio.get_running_loop().create_task(link.write())
    code = 1000
    try:
        refusal, code = await _admit(server, websocket, address)
        if refusal is None:
            pending = True
            tenant = await _authenticate(server, websocket)
            if isinstance(tenant, str):
                trace = {k: v for k, v in websocket.headers.items() if k in ('traceparent', 'tracestate')}
                child = _ServedChild(server, link, tenant, _bearer(websocket), key_recheck, trace)
                connection = _Connection(child, asyncio.current_task())
                server.connections.add(connection)  # type: ignore[arg-type]  # counted, drained, ended with the others
                try:
                    await child.serve()
                finally:
                    server.connections.discard(connection)  # type: ignore[arg-type]
            else:
                refusal, code = tenant
        if refusal is not None:  # the client's first request is answered with why it is refused
            if await link.receive() is not None:
                link.send(pb.ChildEvent(fatal_error=pb.FatalError(message=refusal)))
    except Exception:  # a bug: this connection ends, the server goes on
        _log.exception('a Monty protocol connection failed')
        code = 1011
    finally:
        opened()
        link.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer, 2)
        writer.cancel()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(websocket.close(code), 2)


async def _admit(server: CorralServer, websocket: WebSocket, address: str) -> tuple[str | None, int]:
    if server.draining:
        return 'the corral server is shutting down; connect again (to another replica)', p.CLOSE_DRAIN
    try:
        server.admit(address)
    except CorralError as error:
        return str(error), p.CLOSE_BUSY
    return None, 1000


def _bearer(websocket: WebSocket) -> str | None:
    header = websocket.headers.get('authorization')
    return header[7:].strip() if header is not None and header[:7].lower() == 'bearer ' else None


async def _authenticate(server: CorralServer, websocket: WebSocket) -> str | tuple[str, int]:
    """The caller's tenant, or why it is refused and the close code."""
    if server.authenticate is None:
        return ''
    try:
        tenant = await server.authenticate(_bearer(websocket))
    except CorralError as error:
        server.pool.observer.checkout_failed(error)
        return str(error), p.CLOSE_UNAUTHORIZED
    if not isinstance(tenant, str):
        raise TypeError(f'authenticate must return the tenant as a str, not {type(tenant).__name__}')
    return tenant
