"""Which ``await``-family syntax errors from ty are spurious for corral scripts.

Scripts run with top-level ``await`` allowed (``PyCF_ALLOW_TOP_LEVEL_AWAIT``):
``await``, ``async for``, ``async with`` and async comprehensions are valid at
module level (comprehensions included), but still invalid inside a ``def``, a
``lambda`` or a ``class`` body.  ty reports all of them as
``invalid-syntax ... outside of an asynchronous function``; we drop those
located at module level.
"""

from __future__ import annotations

from ._syntax import Syntax

__all__ = ['AWAIT_MESSAGES', 'ModuleScope']

#: The invalid-syntax messages ty 0.0.99 gives for async constructs outside an
#: async function (with the ``error[invalid-syntax]: `` prefix removed).
AWAIT_MESSAGES = frozenset(
    {
        '`await` outside of an asynchronous function',
        '`async for` outside of an asynchronous function',
        '`async with` outside of an asynchronous function',
        'asynchronous comprehension outside of an asynchronous function',
    }
)


class ModuleScope:
    """Answers "is this (line, column) of the code at module scope?"."""

    def __init__(self, syntax: Syntax | None, lines: list[str]) -> None:
        """`syntax` is the code's (None: it does not parse), `lines` its lines."""
        self._lines = lines
        self._ranges = None if syntax is None else [((line, column), (end, end_column)) for line, column, end, end_column in syntax.scopes]

    def at_module_level(self, line: int, column: int) -> bool:
        """``line`` and ``column`` are 1-based, ``column`` counted in characters
        (as in ty's output)."""
        if self._ranges is None:
            # Unparsable code: the real syntax error is reported anyway.
            return True
        text = self._lines[line - 1] if 0 < line <= len(self._lines) else ''
        pos = (line, len(text[: max(column - 1, 0)].encode('utf-8')))
        return not any(start <= pos < end for start, end in self._ranges)
