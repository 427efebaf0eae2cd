"""The WebSocket frames a session's hot path reads and writes without websockets' parser: each
reads exactly the message websockets would read, or is left to websockets, which refuses what it
refused before (through `corral serve`'s protocol as through uvicorn's own)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import struct

import pytest
from websockets.client import ClientProtocol
from websockets.frames import Opcode
from websockets.server import ServerProtocol
from websockets.uri import parse_uri

from corral.server.frames import binary_frame, binary_message

from .test_defences import _serving


def connected(max_size: int | None = 100) -> tuple[ClientProtocol, ServerProtocol]:
    """A client's and a server's sans-I/O protocols past their handshake."""
    client, server = ClientProtocol(parse_uri('ws://x/'), max_size=max_size), ServerProtocol(max_size=max_size)
    client.send_request(client.connect())
    server.receive_data(b''.join(client.data_to_send()))
    server.send_response(server.accept(server.events_received()[0]))
    client.receive_data(b''.join(server.data_to_send()))
    client.events_received()
    return client, server


def frame(payload: bytes, *, first: int = 0x82, mask: bytes | None = b'\x01\x02\x03\x04', length: bytes | None = None) -> bytes:
    """A frame made byte by byte: `first` its FIN, RSV and opcode byte, `length` its length field (default the shortest)."""
    size = len(payload)
    if length is None:
        length = bytes((size,)) if size < 126 else bytes((126,)) + struct.pack('!H', size) if size < 65536 else bytes((127,)) + struct.pack('!Q', size)
    if mask is None:
        return bytes((first,)) + length + payload
    return bytes((first, length[0] | 0x80)) + length[1:] + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def websockets_reads(protocol: ServerProtocol | ClientProtocol, data: bytes) -> bytes | None:
    """The message websockets reads from `data` when it is one whole binary frame and nothing else; else None."""
    protocol.receive_data(data)
    events = protocol.events_received()
    if protocol.parser_exc is not None or len(events) != 1 or events[0].opcode is not Opcode.BINARY or not events[0].fin or protocol.reader.buffer:
        return None
    return bytes(events[0].data)


TO_SERVER = {
    'small': frame(b'hello'),
    'empty': frame(b''),
    'at the limit': frame(b'x' * 100),
    'past the limit': frame(b'x' * 101),
    'the 16-bit length': frame(b'y' * 100, length=bytes((126,)) + struct.pack('!H', 100)),
    'the 64-bit length': frame(b'y' * 10, length=bytes((127,)) + struct.pack('!Q', 10)),
    'not masked': frame(b'hello', mask=None),
    'rsv1': frame(b'hello', first=0xC2),
    'rsv3': frame(b'hello', first=0x92),
    'a fragment': frame(b'hello', first=0x02),
    'text': frame(b'hello', first=0x81),
    'a ping': frame(b'hello', first=0x89),
    'a close': frame(struct.pack('!H', 1000), first=0x88),
    'an unknown opcode': frame(b'hello', first=0x83),
    'two frames': frame(b'one') + frame(b'two'),
    'cut short': frame(b'hello')[:-1],
    'a byte more': frame(b'hello') + b'\x00',
    'the header only': frame(b'hello')[:2],
    'one byte': b'\x82',
    'nothing': b'',
}


@pytest.mark.parametrize('name', list(TO_SERVER))
def test_a_servers_frame_is_read_as_websockets_reads_it_or_left_to_it(name):
    data = TO_SERVER[name]
    mine = binary_message(connected()[1], data)
    theirs = websockets_reads(connected()[1], data)
    assert (mine, theirs) == (theirs, theirs) or mine is None
    expected = {'small': b'hello', 'empty': b'', 'at the limit': b'x' * 100, 'the 16-bit length': b'y' * 100}
    assert mine == expected.get(name)


@pytest.mark.parametrize('name', ['small', 'masked', 'a fragment', 'rsv2', 'two frames', 'past the limit'])
def test_a_clients_frame_is_read_as_websockets_reads_it_or_left_to_it(name):
    data = {
        'small': frame(b'hello', mask=None),
        'masked': frame(b'hello'),
        'a fragment': frame(b'hello', first=0x02, mask=None),
        'rsv2': frame(b'hello', first=0xA2, mask=None),
        'two frames': frame(b'one', mask=None) + frame(b'two', mask=None),
        'past the limit': frame(b'x' * 101, mask=None),
    }[name]
    mine = binary_message(connected()[0], data)
    assert mine == websockets_reads(connected()[0], data) if mine is not None else True
    assert mine == (b'hello' if name == 'small' else None)


def test_a_frame_is_not_read_where_websockets_waits_in_the_middle_of_one():
    # The rest of a frame cut after its mask, which looks like a whole frame itself (its mask is
    # zeros), is the payload of the first: websockets reads it so, and it is left to websockets.
    inner = frame(b'inner')
    outer = frame(inner, mask=b'\x00\x00\x00\x00')
    _, server = connected()
    server.receive_data(outer[:6])
    assert server.events_received() == []
    assert binary_message(server, outer[6:]) is None
    assert websockets_reads(server, outer[6:]) == inner
    assert binary_message(server, frame(b'next')) == b'next'  # at a frame's start again


def test_nothing_is_read_once_the_connection_is_not_open_or_has_an_extension():
    _, server = connected()
    server.send_close(1000)
    assert binary_message(server, frame(b'hello')) is None
    _, server = connected()
    server.extensions = [object()]
    assert binary_message(server, frame(b'hello')) is None


@pytest.mark.parametrize('size', [0, 125, 126, 65535, 65536])
def test_a_frame_written_is_read_back_by_websockets(size):
    payload = os.urandom(size)
    client, server = connected(max_size=None)
    assert websockets_reads(server, binary_frame(payload, masked=True)) == payload
    assert websockets_reads(client, binary_frame(payload, masked=False)) == payload
    masks = {binary_frame(b'', masked=True)[2:6] for _ in range(2000)}  # past one draw of os.urandom
    assert len(masks) > 1990


# ----- through `corral serve`'s WebSocket protocol, and through uvicorn's own ----------------------


@contextlib.asynccontextmanager
async def serving(ws):
    """An app that takes every message by `DirectLink.take` where there is one and by `receive`
    otherwise, served with uvicorn's WebSocket protocol `ws` (max size 100); yields its port and what it got."""
    from corral.server.listener import DIRECT_LINK

    got: list = []

    async def app(scope, receive, send):
        if scope['type'] != 'websocket':
            return
        await receive()
        await send({'type': 'websocket.accept'})
        link = scope['extensions'].get(DIRECT_LINK)
        if link is not None:
            link.take = lambda data: not got.append(data)
        while True:
            message = await receive()
            if message['type'] == 'websocket.disconnect':
                got.append(('disconnect', message.get('code')))
                return
            got.append(message.get('bytes') or message.get('text'))

    async with _serving(app, ws, ws_max_size=100) as (_, port):
        yield port, got


