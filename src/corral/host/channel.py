"""A session's end of its worker's channel: frames read and decoded (`_Protocol`), the worker's
messages handled in order, and what the host sends awaited within its deadline."""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
import socket
import sys
from collections import deque
from collections.abc import Callable
from time import perf_counter
from typing import TYPE_CHECKING, Any

from ..channel import CALL, DONE, FAIL, OUTPUT, POLL_SECONDS, TIMED, WAIT, WAKE, FrameReader, ProtocolError, frame, idle, poll
from ..errors import SandboxLimitError, SandboxRuntimeError, SandboxSyntaxError, SandboxWorkerError
from ..limits import amount
from ..values import Decoder, giving_callables, pack, unpack

if TYPE_CHECKING:
    from .session import Session

#: Receives the script's printed text as `(stream, text)`; `stream` is `'stderr'` for what the script
#: wrote to `sys.stderr` (`print(..., file=sys.stderr)`, `sys.stderr.write()`), `'stdout'` otherwise.
PrintCallback = Callable[[str, str], None]

#: Frames up to this many bytes are decoded as they arrive, on the event loop (a few milliseconds
#: at most); larger ones in a thread (`_Protocol`).
_INLINE_FRAME = 64 * 1024
#: Times its wall_time a replayed feed may take (the machine may be slower, or busier, than the
#: one that ran it) before its worker is taken for one that will never finish, and the load fails.
_REPLAY_SLACK = 10
#: Items of a message beyond `Limits.value_items`: the message's own list and its other fields.
_ENVELOPE_ITEMS = 64
_PEEK = int(socket.MSG_PEEK | socket.MSG_DONTWAIT)  # an int: or-ing the flags costs more than the call
_LIMIT_FIELDS = frozenset({'wall_time', 'cpu_time', 'output', 'host_calls', 'memory', 'recursion', 'value_items', 'value_size', 'max_state_bytes'})
_ADDRESS = re.compile(rb'0x[0-9a-fA-F]+')
_EMPTY_WAKE = pack([WAKE, 0.0, None, True, None], side='host')


def print_to_host(stream: str, text: str) -> None:
    """The default `PrintCallback`: the script's output to the host's stdout, or its stderr."""
    (sys.stderr if stream == 'stderr' else sys.stdout).write(text)


