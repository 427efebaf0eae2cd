"""Property tests of the language guard: generated programs and names, checked against the rules.

- The validator (and the rewrite and compile after it) fail only with SyntaxError.
- When it accepts a program, the rewritten program reads no dunder attribute outside the
  allow-list, no internal attribute, and no private attribute except through a guard; defines,
  imports and names no refused dunder.
- `getattr` (the guard) never returns a refused attribute, whatever the string looks like.
- The sandbox's `str.format` agrees with CPython's wherever no attribute is refused.
"""

from __future__ import annotations

import ast
import string

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from corral.language.compile import compile_script
from corral.language.guards import format_attribute, guarded_getattr, guarded_setattr
from corral.language.rewrite import rewrite
from corral.language.rules import (
    CLASS_ASSIGN_DUNDERS,
    DEFINABLE_DUNDERS,
    INTERNAL_NAMES,
    NAME_DUNDERS,
    READ_DUNDERS,
    STORE_DUNDERS,
    is_dunder,
    is_private,
    normalize,
)
from corral.language.validate import validate

pytestmark = pytest.mark.filterwarnings("ignore::SyntaxWarning")

_INTERESTING = sorted(
    READ_DUNDERS | STORE_DUNDERS | DEFINABLE_DUNDERS | CLASS_ASSIGN_DUNDERS | NAME_DUNDERS | INTERNAL_NAMES
    | {
        '__class__', '__globals__', '__dict__', '__builtins__', '__subclasses__', '__bases__', '__mro__', '__code__',
        '__closure__', '__self__', '__func__', '__getattribute__', '__reduce_ex__', '__traceback__', '__import__',
        '__corral_getattr__', '__corral_mark__', '__corral_classmark__', '__del__', '__annotations__',
        'format', 'format_map', '_x', '_loop', '__secret', 'plain', 'f_name', 'value', 'mro', 'type',
    }
)

_FULLWIDTH = {c: chr(ord(c) + 0xFEE0) for c in string.ascii_letters}
_FULLWIDTH['_'] = '\uff3f'


def _lookalike(name: str, data: st.DataObject) -> str:
    """The same identifier after NFKC, written with fullwidth letters and underscores (not first)."""
    chars = list(name)
    for index in range(1, len(chars)):
        if chars[index] in _FULLWIDTH and data.draw(st.booleans()):
            chars[index] = _FULLWIDTH[chars[index]]
    return ''.join(chars)


identifiers = st.one_of(
    st.sampled_from(_INTERESTING),
    st.from_regex(r'_{0,2}[a-z][a-z0-9_]{0,6}_{0,2}', fullmatch=True),
)

# ----- generated programs ----------------------------------------------------------------------

_ctx = ast.Load


def _names(draw: st.DrawFn) -> str:
    return draw(identifiers)


@st.composite
def expressions(draw: st.DrawFn, depth: int = 3) -> ast.expr:
    if depth <= 0:
        return draw(st.sampled_from([ast.Name(id=_names(draw), ctx=ast.Load()), ast.Constant(value=draw(st.sampled_from([1, 'x', '{0.__class__}', None])))]))
    kind = draw(st.sampled_from(['name', 'attr', 'attr', 'call', 'subscript', 'const', 'lambda', 'fstring', 'comp']))
    sub = expressions(depth - 1)
    if kind == 'name':
        return ast.Name(id=_names(draw), ctx=ast.Load())
    if kind == 'attr':
        return ast.Attribute(value=draw(sub), attr=_names(draw), ctx=ast.Load())
    if kind == 'call':
        func = draw(st.one_of(sub, st.just(ast.Name(id='type', ctx=ast.Load())), st.just(ast.Name(id='getattr', ctx=ast.Load()))))
        return ast.Call(func=func, args=draw(st.lists(sub, max_size=3)), keywords=[])
    if kind == 'subscript':
        return ast.Subscript(value=draw(sub), slice=ast.Constant(value=0), ctx=ast.Load())
    if kind == 'lambda':
        args = ast.arguments(posonlyargs=[], args=[ast.arg(arg=_names(draw))], kwonlyargs=[], kw_defaults=[], defaults=[])
        return ast.Lambda(args=args, body=draw(sub))
    if kind == 'fstring':
        return ast.JoinedStr(values=[ast.FormattedValue(value=draw(sub), conversion=-1)])
    if kind == 'comp':
        target = ast.Name(id=_names(draw), ctx=ast.Store())
        return ast.ListComp(elt=draw(sub), generators=[ast.comprehension(target=target, iter=draw(sub), ifs=[], is_async=0)])
    return ast.Constant(value=1)


def _target(draw: st.DrawFn) -> ast.expr:
    kind = draw(st.sampled_from(['name', 'attr', 'subscript', 'tuple']))
    if kind == 'name':
        return ast.Name(id=_names(draw), ctx=ast.Store())
    if kind == 'attr':
        return ast.Attribute(value=draw(expressions(1)), attr=_names(draw), ctx=ast.Store())
    if kind == 'subscript':
        return ast.Subscript(value=draw(expressions(1)), slice=ast.Constant(value=0), ctx=ast.Store())
    return ast.Tuple(elts=[ast.Attribute(value=ast.Name(id='a', ctx=ast.Load()), attr=_names(draw), ctx=ast.Store()), ast.Name(id='b', ctx=ast.Store())], ctx=ast.Store())


