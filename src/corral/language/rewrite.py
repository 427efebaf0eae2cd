"""The rewrite: route the few risky operations a validated script can still do through guards.

Ordinary code is left alone, so it runs at CPython speed. After `validate`, the rewrite changes:

- `x._y` (and `x.__y`, name-mangled as CPython would) into `__corral_getattr__(x, '_y')`; stores
  and deletes into `__corral_attrs__(x)['_y'] = v` / `del __corral_attrs__(x)['_y']`, which
  keeps Python's evaluation order and works in any target position (tuples, `for`, `+=`);
- `x.format` / `x.format_map` into `__corral_format__(x, 'format')`, a safe formatter for strings;
- `x.__dict__` (a read) into `__corral_dict__(x)`, a guarded copy (see `guards.attribute_dict`);
- `x.__annotations__`, `x.__wrapped__` ... (`OWN_DUNDERS`, reads) into `__corral_own__(x, name)`,
  which reads them on the script's own objects only; `C.__init__ = f` (`OWN_STORE_DUNDERS`) into
  `__corral_attrs__(C)['__init__'] = f`, which sets them on the script's own classes only;
- `x.now` / `x.today` / `x.utcnow` into `__corral_clock__(x, 'now')`, which swaps the clock methods
  of `datetime.date` and its subclasses for the sandbox's (the clock is read through the host);
- every `except` handler (and `except*`) to start with `__corral_stop__()`, which re-raises a
  `SandboxStop`;
- every `with` / `async with` item into `__corral_with__(cm)` / `__corral_async_with__(cm)`, whose
  `__exit__` cannot suppress a `SandboxStop`;
- class patterns that read attributes (`case P(x, y)`, `case P(_x=v)`) to look their class up
  through `__corral_match__`, which checks `__match_args__` and the subject at match time;
- every class body to end with `__corral_classmark__ = __corral_mark__()`, which marks the class
  as the script's own (see `guards.build_class`);
- a call of a function named `run` (`asyncio.run(main())`, `run(main())`) in the script's own
  top level, outside comprehensions and lambdas, into `await __corral_run__(f, main())`: when `f`
  is the sandbox's `asyncio.run`, the feed's task awaits the coroutine on its loop, as a script
  run by CPython would run it on a new loop; any other `f` is called as written.

The `__corral...` names live in the script's builtins; the validator refuses them in scripts.
Line and column numbers are kept, so tracebacks point at the script's own lines.
"""

from __future__ import annotations

import ast
import copy
from typing import Any

from .rules import CLOCK_ATTRIBUTES, DICT_ATTRIBUTE, FILTERED_ATTRIBUTES, FORMAT_ATTRIBUTES, OWN_DUNDERS, OWN_STORE_DUNDERS, is_private
from .walk import NodeTransformer

__all__ = ['GUARD_NAMES', 'INPLACE', 'MATCH_SPECS', 'is_run_call', 'rewrite']

#: AugAssign operators -> the `operator` function the rewrite calls for `x._y op= v`.
INPLACE = {
    'Add': 'iadd', 'Sub': 'isub', 'Mult': 'imul', 'MatMult': 'imatmul', 'Div': 'itruediv', 'FloorDiv': 'ifloordiv',
    'Mod': 'imod', 'Pow': 'ipow', 'LShift': 'ilshift', 'RShift': 'irshift', 'BitOr': 'ior', 'BitXor': 'ixor',
    'BitAnd': 'iand',
}

#: The guards the rewritten code loads by name (`guards.make_guards` supplies them). Every class
#: body declares them global: its namespace is whatever the metaclass's `__prepare__` returns,
#: which could answer them with the script's own objects (found by a red-team pass).
GUARD_NAMES = (
    '__corral_async_with__', '__corral_attrs__', '__corral_clock__', '__corral_dict__', '__corral_format__', '__corral_getattr__',
    '__corral_mark__', '__corral_match__', '__corral_own__', '__corral_run__', '__corral_setattr__', '__corral_stop__', '__corral_with__',
    *sorted(f'__corral_{name}__' for name in INPLACE.values()),
)

#: Class patterns rewritten by `rewrite`: index -> (dotted path, positional count, keyword names).
#: The worker's `__corral_match__` resolves `c<index>` from it. Grows with each compiled script.
MATCH_SPECS: list[tuple[tuple[str, ...], int, tuple[str, ...]]] = []


