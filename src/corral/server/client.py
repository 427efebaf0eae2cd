"""`RemotePool`: sessions served by `corral serve`, whose host functions run in this process.

    async with corral.RemotePool('ws://127.0.0.1:8765', api_key=KEY) as pool:
        async with pool.checkout(type_check=True, type_check_stubs=STUBS) as session:
            result = await session.feed_run(code, external_lookup={'get_order': get_order})

The API is `Pool`'s. The server type-checks and runs the script; each host call it makes comes
back over the session's connection and runs here (sync functions on the event loop, async ones as
tasks, as a local session runs them), and the script's prints reach `print_callback` as they
happen. Errors are the exceptions a local session raises, with the same texts.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import datetime
import inspect
import os
import posixpath
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import msgpack
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ..channel import idle, poll_readable
from ..errors import CorralError, OperatorError, SandboxConnectionError, SandboxError, SandboxSessionBusyError, SandboxWorkerError
from ..host.deferred import Deferred, PendingCall, SandboxPaused
from ..host.external import ExternalModule, exception_payload, is_async_callable
from ..host.os_access import MAX_FILE, Mount, OsAccess
from ..host.pool import Pool
from ..host.session import PrintCallback, _checked_lookup, print_to_host
from ..limits import Limits
from ..values import ValueLimitError, describe_type, fits, host_default, measure, not_given, pack
from . import protocol as p

__all__ = ['RemotePool', 'RemoteSession', 'pool_from_environment', 'CLOSE_TIMEOUT']

_propagator = TraceContextTextMapPropagator()
_ARRAY = msgpack.Packer()
#: Bytes of a frame's envelope beside the answers it carries.
_ENVELOPE = 64
#: The default limits: a session's limits that differ from these are sent to the server.
_DEFAULT_LIMITS = Limits()
#: Attempts at one request, each on a connection of its own, before a lost connection is final.
_RESUMES = 4
#: Seconds a session's close waits, by default, for the server to say the session has ended
#: (`RemotePool(close_timeout=...)`): ending it kills its worker and gives back its lease and its
#: tenant's slot, which takes milliseconds unless the store is slow.
CLOSE_TIMEOUT = 10.0


class _Lost(Exception):
    """The server ended the connection before it answered (`RemoteSession._lost` says why)."""


class RemotePool:
    """Sessions served by a `corral serve` at `url` (`ws://host:port`, `wss://...`; `http(s)://`
    is taken to mean the same), with `Pool`'s API. Use as an async context manager.

    `api_key` is sent as `authorization: Bearer <key>`. Each session is one WebSocket connection,
    opened when the session is entered (`async with pool.checkout(...)`) and closed when it is left;
    the pool itself holds no connection. `open_timeout`: seconds to connect and open a session.
    `close_timeout`: seconds a session's close waits for the server to say the session has ended
    (and no longer counts in the tenant's `concurrent_sessions`, so that a checkout made after
    the close is not refused for the slot the closed session held). `max_frame`: bytes of the
    largest frame taken from the server.

    A session the server lets go (it drains on SIGTERM) or loses (it died) is taken up again on
    another replica behind the same URL, and the request in flight sent again with the answers its
    host calls gave here, so that none runs twice: a stored session (`ephemeral=False`) from the
    store, an ephemeral one from the state a draining server sends. `resume_timeout`: seconds to
    keep trying (a dead replica's lease on a stored session lasts its `--lease-ttl`).

    The proxy the environment names for `url` (`HTTPS_PROXY`, `NO_PROXY`, ..., as websockets reads
    them) is looked up once, at the pool's first connection.
    """

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        open_timeout: float = 30.0,
        resume_timeout: float = 60.0,
        close_timeout: float = CLOSE_TIMEOUT,
        max_frame: int = p.MAX_FRAME,
    ) -> None:
        parts = urlsplit(url)
        scheme = {'http': 'ws', 'https': 'wss', 'ws': 'ws', 'wss': 'wss'}.get(parts.scheme)
        if scheme is None or not parts.netloc:
            raise ValueError(f'the corral server URL must be ws://host:port or wss://host:port, not {url!r}')
        self.url = urlunsplit((scheme, parts.netloc, parts.path.rstrip('/') + p.PATH, parts.query, ''))
        self.api_key = api_key
        self.open_timeout = open_timeout
        self.resume_timeout = resume_timeout
        self.close_timeout = close_timeout
        self.max_frame = max_frame
        self._sessions: set[RemoteSession] = set()
        self._closed = False
        self._proxy: dict[str, str | None] | None = None

    async def __aenter__(self) -> RemotePool:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Nothing to start: sessions connect when they are entered (kept for `Pool`'s API)."""

    async def list_sessions(self) -> list[str]:
        """The ids of the stored sessions of this pool's tenant (its API key's) on the server,
        sorted. Raises `SandboxConnectionError`, `SandboxAuthError`, `SandboxStoreError` as a checkout does."""
        return (await self._manage([p.LIST, p.PROTOCOL_VERSION]))[1]

    async def delete_session(self, session_id: str) -> None:
        """Delete this tenant's stored session `session_id` on the server, with its records, giving
        back the bytes it held (the tenant's `stored_bytes`). Raises `SandboxStateError` when it is
        not stored, `SandboxSessionBusyError` while it is checked out, `ValueError` for a malformed id,
        and what `list_sessions` raises."""
        if not isinstance(session_id, str):
            raise TypeError(f'session_id must be a str, not {type(session_id).__name__}')
        await self._manage([p.DELETE, p.PROTOCOL_VERSION, session_id])

    def _connect_options(self) -> dict[str, Any]:
        """The options of websockets' `connect` for this pool's connections but the headers."""
        if self._proxy is None:  # websockets looked it up at each connection, reading the whole environment twice
            try:
                from websockets.proxy import get_proxy
                from websockets.uri import parse_uri
            except ImportError:  # a websockets before 15 uses no proxy
                self._proxy = {}
            else:
                self._proxy = {'proxy': get_proxy(parse_uri(self.url))}
        return {'max_size': self.max_frame, 'compression': None, 'open_timeout': None, **self._proxy}

    async def _manage(self, message: list[Any]) -> list[Any]:
        """Send LIST or DELETE on a connection of its own; the server's answer."""
        from websockets.asyncio.client import connect
        from websockets.exceptions import ConnectionClosed

        headers = {} if self.api_key is None else {'authorization': f'Bearer {self.api_key}'}
        try:
            ws = await asyncio.wait_for(connect(self.url, additional_headers=headers, **self._connect_options()), self.open_timeout)
        except Exception as error:  # OSError, a timeout, or the server refused the upgrade
            raise SandboxConnectionError(f'cannot connect to the corral server at {self.url}: {error}') from None
        try:
            try:
                await ws.send(p.encode(message))
            except ConnectionClosed:  # the server refused the connection first (a key): its ERROR is still to be read
                pass
            reply = p.decode(await asyncio.wait_for(ws.recv(), self.open_timeout))
        except ConnectionClosed as closed:
            raise _closed_error(closed) from None
        except (ValueError, TypeError) as error:
            raise SandboxError(f'the corral server sent a malformed frame ({type(error).__name__}: {error})') from None
        finally:
            await _close(ws)
        if reply[0] == p.ERROR and len(reply) == 5:
            raise p.error_from(reply[1], reply[2], reply[3])
        expected = {p.LIST: p.SESSIONS, p.DELETE: p.DELETED}[message[0]]
        if reply[0] == expected and (expected == p.DELETED or (len(reply) == 3 and isinstance(reply[1], list))):
            return reply
        raise SandboxError('the corral server sent a malformed response')

    async def aclose(self) -> None:
        """End the sessions still open (a stored session stays in the server's store)."""
        self._closed = True
        for session in list(self._sessions):
            await session.aclose()

    def checkout(
        self,
        *,
        type_check: bool = False,
        type_check_stubs: str | None = None,
        external_modules: Mapping[str, ExternalModule] | None = None,
        ephemeral: bool | None = None,
        session_id: str | None = None,
        fork: bool = False,
        limits: Limits | None = None,
        script_name: str = 'main.py',
        os_access: OsAccess | None = None,
        mounts: Mount | Sequence[Mount] | None = None,
        random_seed: int | None = None,
    ) -> RemoteSession:
        """A new session on the server, started by `async with`: `Pool.checkout`'s options and errors.

        Mounts travel to the server when the session opens: an overlay or read-only mount's files
        are sent (up to the server's frame limit in all), and the script's overlay writes stay in
        the session there. A read-write mount, an `OsAccess` subclass, or a clock function cannot
        be served from the server and raise `ValueError`. The clock (`clock=True`) is the server's,
        in this machine's UTC offset. `limits` may lower the limits the server puts a ceiling on,
        never raise them (`ValueError` naming the ceiling); a limit left at its default gets the
        server's default, which is its ceiling when that is lower.
        """
        if self._closed:
            raise RuntimeError('the pool is closed')
        modules = {}
        for name, module in (external_modules or {}).items():
            if not isinstance(module, ExternalModule):
                raise TypeError(f'external_modules[{name!r}] must be an ExternalModule, not {type(module).__name__}')
            modules[name] = module
        options = {
            'type_check': type_check,
            'type_check_stubs': type_check_stubs,
            'modules': {name: [module.stubs, _asyncs(module.functions), *([module.values] if module.values else [])] for name, module in modules.items()},
            'ephemeral': ephemeral,
            'session_id': session_id,
            'fork': fork,
            # the limits set to other than their defaults: the server gives the rest its own defaults (see `checkout`)
            'limits': None if limits is None else {name: getattr(limits, name) for name in limits.__slots__ if getattr(limits, name) != getattr(_DEFAULT_LIMITS, name)},
            'script_name': script_name,
            'random_seed': random_seed,
            'os_access': _os_access(os_access),
            'mounts': _mounts([*(os_access.mounts if os_access is not None else ()), *([mounts] if isinstance(mounts, Mount) else mounts or [])], self.max_frame),
        }
        return RemoteSession(self, options, modules, limits if limits is not None else Limits(), script_name)

    def __repr__(self) -> str:
        return f'RemotePool({self.url!r}, sessions={len(self._sessions)})'


def pool_from_environment(**local_options: Any) -> Pool | RemotePool:
    """`RemotePool(CORRAL_URL, api_key=CORRAL_API_KEY)` when the environment variable `CORRAL_URL`
    is set, else `Pool(**local_options)` (options of the local pool: a server chooses its own)."""
    url = os.environ.get('CORRAL_URL')
    if url:
        return RemotePool(url, api_key=os.environ.get('CORRAL_API_KEY') or None)
    return Pool(**local_options)


class RemoteSession:
    """A session served by `corral serve`: `Session`'s API (`feed_run`, `resume`, `dump`,
    `load_session`, `session_id`, `paused`, `pending_calls`), its host functions run here.

    A session that lost its connection (the server went away, or ended it for breaking a rule)
    raises `SandboxWorkerError` saying why; a stored one can be checked out again by its
    `session_id`.
    """

    def __init__(self, pool: RemotePool, options: dict[str, Any], modules: dict[str, ExternalModule], limits: Limits, script_name: str) -> None:
        self._pool = pool
        self._options = options
        self._module_lookup = {f'{name}.{fname}': f for name, module in modules.items() for fname, f in module.functions.items()}
        self.limits = limits
        self.script_name = script_name
        self.ephemeral = options['ephemeral'] if options['ephemeral'] is not None else options['session_id'] is None
        self.session_id: str | None = options['session_id']
        self._seed = 0
        self._ws: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._response: asyncio.Future[list[Any]] | None = None
        self._dead: BaseException | None = None
        self._pending: list[PendingCall] = []
        self.value_repr: str | None = None  # as Session.value_repr: the last feed's numpy or pandas value, as its library shows it
        self._max_frame = p.MAX_FRAME
        self._lookup: dict[str, Callable[..., Any]] = {}
        self._print: PrintCallback = print_to_host
        self._context = contextvars.copy_context()
        self._tasks: set[asyncio.Task[None]] = set()  # frames being sent
        self._call_tasks: set[asyncio.Task[None]] = set()  # async host calls running
        self._answers: list[bytes] = []
        self._answers_size = 0
        self._flush_handle: asyncio.Handle | None = None
        self._polls_missed = 0  # in a row, up to 6 (`_wait_briefly`)
        self._polls_skipped = 0  # polls still to skip
        # a connection the server ended (`_Lost`); how to take the session up again after a DRAIN
        self._lost: BaseException | None = None
        self._drain_state: bytes | None = None
        self._drained = False
        self._closing: asyncio.Future[None] | None = None  # set by CLOSED, or when the connection ends
        # the host calls of this connection, and the answers given during the request in flight,
        # on every connection it used: `[name, args, kwargs, how, value]` (see `protocol`, `held`)
        self._calls: dict[int, list[Any]] = {}
        self._held: list[list[Any]] = []
        self._malformed: SandboxError | None = None  # a frame `_take` could not take: the connection ends with it
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def random_seed(self) -> int:
        """The seed of the script's `random` module, as the server's session has it."""
        return self._seed

    @property
    def paused(self) -> bool:
        """Whether the session's feed is paused on deferred calls; `resume()` goes on."""
        return bool(self._pending)

    @property
    def pending_calls(self) -> list[PendingCall]:
        """The deferred calls a paused feed waits on, by call id (empty when it is not paused)."""
        return list(self._pending)

    # ----- lifecycle -----------------------------------------------------------------------------

    async def __aenter__(self) -> RemoteSession:
        try:
            await asyncio.wait_for(self._connect(), self._pool.open_timeout)
        except BaseException:
            await self.aclose()
            raise
        self._pool._sessions.add(self)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _connect(self, options: dict[str, Any] | None = None) -> None:
        """Open a connection and a session on it (`options`: the checkout's, by default)."""
        try:
            from websockets.asyncio.client import connect
        except ImportError:
            raise ImportError("RemotePool needs the websockets package: pip install -e '.[server]' in corral's clone") from None
        headers = {}
        if self._pool.api_key is not None:
            headers['authorization'] = f'Bearer {self._pool.api_key}'
        _propagator.inject(headers)
        try:
            self._ws = await connect(self._pool.url, additional_headers=headers, create_connection=_direct_connection(), **self._pool._connect_options())
        except Exception as error:  # OSError, or the server refused the upgrade (websockets.InvalidStatus ...)
            raise SandboxConnectionError(f'cannot connect to the corral server at {self._pool.url}: {error}') from None
        self._lost, self._drained, self._drain_state, self._calls, self._malformed = None, False, None, {}, None
        self._loop = asyncio.get_running_loop()  # the connection's: each call to find it is a system call (getpid)
        self._ws.take = self._take
        self._reader = self._loop.create_task(self._read_loop(self._ws))
        try:
            opened = await self._exchange([p.OPEN, p.PROTOCOL_VERSION, options or self._options])
        except _Lost:
            raise self._lost from None  # type: ignore[misc]
        if opened[0] != p.OPENED or len(opened) != 5:
            raise SandboxError('the corral server sent a malformed OPENED frame')
        _, self.session_id, self._seed, self._max_frame, pending = opened
        self._pending = p.pending_from(pending)

    async def _take_up_again(self, lost: BaseException) -> None:
        """After the server ended the connection: open the session again (on another replica, as the
        URL routes it), from the store by its id, or from the state a drain sent; else raise `lost`.

        A stored session's lease outlives a replica that died holding it: the checkout is tried
        again (`SandboxSessionBusyError`) until it frees or `RemotePool.resume_timeout` passes.
        """
        if self._drained and self.ephemeral:
            if self._drain_state is None:
                raise lost
            state = self._drain_state
            await self._drop_connection()
            await self._reconnect(self._options, lost)
            self._outcome(await self._exchange([p.LOAD, state]))
            return
        if self.ephemeral or self.session_id is None:
            raise lost
        await self._drop_connection()
        await self._reconnect({**self._options, 'session_id': self.session_id, 'fork': False, 'ephemeral': None}, lost)

    async def _reconnect(self, options: dict[str, Any], lost: BaseException) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._pool.resume_timeout
        delay = 0.05
        while True:
            try:
                await self._connect(options)
                return
            except CorralError as error:
                await self._drop_connection()
                # another replica may take it: one that holds its lease still, or is shutting down too
                retry = isinstance(error, (SandboxSessionBusyError, SandboxWorkerError, SandboxConnectionError)) or type(error) is SandboxError
                if not retry or loop.time() + delay > deadline:
                    if isinstance(error, OperatorError) and not isinstance(error, SandboxConnectionError):
                        raise error from None  # a key revoked, a quota: the application's to act on
                    kind = SandboxConnectionError if isinstance(error, SandboxConnectionError) else SandboxWorkerError
                    raise kind(f'{lost} (taking the session up again on another server failed: {error})') from None
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def _drop_connection(self) -> None:
        if self._ws is not None:
            ws, self._ws = self._ws, None
            await _close(ws)
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
            self._reader = None
        if self._closing is not None and not self._closing.done():  # no answer can come any more
            self._closing.set_result(None)

    async def aclose(self) -> None:
        """End the session: close its connection (a stored session stays in the server's store). Safe to call twice."""
        self._pool._sessions.discard(self)
        if self._dead is None:
            self._dead = SandboxWorkerError('this session cannot run scripts: the session is closed; check out a new session')
        for task in [*self._tasks, *self._call_tasks]:
            task.cancel()
        await self._close_connection()

    async def _close_connection(self) -> None:
        """Ask the server to end the session (CLOSE) and wait, up to `RemotePool.close_timeout`
        seconds, for it to say it has (CLOSED) or to close the connection; then close it here. From
        then on the session no longer holds one of its tenant's `concurrent_sessions`."""
        if self._closing is None and self._ws is not None and self._lost is None and self._reader is not None and not self._reader.done():
            self._closing = asyncio.get_running_loop().create_future()
            await self._send(p.encode([p.CLOSE]))
        if self._closing is not None and not self._closing.done():  # a close in another task waits for the same answer
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._closing), self._pool.close_timeout)
        await self._drop_connection()

    # ----- requests ------------------------------------------------------------------------------

    async def feed_run(
        self,
        code: str,
        *,
        external_lookup: Mapping[str, Callable[..., Any]] | None = None,
        print_callback: PrintCallback | None = None,
    ) -> Any:
        """Run `code` on the server and return the value of its last expression: `Session.feed_run`'s
        behaviour and errors; host calls run here, prints reach `print_callback` as they happen."""
        if not isinstance(code, str):
            raise TypeError(f'code must be a str, not {type(code).__name__}')
        self._check_usable()
        lookup = _checked_lookup(external_lookup)
        trace: dict[str, str] = {}
        _propagator.inject(trace)
        self._begin(lookup, print_callback)
        return self._outcome(await self._request([p.FEED, code, _asyncs(lookup), trace, []]))

    async def resume(
        self,
        values: Mapping[int, Any] | None = None,
        *,
        errors: Mapping[int, BaseException] | None = None,
        external_lookup: Mapping[str, Callable[..., Any]] | None = None,
        print_callback: PrintCallback | None = None,
    ) -> Any:
        """Answer deferred calls of the paused feed and go on with it (`Session.resume`)."""
        self._check_usable()
        for error in (errors or {}).values():
            if not isinstance(error, BaseException):
                raise TypeError(f'errors must map call ids to exceptions, not {type(error).__name__}')
        lookup = None if external_lookup is None else _checked_lookup(external_lookup)
        trace: dict[str, str] = {}
        _propagator.inject(trace)
        self._begin(lookup if lookup is not None else self._lookup, print_callback or (self._print if external_lookup is None else None))
        payloads = {call_id: _error_payload(error) for call_id, error in (errors or {}).items()}
        message = [p.RESUME, dict(values or {}), payloads, None if lookup is None else _asyncs(lookup), trace, []]
        return self._outcome(await self._request(message))

    async def dump(self) -> bytes:
        """The session's state as signed bytes (signed with the server's state key), as `Session.dump`."""
        self._check_usable()
        return self._outcome(await self._request([p.DUMP]))

    async def load_session(self, state: bytes) -> None:
        """Load a state that `dump()` made into this freshly checked-out session (`Session.load_session`)."""
        self._check_usable()
        if not isinstance(state, (bytes, bytearray, memoryview)):
            raise TypeError(f'a session state must be bytes, not {type(state).__name__}')
        self._outcome(await self._request([p.LOAD, bytes(state)]))

    def _check_usable(self) -> None:
        if self._dead is not None:
            raise self._dead
        if self._response is not None:
            raise RuntimeError('feed_run is already running on this session; await it before the next one')

    def _begin(self, lookup: Mapping[str, Callable[..., Any]], print_callback: PrintCallback | None) -> None:
        self._lookup = {**lookup, **self._module_lookup}
        self._print = print_callback or print_to_host
        self._context = contextvars.copy_context()

    async def _request(self, message: list[Any]) -> list[Any]:
        """Send a request and wait for its response (RESULT, PAUSED or ERROR).

        When the server ends the connection first (it went away, or drained), the session is
        taken up again elsewhere (`_take_up_again`) and the request sent again with the answers
        its host calls got here (`held`), so none runs twice.
        """
        self._held = []
        for _ in range(_RESUMES):
            if self._lost is not None:
                lost = self._lost
                try:
                    await self._wait_for_calls(lost)
                    await self._take_up_again(lost)
                except BaseException as error:
                    self._dead = error if isinstance(error, CorralError) else lost
                    raise
            if message[0] in (p.FEED, p.RESUME):
                message = [*message[:-1], list(self._held)]
            try:
                return await self._exchange(message)
            except _Lost:
                continue
        self._dead = self._lost
        raise self._lost  # type: ignore[misc]

    async def _exchange(self, message: list[Any]) -> list[Any]:
        """Send one frame and wait for its response; raises `_Lost` when the connection ends first."""
        if self._lost is not None:
            raise _Lost
        response = self._response = asyncio.get_running_loop().create_future()
        try:
            await self._send(p.encode(message))
            if self._lost is not None and not response.done():  # the reader ended before it could say so
                raise _Lost
            return await response
        except asyncio.CancelledError:
            self._dead = SandboxWorkerError('this session cannot run scripts: a feed was cancelled while the script ran; check out a new session')
            for task in self._call_tasks:
                task.cancel()
            await asyncio.shield(self._close_connection())
            raise
        finally:
            self._response = None

    async def _wait_for_calls(self, lost: BaseException) -> None:
        """Let the host calls still running here end, so that their answers are held for the next attempt."""
        if self._call_tasks:
            timeout = None if self.limits.wall_time is None else self.limits.wall_time + self.limits.grace
            _, running = await asyncio.wait(set(self._call_tasks), timeout=timeout)
            if running:
                names = ', '.join(sorted(task.get_name() for task in running))
                raise SandboxWorkerError(f'{lost}; {names} still running here, so the feed cannot be taken up again elsewhere without calling them twice')

    def _outcome(self, response: list[Any]) -> Any:
        kind = response[0]
        try:
            self._pending = p.pending_from(response[-1])
        except ValueError:
            raise SandboxError('the corral server sent a malformed response') from None
        if kind == p.RESULT and len(response) == 4 and (response[2] is None or isinstance(response[2], str)):
            self.value_repr = response[2]
            return response[1]
        if kind == p.PAUSED and len(response) == 2:
            raise SandboxPaused(self.pending_calls)
        raise SandboxError('the corral server sent a malformed response')

    async def _send(self, data: bytes) -> None:
        if self._ws is None:
            raise self._dead or SandboxWorkerError('this session is not entered')
        if len(data) > self._max_frame:
            raise ValueError(f"the request is {len(data)} bytes, larger than the corral server's limit of {self._max_frame} bytes")
        if not self._tasks and _write_now(self._ws, data):
            return
        try:
            await self._ws.send(data)
        except Exception:  # the connection is gone: the reader says why
            await asyncio.sleep(0)

    # ----- what the server sends -----------------------------------------------------------------

    async def _read_loop(self, ws: Any) -> None:
        from websockets.exceptions import ConnectionClosed

        reason: BaseException | None = None
        try:
            async for data in ws:
                if isinstance(data, str):
                    raise ValueError('a text frame')
                self._on_message(p.decode(data))
        except ConnectionClosed as closed:
            reason = _closed_error(closed)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            reason = _malformed(error)
            await _close(ws)
        self._lost = self._malformed or reason or SandboxWorkerError('this session cannot run scripts: the corral server closed the connection; check out a new session')
        if self._closing is not None and not self._closing.done():
            self._closing.set_result(None)
        if self._response is not None and not self._response.done():
            self._response.set_exception(_Lost())

    def _take(self, data: bytes) -> None:
        """A frame of the server's as the connection parses it (see `_direct_connection`): what
        `_read_loop` does with it, a turn of the event loop and websockets' queue sooner. A frame
        that cannot be taken ends the connection, and `_read_loop` says why."""
        if self._malformed is not None:
            return
        try:
            self._on_message(p.decode(data))
        except Exception as error:
            self._malformed = _malformed(error)
            task = self._loop.create_task(_close(self._ws))  # type: ignore[union-attr]
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _on_message(self, message: list[Any]) -> None:
        kind = message[0]
        if self._closing is not None:  # the session is closing: what its feed still sends is not run
            if kind == p.CLOSED and not self._closing.done():
                self._closing.set_result(None)
            return
        if kind == p.EVENTS:
            for event in message[1]:
                if event[0] == p.CALL:
                    _, call_id, name, args, kwargs = event
                    self._calls[call_id] = [name, args, kwargs]
                    self._start_call(call_id, name, args, kwargs)
                elif event[0] == p.OUTPUT:
                    self._print(event[1], event[2])
            return
        if kind == p.DRAIN:
            self._drained, self._drain_state = True, message[1]
            return
        if kind == p.ERROR:
            _, name, text, attributes, pending = message
            error = p.error_from(name, text, attributes)
            self._pending = p.pending_from(pending)
            if self._response is not None and not self._response.done():
                self._response.set_exception(error)
            else:
                self._dead = error
            return
        if self._response is not None and not self._response.done():
            self._response.set_result(message)

    # ----- host calls ----------------------------------------------------------------------------

    def _start_call(self, call_id: int, name: str, args: list[Any], kwargs: dict[str, Any]) -> None:
        """Run a host call as a local session runs it: a sync function here, an async one in a task."""
        function = self._lookup.get(name)
        if function is None:
            self._answer_error(call_id, not_given(name))
        else:
            try:
                result = self._context.run(function, *args, **kwargs)
            except (Exception, SystemExit, KeyboardInterrupt) as error:
                self._answer_error(call_id, error)
            else:
                if inspect.isawaitable(result):
                    task = self._loop.create_task(self._await_call(call_id, name, result), name=f'{name}() [call {call_id}]', context=self._context.copy())  # type: ignore[union-attr]
                    self._call_tasks.add(task)  # until it ends (`_await_call`): no done callback's turn after its answer is sent
                    return
                self._answer_value(call_id, name, result)
        self._flush_soon()  # with the answers of the frame's other calls

    async def _await_call(self, call_id: int, name: str, awaitable: Any) -> None:
        try:
            result = await awaitable
        except (Exception, SystemExit, KeyboardInterrupt) as error:
            self._answer_error(call_id, error)
        else:
            self._answer_value(call_id, name, result)
        finally:
            self._call_tasks.discard(asyncio.current_task(self._loop))  # type: ignore[arg-type]
        if self._call_tasks:
            self._flush_soon()
        else:  # the last call running: its answer, and those ready with it, go now
            self._flush_answers()

    def _answer_value(self, call_id: int, name: str, value: Any) -> None:
        """Answer with a host function's result, measured against the session's limits as a local
        session measures it: past them, or unable to cross, the script gets the error it would get locally."""
        short = name.rpartition('.')[2]
        limits = self.limits
        try:
            if not fits(value, limits.value_items, limits.value_size):
                measure(value, items=limits.value_items, size=limits.value_size, subject=f'the value {short}() returned', crossing='enter the sandbox', convert=host_default)
            answer = pack([call_id, 'ok', value], side='host')
            if len(answer) + _ENVELOPE > self._max_frame:
                raise ValueError(f'message of {len(answer)} bytes is larger than the limit of {self._max_frame - _ENVELOPE} bytes')
        except ValueLimitError as error:
            self._answer_error(call_id, OverflowError(str(error)))
            return
        except (TypeError, ValueError, RecursionError) as error:
            self._answer_error(call_id, TypeError(f'{short}() returned a value of type {describe_type(value)!r} that cannot enter the sandbox: {error}'))
            return
        self._queue_answer(call_id, answer, 'ok', value)

    def _answer_error(self, call_id: int, error: BaseException) -> None:
        if isinstance(error, Deferred):
            try:
                answer = pack([call_id, 'deferred', error.payload], side='host')
            except (TypeError, ValueError) as problem:
                error = TypeError(f'the payload of the Deferred cannot be sent to the corral server: {problem}')
            else:
                self._queue_answer(call_id, answer, 'deferred', error.payload)
                return
        payload = _error_payload(error)
        self._queue_answer(call_id, pack([call_id, 'error', payload], side='host'), 'error', payload)

    def _queue_answer(self, call_id: int, answer: bytes, how: str, value: Any) -> None:
        """Answers ready together travel together, in frames of up to the server's `max_frame`;
        each is held until the request ends (see `_request`)."""
        call = self._calls.get(call_id)
        if call is not None:
            self._held.append([*call, how, value])
        if self._answers_size + len(answer) + _ENVELOPE > self._max_frame:
            self._flush_answers()
        self._answers.append(answer)
        self._answers_size += len(answer)

    def _flush_soon(self) -> None:
        """Send the answers queued in the event loop's next turn, with those that come meanwhile."""
        if self._flush_handle is None and self._answers:
            self._flush_handle = self._loop.call_soon(self._flush_answers)  # type: ignore[union-attr]

    def _wait_briefly(self) -> None:
        """Poll the socket (`channel.poll`) for the server's next frame when the event loop has
        nothing else to run: on a virtual machine a process asleep on its socket takes tens of
        microseconds longer to reach, and the server answers a host call's answer within the poll
        unless the machine is busy. A poll that finds nothing skips the next 1, 3, 7 ... 63 while
        they keep missing (each missed poll is CPU the server and its workers lose), and one that
        finds the frame polls every time again."""
        if self._polls_skipped:
            self._polls_skipped -= 1
            return
        ws = self._ws
        sock = ws.transport.get_extra_info('socket')
        if sock is None or not idle(ws.loop) or ws.transport.is_closing():
            return
        if poll_readable(sock.fileno()):
            self._polls_missed = 0
        else:
            self._polls_missed = min(self._polls_missed + 1, 6)
            self._polls_skipped = (1 << self._polls_missed) - 1

    def _flush_answers(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        if not self._answers:
            return
        answers, self._answers, self._answers_size = self._answers, [], 0
        frame = b'\x92' + _ARRAY.pack(p.ANSWERS) + _ARRAY.pack_array_header(len(answers)) + b''.join(answers)
        if not self._tasks and _write_now(self._ws, frame):
            self._wait_briefly()
            return
        task = self._loop.create_task(self._send(frame))  # type: ignore[union-attr]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _malformed(error: Exception) -> SandboxError:
    why = f'{type(error).__name__}: {error}' if str(error) else type(error).__name__
    return SandboxError(f'the corral server sent a malformed frame ({why})')


_DIRECT: type | None = None


def _direct_connection() -> type:
    """websockets' client connection, handing each whole binary message to its `take(data)` (when
    set) as it is parsed, while none waits in its queue for `recv`: no turn of the event loop and
    no queue between the socket and the session."""
    global _DIRECT
    if _DIRECT is None:
        from websockets.asyncio.client import ClientConnection
        from websockets.frames import Frame, Opcode

        class DirectConnection(ClientConnection):
            take: Callable[[bytes], None] | None = None

            def process_event(self, event: Any) -> None:
                queued = getattr(self.recv_messages, 'frames', None)  # websockets' own queue (an older one has none: `recv` takes all)
                if (
                    self.take is not None and self.response is not None and isinstance(event, Frame) and event.opcode is Opcode.BINARY
                    and event.fin and queued is not None and not len(queued)
                ):
                    self.take(bytes(event.data))
                    return
                super().process_event(event)

        _DIRECT = DirectConnection
    return _DIRECT


def _write_now(ws: Any, frame: bytes) -> bool:
    """Send `frame` on `ws` (a websockets connection) at once, without a task's turn and the send's
    locks, when it is open, no other send is under way and its socket takes writes (its buffer is
    under the high water mark); else False, and nothing is sent."""
    from websockets.asyncio.connection import broadcast
    from websockets.protocol import State

    if ws is None or ws.protocol.state is not State.OPEN or getattr(ws, 'send_in_progress', True) is not None or getattr(ws, 'paused', True):
        return False  # (a websockets without `send_in_progress` sends the usual way)
    with contextlib.suppress(Exception):  # the connection is gone: its reader says why
        broadcast([ws], frame, raise_exceptions=True)
    return True


def _asyncs(functions: Mapping[str, Callable[..., Any]]) -> dict[str, bool]:
    return {name: is_async_callable(function) for name, function in functions.items()}


def _error_payload(error: BaseException) -> list[Any]:
    """`[class name, args]` of a host function's error as the script sees it (`exception_payload`);
    args that cannot cross are sent as their text, as a local session sends them."""
    name, args = exception_payload(error)
    try:
        pack(args, side='host')
    except (TypeError, ValueError, RecursionError):
        args = [str(arg) for arg in args]
    return [name, args]


def _os_access(os_access: OsAccess | None) -> list[Any] | None:
    """What the server needs of an `OsAccess`: its environment, its clock (this machine's UTC offset), its
    cwd, its `max_urandom_bytes`."""
    if os_access is None:
        return None
    if not isinstance(os_access, OsAccess):
        raise TypeError(f'os_access must be an OsAccess, not {type(os_access).__name__}')
    overridden = [name for name in ('stat', 'read_file', 'write_file', 'list_dir', 'make_dir', 'remove', 'remove_dir', 'rename', 'getenv', 'environ', 'now', 'urandom') if getattr(type(os_access), name) is not getattr(OsAccess, name)]
    if overridden or callable(os_access._clock):
        what = f'overrides {", ".join(overridden)}' if overridden else 'has a clock function'
        raise ValueError(
            f'this OsAccess {what}, which runs in your process and cannot be served by the corral server: '
            'a RemotePool sends OsAccess(environ=..., clock=True, mounts=..., cwd=..., max_urandom_bytes=...) only'
        )
    offset = datetime.datetime.now().astimezone().utcoffset()
    clock = int(offset.total_seconds()) if os_access._clock and offset is not None else None
    return [os_access._environ, clock, os_access.cwd, os_access.max_urandom_bytes]


def _mounts(mounts: list[Mount], max_frame: int) -> list[list[Any]]:
    """Each mount's files and folders, to send: `[sandbox_path, mode, files, dirs]`, paths relative to the mount."""
    items = []
    total = 0
    for mount in mounts:
        if not isinstance(mount, Mount):
            raise TypeError(f'mounts must be Mount objects, not {type(mount).__name__}')
        if mount.mode == 'read-write':
            raise ValueError(
                f'the read-write mount at {mount.sandbox_path} cannot be served by the corral server (it cannot write your files); '
                "use mode='overlay' or 'read-only'"
            )
        root = os.path.realpath(mount.host_dir)
        files: list[list[Any]] = []
        dirs: list[list[Any]] = []
        for folder, subfolders, names in os.walk(root):
            rel_folder = os.path.relpath(folder, root)
            for name in sorted(subfolders):
                path = os.path.join(folder, name)
                if os.path.islink(path):
                    continue  # a local session follows links inside the mount only; none are sent
                dirs.append([_rel(rel_folder, name), os.stat(path).st_mtime])
            for name in sorted(names):
                path = os.path.join(folder, name)
                real = os.path.realpath(path)
                if not real.startswith(root + os.sep) or not os.path.isfile(real):
                    continue
                size = os.path.getsize(real)
                if size > MAX_FILE:
                    continue  # a script could not read it in one piece anyway
                total += size
                if total > max_frame:
                    raise ValueError(f"the mounts hold more than {max_frame} bytes of files, more than a frame to the corral server carries; mount a smaller folder")
                with open(real, 'rb') as file:
                    files.append([_rel(rel_folder, name), file.read(), os.stat(real).st_mtime])
        items.append([mount.sandbox_path, mount.mode, files, dirs])
    return items


def _rel(folder: str, name: str) -> str:
    return name if folder == '.' else posixpath.join(*folder.split(os.sep), name)


def _closed_error(closed: Any) -> SandboxError:
    """The error of a connection the server closed (`websockets.ConnectionClosed`), when no ERROR said why."""
    code = closed.rcvd.code if closed.rcvd is not None else None
    reason = closed.rcvd.reason if closed.rcvd is not None else ''
    if code == 1009:
        return SandboxError('the corral server refused a frame over its size limit and closed the session')
    if code == p.CLOSE_DRAIN:
        return SandboxWorkerError(f'this session cannot run scripts: the corral server let it go ({reason}); check out a new session')
    why = f'code {code}{": " + reason if reason else ""}' if code is not None else 'no close frame'
    return SandboxWorkerError(f'this session cannot run scripts: the connection to the corral server was lost ({why}); check out a new session')


async def _close(ws: Any) -> None:
    try:
        await ws.close()
    except Exception:
        pass
