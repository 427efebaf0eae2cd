"""corral's modules import each other in one direction: no import cycle, hidden or not.

The graph is read from the source with `ast`, so an import inside a function (the usual way a
cycle gets hidden) counts like one at the top of a module. An edge goes from a module to each
corral module it imports by name: `from . import hostio` and `from .hostio import x` both reach
`corral.language.hostio`, `from corral import Session` reaches the package `corral` itself.
Left out, because they run no code when the module runs: imports under `if TYPE_CHECKING:`, and
the implicit import of a module's parent packages (every submodule has that one).

Run as a script, it prints each cycle (strongly connected component) with the lines that close it.
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
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                yield from _imports(ast.Module(body=[child], type_ignores=[]))
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _imports(node)


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


def describe(graph: dict[str, dict[str, int]], component: list[str]) -> str:
    """The imports inside one cycle, one `a:line -> b` a line."""
    members = set(component)
    return '\n'.join(
        f'  {source}:{line} -> {target}'
        for source in component
        for target, line in sorted(graph[source].items())
        if target in members
    )


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


if __name__ == '__main__':
    graph = import_graph()
    for component in cycles(graph):
        print(' '.join(component))
        print(describe(graph, component), end='\n\n')
    sys.exit(1 if cycles(graph) else 0)
