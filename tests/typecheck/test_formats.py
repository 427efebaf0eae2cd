"""`format_diagnostics`: a type check's errors in the formats of ruff's and ty's family, made from
ty's full text; what names no place keeps its headline, and an unknown format is refused."""

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


@pytest.mark.slow
async def test_a_sessions_type_error_reformatted(pool):
    async with pool.checkout(type_check=True) as session:
        with pytest.raises(corral.SandboxTypingError) as info:
            await session.feed_run('a = 1\nb: str = a')
    assert corral.format_diagnostics(info.value.display(), 'pylint') == (
        'main.py:2: [invalid-assignment] Object of type `Literal[1]` is not assignable to `str`\n'
    )
