"""Walking a script's syntax tree: `ast.NodeVisitor` and `ast.NodeTransformer`, the same walk, faster.

The standard classes look up a visitor method by name at every node, go through
`ast.iter_fields`' generator, and send every `Constant` through a shim that looks for the visitor
methods of Python 3.7 (`visit_Num`, `visit_Str` ...) and fails: about a third of compiling a
script. These classes find each node class's visitor once per visitor class and read directly the
fields of a node that may hold nodes (`child_fields`, once per node class); what they visit, in
what order, and what a transformer does with what a visitor returns are the standard classes'
(`tests/language/test_walk.py` compares the two on every test script), but for the leaves of
contexts and operators (`Load()`, `Add()` ...), which they do not visit. Subclasses must not
define the deprecated `visit_Num`-style methods, nor visitors of those leaves (a `TypeError`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

__all__ = ['NodeTransformer', 'NodeVisitor', 'child_fields']

_AST = ast.AST

#: Field types (in a node class's signature, its docstring: `Name(identifier id, expr_context ctx)`)
#: whose values are never nodes, or are the leaf nodes of contexts and operators (`Load()`, `Add()`).
_LEAF_FIELD_TYPES = frozenset({'identifier', 'string', 'int', 'constant', 'expr_context', 'boolop', 'operator', 'unaryop', 'cmpop'})
_LEAF_NODES = (ast.expr_context, ast.boolop, ast.operator, ast.unaryop, ast.cmpop)

_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def child_fields(kind: type) -> tuple[str, ...]:
    """The fields of node class `kind` that may hold nodes (one or a list), in `_fields` order,
    without those of contexts and operators: the walk's children of a node of that class."""
    fields = _CHILD_FIELDS.get(kind)
    if fields is None:
        head, _, signature = (kind.__doc__ or '').partition('(')
        types: dict[str, str] = {}
        if head == kind.__name__ and signature.endswith(')'):
            for declared in signature[:-1].split(','):
                field_type, _, name = declared.strip().rpartition(' ')
                types[name] = field_type.rstrip('*?')
        fields = _CHILD_FIELDS[kind] = tuple(field for field in kind._fields if types.get(field) not in _LEAF_FIELD_TYPES)
    return fields


#: The visitor of a node class with no children and no visitor of its own: nothing to call.
_LEAF: Any = lambda self, node: node  # noqa: E731


class NodeVisitor(ast.NodeVisitor):
    """`ast.NodeVisitor`: `visit_<NodeClass>` if the class has one, else `generic_visit`."""

    #: node class -> its visitor function (or `_LEAF`), one table per visitor class
    _visitors: dict[type, Callable[[Any, ast.AST], Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._visitors = {}
        for leaf in (sub for base in _LEAF_NODES for sub in base.__subclasses__()):
            if hasattr(cls, 'visit_' + leaf.__name__):
                raise TypeError(f'{cls.__name__}.visit_{leaf.__name__}: contexts and operators are not visited')

    @classmethod
    def _visitor(cls, kind: type) -> Callable[[Any, ast.AST], Any]:
        visitor = getattr(cls, 'visit_' + kind.__name__, cls.generic_visit)
        if not child_fields(kind) and visitor in (cls.generic_visit, NodeVisitor.visit_Constant):
            visitor = _LEAF  # generic_visit would find nothing to visit
        cls._visitors[kind] = visitor
        return visitor

    def visit(self, node: ast.AST) -> Any:
        visitor = self._visitors.get(type(node)) or self._visitor(type(node))
        return None if visitor is _LEAF else visitor(self, node)

    def visit_Constant(self, node: ast.Constant) -> Any:
        return self.generic_visit(node)

    def generic_visit(self, node: ast.AST) -> Any:
        visitors = self._visitors
        fields = _CHILD_FIELDS.get(type(node))
        for field in child_fields(type(node)) if fields is None else fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, _AST):
                        visitor = visitors.get(type(item)) or self._visitor(type(item))
                        if visitor is not _LEAF:
                            visitor(self, item)
            elif isinstance(value, _AST):
                visitor = visitors.get(type(value)) or self._visitor(type(value))
                if visitor is not _LEAF:
                    visitor(self, value)


class NodeTransformer(NodeVisitor, ast.NodeTransformer):
    """`ast.NodeTransformer`: a visitor's None removes the node, a list replaces it with several."""

    def visit(self, node: ast.AST) -> Any:
        return (self._visitors.get(type(node)) or self._visitor(type(node)))(self, node)

    def generic_visit(self, node: ast.AST) -> ast.AST:
        visitors = self._visitors
        fields = _CHILD_FIELDS.get(type(node))
        for field in child_fields(type(node)) if fields is None else fields:
            try:
                old_value = getattr(node, field)
            except AttributeError:
                continue
            if isinstance(old_value, list):
                new_values = []
                changed = False
                for value in old_value:
                    if isinstance(value, _AST):
                        visitor = visitors.get(type(value)) or self._visitor(type(value))
                        if visitor is not _LEAF:
                            new_value = visitor(self, value)
                            if new_value is not value:
                                changed = True
                                if new_value is None:
                                    continue
                                if not isinstance(new_value, _AST):
                                    new_values.extend(new_value)
                                    continue
                                value = new_value
                    new_values.append(value)
                if changed:
                    old_value[:] = new_values
            elif isinstance(old_value, _AST):
                visitor = visitors.get(type(old_value)) or self._visitor(type(old_value))
                if visitor is _LEAF:
                    continue
                new_node = visitor(self, old_value)
                if new_node is None:
                    delattr(node, field)
                elif new_node is not old_value:
                    setattr(node, field, new_node)
        return node
