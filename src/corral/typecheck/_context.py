"""Which earlier snippets of a session a new one depends on, for the quick type check.

A later feed is checked with the session's earlier snippets in front of it, so its names have
their types. The warm `ty server` answers "is it clean?" faster with fewer lines in front: only
the snippets that bind a name the new code mentions, then the snippets binding the names those
mention, and so on (the closure), in their order. Dropping the other snippets can only remove
what narrows or ends the flow before the new code (an `assert`, a call that never returns, a
top-of-file pragma), which makes the quick check stricter, not laxer; whatever it reports is
checked again with every earlier snippet, so the diagnostics a script sees are unchanged.

Names are over-approximated: every name a snippet stores, deletes, defines, imports, declares
`global` or `nonlocal`, or takes as a parameter or a capture counts as bound, and every name it
mentions counts as used, in code or in a string that reads as a type (`x: "Order"`, `cast("int",
v)`: the checker resolves those too). A snippet with a `*` import binds names nobody can list, so it is
always kept. A snippet the host cannot parse makes the whole context count.
"""

from __future__ import annotations

import ast
import functools
import gc
import re
from collections.abc import Sequence

__all__ = ['relevant_context']

#: A string that could be a type written as text: names, dots, brackets, commas, `|`, quotes.
_TYPE_TEXT = re.compile(r"[\w\s.,\[\]|'\"]{1,200}")


def relevant_context(context: Sequence[str], code: str) -> list[str]:
    """The snippets of `context` that `code` depends on, in their order (all of them when a
    snippet or `code` does not parse)."""
    new = _names(code)
    infos = [_names(snippet) for snippet in context]
    if new is None or any(info is None for info in infos):
        return list(context)
    binders: dict[str, list[int]] = {}
    kept: set[int] = set()
    for index, info in enumerate(infos):
        assert info is not None
        if info[2]:
            kept.add(index)
        for name in info[0]:
            binders.setdefault(name, []).append(index)
    pending = set(new[1]).union(*(infos[index][1] for index in kept))  # type: ignore[index]
    seen = set(pending)
    while pending:  # each name once: linear in the number of names
        for index in binders.get(pending.pop(), ()):
            if index not in kept:
                kept.add(index)
                fresh = infos[index][1] - seen  # type: ignore[index]
                seen |= fresh
                pending |= fresh
    return [context[index] for index in sorted(kept)]


@functools.lru_cache(maxsize=16384)  # names of earlier snippets, across sessions
def _names(code: str) -> tuple[frozenset[str], frozenset[str], bool] | None:
    """`(names bound, names mentioned (bound ones too), has a * import)` of a snippet, or None
    when it does not parse."""
    collecting = gc.isenabled()
    gc.disable()  # a finalizer that parses source mid-parse breaks CPython 3.11's parser (cpython gh-106905)
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    finally:
        if collecting:
            gc.enable()
    bound: set[str] = set()
    mentioned: set[str] = set()
    star = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (mentioned if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _TYPE_TEXT.fullmatch(node.value):
            mentioned.update(_string_names(node.value))  # a string annotation, `cast('T', x)` ...
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.alias):
            if node.name == '*':
                star = True
            else:
                bound.add(node.asname or node.name.partition('.')[0])
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
    return frozenset(bound), frozenset(mentioned | bound), star


def _string_names(text: str) -> set[str]:
    """The names a string would mention if it were an expression (a forward reference)."""
    try:
        tree = ast.parse(text.strip(), mode='eval')
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    for node in ast.walk(tree):  # nested: `list["int"]`
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value != text and _TYPE_TEXT.fullmatch(node.value):
            names |= _string_names(node.value)
    return names
