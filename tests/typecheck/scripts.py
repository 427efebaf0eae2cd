"""Stub and script text that more than one type-check test file checks."""

from __future__ import annotations

import textwrap

# A coroutine, an async iterator and an async context manager for the scripts below.
ASYNC_STUBS = textwrap.dedent(
    """\
    import asyncio
    from collections.abc import AsyncIterator
    lock: asyncio.Lock
    async def fetch(n: int) -> int: ...
    def stream() -> AsyncIterator[int]: ...
    """
)

# `await`, `async for`, `async with` and an async comprehension at the top level of a script.
TOP_LEVEL_ASYNC = textwrap.dedent(
    """\
    total = await fetch(1)
    async for item in stream():
        total += item
    async with lock:
        pass
    squares = [x * x async for x in stream()]
    """
)


def branches(count: int) -> str:
    """A script of `count` `if` branches that each narrow and rebind one variable: ty's time and
    memory grow much faster than its length (3,500 branches, some 104 KB, take ty tens of
    seconds and gigabytes unbounded)."""
    lines = ['x = int("3")', 'y = 0']
    lines += [f'if x == {i}:\n    y = y + {i}' for i in range(count)]
    return '\n'.join(lines) + '\ny\n'
