"""The language layer's tree walk (`corral.language.walk`) against the standard library's.

The validator and the rewriter decide what a script may do and where the guards go; their faster
walk must visit what `ast.NodeVisitor`/`ast.NodeTransformer` visit and leave the same tree. Every
script of the conformance cases, the refusals and the red-team attacks is walked both ways.
"""

from __future__ import annotations

import ast
import copy

import pytest
from security.attacks import ATTACKS

from corral.language import rewrite as rewrite_module
from corral.language import validate as validate_module
from corral.language.walk import NodeVisitor, child_fields

from .cases_stdlib import CASES as STDLIB_CASES
from .cases_syntax import CASES as SYNTAX_CASES
from .test_refusals import REFUSALS

SCRIPTS = (
    [pytest.param(c.code, id=f'case-{c.id}') for c in [*SYNTAX_CASES, *STDLIB_CASES]]
    + [pytest.param(code, id=f'refusal-{name}') for name, code, _ in REFUSALS]
    + [pytest.param(a.code, id=f'attack-{a.id}') for a in ATTACKS]
)


class _StandardValidator(validate_module._Validator):
    visit = ast.NodeVisitor.visit
    generic_visit = ast.NodeVisitor.generic_visit
    visit_Constant = ast.NodeVisitor.visit_Constant


class _StandardRewriter(rewrite_module._Rewriter):
    visit = ast.NodeTransformer.visit
    generic_visit = ast.NodeTransformer.generic_visit
    visit_Constant = ast.NodeTransformer.visit_Constant


def _parse(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except SyntaxError:
        return None


def _validated(code: str) -> tuple[ast.Module | None, str | None]:
    tree = _parse(code)
    if tree is None:
        return None, 'unparseable'
    try:
        validate_module.validate(tree, code, 'main.py')
    except SyntaxError as error:
        return tree, f'{error.msg} at {error.lineno}:{error.offset}-{error.end_lineno}:{error.end_offset}'
    return tree, None


@pytest.mark.parametrize('code', SCRIPTS)
def test_the_fast_walk_validates_and_rewrites_as_the_standard_one(code, monkeypatch):
    fast_tree, fast_refusal = _validated(code)
    monkeypatch.setattr(validate_module, '_Validator', _StandardValidator)
    standard_tree, standard_refusal = _validated(code)
    assert fast_refusal == standard_refusal
    if fast_refusal is not None:
        return
    specs = len(rewrite_module.MATCH_SPECS)  # class patterns get numbers in the order they are met
    fast = ast.dump(rewrite_module.rewrite(fast_tree), include_attributes=True)
    del rewrite_module.MATCH_SPECS[specs:]
    monkeypatch.setattr(rewrite_module, '_Rewriter', _StandardRewriter)
    # the rewrite locates every node it makes: the standard library has none to fix
    standard = ast.dump(ast.fix_missing_locations(rewrite_module.rewrite(standard_tree)), include_attributes=True)
    assert fast == standard


@pytest.mark.parametrize('code', SCRIPTS)
def test_child_fields_hold_the_standard_children_but_contexts_and_operators(code):
    tree = _parse(code)
    if tree is None:
        return
    leaves = (ast.expr_context, ast.boolop, ast.operator, ast.unaryop, ast.cmpop)
    for node in ast.walk(tree):
        children = []
        for field in child_fields(type(node)):
            value = getattr(node, field, None)
            children.extend(item for item in (value if isinstance(value, list) else [value]) if isinstance(item, ast.AST))
        assert children == [child for child in ast.iter_child_nodes(node) if not isinstance(child, leaves)]


def test_a_visitor_of_contexts_or_operators_is_refused():
    with pytest.raises(TypeError) as error:
        type('Counter', (NodeVisitor,), {'visit_Load': lambda self, node: None})
    assert str(error.value) == 'Counter.visit_Load: contexts and operators are not visited'
    with pytest.raises(TypeError) as error:
        type('Adder', (NodeVisitor,), {'visit_Add': lambda self, node: None})
    assert str(error.value) == 'Adder.visit_Add: contexts and operators are not visited'


#: The fields the walk leaves out, of every node class of 3.11 to 3.13: names, numbers, constants,
#: contexts and operators. A field a new Python adds, or whose declared type changes, fails here.
LEFT_OUT = {
    'AnnAssign': ('simple',), 'Assign': ('type_comment',), 'AsyncFor': ('type_comment',), 'AsyncFunctionDef': ('name', 'type_comment'),
    'AsyncWith': ('type_comment',), 'Attribute': ('attr', 'ctx'), 'AugAssign': ('op',), 'BinOp': ('op',), 'BoolOp': ('op',),
    'ClassDef': ('name',), 'Compare': ('ops',), 'Constant': ('value', 'kind'), 'ExceptHandler': ('name',), 'For': ('type_comment',),
    'FormattedValue': ('conversion',), 'FunctionDef': ('name', 'type_comment'), 'Global': ('names',), 'ImportFrom': ('module', 'level'),
    'List': ('ctx',), 'MatchAs': ('name',), 'MatchClass': ('kwd_attrs',), 'MatchMapping': ('rest',), 'MatchSingleton': ('value',),
    'MatchStar': ('name',), 'Name': ('id', 'ctx'), 'Nonlocal': ('names',), 'ParamSpec': ('name',), 'Starred': ('ctx',),
    'Subscript': ('ctx',), 'Tuple': ('ctx',), 'TypeIgnore': ('lineno', 'tag'), 'TypeVar': ('name',), 'TypeVarTuple': ('name',),
    'UnaryOp': ('op',), 'With': ('type_comment',), 'alias': ('name', 'asname'), 'arg': ('arg', 'type_comment'),
    'comprehension': ('is_async',), 'keyword': ('arg',),
}


def _node_classes(base: type = ast.AST) -> set[type]:
    return {kind for sub in base.__subclasses__() if sub.__module__ == 'ast' for kind in (sub, *_node_classes(sub))}


def test_the_walk_leaves_out_of_every_node_class_only_fields_that_hold_no_node():
    left_out = {kind.__name__: tuple(f for f in kind._fields if f not in child_fields(kind)) for kind in _node_classes() if kind._fields}
    assert {name: fields for name, fields in left_out.items() if fields} == {name: LEFT_OUT[name] for name in left_out if name in LEFT_OUT}
    for kind in _node_classes():  # 3.13 declares the fields' types
        for field, declared in getattr(kind, '_field_types', {}).items():
            if field not in child_fields(kind):
                assert declared in (str, int, object, str | None, int | None, list[str]) or 'ast.' in repr(declared) and any(
                    leaf.__name__ in repr(declared) for leaf in (ast.expr_context, ast.boolop, ast.operator, ast.unaryop, ast.cmpop)
                ), (kind.__name__, field, declared)
