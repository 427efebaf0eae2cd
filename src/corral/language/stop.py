"""`SandboxStop`: how the worker stops a script (timeouts, limits), and why the script cannot run on.

Once the worker raises a stop, the stop is *due* (`enforce`) until the worker `release`s it at
the end of the feed. While a stop is due, no line of the script's own code runs without raising
it again, whatever the script catches and however it catches it (a handler, an exception raised
in a `finally` block with `from`, a `GeneratorExit`, a context chain hundreds deep, `return` in a
`finally`, a standard-library `except:` such as `ExitStack.__exit__`'s):

- every handler of the script starts with `reraise_stop` (see `guards.py`), which raises a due
  stop first thing;
- a trace function (`sys.settrace`) raises the stop at every line of a script frame. CPython turns
  tracing off when a trace function raises, so a profile function (`sys.setprofile`), which never
  raises, turns it on again at the next call or return, and the worker's stop timer does at its
  next tick (`rearm`, every `REPEAT_SECONDS`);
- the worker reports the limit even when the script ended after the stop without an error.

Nothing is traced or profiled until a stop is due: ordinary code runs at CPython's speed.
"""

from __future__ import annotations

import opcode
import sys
import types
from collections.abc import Container
from typing import Any

__all__ = ['REPEAT_SECONDS', 'SandboxStop', 'due', 'enforce', 'find_stop', 'is_stop', 'raise_due', 'rearm', 'release']

#: How often the worker's stop timer re-arms the trace while a stop is due (seconds).
REPEAT_SECONDS = 0.002


class SandboxStop(SystemExit):
    """Raised inside a script by the worker to stop it (a timeout, a limit).

    The script cannot swallow it: once raised it is due, and raised again at every line of the
    script's code until the feed ends (see the module's docstring). It derives from `SystemExit`
    (so from `BaseException`, never `Exception`) because asyncio lets only `SystemExit` and
    `KeyboardInterrupt` escape a task and its event loop; any other `BaseException` raised in a
    task would be stored in the task, where `gather(..., return_exceptions=True)` could hand it
    back to the script as a value.
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


_due: SandboxStop | None = None
_script_files: Container[str] = ()
_settrace = sys.settrace
_setprofile = sys.setprofile
_gettrace = sys.gettrace
#: The opcode that ends an `await` into which an exception was thrown (3.12 on): 3.13 reports a
#: line there, where no line of the script runs (the exception passes through, a cancelled task
#: ends cancelled).
_CLEANUP_THROW = opcode.opmap.get('CLEANUP_THROW', -1)


def due() -> SandboxStop | None:
    """The stop that is due, or None."""
    return _due


def enforce(stop: SandboxStop, frame: types.FrameType | None, script_files: Container[str]) -> None:
    """Make `stop` due: until `release()`, every line of code whose file is in `script_files`
    raises it. `frame` is where the stop is raised (its script frames and their callers' are
    traced from their next line on), or None when no script code is running."""
    global _due, _script_files
    _due = stop
    _script_files = script_files
    rearm(frame)


def rearm(frame: types.FrameType | None) -> None:
    """Turn the trace on again (a trace function that raised turned it off), for new frames and
    for the script frames on the stack from `frame` outwards. Does nothing when no stop is due."""
    if _due is None:
        return
    if _gettrace() is not _trace_call:
        _settrace(_trace_call)
    _setprofile(_profile)
    while frame is not None:
        if frame.f_code.co_filename in _script_files:
            frame.f_trace = _trace_line
        frame = frame.f_back


def release() -> None:
    """No stop is due any more: tracing and profiling end (the feed has ended)."""
    global _due
    _due = None
    _settrace(None)
    _setprofile(None)


def raise_due() -> None:
    """Raise the due stop, with a fresh traceback (where it was raised this time), if one is due."""
    stop = _due
    if stop is not None:
        raise stop.with_traceback(None)


def _trace_call(frame: types.FrameType, event: str, arg: Any) -> Any:
    if _due is not None and frame.f_code.co_filename in _script_files:
        return _trace_line
    return None


def _trace_line(frame: types.FrameType, event: str, arg: Any) -> Any:
    if event == 'line' and frame.f_code.co_code[frame.f_lasti] != _CLEANUP_THROW:
        raise_due()
    return _trace_line


def _profile(frame: types.FrameType, event: str, arg: Any) -> None:
    """On every call and return while a stop is due: trace again, and trace the frame that runs next."""
    if _due is None:
        return
    if _gettrace() is not _trace_call:
        _settrace(_trace_call)
    if event == 'return':
        frame = frame.f_back  # type: ignore[assignment]
        if frame is None:
            return
    if frame.f_code.co_filename in _script_files:
        frame.f_trace = _trace_line
