"""The child-process transport: framed messages on stdin and stdout.

Each message is a 4-byte little-endian length, then that many bytes of one protobuf message: a
`ParentRequest` read from stdin, a `ChildEvent` written to stdout. The protocol owns file
descriptor 1: it is moved to a descriptor of its own at start, and fd 1 then points at stderr, so
nothing else the process prints can corrupt a frame.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import struct
import sys
from typing import BinaryIO


from ..host.pool import Pool
from . import monty_v1_pb2 as pb
from .turns import MontyChild, parse_request

__all__ = ['MAX_REQUEST', 'FrameLink', 'serve_stdio']

#: The largest request, in bytes, the child reads; a longer frame is a fatal error.
MAX_REQUEST = 64 * 1024 * 1024

_LENGTH = struct.Struct('<I')


class FrameLink:
    """Length-prefixed protobuf frames over two byte streams (see `turns.Link`)."""

    def __init__(self, reader: BinaryIO, writer: BinaryIO) -> None:
        self._reader = reader
        self._writer = writer
        self._reading = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix='monty-stdin')

    def _read(self, size: int) -> bytes | None:
        data = bytearray()
        while len(data) < size:
            chunk = self._reader.read(size - len(data))
            if not chunk:
                return None
            data += chunk
        return bytes(data)

    async def receive(self) -> pb.ParentRequest | None:
        """The next request; None at the end of the stream (a cut frame too); `ValueError` for a
        frame that is no `ParentRequest`; `OverflowError` for one past `MAX_REQUEST`. The stream
        is read in a thread: the event loop goes on meanwhile."""
        return await asyncio.get_running_loop().run_in_executor(self._reading, self._receive)

    def _receive(self) -> pb.ParentRequest | None:
        head = self._read(_LENGTH.size)
        if head is None:
            return None
        (length,) = _LENGTH.unpack(head)
        if length > MAX_REQUEST:
            raise OverflowError(f'a request of {length} bytes is longer than the {MAX_REQUEST} this child reads')
        body = self._read(length)
        if body is None:
            return None
        return parse_request(body)

    def send(self, event: pb.ChildEvent) -> None:
        data = event.SerializeToString()
        self._writer.write(_LENGTH.pack(len(data)) + data)
        self._writer.flush()


def serve_stdio(pool_options: dict[str, object] | None = None) -> None:
    """Serve Monty's protocol on this process's stdin and stdout until the parent shuts it down."""
    protocol_out = os.fdopen(os.dup(1), 'wb', buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    link = FrameLink(sys.stdin.buffer, protocol_out)

    async def main() -> None:
        async with Pool(**(pool_options or {})) as pool:
            await MontyChild(pool, link).serve()

    asyncio.run(main())
