"""What the checker reads of a script's syntax, as plain data: one parse and one walk of the code.

`read(code)` is a pure function of the code. Its `Syntax` holds all that the readers of a check
take from the script's syntax tree: its names (`_context`), the spans of its functions, lambdas
and classes (`_awaits`), its top-level statements (`_ran`) and its imports (`_sandbox`). It is
plain data, so a long script is read in a child process (`_reader`): CPython's parser holds the
GIL for its whole run (some 180 ms for a script of 120 KB), and the host's event loop must not
wait for it. Run as a program (``python -I -S _syntax.py``), this module is that child: it
imports nothing but the standard library.
"""

from __future__ import annotations

import ast
import functools
import gc
import json
import struct
import sys
import threading
from typing import Any, Literal, NamedTuple

__all__ = ['CHUNK', 'FRAME', 'Decoder', 'Names', 'Syntax', 'encode', 'parse', 'read', 'request']

#: `(names bound, names mentioned (bound ones too), has a * import)` of a script.
Names = tuple[frozenset[str], frozenset[str], bool]
#: `(line, column, end line, end column)`: lines from 1, columns in UTF-8 bytes (as `ast` counts).
Span = tuple[int, int, int, int]
#: A top-level statement: `(first line (its first decorator's), line, column, end line, compound)`.
Statement = tuple[int, int, int, int, bool]
#: One name of an import: `(line, column, name, as name or None)`.
Alias = tuple[int, int, str, 'str | None']
#: `(is a from-import, line, column, module or None, level, aliases)`, in `ast.walk` order.
Import = tuple[bool, int, int, 'str | None', int, tuple[Alias, ...]]
#: `(name, attribute, end line, end column)` of an `a.b` whose `a` is a name an import binds.
Member = tuple[str, str, int, int]

#: Characters of the longest string read as a possible type (a forward reference, `cast('T', x)`);
#: a longer one makes the script's names unreadable (`Syntax.names` is None).
_LONGEST_STRING = 10_000

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_COMPOUND = (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith, ast.Try, ast.Match)
if hasattr(ast, 'TryStar'):  # Python 3.11
    _COMPOUND += (ast.TryStar,)


class Syntax(NamedTuple):
    """A script's syntax as the checker reads it (see the module docstring)."""

    #: Its names (see `Names`), or None when a string in it is too long or nested to read as a type.
    names: Names | None
    #: The spans of its functions, lambdas and classes, at any depth.
    scopes: tuple[Span, ...]
    #: Its top-level statements, in order.
    statements: tuple[Statement, ...]
    #: Its imports, at any depth.
    imports: tuple[Import, ...]
    #: Its attributes of names that an import binds.
    members: tuple[Member, ...]


def read(code: str) -> Syntax | None:
    """The `Syntax` of `code`, or None when it does not parse (a SyntaxError, a NUL byte, a lone
    surrogate, nesting too deep for the parser)."""
    tree = parse(code)
    if tree is None:
        return None
    bound: set[str] = set()
    mentioned: set[str] = set()
    star, readable = False, True
    scopes: list[Span] = []
    imports: list[Import] = []
    attributes: list[Member] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (mentioned if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name):
                attributes.append((node.value.id, node.attr, node.end_lineno or node.lineno, node.end_col_offset or 0))
            if not isinstance(node.ctx, ast.Load):
                _bind_base(node, bound)
        elif isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load):
            _bind_base(node, bound)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if readable:  # a string annotation, `cast('T', x)` ...
                names = _string_names(node.value)
                if names is None:
                    readable = False
                else:
                    mentioned |= names
        elif isinstance(node, _SCOPES):
            scopes.append((node.lineno, node.col_offset, node.end_lineno or node.lineno, node.end_col_offset or 0))
            if not isinstance(node, ast.Lambda):
                bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            aliases = tuple((alias.lineno, alias.col_offset, alias.name, alias.asname) for alias in node.names)
            if isinstance(node, ast.Import):
                imports.append((False, node.lineno, node.col_offset, None, 0, aliases))
            else:
                imports.append((True, node.lineno, node.col_offset, node.module, node.level or 0, aliases))
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
    imported = {alias[3] or alias[2].partition('.')[0] for entry in imports for alias in entry[5]}
    return Syntax(
        (frozenset(bound), frozenset(mentioned | bound), star) if readable else None,
        tuple(scopes),
        tuple(_statement(statement) for statement in tree.body),  # type: ignore[attr-defined]
        tuple(imports),
        tuple(attribute for attribute in attributes if attribute[0] in imported),
    )


def _bind_base(node: ast.Attribute | ast.Subscript, bound: set[str]) -> None:
    """`a.v = x`, `d[k] = x`, `del a.v`: they narrow what `a`, `d` hold, so they bind them."""
    base = node.value
    while isinstance(base, (ast.Attribute, ast.Subscript, ast.Starred)):
        base = base.value
    if isinstance(base, ast.Name):
        bound.add(base.id)


def _statement(node: ast.stmt) -> Statement:
    decorators = getattr(node, 'decorator_list', None)
    start = decorators[0].lineno if decorators else node.lineno
    return start, node.lineno, node.col_offset, node.end_lineno or node.lineno, isinstance(node, _COMPOUND)


