"""Turn a script's text into code objects: parse, validate, rewrite, split off the last expression."""

from __future__ import annotations

import ast
import gc
from dataclasses import dataclass
from types import CodeType

from .rewrite import rewrite
from .validate import validate

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

    Raises `SyntaxError` (with `filename`, line, offset and text set) for invalid Python and for
    constructs the sandbox refuses (see `validate.py`); the code it returns calls the guards of
    `rewrite.py`, so it must run with builtins from `make_builtins`.
    """
    # No garbage collection while CPython builds or reads AST objects: a finalizer running in the
    # middle (a task whose exception nobody retrieved logs it, and formatting the traceback parses
    # source) corrupts CPython 3.11's AST recursion bookkeeping: "SystemError: AST constructor
    # recursion depth mismatch" (cpython gh-106905).
    collecting = gc.isenabled()
    gc.disable()
    try:
        tree = ast.parse(source, filename, 'exec', type_comments=False, feature_version=None)
        validate(tree, source, filename)
        tree = rewrite(tree)
        body = tree.body
        last = None
        if body and isinstance(body[-1], ast.Expr):
            last = ast.Expression(body.pop().value)
        return CompiledScript(
            body=compile(tree, filename, 'exec', flags=_FLAGS, dont_inherit=True),
            last=None if last is None else compile(last, filename, 'eval', flags=_FLAGS, dont_inherit=True),
        )
    finally:
        if collecting:
            gc.enable()
