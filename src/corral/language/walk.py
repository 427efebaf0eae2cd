"""Walking a script's syntax tree: `ast.NodeVisitor` and `ast.NodeTransformer`, the same walk, faster.

The standard classes look up a visitor method by name at every node, go through
`ast.iter_fields`' generator, and send every `Constant` through a shim that looks for the visitor
methods of Python 3.7 (`visit_Num`, `visit_Str` ...) and fails: about a third of compiling a
script. These classes find each node class's visitor once per visitor class and read a node's
fields directly; what they visit, in what order, and what a transformer does with what a visitor
returns are the standard classes' (`tests/language/test_walk.py` compares the two on every test
script). Subclasses must not define the deprecated `visit_Num`-style methods.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ['NodeTransformer', 'NodeVisitor', 'child_nodes', 'fix_missing_locations']

_AST = ast.AST


def child_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """The direct children of `node`, as `ast.iter_child_nodes` gives them."""
    for field in node._fields:
        value = getattr(node, field, None)
        if isinstance(value, _AST):
            yield value
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, _AST):
                    yield item


def fix_missing_locations(tree: ast.AST) -> ast.AST:
    """`ast.fix_missing_locations`: each node without a line or column takes its parent's (the
    root's default to line 1, column 0), the same result without its generators."""
    pending = [(tree, 1, 0, 1, 0)]
    pop, push = pending.pop, pending.append
    while pending:
        node, lineno, col_offset, end_lineno, end_col_offset = pop()
        if 'lineno' in node._attributes:
            if hasattr(node, 'lineno'):
                lineno = node.lineno
            else:
                node.lineno = lineno
            if getattr(node, 'end_lineno', None) is None:
                node.end_lineno = end_lineno
            else:
                end_lineno = node.end_lineno
            if hasattr(node, 'col_offset'):
                col_offset = node.col_offset
            else:
                node.col_offset = col_offset
            if getattr(node, 'end_col_offset', None) is None:
                node.end_col_offset = end_col_offset
            else:
                end_col_offset = node.end_col_offset
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, _AST):
                push((value, lineno, col_offset, end_lineno, end_col_offset))
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, _AST):
                        push((item, lineno, col_offset, end_lineno, end_col_offset))
    return tree


class NodeVisitor(ast.NodeVisitor):
    """`ast.NodeVisitor`: `visit_<NodeClass>` if the class has one, else `generic_visit`."""

    #: node class -> its visitor function, one table per visitor class
    _visitors: dict[type, Callable[[Any, ast.AST], Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._visitors = {}

    def visit(self, node: ast.AST) -> Any:
        kind = type(node)
        visitor = self._visitors.get(kind)
        if visitor is None:
            visitor = self._visitors[kind] = getattr(type(self), 'visit_' + kind.__name__, type(self).generic_visit)
        return visitor(self, node)

    def visit_Constant(self, node: ast.Constant) -> Any:
        return self.generic_visit(node)

    def generic_visit(self, node: ast.AST) -> Any:
        visit = self.visit
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, _AST):
                        visit(item)
            elif isinstance(value, _AST):
                visit(value)


class NodeTransformer(NodeVisitor, ast.NodeTransformer):
    """`ast.NodeTransformer`: a visitor's None removes the node, a list replaces it with several."""

    def generic_visit(self, node: ast.AST) -> ast.AST:
        visit = self.visit
        for field in node._fields:
            try:
                old_value = getattr(node, field)
            except AttributeError:
                continue
            if isinstance(old_value, list):
                new_values = []
                for value in old_value:
                    if isinstance(value, _AST):
                        value = visit(value)
                        if value is None:
                            continue
                        if not isinstance(value, _AST):
                            new_values.extend(value)
                            continue
                    new_values.append(value)
                old_value[:] = new_values
            elif isinstance(old_value, _AST):
                new_node = visit(old_value)
                if new_node is None:
                    delattr(node, field)
                else:
                    setattr(node, field, new_node)
        return node
