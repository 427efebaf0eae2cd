"""What a script's text says about the names it uses, read with `ast` before it runs.

The door asks the parent for what a feed needs before the feed starts: the names it calls or reads
that neither it, its session's earlier feeds nor the builtins bind (host functions and values of
the parent's), and the modules it imports that the sandbox does not have (the parent's modules).
"""

from __future__ import annotations

import ast
import builtins

from ..language.catalog import STDLIB_MODULES

__all__ = ['Names', 'awaited_callees', 'bound_names', 'free_names', 'imported_modules', 'module_imports', 'named_modules']

_BUILTIN_NAMES = frozenset(dir(builtins))


class Names(set[str]):
    """Free names a script calls; `awaited`: those whose calls it awaits or hands on (gather);
    `eager`: those whose every call it awaits right there (`await f()`) in a script that runs no
    other task (it calls none of asyncio's task functions), so nothing else could run meanwhile."""

    awaited: set[str]
    eager: set[str]


def free_names(code: str, known: set[str]) -> tuple[Names, set[str]]:
    """(names the code calls, names it reads) that neither it, `known`, nor the builtins bind.

    A called name is `awaited` when a call of it is awaited, handed to asyncio's task functions
    (`gather`, `create_task`, ...), directly, in a container or generator, or through a variable
    that is: the parent's function is then async (its answer may be a future).
    """
    called, read = Names(), set()
    called.awaited, called.eager = set(), set()
    not_eager = set()
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return called, read
    bound = _bound(tree) | known | _BUILTIN_NAMES
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    awaited_variables = {
        node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and _awaited(node, parents)
    }
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)) or node.id in bound:
            continue
        parent = parents.get(id(node))
        if isinstance(parent, ast.Call) and parent.func is node:
            called.add(node.id)
            holder = parents.get(id(parent))
            (called.eager if isinstance(holder, ast.Await) else not_eager).add(node.id)
            if _awaited(parent, parents) or (
                isinstance(holder, ast.Assign) and any(isinstance(t, ast.Name) and t.id in awaited_variables for t in holder.targets)
            ):
                called.awaited.add(node.id)
        else:
            read.add(node.id)
    called.eager -= not_eager
    if any(isinstance(node, ast.Call) and _callee(node) in _TASK_FUNCTIONS | {'TaskGroup'} for node in ast.walk(tree)):
        called.eager = set()
    return called, read


#: asyncio's functions that take awaitables (a call handed to one is a coroutine the script awaits).
_TASK_FUNCTIONS = frozenset({'gather', 'create_task', 'ensure_future', 'wait', 'wait_for', 'as_completed', 'shield', 'run'})


def _awaited(node: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """Whether `node`'s value is awaited or handed to asyncio's task functions, maybe inside a
    list, tuple, starred or generator."""
    holder = parents.get(id(node))
    while isinstance(holder, (ast.List, ast.Tuple, ast.Starred, ast.GeneratorExp, ast.ListComp, ast.comprehension)):
        node, holder = holder, parents.get(id(holder))
    if isinstance(holder, ast.Await):
        return True
    if isinstance(holder, ast.Call) and node is not holder.func:
        return _callee(holder) in _TASK_FUNCTIONS
    return False


def _callee(call: ast.Call) -> str | None:
    """The name a call calls by: `f` for `f()` and `m.f()`."""
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _bound(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split('.')[0] for alias in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
    return names


def imported_modules(code: str) -> list[str]:
    """The top-level modules `code` imports (absolute imports) that are not the sandbox's own, in
    the order the code names them first."""
    return list(dict.fromkeys(module_imports(code)))


def module_imports(code: str) -> list[str]:
    """The top-level module of each import (`import a.b, c`: each name; `from a.b import x`) in
    `code` of a module that is not the sandbox's own, in the order of the code, once per import."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(((node.lineno, node.col_offset, index), alias.name.split('.')[0]) for index, alias in enumerate(node.names))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(((node.lineno, node.col_offset, 0), node.module.split('.')[0]))
    return [name for _, name in sorted(found) if name not in STDLIB_MODULES and name.isidentifier()]


def named_modules(code: str, modules: set[str]) -> list[str]:
    """Those of `modules` that `code` names (`tools` in `tools.add(1)`), in the order it names them first."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    found = sorted((node.lineno, node.col_offset, node.id) for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id in modules)
    return list(dict.fromkeys(name for _, _, name in found))


def awaited_callees(code: str) -> set[str]:
    """The names by which `code` calls what it awaits or hands to asyncio's task functions: `f` for
    `await f()` and `await m.f()` alike (a module's function the script awaits is async)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _awaited(node, parents) and (name := _callee(node)) is not None:
            names.add(name)
    return names


def bound_names(code: str) -> set[str]:
    try:
        return _bound(ast.parse(code))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
