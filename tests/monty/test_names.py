"""What the Monty door reads from a feed's text before it runs: the names and modules it needs."""

from __future__ import annotations

import pytest

from corral.monty.names import Script


@pytest.mark.parametrize(
    ('code', 'called', 'awaited', 'read'),
    [
        ('print(f(1))', ['f'], [], []),
        ('len(fetch(1)) + k(2)', ['fetch', 'k'], [], []),
        ('await f(1)', ['f'], ['f'], []),
        ('import asyncio\nawait asyncio.gather(f(1), *[g(i) for i in range(2)])', ['f', 'g'], ['f', 'g'], []),
        ('import asyncio\nx = f(1)\nawait asyncio.gather(x)', ['f'], ['f'], []),
        ('x = f(1)\nprint(x)', ['f'], [], []),
        ('y = LIMIT + 1\nh = helper\nh(y)', [], [], ['LIMIT', 'helper']),
        ('def g(a):\n    return a + OFFSET\ng(1)', [], [], ['OFFSET']),
        ('for i in range(3):\n    pass\n[j for j in range(i)]', [], [], []),
        ('x = (', [], [], []),
    ],
)
def test_free_names(code: str, called: list[str], awaited: list[str], read: list[str]) -> None:
    found_called, found_read = Script(code).free_names(set())
    assert (sorted(found_called), sorted(found_called.awaited), sorted(found_read)) == (called, awaited, read)


@pytest.mark.parametrize(
    ('code', 'eager'),
    [
        ('a = await f()\nb = await g(await f())', ['f', 'g']),
        ('a = await f()\nt = f()\nawait t', []),  # a call not awaited right there
        ('async def w():\n    return await f()\nimport asyncio\nawait asyncio.gather(w(), g())', []),  # other tasks may run
        ('await m.f()', []),
    ],
)
def test_eager_calls_are_awaited_right_there_with_no_other_task(code: str, eager: list[str]) -> None:
    assert sorted(Script(code).free_names(set())[0].eager) == eager


def test_names_an_earlier_feed_bound_are_not_free() -> None:
    assert Script('import os\nx = 1\ndef f(): pass\nclass C: pass\ntry:\n    pass\nexcept E as e:\n    pass').bound_names() == {'os', 'x', 'f', 'C', 'e'}
    called, read = Script('f(x)').free_names({'f', 'x'})
    assert (called, read) == (set(), set())


def test_imported_modules_are_those_the_sandbox_lacks() -> None:
    code = 'import zeta\nimport json\nfrom pkg.sub import x\nfrom . import y\nimport os.path\ndef f():\n    import alpha, zeta\n'
    assert Script(code).imported_modules() == ['zeta', 'pkg', 'alpha']  # in the order the code names them
    assert Script('import (').imported_modules() == []
    assert Script(code).module_imports() == ['zeta', 'pkg', 'alpha', 'zeta']  # once per import
    assert Script('import (').module_imports() == []


def test_named_modules_are_those_the_code_names() -> None:
    assert Script('x = b.f(a)\nprint(a, c)\nd.e').named_modules({'a', 'b', 'e'}) == ['b', 'a']
    assert Script('x = (').named_modules({'x'}) == []


def test_awaited_callees_are_named_as_called() -> None:
    code = 'import asyncio\nfrom tools import second\nawait asyncio.gather(tools.first(), second())\ntools.third()\nawait m.a.fourth(1)'
    assert Script(code).awaited_callees() == {'gather', 'first', 'second', 'fourth'}
    assert Script('x = (').awaited_callees() == set()
