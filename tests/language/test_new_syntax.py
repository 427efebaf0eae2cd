"""The syntax of 3.12 and 3.13 runs in the sandbox, under the same rules as the rest.

3.12 added type parameters (`def f[T](x: T)`, `class Box[T]`), the `type` statement and f-strings
that nest any quotes and hold backslashes (PEP 701); 3.13 added defaults to type parameters. A
type parameter's bound and default are expressions that run when typing reads them (a generic's
subscript uses the defaults), so the checks and guards cover them as any other expression.
"""

from __future__ import annotations

import sys

import pytest

import corral

pytestmark = pytest.mark.asyncio(loop_scope='module')

needs_312 = pytest.mark.skipif(sys.version_info < (3, 12), reason='type parameters, the type statement and PEP 701 f-strings are Python 3.12 syntax: run the tests on 3.12 or later')
needs_313 = pytest.mark.skipif(sys.version_info < (3, 13), reason='defaults of type parameters are Python 3.13 syntax: run the tests on 3.13 or later')

GENERICS = '''
def first[T](items: list[T]) -> T:
    return items[0]

class Box[T]:
    def __init__(self, item: T) -> None:
        self.item = item

type Pair = tuple[int, int]
type Table[K] = dict[K, list[int]]

def pair(a: int, b: int) -> Pair:
    return (a, b)

names = ['ann', 'bob']
rows = {'n': 2}
[first([3, 4]), Box('x').item, pair(1, 2), Pair.__name__, f"{'-'.join(names)}", f"{"nested " + f"{rows["n"]}"}",
 f"{'\\n'.join(names)}", f"{
    len(names)  # a comment inside the braces
}"]
'''


@needs_312
async def test_type_parameters_the_type_statement_and_new_f_strings_run(pool):
    async with pool.checkout() as session:
        assert await session.feed_run(GENERICS) == [3, 'x', (1, 2), 'Pair', 'ann-bob', 'nested 2', 'ann\nbob', '2']


@needs_313
async def test_type_parameter_defaults_run(pool):
    code = (
        'import typing\nclass Box[T, U = int]:\n    pass\ndef same[T = str](x: T) -> T:\n    return x\n'
        '[[arg.__name__ for arg in typing.get_args(Box[str])], same(5)]'
    )
    async with pool.checkout() as session:
        assert await session.feed_run(code) == [['str', 'int'], 5]


REFUSALS = [
    pytest.param('def f[T: ().__globals__]():\n    pass', 'def f[T: ().__globals__]():', id='function-bound', marks=needs_312),
    pytest.param('class C[T: print.__self__]:\n    pass', 'class C[T: print.__self__]:', id='class-bound', marks=needs_312),
    pytest.param('type X[T: ().__globals__] = list[T]', 'type X[T: ().__globals__] = list[T]', id='alias-bound', marks=needs_312),
    pytest.param('type X = print.__self__', 'type X = print.__self__', id='alias-value', marks=needs_312),
    pytest.param('class C[T = print.__self__]:\n    pass', 'class C[T = print.__self__]:', id='class-default', marks=needs_313),
]


@pytest.mark.parametrize(('code', 'line'), REFUSALS)
async def test_a_refused_name_in_type_parameters_is_refused_before_anything_runs(pool, code, line):
    async with pool.checkout() as session:
        with pytest.raises(corral.SandboxSyntaxError) as info:
            await session.feed_run(code)
    name = '__globals__' if '__globals__' in line else '__self__'
    internals = 'function' if name == '__globals__' else 'method'
    start = line.index(f'.{name}') + 1
    assert info.value.display() == (
        f'  File "main.py", line 1\n    {line}\n    {" " * start}{"^" * len(name)}\n'
        f"SyntaxError: attribute '{name}' cannot be read in the sandbox: names like __this__ are refused except a short "
        f'list; {internals} internals are not available in the sandbox'
    )


@pytest.mark.parametrize(
    ('code', 'line', 'name'),
    [
        pytest.param('def f[__class__]():\n    pass', 'def f[__class__]():', '__class__', id='function', marks=needs_312),
        pytest.param('type X[__builtins__] = int', 'type X[__builtins__] = int', '__builtins__', id='alias', marks=needs_312),
    ],
)
async def test_a_type_parameter_named_like_a_dunder_is_refused(pool, code, line, name):
    async with pool.checkout() as session:
        with pytest.raises(corral.SandboxSyntaxError) as info:
            await session.feed_run(code)
    hint = 'use type(self) instead' if name == '__class__' else 'call builtins by their name'
    start = line.index(name)
    assert info.value.display() == (
        f'  File "main.py", line 1\n    {line}\n    {" " * start}{"^" * len(name)}\n'
        f"SyntaxError: type parameter name '{name}' is not allowed in the sandbox: names like __this__ are refused; {hint}"
    )


@needs_313
async def test_a_private_name_in_a_default_goes_through_the_guard_when_a_subscript_runs_it(pool):
    async with pool.checkout() as session:
        with pytest.raises(corral.SandboxRuntimeError) as info:
            await session.feed_run('import asyncio\nclass C[T, U = asyncio._x]:\n    pass\nC[int]')
    assert info.value.display().splitlines()[-1] == (
        "AttributeError: attribute '_x' is private: the sandbox allows names starting with '_' only on objects of "
        'classes the script defines (module objects are not); use the public API'
    )
