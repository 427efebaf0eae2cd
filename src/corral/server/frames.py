"""WebSocket frames on a session's hot path, read and written here instead of by websockets'
sans-I/O parser and serializer, for the one case a host call's frames are: a whole binary message
in one frame, with no extension, arriving at a frame boundary.

websockets reads each frame through a chain of generators and writes it through a `Frame`, a
`BytesIO` and (on a client) a `getrandom` system call for its mask: measured, 18-21 µs of the
server's and the client's time per frame on the path of each host call. `binary_message` reads
a frame, and `binary_frame` writes one, in a few byte operations (`apply_mask` is websockets' own
C function). Anything else (a text or control frame, a fragment, a frame cut across reads or
several in one, reserved bits, a mask where none belongs or none where one must be, a length past
the limit, an extension, a connection that is not open, a parser in the middle of a frame) is
left to websockets, which checks it and refuses what it refused before.
"""

from __future__ import annotations

import os
from typing import Any

from websockets.frames import apply_mask
from websockets.protocol import Side, State
from websockets.streams import StreamReader

__all__ = ['binary_message', 'binary_frame']

_AT_EOF = StreamReader.at_eof.__code__
#: Bytes of `os.urandom` drawn at once for the masks of a client's frames (4 bytes each).
_RANDOM_POOL = 4096
_random = b''
_taken = 0


def binary_message(protocol: Any, data: bytes) -> bytes | None:
    """The message in `data`, the next bytes websockets' sans-I/O `protocol` (a
    `websockets.protocol.Protocol`, a server's or a client's) would be given, when reading it here
    is exactly what websockets would do: `protocol` is open, has no extension, is in no fragmented
    message, holds no bytes and waits for the start of a frame, and `data` is one whole binary
    frame, FIN set, reserved bits clear, masked if and only if a client sent it, its length in the
    7-bit or 16-bit form and within `protocol`'s limit. Else None: give `data` to `protocol`."""
    if not _at_boundary(protocol):
        return None
    masked = protocol.side is Side.SERVER
    size = len(data)
    if size < 2 or data[0] != 0x82 or bool(data[1] & 0x80) is not masked:
        return None
    length = data[1] & 0x7F
    start = 2
    if length == 126:
        if size < 4:
            return None
        length = int.from_bytes(data[2:4], 'big')
        start = 4
    elif length == 127:
        return None
    limit = protocol.max_message_size
    if protocol.max_fragment_size is not None:
        limit = protocol.max_fragment_size if limit is None else min(limit, protocol.max_fragment_size)
    if limit is not None and length > limit:
        return None
    if not masked:
        return data[start:] if size == start + length else None
    if size != start + 4 + length:
        return None
    return apply_mask(data[start + 4 :], data[start : start + 4])


def _at_boundary(protocol: Any) -> bool:
    """Whether `protocol` is open, with no extension, in no fragmented message, holding no bytes,
    and its parser waits for the start of the next frame (False for a websockets whose parts differ)."""
    if getattr(protocol, 'state', None) is not State.OPEN or protocol.extensions or getattr(protocol, 'current_size', 0) is not None or not hasattr(protocol, 'max_fragment_size'):
        return False
    reader = getattr(protocol, 'reader', None)
    if not isinstance(reader, StreamReader) or reader.buffer or reader.eof:
        return False
    step = getattr(protocol, 'parser', None)
    while (inner := getattr(step, 'gi_yieldfrom', None)) is not None:
        step = inner
    return getattr(step, 'gi_code', None) is _AT_EOF


def binary_frame(payload: bytes, *, masked: bool) -> bytes:
    """One binary frame holding `payload` whole, as websockets writes it with no extension; masked
    (a client's frame, RFC 6455 5.3) with 4 bytes of `os.urandom`, drawn `_RANDOM_POOL` at a time."""
    length = len(payload)
    flag = 0x80 if masked else 0
    if length < 126:
        head = bytes((0x82, flag | length))
    elif length < 65536:
        head = bytes((0x82, flag | 126)) + length.to_bytes(2, 'big')
    else:
        head = bytes((0x82, flag | 127)) + length.to_bytes(8, 'big')
    if not masked:
        return head + payload
    mask = _mask()
    return head + mask + apply_mask(payload, mask)


def _mask() -> bytes:
    global _random, _taken
    if _taken + 4 > len(_random):
        _random, _taken = os.urandom(_RANDOM_POOL), 0
    _taken += 4
    return _random[_taken - 4 : _taken]


def _forget_masks() -> None:
    global _random, _taken
    _random, _taken = b'', 0


os.register_at_fork(after_in_child=_forget_masks)  # a forked process draws masks of its own