async def exchange(port: int, writes: list[bytes]) -> bytes:
    """Upgrade a raw connection, write each of `writes` on its own, and read what the server sends until it closes."""
    reader, writer = await asyncio.open_connection('127.0.0.1', port)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(f'GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n'.encode())
    await reader.readuntil(b'\r\n\r\n')
    for data in writes:
        writer.write(data)
        await writer.drain()
        await asyncio.sleep(0.05)  # each write its own read
    received = b''
    with contextlib.suppress(asyncio.TimeoutError):
        received = await asyncio.wait_for(reader.read(1 << 16), 0.5)
    writer.close()
    return received


CASES = {
    'whole frames': [frame(b'one'), frame(b'two')],
    'a frame cut after its mask': [frame(frame(b'inner'), mask=b'\x00' * 4)[:6], frame(frame(b'inner'), mask=b'\x00' * 4)[6:], frame(b'next')],
    'two frames in one write': [frame(b'one') + frame(b'two')],
    'not masked': [frame(b'one'), frame(b'hello', mask=None)],
    'rsv1': [frame(b'one'), frame(b'hello', first=0xC2)],
    'past the limit': [frame(b'one'), frame(b'x' * 101)],
    'a fragmented message': [frame(b'he', first=0x02), frame(b'llo', first=0x80), frame(b'next')],
    'text': [frame(b'hello', first=0x81)],
}


@pytest.mark.parametrize('case', list(CASES))
async def test_frames_the_direct_link_takes_and_refuses_are_those_uvicorns_protocol_does(case):
    from corral.server.listener import WebSocketProtocol

    outcomes = []
    for ws in (WebSocketProtocol, 'websockets-sansio'):
        async with serving(ws) as (port, got):
            sent = await exchange(port, CASES[case])
            for _ in range(100):
                if got and isinstance(got[-1], tuple):
                    break
                await asyncio.sleep(0.01)
        outcomes.append((got, sent))
    assert outcomes[0] == outcomes[1]
    messages, sent = outcomes[0]
    closed = (struct.unpack('!H', sent[2:4])[0], sent[4 : 2 + sent[1]].decode()) if sent else None
    assert (messages[:-1], closed) == {
        'whole frames': ([b'one', b'two'], None),
        'a frame cut after its mask': ([frame(b'inner'), b'next'], None),
        'two frames in one write': ([b'one', b'two'], None),
        'not masked': ([b'one'], (1002, 'incorrect masking')),
        'rsv1': ([b'one'], (1002, 'reserved bits must be 0')),
        'past the limit': ([b'one'], (1009, 'frame with 101 bytes exceeds limit of 100 bytes')),
        'a fragmented message': ([b'hello', b'next'], None),
        'text': (['hello'], None),
    }[case]
