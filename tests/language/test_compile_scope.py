"""What `compile_script` reads from a script's own scope (outside every function and class body):
the `return`, `yield` and `nonlocal` it refuses there as Python does, the names it declares global,
whether the script is async and whether it imports asyncio.

The refusal is looked for only when the validator met one of them outside every function and class
body; the rest is read in one walk after the rewrite. Both must find what one walk before the rewrite
found: the first refused in the same order, the same flags.
"""

from __future__ import annotations

import builtins
import sys

import pytest

from corral.language import compile_script, compile_unguarded

MISPLACED = [
    ('return 1', ("'return' outside function", 1, 1, 'return 1', 1, 9)),
    ('x = 1\nreturn x\nreturn 2', ("'return' outside function", 3, 1, 'return 2', 3, 9)),
    ('x = [(yield) for i in ()]', ("'yield' outside function", 1, 7, 'x = [(yield) for i in ()]', 1, 12)),
    ('def f(a=(yield)): pass', ("'yield' outside function", 1, 10, 'def f(a=(yield)): pass', 1, 15)),
    ('f = lambda a=(yield 1): 0', ("'yield' outside function", 1, 15, 'f = lambda a=(yield 1): 0', 1, 22)),
    ('class C((yield)): pass', ("'yield' outside function", 1, 10, 'class C((yield)): pass', 1, 15)),
    ('@(yield)\nclass C: pass', ("'yield' outside function", 1, 3, '@(yield)', 1, 8)),
    # the rewrite evaluates the value first (`__corral_setattr__(v, x, '_y')`); the refusal is the one before it
    ('(yield 1)._y = (yield 2)', ("'yield' outside function", 1, 17, '(yield 1)._y = (yield 2)', 1, 24)),
    ('if 1:\n    nonlocal x', ('nonlocal declaration not allowed at module level', 2, 5, '    nonlocal x', 2, 15)),
    ('x = 1\nfor i in ():\n    yield from g', ("'yield' outside function", 3, 5, '    yield from g', 3, 17)),
    # annotations run when the function is defined, in the script's scope: the script was a generator that ran nothing
    ('def f(a: (yield)): pass', ("'yield' outside function", 1, 11, 'def f(a: (yield)): pass', 1, 16)),
    ('def f() -> (yield): pass', ("'yield' outside function", 1, 13, 'def f() -> (yield): pass', 1, 18)),
    ('async def f(*a: (yield from g)): pass', ("'yield' outside function", 1, 18, 'async def f(*a: (yield from g)): pass', 1, 30)),
]


@pytest.mark.parametrize('compile_', [compile_script, compile_unguarded])
@pytest.mark.parametrize(('code', 'expected'), MISPLACED)
def test_a_return_yield_or_nonlocal_of_the_script_s_own_scope_is_refused_as_python_does(compile_, code, expected):
    with pytest.raises(SyntaxError) as error:
        compile_(code, 'main.py')
    e = error.value
    assert (e.msg, e.lineno, e.offset, e.text, e.end_lineno, e.end_offset) == expected
    assert e.filename == 'main.py'


@pytest.mark.parametrize('code', ['def f():\n    return 1\nf()', 'def g():\n    def f(a: (yield)): pass', 'class C:\n    def m(self):\n        yield 1'])
def test_what_a_function_body_or_an_annotation_holds_is_not_refused(code):
    assert compile_script(code, 'main.py').code.co_name == '<module>'


@pytest.mark.parametrize(
    ('code', 'is_async', 'imports_asyncio'),
    [
        ('x = 1', False, False),
        ('await g()', True, False),
        ('run(main())', True, False),
        ('[run(i) for i in ()]', True, False),  # left as written in a comprehension: async all the same
        ('def f(a=run(1)): pass', True, False),
        ('def f(a: (await g())) -> int: pass', True, False),  # was refused: 'await' outside async function
        ('import asyncio.tasks as t', False, True),
        ('from asyncio import sleep', False, True),
    ],
)
def test_whether_a_script_is_async_and_imports_asyncio(code, is_async, imports_asyncio):
    script = compile_script(code, 'main.py')
    assert (script.is_async, script.imports_asyncio) == (is_async, imports_asyncio)


def test_a_name_a_default_binds_is_the_script_s_global():
    namespace = {'__builtins__': builtins}
    assert compile_script('def f(a=(y := 1)): pass\nx, = [2]', 'main.py').start(namespace) is None
    assert (namespace['y'], namespace['x']) == (1, 2)


def test_a_name_an_annotation_binds_is_the_script_s_global():
    namespace = {'__builtins__': builtins}
    assert compile_script('def f(a: (y := int)) -> (z := str): pass', 'main.py').start(namespace) is None
    assert (namespace['y'], namespace['z']) == (int, str)


_GENERIC = pytest.mark.skipif(sys.version_info < (3, 12), reason='type parameters: 3.12')


@pytest.mark.parametrize(
    ('code', 'message'),
    [
        ('from __future__ import annotations\ndef f(a: (yield)): pass', None),  # None: CPython's own for the script
        pytest.param('\ndef f[T](a: (yield)): pass', 'yield expression cannot be used within the definition of a generic', marks=_GENERIC),
    ],
)
def test_annotations_kept_as_strings_or_of_a_generic_are_not_the_script_s_scope(code, message):
    if message is None:
        with pytest.raises(SyntaxError) as python_s:
            compile(code, 'main.py', 'exec')
        message = python_s.value.msg
    with pytest.raises(SyntaxError) as error:
        compile_script(code, 'main.py')
    assert (error.value.msg, error.value.lineno) == (message, 2)
