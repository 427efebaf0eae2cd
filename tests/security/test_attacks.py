"""The red-team suite: attack scripts run end to end through a real pool, each must be refused.

Each attack (see `attacks.py` for the scripts and where each idea comes from) must fail with its
exact error text, return no value, and never create its marker file (the payload's proof of
escape). The suite relies on the language layer alone; the OS lockdown is a separate layer.
"""

from __future__ import annotations

import sys

import pytest

import corral

from .attacks import ATTACKS
from .helpers import last_line, marker_path, refusal, run

pytestmark = pytest.mark.asyncio(loop_scope='module')

HOST_CALLS: list[tuple] = []


def get_data(*args, **kwargs):
    HOST_CALLS.append((args, kwargs))
    return {'rows': [1, 2, 3]}


async def test_the_suite_is_large_enough():
    assert len(ATTACKS) >= 80
    assert len({attack.id for attack in ATTACKS}) == len(ATTACKS)


@pytest.mark.parametrize('attack', [pytest.param(a, id=a.id) for a in ATTACKS])
async def test_attack_is_refused(pool, tmp_path, attack):
    marker = marker_path(tmp_path)
    code = attack.code.replace('MARKER', str(marker))
    error = await refusal(pool, code, {'get_data': get_data} if attack.host else None)
    expected = attack.expected.replace('MARKER', str(marker))
    assert last_line(error, expected.count('\n') + 1) == expected, f'{attack.id} ({attack.source})'
    expected_type = corral.SandboxSyntaxError if attack.syntax else corral.SandboxRuntimeError
    assert type(error) is expected_type
    if isinstance(error, corral.SandboxRuntimeError):
        assert f'{error.exc_type}: {error.message}' == expected.partition('\n')[0]  # a note is no part of the message
    assert not marker.exists()


async def test_syntax_refusal_points_at_the_name(pool):
    error = await refusal(pool, 'x = 1\nvalue = ().__class__.__bases__\n')
    assert error.display() == (
        '  File "main.py", line 2\n'
        '    value = ().__class__.__bases__\n'
        '                         ^^^^^^^^^\n'
        "SyntaxError: attribute '__bases__' cannot be read in the sandbox: names like __this__ are refused except "
        'a short list; use type(x).mro()'
    )


async def test_runtime_refusal_shows_the_script_line_only(pool):
    error = await refusal(pool, "name = '__glo' + 'bals__'\ngetattr(len, name)\n")
    assert error.display() == (
        'Traceback (most recent call last):\n'
        '  File "main.py", line 2, in <module>\n'
        '    getattr(len, name)\n'
        + ('    ~~~~~~~^^^^^^^^^^^\n' if sys.version_info >= (3, 13) else '')  # 3.13 marks the call even where it is the whole line
        + "AttributeError: attribute '__globals__' cannot be read in the sandbox: names like __this__ are refused "
        'except a short list; function internals are not available in the sandbox'
    )


async def test_refused_names_read_as_missing_with_a_default(pool):
    from .helpers import run

    code = "(getattr((), '__bases__', 'default'), hasattr((), '__bases__'), hasattr(print, '__self__'), hasattr([], 'append'))"
    assert await run(pool, code) == ('default', False, False, True)


async def test_facades_hold_no_modules_and_no_private_names(pool):
    from .helpers import run

    code = '''
import asyncio, json, random, typing, collections, functools, dataclasses, copy, string, uuid, operator
mods = [asyncio, json, random, typing, collections, functools, dataclasses, copy, string, uuid, operator]
bad = []
for m in mods:
    for name in dir(m):
        if name.startswith('_') and name not in ('__doc__', '__name__', '__all__', '__loader__', '__package__', '__spec__'):
            bad.append((m.__name__, name))
        elif not name.startswith('_') and type(getattr(m, name)) is type(json) and f'{m.__name__}.{name}' != 'collections.abc':
            bad.append((m.__name__, name))
bad
'''
    assert await run(pool, code) == []


async def test_host_function_is_not_called_by_the_attacks():
    # the host-boundary attacks above never reached get_data (they were refused first)
    assert HOST_CALLS == []


