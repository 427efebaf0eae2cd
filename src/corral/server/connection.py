"""One client's connection and the session it holds (`_Connection`): its life (authentication and
key re-checks, the end), frames in and out (reading, decoding within bounds, the writer and its
flushes), and the request loop that runs feeds; opening the session (`.opening`) and its host
calls (`.calls`) are parts of it of their own."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import shutil
import time
from collections import deque
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from starlette.websockets import WebSocket, WebSocketDisconnect

from ..errors import CorralError, SandboxAuthError, SandboxConnectionError, SandboxError, SandboxStateError, SandboxStoreError, SandboxWorkerError
from ..host.channel import _INLINE_FRAME, _decoding_thread
from ..host.deferred import RemoteAnswer, SandboxPaused
from ..host.os_access import Mount
from ..host.session import Session
from . import protocol as p
from .calls import ClientCalls, _diverged, _error, _proxies, _SyncProxy
from .ceilings import _lower
from .ending import CLOSE_SERVER_ERROR, _Close, _Closing, _failed, _Gone, _log, _shape, _told
from .listener import DIRECT_LINK, DirectLink
from .opening import _UPLOADS, Opening

if TYPE_CHECKING:
    from .app import CorralServer

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

#: Seconds after which a connection's API key is checked again, at the client's next frame: a key
#: revoked (or, without one, the first key made) ends its open connections within this time of
#: their next request or answer, with the client's `SandboxAuthError`; one store lookup a second at most.
KEY_RECHECK = 1.0

_propagator = TraceContextTextMapPropagator()


class _Connection(Opening, ClientCalls):
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
            await self.server.opening_hooks(lambda hook: hook.session_requested(self.tenant))
            opening = True
            options = self._open_options(await self._decode(data))
            await self.server.opening_hooks(lambda hook: hook.session_opening(self.tenant, options))
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
