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
