"""A server's tenants: each connection's API key gives its tenant (`KeyRing`), and the tenant's
quotas (`Quotas`) bound its sessions and feeds. `corral serve` puts the two together as

    keys, quotas = KeyRing(store), Quotas(store)
    pool = Pool(store=quotas.guard(store))                           # stored_bytes
    app = create_app(pool=pool, authenticate=authenticator(keys, anonymous=on_loopback),
                     hooks=[TenantHooks(quotas)])                    # concurrent_sessions, CPU

and the app checks every session out as its connection's tenant (`Pool.checkout(tenant=...)`).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from ..host.session import Session
from .app import Authenticate, ServerHooks
from .keys import KeyRing
from .quotas import CpuCounting, Quotas, TenantSlot

__all__ = ['TenantHooks', 'authenticator']


def authenticator(keys: KeyRing, *, anonymous: bool) -> Authenticate:
    """The app's `authenticate`: `keys.authenticate(key, anonymous=anonymous)`. Give
    `anonymous=True` only to a server that listens on loopback alone: a caller without a key is
    then the single tenant `''` while no key was ever made in the store (`KeyRing.is_empty`)."""

    async def authenticate(key: str | None) -> str:
        return await keys.authenticate(key, anonymous=anonymous)

    return authenticate


class TenantHooks(ServerHooks):
    """The hooks that hold a server's connections to their tenant's quotas: one of its
    `concurrent_sessions` from the session's request (before its OPEN frame is decoded) to its
    close (`Quotas.session`), and its `cpu_seconds_per_hour`: a session is requested and opens
    (replaying a stored one, or the one it forks) only under it, with the CPU of the opening
    counted (`Quotas.counting`), and `Quotas.feed` is around every feed, resumption and load
    (refused past the quota, the session's CPU counted after, and refused while the session's
    slot is lost: see `TenantSlot`). A refusal reaches the client as the `SandboxQuotaError`."""

    def __init__(self, quotas: Quotas) -> None:
        self.quotas = quotas
        # A connection opens and closes its session in its own task, and runs each feed in one task.
        self._sessions: dict[asyncio.Task[Any], tuple[contextlib.AsyncExitStack, TenantSlot]] = {}
        self._slots: dict[Session, TenantSlot] = {}
        self._feeds: dict[asyncio.Task[Any], CpuCounting] = {}
        self._openings: dict[asyncio.Task[Any], CpuCounting] = {}

    async def session_requested(self, tenant: str) -> None:
        await self.quotas.check_cpu(tenant)
        stack = contextlib.AsyncExitStack()
        slot = await stack.enter_async_context(self.quotas.session(tenant))
        self._sessions[_task()] = (stack, slot)

    async def session_starting(self, tenant: str, session: Session) -> None:
        self._openings[_task()] = await _started(self.quotas.counting(tenant, session))

    async def session_opened(self, tenant: str, session: Session) -> None:
        await self._opened()
        self._slots[session] = self._sessions[_task()][1]

    async def session_closed(self, tenant: str, session: Session | None, seconds: float) -> None:
        await self._opened()  # an opening that failed: what it used counts all the same
        held = self._sessions.pop(_task(), None)
        if session is not None:
            self._slots.pop(session, None)
        if held is not None:
            await held[0].aclose()

    async def _opened(self) -> None:
        counting = self._openings.pop(_task(), None)
        if counting is not None:
            counting.stop()

    async def feed_starting(self, tenant: str, session: Session) -> None:
        slot = self._slots.get(session)
        if slot is not None:
            await slot.check()
        self._feeds[_task()] = await _started(self.quotas.feed(tenant, session))

    async def feed_ended(self, tenant: str, session: Session, outcome: str, seconds: float, host_calls: int) -> None:
        counting = self._feeds.pop(_task(), None)  # none when feed_starting refused the feed
        if counting is not None:
            counting.stop()


def _task() -> asyncio.Task[Any]:
    task = asyncio.current_task()
    assert task is not None
    return task


async def _started(counting: CpuCounting) -> CpuCounting:
    await counting.start()
    return counting
