"""The part of a failed script that ran: what the next type check takes as context.

A script that fails at run time has still run its top-level statements up to the one that
raised, and the worker keeps what they bound. The next check must know those names, or a kept
session pushes the model to run again the host calls that already ran. The statements before the
failing one ran whole, so they go into the context as written and ty infers their names' types
as for any earlier script. The failing statement itself goes in only when it is compound (`for`,
`while`, `if`, `with`, `try`, `match`, a definition cannot fail): the part of its body that ran
may have bound names, and ty then knows them with their types, possibly unbound. A simple
statement binds nothing when it raises (`x = await f()` leaves `x` unset), so it is left out.
"""

from __future__ import annotations

import re

from ._syntax import Syntax

__all__ = ['failing_line', 'ran_part']

#: A frame of the script's top level in a traceback's text (`SandboxRuntimeError.display()`).
_TOP_LEVEL_FRAME = re.compile(r'^  File "(?P<file>[^"\n]+)", line (?P<line>\d+), in <module>$', re.MULTILINE)


def failing_line(traceback: str, script_name: str) -> int | None:
    """The line of the top-level statement that raised, read from a traceback of the script's own
    frames (the last top-level frame: a chained exception's traceback comes before the final one's),
    or None when the traceback has no top-level frame."""
    lines = [int(match['line']) for match in _TOP_LEVEL_FRAME.finditer(traceback) if match['file'] == script_name]
    return lines[-1] if lines else None


def ran_part(code: str, line: int | None, syntax: Syntax | None) -> str:
    """The source of `code` (whose syntax is `syntax`) that ran before its top-level statement at
    `line` raised, for the type check's context: the statements before it, and the statement
    itself when it is compound.

    Returns '' when nothing can be known to have run (`line` is None, or the code does not parse).
    """
    if line is None or syntax is None:
        return ''
    for start, first, column, end, compound in syntax.statements:
        if start <= line <= end:
            break
    else:
        return ''
    lines = code.splitlines(keepends=True)
    if compound:
        return ''.join(lines[:end])
    if start < first:  # decorated: each decorator has a line of its own, from its `@`
        return ''.join(lines[: start - 1])
    head = lines[start - 1][: _column(lines[start - 1], column)]  # `x = 1; f()`: `x = 1`
    return ''.join(lines[: start - 1]) + head.rstrip().rstrip(';')


def _column(line: str, utf8_offset: int) -> int:
    """The character index of the UTF-8 byte offset `utf8_offset` (what `col_offset` counts) in `line`."""
    return len(line.encode('utf-8')[:utf8_offset].decode('utf-8', 'replace'))