def is_run_call(node: ast.AST) -> bool:
    """`run(...)` or `x.run(...)`: at the top level, the rewrite awaits it (see the module's docstring)."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Name) and func.id == 'run') or (isinstance(func, ast.Attribute) and func.attr == 'run')


def rewrite(tree: ast.Module) -> ast.Module:
    """Rewrite a validated module in place and return it. Every node the rewrite makes takes the
    line and columns of the node it stands for (no node is left for `ast.fix_missing_locations`)."""
    return _Rewriter().visit(tree)


def _name(identifier: str, node: ast.AST) -> ast.Name:
    return ast.copy_location(ast.Name(id=identifier, ctx=ast.Load()), node)


def _call(identifier: str, node: ast.AST, *args: ast.expr) -> ast.Call:
    return ast.copy_location(ast.Call(func=_name(identifier, node), args=list(args), keywords=[]), node)


def _located(new: ast.AST, node: ast.AST) -> ast.AST:
    for sub in ast.walk(new):
        ast.copy_location(sub, node)
    return new


def _constant(value: Any, node: ast.AST) -> ast.Constant:
    return ast.copy_location(ast.Constant(value=value), node)


class _Rewriter(NodeTransformer):
    def __init__(self) -> None:
        self._classes: list[str] = []
        self._thunks: list[ast.stmt] = []  # for the match statement being rewritten
        self._scopes: list[str] = ['module']
        self._comprehensions = 0  # comprehensions around the node being rewritten

    def _mangle(self, name: str) -> str:
        """Private name mangling, as the compiler does it for attribute names in a class."""
        if not self._classes or not name.startswith('__') or name.endswith('__'):
            return name
        owner = self._classes[-1].lstrip('_')
        return f'_{owner}{name}' if owner else name

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.ClassDef:
        node.decorator_list = [self.visit(item) for item in node.decorator_list]
        if getattr(node, 'type_params', None):  # 3.12 and later: `class C[T: bound]`
            node.type_params = [self.visit(item) for item in node.type_params]
        node.bases = [self.visit(item) for item in node.bases]
        node.keywords = [self.visit(item) for item in node.keywords]
        self._classes.append(node.name)
        self._scopes.append('class')
        try:
            body: list[ast.stmt] = []
            for statement in node.body:
                result = self.visit(statement)
                if isinstance(result, list):
                    body.extend(result)
                elif result is not None:
                    body.append(result)
        finally:
            self._classes.pop()
            self._scopes.pop()
        anchor = node.body[-1] if node.body else node
        mark = ast.Assign(
            targets=[ast.copy_location(ast.Name(id='__corral_classmark__', ctx=ast.Store()), anchor)],
            value=_call('__corral_mark__', anchor),
        )
        body.append(ast.copy_location(mark, anchor))
        declaration = ast.copy_location(ast.Global(names=list(GUARD_NAMES)), node.body[0] if node.body else node)
        # after the docstring, which must stay the body's first statement to be the class's __doc__
        docstring = body[:1] if body and _is_docstring(body[0]) else []
        node.body = [*docstring, declaration, *body[len(docstring):]]
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        attr = node.attr
        if attr[:1] != '_' and attr not in FILTERED_ATTRIBUTES:  # every other case below starts with _
            return node
        if is_private(attr):
            name = _constant(self._mangle(attr), node)
            if isinstance(node.ctx, ast.Load):
                return _call('__corral_getattr__', node, node.value, name)
            target = _call('__corral_attrs__', node, node.value)
            return ast.copy_location(ast.Subscript(value=target, slice=name, ctx=node.ctx), node)
        if attr in OWN_STORE_DUNDERS and isinstance(node.ctx, ast.Store):
            target = _call('__corral_attrs__', node, node.value)
            return ast.copy_location(ast.Subscript(value=target, slice=_constant(attr, node), ctx=node.ctx), node)
        if attr == DICT_ATTRIBUTE and isinstance(node.ctx, ast.Load):
            return _call('__corral_dict__', node, node.value)
        if attr in OWN_DUNDERS and isinstance(node.ctx, ast.Load):
            return _call('__corral_own__', node, node.value, _constant(attr, node))
        if attr in FORMAT_ATTRIBUTES and isinstance(node.ctx, ast.Load):
            return _call('__corral_format__', node, node.value, _constant(attr, node))
        if attr in CLOCK_ATTRIBUTES and isinstance(node.ctx, ast.Load):
            return _call('__corral_clock__', node, node.value, _constant(attr, node))
        return node

    def visit_Assign(self, node: ast.Assign) -> ast.stmt:
        target = node.targets[0]
        if len(node.targets) == 1 and isinstance(target, ast.Attribute) and is_private(target.attr) and self._scopes[-1] != 'class':
            # x._y = v  ->  __corral_setattr__(v, x, '_y'): one guard call, v evaluated first as in Python
            value = self.visit(node.value)
            obj = self.visit(target.value)
            call = _call('__corral_setattr__', node, value, obj, _constant(self._mangle(target.attr), target))
            return ast.copy_location(ast.Expr(value=call), node)
        self.generic_visit(node)
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.stmt:
        target = node.target
        if isinstance(target, ast.Attribute) and is_private(target.attr) and self._scopes[-1] != 'class':
            # x._y += v  ->  __corral_setattr__(__corral_iadd__(__corral_getattr__(__corral_o__ := x, '_y'), v),
            #                                   __corral_o__, '_y')
            # Python's order (x, then x._y, then v, in-place operator, store) with two guard calls;
            # __corral_o__ is a temporary of the statement. (A class body uses the general form.)
            name = _constant(self._mangle(target.attr), target)
            obj = self.visit(target.value)
            temp = ast.copy_location(ast.Name(id='__corral_o__', ctx=ast.Store()), target)
            load = _call('__corral_getattr__', target, ast.copy_location(ast.NamedExpr(target=temp, value=obj), target), name)
            combined = _call(f'__corral_{INPLACE[type(node.op).__name__]}__', node, load, self.visit(node.value))
            call = _call('__corral_setattr__', node, combined, _name('__corral_o__', target), name)
            return ast.copy_location(ast.Expr(value=call), node)
        self.generic_visit(node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if not (self._scopes == ['module'] and not self._comprehensions and is_run_call(node)):
            return node
        call = ast.Call(func=_name('__corral_run__', node), args=[node.func, *node.args], keywords=node.keywords)
        return ast.copy_location(ast.Await(value=ast.copy_location(call, node)), node)

    def _visit_comprehension(self, node: ast.AST) -> ast.AST:
        self._comprehensions += 1
        try:
            self.generic_visit(node)
        finally:
            self._comprehensions -= 1
        return node

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _visit_comprehension

    def _visit_scope(self, node: ast.AST) -> ast.AST:
        self._scopes.append('function')
        try:
            self.generic_visit(node)
        finally:
            self._scopes.pop()
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _visit_scope

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> ast.ExceptHandler:
        self.generic_visit(node)
        anchor = node.body[0] if node.body else node
        check = ast.copy_location(ast.Expr(value=_call('__corral_stop__', anchor)), anchor)
        node.body.insert(0, check)
        return node

    def visit_With(self, node: ast.With) -> ast.With:
        self.generic_visit(node)
        for item in node.items:
            item.context_expr = _call('__corral_with__', item.context_expr, item.context_expr)
        return node

    def visit_AsyncWith(self, node: ast.AsyncWith) -> ast.AsyncWith:
        self.generic_visit(node)
        for item in node.items:
            item.context_expr = _call('__corral_async_with__', item.context_expr, item.context_expr)
        return node

    def visit_Match(self, node: ast.Match) -> list[ast.stmt] | ast.Match:
        outer = self._thunks
        self._thunks = []
        try:
            self.generic_visit(node)
            thunks = self._thunks
        finally:
            self._thunks = outer
        if not thunks:
            return node
        return [*thunks, node]

    def visit_MatchValue(self, node: ast.MatchValue) -> ast.MatchValue:
        # a value pattern must stay a dotted name; the validator refused private parts in it
        return node

    def visit_MatchClass(self, node: ast.MatchClass) -> ast.MatchClass:
        node.patterns = [self.visit(pattern) for pattern in node.patterns]
        node.kwd_patterns = [self.visit(pattern) for pattern in node.kwd_patterns]
        path = _dotted(node.cls)
        if path is None:  # not a dotted name: compile() reports it
            return node
        private_path = any(is_private(part) for part in path[1:])
        if not node.patterns and not node.kwd_attrs and not private_path:
            return node
        index = len(MATCH_SPECS)
        MATCH_SPECS.append((tuple(path), len(node.patterns), tuple(node.kwd_attrs)))
        # `__corral_t<N>__ = lambda: Point`, just before the match statement: the resolver calls it
        # when the case runs, so the class is looked up then, in the pattern's own scope
        lookup = self.visit(copy.deepcopy(node.cls))
        arguments = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
        thunk = ast.Assign(
            targets=[ast.Name(id=f'__corral_t{index}__', ctx=ast.Store())],
            value=ast.Lambda(args=arguments, body=lookup),
        )
        self._thunks.append(_located(thunk, node.cls))
        resolver = _name('__corral_match__', node.cls)
        node.cls = ast.copy_location(ast.Attribute(value=resolver, attr=f'c{index}', ctx=ast.Load()), node.cls)
        return node


def _is_docstring(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) and isinstance(statement.value.value, str)


def _dotted(node: ast.expr) -> list[str] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]
