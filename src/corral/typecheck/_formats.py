"""A type check's diagnostics in the other formats of ruff's and ty's family.

`Session.check` and `TypeChecker.check` give ty's full text (`SandboxTypingError.display()`); a
caller that wants one line per diagnostic, or machine-readable records, reformats that text here:
each diagnostic's severity, rule, message, and the file, line and column it points at. The message
is ty's own one-line wording where the caller has ty's concise text of the check
(`SandboxTypingError.concise`), else the full text's headline.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

from . import _render

__all__ = ['DIAGNOSTIC_FORMATS', 'DiagnosticRecord', 'diagnostic_records', 'format_diagnostics']

#: The format names `format_diagnostics` takes, in the order ruff lists them.
DIAGNOSTIC_FORMATS = ('full', 'concise', 'azure', 'json', 'jsonlines', 'rdjson', 'pylint', 'gitlab', 'github')

_HEADER_RE = re.compile(r'^(error|warning|info|fatal)\[([^\]\s]+)\]: (.*)$')
_CONCISE_RE = re.compile(r'^(.+?):(\d+):(\d+): (?:error|warning|info|fatal)\[([^\]\s]+)\] (.*)$')
_BOLD, _RED, _YELLOW, _CYAN, _RESET = '\x1b[1m', '\x1b[31m', '\x1b[33m', '\x1b[36m', '\x1b[0m'


@dataclass(frozen=True)
class DiagnosticRecord:
    """One diagnostic: `severity` ('error', 'warning', 'info' or 'fatal'), `rule` (`invalid-assignment`),
    `message` (its headline), and where it points: `path` ('' when nowhere), 1-based `line` and
    `column` (0 when nowhere)."""

    severity: str
    rule: str
    message: str
    path: str
    line: int
    column: int


def diagnostic_records(text: str) -> list[DiagnosticRecord]:
    """The diagnostics of ty's full text `text`, in order (a headline ty did not print as
    `severity[rule]: message` is left out)."""
    records = []
    for diagnostic in _render.parse_output(text):
        match = _HEADER_RE.match(diagnostic.header)
        if match is None:
            continue
        primary = diagnostic.primary
        where = (primary.path, primary.line, primary.col) if primary is not None else ('', 0, 0)
        records.append(DiagnosticRecord(match.group(1), match.group(2), match.group(3), *where))
    return records


def format_diagnostics(text: str, fmt: str = 'full', *, color: bool = False, concise: str | None = None) -> str:
    """ty's full text `text` rendered as `fmt` (one of `DIAGNOSTIC_FORMATS`), ending in a newline.

    `concise`, `pylint`, `azure` and `github` give a line per diagnostic; `json`, `rdjson` and
    `gitlab` one JSON document, `jsonlines` a JSON object per line. `color` colours `full` (its
    headline) and `concise` with ANSI escapes. `concise`, ty's own concise text of the same check
    (`SandboxTypingError.concise`), gives each diagnostic it has (same rule, file, line and column)
    ty's one-line message (`Operator `+` is not supported between objects of type ...`) in place
    of the full text's headline (`Unsupported `+` operation`). Raises ValueError for an unknown
    format."""
    if fmt not in DIAGNOSTIC_FORMATS:
        raise ValueError(f'unknown type check format {fmt!r}, expected one of: {", ".join(DIAGNOSTIC_FORMATS)}')
    if fmt == 'full':
        text = text.rstrip('\n') + '\n\n'
        if color:
            head, sep, rest = text.partition('\n')
            match = _HEADER_RE.match(head)
            if match is not None:
                head = f'{_BOLD}{_colour(match.group(1))}{match.group(1)}[{match.group(2)}]{_RESET}{_BOLD}: {match.group(3)}{_RESET}'
            text = head + sep + rest
        return text
    records = diagnostic_records(text)
    if concise is not None:
        records = _with_messages(records, concise)
    if fmt == 'concise':
        return ''.join(_concise(r, color) + '\n' for r in records)
    if fmt == 'pylint':
        return ''.join(f'{r.path}:{r.line}: [{r.rule}] {r.message}\n' for r in records)
    if fmt == 'azure':
        return ''.join(
            f'##vso[task.logissue type={_level(r)};sourcepath={r.path};linenumber={r.line};columnnumber={r.column};code={r.rule};]{r.message}\n'
            for r in records
        )
    if fmt == 'github':
        return ''.join(
            f'::{_level(r)} title=ty ({r.rule}),file={r.path},line={r.line},col={r.column}::{r.path}:{r.line}:{r.column}: {r.rule}: {r.message}\n'
            for r in records
        )
    if fmt == 'json':
        return json.dumps([_json(r) for r in records], indent=2) + '\n'
    if fmt == 'jsonlines':
        return ''.join(json.dumps(_json(r)) + '\n' for r in records)
    if fmt == 'gitlab':
        return json.dumps([_gitlab(r) for r in records], indent=2) + '\n'
    return json.dumps(_rdjson(records), indent=2) + '\n'  # rdjson


def _with_messages(records: list[DiagnosticRecord], concise: str) -> list[DiagnosticRecord]:
    """`records`, each with the message of its line in ty's concise text `concise`, if any."""
    messages: dict[tuple[str, int, int, str], list[str]] = {}
    for line in concise.splitlines():
        match = _CONCISE_RE.match(line)
        if match is not None:
            path, row, column, rule, message = match.groups()
            messages.setdefault((path, int(row), int(column), rule), []).append(message)
    kept = []
    for r in records:
        found = messages.get((r.path, r.line, r.column, r.rule))
        kept.append(replace(r, message=found.pop(0)) if found else r)
    return kept


def _level(r: DiagnosticRecord) -> str:
    return 'warning' if r.severity in ('warning', 'info') else 'error'


def _colour(severity: str) -> str:
    return _YELLOW if severity in ('warning', 'info') else _RED


def _concise(r: DiagnosticRecord, color: bool) -> str:
    if not color:
        return f'{r.path}:{r.line}:{r.column}: {r.severity}[{r.rule}] {r.message}'
    colon = f'{_CYAN}:{_RESET}'
    return (
        f'{_BOLD}{r.path}{_RESET}{colon}{r.line}{colon}{r.column}{colon} '
        f'{_BOLD}{_colour(r.severity)}{r.severity}{_RESET}[{_BOLD}{r.rule}{_RESET}] {r.message}'
    )


def _json(r: DiagnosticRecord) -> dict[str, object]:
    return {
        'code': r.rule,
        'name': r.rule,
        'severity': r.severity,
        'message': r.message,
        'filename': r.path,
        'location': {'column': r.column, 'row': r.line},
    }


def _gitlab(r: DiagnosticRecord) -> dict[str, object]:
    return {
        'check_name': r.rule,
        'description': f'{r.rule}: {r.message}',
        'severity': 'minor' if r.severity in ('warning', 'info') else 'major',
        'location': {'path': r.path, 'positions': {'begin': {'line': r.line, 'column': r.column}}},
    }


def _rdjson(records: list[DiagnosticRecord]) -> dict[str, object]:
    return {
        'source': {'name': 'ty', 'url': 'https://docs.astral.sh/ty'},
        'severity': 'ERROR' if any(_level(r) == 'error' for r in records) else 'WARNING',
        'diagnostics': [
            {
                'message': r.message,
                'severity': _level(r).upper(),
                'code': {'value': r.rule},
                'location': {'path': r.path, 'range': {'start': {'line': r.line, 'column': r.column}}},
            }
            for r in records
        ],
    }
