"""Parse ty's ``--output-format full`` text and re-render it with source context.

ty 0.0.99's CLI renders every snippet with zero lines of context around the
annotated lines.  The rendering corral documents (and that models are shown)
uses ruff's ``DisplayDiagnosticConfig`` default of two lines of context before
and after each annotated range, with blank lines at the window edges trimmed,
exactly as ``ruff_db``'s ``context_before``/``context_after`` do, rendered by
``annotate-snippets``.

We do not re-implement annotate-snippets: the annotation rows (``^^^``,
labels, multi-line connectors, ...) that ty printed are kept verbatim.  What we
change is the *window* of source rows around them:

* source rows for the context lines are added from the files' content,
* snippets of one message whose widened windows touch are merged (ruff groups
  annotations into one snippet when their context windows are adjacent),
* the gutter width is recomputed per message (main diagnostic or
  sub-diagnostic), from the largest line number shown in that message,
* a trailing ``|`` gutter row is added after the last snippet of a message when
  its last row is a source row (annotate-snippets' ``close_window``).

A snippet is only widened when every source row ty printed for it matches the
file content we hold (so cut long lines, unknown files, ... are left exactly as
ty printed them).

This module also removes diagnostics (or parts of them) that point into the
"context" prefix of the script and renumbers the script's lines.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = [
    'CONTEXT_LINES',
    'Block',
    'Diagnostic',
    'Row',
    'Snippet',
    'normalize_line',
    'parse_output',
    'render_diagnostic',
    'split_lines',
    'widen',
]

#: Lines of context shown before and after every annotated range.
CONTEXT_LINES = 2
#: annotate-snippets' default terminal width: lines wider than what is left of it
#: after the gutter get cut, which we do not replicate (we keep ty's rows then).
_TERM_WIDTH = 140

_MAIN_HEADER_RE = re.compile(r'^(?:error|warning|info|fatal)\[[^\]\s]+\]: ')
_BLOCK_HEADER_RE = re.compile(r'^(?:error|warning|info|help|note|fatal)(?:\[[^\]\s]+\])?: ')
_ORIGIN_RE = re.compile(r'^( *)(-->|:::) (.+):(\d+):(\d+)$')
_SOURCE_ROW_RE = re.compile(r'^ *(\d+) \|(.*)$')
_GUTTER_ROW_RE = re.compile(r'^ +\|(.*)$')
_ELLIPSIS_ROW_RE = re.compile(r'^\.\.\.')
_DIFF_ROW_RE = re.compile(r'^ *(?:\d+ *)?[|+-](?: .*)?$|^-{20,}$')
_FIX_NOTE_RE = re.compile(r'^note: This is an? .*fix')
_SUMMARY_RE = re.compile(r'^(?:Found \d+ diagnostics?|All checks passed!)$')
_LINE_SPLIT_RE = re.compile(r'\r\n|\r|\n')

# annotate-snippets' OUTPUT_REPLACEMENTS (``normalize_whitespace``).
_REPLACEMENTS = {i: chr(0x2400 + i) for i in range(0x20)}
_REPLACEMENTS[0x09] = '    '
_REPLACEMENTS[0x7F] = '\u2421'
_REPLACEMENTS[0x200D] = ''
for _cp in (0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069):
    _REPLACEMENTS[_cp] = '\ufffd'
del _cp


def split_lines(text: str) -> list[str]:
    """Split like ruff's ``LineIndex``: ``\\n``, ``\\r\\n`` and ``\\r`` end a line,
    and text ending with a newline has a final empty line."""
    return _LINE_SPLIT_RE.split(text)


def normalize_line(line: str) -> str:
    """A source line as annotate-snippets displays it."""
    return line.translate(_REPLACEMENTS)


def _display_width(text: str) -> int:
    width = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        width += 2 if unicodedata.east_asian_width(ch) in 'WF' else 1
    return width


@dataclass
class Row:
    """One row of a snippet.

    ``kind`` is ``'src'`` (``N | code``: ``text`` is what follows ``|``, either
    empty or a space and the code), ``'ann'`` (`` | ^^^ label``: ``text`` is
    what follows ``|``) or ``'raw'`` (anything else, kept verbatim in ``text``).
    """

    kind: str
    text: str
    line: int = 0


@dataclass
class Snippet:
    path: str
    line: int
    col: int
    origin: str  # ty's origin line, used verbatim for snippets without rows
    rows: list[Row] = field(default_factory=list)

    @property
    def src_lines(self) -> list[int]:
        return [r.line for r in self.rows if r.kind == 'src']

    @property
    def has_primary(self) -> bool:
        for row in self.rows:
            if row.kind == 'ann':
                markers = row.text[: len(row.text) - len(row.text.lstrip(' |^-_/\\'))]
                if '^' in markers:
                    return True
        return False


@dataclass
class Block:
    """A main diagnostic or a sub-diagnostic: title line(s) and snippets."""

    title: list[str]
    snippets: list[Snippet] = field(default_factory=list)
    width: int = 1  # ty's gutter width, kept for messages without source rows


@dataclass
class Diagnostic:
    blocks: list[Block]
    raw: list[str]

    @property
    def header(self) -> str:
        return self.blocks[0].title[0] if self.blocks and self.blocks[0].title else ''

    @property
    def primary(self) -> Snippet | None:
        if self.blocks and self.blocks[0].snippets:
            return self.blocks[0].snippets[0]
        return None


# --------------------------------------------------------------------------- parsing


def parse_output(stdout: str) -> list[Diagnostic]:
    """Split ty's full output into diagnostics (the summary line is dropped)."""
    lines = stdout.splitlines()
    chunks: list[list[str]] = []
    current: list[str] = []
    for i, line in enumerate(lines):
        if _MAIN_HEADER_RE.match(line) and (i == 0 or not lines[i - 1].strip()):
            if current:
                chunks.append(current)
            current = [line]
        elif _SUMMARY_RE.match(line) and (i == 0 or not lines[i - 1].strip()):
            if current:
                chunks.append(current)
            current = []
        elif current or line.strip():
            current.append(line)
    if current:
        chunks.append(current)
    result = []
    for chunk in chunks:
        while chunk and not chunk[-1].strip():
            chunk.pop()
        if chunk:
            result.append(_parse_diagnostic(chunk))
    return result


