"""Turn a script's text into code objects: parse, validate, split off the last expression."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from types import CodeType

__all__ = ['CompiledScript', 'compile_script']

_FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
_CO_COROUTINE = 0x80


@dataclass(frozen=True, slots=True)
class CompiledScript:
    """A script ready to run: `body` (exec), then `last` (eval) when it ends with an expression.

    `body_is_async` / `last_is_async`: the code uses top-level `await`, so evaluating it returns
    a coroutine to await.
    """

    body: CodeType
    last: CodeType | None

    @property
    def body_is_async(self) -> bool:
        return bool(self.body.co_flags & _CO_COROUTINE)

    @property
    def last_is_async(self) -> bool:
        return self.last is not None and bool(self.last.co_flags & _CO_COROUTINE)


def compile_script(source: str, filename: str) -> CompiledScript:
    """Compile a script; top-level `await`, `async for` and `async with` are allowed.

    Raises `SyntaxError` (with `filename`, line, offset and text set) for invalid Python.
    """
    tree = ast.parse(source, filename, 'exec', type_comments=False, feature_version=None)
    body = tree.body
    last = None
    if body and isinstance(body[-1], ast.Expr):
        last = ast.Expression(body.pop().value)
    return CompiledScript(
        body=compile(tree, filename, 'exec', flags=_FLAGS, dont_inherit=True),
        last=None if last is None else compile(last, filename, 'eval', flags=_FLAGS, dont_inherit=True),
    )
