"""Per-session resource limits."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ['Limits', 'amount']


@dataclass(frozen=True, slots=True)
class Limits:
    """What one session may use. `None` turns a limit off.

    - `wall_time`: seconds the script of one `feed_run` may run, host calls included (its type
      check is bounded by `type_check_time`); past it the script is stopped, and a worker that
      has not stopped `grace` seconds later is killed (the session ends).
    - `memory`: bytes of address space of the worker (RLIMIT_AS); going past it raises
      `MemoryError` inside the script.
    - `cpu_time`: seconds of CPU the worker may use over the session's life (RLIMIT_CPU); past
      it the worker is stopped and the session ends.
    - `recursion`: how deep the script's own calls may go (`RecursionError` past it), counted as
      CPython counts its recursion depth, from the script's top level, which is one: each call
      of a function is one more, and on 3.11 so is a call through C code (`sorted(xs, key=f)` is
      two: `sorted`, and its call of `f`; 3.12 counts C calls apart). `recursion=50` lets `def f(n): return f(n + 1)`, called
      from the top level, go 49 calls deep.
    - `host_calls`: host function calls per feed; past it the call raises inside the script.
    - `output`: bytes of `print` output per feed; past it the script runs on, its output cut, and
      the feed's output ends with a line saying how many bytes were left out.
    - `code_size`: bytes (UTF-8) of one script; a longer one is refused before it is checked or
      run. The host parses a checked script, and CPython's parser holds the GIL, so this also
      bounds how long one script's check holds up every other session (some 4 ms per KiB on a
      busy 2-core VM).
    - `stub_size`: bytes (UTF-8) of a session's stubs, its `type_check_stubs` and its external
      modules' stubs together; more are refused as the session opens. ty reads them with every
      check, and a checker holds them meanwhile.
    - `type_check_time`: seconds the type check of one script may take (ty, and the worker
      compiling the script meanwhile); past it the check is stopped and the script does not run.
      Not counted in `wall_time`, which starts when the script does. It bounds the check of the
      stubs as the session opens too (past it, the session does not open).
    - `type_check_memory`: bytes of heap (RLIMIT_DATA: private writable memory) of each ty process
      checking the script; past it ty is stopped and the script does not run. It bounds the
      check of the stubs too.
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
    recursion: int = 1000
    host_calls: int | None = 10_000
    output: int | None = 1024**2
    code_size: int | None = 128 * 1024
    stub_size: int | None = 1024**2
    type_check_time: float | None = 10.0
    type_check_memory: int | None = 1024**3
    value_items: int | None = 1_000_000
    value_size: int | None = 64 * 1024**2
    grace: float = 1.0

    def __post_init__(self) -> None:
        """Refuse a limit that is not a number of its kind: each is an int (bytes, seconds of CPU,
        calls, items; `memory`, `cpu_time`, `type_check_memory` no more than an rlimit's 2**63 - 1)
        or, for `wall_time`, `type_check_time` and `grace`, a finite int or float; 0 or more, at
        least 1 for `recursion`; `None` for any but `recursion` and `grace`. Raises `TypeError`
        (a wrong type) or `ValueError` (out of range), naming the limit and the value: a server
        takes a session's limits from its client (`corral serve`)."""
        for name in self.__slots__:  # type: ignore[attr-defined]
            value = getattr(self, name)
            if value is None and name not in _REQUIRED:
                continue
            whole = name not in _SECONDS
            if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)):
                kind = 'a whole number' if whole else 'a number'
                raise TypeError(f'Limits.{name} must be {kind}{"" if name in _REQUIRED else " or None"}, not {value!r}')
            lowest = 1 if name == 'recursion' else 0
            if not (lowest <= value <= _LARGEST):  # NaN and infinity too
                raise ValueError(f'Limits.{name} must be from {lowest} to {_LARGEST}, not {value!r}')


#: The limits counted in seconds, which may be fractions; the others are whole numbers.
_SECONDS = frozenset({'wall_time', 'type_check_time', 'grace'})

#: The limits that cannot be turned off.
_REQUIRED = frozenset({'recursion', 'grace'})

#: The largest value of any limit: an rlimit's largest (rlim_t, a signed 64-bit count to setrlimit).
_LARGEST = 2**63 - 1


#: The unit a limit counts, singular and plural, as its messages name it.
_UNITS = {
    'wall_time': ('second', 'seconds'),
    'cpu_time': ('second of CPU', 'seconds of CPU'),
    'grace': ('second', 'seconds'),
    'memory': ('byte', 'bytes'),
    'output': ('byte', 'bytes'),
    'host_calls': ('host call', 'host calls'),
    'recursion': ('call', 'calls'),
    'code_size': ('byte', 'bytes'),
    'stub_size': ('byte', 'bytes'),
    'type_check_time': ('second', 'seconds'),
    'type_check_memory': ('byte', 'bytes'),
    'value_items': ('item', 'items'),
    'value_size': ('byte', 'bytes'),
    'max_state_bytes': ('byte', 'bytes'),  # a pool's, not a session's (`Pool(max_state_bytes=...)`)
}


def amount(limit: str, value: float) -> str:
    """`value` of `limit` with its unit, in words: `amount('wall_time', 1)` is '1 second',
    `amount('wall_time', 2.5)` '2.5 seconds', `amount('memory', 1024)` '1024 bytes'.

    A whole float is written as an int (`1.0` as `1`). Raises KeyError for an unknown limit.
    """
    singular, plural = _UNITS[limit]
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f'{value} {singular if value == 1 else plural}'