def _parse_diagnostic(lines: list[str]) -> Diagnostic:
    blocks: list[Block] = []
    block: Block | None = None
    snippet: Snippet | None = None
    for line in lines:
        origin = _ORIGIN_RE.match(line)
        if origin and block is not None:
            snippet = Snippet(
                path=origin.group(3),
                line=int(origin.group(4)),
                col=int(origin.group(5)),
                origin=line,
            )
            block.snippets.append(snippet)
            block.width = max(1, len(origin.group(1)))
            continue
        if snippet is not None:
            m = _SOURCE_ROW_RE.match(line)
            if m:
                snippet.rows.append(Row('src', m.group(2), int(m.group(1))))
                continue
            m = _GUTTER_ROW_RE.match(line)
            if m:
                snippet.rows.append(Row('ann', m.group(1)))
                continue
            if _ELLIPSIS_ROW_RE.match(line):
                snippet.rows.append(Row('raw', line))
                continue
        snippet = None
        if block is None or _BLOCK_HEADER_RE.match(line) or block.snippets:
            block = Block(title=[line])
            blocks.append(block)
        else:
            block.title.append(line)
    for block in blocks:
        for sn in block.snippets:
            # The bare ``|`` rows opening/closing a snippet are structure, not content.
            while sn.rows and sn.rows[0].kind == 'ann' and not sn.rows[0].text:
                sn.rows.pop(0)
            while sn.rows and sn.rows[-1].kind == 'ann' and not sn.rows[-1].text:
                sn.rows.pop()
    return Diagnostic(blocks=blocks, raw=list(lines))


# ---------------------------------------------------------------- context removal


