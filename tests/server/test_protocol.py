"""`corral.server.protocol`'s reading of a frame's kind without decoding the rest."""

from __future__ import annotations

import msgpack
import pytest

from corral.server import protocol


def unpacked_kind(data: bytes) -> int | None:
    """The kind as msgpack reads it: the first item of the array the frame starts with, if an int."""
    unpacker = msgpack.Unpacker(max_buffer_size=16)
    unpacker.feed(data[:16])
    try:
        kind = unpacker.unpack() if unpacker.read_array_header() else None
    except (msgpack.UnpackException, ValueError):
        return None
    return kind if type(kind) is int else None


def test_the_kind_read_from_the_first_bytes_is_msgpacks_for_every_pair_of_them():
    frames = [b''] + [bytes((first,)) for first in range(256)]
    frames += [bytes((first, second)) + rest for first in range(256) for second in range(256) for rest in (b'', b'\x00' * 9, b'\xff' * 9)]
    for data in frames:
        expected = unpacked_kind(data)
        if expected is None:
            with pytest.raises(ValueError) as refused:
                protocol.kind_of(data)
            assert str(refused.value) == 'a message must be a non-empty list whose first item is its kind'
        else:
            assert protocol.kind_of(data) == expected, data
    assert [protocol.kind_of(protocol.encode([kind, 'x'])) for kind in (protocol.ANSWERS, protocol.FEED, 300)] == [protocol.ANSWERS, protocol.FEED, 300]
