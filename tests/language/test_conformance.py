"""The conformance suite: every construct and every module name the docs list, in the sandbox and in CPython.

Each case (see `cases_*.py`) is a small script with its exact expected value, exception or
output. It runs in a sandbox session and in plain CPython; both must give exactly what the case
says, so they agree wherever the sandbox allows the script. `test_every_documented_name_is_used`
checks that the cases use every name of every module the docs list.
"""

from __future__ import annotations

import ast

import pytest

from corral.language import catalog
from corral.language.modules import module_names

from . import cases_stdlib, cases_syntax
from .runner import Case, run_cpython, run_sandbox

CASES: list[Case] = [*cases_syntax.CASES, *cases_stdlib.CASES]


def test_case_ids_are_unique() -> None:
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


@pytest.mark.asyncio(loop_scope='module')
@pytest.mark.parametrize('c', [pytest.param(c, id=c.id) for c in CASES])
async def test_sandbox(pool, tmp_path, c: Case) -> None:
    (await run_sandbox(pool, c, tmp_path)).check(c)


@pytest.mark.parametrize('c', [pytest.param(c, id=c.id) for c in CASES if not c.sandbox_only])
def test_cpython(c: Case) -> None:
    run_cpython(c).check(c)


def used_names(code: str) -> set[tuple[str, str]]:
    """`(module, name)` pairs a script uses: `import m` then `m.name`, or `from m import name`."""
    tree = ast.parse(code)
    aliases: dict[str, str] = {}
    used: set[tuple[str, str]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    aliases[alias.name.partition('.')[0]] = alias.name.partition('.')[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                used.add((node.module, alias.name))
                if f'{node.module}.{alias.name}' in catalog.STDLIB_MODULES:
                    aliases[alias.asname or alias.name] = f'{node.module}.{alias.name}'
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            chain = []
            current: ast.expr = node
            while isinstance(current, ast.Attribute):
                chain.append(current.attr)
                current = current.value
            if isinstance(current, ast.Name) and current.id in aliases:
                module = aliases[current.id]
                for attr in reversed(chain):
                    used.add((module, attr))
                    if f'{module}.{attr}' not in catalog.STDLIB_MODULES:
                        break
                    module = f'{module}.{attr}'
    return used


def test_every_documented_name_is_used() -> None:
    used: set[tuple[str, str]] = set()
    for c in CASES:
        used |= used_names(c.code)
    missing = [f'{module}.{name}' for module in catalog.STDLIB_MODULES for name in module_names(module) if (module, name) not in used]
    assert missing == []