def strip_context(diag: Diagnostic, script: str, offset: int) -> Diagnostic | None:
    """Drop everything in ``diag`` located in the first ``offset`` lines of
    ``script`` (the earlier snippets) and renumber the rest.

    Returns None when the diagnostic itself is located there.
    """
    if offset <= 0:
        return diag
    primary = diag.primary
    if primary is not None and primary.path == script and primary.line <= offset:
        return None
    blocks: list[Block] = []
    dropped_fix = False
    for index, block in enumerate(diag.blocks):
        if dropped_fix and _FIX_NOTE_RE.match(block.title[0]) and not block.snippets:
            dropped_fix = False
            continue
        dropped_fix = False
        title = block.title
        if len(title) > 1 and title[0].startswith('help:') and all(_DIFF_ROW_RE.match(t) for t in title[1:]):
            # The diff of a suggested fix, numbered in the whole file (and fixes
            # that add an import edit its top, i.e. the earlier snippets): drop it.
            title = title[:1]
            dropped_fix = True
        snippets = []
        for sn in block.snippets:
            if sn.path != script:
                snippets.append(sn)
                continue
            if sn.line <= offset:
                continue
            rows: list[Row] = []
            dropping = False
            for row in sn.rows:
                if row.kind == 'src':
                    dropping = row.line <= offset
                    if not dropping:
                        rows.append(Row('src', row.text, row.line - offset))
                elif not dropping:
                    rows.append(row)
            if not any(r.kind == 'src' for r in rows) and any(r.kind == 'src' for r in sn.rows):
                continue
            snippets.append(Snippet(sn.path, sn.line - offset, sn.col, sn.origin, rows))
        if index > 0 and block.snippets and not snippets:
            # A sub-diagnostic that only points into earlier snippets, e.g.
            # "Function defined here" for a function defined in an earlier snippet.
            continue
        blocks.append(Block(title, snippets, block.width))
    return Diagnostic(blocks=blocks, raw=diag.raw)


# ------------------------------------------------------------------- widening


def _context_before(lines: Sequence[str], start: int) -> int:
    line = max(1, start - CONTEXT_LINES)
    while line < start and not lines[line - 1].strip():
        line += 1
    return line


def _context_after(lines: Sequence[str], end: int) -> int:
    line = min(len(lines), end + CONTEXT_LINES)
    while line > end and not lines[line - 1].strip():
        line -= 1
    return line


def _margin_of(sn: Snippet, lines: Sequence[str]) -> int | None:
    """The width of the multi-line-annotation margin in front of the code (-1
    when only empty lines are shown), or None when ty's rows don't match
    ``lines`` (then the snippet is left as ty printed it)."""
    margin: int | None = None
    for row in sn.rows:
        if row.kind == 'raw':
            return None
        if row.kind != 'src':
            continue
        if not 1 <= row.line <= len(lines):
            return None
        if row.text and not row.text.startswith(' '):
            return None
        content = row.text[1:]
        expected = normalize_line(lines[row.line - 1])
        if not content.endswith(expected):
            return None
        if not expected:
            continue
        width = len(content) - len(expected)
        if margin is None:
            margin = width
        elif margin != width:
            return None
    return -1 if margin is None else margin


def _source_row(lines: Sequence[str], number: int, margin: int) -> Row:
    code = normalize_line(lines[number - 1])
    return Row('src', ' ' + ' ' * margin + code if code else '', number)


def _first_primary(snippets: list[Snippet]) -> Snippet:
    for sn in snippets:
        if sn.has_primary:
            return sn
    return snippets[0]


