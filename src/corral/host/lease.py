"""The lease a process holds on a stored session while it has it checked out."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from typing import TYPE_CHECKING

from ..errors import CorralError

if TYPE_CHECKING:
    from ..store import Store, StoredState

__all__ = ['Lease']


class Lease:
    """Holds `session_id` in `store` for one checkout: acquired (with the state read, or, for a
    new session, with its first write), renewed every third of `ttl` seconds while held, released at close. A holder that dies stops renewing, and the lease
    expires `ttl` seconds later, so a crashed process does not lock a session forever.

    `lost` is the error of a renewal that failed (the store was unreachable past the TTL, or
    another holder took the expired lease): the session then refuses to store its state.
    """

    def __init__(self, store: Store, session_id: str, *, ttl: float, tenant: str = '') -> None:
        self.store = store
        self.session_id = session_id
        self.holder = secrets.token_hex(16)
        self.ttl = ttl
        self.tenant = tenant
        self.lost: BaseException | None = None
        self._task: asyncio.Task[None] | None = None

    async def acquire_and_get(self) -> StoredState:
        """Take the lease and read the session's state at once (`Store.acquire_and_get`); raises
        `SandboxSessionBusyError` while another holder has it, `SandboxStateError` when the session
        is not stored (no lease taken then)."""
        stored = await self.store.acquire_and_get(self.session_id, holder=self.holder, ttl=self.ttl, tenant=self.tenant)
        self._renewing()
        return stored

    async def put(self, state: bytes, *, generation: int) -> None:
        """Write `state` as the session's full state (`Store.put`), taking the lease in the same
        write when it is not taken yet: a new session's id, which no other holder knows before
        this write, needs no write of its own for its lease."""
        taking = self._task is None
        await self.store.put(self.session_id, state, holder=self.holder, generation=generation, tenant=self.tenant, ttl=self.ttl if taking else None)
        if taking:
            self._renewing()

    def _renewing(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._renew())

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self.ttl / 3)
            try:
                await self.store.renew(self.session_id, holder=self.holder, ttl=self.ttl, tenant=self.tenant)
            except Exception as error:  # noqa: BLE001 - any store's failure: the session stops storing, and says why
                self.lost = error
                return

    async def release(self) -> None:
        """Stop renewing and give the lease back. Safe to call twice."""
        if self._task is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None
        with contextlib.suppress(CorralError, OSError):  # unreleased, the lease expires after its TTL
            await self.store.release(self.session_id, holder=self.holder, tenant=self.tenant)
