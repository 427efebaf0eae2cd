"""Which earlier snippets of a session a new one depends on, for the quick type check.

A later feed is checked with the session's earlier snippets in front of it, so its names have
their types. The warm `ty server` answers "is it clean?" faster with fewer lines in front: only
the snippets that mention a name the new code mentions, then the snippets that mention the names
those mention, and so on (the closure), in their order. Binding a name, narrowing it (`assert x
is not None`, `if x is None: raise ...`, `a.v = 1`) or reading it all mention it, so every
statement that decides a name's type where the new code reads it stays. Connecting are only the
names some earlier snippet binds: builtins and the stubs' functions come from outside the file
(a snippet using `print` does not tie itself to every other). What the quick check reports is
checked again with every earlier snippet, so the diagnostics a script sees are unchanged; what
it lets through is what the full check would, except for the dropped snippets' effects on no
name at all: code after a call that never returns (the full check then reports nothing there
either).

Names are over-approximated: every name a snippet stores, deletes, defines, imports, declares
`global` or `nonlocal`, takes as a parameter or a capture, or stores into (`a.v = x`, `d[k] = x`)
counts as bound, and every name it reads counts as mentioned, in code or in any string that
parses as an expression (`x: "Order"`, `cast("int", v)`: the checker resolves those too). A
snippet with a `*` import binds names nobody can list, so it is always kept. A snippet the host
cannot parse makes the whole context count.
"""

from __future__ import annotations

import ast
import functools
import gc
from collections.abc import Sequence

__all__ = ['relevant_context']

#: Characters of the longest string read as a possible type; a longer one makes its snippet
#: unreadable (all earlier snippets are then checked).
_LONGEST_STRING = 10_000


def relevant_context(context: Sequence[str], code: str) -> list[str]:
    """The snippets of `context` that `code` depends on, in their order (all of them when a
    snippet or `code` does not parse)."""
    new = _names(code)
    infos = [_names(snippet) for snippet in context]
    if new is None or any(info is None for info in infos):
        return list(context)
    bound = frozenset().union(*(info[0] for info in infos))  # type: ignore[index]
    users: dict[str, list[int]] = {}
    kept: set[int] = set()
    for index, info in enumerate(infos):
        assert info is not None
        if info[2]:
            kept.add(index)
        for name in info[1] & bound:
            users.setdefault(name, []).append(index)
    pending = set(new[1] & bound).union(*(infos[index][1] & bound for index in kept))  # type: ignore[index]
    seen = set(pending)
    while pending:  # each name once: linear in the number of names
        for index in users.get(pending.pop(), ()):
            if index not in kept:
                kept.add(index)
                fresh = (infos[index][1] & bound) - seen  # type: ignore[index]
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
        elif isinstance(node, (ast.Attribute, ast.Subscript)) and not isinstance(node.ctx, ast.Load):
            base = node.value  # `a.v = x`, `d[k] = x`, `del a.v`: they narrow what `a`, `d` hold
            while isinstance(base, (ast.Attribute, ast.Subscript, ast.Starred)):
                base = base.value
            if isinstance(base, ast.Name):
                bound.add(base.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = _string_names(node.value)  # a string annotation, `cast('T', x)` ...
            if names is None:
                return None
            mentioned |= names
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


def _string_names(text: str, depth: int = 0) -> set[str] | None:
    """The names a string would mention if it were an expression (a forward reference); None
    for one too long or too nested to read, which makes its snippet count as unreadable."""
    if len(text) > _LONGEST_STRING or depth > 3:
        return None
    try:
        tree = ast.parse(text.strip(), mode='eval')
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):  # nested: `list["int"]`
            inner = _string_names(node.value, depth + 1)
            if inner is None:
                return None
            names |= inner
    return names
