"""The HTTP side of `corral serve`, before a connection reaches the app: uvicorn's HTTP protocol
with a deadline on each connection's request and a bound on the connections from one address
that have not upgraded to a WebSocket yet.

uvicorn times out neither a request that never ends nor a client that keeps many of them open:
300 connections sending half an upgrade request each held 300 descriptors for good, and never
reached the app, whose bounds (`create_app(max_pending_per_address=...)`) count upgraded
connections only. Here a connection has `handshake_timeout` seconds to send its request, and an
address that has `max_per_address` connections not yet upgraded gets the next refused at once.

    config = uvicorn.Config(app, http=guarded_http(handshake_timeout=10, max_per_address=128), ws=WebSocketProtocol)

Its WebSocket protocol (`WebSocketProtocol`) reads on while the app keeps up with the client, and
offers the app a direct link (`DirectLink`, in the scope's extensions as `DIRECT_LINK`): frames
written as they are made and taken as they are parsed, without a task or a queue between.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.exceptions import InvalidState

from ..channel import idle, poll_readable

__all__ = ['guarded_http', 'HANDSHAKE_TIMEOUT', 'MAX_HANDSHAKES_PER_ADDRESS', 'WebSocketProtocol', 'DirectLink', 'DIRECT_LINK']

#: Seconds a connection has to send its HTTP request (the WebSocket upgrade, or a request of
#: `/metrics` or a probe) before it is closed (`corral serve --handshake-timeout`).
HANDSHAKE_TIMEOUT = 10.0

#: Connections from one address that have not upgraded to a WebSocket yet, past which the next is
#: refused with a 503 as it is accepted (`corral serve --max-handshakes-per-address`): as many as
#: `MAX_PENDING_PER_ADDRESS` clients opening their sessions together need.
MAX_HANDSHAKES_PER_ADDRESS = 128

#: The key of a connection's `DirectLink` in its ASGI scope's `extensions` (`WebSocketProtocol`'s connections only).
DIRECT_LINK = 'corral.direct_link'


def guarded_http(*, handshake_timeout: float = HANDSHAKE_TIMEOUT, max_per_address: int = MAX_HANDSHAKES_PER_ADDRESS) -> type[asyncio.Protocol]:
    """A uvicorn HTTP protocol class (give it as `uvicorn.Config(http=...)`) whose connections
    have `handshake_timeout` seconds to send their request, and of which at most `max_per_address`
    from one client address wait for theirs or their upgrade at once (each class counts its own).
    A refused connection gets `503 Service Unavailable` with a text naming the bound. Raises
    `ValueError` unless both are above 0."""
    if not handshake_timeout > 0 or max_per_address <= 0:
        raise ValueError('handshake_timeout and max_per_address must be above 0')
    waiting: dict[str, int] = {}

    class GuardedHTTPProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        _address: str | None = None
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            address = self.client[0] if self.client else ''
            if waiting.get(address, 0) >= max_per_address:
                text = (
                    f'too many connections from {address} wait to send their request ({max_per_address}, '
                    "the server's limit per address); open fewer at once\n"
                ).encode()
                transport.write(b'HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n'
                                b'connection: close\r\ncontent-length: %d\r\n\r\n%s' % (len(text), text))
                transport.close()
                return
            waiting[address] = waiting.get(address, 0) + 1
            self._address = address
            self._deadline = self.loop.call_later(handshake_timeout, self._expired)

        def _expired(self) -> None:
            self._deadline = None
            if self.cycle is None or self.cycle.response_complete:  # no request under way (one of the app's runs on)
                self.transport.close()

        def _uncount(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            if self._address is not None:
                left = waiting.pop(self._address) - 1
                if left:
                    waiting[self._address] = left
                self._address = None

        def handle_websocket_upgrade(self, *args: Any) -> None:
            self._uncount()  # the app counts it from here (`max_pending_per_address`)
            super().handle_websocket_upgrade(*args)

        def connection_lost(self, exc: Exception | None) -> None:
            self._uncount()
            super().connection_lost(exc)

    return GuardedHTTPProtocol


class DirectLink:
    """What `WebSocketProtocol` offers the app of one connection beside ASGI's `send` and `receive`,
    which take a task's turn of the event loop and a coroutine through every middleware for each
    message: writing a binary message at once, and taking messages as they are parsed.

    `write(data)` sends `data` as one binary message now and returns True, or returns False without
    sending anything (the connection is closing or closed, or its socket's buffer is over its high
    water mark): send it the ASGI way then, after whatever waits to go that way.

    `take`, when set, is called with each binary message as it is parsed, while no earlier message
    waits for the app's `receive`: it returns True when it took the message (it never reaches
    `receive`), False to leave it to `receive` as usual. It runs inside the protocol's
    `data_received` and must not raise.

    `wait_briefly()`, after a write that the client answers at once (host calls), polls the socket
    for its answer for `channel.POLL_SECONDS` when the event loop has nothing else to run, as a
    session polls its worker's channel: a process asleep on its socket takes tens of microseconds
    longer to reach on a virtual machine, and the loop goes on at once either way.
    """

    __slots__ = ('_protocol', 'take')

    def __init__(self, protocol: WebSocketProtocol) -> None:
        self._protocol = protocol
        self.take: Callable[[bytes], bool] | None = None

    def write(self, data: bytes) -> bool:
        protocol = self._protocol
        if protocol.close_sent or protocol.disconnected or not protocol.handshake_complete or not protocol.writable.is_set() or protocol.transport.is_closing():
            return False
        try:
            protocol.conn.send_binary(data)
        except InvalidState:  # the client's close came first
            return False
        protocol.transport.write(b''.join(protocol.conn.data_to_send()))
        return True

    def wait_briefly(self) -> None:
        transport = self._protocol.transport
        sock = transport.get_extra_info('socket')
        if sock is not None and idle(self._protocol.loop) and not transport.is_closing():
            poll_readable(sock.fileno())


class WebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol (websockets' sans-I/O parser; give it as `uvicorn.Config(ws=...)`),
    pausing the reads of a client's socket only once two of its messages wait for the app, not as
    each arrives: uvicorn stopped and started reading around every message (two `epoll_ctl` calls
    each), though corral's app takes each as soon as it is queued. A client that sends faster than
    the app takes is held to two messages queued (and those parsed from one read), as it was to one:
    measured side by side, 877 -> 722 µs of host CPU per trivial feed.

    Each connection's scope carries a `DirectLink` (`scope['extensions'][DIRECT_LINK]`)."""

    def handle_connect(self, event: Any) -> None:
        self.direct_link = DirectLink(self)
        super().handle_connect(event)
        scope = getattr(self, 'scope', None)  # none when the upgrade was refused
        if scope is not None:
            scope['extensions'][DIRECT_LINK] = self.direct_link

    def send_receive_event_to_app(self) -> None:
        take = self.direct_link.take
        if take is not None and self.curr_msg_data_type == 'bytes' and not self.close_sent and self.queue.empty():
            data = self.frames[0] if len(self.frames) == 1 else b''.join(self.frames)
            if take(data):
                self.frames = []
                return
            self.frames = [data]
        if self.queue.qsize() < 1:
            paused, self.read_paused = self.read_paused, True  # read on: uvicorn pauses only if it thinks it is not paused
            super().send_receive_event_to_app()
            self.read_paused = paused
        else:
            super().send_receive_event_to_app()
