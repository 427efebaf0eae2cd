"""Framing and message kinds of the channel between the host and a worker.

A frame is a 4-byte big-endian length followed by that many bytes of msgpack (see `values`).
Every message is a list whose first item is its kind:

    host -> worker   [FEED, code, script_name, functions, modules, limits]
                     [COMPILE, code, script_name]         answered by DONE (None) or FAIL
                     [CODE, code, compiler, data, imports_asyncio]   unanswered: the host's compiled
                                                          code of `code` (a replayed feed's, before its FEED:
                                                          see `corral.host.compiled`), taken when `compiler`
                                                          is the worker's own (`language.compile.compiler_tag`)
                     [REPLY, call_id, ok, value]          ok False: value is [exc_type, args]
                     [WAKE, seconds, call_id, ok, value]  answers a WAIT: a reply (call_id an int)
                                                          or a timer due (call_id None)
                     [PAUSE]                              the feed is paused on a deferred call
                     a REPLY or WAKE whose value is [STOP, [limit]] (ok False) stops the feed there
                     for `limit`, a limit the host counts (`max_state_bytes`); [STOP, ['stopped',
                     exc_type, message]] stops it with that error (a host function's `StopFeed`)
    worker -> host   [CALL, call_id, name, args, kwargs]  name is 'f' or 'module.f'
                     [OUTPUT, stream, text]
                     [WAIT, timeout]                      nothing to run until a reply or `timeout`
                     [TIMED]                              before DONE/FAIL: tasks the feed left had to be
                                                          stopped by time, at points no replay reproduces
                     [DONE, value, shown]                 shown: the library's repr of a numpy/pandas value, or None
                     [FAIL, kind, exc_type, message, display, detail]   kind: 'syntax' or 'runtime';
                                                          detail: None, or [module, fields] (`SandboxRuntimeError`)
                     [FAIL, 'limit', limit, message, display, None]   limit: a field of `Limits`

`functions` maps a host function's name to whether it is async; `modules` maps a module name to
such a mapping; `limits` holds the limits the worker enforces itself (`wall_time`, `recursion`,
`output`, `host_calls`, `memory`, `cpu_time`, as in `Limits`). Both sides bound frames by `values.MAX_FRAME`; the host treats anything else a
worker sends (a bad length, bad msgpack, an unknown kind, a wrong shape) as a broken worker.
Each side polls the channel for `POLL_SECONDS` before it sleeps on it (`poll`).

Replies to async host calls are pulled, never pushed: a worker whose event loop has nothing to run
sends WAIT (with the seconds until its next timer, or None) and takes in exactly one WAKE, which
also moves the loop's clock on by `seconds`. A sync call's REPLY comes right after its CALL. So
every message that reaches a worker answers a request it made, at a point its own inputs fix, and
the host's log of what it sent (the session's journal) replays the session exactly.
"""

from __future__ import annotations

import os
import select
import struct
import time
from collections.abc import Callable
from typing import TypeVar

from .values import MAX_FRAME

__all__ = ['FEED', 'COMPILE', 'CODE', 'REPLY', 'CALL', 'OUTPUT', 'DONE', 'FAIL', 'WAIT', 'WAKE', 'PAUSE', 'TIMED', 'STOP', 'POLL_SECONDS', 'ProtocolError', 'frame', 'poll', 'poll_readable', 'idle', 'FrameReader']

_T = TypeVar('_T')

#: Seconds a side polls the channel before it sleeps waiting for the other (see `poll`).
POLL_SECONDS = 0.0002

FEED, REPLY, CALL, OUTPUT, DONE, FAIL, COMPILE, WAIT, WAKE, PAUSE, TIMED = range(1, 12)
CODE = 12
#: The exception name of a host answer that stops the feed for a limit the host counts; no
#: exception a host function raises has it (a name starts with a letter).
STOP = '\x00stop'

_HEADER = struct.Struct('>I')


def poll(ready: Callable[[], _T], seconds: float = POLL_SECONDS) -> _T:
    """Call `ready()` until it returns something true or `seconds` pass; its last result.

    The CPU is yielded between calls, so a process sharing it is not held up. Both sides poll
    their channel briefly before they sleep on it: on a virtual machine, waking a sleeping process
    costs tens of microseconds (measured: a socketpair round trip takes 37 µs when both sides
    block, 5 µs when both poll).
    """
    deadline = time.perf_counter() + seconds
    while not (result := ready()) and time.perf_counter() < deadline:
        os.sched_yield()
    return result


def poll_readable(fileno: int, seconds: float = POLL_SECONDS) -> bool:
    """`poll` file descriptor `fileno` (a socket) until it is readable or `seconds` pass; whether it is."""
    poller = select.poll()
    poller.register(fileno, select.POLLIN)
    return bool(poll(lambda: poller.poll(0), seconds))


def idle(loop: object) -> bool:
    """Whether asyncio's event loop `loop` has nothing to run now but handles cancelled (an event
    loop whose queue cannot be seen counts as busy): then a side may `poll` its channel a while
    without holding anything up."""
    ready = getattr(loop, '_ready', None)
    return ready is not None and all(handle.cancelled() for handle in ready)


class ProtocolError(Exception):
    """A frame broke the channel's rules (too large, truncated, malformed)."""


def frame(payload: bytes) -> bytes:
    """Prefix one encoded message with its length. Raises `ProtocolError` past `MAX_FRAME`."""
    if len(payload) > MAX_FRAME:
        raise ProtocolError(f'message of {len(payload)} bytes is larger than the limit of {MAX_FRAME} bytes')
    return _HEADER.pack(len(payload)) + payload


class FrameReader:
    """Splits a byte stream into frame payloads.

    `feed(data)` returns the payloads completed by `data`, in order; bytes of an incomplete frame
    are kept for the next call. Raises `ProtocolError` as soon as a header announces a frame
    larger than `max_frame` bytes, before buffering it.
    """

    __slots__ = ('_buffer', '_max')

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self._buffer = bytearray()
        self._max = max_frame

    def feed(self, data: bytes) -> list[bytes]:
        buffer = self._buffer
        buffer += data
        frames = []
        start = 0
        end = len(buffer)
        while end - start >= 4:
            (size,) = _HEADER.unpack_from(buffer, start)
            if size > self._max:
                raise ProtocolError(f'frame of {size} bytes announced, larger than the limit of {self._max} bytes')
            if end - start - 4 < size:
                break
            frames.append(bytes(buffer[start + 4 : start + 4 + size]))
            start += 4 + size
        if start:
            del buffer[:start]
        return frames

    @property
    def pending(self) -> int:
        """Bytes received that do not yet make a whole frame."""
        return len(self._buffer)