def _string_names(text: str, depth: int = 0) -> frozenset[str] | None:
    """The names a string would mention if it were an expression (a forward reference); None
    for one too long or too nested to read."""
    if len(text) > _LONGEST_STRING or depth > 3:
        return None
    return _expression_names(text, depth)


@functools.lru_cache(maxsize=1024)  # the same keys and literals come back script after script
def _expression_names(text: str, depth: int) -> frozenset[str] | None:
    tree = parse(text.strip(), 'eval')
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


#: One parse at a time: another thread's parse must not turn garbage collection back on in the
#: middle of this one.
_PARSING = threading.Lock()


def parse(text: str, mode: Literal['exec', 'eval'] = 'exec') -> ast.AST | None:
    """The syntax tree of `text` (`mode` as for `ast.parse`), or None when it does not parse."""
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


#: Items of one of a `Syntax`'s lists in one message of the child's answer: the host decodes each
#: message on its event loop, a few hundred items in well under a millisecond. One JSON of a long
#: script's `Syntax` (600 KB for 12,000 statements) held the event loop some 80 ms, 600 ms on a
#: busy 2-core VM.
CHUNK = 256

#: The lists of a `Syntax` as `encode` sends them, by their place in its messages.
_PART_BOUND, _PART_MENTIONED, _PART_SCOPES, _PART_STATEMENTS, _PART_IMPORTS, _PART_ALIASES, _PART_MEMBERS = range(7)


def encode(syntax: Syntax | None) -> list[Any]:
    """`syntax` as the JSON messages of the child's answer: `[part, items]` for each `CHUNK` items
    of each of its lists (part: 0 the names bound, 1 the names mentioned and not bound, 2 the scopes,
    3 the statements, 4 the imports with their first `CHUNK` aliases, 5 `[i, aliases]`: more aliases
    of import `i`, 6 the members), then `[-1, end]`: `end` None when it does not parse, else `[names
    readable, has a * import]`."""
    if syntax is None:
        return [[-1, None]]
    messages: list[Any] = []

    def add(part: int, items: Any) -> None:
        items = list(items)
        messages.extend([part, items[i : i + CHUNK]] for i in range(0, len(items), CHUNK))

    star = False
    if syntax.names is not None:  # the names mentioned hold the names bound: each goes once
        bound, mentioned, star = syntax.names
        add(_PART_BOUND, bound)
        add(_PART_MENTIONED, mentioned - bound)
    add(_PART_SCOPES, syntax.scopes)
    add(_PART_STATEMENTS, syntax.statements)
    for i in range(0, len(syntax.imports), CHUNK):
        messages.append([_PART_IMPORTS, [[*entry[:5], entry[5][:CHUNK]] for entry in syntax.imports[i : i + CHUNK]]])
        for at, entry in enumerate(syntax.imports[i : i + CHUNK], i):
            messages.extend([_PART_ALIASES, [at, entry[5][j : j + CHUNK]]] for j in range(CHUNK, len(entry[5]), CHUNK))
    add(_PART_MEMBERS, syntax.members)
    messages.append([-1, [syntax.names is not None, star]])
    return messages


class Decoder:
    """Builds the `Syntax` of one text from `encode`'s messages, one message at a time (`add`)."""

    def __init__(self) -> None:
        self._parts: list[list[Any]] = [[] for _ in range(_PART_MEMBERS + 1)]

    def add(self, message: Any) -> tuple[bool, Syntax | None]:
        """Take one message; `(True, syntax)` once its last one came, else `(False, None)`."""
        part, items = message
        if part == _PART_IMPORTS:
            self._parts[part].extend([entry[:5], list(map(tuple, entry[5]))] for entry in items)
        elif part == _PART_ALIASES:
            self._parts[_PART_IMPORTS][items[0]][1].extend(map(tuple, items[1]))
        elif part >= 0:
            self._parts[part].extend(items if part <= _PART_MENTIONED else map(tuple, items))
        elif items is None:
            return True, None
        else:
            bound, only_mentioned, scopes, statements, imports, _, members = self._parts
            readable, star = items
            return True, Syntax(
                (frozenset(bound), frozenset(bound + only_mentioned), star) if readable else None,
                tuple(scopes),
                tuple(statements),
                tuple((*entry, tuple(aliases)) for entry, aliases in imports),
                tuple(members),
            )
        return False, None


#: The length in bytes of what follows, at the head of each message between the host and the child.
FRAME = struct.Struct('>I')


def request(texts: list[str]) -> bytes:
    """The message asking the child to read `texts`: their number, then each as its length and its
    UTF-8 (a lone surrogate as it is: `surrogatepass`)."""
    parts = [FRAME.pack(len(texts))]
    for text in texts:
        data = text.encode('utf-8', 'surrogatepass')
        parts += (FRAME.pack(len(data)), data)
    return b''.join(parts)


def _serve() -> None:
    """The child's loop: read a `request`, answer each text's `encode`d `Syntax`, each message as
    its length and its JSON, until the host closes the pipe."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while header := stdin.read(FRAME.size):
        texts = [stdin.read(FRAME.unpack(stdin.read(FRAME.size))[0]).decode('utf-8', 'surrogatepass') for _ in range(FRAME.unpack(header)[0])]
        for text in texts:
            for message in encode(read(text)):
                data = json.dumps(message, separators=(',', ':')).encode()
                stdout.write(FRAME.pack(len(data)) + data)
        stdout.flush()


if __name__ == '__main__':
    _serve()
