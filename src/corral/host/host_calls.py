"""A session's host calls: the script's calls to host functions run (sync ones on the event loop,
async ones in tasks), their answers sent to the worker as it asks for them and journaled, its
waits and timers answered, and the feed paused when it waits on deferred calls only."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import struct
from collections.abc import Callable
from time import perf_counter
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from ..channel import PAUSE, REPLY, STOP, WAKE, ProtocolError, frame
from ..limits import amount
from ..values import MAX_FRAME, HostCallables, ValueLimitError, bounded_repr, describe_type, fits, giving_callables, host_default, measure, not_given, pack, unnamed
from .channel import _INLINE_FRAME, _decoding_thread
from .deferred import Deferred, PendingCall, RemoteAnswer, SandboxPaused, StopFeed
from .external import exception_payload
from .journal import call_size, input_size

_tracer = trace.get_tracer('corral')

#: Items of a host function's result measured and packed on the event loop; a larger one is
#: measured and packed in the decoding thread.
_INLINE_ITEMS = 10_000
#: How long after the feed's wall_time a sleep in the host is cut short (seconds).
_SLEEP_MARGIN = 0.1
_SECONDS = struct.Struct('>d')  # the seconds of a WAKE, at bytes 3-10 of its payload (after 0x95 0x09 0xcb)
_PAUSE = pack([PAUSE], side='host')
#: The first character of a system call's name (`corral.language.hostio.PREFIX`).
SYSTEM_PREFIX = '\x00'
#: The one system call the worker awaits (the others block it): `asyncio.sleep`'s.
_ASYNC_SLEEP = SYSTEM_PREFIX + 'clock.async_sleep'


class HostCalls:
    """The part of `Session` that answers its worker's CALLs and WAITs.

    It uses the feed in flight (`_record`, `_lookup`, `_asyncs`, `_callables`, `_calls`,
    `_blocked`, `_waiting`, `_answers`, `_running`, `_call_tasks`, `_deferred`, `_tick`,
    `_paused`, `_stopping`, `_done`, `_deadline`, `_span_context`, `_traced`), its `limits`,
    `_system` and `_pool`, a replay's `_replay`, `_replaying` and `_replay_final`, and the
    stored state's size (`_journal_bytes`, `StoredState._over`).
    """

    def _on_call(self, call_id: int, name: str, args: list[Any], kwargs: dict[str, Any]) -> None:
        sync = name != _ASYNC_SLEEP if name.startswith(SYSTEM_PREFIX) else not (self._asyncs.get(name, False) or HostCallables.awaited(name))
        if sync:
            self._blocked = call_id
        record = self._record
        assert record is not None
        recorded = self._replaying
        if recorded is not None and call_id - recorded.first_call < len(recorded.calls):  # answered from the record
            if recorded.calls[call_id - recorded.first_call] != name:
                self._diverged(f'call {call_id} is to {_shown(name)}() where the record has {_shown(recorded.calls[call_id - recorded.first_call])}()')
                return
            record.calls.append(name)
            self._journal_bytes += call_size(name)
            if sync and (self._replay or not self._replay_final):
                self._serve_replay(call_id)
            elif sync:  # the call a paused feed waits on
                self._check_pause()
            return
        if self._replay is not None and not self._replay_final:
            self._diverged(f'it made a call the record does not have ({_shown(name)}())')
            return
        record.calls.append(name)
        self._journal_bytes += call_size(name)
        self._start_call(call_id, name, args, kwargs, sync)

    def _start_call(self, call_id: int, name: str, args: list[Any], kwargs: dict[str, Any], sync: bool) -> None:
        """Run a host call: a sync function right here, an async one in a task of its own."""
        function = self._system_function(name) if name.startswith(SYSTEM_PREFIX) else self._lookup.get(name) or self._callables.get(name)
        limit = self.limits.host_calls
        self._calls += 1
        if limit is not None and self._calls > limit:  # the worker stops a script first: this one ignored it
            raise ProtocolError(f"the worker made more than the host_calls limit of {amount('host_calls', limit)}")
        if function is None:
            self._reply(call_id, name, False, exception_payload(not_given(name)), sync)
            return
        shown = unnamed(name)  # an object's or a callable value's random name: in no observer's label or span
        if not name.startswith(SYSTEM_PREFIX):
            self._pool.observer.host_call(shown)
        if self._traced:
            span = _tracer.start_span(f'call {shown}', context=self._span_context)
            if span.is_recording():
                span.set_attributes({'function': shown, 'args': bounded_repr(args, limit=1000), 'kwargs': bounded_repr(kwargs, limit=1000)})
            token = otel_context.attach(trace.set_span_in_context(span, self._span_context))
        else:  # the call still runs in the feed's context (a remote parent span, baggage)
            span = trace.INVALID_SPAN
            token = otel_context.attach(self._span_context or otel_context.Context())
        call = (call_id, name, args, kwargs, sync)
        try:
            try:
                result = function(*args, **kwargs)
            except (Exception, SystemExit, KeyboardInterrupt) as error:  # a host function's exit is the script's error
                self._call_failed(span, call, error)
                return
            if inspect.isawaitable(result):
                self._running.add(call_id)
                if isinstance(result, RemoteAnswer):  # answered by another process (`corral serve`'s client): taken as it settles
                    result.take_with(functools.partial(self._call_settled, call, span))
                    self._call_tasks.add(result)
                    return
                if isinstance(result, asyncio.Future):  # answered elsewhere: no task waits for it
                    waiter: asyncio.Future[Any] = result
                    result.add_done_callback(functools.partial(self._call_settled, call, span))
                else:
                    waiter = asyncio.get_running_loop().create_task(self._await_call(call, span, result), context=contextvars.copy_context())
                self._call_tasks.add(waiter)
                waiter.add_done_callback(self._call_tasks.discard)
                return
        finally:
            otel_context.detach(token)
        span.end()
        self._reply(call_id, name, True, result, sync)

    def _system_function(self, name: str) -> Callable[..., Any]:
        """A system call (files, environment, clock, seed): answered from the session's OsAccess."""
        system, operation = self._system, name[len(SYSTEM_PREFIX):]
        if system.os_access.threaded:  # its answers wait on this loop: the call waits in a thread

            async def threaded_call(*args: Any) -> Any:
                return await self._settled(await asyncio.get_running_loop().run_in_executor(None, system.call, operation, list(args)))

            return threaded_call

        def system_call(*args: Any) -> Any:
            reply = system.call(operation, list(args))
            return self._settled(reply) if reply[0] and inspect.isawaitable(reply[1]) else reply

        return system_call

    async def _settled(self, reply: list[Any]) -> list[Any]:
        """A system call's reply whose value an OsAccess gave as an awaitable (a sleep), awaited, but
        not past the feed's wall_time: a sleep cut there (`_SLEEP_MARGIN` later, when the worker's
        own timer has gone off) answers None, and the worker stops the script at the call (a wait in
        the host cannot be stopped in the worker)."""
        if not (reply[0] and inspect.isawaitable(reply[1])):
            return reply
        task = asyncio.ensure_future(reply[1])
        timeout = None if self._deadline is None else max(0.0, self._deadline + _SLEEP_MARGIN - asyncio.get_running_loop().time())
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if not done:
            task.cancel()
            return [True, None]
        return [True, task.result()]

    async def _await_call(self, call: tuple[int, str, list[Any], dict[str, Any], bool], span: trace.Span, awaitable: Any) -> None:
        try:
            result = await awaitable
        except (Exception, SystemExit, KeyboardInterrupt) as error:
            self._running.discard(call[0])
            if call[4] and type(error) is RuntimeError and isinstance(error.__cause__, StopIteration) and str(error) == 'coroutine raised StopIteration':
                error = error.__cause__  # a sync call the host answers by awaiting: PEP 479's wrapping is the host's, not the call's
            self._call_failed(span, call, error)
        else:
            self._running.discard(call[0])
            span.end()
            self._reply(call[0], call[1], True, result, call[4])

    def _call_settled(self, call: tuple[int, str, list[Any], dict[str, Any], bool], span: trace.Span, future: asyncio.Future[Any]) -> None:
        """A call whose function returned a future, settled: as `_await_call` ends (a cancelled one, as its task does)."""
        self._call_tasks.discard(future)
        if future.cancelled():
            return
        self._running.discard(call[0])
        error = future.exception()
        if error is not None:
            self._call_failed(span, call, error)
            return
        span.end()
        self._reply(call[0], call[1], True, future.result(), call[4])

    def _call_failed(self, span: trace.Span, call: tuple[int, str, list[Any], dict[str, Any], bool], error: BaseException) -> None:
        call_id, name, args, kwargs, sync = call
        if isinstance(error, Deferred):
            span.set_attribute('deferred', True)
            span.end()
            self._deferred[call_id] = PendingCall(call_id, name, args, kwargs, error.payload)
            self._check_pause()
            return
        span.record_exception(error)
        span.set_status(trace.Status(trace.StatusCode.ERROR, type(error).__name__))
        span.end()
        if isinstance(error, StopFeed):  # the feed ends at the call, with the host's error
            if self._stopping and not sync:  # a stop went to the worker already: the feed is ending
                return
            self._stopping = True
            head = [REPLY, call_id] if sync else [WAKE, 0.0, call_id]
            self._send_answer(call_id, pack([*head, False, [STOP, ['stopped', error.exc_type, error.message]]], side='host'), sync)
            return
        self._reply(call_id, name, False, exception_payload(error), sync)

    def _answer(
        self, call_id: int, name: str, ok: bool, value: Any, *, sync: bool, items: int | None = None, size: int | None = None
    ) -> bytes:
        """The payload answering call `call_id`: a REPLY (sync), or a WAKE whose seconds `_offer` fills in.

        A result (`ok`) is measured first (`values.measure`) against `items` and `size`; past the
        session's `value_items` or `value_size` it is answered with an `OverflowError`, a result
        that cannot cross with a `TypeError`. Raises `_LargeResult` when the result is larger
        than `items` or `size` but those are not the session's limits.
        """
        head = [REPLY, call_id] if sync else [WAKE, 0.0, call_id]
        try:
            if ok and fits(value, items, size):  # a small plain value: nothing to convert, no callable to give
                payload = pack([*head, True, value], side='host')
            else:
                with giving_callables(self._callables):  # a callable in the result: the script's to call
                    if ok:
                        measure(value, items=items, size=size, subject=f'the value {self._returned_by(name)}() returned', crossing='enter the sandbox', convert=host_default)
                    payload = pack([*head, ok, value], side='host')
            if len(payload) > MAX_FRAME:
                frame(payload)  # too large: its ProtocolError
        except ValueLimitError as error:
            if error.value != getattr(self.limits, error.limit):
                raise _LargeResult from None
            return self._answer(call_id, name, False, exception_payload(OverflowError(str(error))), sync=sync)
        except (TypeError, ValueError, RecursionError, ProtocolError) as error:
            if ok:
                error = TypeError(f'{self._returned_by(name)}() returned a value of type {describe_type(value)!r} that cannot enter the sandbox: {error}')
                return self._answer(call_id, name, False, exception_payload(error), sync=sync)
            payload = pack([*head, False, [value[0], [str(item) for item in value[1]]]], side='host')
        return payload

    def _returned_by(self, name: str) -> str:
        """How the host function of a call named `name` reads in an error about its result: a host
        object's member as `Counter.add`, else its last dotted part."""
        return self._callables.shown(name) or name.rpartition('.')[2]

    def _reply(self, call_id: int, name: str, ok: bool, value: Any, sync: bool) -> None:
        """Answer call `call_id` with a host function's result (`ok`) or error payload.

        A result of up to `_INLINE_ITEMS` items (and `_INLINE_FRAME` bytes) is measured and packed
        here, on the event loop; a larger one in the decoding thread (`_reply_large`), so that
        neither blocks the loop for long.
        """
        if not ok:
            self._send_answer(call_id, self._answer(call_id, name, False, value, sync=sync), sync)
            return
        limits = self.limits
        items, size = limits.value_items, limits.value_size
        if items is None or items > _INLINE_ITEMS:
            items = _INLINE_ITEMS
        if size is None or size > _INLINE_FRAME:
            size = _INLINE_FRAME
        try:
            payload = self._answer(call_id, name, True, value, sync=sync, items=items, size=size)
        except _LargeResult:
            self._running.add(call_id)  # in flight until it is packed: the feed does not pause meanwhile
            task = asyncio.get_running_loop().create_task(self._reply_large(call_id, name, value, sync))
            self._call_tasks.add(task)
            task.add_done_callback(self._call_tasks.discard)
            return
        self._send_answer(call_id, payload, sync)

    async def _reply_large(self, call_id: int, name: str, result: Any, sync: bool) -> None:
        limits = self.limits
        try:
            payload = await asyncio.get_running_loop().run_in_executor(
                _decoding_thread(), functools.partial(self._answer, call_id, name, True, result, sync=sync, items=limits.value_items, size=limits.value_size)
            )
        except Exception as error:  # a conversion of the host's (a model's `model_dump`) failed
            payload = self._answer(call_id, name, False, exception_payload(error), sync=sync)
        finally:
            self._running.discard(call_id)
        self._send_answer(call_id, payload, sync)

    def _send_answer(self, call_id: int, payload: bytes, sync: bool) -> None:
        """A sync call's REPLY goes to the worker now; an async call's answer waits for its WAIT."""
        if sync:
            if self._transport is not None and not self._transport.is_closing():
                self._deliver(call_id, payload)
            return
        self._answers.append((call_id, payload))
        self._offer()
        self._check_pause()

    # ----- what the worker takes in: answers to its CALLs and WAITs, journaled --------------------

    def _deliver(self, call_id: int, payload: bytes) -> None:
        """Send the worker the answer to its request (a REPLY to sync call `call_id`, or a WAKE
        when `call_id` is -1) and journal it."""
        record = self._record
        assert record is not None
        if self._quota is not None and self._over(input_size(payload), self._input_room):  # a stored session's state would pass its quota: stop the feed here
            payload = self._stop_payload(call_id)
        record.inputs.append([call_id, payload])
        self._journal_bytes += input_size(payload)
        if call_id >= 0:
            self._blocked = None
        else:
            self._waiting = None
            if self._tick is not None:
                self._tick.cancel()
                self._tick = None
        if self._transport is not None and not self._transport.is_closing():
            self._write(payload)

    def _on_wait(self, timeout: float | None) -> None:
        if self._replay is not None and (self._replay or not self._replay_final):
            self._serve_replay(-1)
            return
        self._waiting = (perf_counter(), timeout)
        if self.on_worker_waiting is not None:
            self.on_worker_waiting()
        if self._answers:
            self._offer()
            return
        self._check_pause()
        self._arm_tick()

    def _arm_tick(self) -> None:
        """Answer the worker's WAIT with its timer when no reply comes before it."""
        if self._waiting is not None and self._waiting[1] is not None and self._tick is None and not self._paused:
            since, timeout = self._waiting
            self._tick = asyncio.get_running_loop().call_later(max(0.0, since + timeout - perf_counter()), self._on_tick)

    def _offer(self) -> None:
        """Hand the waiting worker the first async answer, with the seconds its clock moves on."""
        if self._waiting is None or not self._answers or self._paused:
            return
        since, timeout = self._waiting
        seconds = perf_counter() - since
        if timeout is not None:
            seconds = min(seconds, timeout)
        _, payload = self._answers.popleft()
        self._deliver(-1, payload[:3] + _SECONDS.pack(seconds) + payload[11:])

    def _on_tick(self) -> None:
        """The worker's next timer is due and no answer came first."""
        self._tick = None
        if self._waiting is not None and not self._paused:
            self._deliver(-1, pack([WAKE, self._waiting[1], None, True, None], side='host'))

    def _check_pause(self) -> None:
        """Pause the feed when the worker waits on deferred calls only, and no other call is in flight."""
        if not self._deferred or self._running or self._paused or self._done is None or self._done.done() or self._stopping:
            return
        if self._blocked is not None:
            if self._blocked not in self._deferred:
                return
        elif self._waiting is None or self._answers:
            return
        if self._over(self._pause_bytes(), self._input_room):  # a stored session could not store the pause: stop the feed instead
            self._deliver(-1 if self._blocked is None else self._blocked, self._stop_payload(-1 if self._blocked is None else self._blocked))
            return
        self._paused = True
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        if self._transport is not None and not self._transport.is_closing():
            self._write(_PAUSE)
        self._done.set_exception(SandboxPaused([self._deferred[call_id] for call_id in sorted(self._deferred)]))


def _shown(name: str) -> str:
    return unnamed(name).replace(SYSTEM_PREFIX, '')


class _LargeResult(Exception):
    """A host function's result is too large to measure and pack on the event loop."""
