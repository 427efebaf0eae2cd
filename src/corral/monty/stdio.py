"""The child-process transport: framed messages on stdin and stdout.

Each message is a 4-byte little-endian length, then that many bytes of one protobuf message: a
`ParentRequest` read from stdin, a `ChildEvent` written to stdout. The protocol owns file
descriptor 1: it is moved to a descriptor of its own at start, and fd 1 then points at stderr, so
nothing else the process prints can corrupt a frame.
"""

from __future__ import annotations

import asyncio
import os
import stat
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
    """Length-prefixed protobuf frames over two byte streams (see `turns.Link`): made by `open`."""

    def __init__(self, stream: asyncio.StreamReader, writer: BinaryIO) -> None:
        self._stream = stream
        self._writer = writer

    @classmethod
    async def open(cls, reader: BinaryIO, writer: BinaryIO) -> FrameLink:
        """The link reading `reader` and writing `writer`. A pipe, socket or terminal is read on the
        running event loop as its bytes arrive (a thread that read it cost each request a wake of
        the thread and one of the loop); anything else (a file, /dev/null) is read whole at once."""
        stream = asyncio.StreamReader()  # it holds a few reads beyond the frame it is asked for
        mode = os.fstat(reader.fileno()).st_mode
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or reader.isatty():
            await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stream), reader)
        else:
            stream.feed_data(reader.read())
            stream.feed_eof()
        return cls(stream, writer)

    async def receive(self) -> pb.ParentRequest | None:
        """The next request; None at the end of the stream (a cut frame too); `ValueError` for a
        frame that is no `ParentRequest`; `OverflowError` for one past `MAX_REQUEST`."""
        try:
            (length,) = _LENGTH.unpack(await self._stream.readexactly(_LENGTH.size))
            if length > MAX_REQUEST:
                raise OverflowError(f'a request of {length} bytes is longer than the {MAX_REQUEST} this child reads')
            body = await self._stream.readexactly(length)
        except asyncio.IncompleteReadError:
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

    async def main() -> None:
        link = await FrameLink.open(sys.stdin.buffer, protocol_out)
        async with Pool(**(pool_options or {})) as pool:
            await MontyChild(pool, link).serve()

    asyncio.run(main())
