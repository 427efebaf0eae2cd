"""The server's extension points (`ServerHooks`: metrics, quotas), how a client is authenticated
(`Authenticate`), and tenants' turns at what every tenant shares (`TenantTurns`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ..host.session import Session

#: `authenticate(api_key) -> tenant`: `api_key` is the bearer token of the connection's
#: `authorization` header, or None without one. Return the tenant's name (`''`: the single
#: tenant of a server without keys); raise a `corral.CorralError` (`SandboxAuthError`) whose text says why to refuse.
Authenticate = Callable[[str | None], Awaitable[str]]


class ServerHooks:
    """What the server tells the parts that watch or bound it (metrics, quotas); every method is a
    no-op here: subclass and override what you need, and pass instances as `create_app(hooks=[...])`.

    A hook that raises a `corral.CorralError` (`SandboxQuotaError`, say) refuses what it was asked about (the client gets
    that exception with its text); any other exception is a bug of the hook, and ends the
    connection as a server error. Hooks run on the event loop: they must not block it.
    """

    async def session_requested(self, tenant: str) -> None:
        """A client sent its OPEN frame, not decoded yet: refuse here what the tenant may not open
        at all (its quota of sessions), before the server spends time decoding the frame."""

    async def session_opening(self, tenant: str, options: dict[str, Any]) -> None:
        """A client asks for a session (before any worker starts). `options` are its checkout
        options as `corral.server.protocol` carries them (`session_id`, `ephemeral`, `limits` ...)."""

    async def session_starting(self, tenant: str, session: Session) -> None:
        """The session is about to start: its type checker to check its stubs, its worker to
        start, a stored one (or the one it forks) to be replayed in it. `session_opened` follows
        when it started, else `session_closed` with None."""

    async def session_opened(self, tenant: str, session: Session) -> None:
        """The session started (its worker is up; a stored session holds its lease)."""

    async def session_closed(self, tenant: str, session: Session | None, seconds: float) -> None:
        """The connection ended after `seconds`; `session` is None when it never opened one.
        Called once for every `session_requested` that did not raise."""

    async def feed_starting(self, tenant: str, session: Session) -> None:
        """A feed, a resumption of a paused one, or a load of a state (which replays its feeds) is about to run."""

    async def feed_ended(self, tenant: str, session: Session, outcome: str, seconds: float, host_calls: int) -> None:
        """A feed ended: `outcome` is 'ok', 'paused', or the class name of the exception it raised
        (`'SandboxRuntimeError'` ...); `seconds` of wall time; `host_calls` sent to the client."""


class TenantTurns:
    """Tenants' turns at something every tenant shares (the thread that decodes large frames, the
    one that writes mounts): one at a time per tenant, so that one tenant's many connections queue
    behind each other, not in front of every other tenant's.

        async with server.decoding.turn(tenant):
            ...
    """

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}  # the tenant's lock, and its holder and waiters

    @contextlib.asynccontextmanager
    async def turn(self, tenant: str) -> AsyncIterator[None]:
        """Wait for the tenant's turn, and hold it for the block."""
        lock, users = self._locks.get(tenant) or (asyncio.Lock(), 0)
        self._locks[tenant] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[tenant]
            if users == 1:
                del self._locks[tenant]
            else:
                self._locks[tenant] = (lock, users - 1)
