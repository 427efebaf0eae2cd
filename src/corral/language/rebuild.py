"""The script's objects rebuilt from the descriptions that came in (`corral.described`).

An exception is rebuilt as its class when that is a built-in one or one of the standard library's
the sandbox has (`STDLIB_EXCEPTIONS`), else as its nearest built-in base, with its args; a named
tuple as an instance of a named tuple class of that name, module and fields (made once per
kind, and the script's as its own are, so `p.x` and `p._asdict()` work). An instance of a
script's class does not come back in (its class is the script's code), nor a host module.
"""

from __future__ import annotations

import sys
from typing import Any

from ..described import ExceptionValue, InstanceValue, ModuleValue, NamedTupleValue
from .builtins import EXCEPTIONS, STDLIB_EXCEPTIONS
from .modules import namedtuple

__all__ = ['rebuild']

#: Named tuple classes made so far, by (name, module, fields); past this many, a kind new to the
#: worker is made for the one value and not kept.
_KEPT_CLASSES = 256
_classes: dict[tuple[str, str, tuple[str, ...]], type] = {}


def rebuild(value: Any) -> Any:
    """The object a description stands for in the sandbox; ValueError for an `InstanceValue`, a `FileValue` or a `ModuleValue`."""
    if type(value) is ExceptionValue:
        return _exception(value)
    if type(value) is NamedTupleValue:
        return _named_tuple(value)
    if type(value) is InstanceValue:
        raise ValueError("an instance of a script's class cannot come back into the sandbox")
    if type(value) is ModuleValue:
        raise ValueError('a host module cannot come back into the sandbox as a value')
    raise ValueError('a file the script opened cannot come back into the sandbox')


def _exception_class(name: str, module: str, base: str) -> type[BaseException]:
    if module == 'builtins' and name in EXCEPTIONS:
        return EXCEPTIONS[name]
    for module_name, attr in STDLIB_EXCEPTIONS.values():
        cls = getattr(sys.modules.get(module_name), attr, None)  # never imported here: the worker may not open files
        if isinstance(cls, type) and cls.__name__ == name and cls.__module__ == module:
            return cls
    return EXCEPTIONS.get(base, Exception)


def _exception(value: ExceptionValue) -> BaseException:
    cls = _exception_class(value.type_name, value.module, value.base)
    try:
        return cls(*value.args)
    except Exception:  # args its constructor refuses (a UnicodeDecodeError's five): its args alone
        return cls.__new__(cls, *value.args)


def _named_tuple(value: NamedTupleValue) -> tuple[Any, ...]:
    key = (value._type_name, value._module, value._fields)
    cls = _classes.get(key)
    if cls is None:
        try:
            cls = namedtuple(value._type_name, value._fields, module=value._module)
        except ValueError:  # a name that is no identifier, a field that starts with '_': a tuple
            return tuple(value)
        if len(_classes) < _KEPT_CLASSES:
            _classes[key] = cls
    return cls._make(value)  # type: ignore[attr-defined]
