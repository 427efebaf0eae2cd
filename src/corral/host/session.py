"""A session: one worker, checked out of a pool, running one script after another."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import contextvars
import inspect
import secrets
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from time import perf_counter
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from ..channel import CALL, COMPILE, DONE, FAIL, FEED, OUTPUT, POLL_SECONDS, REPLY, FrameReader, ProtocolError, frame, poll
from ..errors import (
    SandboxError,
    SandboxLimitError,
    SandboxRuntimeError,
    SandboxSyntaxError,
    SandboxTypingError,
    SandboxWorkerError,
)
from ..limits import Limits
from ..values import Decoder, ValueLimitError, bounded_repr, describe_type, host_default, measure, pack
from .external import ExternalModule, exception_payload, is_async_callable
from .os_access import Mount, OsAccess, SystemCalls
from .workers import WorkerProcess

if TYPE_CHECKING:
    from .pool import Pool

__all__ = ['Session', 'PrintCallback']

#: Receives the script's printed text as `(stream, text)`; `stream` is `'stdout'`.
PrintCallback = Callable[[str, str], None]

_tracer = trace.get_tracer('corral')

#: Frames up to this many bytes are decoded as they arrive, on the event loop (a few milliseconds
#: at most); larger ones in a thread (`_Protocol`).
_INLINE_FRAME = 64 * 1024
#: Items of a host function's result measured and packed on the event loop; a larger one is
#: measured and packed in the decoding thread.
_INLINE_ITEMS = 10_000
#: Items of a message beyond `Limits.value_items`: the message's own list and its other fields.
_ENVELOPE_ITEMS = 64
_PEEK = int(socket.MSG_PEEK | socket.MSG_DONTWAIT)  # an int: or-ing the flags costs more than the call
_LIMIT_FIELDS = frozenset({'wall_time', 'cpu_time', 'output', 'host_calls', 'memory', 'recursion', 'value_items', 'value_size'})


def _tracing() -> bool:
    """Whether an OpenTelemetry tracer provider is installed: without one every span is a
    non-recording stand-in, and making them costs about a tenth of a trivial feed's host time."""
    return not isinstance(trace.get_tracer_provider(), (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


def _print_to_stdout(stream: str, text: str) -> None:
    sys.stdout.write(text)


class Session:
    """A checked-out sandbox: a worker of its own, whose variables persist between feeds.

    Use it as an async context manager (`async with pool.checkout() as session:`); leaving the
    block kills the worker, which is never reused for another session.
    """

    def __init__(
        self,
        pool: Pool,
        *,
        type_check: bool,
        type_check_stubs: str | None,
        external_modules: Mapping[str, ExternalModule] | None,
        ephemeral: bool,
        limits: Limits | None,
        script_name: str,
        os_access: OsAccess | None = None,
        mounts: Mount | Sequence[Mount] | None = None,
        random_seed: int | None = None,
    ) -> None:
        for name, module in (external_modules or {}).items():
            if not isinstance(module, ExternalModule):
                raise TypeError(f'external_modules[{name!r}] must be an ExternalModule, not {type(module).__name__}')
            if not name.isidentifier():
                raise ValueError(f'external_modules key {name!r} is not a valid module name')
        self._pool = pool
        self._type_check = type_check
        self._stubs = type_check_stubs
        self._modules = dict(external_modules or {})
        self.ephemeral = ephemeral
        self.limits = limits if limits is not None else Limits()
        self.script_name = script_name
        self._worker: WorkerProcess | None = None
        self._transport: asyncio.Transport | None = None
        self._dead: str | None = None
        self._heard = 0.0  # perf_counter() when the worker last sent something
        self._context: list[str] = []
        self._done: asyncio.Future[Any] | None = None
        self._lookup: Mapping[str, Callable[..., Any]] = {}
        self._print: PrintCallback = _print_to_stdout
        self._calls = 0
        self._span_context: otel_context.Context | None = None
        self._call_tasks: set[asyncio.Task[None]] = set()
        self._system = _system_calls(os_access, mounts, random_seed)

    @property
    def random_seed(self) -> int:
        """The seed of the script's `random` module (and `uuid.uuid4`): the same seed, the same numbers."""
        return self._system.seed

    # ----- lifecycle -----------------------------------------------------------------------------

    async def __aenter__(self) -> Session:
        worker = await self._pool._take_worker(self.limits)
        loop = asyncio.get_running_loop()
        self._transport, _ = await loop.connect_accepted_socket(lambda: _Protocol(self), worker.sock)
        self._worker = worker
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Kill the worker and end the session. Safe to call twice."""
        for task in list(self._call_tasks):
            task.cancel()
        if self._worker is not None:
            if self._transport is not None:
                self._transport.abort()
            self._worker.kill()
            self._worker = None
        if self._dead is None:
            self._dead = 'the session is closed'

    # ----- running -------------------------------------------------------------------------------

    async def feed_run(
        self,
        code: str,
        *,
        external_lookup: Mapping[str, Callable[..., Any]] | None = None,
        print_callback: PrintCallback | None = None,
    ) -> Any:
        """Run `code` in the session and return the value of its last expression.

        The value is None when the last statement is not an expression. `external_lookup` maps
        names the script can call to host functions, sync or async; `print_callback` receives the
        script's printed output (default: the host's stdout).

        Raises `SandboxTypingError` (the check failed; nothing ran), `SandboxSyntaxError`,
        `SandboxRuntimeError` (an uncaught exception in the script), `SandboxLimitError`,
        `SandboxWorkerError` (the worker died; the session is over).
        """
        if not isinstance(code, str):
            raise TypeError(f'code must be a str, not {type(code).__name__}')
        if self._worker is None or self._dead is not None:
            raise SandboxWorkerError(f'this session cannot run scripts: {self._dead or "it is not entered"}; check out a new session')
        if self._done is not None:
            raise RuntimeError('feed_run is already running on this session; await it before the next one')
        lookup = dict(external_lookup or {})
        for name, function in lookup.items():
            if not callable(function):
                raise TypeError(f'external_lookup[{name!r}] is not callable: {type(function).__name__}')
        spans = _tracer.start_as_current_span('run code') if _tracing() else contextlib.nullcontext(trace.INVALID_SPAN)
        with spans as span:
            if span.is_recording():
                span.set_attributes({'code': code, 'script_name': self.script_name})
            try:
                value = await self._feed(code, lookup, print_callback or _print_to_stdout)
            except SandboxError as error:
                span.set_status(trace.Status(trace.StatusCode.ERROR, type(error).__name__))
                raise
            self._context.append(code)
            return value

    async def _feed(self, code: str, lookup: dict[str, Callable[..., Any]], print_callback: PrintCallback) -> Any:
        limits = self.limits
        if self._type_check:
            # The worker compiles while ty checks: a syntax error (or a refused construct) wins,
            # so it reads as Python shows it rather than as a type error; the compiled script
            # waits in the worker for the feed.
            check = asyncio.ensure_future(self._check_types(code))
            try:
                await self._exchange([COMPILE, code, self.script_name], timeout=limits.wall_time)
            except BaseException:
                check.cancel()
                await asyncio.gather(check, return_exceptions=True)
                raise
            diagnostics = await check
            if diagnostics is not None:
                raise SandboxTypingError(diagnostics)
        functions = {name: is_async_callable(function) for name, function in lookup.items()}
        modules = {
            name: {fname: is_async_callable(f) for fname, f in module.functions.items()}
            for name, module in self._modules.items()
        }
        for name, module in self._modules.items():
            for fname, function in module.functions.items():
                lookup[f'{name}.{fname}'] = function
        self._lookup = lookup
        self._print = print_callback
        self._calls = 0
        self._span_context = otel_context.get_current()
        worker_limits = {
            'wall_time': limits.wall_time,
            'recursion': limits.recursion,
            'output': limits.output,
            'host_calls': limits.host_calls,
            'memory': limits.memory,
            'cpu_time': limits.cpu_time,
            'value_items': limits.value_items,
            'value_size': limits.value_size,
        }
        try:
            return await self._exchange([FEED, code, self.script_name, functions, modules, worker_limits], timeout=limits.wall_time)
        finally:
            self._lookup = {}

    async def _check_types(self, code: str) -> str | None:
        with _tracer.start_as_current_span('type check'):
            return await self._pool._type_checker().check(
                code,
                script_name=self.script_name,
                stubs=self._stubs,
                modules={name: module.stubs or '' for name, module in self._modules.items()},
                context=self._context,
            )

    async def _exchange(self, message: list[Any], *, timeout: float | None) -> Any:
        """Send `message` and wait for the worker's DONE (its value) or FAIL (raised).

        The worker stops a script at `timeout` seconds itself; one that has not answered
        `Limits.grace` seconds later is killed, and the session ends. A feed whose caller is
        cancelled ends the session too: its worker is mid-script.
        """
        loop = asyncio.get_running_loop()
        done = self._done = loop.create_future()
        deadline = None if timeout is None else loop.call_later(timeout + self.limits.grace, self._on_deadline, timeout)
        try:
            self._send(message)
            return await done
        except asyncio.CancelledError:
            self._kill('a feed was cancelled while the script ran')
            raise
        finally:
            if deadline is not None:
                deadline.cancel()
            self._done = None
            for task in list(self._call_tasks):  # calls of tasks the worker cancelled as the feed ended
                task.cancel()

    def _on_deadline(self, timeout: float) -> None:
        self._kill(f'the script ran past the wall_time limit of {timeout} s and did not stop')
        self._fail(
            SandboxLimitError(
                f'TimeoutError: the script ran past the wall_time limit of {timeout} seconds and was killed',
                limit='wall_time',
                value=timeout,
            )
        )

    def _send(self, message: list[Any]) -> None:
        assert self._transport is not None
        self._transport.write(frame(pack(message, side='host')))
        self._poll_briefly()

    def _poll_briefly(self) -> None:
        """Poll (`channel.poll`) the channel of a worker that is itself still polling, when the
        event loop has nothing else to run; otherwise the loop sleeps until the worker answers.

        A worker polls for `POLL_SECONDS` after it last wrote; one that has gone to sleep takes as
        long to wake whether the host polls or not. An event loop whose queue cannot be seen
        (not asyncio's own) is never held up.
        """
        if perf_counter() - self._heard > POLL_SECONDS or getattr(asyncio.get_running_loop(), '_ready', True) or self._worker is None:
            return
        sock = self._worker.sock

        def readable() -> bool:
            try:
                sock.recv(1, _PEEK)
            except BlockingIOError:
                return False
            except OSError:
                pass
            return True

        poll(readable)

    def _kill(self, reason: str) -> None:
        """End the session: the worker is killed and never used again."""
        if self._dead is None:
            self._dead = reason
        if self._worker is not None:
            if self._transport is not None:
                self._transport.abort()
            self._worker.kill()
            self._worker = None

    def _fail(self, error: SandboxError) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_exception(error)

    # ----- messages from the worker --------------------------------------------------------------

    def _on_message(self, message: Any) -> None:
        if not isinstance(message, list) or not message:
            raise ProtocolError('a message is not a non-empty list')
        kind = message[0]
        if self._done is None or self._done.done():
            raise ProtocolError(f'message of kind {kind!r} outside a feed')
        if kind == CALL:
            _, call_id, name, args, kwargs = _shape(message, 5)
            if not (isinstance(call_id, int) and isinstance(name, str) and isinstance(args, list) and isinstance(kwargs, dict)):
                raise ProtocolError('malformed CALL message')
            self._start_call(call_id, name, args, kwargs)
        elif kind == OUTPUT:
            _, stream, text = _shape(message, 3)
            if not isinstance(text, str) or stream not in ('stdout', 'stderr'):
                raise ProtocolError('malformed OUTPUT message')
            self._print(stream, text)
        elif kind == DONE:
            self._done.set_result(_shape(message, 2)[1])
        elif kind == FAIL:
            _, failure, exc_type, text, display = _shape(message, 5)
            if not all(isinstance(item, str) for item in (failure, exc_type, text, display)):
                raise ProtocolError('malformed FAIL message')
            if failure == 'syntax':
                self._done.set_exception(SandboxSyntaxError(display))
            elif failure == 'limit':
                if exc_type not in _LIMIT_FIELDS:
                    raise ProtocolError(f'unknown limit {exc_type!r}')
                if exc_type == 'cpu_time':  # the kernel kills the worker a second later
                    self._kill(f'the script used more than the cpu_time limit of {self.limits.cpu_time} s')
                self._done.set_exception(SandboxLimitError(display, limit=exc_type, value=getattr(self.limits, exc_type)))
            elif failure == 'runtime':
                self._done.set_exception(SandboxRuntimeError(display, exc_type=exc_type, message=text))
            else:
                raise ProtocolError(f'unknown failure kind {failure!r}')
        else:
            raise ProtocolError(f'unknown message kind {kind!r}')

    def _on_broken(self, reason: str) -> None:
        """The worker died or sent something against the rules: kill it, fail the feed."""
        self._kill(reason)
        self._fail(SandboxWorkerError(f'the sandbox worker stopped: {reason}; check out a new session'))

    # ----- host calls ----------------------------------------------------------------------------

    def _start_call(self, call_id: int, name: str, args: list[Any], kwargs: dict[str, Any]) -> None:
        """Run a host call: a sync function right here, an async one in a task of its own."""
        function = self._system_function(name) if name.startswith(SYSTEM_PREFIX) else self._lookup.get(name)
        limit = self.limits.host_calls
        self._calls += 1
        if limit is not None and self._calls > limit:  # the worker stops a script first: this one ignored it
            raise ProtocolError(f'the worker made more than the host_calls limit of {limit} host calls')
        if function is None:
            self._reply_error(call_id, NameError(f'{name!r} is not a host function of this session'))
            return
        if _tracing():
            span = _tracer.start_span(f'call {name}', context=self._span_context)
            if span.is_recording():
                span.set_attributes({'function': name, 'args': bounded_repr(args, limit=1000), 'kwargs': bounded_repr(kwargs, limit=1000)})
            token = otel_context.attach(trace.set_span_in_context(span, self._span_context))
        else:  # the call still runs in the feed's context (a remote parent span, baggage)
            span = trace.INVALID_SPAN
            token = otel_context.attach(self._span_context or otel_context.Context())
        try:
            try:
                result = function(*args, **kwargs)
            except (Exception, SystemExit, KeyboardInterrupt) as error:  # a host function's exit is the script's error
                self._call_failed(span, call_id, error)
                return
            if inspect.isawaitable(result):
                task = asyncio.get_running_loop().create_task(self._await_call(call_id, name, span, result), context=contextvars.copy_context())
                self._call_tasks.add(task)
                task.add_done_callback(self._call_tasks.discard)
                return
        finally:
            otel_context.detach(token)
        self._call_returned(span, call_id, name, result)

    def _system_function(self, name: str) -> Callable[..., Any]:
        """A system call (files, environment, clock, seed): answered from the session's OsAccess."""
        system, operation = self._system, name[len(SYSTEM_PREFIX):]

        def system_call(*args: Any) -> Any:
            return system.call(operation, list(args))

        return system_call

    async def _await_call(self, call_id: int, name: str, span: trace.Span, awaitable: Any) -> None:
        try:
            result = await awaitable
        except (Exception, SystemExit, KeyboardInterrupt) as error:
            self._call_failed(span, call_id, error)
        else:
            self._call_returned(span, call_id, name, result)

    def _call_failed(self, span: trace.Span, call_id: int, error: BaseException) -> None:
        span.record_exception(error)
        span.set_status(trace.Status(trace.StatusCode.ERROR, type(error).__name__))
        span.end()
        self._reply_error(call_id, error)

    def _call_returned(self, span: trace.Span, call_id: int, name: str, result: Any) -> None:
        """Send a host function's result to the worker, or the error that says why it cannot enter.

        A result of up to `_INLINE_ITEMS` items (and `_INLINE_FRAME` bytes) is measured and packed
        here, on the event loop; a larger one in the decoding thread, so that neither blocks the
        loop for long.
        """
        span.end()
        limits = self.limits
        small = [limit if limit is not None and limit < inline else inline for limit, inline in ((limits.value_items, _INLINE_ITEMS), (limits.value_size, _INLINE_FRAME))]
        try:
            payload = self._encode_result(call_id, name, result, *small)
        except _LargeResult:
            task = asyncio.get_running_loop().create_task(self._send_large_result(call_id, name, result))
            self._call_tasks.add(task)
            task.add_done_callback(self._call_tasks.discard)
            return
        self._write_reply(payload)

    async def _send_large_result(self, call_id: int, name: str, result: Any) -> None:
        limits = self.limits
        try:
            payload = await asyncio.get_running_loop().run_in_executor(
                _decoding_thread(), self._encode_result, call_id, name, result, limits.value_items, limits.value_size
            )
        except Exception as error:  # a conversion of the host's (a model's `model_dump`) failed
            payload = self._error_reply(call_id, error)
        self._write_reply(payload)

    def _encode_result(self, call_id: int, name: str, result: Any, items: int | None, size: int | None) -> bytes:
        """The REPLY frame of a result, or of the error it gets. Raises `_LargeResult` when the
        result is larger than `items` or `size` but those are not the session's limits."""
        short = name.rpartition('.')[2]
        try:
            measure(result, items=items, size=size, subject=f'the value {short}() returned', crossing='enter the sandbox', convert=host_default)
            return frame(pack([REPLY, call_id, True, result], side='host'))
        except ValueLimitError as error:
            if error.value != getattr(self.limits, error.limit):
                raise _LargeResult from None
            return self._error_reply(call_id, OverflowError(str(error)))
        except (TypeError, ValueError, RecursionError, ProtocolError) as error:  # ProtocolError: too large
            return self._error_reply(call_id, TypeError(f'{short}() returned a value of type {describe_type(result)!r} that cannot enter the sandbox: {error}'))

    def _write_reply(self, data: bytes) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(data)
            self._poll_briefly()

    def _reply_error(self, call_id: int, error: BaseException) -> None:
        self._write_reply(self._error_reply(call_id, error))

    @staticmethod
    def _error_reply(call_id: int, error: BaseException) -> bytes:
        payload = exception_payload(error)
        try:
            return frame(pack([REPLY, call_id, False, payload], side='host'))
        except (TypeError, ValueError):
            return frame(pack([REPLY, call_id, False, [payload[0], [str(error)]]], side='host'))


class _LargeResult(Exception):
    """A host function's result is too large to measure and pack on the event loop."""


#: The first character of a system call's name (`corral.language.hostio.PREFIX`).
SYSTEM_PREFIX = '\x00'


def _system_calls(os_access: OsAccess | None, mounts: Mount | Sequence[Mount] | None, seed: int | None) -> SystemCalls:
    if os_access is not None and not isinstance(os_access, OsAccess):
        raise TypeError(f'os_access must be an OsAccess, not {type(os_access).__name__}')
    if isinstance(mounts, Mount):
        mounts = [mounts]
    mounts = list(mounts or [])
    for mount in mounts:
        if not isinstance(mount, Mount):
            raise TypeError(f'mounts must be Mount objects, not {type(mount).__name__}')
    if seed is None:
        seed = secrets.randbits(64)
    elif not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f'random_seed must be an int, not {type(seed).__name__}')
    return SystemCalls(os_access, mounts, seed)


def _shape(message: list[Any], length: int) -> list[Any]:
    if len(message) != length:
        raise ProtocolError(f'message of kind {message[0]!r} has {len(message)} items, expected {length}')
    return message


class _Protocol(asyncio.Protocol):
    """Reads frames from a worker's channel and hands decoded messages to its session, in order.

    Each message is decoded against the session's `value_items` and `value_size` limits (with
    room for the message's own fields; the size with a factor of 2, as a worker's objects may
    take less room than the host's copies). A frame of up to `_INLINE_FRAME` bytes is decoded as
    it arrives. A larger one is decoded in the decoding thread, a step at a time, while the event
    loop goes on: reading from the worker pauses until it is done, and frames that arrived with it
    wait their turn.
    """

    def __init__(self, session: Session) -> None:
        self._session = session
        self._reader = FrameReader()
        self._transport: asyncio.Transport | None = None
        self._backlog: collections.deque[bytes] | None = None  # frames behind one being decoded in the thread
        self._lost = False  # the channel closed while frames waited
        self._decoding: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._session._heard = perf_counter()
        try:
            payloads = self._reader.feed(data)
        except ProtocolError as error:
            self._broken(error)
            return
        if self._backlog is not None:
            self._backlog.extend(payloads)
            return
        self._backlog = collections.deque(payloads)
        self._drain()

    def _drain(self) -> None:
        """Handle the waiting frames until one must be decoded in the thread, or none is left."""
        backlog = self._backlog
        assert backlog is not None
        while backlog:
            payload = backlog.popleft()
            if len(payload) > _INLINE_FRAME:
                assert self._transport is not None
                self._transport.pause_reading()
                self._decoding = asyncio.get_running_loop().create_task(self._decode_in_thread(payload))
                return
            try:
                message = self._decoder(len(payload)).decode(payload)
            except Exception as error:
                self._broken(error)
                return
            if not self._deliver(message):
                return
        self._backlog = None
        if self._lost:
            self._session._on_broken('the worker process exited')

    async def _decode_in_thread(self, payload: bytes) -> None:
        decoder = self._decoder(len(payload))
        try:
            message = await asyncio.get_running_loop().run_in_executor(_decoding_thread(), decoder.decode_in_steps, payload)
        except Exception as error:
            self._broken(error)
            return
        finally:
            self._decoding = None
        if not self._deliver(message):
            return
        if self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()
        self._drain()

    def _decoder(self, length: int) -> Decoder:
        limits = self._session.limits
        items = None if limits.value_items is None else limits.value_items + _ENVELOPE_ITEMS
        size = None if limits.value_size is None else 2 * limits.value_size + length
        return Decoder(items=items, size=size)

    def _deliver(self, message: Any) -> bool:
        """Hand a message to the session; False when it broke the channel's rules."""
        if self._session._dead is not None:  # killed while the message was decoded
            return False
        try:
            self._session._on_message(message)
        except Exception as error:
            self._broken(error)
            return False
        return True

    def _broken(self, error: Exception) -> None:
        """Anything a worker sends is untrusted: a bad frame ends it."""
        self._backlog = None
        self._session._on_broken(f'it sent a malformed message ({type(error).__name__}: {error})')

    def connection_lost(self, exc: Exception | None) -> None:
        if self._backlog is not None:  # the frames before the end come first
            self._lost = True
        elif self._session._dead is None:
            self._session._on_broken('the worker process exited')


_decoder_executor: concurrent.futures.ThreadPoolExecutor | None = None


def _decoding_thread() -> concurrent.futures.ThreadPoolExecutor:
    """The one thread that decodes large frames of every session (made when first needed).

    One thread, so that the event loop's thread shares the GIL with at most one other: the
    decoding steps (`values.Decoder.decode_in_steps`) hand it back at Python's switch interval.
    """
    global _decoder_executor
    if _decoder_executor is None:
        _decoder_executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix='corral-decode')
    return _decoder_executor