async def test_a_pattern_the_language_layer_cannot_compile_leaves_the_session_running(pool):
    """A mapping key reading a private attribute was rewritten into a call, which compile()
    refused with a ValueError that ended the worker (found by a red-team pass)."""
    code = "class P:\n    def __init__(self):\n        self._k = 'a'\np = P()\nmatch {'a': 1}:\n    case {p._k: v}:\n        r = v\n"
    async with pool.checkout() as session:
        with pytest.raises(corral.SandboxSyntaxError) as info:
            await session.feed_run(code)
        assert last_line(info.value) == (
            "SyntaxError: a value pattern cannot read private attribute '_k' in the sandbox; "
            'bind it to a variable and compare in a guard: case v if v == ...'
        )
        assert await session.feed_run('1 + 1') == 2


async def test_a_class_body_cannot_answer_the_guards_names(pool):
    """A metaclass's __prepare__ gave a class body a `__corral_stop__` that did nothing: the
    script caught the stop and went on (found by a red-team pass)."""
    code = (
        'class Meta:\n'
        '    def __getattr__(self, name):\n'
        "        return lambda *a, **k: {'__corral' + '_stop__': lambda *a: None}\n"
        '    def __call__(self, name, bases, ns):\n'
        '        return ns\n'
        'caught = []\n'
        'class C(metaclass=Meta()):\n'
        '    try:\n'
        '        while True:\n'
        '            pass\n'
        '    except BaseException:\n'
        '        caught.append(1)\n'
        'caught\n'
    )
    async with pool.checkout(limits=corral.Limits(wall_time=0.5, grace=5)) as session:
        with pytest.raises(corral.SandboxLimitError) as info:
            await session.feed_run(code)
    assert last_line(info.value) == 'TimeoutError: the script ran past the wall_time limit of 0.5 seconds'


async def test_class_bodies_declare_every_guard_global():
    from corral.language.guards import make_guards
    from corral.language.rewrite import GUARD_NAMES

    assert set(GUARD_NAMES) == set(make_guards([])) - {'__build_class__'}


async def test_class_patterns_read_match_args_where_cpython_does(pool):
    """A class with no __match_args__ takes no positional sub-pattern; a metaclass's counts."""
    no_args = 'class P:\n    pass\nmatch P():\n    case P(x):\n        pass\n'
    error = await refusal(pool, no_args)
    assert last_line(error) == 'TypeError: P() accepts 0 positional sub-patterns (1 given)'
    from_metaclass = (
        "class M(type):\n    __match_args__ = ('a',)\nclass C(metaclass=M):\n    def __init__(self):\n"
        '        self.a = 5\nmatch C():\n    case C(x):\n        found = x\nfound\n'
    )
    assert await run(pool, from_metaclass) == 5


@pytest.mark.parametrize(
    'code',
    [
        # the stop becomes the context of an exception raised in a finally block ...
        "try:\n    try:\n        while True:\n            pass\n    finally:\n        raise ValueError('x')\nexcept ValueError:\n    pass\n'swallowed'\n",
        # ... or in an __exit__
        "class CM:\n    def __enter__(self):\n        return self\n    def __exit__(self, *exc):\n        raise ValueError('x')\n"
        "try:\n    with CM():\n        while True:\n            pass\nexcept ValueError:\n    pass\n'swallowed'\n",
    ],
    ids=['finally', 'exit'],
)
async def test_a_stop_replaced_by_another_exception_is_not_handled_away(pool, code):
    """`except ValueError` caught the exception that replaced the stop, and the script ran on
    until the host's kill (found by a red-team pass)."""
    async with pool.checkout(limits=corral.Limits(wall_time=0.5, grace=5)) as session:
        with pytest.raises(corral.SandboxLimitError) as info:
            await session.feed_run(code)
    assert last_line(info.value) == 'TimeoutError: the script ran past the wall_time limit of 0.5 seconds'


async def test_an_exception_raised_while_handling_another_keeps_its_context(pool):
    code = "try:\n    try:\n        1 / 0\n    finally:\n        raise ValueError('x')\nexcept ValueError as e:\n    found = type(e.__context__).__name__\nfound\n"
    assert await run(pool, code) == 'ZeroDivisionError'