class WorkerChannel:
    """The part of `Session` that talks with its worker: sends a request and awaits the DONE,
    FAIL or pause that ends it (`_exchange_with`), kills a worker that passes its deadline or
    breaks the channel's rules, and handles each message the worker sends (`_on_message`),
    handing its CALLs and WAITs to `HostCalls`.

    It uses the session's worker and channel (`_worker`, `_transport`, `_heard`, `_dead`), the
    feed in flight (`_done`, `_deadline`, `_trace`, `_next_call`, `_blocked`, `_waiting`,
    `_tick`, `_timed`, `_paused`, `_call_tasks`, `_running`), its `limits`, `_quota`, `_print`
    and `_callables`, and a replay's `_replay`.
    """

    async def _exchange(self, message: list[Any], *, timeout: float | None, limit: str = 'wall_time') -> Any:
        """Send `message` and wait for the worker's DONE (its value) or FAIL (raised)."""
        payload = pack(message, side='host')
        return await self._exchange_with(lambda: self._write(payload), timeout=timeout, limit=limit)

    async def _exchange_with(self, start: Callable[[], None], *, timeout: float | None, limit: str = 'wall_time') -> Any:
        """Call `start` (it sends what sets the worker going) and wait for the worker's DONE (its
        value), FAIL (raised) or a pause (`SandboxPaused`, raised).

        The worker stops a script at `timeout` seconds itself; one that has not answered
        `Limits.grace` seconds later is killed, and the session ends (`limit` names the limit
        `timeout` is: `'wall_time'` for a feed, `'type_check_time'` for a compile alongside the
        check, `'replay'` for a replayed feed). A feed whose caller is cancelled ends the session too: its worker is mid-script.
        """
        loop = asyncio.get_running_loop()
        done = self._done = loop.create_future()
        deadline = None if timeout is None else loop.call_later(timeout + self.limits.grace, self._on_deadline, timeout, limit)
        self._deadline = None if timeout is None or limit != 'wall_time' else loop.time() + timeout
        try:
            start()
            return await done
        except asyncio.CancelledError:
            self._kill('a feed was cancelled while the script ran')
            raise
        finally:
            if deadline is not None:
                deadline.cancel()
            self._done = None
            if not self._paused:
                if self._tick is not None:
                    self._tick.cancel()
                    self._tick = None
                for task in list(self._call_tasks):  # calls of tasks the worker cancelled as the feed ended
                    task.cancel()
                self._running.clear()

    def _on_deadline(self, timeout: float, limit: str) -> None:
        if limit == 'replay':
            self._on_broken(f"it did not finish a replayed feed in {_REPLAY_SLACK} times the wall_time limit of {amount('wall_time', timeout / _REPLAY_SLACK)}")
            return
        if limit == 'type_check_time':
            self._kill(f"the worker took longer than the type_check_time limit of {amount(limit, timeout)} to compile a script")
            text = f"compiling the script took longer than the type_check_time limit of {amount(limit, timeout)}; the script did not run and the sandbox was stopped"
        else:
            self._kill(f"the script ran past the wall_time limit of {amount(limit, timeout)} and did not stop")
            text = f"TimeoutError: the script ran past the wall_time limit of {amount(limit, timeout)} and was killed"
        self._fail(SandboxLimitError(text, limit=limit, value=timeout))

    def _write(self, *payloads: bytes) -> None:
        assert self._transport is not None
        self._transport.write(frame(payloads[0]) if len(payloads) == 1 else b''.join(map(frame, payloads)))
        self._poll_briefly()

    def _poll_briefly(self) -> None:
        """Poll (`channel.poll`) the channel of a worker that is itself still polling, when the
        event loop has nothing else to run; otherwise the loop sleeps until the worker answers.

        A worker polls for `POLL_SECONDS` after it last wrote; one that has gone to sleep takes as
        long to wake whether the host polls or not. An event loop whose queue cannot be seen
        (not asyncio's own) is never held up.
        """
        if perf_counter() - self._heard > POLL_SECONDS or not idle(asyncio.get_running_loop()) or self._worker is None:
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
            self._read_cpu()  # the last reading, before the worker's counters go with it
            if self._transport is not None:
                self._transport.abort()
            self._worker.kill()
            self._worker = None

    def _fail(self, error: BaseException) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_exception(error)

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
            if call_id != self._next_call or self._blocked is not None:
                raise ProtocolError('a CALL message out of order')
            self._next_call += 1
            self._trace.update(b'C' + name.encode('utf-8', 'surrogatepass') + b'\x00')
            self._on_call(call_id, name, args, kwargs)
        elif kind == WAIT:
            _, timeout = _shape(message, 2)
            if not (timeout is None or (type(timeout) is float and timeout >= 0.0)) or self._waiting is not None or self._blocked is not None:
                raise ProtocolError('malformed WAIT message')
            self._trace.update(b'W')
            self._on_wait(timeout)
        elif kind == TIMED:
            _shape(message, 1)
            self._timed = True
        elif kind == OUTPUT:
            _, stream, text = _shape(message, 3)
            if not isinstance(text, str) or stream not in ('stdout', 'stderr'):
                raise ProtocolError('malformed OUTPUT message')
            self._witness(text.encode('utf-8', 'surrogatepass'))
            self._print(stream, text)
        elif kind == DONE:
            _, value, shown = _shape(message, 3)
            if shown is not None and not isinstance(shown, str):
                raise ProtocolError('malformed DONE message')
            with giving_callables(self._callables):
                self._witness(pack(value, side='host'))
            self._end_of_feed()
            self.value_repr = shown
            self._done.set_result(value)
        elif kind == FAIL:
            _, failure, exc_type, text, display, detail = _shape(message, 6)
            if not all(isinstance(item, str) for item in (failure, exc_type, text, display)) or not _is_detail(detail):
                raise ProtocolError('malformed FAIL message')
            self._witness(display.encode('utf-8', 'surrogatepass'))
            self._end_of_feed()
            if failure == 'syntax':
                self._done.set_exception(SandboxSyntaxError(display))
            elif failure == 'limit':
                if exc_type not in _LIMIT_FIELDS:
                    raise ProtocolError(f'unknown limit {exc_type!r}')
                if exc_type == 'cpu_time':  # the kernel kills the worker a second later
                    self._kill(f"the script used more than the cpu_time limit of {amount('cpu_time', self.limits.cpu_time)}")
                value = self._quota if exc_type == 'max_state_bytes' else getattr(self.limits, exc_type)
                self._done.set_exception(SandboxLimitError(display, limit=exc_type, value=value))
            elif failure == 'runtime':
                module, fields = detail if detail is not None else ('', None)
                self._done.set_exception(SandboxRuntimeError(display, exc_type=exc_type, message=text, module=module, fields=fields))
            else:
                raise ProtocolError(f'unknown failure kind {failure!r}')
        else:
            raise ProtocolError(f'unknown message kind {kind!r}')

    def _witness(self, data: bytes) -> None:
        """Fold what the feed printed or ended with into its trace, so a replay that prints or
        returns something else is refused. Memory addresses (`0x7f...`, in default reprs) differ
        from process to process and are left out."""
        self._trace.update(_ADDRESS.sub(b'0x', data))

    def _end_of_feed(self) -> None:
        """The worker ended the feed: a replayed feed must have used all its recorded inputs, and
        a WAIT a stop cut short gets its answer (an empty WAKE) all the same."""
        if self._replay is not None and self._replay:
            self._diverged('it ended before taking in all the messages recorded for it')
        if self._waiting is not None:
            self._waiting = None
            if self._tick is not None:
                self._tick.cancel()
                self._tick = None
            self._write(_EMPTY_WAKE)

    def _on_broken(self, reason: str) -> None:
        """The worker died or sent something against the rules: kill it, fail the feed."""
        self._kill(reason)
        self._fail(SandboxWorkerError(f'the sandbox worker stopped: {reason}; check out a new session'))


