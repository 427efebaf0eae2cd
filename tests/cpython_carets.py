"""The caret line the running CPython draws under a line of a script's traceback, for tests that
expect a traceback: 3.11 and 3.12 draw none under a call that is its whole line, 3.13 does, and
marks the called expression with `~`."""

from __future__ import annotations

import ast
import linecache
import traceback
from typing import Any

_FILE = '<carets>'


class _Failed(Exception):
    pass


class _Anything:
    """Stands for a name of the line: its attributes, items and calls give others; calling the one
    at the dotted path `fails` raises."""

    def __init__(self, path: str, fails: str) -> None:
        self._path, self._fails = path, fails

    def __getattr__(self, name: str) -> _Anything:
        return _Anything(f'{self._path}.{name}', self._fails)

    def __getitem__(self, key: Any) -> _Anything:
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> _Anything:
        if self._path == self._fails:
            raise _Failed
        return self


def carets(line: str, fails: str) -> str:
    """The caret line, with its newline, that CPython prints under `line` (one line of code, no
    indentation) in a traceback whose error the call of `fails` raised (a name or a dotted
    attribute the line calls: 'open', 're.match'); '' where this version prints none."""
    names = {node.id for node in ast.walk(ast.parse(line)) if isinstance(node, ast.Name)}
    linecache.cache[_FILE] = (len(line), None, [line + '\n'], _FILE)
    try:
        exec(compile(line, _FILE, 'exec'), {name: _Anything(name, fails) for name in names})
    except _Failed as error:
        frames = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename == _FILE]
        return ''.join(''.join(traceback.StackSummary.from_list(frames).format()).splitlines(True)[2:])
    finally:
        linecache.cache.pop(_FILE, None)
    raise ValueError(f'{line!r} does not call {fails}')
