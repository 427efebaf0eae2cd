"""Turn a script's text into one function: parse, validate, rewrite, wrap.

The script's top level is compiled as the body of a function named `<module>` whose every name is
declared `global`, and whose last expression, if any, is its return value. Names resolve exactly
as at module level (they live in the session's globals), but reads of them take CPython's fast,
cached `LOAD_GLOBAL` path instead of `LOAD_NAME`: loops at the top level of a script run about as
fast as inside a function. A script with top-level `await` becomes an `async` function.

The host keeps the code it compiled for the feeds it replays (`corral.host.compiled`), and sends
it to the worker marshalled (`dump_compiled`, `load_compiled`): `COMPILER` names the compiler that
made it, so a worker takes only code its own compiler would have made.
"""

from __future__ import annotations

import ast
import gc
import hashlib
import marshal
import os
import sys
import types
from pathlib import Path
from dataclasses import dataclass
from typing import Any

from .rewrite import is_run_call, rewrite
from .validate import validate
from .walk import child_fields

__all__ = ['COMPILER', 'CompiledScript', 'compile_script', 'compile_unguarded', 'compiler_tag', 'dump_compiled', 'load_compiled']

_CO_COROUTINE = 0x80
_CO_FUNCTION = 0x3  # CO_OPTIMIZED | CO_NEWLOCALS: a function's code (a module's has neither)
_SCOPES = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef})
_ASYNC = frozenset({ast.Await, ast.AsyncFor, ast.AsyncWith})
_FUNCTION_ONLY = {
    ast.Return: "'return' outside function",
    ast.Yield: "'yield' outside function",
    ast.YieldFrom: "'yield' outside function",
    ast.Nonlocal: 'nonlocal declaration not allowed at module level',
}
_AST = ast.AST
#: what `_TopLevel` looks at but names
_SCANNED = frozenset({
    ast.Call, *_ASYNC, ast.comprehension, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.alias, ast.Import, ast.ImportFrom,
    ast.ExceptHandler, ast.MatchAs, ast.MatchStar, ast.MatchMapping, ast.Global,
})


@dataclass(frozen=True, slots=True)
class CompiledScript:
    """A script ready to run: the code of its `<module>` function."""

    code: types.CodeType
    #: The script imports asyncio: it may need a running event loop even without `await`.
    imports_asyncio: bool = False

    @property
    def is_async(self) -> bool:
        """The script uses top-level `await`: `start` returns a coroutine to await."""
        return bool(self.code.co_flags & _CO_COROUTINE)

    def start(self, namespace: dict[str, Any]) -> Any:
        """Run the script in `namespace` (its globals): its value, or a coroutine when `is_async`."""
        return types.FunctionType(self.code, namespace)()


def compile_script(source: str, filename: str) -> CompiledScript:
    """Compile a script; top-level `await`, `async for` and `async with` are allowed.

    Raises `SyntaxError` (with `filename`, line, offset and text set) for invalid Python and for
    constructs the sandbox refuses (see `validate.py`); the code it returns calls the guards of
    `rewrite.py`, so it must run with builtins from `make_builtins`.
    """
    # No garbage collection while CPython builds or reads AST objects: a finalizer running in the
    # middle (a task whose exception nobody retrieved logs it, and formatting the traceback parses
    # source) corrupts CPython 3.11's AST recursion bookkeeping: "SystemError: AST constructor
    # recursion depth mismatch" (cpython gh-106905).
    collecting = gc.isenabled()
    gc.disable()
    try:
        tree = ast.parse(source, filename, 'exec', type_comments=False, feature_version=None)
        if validate(tree, source, filename):
            _refuse_function_only(tree, source, filename)
        top = _TopLevel(rewrite(tree))
        code = _compile(ast.Module(body=top.wrap(), type_ignores=[]), source, filename)
        return CompiledScript(next(c for c in code.co_consts if isinstance(c, types.CodeType)), top.imports_asyncio)
    finally:
        if collecting:
            gc.enable()


