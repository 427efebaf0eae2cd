"""The static check: refuse constructs that reach interpreter internals, before anything runs.

`validate(tree, source, filename)` raises `SyntaxError` for the first refused construct, with the
line, a caret under the offending name, and a message that says what to write instead. It runs in
the worker on every feed; it is one pass over the AST, so it costs little next to `compile`.

What is refused (the tables are in `rules.py`):

- attributes named like `__this__`, except `READ_DUNDERS` (reads), `STORE_DUNDERS` (stores) and
  a read of `x.__dict__` (which the rewrite turns into a guarded copy);
- attribute names of frames, code, tracebacks, generators and coroutines (`f_globals`, `co_code`,
  `tb_frame`, `gi_frame`, `cr_frame`, `ag_frame` ...) and of the event loop (`get_loop`), whatever
  the object;
- variables, functions, classes, arguments, imports, `global`/`nonlocal` and `del` of names like
  `__this__` (`__builtins__`, `__import__`, `__class__`, anything `__corral...`), except
  `__name__`; a class body may define the dunder methods of `DEFINABLE_DUNDERS` and assign
  `CLASS_ASSIGN_DUNDERS`;
- `from x import *` and relative imports (`from __future__ import annotations` is allowed: an
  annotation string is something a script could write anyway, and nothing the sandbox offers
  evaluates one as code: `typing.get_type_hints` reads names, attributes and subscripts by the
  sandbox's rules, `singledispatch` refuses them);
- keyword sub-patterns (`case P(__class__=x)`) with refused names, and private attributes in value
  patterns (`case obj._x:`), which no guard can check.

`type(name, bases, namespace)` runs: the class it makes passes the rule every class does
(`guards.namespace_refusal`), and the dunders of `OWN_DUNDERS` / `OWN_STORE_DUNDERS` pass here to
be checked on the object at run time.
"""

from __future__ import annotations

import ast

from .rules import (
    CLASS_ASSIGN_DUNDERS,
    DEFINABLE_DUNDERS,
    DICT_ATTRIBUTE,
    FILTERED_ATTRIBUTES,
    INTERNAL_NAMES,
    NAME_DUNDERS,
    OWN_DUNDERS,
    OWN_STORE_DUNDERS,
    attribute_refusal,
    dunder_hint,
    is_dunder,
    is_private,
)
from .walk import NodeVisitor

__all__ = ['validate']

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)

_SHOWN_METHODS = '__init__, __repr__, __str__, __eq__, __hash__, __lt__, __len__, __iter__, __getitem__, __enter__, __exit__, __post_init__, ...'

_NAME_HINTS = {
    '__class__': 'use type(self) instead',
    '__builtins__': 'call builtins by their name',
    '__import__': 'use an import statement',
    '__build_class__': 'use a class statement',
    '__file__': 'a script has no file',
    '__annotations__': 'annotations are not available at run time in the sandbox',
    '__dict__': 'use explicit variables or a dict',
}

_METHOD_HINTS = {
    '__del__': 'finalizers are not supported in the sandbox; use a with statement or an explicit close() method',
    '__getattribute__': 'define __getattr__ (called for missing attributes) instead',
    '__setattr__': 'use a property, or dataclass(frozen=True), to control assignments',
    '__delattr__': 'use a property with a deleter instead',
    '__reduce__': 'pickling is not available in the sandbox; define __copy__/__deepcopy__ for copy',
    '__reduce_ex__': 'pickling is not available in the sandbox; define __copy__/__deepcopy__ for copy',
    '__instancecheck__': 'use an explicit check method instead of overriding isinstance()',
    '__subclasscheck__': 'use an explicit check method instead of overriding issubclass()',
}


