"""corral's modules import each other in one direction: no import cycle, hidden or not.

The graph is read from the source with `ast`, so an import inside a function (the usual way a
cycle gets hidden) counts like one at the top of a module. An edge goes from a module to each
corral module it imports by name: `from . import hostio` and `from .hostio import x` both reach
`corral.language.hostio`, `from corral import Session` reaches the package `corral` itself.
Left out, because they run no code when the module runs: imports under `if TYPE_CHECKING:`, and
the implicit import of a module's parent packages (every submodule has that one).

Run as a script, it prints each cycle (strongly connected component), one path around it with
the line of each import, and exits 1 if there is one.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / 'src'
PACKAGE = 'corral'


def _modules(root: Path) -> dict[str, Path]:
    """Every module under `root / PACKAGE`, by dotted name (a package by its own name)."""
    found = {}
    for path in sorted((root / PACKAGE).rglob('*.py')):
        parts = path.relative_to(root).with_suffix('').parts
        if parts[-1] == '__init__':
            parts = parts[:-1]
        found['.'.join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == 'TYPE_CHECKING') or (
        isinstance(test, ast.Attribute) and test.attr == 'TYPE_CHECKING'
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements a module can run: at any depth, except under `if TYPE_CHECKING:`."""
    skipped: set[int] = set()
    for node in ast.walk(tree):  # breadth first: an `if` comes before the statements in it
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            skipped.update(id(inner) for statement in node.body for inner in ast.walk(statement))
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in skipped:
            yield node


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    """The innermost corral module `name` is, or is in (`corral.values.Image` -> `corral.values`)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition('.')[0]
    return None


def import_graph(root: Path = SOURCE) -> dict[str, dict[str, int]]:
    """{module: {imported corral module: line of its first import}} for every module of corral."""
    modules = _modules(root)
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        edges: dict[str, int] = {}
        package = name if path.name == '__init__.py' else name.rpartition('.')[0]
        for node in _imports(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ''
                if node.level:
                    anchor = package.split('.')[: len(package.split('.')) - node.level + 1]
                    base = '.'.join(anchor + ([base] if base else []))
                targets = [f'{base}.{alias.name}' for alias in node.names]
            for target in targets:
                owner = _owner(target, modules)
                if owner is not None and owner != name:
                    edges.setdefault(owner, node.lineno)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in graph.get(node, {}):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def shortest_cycle(graph: dict[str, dict[str, int]], component: list[str]) -> list[str]:
    """The shortest cycle inside a component (breadth first from each member), first member repeated last."""
    members = set(component)
    best: list[str] = []
    for start in component:
        paths = {start: [start]}
        queue = [start]
        for node in queue:
            for target in sorted(graph[node]):
                if target == start and (not best or len(paths[node]) < len(best) - 1):
                    best = [*paths[node], start]
                if target in members and target not in paths:
                    paths[target] = [*paths[node], target]
                    queue.append(target)
    return best


def describe(graph: dict[str, dict[str, int]], component: list[str]) -> str:
    """One cycle of a component, each import with its line: `a:12 -> b:3 -> a`, and the component."""
    cycle = shortest_cycle(graph, component)
    steps = ' -> '.join(f'{source}:{graph[source][target]}' for source, target in zip(cycle, cycle[1:]))
    return f'  {steps} -> {cycle[-1]}\n  (all of: {", ".join(component)})'


def test_no_import_cycles() -> None:
    graph = import_graph()
    found = cycles(graph)
    assert found == [], 'import cycles among corral modules:\n' + '\n\n'.join(describe(graph, c) for c in found)


def test_graph_sees_imports_inside_functions(tmp_path: Path) -> None:
    package = tmp_path / PACKAGE
    (package / 'sub').mkdir(parents=True)
    (package / '__init__.py').write_text('')
    (package / 'sub' / '__init__.py').write_text('from .low import x\n')
    (package / 'sub' / 'low.py').write_text('def f():\n    from . import high\n    return high\nx = 1\n')
    (package / 'sub' / 'high.py').write_text(
        'from typing import TYPE_CHECKING\nfrom .. import sub\nif TYPE_CHECKING:\n    from corral.sub import low\n'
    )
    graph = import_graph(tmp_path)
    assert graph == {
        'corral': {},
        'corral.sub': {'corral.sub.low': 1},
        'corral.sub.high': {'corral.sub': 2},
        'corral.sub.low': {'corral.sub.high': 2},
    }
    assert cycles(graph) == [['corral.sub', 'corral.sub.high', 'corral.sub.low']]
    assert describe(graph, cycles(graph)[0]) == (
        '  corral.sub:1 -> corral.sub.low:2 -> corral.sub.high:2 -> corral.sub\n'
        '  (all of: corral.sub, corral.sub.high, corral.sub.low)'
    )


if __name__ == '__main__':
    graph = import_graph()
    for component in cycles(graph):
        print(describe(graph, component), end='\n\n')
    sys.exit(1 if cycles(graph) else 0)
