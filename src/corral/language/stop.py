"""`SandboxStop`: how the worker stops a script (timeouts, limits), and cannot be caught by it."""

from __future__ import annotations

__all__ = ['SandboxStop', 'find_stop', 'is_stop']


class SandboxStop(SystemExit):
    """Raised inside a script by the worker to stop it (a timeout, a limit).

    The script cannot swallow it: every `except` handler re-raises it first (the rewrite inserts
    the check), `return`/`break`/`continue` in `finally` are refused, and `with` blocks cannot
    suppress it. It derives from `SystemExit` (so from `BaseException`, never `Exception`)
    because asyncio lets only `SystemExit` and `KeyboardInterrupt` escape a task and its event
    loop; any other `BaseException` raised in a task would be stored in the task, where
    `gather(..., return_exceptions=True)` could hand it back to the script as a value.
    """


def find_stop(error: BaseException | None) -> SandboxStop | None:
    """The `SandboxStop` in `error`, looking inside exception groups; None when there is none."""
    pending = [error]
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, SandboxStop):
            return current
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
    return None


def is_stop(error: BaseException | None) -> bool:
    """Whether `error` is, or contains (in an exception group), a `SandboxStop`."""
    return find_stop(error) is not None
