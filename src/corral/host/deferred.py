"""Host calls that cannot be answered now: `Deferred`, and the `SandboxPaused` a feed stops with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ['Deferred', 'PendingCall', 'SandboxPaused']


class Deferred(Exception):
    """Raised by a host function that cannot answer now (it needs a person's approval, or runs for hours).

    The feed stops where it is and `feed_run` (or `resume`) raises `SandboxPaused` once every other
    call in flight has answered; `payload` (plain data: what an approval UI shows, a ticket id)
    comes back on the call's `PendingCall`. Answer it with `session.resume({call_id: value})`,
    now or after `dump()`/`load_session()` in another process.
    """

    def __init__(self, payload: Any = None) -> None:
        super().__init__(payload)
        self.payload = payload


@dataclass(frozen=True)
class PendingCall:
    """A host call the paused script waits on: `function` (`'f'` or `'module.f'`) called with
    `args` and `kwargs` (as the script passed them), `payload` as its `Deferred` gave it.
    `call_id` is the key to answer it by in `session.resume`."""

    call_id: int
    function: str
    args: list[Any]
    kwargs: dict[str, Any]
    payload: Any


class SandboxPaused(Exception):
    """The feed is paused on host calls that raised `Deferred`; `calls` lists them (`PendingCall`).

    Not a `SandboxError`: nothing failed. The session keeps the paused script (its worker waits),
    can be dumped, stored and closed, and goes on with `await session.resume(...)`; calls that
    answered before the pause keep their answers and are never made again.
    """

    def __init__(self, calls: list[PendingCall]) -> None:
        names = ', '.join(f'{call.function}() [call {call.call_id}]' for call in calls)
        super().__init__(f'the script is paused waiting on {names}; answer with session.resume()')
        self.calls = calls
