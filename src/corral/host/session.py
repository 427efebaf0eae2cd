"""A session: one worker, checked out of a pool, running one script after another."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import re
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
    StubError,
)
from ..limits import Limits, amount
from ..values import UNPACKABLE_RESULT, describe_type, pack, unpack
from .external import ExternalModule, exception_payload, is_async_callable, missing_functions
from .os_access import Mount, OsAccess, SystemCalls
from .workers import WorkerProcess

if TYPE_CHECKING:
    from .pool import Pool

__all__ = ['Session', 'PrintCallback', 'print_to_host']

#: Receives the script's printed text as `(stream, text)`; `stream` is `'stderr'` for what the script
#: wrote to `sys.stderr` (`print(..., file=sys.stderr)`, `sys.stderr.write()`), `'stdout'` otherwise.
PrintCallback = Callable[[str, str], None]

_tracer = trace.get_tracer('corral')

#: Seconds the host may spend rebuilding the sets and dicts of one message from a worker: a base,
#: and more for a larger message at a rate (bytes per second) well below a real rebuild's.
_DECODE_BUDGET = 0.25
_DECODE_RATE = 20e6
_PEEK = int(socket.MSG_PEEK | socket.MSG_DONTWAIT)  # an int: or-ing the flags costs more than the call
#: The first line of one of ty's diagnostics (`error[invalid-argument-type]: ...`): its rule name.
_DIAGNOSTIC_HEADER = re.compile(r'^(?:error|warning|info)\[([a-z0-9-]+)\]: ', re.MULTILINE)
_LIMIT_FIELDS = frozenset({'wall_time', 'cpu_time', 'output', 'host_calls', 'memory', 'recursion'})


def _tracing() -> bool:
    """Whether an OpenTelemetry tracer provider is installed: without one every span is a
    non-recording stand-in, and making them costs about a tenth of a trivial feed's host time."""
    return not isinstance(trace.get_tracer_provider(), (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


def print_to_host(stream: str, text: str) -> None:
    """The default `PrintCallback`: the script's output to the host's stdout, or its stderr."""
    (sys.stderr if stream == 'stderr' else sys.stdout).write(text)


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
        self._print: PrintCallback = print_to_host
        self._calls = 0
        self._span_context: otel_context.Context | None = None
        self._call_tasks: set[asyncio.Task[None]] = set()
        self._system = _system_calls(os_access, mounts, random_seed)
        self._lookup_checked = not type_check  # the stubs' functions against the first external_lookup

    @property
    def random_seed(self) -> int:
        """The seed of the script's `random` module (and `uuid.uuid4`): the same seed, the same numbers."""
        return self._system.seed

    # ----- lifecycle -----------------------------------------------------------------------------

    async def __aenter__(self) -> Session:
        if self._type_check:
            await self._check_stubs()
        worker = await self._pool._take_worker(self.limits)
        loop = asyncio.get_running_loop()
        self._transport, _ = await loop.connect_accepted_socket(lambda: _Protocol(self), worker.sock)
        self._worker = worker
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _check_stubs(self) -> None:
        """Raise `StubError` for stubs ty finds errors in, or an external module's stub of a function
        the module does not have: either would leave a script's use of it unchecked."""
        for name, module in self._modules.items():
            problem = missing_functions(module.stubs, module.functions, f'external module {name!r}')
            if problem is not None:
                raise StubError(problem)
        modules = {name: module.stubs or '' for name, module in self._modules.items()}
        diagnostics = await self._pool._type_checker().check_stubs(self._stubs, modules)
        if diagnostics is not None:
            raise StubError(f'ty finds errors in the stubs, which would leave their functions unchecked:\n{diagnostics}', diagnostics=diagnostics)

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
        script's printed output as `(stream, text)` (default: the host's stdout, and its stderr for
        what the script wrote to `sys.stderr`).

        Raises `SandboxTypingError` (the check failed; nothing ran), `SandboxCheckerError` (ty
        could not check it; nothing ran), `SandboxSyntaxError`, `SandboxRuntimeError` (an
        uncaught exception in the script), `SandboxLimitError` (`code_size`, `type_check_time`
        and `type_check_memory` before anything ran; the others while it ran),
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
                value = await self._feed(code, lookup, print_callback or print_to_host)
            except SandboxError as error:
                span.set_status(trace.Status(trace.StatusCode.ERROR, type(error).__name__))
                self._remember_ran(code, error)
                raise
            self._context.append(code)
            return value

    def _remember_ran(self, code: str, error: SandboxError) -> None:
        """Keep, as context of the next type check, the part of a failed script that ran: the names
        it bound stay in the worker (see `typecheck.ran_part`)."""
        if not self._type_check or self._dead is not None:
            return
        from ..typecheck import failing_line, ran_part  # as the pool does: loaded when checks are on

        if isinstance(error, SandboxRuntimeError) and error.exc_type == 'TypeError' and error.message.startswith(UNPACKABLE_RESULT):
            part = code  # it ran to its end
        elif isinstance(error, (SandboxRuntimeError, SandboxLimitError)):
            frames = error.display()
            if isinstance(error, SandboxRuntimeError) and error.message and frames.endswith(error.message):
                frames = frames[: -len(error.message)]  # the script's own text: it could hold a frame's line
            part = ran_part(code, failing_line(frames, self.script_name))
        else:  # nothing ran
            return
        if part.strip():
            self._context.append(part)

    async def _feed(self, code: str, lookup: dict[str, Callable[..., Any]], print_callback: PrintCallback) -> Any:
        limits = self.limits
        if limits.code_size is not None and len(code) * 4 > limits.code_size:  # else short enough
            size = len(code.encode('utf-8', 'surrogatepass'))
            if size > limits.code_size:
                raise SandboxLimitError(
                    f'the script is {size} bytes, more than the code_size limit of {limits.code_size} bytes; it was not checked or run',
                    limit='code_size',
                    value=limits.code_size,
                )
        if self._type_check:
            # The worker compiles while ty checks: a syntax error (or a refused construct) wins,
            # so it reads as Python shows it rather than as a type error; the compiled script
            # waits in the worker for the feed, whose wall_time starts when the script does.
            check = asyncio.ensure_future(self._check_types(code))
            try:
                await self._exchange([COMPILE, code, self.script_name], timeout=limits.type_check_time, limit='type_check_time')
            except BaseException:
                check.cancel()
                await asyncio.gather(check, return_exceptions=True)
                raise
            diagnostics = await check
            if diagnostics is not None:
                raise SandboxTypingError(diagnostics)
            if not self._lookup_checked:
                problem = missing_functions(self._stubs, lookup, 'the external_lookup of the first feed')
                if problem is not None:
                    raise StubError(problem)
                self._lookup_checked = True
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
        }
        try:
            return await self._exchange([FEED, code, self.script_name, functions, modules, worker_limits], timeout=limits.wall_time)
        finally:
            self._lookup = {}

    async def _check_types(self, code: str) -> str | None:
        """ty's diagnostics of `code`, or None; the `type check` span records the outcome:
        `outcome` (`'passed'` or `'failed'`), and for a failure `diagnostics` (how many) and
        `rules` (their rule names, e.g. `invalid-argument-type`, each once, in order)."""
        with _tracer.start_as_current_span('type check') as span:
            diagnostics = await self._pool._type_checker().check(
                code,
                script_name=self.script_name,
                stubs=self._stubs,
                modules={name: module.stubs or '' for name, module in self._modules.items()},
                context=self._context,
                time_limit=self.limits.type_check_time,
                memory=self.limits.type_check_memory,
            )
            if span.is_recording():
                if diagnostics is None:
                    span.set_attribute('outcome', 'passed')
                else:
                    rules = _DIAGNOSTIC_HEADER.findall(diagnostics)
                    span.set_attributes({'outcome': 'failed', 'diagnostics': len(rules), 'rules': list(dict.fromkeys(rules))})
            return diagnostics

    async def _exchange(self, message: list[Any], *, timeout: float | None, limit: str = 'wall_time') -> Any:
        """Send `message` and wait for the worker's DONE (its value) or FAIL (raised).

        The worker stops a script at `timeout` seconds itself; one that has not answered
        `Limits.grace` seconds later is killed, and the session ends (`limit` names the limit
        `timeout` is: `'wall_time'` for a feed, `'type_check_time'` for a compile alongside the
        check). A feed whose caller is cancelled ends the session too: its worker is mid-script.
        """
        loop = asyncio.get_running_loop()
        done = self._done = loop.create_future()
        deadline = None if timeout is None else loop.call_later(timeout + self.limits.grace, self._on_deadline, timeout, limit)
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

    def _on_deadline(self, timeout: float, limit: str) -> None:
        if limit == 'type_check_time':
            self._kill(f"the worker took longer than the type_check_time limit of {amount(limit, timeout)} to compile a script")
            text = f"compiling the script took longer than the type_check_time limit of {amount(limit, timeout)}; the script did not run and the sandbox was stopped"
        else:
            self._kill(f"the script ran past the wall_time limit of {amount(limit, timeout)} and did not stop")
            text = f"TimeoutError: the script ran past the wall_time limit of {amount(limit, timeout)} and was killed"
        self._fail(SandboxLimitError(text, limit=limit, value=timeout))

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
                    self._kill(f"the script used more than the cpu_time limit of {amount('cpu_time', self.limits.cpu_time)}")
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
            raise ProtocolError(f"the worker made more than the host_calls limit of {amount('host_calls', limit)}")
        if function is None:
            self._reply_error(call_id, NameError(f'{name!r} is not a host function of this session'))
            return
        if _tracing():
            span = _tracer.start_span(f'call {name}', context=self._span_context)
            if span.is_recording():
                span.set_attributes({'function': name, 'args': repr(args)[:1000], 'kwargs': repr(kwargs)[:1000]})
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
        span.end()
        try:
            payload = frame(pack([REPLY, call_id, True, result], side='host'))
        except (TypeError, ValueError, RecursionError, ProtocolError) as error:  # ProtocolError: too large
            short = name.rpartition('.')[2]
            self._reply_error(call_id, TypeError(f'{short}() returned a value of type {describe_type(result)!r} that cannot enter the sandbox: {error}'))
            return
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(payload)
            self._poll_briefly()

    def _reply_error(self, call_id: int, error: BaseException) -> None:
        payload = exception_payload(error)
        try:
            data = frame(pack([REPLY, call_id, False, payload], side='host'))
        except (TypeError, ValueError):
            data = frame(pack([REPLY, call_id, False, [payload[0], [str(error)]]], side='host'))
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(data)
            self._poll_briefly()


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
    """Reads frames from a worker's channel and hands decoded messages to its session."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._reader = FrameReader()

    def data_received(self, data: bytes) -> None:
        session = self._session
        session._heard = perf_counter()
        try:
            for payload in self._reader.feed(data):
                session._on_message(unpack(payload, budget=_DECODE_BUDGET + len(payload) / _DECODE_RATE))
        except Exception as error:  # anything a worker sends is untrusted: a bad frame ends it
            session._on_broken(f'it sent a malformed message ({type(error).__name__}: {error})')

    def connection_lost(self, exc: Exception | None) -> None:
        if self._session._dead is None:
            self._session._on_broken('the worker process exited')
