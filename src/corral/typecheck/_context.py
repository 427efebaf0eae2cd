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

So does any text that could hold something whose effect depends on where it stands in the file
rather than on names: a suppression comment (`# type: ignore` on a file's first line silences the
whole file, `# ty: ignore` on a line of its own the next line; both are reported when unused) or
a `__future__` import (it changes how every annotation is read). Such text makes the quick file
the full one. Found by a differential fuzz of the quick check against the full one.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
from collections.abc import Sequence

from ._syntax import nodes, parse_expression

__all__ = ['read_script', 'relevant_context']

#: Characters of the longest string read as a possible type; a longer one makes its snippet
#: unreadable (all earlier snippets are then checked).
_LONGEST_STRING = 10_000
#: Characters of the longest snippet whose names are remembered (a context is remembered up to
#: 50 times that): what the caches keep of past sessions' scripts stays small (at the most some
#: 40 MB of snippets and 16 indexes of some 2 MB each).
_KEPT_CHARACTERS = 10_000

#: Text that may hold a suppression comment or a `__future__` import (see the module docstring).
_PLACED = re.compile(r'ignore|__future__', re.IGNORECASE)

#: `(names bound, names mentioned (bound ones too), has a * import)` of one snippet.
_Names = tuple[frozenset[str], frozenset[str], bool]


def relevant_context(context: Sequence[str], code: str) -> list[str]:
    """The snippets of `context` that `code` depends on, in their order (all of them when a
    snippet or `code` does not parse, or may hold text that acts by its place in the file)."""
    new = _names(code)
    index = _index(tuple(context))
    if new is None or index is None or index.placed or _PLACED.search(code):
        return list(context)
    bound, infos, mentions = index.bound, index.infos, index.mentions
    kept = set(index.starred)
    pending = set(new[1] & bound).union(*(infos[i][1] & bound for i in kept))
    seen = set(pending)
    while pending:  # each name once: linear in the number of names
        for i in mentions.get(pending.pop(), ()):
            if i not in kept:
                kept.add(i)
                fresh = (infos[i][1] & bound) - seen
                seen |= fresh
                pending |= fresh
    return [context[i] for i in sorted(kept)]


@dataclasses.dataclass(frozen=True, slots=True)
class _Index:
    """The names of a session's earlier snippets, as `relevant_context` looks them up."""

    infos: tuple[_Names, ...]
    bound: frozenset[str]  # every name some snippet binds
    mentions: dict[str, tuple[int, ...]]  # name -> the snippets that mention it
    starred: tuple[int, ...]  # the snippets with a * import
    placed: bool  # some snippet may hold a suppression comment or a `__future__` import

    @staticmethod
    def built(context: Sequence[str]) -> _Index | None:
        """The index of `context`, in one pass (None when a snippet does not parse)."""
        infos: list[_Names] = []
        mentions: dict[str, list[int]] = {}
        for number, snippet in enumerate(context):
            info = _names(snippet)
            if info is None:
                return None
            infos.append(info)
            for name in info[1]:
                mentions.setdefault(name, []).append(number)
        return _Index(
            tuple(infos),
            frozenset().union(*(info[0] for info in infos)),
            {name: tuple(numbers) for name, numbers in mentions.items()},
            tuple(number for number, info in enumerate(infos) if info[2]),
            any(_PLACED.search(snippet) for snippet in context),
        )

    def extended(self, snippet: str) -> _Index | None:
        """This index with `snippet` after its snippets (None when it does not parse)."""
        info = _names(snippet)
        if info is None:
            return None
        number = len(self.infos)
        mentions = dict(self.mentions)
        for name in info[1]:
            mentions[name] = mentions.get(name, ()) + (number,)
        starred = (*self.starred, number) if info[2] else self.starred
        return _Index((*self.infos, info), self.bound | info[0], mentions, starred, self.placed or bool(_PLACED.search(snippet)))


_MISSING = object()
#: Indexes of the contexts checked last. A session's next feed has one more snippet than its
#: last, so its index is that one's extended by a snippet instead of built anew.
_INDEXES: dict[tuple[str, ...], _Index | None] = {}
_INDEXES_KEPT = 16


def _index(context: tuple[str, ...]) -> _Index | None:
    """The index of `context`, or None when one of its snippets does not parse."""
    index = _INDEXES.pop(context, _MISSING)  # put back below, as the most recently used
    if index is _MISSING:
        before = _INDEXES.get(context[:-1], _MISSING) if context else _MISSING
        if before is _MISSING:
            index = _Index.built(context)
        else:
            index = None if before is None else before.extended(context[-1])  # type: ignore[union-attr]
    if sum(map(len, context)) <= _KEPT_CHARACTERS * 50:
        _INDEXES[context] = index  # type: ignore[assignment]
    while len(_INDEXES) > _INDEXES_KEPT:
        _INDEXES.pop(next(iter(_INDEXES)), None)
    return index  # type: ignore[return-value]


def read_script(code: str) -> None:
    """Parse a new script and read its names ahead of `relevant_context`, which then finds them
    remembered. Safe to run in a thread: it reads and fills only caches that take locks."""
    _names(code)


def _names(code: str) -> _Names | None:
    """`(names bound, names mentioned (bound ones too), has a * import)` of a snippet, or None
    when it does not parse. Remembered for snippets up to `_KEPT_CHARACTERS` long, and for the
    last two longer ones (the scripts being checked)."""
    return _kept_names(code) if len(code) <= _KEPT_CHARACTERS else _long_names(code)


@functools.lru_cache(maxsize=4096)  # names of earlier snippets, across sessions
def _kept_names(code: str) -> _Names | None:
    return _read_names(code)


@functools.lru_cache(maxsize=2)  # a long script, read in a thread before its check (`read_script`)
def _long_names(code: str) -> _Names | None:
    return _read_names(code)


def _read_names(code: str) -> _Names | None:
    every = nodes(code)
    if every is None:
        return None
    bound: set[str] = set()
    mentioned: set[str] = set()
    star = False
    for node in every:
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


def _string_names(text: str, depth: int = 0) -> frozenset[str] | None:
    """The names a string would mention if it were an expression (a forward reference); None
    for one too long or too nested to read, which makes its snippet count as unreadable."""
    if len(text) > _LONGEST_STRING or depth > 3:
        return None
    return _expression_names(text, depth)


@functools.lru_cache(maxsize=1024)  # the same keys and literals come back feed after feed
def _expression_names(text: str, depth: int) -> frozenset[str] | None:
    tree = parse_expression(text.strip())
    if tree is None:
        return frozenset()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):  # nested: `list["int"]`
            inner = _string_names(node.value, depth + 1)
            if inner is None:
                return None
            names |= inner
    return frozenset(names)
