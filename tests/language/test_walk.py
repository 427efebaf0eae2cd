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
from corral.language.walk import child_nodes, fix_missing_locations

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
    monkeypatch.setattr(rewrite_module, 'fix_missing_locations', ast.fix_missing_locations)
    standard = ast.dump(rewrite_module.rewrite(standard_tree), include_attributes=True)
    assert fast == standard


@pytest.mark.parametrize('code', SCRIPTS)
def test_child_nodes_are_the_standard_ones(code):
    tree = _parse(code)
    if tree is None:
        return
    for node in ast.walk(tree):
        assert list(child_nodes(node)) == list(ast.iter_child_nodes(node))


@pytest.mark.parametrize('code', SCRIPTS)
def test_missing_locations_are_fixed_as_the_standard_library_fixes_them(code):
    """Each node without a line or column takes its parent's, also where the parent's were filled
    in: every expression but the names loses its location here, as the rewrite's new nodes have none."""
    tree = _parse(code)
    if tree is None:
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.expr, ast.arg, ast.keyword)) and not isinstance(node, ast.Name):
            del node.lineno, node.col_offset
            node.end_lineno = node.end_col_offset = None
    standard = ast.dump(ast.fix_missing_locations(copy.deepcopy(tree)), include_attributes=True)
    assert ast.dump(fix_missing_locations(tree), include_attributes=True) == standard
