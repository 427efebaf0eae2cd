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

import dataclasses
import re
from collections.abc import Mapping, Sequence

from ._syntax import Names, Syntax, read

__all__ = ['relevant_context', 'unread']

#: Characters of the longest snippet whose names are remembered (a context is remembered up to
#: 50 times that): what the caches keep of past sessions' scripts stays small (at the most some
#: 40 MB of snippets and 16 indexes of some 2 MB each).
_KEPT_CHARACTERS = 10_000

#: Text that may hold a suppression comment or a `__future__` import (see the module docstring).
_PLACED = re.compile(r'ignore|__future__', re.IGNORECASE)


def _placed(text: str) -> bool:
    """Whether `_PLACED` finds something in `text`. A search that ignores case is slow (9 ms in
    120 KB): first, the quick look for what it can find, lowered (only `İ` and `ı` besides `i` and
    `I` match an `i` that ignores case, so `gnore` stays)."""
    lowered = text.lower()
    return ('gnore' in lowered or '__future__' in lowered) and _PLACED.search(text) is not None


def relevant_context(context: Sequence[str], code: str, known: Mapping[str, Syntax | None] = {}) -> list[str]:
    """The snippets of `context` that `code` depends on, in their order (all of them when a
    snippet or `code` does not parse, or may hold text that acts by its place in the file).

    `known` holds the syntax of texts read beforehand (those `unread` names, read off the event
    loop when long); any other text whose names are not remembered is read here."""
    new = _names(code, known)
    index = _index(tuple(context), known)
    if new is None or index is None or index.placed or _placed(code):
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

    infos: tuple[Names, ...]
    bound: frozenset[str]  # every name some snippet binds
    mentions: dict[str, tuple[int, ...]]  # name -> the snippets that mention it
    starred: tuple[int, ...]  # the snippets with a * import
    placed: bool  # some snippet may hold a suppression comment or a `__future__` import

    @staticmethod
    def built(context: Sequence[str], known: Mapping[str, Syntax | None]) -> _Index | None:
        """The index of `context`, in one pass (None when a snippet does not parse)."""
        infos: list[Names] = []
        mentions: dict[str, list[int]] = {}
        for number, snippet in enumerate(context):
            info = _names(snippet, known)
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
            any(map(_placed, context)),
        )

    def extended(self, snippet: str, known: Mapping[str, Syntax | None]) -> _Index | None:
        """This index with `snippet` after its snippets (None when it does not parse)."""
        info = _names(snippet, known)
        if info is None:
            return None
        number = len(self.infos)
        mentions = dict(self.mentions)
        for name in info[1]:
            mentions[name] = mentions.get(name, ()) + (number,)
        starred = (*self.starred, number) if info[2] else self.starred
        return _Index((*self.infos, info), self.bound | info[0], mentions, starred, self.placed or _placed(snippet))


_MISSING = object()
#: Indexes of the contexts checked last. A session's next feed has one more snippet than its
#: last, so its index is that one's extended by a snippet instead of built anew.
_INDEXES: dict[tuple[str, ...], _Index | None] = {}
_INDEXES_KEPT = 16


def _index(context: tuple[str, ...], known: Mapping[str, Syntax | None]) -> _Index | None:
    """The index of `context`, or None when one of its snippets does not parse."""
    index = _INDEXES.pop(context, _MISSING)  # put back below, as the most recently used
    if index is _MISSING:
        before = _INDEXES.get(context[:-1], _MISSING) if context else _MISSING
        if before is _MISSING:
            index = _Index.built(context, known)
        else:
            index = None if before is None else before.extended(context[-1], known)  # type: ignore[union-attr]
    if sum(map(len, context)) <= _KEPT_CHARACTERS * 50:
        _INDEXES[context] = index  # type: ignore[assignment]
    while len(_INDEXES) > _INDEXES_KEPT:
        _INDEXES.pop(next(iter(_INDEXES)), None)
    return index  # type: ignore[return-value]


def unread(context: Sequence[str], code: str) -> list[str]:
    """The texts of `context` and `code` whose names `relevant_context` would read (it remembers
    the others): read them first, and pass their syntax to it as `known`."""
    context = tuple(context)
    if context in _INDEXES:
        needed: Sequence[str] = [code]
    elif context and _INDEXES.get(context[:-1], _MISSING) is not _MISSING:
        needed = [code] if _INDEXES[context[:-1]] is None else [context[-1], code]
    else:
        needed = [*context, code]
    return [text for text in dict.fromkeys(needed) if text not in _NAMES]


#: Names of snippets up to `_KEPT_CHARACTERS` long (the most recently used last), across sessions.
_NAMES: dict[str, Names | None] = {}
_NAMES_KEPT = 4096


def _names(code: str, known: Mapping[str, Syntax | None] = {}) -> Names | None:
    """`(names bound, names mentioned (bound ones too), has a * import)` of a snippet, or None
    when it does not parse or holds a string too long or nested to read as a type."""
    names = _NAMES.pop(code, _MISSING)
    if names is _MISSING:
        syntax = known[code] if code in known else read(code)
        names = None if syntax is None else syntax.names
    if len(code) <= _KEPT_CHARACTERS:
        _NAMES[code] = names  # type: ignore[assignment]
        while len(_NAMES) > _NAMES_KEPT:
            del _NAMES[next(iter(_NAMES))]
    return names  # type: ignore[return-value]
