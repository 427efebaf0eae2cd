"""The red-team suite: attack scripts run end to end through a real pool, each must be refused.

Each attack (see `attacks.py` for the scripts and where each idea comes from) must fail with its
exact error text, return no value, and never create its marker file (the payload's proof of
escape). The suite relies on the language layer alone; the OS lockdown is a separate layer.
"""

from __future__ import annotations

import pytest

import corral

from .attacks import ATTACKS
from .helpers import last_line, marker_path, refusal

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
    assert last_line(error) == expected, f'{attack.id} ({attack.source})'
    expected_type = corral.SandboxSyntaxError if attack.syntax else corral.SandboxRuntimeError
    assert type(error) is expected_type
    if isinstance(error, corral.SandboxRuntimeError):
        assert f'{error.exc_type}: {error.message}' == expected
    assert not marker.exists()


async def test_syntax_refusal_points_at_the_name(pool):
    error = await refusal(pool, 'x = 1\nvalue = ().__class__.__bases__\n')
    assert error.display() == (
        '  File "main.py", line 2\n'
        '    value = ().__class__.__bases__\n'
        '               ^^^^^^^^^\n'
        "SyntaxError: attribute '__class__' cannot be read in the sandbox: names like __this__ are refused except "
        'a short list; use type(x) instead'
    )


async def test_runtime_refusal_shows_the_script_line_only(pool):
    error = await refusal(pool, "name = '__cl' + 'ass__'\ngetattr((), name)\n")
    assert error.display() == (
        'Traceback (most recent call last):\n'
        '  File "main.py", line 2, in <module>\n'
        '    getattr((), name)\n'
        "AttributeError: attribute '__class__' cannot be read in the sandbox: names like __this__ are refused "
        'except a short list; use type(x) instead'
    )


async def test_refused_names_read_as_missing_with_a_default(pool):
    from .helpers import run

    code = "(getattr((), '__class__', 'default'), hasattr((), '__class__'), hasattr(print, '__self__'), hasattr([], 'append'))"
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
