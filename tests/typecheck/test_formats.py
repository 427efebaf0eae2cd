"""`format_diagnostics`: a type check's errors in the formats of ruff's and ty's family, made from
ty's full text (with ty's own one-line messages where ty's concise text is given); what names no
place keeps its headline, and an unknown format is refused."""

from __future__ import annotations

import json

import pytest

import corral
from corral.typecheck import DIAGNOSTIC_FORMATS, diagnostic_records

FULL = (
    'error[invalid-assignment]: Object of type `Literal["a"]` is not assignable to `int`\n'
    ' --> main.py:1:10\n'
    '  |\n'
    '1 | x: int = "a"\n'
    '  |    ---   ^^^ Incompatible value of type `Literal["a"]`\n'
    '  |    |\n'
    '  |    Declared type\n'
    '\n'
    'warning[unused-ignore-comment]: Unused blanket `type: ignore` directive\n'
    ' --> main.py:2:3\n'
    '  |\n'
    '2 | y = 1  # type: ignore\n'
    '  |   ^\n'
    '\n'
    'error[invalid-syntax]: Unexpected end of file'
)


def test_records_of_ty_text():
    assert [(r.severity, r.rule, r.path, r.line, r.column) for r in diagnostic_records(FULL)] == [
        ('error', 'invalid-assignment', 'main.py', 1, 10),
        ('warning', 'unused-ignore-comment', 'main.py', 2, 3),
        ('error', 'invalid-syntax', '', 0, 0),
    ]


def test_each_format():
    assert corral.format_diagnostics(FULL, 'concise') == (
        'main.py:1:10: error[invalid-assignment] Object of type `Literal["a"]` is not assignable to `int`\n'
        'main.py:2:3: warning[unused-ignore-comment] Unused blanket `type: ignore` directive\n'
        ':0:0: error[invalid-syntax] Unexpected end of file\n'
    )
    assert corral.format_diagnostics(FULL, 'github').splitlines()[1] == (
        '::warning title=ty (unused-ignore-comment),file=main.py,line=2,col=3::main.py:2:3: unused-ignore-comment: '
        'Unused blanket `type: ignore` directive'
    )
    assert json.loads(corral.format_diagnostics(FULL, 'rdjson'))['severity'] == 'ERROR'
    assert [d['severity'] for d in json.loads(corral.format_diagnostics(FULL, 'gitlab'))] == ['major', 'minor', 'major']
    assert corral.format_diagnostics(FULL, 'full') == FULL + '\n\n'
    for fmt in DIAGNOSTIC_FORMATS:
        assert corral.format_diagnostics(FULL, fmt).endswith('\n')


def test_an_unknown_format_is_refused():
    with pytest.raises(ValueError) as info:
        corral.format_diagnostics(FULL, 'xml')
    assert str(info.value) == (
        "unknown type check format 'xml', expected one of: full, concise, azure, json, jsonlines, rdjson, pylint, gitlab, github"
    )


OPERATOR = (
    'error[unsupported-operator]: Unsupported `+` operation\n'
    ' --> main.py:2:1\n'
    '  |\n'
    '2 | "hello" + 1\n'
    '  | -------^^^-\n'
    '  | |         |\n'
    '  | |         Has type `Literal[1]`\n'
    '  | Has type `Literal["hello"]`\n'
    '\n'
    'error[unresolved-reference]: Name `zz` used when not defined\n'
    ' --> main.py:3:1\n'
    '  |\n'
    '3 | zz\n'
    '  | ^^'
)
OPERATOR_CONCISE = (
    'main.py:2:1: error[unsupported-operator] Operator `+` is not supported between objects of type `Literal["hello"]` and `Literal[1]`\n'
)


def test_ty_concise_messages_replace_the_headlines_they_match():
    assert corral.format_diagnostics(OPERATOR, 'concise', concise=OPERATOR_CONCISE) == (
        OPERATOR_CONCISE + 'main.py:3:1: error[unresolved-reference] Name `zz` used when not defined\n'
    )
    assert corral.format_diagnostics(OPERATOR, 'pylint', concise=OPERATOR_CONCISE) == (
        'main.py:2: [unsupported-operator] Operator `+` is not supported between objects of type `Literal["hello"]` and `Literal[1]`\n'
        'main.py:3: [unresolved-reference] Name `zz` used when not defined\n'
    )
    # a line at another place, of another rule, or no diagnostic at all changes nothing
    for other in ('main.py:1:1: error[unsupported-operator] x\n', 'main.py:2:1: error[invalid-assignment] x\n', 'Found 2 diagnostics\n'):
        assert corral.format_diagnostics(OPERATOR, 'pylint', concise=other) == corral.format_diagnostics(OPERATOR, 'pylint')
    assert corral.format_diagnostics(OPERATOR, 'full', concise=OPERATOR_CONCISE) == OPERATOR + '\n\n'


@pytest.mark.slow
async def test_a_sessions_check_gives_tys_concise_text_when_asked(pool):
    async with pool.checkout(type_check=True) as session:
        await session.feed_run('a = "hello"\ndef f(x: str) -> int:\n    return 1')
        with pytest.raises(corral.SandboxTypingError) as info:
            await session.check('b = 2\na + 1\nf(b)', concise=True)
        assert info.value.concise == (  # numbered in the new code, the earlier feed's lines left out
            'main.py:2:1: error[unsupported-operator] Operator `+` is not supported between objects of type `Literal["hello"]` and `Literal[1]`\n'
            'main.py:3:3: error[invalid-argument-type] Argument to function `f` is incorrect: Expected `str`, found `Literal[2]`\n'
        )
        assert corral.format_diagnostics(info.value.display(), 'concise', concise=info.value.concise) == info.value.concise
        with pytest.raises(corral.SandboxTypingError) as info:
            await session.check('a + 1')
        assert info.value.concise is None
        await session.check('a + "!"', concise=True)  # a clean check runs ty once


@pytest.mark.slow
async def test_a_sessions_type_error_reformatted(pool):
    async with pool.checkout(type_check=True) as session:
        with pytest.raises(corral.SandboxTypingError) as info:
            await session.feed_run('a = 1\nb: str = a')
    assert corral.format_diagnostics(info.value.display(), 'pylint') == (
        'main.py:2: [invalid-assignment] Object of type `Literal[1]` is not assignable to `str`\n'
    )
