"""Stand-ins for CPython's built-in functions: the sandbox's own functions that look and fail as the C ones do.

Where the sandbox replaces a function CPython writes in C (`print`, `open`, `getattr`,
`os.listdir` ...), a script still sees CPython's: `repr(print)` is `<built-in function print>`,
`__name__`, `__qualname__` and `__doc__` are the C function's, `type(print).__name__` is
`builtin_function_or_method`. Arguments that do
not bind raise CPython's own `TypeError` (`getattr expected at least 2 arguments, got 0`,
`'foo' is an invalid keyword argument for print()`): the stand-in's parameters are the C
function's (checked when the stand-in is made: the same count, kinds, keyword names and optional
ones, from the C function's `__text_signature__`, or given where it has none), so a call that does not bind to
the stand-in does not bind to the C function either, which is then called with the same arguments
and raises from its argument parser, before it does anything. (Errors about an argument's type
are the stand-in's own to word as CPython does: see `path_error`.)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

__all__ = ['BUILTIN_FUNCTION_TYPE', 'builtin_function', 'path_error']

_object_getattribute = object.__getattribute__
_object_setattr = object.__setattr__


class _BuiltinFunction:
    """A stand-in (see the module's docstring). Scripts cannot make one, or read what it holds:
    its attributes are private, on a class that is not the script's."""

    __slots__ = ('_function', '_real', '_name')

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("cannot create 'builtin_function_or_method' instances")

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        try:
            return _object_getattribute(self, '_function')(*args, **kwargs)
        except TypeError as error:
            trace = error.__traceback__
            if trace is not None and trace.tb_next is None:  # the call did not bind: no frame of the function ran
                _object_getattribute(self, '_real')(*args, **kwargs)  # raises the C parser's words
            raise

    def __repr__(self) -> str:
        return f"<built-in function {_object_getattribute(self, '_name')}>"

    def __getattr__(self, name: str) -> Any:  # a class cannot hold `__qualname__` for its instances
        if name == '__qualname__':
            return _object_getattribute(self, '_name')
        raise AttributeError(f"'builtin_function_or_method' object has no attribute '{name}'")

    @property
    def __name__(self) -> str:  # type: ignore[override]
        return _object_getattribute(self, '_name')

    @property
    def __doc__(self) -> str | None:  # type: ignore[override]
        return getattr(_object_getattribute(self, '_real'), '__doc__', None)


_BuiltinFunction.__name__ = _BuiltinFunction.__qualname__ = 'builtin_function_or_method'
_BuiltinFunction.__module__ = 'builtins'

#: The type of every stand-in (copied as itself, as `copy` copies a function).
BUILTIN_FUNCTION_TYPE: type = _BuiltinFunction


def builtin_function(function: Callable[..., Any], real: Callable[..., Any], *, signature: Callable[..., Any] | None = None) -> Any:
    """`function` dressed as the C function `real` (see the module's docstring).

    `signature` is a function with `real`'s parameters, for a C function without a
    `__text_signature__` (`lambda object, name, default=None, /: None` for getattr). Raises
    ValueError when `function`'s parameters are not `real`'s: then a call could bind to `real`
    and not to `function`.
    """
    theirs = _parameters(inspect.signature(real if signature is None else signature))
    ours = _parameters(inspect.signature(function))
    if ours != theirs:
        raise ValueError(f'{function.__qualname__} does not take the parameters of {real.__name__}: {ours} != {theirs}')
    stand_in = object.__new__(_BuiltinFunction)
    _object_setattr(stand_in, '_function', function)
    _object_setattr(stand_in, '_real', real)
    _object_setattr(stand_in, '_name', real.__name__)
    return stand_in


def _parameters(signature: inspect.Signature) -> list[tuple[str, Any, bool]]:
    """What decides whether a call binds: each parameter's kind, its name where a keyword can
    name it, and whether it may be left out."""
    return [
        (
            '' if p.kind in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL, p.VAR_KEYWORD) else p.name,
            p.kind,
            p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD),
        )
        for p in signature.parameters.values()
    ]


def path_error(value: Any, function: str, argument: str = 'path', *, fd: bool = False, none: bool = False) -> TypeError:
    """The TypeError of CPython's `os` functions for a path argument of the wrong type:
    `listdir: path should be string, bytes, os.PathLike, integer or None, not float`
    (`fd`: the function also takes a file descriptor; `none`: None is allowed)."""
    kinds = ['string', 'bytes', 'os.PathLike', *(['integer'] if fd else []), *(['None'] if none else [])]
    allowed = ', '.join(kinds[:-1]) + ' or ' + kinds[-1]
    return TypeError(f'{function}: {argument} should be {allowed}, not {type(value).__name__}')
