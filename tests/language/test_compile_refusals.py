"""What `compile_script` refuses, and what it routes through a guard, wherever a script puts it.

The validator and the rewrite return at once for a name that does not start with `_` (an attribute
that is neither an internal name nor a filtered one): these scripts hide the names they check
behind identifiers the parser normalizes (NFKC: `ᶠ_back` is `f_back`, `ｆormat` is `format`) and in
every position an expression may stand, and must meet the same refusal or guard as when written
plainly.
"""

from __future__ import annotations

import types

import pytest

from corral.language import compile_script

INTERNALS = "attribute '{}' is not available in the sandbox: it reaches interpreter internals (frames, code, tracebacks, generators or the event loop)"

REFUSED = [
    ('x.ᶠ_back', INTERNALS.format('f_back'), 1, 1),
    ('x.ｇi_frame', INTERNALS.format('gi_frame'), 1, 1),
    ('x.ｇｅｔ_loop()', INTERNALS.format('get_loop'), 1, 1),
    ('match x:\n    case C(ｇi_frame=y): pass', 'class pattern keyword: ' + INTERNALS.format('gi_frame'), 2, 10),
    ('match x:\n    case C(ｆormat=y): pass', "a class pattern cannot read 'format' in the sandbox; match without it and read .format in the case body", 2, 10),
    ("f'{x.ᶠ_back}'", INTERNALS.format('f_back'), 1, 4),
    ("f'{x:{x.gi_frame}}'", INTERNALS.format('gi_frame'), 1, 9),
    ('[(y := x.ｆ_globals) for _ in ()]', INTERNALS.format('f_globals'), 1, 8),
    ('f = lambda a=x.tb_frame: 0', INTERNALS.format('tb_frame'), 1, 16),
    ('@x.cr_frame\ndef f(): pass', INTERNALS.format('cr_frame'), 1, 4),
    ('def f(a: x.ag_frame): pass', INTERNALS.format('ag_frame'), 1, 12),
    ('def f() -> x.f_back: pass', INTERNALS.format('f_back'), 1, 14),
    ('class C(x.f_back): pass', INTERNALS.format('f_back'), 1, 11),
    ('class C(metaclass=x.f_back): pass', INTERNALS.format('f_back'), 1, 21),
    ('match x:\n    case 1 if x.gi_frame: pass', INTERNALS.format('gi_frame'), 2, 17),
    ('x.co_code = 1', INTERNALS.format('co_code'), 1, 3),
    ('del x.f_trace', INTERNALS.format('f_trace'), 1, 7),
]


@pytest.mark.parametrize(('code', 'message', 'lineno', 'offset'), REFUSED)
def test_an_internal_name_is_refused_however_written_and_wherever_it_stands(code, message, lineno, offset):
    with pytest.raises(SyntaxError) as error:
        compile_script(code, 'main.py')
    assert (error.value.msg, error.value.lineno, error.value.offset) == (message, lineno, offset)


def _names(code: types.CodeType) -> set[str]:
    return {*code.co_names, *(name for const in code.co_consts if isinstance(const, types.CodeType) for name in _names(const))}


@pytest.mark.parametrize(
    ('code', 'guard', 'attribute'),
    [
        ("x.ｆormat('{0.__class__}', 1)", '__corral_format__', 'format'),
        ('x.ｆormat_map', '__corral_format__', 'format_map'),
        ('def f(x):\n    return x.ｎow()', '__corral_clock__', 'now'),
        ('[x.ｔoday for x in ()]', '__corral_clock__', 'today'),
        ('x._＿y', '__corral_getattr__', '__y'),
        ('x._＿y = 2', '__corral_setattr__', '__y'),
    ],
)
def test_a_filtered_attribute_is_routed_through_its_guard_however_written(code, guard, attribute):
    names = _names(compile_script(code, 'main.py').code)
    assert guard in names
    assert attribute not in names
