"""The sync twin of `Pool`: the same pool, driven from ordinary (non-async) code."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

from .pool import Pool
from .session import PrintCallback, Session

__all__ = ['SyncPool', 'SyncSession']

T = TypeVar('T')


class SyncPool:
    """`Pool` for code that is not async: `with SyncPool() as pool: with pool.checkout() as s: s.feed_run(code)`.

    It runs a `Pool` on an event loop in a background thread of its own; host functions (sync or
    async) run on that thread. Arguments are those of `Pool`.
    """

    def __init__(self, **pool_options: Any) -> None:
        self._options = pool_options
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pool: Pool | None = None

    def __enter__(self) -> SyncPool:
        loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=loop.run_forever, name='corral-pool', daemon=True)
        self._thread.start()
        self._loop = loop
        self._pool = Pool(**self._options)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the pool and stop its thread."""
        if self._loop is None or self._pool is None or self._thread is None:
            return
        self._run(self._pool.aclose())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
        self._loop = self._thread = self._pool = None

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            coroutine.close()
            raise RuntimeError('the pool is not entered; use `with SyncPool() as pool:`')
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def start(self) -> None:
        """Start the zygote now: as `Pool.start` (raises `SandboxInsecureError` where a lockdown
        layer is missing)."""
        if self._pool is None:
            raise RuntimeError('the pool is not entered; use `with SyncPool() as pool:`')
        self._run(self._pool.start())

    def checkout(self, **options: Any) -> SyncSession:
        """A new session, started by `with`; the options are those of `Pool.checkout`."""
        if self._pool is None:
            raise RuntimeError('the pool is not entered; use `with SyncPool() as pool:`')
        session = self._pool.checkout(**options)
        return SyncSession(self, session)


class SyncSession:
    """The sync twin of `Session`; see `Session.feed_run`."""

    def __init__(self, pool: SyncPool, session: Session) -> None:
        self._pool = pool
        self._session = session

    def __enter__(self) -> SyncSession:
        self._pool._run(self._session.__aenter__())
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._pool._run(self._session.aclose())

    def feed_run(
        self,
        code: str,
        *,
        external_lookup: Mapping[str, Callable[..., Any]] | None = None,
        print_callback: PrintCallback | None = None,
    ) -> Any:
        """Run `code` and return the value of its last expression; raises what `Session.feed_run` raises."""
        return self._pool._run(self._session.feed_run(code, external_lookup=external_lookup, print_callback=print_callback))

    @property
    def session_id(self) -> str | None:
        """The stored session's id (`Session.session_id`); None for an ephemeral session."""
        return self._session.session_id

    def dump(self) -> bytes:
        """The session's signed state; see `Session.dump`."""
        return self._pool._run(self._session.dump())

    def load_session(self, state: bytes) -> None:
        """Load a dumped state into this fresh session; see `Session.load_session`."""
        self._pool._run(self._session.load_session(state))

    def resume(
        self,
        values: Mapping[int, Any] | None = None,
        *,
        errors: Mapping[int, BaseException] | None = None,
        external_lookup: Mapping[str, Callable[..., Any]] | None = None,
        print_callback: PrintCallback | None = None,
    ) -> Any:
        """Answer the paused feed's deferred calls and go on; see `Session.resume`."""
        return self._pool._run(self._session.resume(values, errors=errors, external_lookup=external_lookup, print_callback=print_callback))
