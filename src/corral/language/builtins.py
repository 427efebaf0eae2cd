"""The builtins a script sees: an allow-list, guarded reflection, corral's own `print` and `__import__`.

- Left out: `eval`, `exec`, `compile`, `globals`, `locals`, `breakpoint`, `input`, `help`,
  `memoryview`, `exit`/`quit`. Each name holds a
  stand-in whose use raises `NameError` saying the builtin is not available in the sandbox (a
  missing name would raise a plain NameError; a stand-in keeps the builtins an exact dict, which
  CPython needs for its fast global lookups).
- `getattr`, `hasattr`, `setattr`, `delattr`: the attribute rules of attribute syntax; `vars(x)`
  is `x.__dict__`, a guarded copy (`guards.attribute_dict`), and `vars()` is refused.
- `getattr`, `hasattr`, `setattr`, `delattr`, `vars`, `print` and `open` are the sandbox's own, dressed as
  CPython's built-in functions (`native.py`): `<built-in function print>`, and CPython's words for
  arguments that do not bind.
- `type` is the real `type`, so `isinstance(x, type)`, `type(x) is int`, `class M(type)` and class
  patterns work; the validator refuses `type(name, bases, namespace)` where it is written. Every
  class a script makes, whatever the way, passes one rule as it is made (`guards.namespace_refusal`);
  only a class statement's class is registered as the script's, so private names stay refused on
  one made by calling a metaclass, and everything that reads names from class data — class
  patterns, copy, dataclasses — checks those names itself.
- `id` is the sandbox's (`identity.sandbox_id`): numbers a replay of a stored session gives back,
  where CPython's are memory addresses.
- `dir` is offered: it returns names, which the rules above then judge.
- `open` is the sandbox's (`hostio.open`): files under the host's mounts, read and written through
  the host. `print(..., file=f)` writes to `f` (a `StringIO`, an open file) as CPython does;
  `file=sys.stdout`/`sys.stderr` (or none) goes to the captured output.
- `__import__` is the worker's import hook, for the interpreter: the validator refuses the name in
  scripts. `__build_class__` registers the script's classes (see `guards.build_class`).
- The `__corral...` names are the guards the rewrite calls (see `rewrite.py`).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

from . import hostio, identity
from .facades import stderr as _stderr
from .facades import stdout as _stdout
from .guards import (
    guarded_delattr,
    guarded_getattr,
    guarded_hasattr,
    guarded_setattr,
    guarded_vars,
    make_guards,
    unavailable,
)
from .native import builtin_function
from .rewrite import MATCH_SPECS

__all__ = ['EXCEPTIONS', 'SAFE_BUILTINS', 'STDLIB_EXCEPTIONS', 'UNAVAILABLE_BUILTINS', 'make_builtins']

#: Exception classes a script can name, raise and catch; host exceptions map onto these by name.
EXCEPTIONS: dict[str, type[BaseException]] = {
    name: value
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException) and not name.startswith('_')
}

#: Exception classes of the standard library a host function's error may be, by the name they
#: cross the channel with (`'json.JSONDecodeError'`): the module a script imports, the class's
#: name there. Any other host exception crosses as its nearest built-in base class.
STDLIB_EXCEPTIONS: dict[str, tuple[str, str]] = {
    f'{module}.{name}': (module, name)
    for module, names in (
        ('json', ('JSONDecodeError',)),
        ('binascii', ('Error', 'Incomplete')),
        ('io', ('UnsupportedOperation',)),
        ('re', ('error',)),
        ('csv', ('Error',)),
        ('decimal', (
            'DecimalException', 'Clamped', 'InvalidOperation', 'DivisionByZero', 'Inexact', 'Rounded', 'Subnormal',
            'Overflow', 'Underflow', 'FloatOperation',
        )),
    )
    for name in names
}  # fmt: skip

SAFE_BUILTINS = (
    'abs', 'aiter', 'all', 'anext', 'any', 'ascii', 'bin', 'bool', 'bytearray', 'bytes', 'callable',
    'chr', 'classmethod', 'complex', 'dict', 'dir', 'divmod', 'enumerate', 'filter', 'float', 'format',
    'frozenset', 'hash', 'hex', 'id', 'int', 'isinstance', 'issubclass', 'iter', 'len', 'list', 'map',
    'max', 'min', 'next', 'object', 'oct', 'ord', 'pow', 'property', 'range', 'repr', 'reversed', 'round',
    'set', 'slice', 'sorted', 'staticmethod', 'str', 'sum', 'super', 'tuple', 'type', 'zip', 'Ellipsis',
    'NotImplemented', 'None', 'True', 'False',
)

_CODE = 'a script cannot run code from a string; write the code in the script itself'
_SCOPE = 'use your variables directly, or keep values in a dict'

#: Builtins the sandbox does not offer, with what to do instead.
UNAVAILABLE_BUILTINS: dict[str, str] = {
    'eval': _CODE,
    'exec': _CODE,
    'compile': _CODE,
    'globals': _SCOPE,
    'locals': _SCOPE,
    'input': 'a script cannot read input; use the host functions you were given',
    'breakpoint': 'debuggers are not available in the sandbox',
    'help': 'help is not available in the sandbox',
    'memoryview': 'use bytes or bytearray',
    'exit': 'end the script, or raise an exception',
    'quit': 'end the script, or raise an exception',
}


# dressed as CPython's built-in functions: their repr, names and argument errors (see native.py)
_GETATTR = builtin_function(guarded_getattr, builtins.getattr, signature=lambda object, name, default=None, /: None)
_HASATTR = builtin_function(guarded_hasattr, builtins.hasattr)
_SETATTR = builtin_function(guarded_setattr, builtins.setattr)
_DELATTR = builtin_function(guarded_delattr, builtins.delattr)
_VARS = builtin_function(guarded_vars, builtins.vars, signature=lambda object=None, /: None)
_ID = builtin_function(identity.sandbox_id, builtins.id)


def make_builtins(*, print: Callable[..., None], import_: Callable[..., Any]) -> dict[str, Any]:
    """A fresh builtins namespace for one session."""
    namespace: dict[str, Any] = {name: unavailable(name, hint) for name, hint in UNAVAILABLE_BUILTINS.items()}
    namespace.update((name, getattr(builtins, name)) for name in SAFE_BUILTINS)
    namespace.update(EXCEPTIONS)
    namespace.update(
        getattr=_GETATTR,
        hasattr=_HASATTR,
        setattr=_SETATTR,
        delattr=_DELATTR,
        vars=_VARS,
        id=_ID,
        print=_wrap_print(print),
        open=hostio.open,
        __import__=_wrap_import(import_),
    )
    hostio.set_output(print)
    namespace.update(make_guards(MATCH_SPECS))
    return namespace


def _wrap_print(target: Callable[..., None]) -> Any:
    """The worker's print as CPython's built-in `print` (a bound method would carry the worker in `__self__`)."""

    def print(*values: Any, sep: str | None = ' ', end: str | None = '\n', file: Any = None, flush: bool = False) -> None:
        if sep is not None and not isinstance(sep, str):
            raise TypeError(f'sep must be None or a string, not {type(sep).__name__}')
        if end is not None and not isinstance(end, str):
            raise TypeError(f'end must be None or a string, not {type(end).__name__}')
        if file is None or file is _stdout or file is _stderr:
            target(*values, sep=sep, end=end, file=file, flush=flush)  # the worker's print: which stream
            return
        # another file (a StringIO, an open file): written piece by piece, as CPython does
        if sep is None:
            sep = ' '
        if end is None:
            end = '\n'
        write = file.write
        for index, value in enumerate(values):
            if index:
                write(sep)
            write(str(value))
        write(end)
        if flush:
            file.flush()

    return builtin_function(print, builtins.print)


def _wrap_import(target: Callable[..., Any]) -> Callable[..., Any]:
    def __import__(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        return target(name, globals, locals, fromlist, level)

    return __import__