@st.composite
def statements(draw: st.DrawFn, depth: int = 2) -> ast.stmt:
    kind = draw(st.sampled_from([
        'expr', 'assign', 'augassign', 'delete', 'def', 'class', 'import', 'from', 'global', 'try', 'with', 'match', 'for', 'return',
    ]))
    body = st.lists(statements(depth - 1), min_size=1, max_size=3) if depth > 0 else st.just([ast.Pass()])
    if kind == 'expr':
        return ast.Expr(value=draw(expressions()))
    if kind == 'assign':
        return ast.Assign(targets=[_target(draw)], value=draw(expressions(2)))
    if kind == 'augassign':
        target = ast.Attribute(value=ast.Name(id='a', ctx=ast.Load()), attr=_names(draw), ctx=ast.Store())
        return ast.AugAssign(target=target, op=ast.Add(), value=ast.Constant(value=1))
    if kind == 'delete':
        return ast.Delete(targets=[_target(draw)])
    if kind == 'def':
        args = ast.arguments(posonlyargs=[], args=[ast.arg(arg=_names(draw))], kwonlyargs=[], kw_defaults=[], defaults=[])
        return ast.FunctionDef(name=_names(draw), args=args, body=draw(body), decorator_list=[], returns=None)
    if kind == 'class':
        return ast.ClassDef(name=_names(draw), bases=[], keywords=[], body=draw(body), decorator_list=[])
    if kind == 'import':
        return ast.Import(names=[ast.alias(name=draw(st.sampled_from(['json', 'asyncio', 'os']) | identifiers), asname=draw(st.none() | identifiers))])
    if kind == 'from':
        return ast.ImportFrom(module=draw(st.sampled_from(['json', 'asyncio']) | identifiers), names=[ast.alias(name=draw(identifiers | st.just('*')))], level=draw(st.sampled_from([0, 0, 1])))
    if kind == 'global':
        return ast.Global(names=[_names(draw)])
    if kind == 'try':
        handler = ast.ExceptHandler(type=None, name=draw(st.none() | identifiers), body=draw(body))
        final = draw(st.sampled_from([[], [ast.Return(value=None)], [ast.Pass()]]))
        return ast.Try(body=draw(body), handlers=[handler], orelse=[], finalbody=final or ([] if draw(st.booleans()) else [ast.Pass()]))
    if kind == 'with':
        return ast.With(items=[ast.withitem(context_expr=draw(expressions(1)), optional_vars=draw(st.none() | st.builds(lambda: None)) and None)], body=draw(body))
    if kind == 'match':
        cls = ast.Attribute(value=ast.Name(id='m', ctx=ast.Load()), attr=_names(draw), ctx=ast.Load()) if draw(st.booleans()) else ast.Name(id=_names(draw), ctx=ast.Load())
        pattern = ast.MatchClass(cls=cls, patterns=[ast.MatchAs(name=_names(draw))], kwd_attrs=[_names(draw)], kwd_patterns=[ast.MatchAs(name=None)])
        return ast.Match(subject=draw(expressions(1)), cases=[ast.match_case(pattern=pattern, guard=None, body=draw(body))])
    if kind == 'for':
        return ast.For(target=_target(draw), iter=draw(expressions(1)), body=draw(body), orelse=[])
    return ast.Return(value=None)


programs = st.lists(statements(), min_size=1, max_size=4).map(lambda body: ast.fix_missing_locations(ast.Module(body=body, type_ignores=[])))


def _source(tree: ast.Module) -> str | None:
    try:
        source = ast.unparse(tree)
        ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return None
    return source