def widen(block: Block, get_lines: Callable[[str], Sequence[str] | None]) -> Block:
    """Add context rows to the snippets of one message, merging the snippets
    whose widened windows touch (see the module docstring)."""
    if not block.snippets:
        return block
    # annotate-snippets indents the code of every row of a message by the same
    # margin when the message has a multi-line annotation; context rows get it too.
    margins: list[int | None] = []
    block_margin: int | None = None
    for sn in block.snippets:
        lines = get_lines(sn.path)
        margin = _margin_of(sn, lines) if lines is not None and sn.src_lines else None
        margins.append(margin)
        if margin is not None and margin >= 0:
            if block_margin is not None and block_margin != margin:
                return block
            block_margin = margin
    margin = block_margin or 0

    # Snippets of one path are contiguous in ty's output (primary path first).
    groups: dict[str, list[int]] = {}
    for i, sn in enumerate(block.snippets):
        groups.setdefault(sn.path, []).append(i)

    results: list[tuple[list[Snippet], list[Snippet], Sequence[str] | None]] = []
    for path, indices in groups.items():
        originals = [block.snippets[i] for i in indices]
        lines = get_lines(path)
        if lines is None or any(margins[i] is None for i in indices):
            results.append((originals, originals, None))
            continue
        ordered = sorted(originals, key=lambda s: min(s.src_lines))
        merged: list[list[Snippet]] = []
        for sn in ordered:
            if merged:
                prev_end = _context_after(lines, max(merged[-1][-1].src_lines))
                this_start = _context_before(lines, min(sn.src_lines))
                if this_start - prev_end <= 1:
                    merged[-1].append(sn)
                    continue
            merged.append([sn])
        widened: list[Snippet] = []
        for parts in merged:
            rows: list[Row] = []
            for k, part in enumerate(parts):
                if k:
                    for n in range(max(parts[k - 1].src_lines) + 1, min(part.src_lines)):
                        rows.append(_source_row(lines, n, margin))
                rows.extend(part.rows)
            first = min(r.line for r in rows if r.kind == 'src')
            last = max(r.line for r in rows if r.kind == 'src')
            before = [_source_row(lines, n, margin) for n in range(_context_before(lines, first), first)]
            after = [_source_row(lines, n, margin) for n in range(last + 1, _context_after(lines, last) + 1)]
            head = _first_primary(parts)
            widened.append(Snippet(path, head.line, head.col, head.origin, before + rows + after))
        if len(merged) < len(originals):
            # ruff puts the snippets with a primary annotation first, then file order.
            widened.sort(key=lambda s: not s.has_primary)
        else:
            # Nothing merged: keep ty's order.
            position = {id(parts[0]): w for parts, w in zip(merged, widened)}
            widened = [position[id(sn)] for sn in originals]
        results.append((originals, widened, lines))

    # Don't widen a path's snippets when that would show a line long enough for
    # annotate-snippets to cut it (which we do not replicate): keep ty's rows.
    width = _gutter_width(sn for _, widened, _ in results for sn in widened)
    limit = _TERM_WIDTH - (3 + width + margin)
    final: list[Snippet] = []
    for originals, widened, lines in results:
        if lines is not None and any(
            _display_width(normalize_line(lines[r.line - 1])) > limit
            for sn in widened
            for r in sn.rows
            if r.kind == 'src'
        ):
            final.extend(originals)
        else:
            final.extend(widened)
    return Block(block.title, final, block.width)


# ------------------------------------------------------------------ rendering


def _gutter_width(snippets) -> int:
    numbers = [r.line for sn in snippets for r in sn.rows if r.kind == 'src']
    return len(str(max(numbers))) if numbers else 0


def render_block(block: Block) -> list[str]:
    out = list(block.title)
    if not block.snippets:
        return out
    width = _gutter_width(block.snippets) or block.width
    gutter = ' ' * (width + 1) + '|'
    for i, sn in enumerate(block.snippets):
        if not sn.rows:
            if i:
                out.append(gutter)
            out.append(sn.origin)
            continue
        if i:
            out.append(gutter)
        arrow = '-->' if i == 0 else ':::'
        out.append(f'{" " * width}{arrow} {sn.path}:{sn.line}:{sn.col}')
        out.append(gutter)
        for row in sn.rows:
            if row.kind == 'src':
                out.append(f'{row.line:>{width}} |{row.text}')
            elif row.kind == 'ann':
                out.append(f'{gutter}{row.text}')
            else:
                out.append(row.text)
    last = block.snippets[-1]
    if last.rows and last.rows[-1].kind == 'src':
        out.append(gutter)
    return out


def render_diagnostic(diag: Diagnostic) -> str:
    lines: list[str] = []
    for block in diag.blocks:
        lines.extend(render_block(block))
    return '\n'.join(lines)
