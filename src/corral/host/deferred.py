"""Host calls that cannot be answered now: `Deferred`, and the `SandboxPaused` a feed stops with;
that end the feed there: `StopFeed`; or that another process answers: `RemoteAnswer`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ['Deferred', 'PendingCall', 'SandboxPaused', 'StopFeed', 'RemoteAnswer']


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


class StopFeed(Exception):
    """Raised by a host function (or an `OsAccess` method) to end the feed at its call with an error
    the script cannot catch, as a limit the host counts itself (calls, a total of sleeps) ends it.

    `feed_run` raises `SandboxRuntimeError` whose `exc_type` is `exc_type` (a built-in exception's
    name, or a dotted one) and whose `message` is `message`, with the script's frames at the call:

        raise StopFeed('TimeoutError', 'the sleeps passed their budget of 1 s')

    A `try`/`except BaseException` in the script does not stop it: no handler of the script's runs.
    Raises `ValueError` for an `exc_type` that is not such a name.
    """

    def __init__(self, exc_type: str, message: str) -> None:
        if not isinstance(exc_type, str) or not all(part.isidentifier() for part in exc_type.split('.')):
            raise ValueError(f'StopFeed exc_type must be an exception name such as RuntimeError, not {exc_type!r}')
        super().__init__(exc_type, str(message))
        self.exc_type, self.message = exc_type, str(message)


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


class RemoteAnswer(asyncio.Future[Any]):
    """The answer to a host call that another process gives (`corral serve` sends its sessions'
    host calls to the client that runs their functions): what a host function returns so that the
    session takes the answer as it is settled (`settle`), in the same turn of the event loop, and
    not a turn later, as a future's done callbacks run (an answer the server relays to the worker
    took 16 µs and a wait on the socket more). Cancelling it tells the session at once too.
    """

    _taker: Callable[[RemoteAnswer], None] | None = None

    def take_with(self, taker: Callable[[RemoteAnswer], None]) -> None:
        """Call `taker(self)` once this is settled or cancelled: at once then, or in the event
        loop's next turn when it is done already (as `add_done_callback` would). One taker only:
        a later one replaces it."""
        if self.done():
            self.get_loop().call_soon(taker, self)
        else:
            self._taker = taker

    def settle(self, value: Any = None, error: BaseException | None = None) -> None:
        """Set the result `value`, or the exception `error`, and hand it to the taker now (an
        exception of the taker's goes to the event loop's exception handler, as a callback's
        would). Raises `asyncio.InvalidStateError` when it is done already."""
        if error is None:
            self.set_result(value)
        else:
            self.set_exception(error)
        self._take()

    def cancel(self, msg: Any = None) -> bool:
        cancelled = super().cancel(msg)
        if cancelled:
            self._take()
        return cancelled

    def _take(self) -> None:
        taker, self._taker = self._taker, None
        if taker is None:
            return
        try:
            taker(self)
        except Exception as error:
            self.get_loop().call_exception_handler({'message': 'a taker of a RemoteAnswer failed', 'exception': error, 'future': self})
