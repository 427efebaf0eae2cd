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

__all__ = ['FRAME', 'Names', 'Syntax', 'decode', 'encode', 'parse', 'read', 'request']

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


def encode(syntax: Syntax | None) -> Any:
    """`syntax` as JSON data (lists for tuples and sets)."""
    if syntax is None:
        return None
    if syntax.names is None:
        names = None
    else:  # the names mentioned hold the names bound: each goes once
        bound, mentioned, star = syntax.names
        names = [list(bound), list(mentioned - bound), star]
    return [names, syntax.scopes, syntax.statements, syntax.imports, syntax.members]


def decode(data: Any) -> Syntax | None:
    """The `Syntax` that `encode` gave `data` for."""
    if data is None:
        return None
    names, scopes, statements, imports, members = data
    return Syntax(
        None if names is None else (frozenset(names[0]), frozenset(names[0] + names[1]), names[2]),
        tuple(map(tuple, scopes)),
        tuple(map(tuple, statements)),
        tuple((*entry[:5], tuple(map(tuple, entry[5]))) for entry in imports),
        tuple(map(tuple, members)),
    )


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
    """The child's loop: read a `request`, answer the length and the JSON of the list of the texts'
    `encode`d `Syntax`, until the host closes the pipe."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while header := stdin.read(FRAME.size):
        texts = [stdin.read(FRAME.unpack(stdin.read(FRAME.size))[0]).decode('utf-8', 'surrogatepass') for _ in range(FRAME.unpack(header)[0])]
        answer = json.dumps([encode(read(text)) for text in texts], separators=(',', ':')).encode()
        stdout.write(FRAME.pack(len(answer)) + answer)
        stdout.flush()


if __name__ == '__main__':
    _serve()