def _check_rewritten(original: ast.Module, rewritten: ast.Module) -> None:
    """The invariants of an accepted, rewritten program."""
    class_scope_names: set[str] = set()
    for node in ast.walk(original):
        if isinstance(node, ast.ClassDef):
            for statement in node.body:
                for sub in ast.walk(statement):
                    if isinstance(sub, ast.Name):
                        class_scope_names.add(sub.id)
        if isinstance(node, ast.Name):
            assert not node.id.startswith('__corral'), node.id
            if is_dunder(node.id):
                assert node.id in NAME_DUNDERS or node.id in DEFINABLE_DUNDERS or node.id in CLASS_ASSIGN_DUNDERS, node.id
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and is_dunder(node.name):
            assert node.name in DEFINABLE_DUNDERS, node.name
        if isinstance(node, ast.arg):
            assert not is_dunder(node.arg), node.arg
        if isinstance(node, ast.alias):
            assert node.name != '*' and not any(is_dunder(part) for part in node.name.split('.')), node.name
            assert node.asname is None or not is_dunder(node.asname)
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            assert not any(is_dunder(name) for name in node.names)
        if isinstance(node, ast.MatchClass):
            for name in node.kwd_attrs:
                assert not is_dunder(name) or name in READ_DUNDERS, name
                assert name not in INTERNAL_NAMES, name
    for node in ast.walk(rewritten):
        if isinstance(node, ast.Attribute):
            name = normalize(node.attr)
            allowed = READ_DUNDERS if isinstance(node.ctx, ast.Load) else STORE_DUNDERS
            assert not is_dunder(name) or name in allowed, name
            assert name not in INTERNAL_NAMES, name
            assert not is_private(name), name
            if isinstance(node.ctx, ast.Load):
                assert name not in ('format', 'format_map'), name


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs)
@pytest.mark.slow
def test_generated_programs(tree):
    source = _source(tree)
    assume(source is not None)
    original = ast.parse(source)
    try:
        validate(original, source, 'main.py')
    except SyntaxError as error:
        assert error.lineno is not None and error.msg
        return
    rewritten = rewrite(ast.parse(source))
    _check_rewritten(original, rewritten)
    try:
        compile_script(source, '<fuzz>')
    except SyntaxError:
        pass  # e.g. 'return' outside a function: CPython's own error


_TEMPLATES = [
    'x.{n}', 'x.{n} = 1', 'del x.{n}', 'x.{n} += 1', 'x.y.{n}()', 'f(x.{n})', "f'{{x.{n}}}'", 'lambda: x.{n}',
    '[a.{n} for a in b]', 'for x.{n} in y: pass', 'with a as x.{n}: pass', '{n}', '{n} = 1', 'del {n}',
    'def {n}(): pass', 'def f({n}): pass', 'class {n}: pass', 'class C:\n    def {n}(self): pass',
    'class C:\n    {n} = 1', 'class C:\n    x = {n}', 'import {n}', 'from json import {n}', 'from {n} import x',
    'import json as {n}', 'def f():\n    global {n}', 'match v:\n    case C({n}=y): pass', 'match v:\n    case x.{n}: pass',
    'try:\n    pass\nexcept E as {n}:\n    pass', 'match v:\n    case {n}: pass',
]


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(_TEMPLATES), identifiers, st.data())
@pytest.mark.slow
def test_names_in_every_position(template, name, data):
    written = _lookalike(name, data) if data.draw(st.booleans()) else name
    source = template.format(n=written)
    try:
        original = ast.parse(source)
    except SyntaxError:
        return
    try:
        validate(original, source, 'main.py')
    except SyntaxError:
        return
    _check_rewritten(original, rewrite(ast.parse(source)))
    normalized = normalize(name)
    if is_dunder(normalized) and template.startswith('x.') and template.endswith('{n}'):
        assert normalized in READ_DUNDERS or normalized == '__dict__'  # __dict__: rewritten into a guarded copy


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=string.printable + '＿ｆ\u00e9', max_size=40))
def test_arbitrary_text_fails_only_with_syntax_error(text):
    assume('\x00' not in text)
    try:
        compile_script(text, '<fuzz>')
    except SyntaxError:
        pass


class _Target:
    def __init__(self):
        self.public = 1


_OBJECTS = [(), 1, 'text', print, len, _Target(), _Target, type, object, [1]]


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(_OBJECTS), identifiers, st.data())
@pytest.mark.slow
def test_guarded_getattr_never_returns_a_refused_attribute(obj, name, data):
    written = _lookalike(name, data) if data.draw(st.booleans()) else name
    normalized = normalize(written)
    refused = (is_dunder(normalized) and normalized not in READ_DUNDERS) or normalized in INTERNAL_NAMES or is_private(normalized)
    sentinel = object()
    try:
        value = guarded_getattr(obj, written, sentinel)
    except AttributeError:
        value = sentinel
    if refused:
        assert value is sentinel, (obj, written)
        try:
            guarded_setattr(_Target(), written, 1)
        except AttributeError:
            pass
        else:
            assert not is_dunder(normalized) or normalized in STORE_DUNDERS


_FIELD = st.sampled_from(['', '0', '1', 'name', '0[0]', 'name[k]', '0.real', 'name.imag'])
_SPEC = st.sampled_from(['', '>5', '<3', '^7', '.2f', 'x', ',', '{2}', '>{2}'])
_CONV = st.sampled_from(['', '!r', '!s', '!a'])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.text(alphabet='ab {}', max_size=3), _FIELD, _CONV, _SPEC), max_size=4))
def test_safe_format_agrees_with_str_format(parts):
    text = ''.join(f'{literal}{{{field}{conversion}{":" + spec if spec else ""}}}' for literal, field, conversion, spec in parts)
    args = (7, 2.5, 3)
    kwargs = {'name': 4, 'k': 0}
    try:
        expected = ('ok', str.format(text, *args, **kwargs))
    except Exception as error:
        expected = ('error', type(error))
    try:
        got = ('ok', format_attribute(text, 'format')(*args, **kwargs))
    except Exception as error:
        got = ('error', type(error))
    assert got == expected, text
