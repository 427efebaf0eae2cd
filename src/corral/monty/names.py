"""What a script's text says about the names it uses, read with `ast` before it runs.

The door asks the parent for what a feed needs before the feed starts: the names it calls or reads
that neither it, its session's earlier feeds nor the builtins bind (host functions and values of
the parent's), and the modules it imports that the sandbox does not have (the parent's modules).
"""

from __future__ import annotations

import ast
import builtins

from ..language.catalog import STDLIB_MODULES

__all__ = ['Names', 'Script']

_BUILTIN_NAMES = frozenset(dir(builtins))


class Names(set[str]):
    """Free names a script calls; `awaited`: those whose calls it awaits or hands on (gather);
    `eager`: those whose every call it awaits right there (`await f()`) in a script that runs no
    other task (it calls none of asyncio's task functions), so nothing else could run meanwhile."""

    awaited: set[str]
    eager: set[str]


class Script:
    """A feed's text as `ast` reads it, parsed and walked once for all the questions the door asks
    of it (a text that does not parse names nothing: the feed's run reports its error)."""

    __slots__ = ('tree', 'nodes', '_parents')

    def __init__(self, code: str) -> None:
        try:
            self.tree: ast.AST | None = ast.parse(code)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            self.tree = None
        self.nodes: list[ast.AST] = list(ast.walk(self.tree)) if self.tree is not None else []
        self._parents: dict[int, ast.AST] | None = None

    @property
    def parents(self) -> dict[int, ast.AST]:
        """The node holding each node, by the `id` of the node held."""
        if self._parents is None:
            self._parents = {id(child): node for node in self.nodes for child in ast.iter_child_nodes(node)}
        return self._parents

    def free_names(self, known: set[str]) -> tuple[Names, set[str]]:
        """(names the code calls, names it reads) that neither it, `known`, nor the builtins bind.

        A called name is `awaited` when a call of it is awaited, handed to asyncio's task functions
        (`gather`, `create_task`, ...), directly, in a container or generator, or through a variable
        that is: the parent's function is then async (its answer may be a future).
        """
        called, read = Names(), set()
        called.awaited, called.eager = set(), set()
        not_eager = set()
        if self.tree is None:
            return called, read
        bound = self.bound_names() | known | _BUILTIN_NAMES
        parents = self.parents
        loaded = [node for node in self.nodes if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)]
        awaited_variables = {node.id for node in loaded if _awaited(node, parents)}
        for node in loaded:
            if node.id in bound:
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
        if any(isinstance(node, ast.Call) and _callee(node) in _TASK_FUNCTIONS | {'TaskGroup'} for node in self.nodes):
            called.eager = set()
        return called, read

    def bound_names(self) -> set[str]:
        """The names the code binds anywhere (assigned, defined, imported, caught, matched)."""
        return _bound(self.nodes)

    def imported_modules(self) -> list[str]:
        """The top-level modules the code imports (absolute imports) that are not the sandbox's
        own, in the order the code names them first."""
        return list(dict.fromkeys(self.module_imports()))

    def module_imports(self) -> list[str]:
        """The top-level module of each import (`import a.b, c`: each name; `from a.b import x`) in
        the code of a module that is not the sandbox's own, in the order of the code, once per import."""
        found = []
        for node in self.nodes:
            if isinstance(node, ast.Import):
                found.extend(((node.lineno, node.col_offset, index), alias.name.split('.')[0]) for index, alias in enumerate(node.names))
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.append(((node.lineno, node.col_offset, 0), node.module.split('.')[0]))
        return [name for _, name in sorted(found) if name not in STDLIB_MODULES and name.isidentifier()]

    def named_modules(self, modules: set[str]) -> list[str]:
        """Those of `modules` that the code names (`tools` in `tools.add(1)`), in the order it names them first."""
        found = sorted((node.lineno, node.col_offset, node.id) for node in self.nodes if isinstance(node, ast.Name) and node.id in modules)
        return list(dict.fromkeys(name for _, _, name in found))

    def awaited_callees(self) -> set[str]:
        """The names by which the code calls what it awaits or hands to asyncio's task functions:
        `f` for `await f()` and `await m.f()` alike (a module's function the script awaits is async)."""
        parents = self.parents
        return {
            name for node in self.nodes if isinstance(node, ast.Call) and _awaited(node, parents) and (name := _callee(node)) is not None
        }


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


def _bound(nodes: list[ast.AST]) -> set[str]:
    names = set()
    for node in nodes:
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