def _is_detail(detail: Any) -> bool:
    """Whether a FAIL's `detail` is None or `[module, fields]`: a str, and None or a dict of str
    to str, bytes or int (see `SandboxRuntimeError`)."""
    if detail is None:
        return True
    if not (isinstance(detail, list) and len(detail) == 2 and isinstance(detail[0], str)):
        return False
    fields = detail[1]
    return fields is None or (
        isinstance(fields, dict) and all(isinstance(k, str) and type(v) in (str, bytes, int) for k, v in fields.items())
    )


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
    wait their turn. In a replay, what the worker sends for a feed whose messages went ahead of its
    turn waits, reading paused, until that feed's turn (`release`).

    Once the session has moved on to another worker (a stored session rolled back after a stop),
    the old channel's last events, and messages of it still being decoded, are ignored.
    """

    def __init__(self, session: Session) -> None:
        self._session = session
        self._reader = FrameReader()
        self._transport: asyncio.Transport | None = None
        self._backlog: deque[bytes] | None = None  # frames behind one being decoded in the thread
        self._lost = False  # the channel closed while frames waited
        self._decoding: asyncio.Task[None] | None = None
        self._held = False  # frames wait in the backlog for the next replayed feed's turn, reading paused

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def _current(self) -> bool:
        """Whether this channel is still the session's (not one it left behind in a rollback)."""
        return self._session._transport is self._transport

    def data_received(self, data: bytes) -> None:
        if self._session._transport is not self._transport:  # `_current`, inline: per frame
            return
        self._session._heard = perf_counter()
        try:
            payloads = self._reader.feed(data)
        except ProtocolError as error:
            self._broken(error)
            return
        if self._backlog is not None:
            self._backlog.extend(payloads)
            return
        self._backlog = deque(payloads)
        self._drain()

    def _drain(self) -> None:
        """Handle the waiting frames until one must be decoded in the thread, or none is left."""
        backlog = self._backlog
        assert backlog is not None
        session = self._session
        while backlog:
            if session._ahead and session._holding():  # the next replayed feed's, before its turn: see `release`
                assert self._transport is not None
                self._transport.pause_reading()  # no more than what was read comes in meanwhile
                self._held = True
                return
            payload = backlog.popleft()
            if len(payload) > _INLINE_FRAME:
                assert self._transport is not None
                self._transport.pause_reading()
                self._decoding = asyncio.get_running_loop().create_task(self._decode_in_thread(payload))
                return
            try:
                items, size = self._bounds(len(payload))
                message = unpack(payload, items=items, size=size, callables=self._session._callables)
            except Exception as error:
                self._broken(error)
                return
            if not self._deliver(message):
                return
        self._backlog = None
        if self._lost and self._session._dead is None and self._current():
            self._session._on_broken('the worker process exited')

    def release(self) -> None:
        """Take in the frames a replay held back (see `Session._holding`), now the feed they belong to runs."""
        if not self._held or not self._current():
            return
        self._held = False
        if self._backlog is not None and self._decoding is None:
            self._drain()  # the frames read already first: the next feed's, of several sent in one write, pause it again
        assert self._transport is not None
        if not self._held and self._decoding is None and not self._transport.is_closing():
            self._transport.resume_reading()

    async def _decode_in_thread(self, payload: bytes) -> None:
        items, size = self._bounds(len(payload))
        decoder = Decoder(items=items, size=size, callables=self._session._callables)
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

    def _bounds(self, length: int) -> tuple[int | None, int | None]:
        """The items and the bytes a frame of `length` bytes may decode to (see `values.Decoder`)."""
        limits = self._session.limits
        items = None if limits.value_items is None else limits.value_items + _ENVELOPE_ITEMS
        size = None if limits.value_size is None else 2 * limits.value_size + length
        return items, size

    def _deliver(self, message: Any) -> bool:
        """Hand a message to the session; False when it broke the channel's rules, or when the
        session was killed or moved on to another worker while the message was decoded."""
        session = self._session
        if session._dead is not None or session._transport is not self._transport:  # killed, or not `_current`
            self._backlog = None
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
        if self._current():
            self._session._on_broken(f'it sent a malformed message ({type(error).__name__}: {error})')

    def connection_lost(self, exc: Exception | None) -> None:
        if self._backlog is not None:  # the frames before the end come first
            self._lost = True
        elif self._session._dead is None and self._current():
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
