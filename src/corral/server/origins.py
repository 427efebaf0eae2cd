"""Refusing WebSocket upgrades that a web page makes: cross-site WebSocket hijacking.

A browser lets any page open a WebSocket to any address, the developer's own loopback included,
and sends the page's origin in the `Origin` header; nothing else stops a page the developer
visits from running code on a `corral serve` that takes callers without a key (loopback, no key
made yet). corral's clients (`RemotePool`, `logfire.agent_sandboxes()`) are no web pages and send
no `Origin`; so every upgrade that carries one is refused, but from the origins the operator lets
in (`corral serve --allow-origin`). Unlike an allow-list of loopback origins (what the MCP SDK's
`TransportSecurityMiddleware` keeps for `corral mcp --transport http`), this also refuses a page
served from another port of the same machine: the server serves no page of its own.
"""

from __future__ import annotations

from collections.abc import Collection

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ['OriginGuard', 'CLOSE_FOREIGN_ORIGIN']

#: The close code of a refused upgrade (RFC 6455 7.4.1, policy violation); uvicorn answers the
#: upgrade request with `403 Forbidden`.
CLOSE_FOREIGN_ORIGIN = 1008


class OriginGuard:
    """ASGI middleware: a WebSocket upgrade whose `Origin` header is not one of `allowed` (exact
    strings, `scheme://host[:port]`) is refused before the app sees it (403); one without the
    header, and every plain HTTP request, goes on to `app`."""

    def __init__(self, app: ASGIApp, allowed: Collection[str] = ()) -> None:
        self.app = app
        self.allowed = frozenset(allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope['type'] == 'websocket':
            origin = Headers(scope=scope).get('origin')
            if origin is not None and origin not in self.allowed:
                reason = f'a WebSocket from the web page of {origin[:60]} is refused (corral serve --allow-origin lets one in)'
                await send({'type': 'websocket.close', 'code': CLOSE_FOREIGN_ORIGIN, 'reason': reason[:120]})
                return
        await self.app(scope, receive, send)