def compile_unguarded(source: str, filename: str) -> CompiledScript:
    """Compile a script as plain Python: no validation, no rewrite, no guards.

    Only for a pool that skips the language layer (`Pool(skip_layers={'language'})`), to measure
    what the other layers block on their own. Raises `SyntaxError` for invalid Python.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        tree = ast.parse(source, filename, 'exec')
        _refuse_function_only(tree, source, filename)
        top = _TopLevel(tree, rewrites_run=False)
        code = _compile(ast.Module(body=top.wrap(), type_ignores=[]), source, filename)
        return CompiledScript(next(c for c in code.co_consts if isinstance(c, types.CodeType)), top.imports_asyncio)
    finally:
        if collecting:
            gc.enable()


def _compiler() -> bytes:
    """16 bytes naming what decides the code a script compiles to: CPython's version and bytecode
    (its cache tag), its optimization level, and the source of the modules that validate, rewrite
    and wrap a script, as this process read them when it imported this one."""
    digest = hashlib.blake2b(f'{sys.version}|{sys.implementation.cache_tag}|{sys.flags.optimize}'.encode(), digest_size=16)
    for name in ('compile', 'rewrite', 'validate', 'walk', 'rules'):
        try:
            digest.update(Path(__file__).with_name(f'{name}.py').read_bytes())
        except OSError:  # no source to read: a name no other process has, so code never crosses
            digest.update(os.urandom(16))
    return digest.digest()


#: This process's compiler (see `_compiler`): the host's and a worker's are the same when both run
#: the same CPython with the same corral.
COMPILER = _compiler()


def compiler_tag(guarded: bool) -> bytes:
    """16 bytes naming the compilation a script gets from this process: `COMPILER` and whether it
    is `compile_script`'s (`guarded`) or `compile_unguarded`'s."""
    return hashlib.blake2b(COMPILER + (b'guarded' if guarded else b'unguarded'), digest_size=16).digest()


def dump_compiled(script: CompiledScript) -> bytes:
    """The marshalled code of a script this process compiled (for `load_compiled`)."""
    return marshal.dumps(script.code)


def load_compiled(data: bytes, imports_asyncio: bool, filename: str) -> CompiledScript:
    """The script `dump_compiled` gave `data` for, its code and the code in it named `filename`
    (the host compiles under a name of its own; the worker numbers its scripts).

    Only for bytes from corral's own compiler (the host's: see `corral.host.compiled`), never
    from a stored state or a client: marshalled code runs as it is. Raises `ValueError` for bytes
    that hold no `<module>` code object.
    """
    try:
        code = marshal.loads(data)
    except (EOFError, ValueError, TypeError) as error:
        raise ValueError(f'not a marshalled code object ({error})') from None
    if type(code) is not types.CodeType or code.co_name != '<module>' or code.co_flags & _CO_FUNCTION != _CO_FUNCTION:
        raise ValueError('not the code of a compiled script')
    return CompiledScript(_renamed(code, filename), bool(imports_asyncio))


def _renamed(code: types.CodeType, filename: str) -> types.CodeType:
    """`code`, and every code object in its constants, with `co_filename` set to `filename`."""
    consts = tuple(_renamed(const, filename) if type(const) is types.CodeType else const for const in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def _compile(module: ast.Module, source: str, filename: str) -> types.CodeType:
    """`compile()`; a SyntaxError it raises (a misplaced or unknown `__future__` feature) gets its
    line's text, which CPython reads from the script's file and a script does not have."""
    try:
        return compile(module, filename, 'exec', dont_inherit=True)
    except SyntaxError as error:
        lines = source.splitlines()
        if error.text is None and error.lineno is not None and 0 < error.lineno <= len(lines):
            error.text = lines[error.lineno - 1] + '\n'
        raise


def _top_level(tree: ast.Module) -> list[ast.AST]:
    """The nodes of the module's own scope, not inside a function, lambda or class body, in the
    order of a walk that takes the last child first (what the checks below raise is the first met).
    A function's annotations are of that scope (evaluated when it is defined) but under
    `from __future__ import annotations`, which keeps them as strings."""
    annotations: bool | None = None  # the script's own: read at the first function met
    nodes: list[ast.AST] = []
    pending: list[ast.AST | None] = list(tree.body)  # the lists of child fields hold nodes and None
    pop, push, extend, add = pending.pop, pending.append, pending.extend, nodes.append
    while pending:
        node = pop()
        if node is None:  # a dict's `**` key, an argument's missing default
            continue
        add(node)
        kind = type(node)
        if kind in _SCOPES:
            # decorators, defaults, bases and annotations run in the enclosing scope
            if kind is ast.ClassDef:
                extend([*node.decorator_list, *node.bases, *node.keywords])  # type: ignore[attr-defined]
            elif kind is ast.Lambda:
                extend([*node.args.defaults, *node.args.kw_defaults])  # type: ignore[attr-defined]
            else:
                extend([*node.decorator_list, *node.args.defaults, *node.args.kw_defaults])  # type: ignore[attr-defined]
                if annotations is None:
                    annotations = not any(alias.name == 'annotations' for future in _leading_futures(tree.body)[0] for alias in future.names)  # type: ignore[attr-defined]
                if annotations and not getattr(node, 'type_params', None):  # a generic's are of its own scope
                    args = node.args  # type: ignore[attr-defined]
                    extend([arg.annotation for arg in (*args.posonlyargs, *args.args, args.vararg, *args.kwonlyargs, args.kwarg) if arg])
                    push(node.returns)  # type: ignore[attr-defined]
            continue
        for field in child_fields(kind):
            value = getattr(node, field, None)
            if type(value) is list:
                extend(value)
            elif isinstance(value, _AST):
                push(value)
    return nodes


def _refuse_function_only(tree: ast.Module, source: str, filename: str) -> None:
    """Raise the SyntaxError of the first `return`, `yield` or `nonlocal` of the module's own scope,
    as Python words it (what a function allows but a module does not)."""
    for node in _top_level(tree):
        message = _FUNCTION_ONLY.get(type(node))
        if message is not None:
            lines = source.splitlines()
            text = lines[node.lineno - 1] if node.lineno <= len(lines) else ''  # type: ignore[attr-defined]
            end = (node.end_col_offset or 0) + 1  # type: ignore[attr-defined]
            raise SyntaxError(message, (filename, node.lineno, node.col_offset + 1, text, node.end_lineno, end))  # type: ignore[attr-defined]


class _TopLevel:
    """One pass over the script's own scope, after the rewrite: is it async (top-level `await`, or
    a `run(...)` call the rewrite awaits, or would have), does it import asyncio, and every name it
    may bind or read (the rewrite's temporaries too; declaring a name global that is only read
    changes nothing)."""

    def __init__(self, tree: ast.Module, *, rewrites_run: bool = True) -> None:
        self.tree = tree
        self.is_async = False
        self.imports_asyncio = False
        self.names: set[str] = set()
        add = self.names.add
        for node in _top_level(tree):
            kind = type(node)
            if kind is ast.Name:
                add(node.id)  # type: ignore[attr-defined]
            elif kind not in _SCANNED:
                continue
            elif kind is ast.Call:
                # the rewrite awaits top-level `run(...)` calls; one it leaves (in a comprehension,
                # a default or a decorator) makes the script async all the same
                self.is_async |= rewrites_run and is_run_call(node)
            elif kind in _ASYNC or (kind is ast.comprehension and node.is_async):  # type: ignore[attr-defined]
                self.is_async = True
            elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef or kind is ast.ClassDef:
                add(node.name)  # type: ignore[attr-defined]
            elif kind is ast.alias:
                add((node.asname or node.name).partition('.')[0])  # type: ignore[attr-defined]
            elif kind is ast.Import:
                self.imports_asyncio |= any(alias.name.partition('.')[0] == 'asyncio' for alias in node.names)  # type: ignore[attr-defined]
            elif kind is ast.ImportFrom:
                self.imports_asyncio |= (node.module or '').partition('.')[0] == 'asyncio'  # type: ignore[attr-defined]
            elif kind is ast.ExceptHandler or kind is ast.MatchAs or kind is ast.MatchStar:
                if node.name:  # type: ignore[attr-defined]
                    add(node.name)  # type: ignore[attr-defined]
            elif kind is ast.MatchMapping:
                if node.rest:  # type: ignore[attr-defined]
                    add(node.rest)  # type: ignore[attr-defined]
            elif kind is ast.Global:
                self.names.update(node.names)  # type: ignore[attr-defined]

    def wrap(self) -> list[ast.stmt]:
        """`[async] def <module>(): global <every name>; <body>; return <last expression>`, after
        the script's leading `from __future__ import ...` statements, which stay at the top of the
        module: their flags apply to the code in it (a later one is CPython's SyntaxError)."""
        futures, statements = _leading_futures(self.tree.body)
        body = [_plain_assignment(statement) for statement in statements]
        if body and isinstance(body[-1], ast.Expr):
            body[-1] = ast.copy_location(ast.Return(value=body[-1].value), body[-1])
        start = {'lineno': 1, 'col_offset': 0, 'end_lineno': 1, 'end_col_offset': 0}
        if self.names:
            body.insert(0, ast.Global(names=sorted(self.names), **start))
        if not body:
            body = [ast.Pass(**start)]
        kind = ast.AsyncFunctionDef if self.is_async else ast.FunctionDef
        arguments = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
        return [*futures, kind(name='<module>', args=arguments, body=body, decorator_list=[], returns=None, type_comment=None, **start)]


def _leading_futures(body: list[ast.stmt]) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """The `from __future__` imports that open the script (after its docstring, if any), and the rest."""
    futures: list[ast.stmt] = []
    rest: list[ast.stmt] = []
    leading = True
    for index, statement in enumerate(body):
        if leading and isinstance(statement, ast.ImportFrom) and statement.module == '__future__' and not statement.level:
            futures.append(statement)
            continue
        docstring = index == 0 and isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) and isinstance(statement.value.value, str)
        leading = leading and docstring
        rest.append(statement)
    return futures, rest


def _plain_assignment(statement: ast.stmt) -> ast.stmt:
    """`x: T = v` at top level becomes `x = v` (a global cannot be annotated inside a function).

    As at module level, the annotation is not kept anywhere a script could read it
    (`__annotations__` is refused); unlike there, it is not evaluated.
    """
    if isinstance(statement, ast.AnnAssign):
        if statement.value is None:
            return ast.copy_location(ast.Pass(), statement)
        return ast.copy_location(ast.Assign(targets=[statement.target], value=statement.value), statement)
    return statement
