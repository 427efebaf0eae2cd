"""Per-session resource limits."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ['Limits']


@dataclass(frozen=True, slots=True)
class Limits:
    """What one session may use. `None` turns a limit off.

    - `wall_time`: seconds one `feed_run` may take, host calls included; past it the worker is
      killed (after `grace` more seconds) and the session ends with `SandboxLimitError`.
    - `memory`: bytes of address space of the worker (RLIMIT_AS); going past it raises
      `MemoryError` inside the script.
    - `cpu_time`: seconds of CPU the worker may use over the session's life (RLIMIT_CPU); past
      it the worker is stopped and the session ends.
    - `recursion`: deepest Python call stack a script may reach (`RecursionError` past it).
    - `host_calls`: host function calls per feed; past it the call raises inside the script.
    - `output`: bytes of `print` output per feed; past it `print` raises inside the script.
    - `value_items`: items in one value that crosses the boundary (the script's result, the
      arguments of a host call, a host function's result): every item of every list, tuple, set
      and frozenset and every entry of every dict, each reference counted as the copy it becomes
      (`[[]] * 1000` is a thousand lists on the other side). Past it the value is refused: the
      result with `SandboxLimitError`, a host call's arguments or result with an `OverflowError`
      inside the script. Counted by the sender before packing and again by the host while it
      decodes, so it also bounds what the host builds from one message.
    - `value_size`: bytes such a value takes once decoded (its objects' `sys.getsizeof`, each
      reference counted as its copy); past it, refused as for `value_items`.
    - `grace`: seconds the host waits, after a limit, before it kills a worker that ignores it;
      it also covers ending the tasks a feed left behind (up to half a second).
    """

    wall_time: float | None = 30.0
    memory: int | None = 1024**3
    cpu_time: int | None = 600
    recursion: int = 500
    host_calls: int | None = 10_000
    output: int | None = 1024**2
    grace: float = 1.0
    value_items: int | None = 1_000_000
    value_size: int | None = 64 * 1024**2