class _Refused(Exception):
    def __init__(self, message: str, node: ast.AST, span: tuple[int, int, int, int] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.node = node
        self.span = span


def validate(tree: ast.AST, source: str, filename: str) -> bool:
    """Raise `SyntaxError` at the first construct the sandbox refuses. When all is fine, return
    whether a `return`, `yield` or `nonlocal` may stand outside every function and class body
    (for `compile.py`, which refuses them there as Python does: False means none does)."""
    validator = _Validator(source)
    try:
        validator.visit(tree)
    except _Refused as refused:
        raise _syntax_error(refused, source, filename) from None
    return validator.function_only_outside


def _syntax_error(refused: _Refused, source: str, filename: str) -> SyntaxError:
    node = refused.node
    if refused.span is not None:
        lineno, col, end_lineno, end_col = refused.span
    else:
        lineno = getattr(node, 'lineno', 1)
        col = getattr(node, 'col_offset', 0)
        end_lineno = getattr(node, 'end_lineno', None) or lineno
        end_col = getattr(node, 'end_col_offset', None)
        if end_col is None:
            end_col = col + 1
    lines = source.splitlines()
    text = lines[lineno - 1] if 0 < lineno <= len(lines) else ''
    if end_lineno != lineno:  # show the first line only
        end_lineno, end_col = lineno, max(len(text), col + 1)
    # ast offsets count UTF-8 bytes; SyntaxError offsets count characters
    col_chars = _chars(text, col)
    end_chars = _chars(text, end_col)
    return SyntaxError(refused.message, (filename, lineno, col_chars + 1, text + '\n', end_lineno, max(end_chars, col_chars + 1) + 1))


def _chars(text: str, byte_offset: int) -> int:
    return len(text.encode('utf-8')[:byte_offset].decode('utf-8', errors='ignore'))


class _Validator(NodeVisitor):
    def __init__(self, source: str) -> None:
        self._lines = source.splitlines()
        # 'module', 'class', 'function' or 'comprehension', innermost last
        self._scopes: list[str] = ['module']
        # a return, yield or nonlocal outside every function and class body, or in an argument's
        # annotation there (compile.py refuses that too, but under `from __future__ import annotations`)
        self.function_only_outside = False

    # ----- helpers -------------------------------------------------------------------------------

    def _span_of_suffix(self, node: ast.AST, name: str) -> tuple[int, int, int, int] | None:
        """The span of `name` where it ends `node` (an attribute name ends its Attribute node)."""
        end_lineno = getattr(node, 'end_lineno', None)
        end_col = getattr(node, 'end_col_offset', None)
        if end_lineno is None or end_col is None:
            return None
        start = end_col - len(name.encode('utf-8'))
        line = self._line(end_lineno)
        if start >= 0 and line.encode('utf-8')[start:end_col].decode('utf-8', errors='ignore') == name:
            return (end_lineno, start, end_lineno, end_col)
        return None

    def _span_of_word(self, node: ast.AST, word: str) -> tuple[int, int, int, int] | None:
        """The span of the first `word` on the node's first line, from its start."""
        lineno = getattr(node, 'lineno', None)
        col = getattr(node, 'col_offset', 0)
        if lineno is None:
            return None
        data = self._line(lineno).encode('utf-8')
        index = data.find(word.encode('utf-8'), col)
        if index < 0:
            return None
        return (lineno, index, lineno, index + len(word.encode('utf-8')))

    def _line(self, lineno: int) -> str:
        return self._lines[lineno - 1] if 0 < lineno <= len(self._lines) else ''

    def _in_class_body(self) -> bool:
        return self._scopes[-1] == 'class'

    def _check_plain_name(self, name: str, node: ast.AST, what: str, span: tuple[int, int, int, int] | None = None) -> None:
        """Refuse dunder and reserved names for variables, arguments, imports ..."""
        if name.startswith('__corral'):
            raise _Refused(f"{what} '{name}' is reserved by the sandbox; choose another name", node, span)
        if is_dunder(name):
            hint = _NAME_HINTS.get(name) or dunder_hint(name)
            text = f"{what} '{name}' is not allowed in the sandbox: names like __this__ are refused"
            raise _Refused(f'{text}; {hint}' if hint else text, node, span)

    # ----- scopes --------------------------------------------------------------------------------

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        if not isinstance(node, ast.Lambda):
            self._check_function_name(node)
            for decorator in node.decorator_list:
                self.visit(decorator)
            self._visit_type_params(node)
            if node.returns is not None:
                self.visit(node.returns)
        args = node.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is None:
                continue
            self._check_plain_name(arg.arg, arg, 'argument name')
            if arg.annotation is not None:
                self.visit(arg.annotation)
        for default in [*args.defaults, *args.kw_defaults]:
            if default is not None:
                self.visit(default)
        self._scopes.append('function')
        try:
            if isinstance(node, ast.Lambda):
                self.visit(node.body)
            else:
                for statement in node.body:
                    self.visit(statement)
        finally:
            self._scopes.pop()

    def _visit_type_params(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        # 3.12 and later: `def f[T: bound = default]`, `class C[T]`; `type X[T] = ...` is visited as a
        # whole. Bounds and defaults run when typing reads them (a generic's subscript uses defaults).
        for param in getattr(node, 'type_params', ()):
            self.visit(param)

    def _visit_type_param(self, node: ast.AST) -> None:
        self._check_plain_name(node.name, node, 'type parameter name', self._span_of_word(node, node.name))  # type: ignore[attr-defined]
        self.generic_visit(node)

    visit_TypeVar = visit_ParamSpec = visit_TypeVarTuple = _visit_type_param

    def _check_function_name(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        name = node.name
        span = self._span_of_word(node, name)
        if name.startswith('__corral'):
            raise _Refused(f"function name '{name}' is reserved by the sandbox; choose another name", node, span)
        if not is_dunder(name):
            return
        if not self._in_class_body() and not self._helper_method(name):
            raise _Refused(
                f"function '{name}' cannot be defined in the sandbox: names like __this__ are allowed only for "
                f'methods ({_SHOWN_METHODS}), in a class body or to set on a class later; give the function an ordinary name',
                node,
                span,
            )
        if name not in DEFINABLE_DUNDERS:
            hint = _METHOD_HINTS.get(name, f'the special methods a class may define are {_SHOWN_METHODS}')
            raise _Refused(f"method '{name}' cannot be defined in the sandbox; {hint}", node, span)

    def _helper_method(self, name: str) -> bool:
        """A method defined outside a class body, for a class decorator's helper to set on a class
        (`cls.__init__ = __init__`): a plain variable of a function or the module, where it means
        nothing to Python (but `__getattr__`, which a module's globals would answer for it)."""
        return name in OWN_STORE_DUNDERS and not (name == '__getattr__' and self._scopes[-1] == 'module')

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._visit_function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._visit_function(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._visit_function(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._check_plain_name(node.name, node, 'class name', self._span_of_word(node, node.name))
        for item in node.decorator_list:
            self.visit(item)
        self._visit_type_params(node)
        for item in [*node.bases, *node.keywords]:
            self.visit(item)
        self._scopes.append('class')
        try:
            for statement in node.body:
                self.visit(statement)
        finally:
            self._scopes.pop()

    def _visit_comprehension(self, node: ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp) -> None:
        # the first iterable is evaluated in the enclosing scope; the rest in the comprehension's own
        generators = node.generators
        self.visit(generators[0].iter)
        self._scopes.append('comprehension')
        try:
            for index, generator in enumerate(generators):
                self.visit(generator.target)
                if index:
                    self.visit(generator.iter)
                for condition in generator.ifs:
                    self.visit(condition)
            if isinstance(node, ast.DictComp):
                self.visit(node.key)
                self.visit(node.value)
            else:
                self.visit(node.elt)
        finally:
            self._scopes.pop()

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _visit_comprehension

    # ----- names and attributes ------------------------------------------------------------------

    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        if not name.startswith('__'):  # neither reserved nor a dunder
            return
        if name.startswith('__corral'):
            raise _Refused(f"name '{name}' is reserved by the sandbox; choose another name", node)
        if not is_dunder(name):
            return
        if isinstance(node.ctx, ast.Load) and name in NAME_DUNDERS:
            return
        if not self._in_class_body() and not isinstance(node.ctx, ast.Del) and self._helper_method(name):
            return
        if self._in_class_body() and not isinstance(node.ctx, ast.Del):
            if name in CLASS_ASSIGN_DUNDERS or name in DEFINABLE_DUNDERS:
                return
            if isinstance(node.ctx, ast.Store):
                hint = _METHOD_HINTS.get(name, f'a class body may assign only {", ".join(sorted(CLASS_ASSIGN_DUNDERS))} and the special methods it may define')
                raise _Refused(f"class attribute '{name}' cannot be assigned in the sandbox; {hint}", node)
        hint = _NAME_HINTS.get(name) or dunder_hint(name)
        text = f"name '{name}' is not available in the sandbox: names like __this__ are refused"
        raise _Refused(f'{text}; {hint}' if hint else text, node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.visit(node.value)  # report the first refused name in evaluation order
        attr = node.attr
        if attr[:1] != '_' and attr.isascii() and attr not in INTERNAL_NAMES:
            return  # no rule below refuses it (what they check starts with _)
        store = not isinstance(node.ctx, ast.Load)
        if node.attr == DICT_ATTRIBUTE and not store:
            return  # rewritten: a copy, see guards.attribute_dict
        if (node.attr in OWN_DUNDERS and not store) or (node.attr in OWN_STORE_DUNDERS and isinstance(node.ctx, ast.Store)):
            return  # rewritten: checked on the object, see guards.own_attribute and guards.own_store
        refusal = attribute_refusal(node.attr, store=store)
        if refusal is not None:
            raise _Refused(refusal, node, self._span_of_suffix(node, node.attr))

    # ----- imports, global, del ------------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            for part in alias.name.split('.'):
                self._check_module_part(part, alias)
            if alias.asname is not None:
                self._check_plain_name(alias.asname, alias, 'name')

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            raise _Refused('relative imports are not supported in the sandbox; import modules by their name', node)
        if node.module == '__future__':
            return  # compiled, never run: CPython refuses an unknown feature or a late one (see compile.py)
        for part in (node.module or '').split('.'):
            self._check_module_part(part, node)
        for alias in node.names:
            if alias.name == '*':
                raise _Refused(
                    f"'from {node.module} import *' is not supported in the sandbox; import the names you need: "
                    f'from {node.module} import name1, name2',
                    node,
                )
            self._check_plain_name(alias.name, alias, 'imported name')
            if alias.asname is not None:
                self._check_plain_name(alias.asname, alias, 'name')

    def _check_module_part(self, part: str, node: ast.AST) -> None:
        if is_dunder(part) or part.startswith('__corral'):
            raise _Refused(f"module '{part}' is not available in the sandbox", node)

    def visit_Global(self, node: ast.Global) -> None:
        for name in node.names:
            self._check_plain_name(name, node, "name in 'global'")

    def _visit_function_only(self, node: ast.Return | ast.Yield | ast.YieldFrom) -> None:
        self._note_function_only()
        self.generic_visit(node)

    visit_Return = visit_Yield = visit_YieldFrom = _visit_function_only

    def _note_function_only(self) -> None:
        if not self.function_only_outside:
            self.function_only_outside = all(scope == 'module' or scope == 'comprehension' for scope in self._scopes)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self._note_function_only()
        for name in node.names:
            self._check_plain_name(name, node, "name in 'nonlocal'")

    # ----- exceptions ----------------------------------------------------------------------------

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name is not None:
            self._check_plain_name(node.name, node, 'exception name')
        self.generic_visit(node)

    # ----- match ---------------------------------------------------------------------------------

    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        self.visit(node.cls)
        for name in node.kwd_attrs:
            refusal = attribute_refusal(name)
            if refusal is not None:
                raise _Refused(f'class pattern keyword: {refusal}', node, self._span_of_word(node, name + '='))
            if name in FILTERED_ATTRIBUTES:
                raise _Refused(
                    f"a class pattern cannot read '{name}' in the sandbox; match without it and read "
                    f'.{name} in the case body',
                    node,
                    self._span_of_word(node, name + '='),
                )
        for pattern in [*node.patterns, *node.kwd_patterns]:
            self.visit(pattern)

    def visit_MatchValue(self, node: ast.MatchValue) -> None:
        self._check_pattern_value(node.value)
        self.visit(node.value)

    def _check_pattern_value(self, value: ast.expr) -> None:
        """A value pattern, or a mapping pattern's key: a dotted name read with no guard, so no
        private or filtered attribute, and no `__dict__` (elsewhere rewritten into a guarded copy,
        which a pattern cannot be)."""
        current = value
        while isinstance(current, ast.Attribute):
            if is_private(current.attr) or current.attr in FILTERED_ATTRIBUTES or current.attr == DICT_ATTRIBUTE:
                kind = 'private attribute' if is_private(current.attr) else 'attribute'
                raise _Refused(
                    f"a value pattern cannot read {kind} '{current.attr}' in the sandbox; "
                    f'bind it to a variable and compare in a guard: case v if v == ...',
                    current,
                )
            current = current.value

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        if node.name is not None:
            self._check_plain_name(node.name, node, 'capture name')
        self.generic_visit(node)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if node.name is not None:
            self._check_plain_name(node.name, node, 'capture name')

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        if node.rest is not None:
            self._check_plain_name(node.rest, node, 'capture name')
        for key in node.keys:
            self._check_pattern_value(key)
        self.generic_visit(node)
