"""`PoolObserver`: what a pool and its sessions report as they work, for metrics and logs."""

from __future__ import annotations

__all__ = ['PoolObserver']


class PoolObserver:
    """Receives a pool's events: subclass it, override the methods you need, and pass an instance
    as `Pool(observer=...)`. Each method here does nothing.

    The methods are called on the pool's event loop, synchronously, at the moment the event
    happens; they must return at once and not raise (an exception would surface in the session
    that reported the event). corral's Prometheus metrics (`corral.server.metrics.Metrics`) are
    one observer; the host layer itself never imports a metrics library.
    """

    def worker_started(self) -> None:
        """The zygote forked a worker: for a checkout, or to keep one warm."""

    def session_opened(self) -> None:
        """A session was entered (`async with pool.checkout()`): it has a worker of its own."""

    def session_closed(self) -> None:
        """A session that was opened ended (its worker was killed); called once per opened session."""

    def checkout_failed(self, error: BaseException) -> None:
        """Entering a session raised `error` (a `StubError`, `SandboxStateError`,
        `SandboxSessionBusyError`, `SandboxInsecureError`, an `OSError` of the zygote ...)."""

    def feed_ended(self, seconds: float, error: BaseException | None) -> None:
        """A feed (`feed_run`) or its continuation (`resume`) ended after `seconds` of wall time
        (type check included): `error` is None when it returned a value, the `SandboxPaused` when it
        paused, or what it raised (a `SandboxError`, a `StubError`, or a cancellation)."""

    def host_call(self, function: str) -> None:
        """The script called the host function `function` (of `external_lookup` or an external
        module, `'module.function'`; a host object's member as `'<host object>.add'`, a host class's
        construction as `'<host class>'`, a callable given as a value as `'<host function>'`). The files, clock and environment a session's `OsAccess` and
        mounts answer are not host functions, and a replay answering from a journal calls nothing:
        neither is reported."""

    def type_checked(self, seconds: float, passed: bool) -> None:
        """ty checked a script in `seconds` of wall time; `passed` is False when it found errors."""

    def checkpoints_changed(self, count: int, memory: int) -> None:
        """The pool now keeps `count` live checkpoints holding `memory` bytes (see `CheckpointLimits`)."""

    def checkpoint_taken(self, used: bool) -> None:
        """A checkout of a stored session by id (`fork=True` too), or a `load_session`, looked for
        the state's checkpoint: `used` is True when it started from it, False when it replayed the
        journal (no checkpoint, or one of another state or rlimits)."""
    def sessions_expired(self, count: int) -> None:
        """The pool's retention deleted `count` stored sessions (1 or more) untouched for longer
        than `Pool(retention=...)`."""
