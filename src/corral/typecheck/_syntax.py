"""Parsing scripts on the host: once per text, however many steps of a check read it."""

from __future__ import annotations

import ast
import functools
import gc
import threading
from typing import Literal

__all__ = ['forget', 'nodes', 'parse_expression']


@functools.lru_cache(maxsize=8)
def nodes(code: str) -> tuple[ast.AST, ...] | None:
    """Every node of the syntax tree of `code` (in `ast.walk` order), or None when it does not
    parse (a SyntaxError, a NUL byte, nesting too deep for the parser).

    One parse and one walk serve every reader of the same text (a quick type check reads the
    new code three times: for its names, its top-level awaits and its imports), so callers must
    not change the nodes. `forget` drops them.
    """
    tree = _parse(code, 'exec')
    return None if tree is None else tuple(ast.walk(tree))


def forget() -> None:
    """Drop the nodes `nodes` keeps (a check ends with this: a large script's tree is not kept
    past its check)."""
    nodes.cache_clear()


def parse_expression(text: str) -> ast.Expression | None:
    """The syntax tree of `text` as one expression (`mode='eval'`), or None when it is not one."""
    return _parse(text, 'eval')  # type: ignore[return-value]


#: One parse at a time: a long script is parsed in a thread (see `TypeChecker`), and another
#: thread's parse must not turn garbage collection back on in the middle of it.
_PARSING = threading.Lock()


def _parse(text: str, mode: Literal['exec', 'eval']) -> ast.AST | None:
    # Garbage collection is paused while CPython builds the tree: a finalizer that parses source
    # mid-parse breaks CPython 3.11's parser (cpython gh-106905).
    with _PARSING:
        collecting = gc.isenabled()
        gc.disable()
        try:
            return ast.parse(text, mode=mode)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        finally:
            if collecting:
                gc.enable()
