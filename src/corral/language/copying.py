"""`copy.copy` and `copy.deepcopy` for the sandbox.

The standard `copy` module is a reflection toolkit: `__reduce_ex__` hands over any object's
`__dict__`, `_reconstruct` calls `setattr` with names from data, and `deepcopy`'s memo keeps the
originals it walked (a foreign object's private `__dict__` included). This version copies
builtin containers, immutable values, `collections` containers, and instances of the script's own
classes (through their `__copy__`/`__deepcopy__`, or their `__reduce_ex__` state, applied with the
sandbox's attribute rules); anything else is refused with a clear error. Its memo holds copies
only.
"""

from __future__ import annotations

import collections
import copy as _copy
import datetime
import decimal
import enum
import fractions
import re
import types
import uuid
from typing import Any

from .guards import guarded_setattr, is_script_class, private_refusal
from .native import BUILTIN_FUNCTION_TYPE
from .rules import attribute_refusal, normalize

__all__ = ['Error', 'copy', 'deepcopy']

Error = _copy.Error

_type_mro = type.__dict__['__mro__'].__get__
_type_dict = type.__dict__['__dict__'].__get__
_type_flags = type.__dict__['__flags__'].__get__
_type_name = type.__dict__['__name__'].__get__
_object_reduce_ex = object.__reduce_ex__
_object_getattribute = object.__getattribute__

_ATOMIC_TYPES = (
    type(None), type(Ellipsis), type(NotImplemented), int, float, bool, complex, str, bytes, range,
    types.FunctionType, types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
    property, slice, re.Pattern, decimal.Decimal, fractions.Fraction, datetime.date, datetime.datetime,
    datetime.time, datetime.timedelta, datetime.timezone, uuid.UUID, BUILTIN_FUNCTION_TYPE,
)
_ATOMIC = {id(cls): cls for cls in _ATOMIC_TYPES}


def _is(cls: type, table: dict[int, type]) -> bool:
    return table.get(id(cls)) is cls


def _is_class(obj: Any) -> bool:
    return bool(_type_flags(type(obj)) & (1 << 31))


def _is_enum_member(obj: Any) -> bool:
    return any(base is enum.Enum for base in _type_mro(type(obj)))


def _script_hook(cls: type, name: str) -> Any:
    """`name` when a script class of cls's MRO defines it, else None (foreign hooks are not used)."""
    for base in _type_mro(cls):
        namespace = _type_dict(base)
        if name in namespace:
            return namespace[name] if is_script_class(base) else None
    return None


def _refuse(x: Any, function: str) -> TypeError:
    return TypeError(
        f"{function}() in the sandbox cannot copy a '{_type_name(type(x))}' object; it copies builtin containers and values, "
        f'collections containers, dates and decimals, and objects of classes the script defines'
    )


def copy(x: Any) -> Any:
    """Shallow copy of `x`."""
    cls = type(x)
    if _is(cls, _ATOMIC) or _is_class(x) or cls is tuple or cls is frozenset or _is_enum_member(x):
        return x
    if cls is list or cls is dict or cls is set or cls is bytearray:
        return x.copy()
    if cls is collections.deque or cls is collections.OrderedDict or cls is collections.defaultdict or cls is collections.Counter:
        return x.copy()
    if is_script_class(cls) and private_refusal(x, '_') is None:
        hook = _script_hook(cls, '__copy__')
        if hook is not None:
            return hook(x)
        return _reconstruct(x, _object_reduce_ex(x, 4), False, None)
    raise _refuse(x, 'copy')


def deepcopy(x: Any, memo: dict[int, Any] | None = None) -> Any:
    """Deep copy of `x`; `memo` (a dict) maps `id(original)` to its copy, as in the copy module."""
    if memo is None:
        memo = {}
    elif type(memo) is not dict:
        raise TypeError('deepcopy() memo must be a dict')
    keep: list[Any] = []
    return _deep(x, memo, keep)


def _deep(x: Any, memo: dict[int, Any], keep: list[Any]) -> Any:
    key = id(x)
    if key in memo:
        return memo[key]
    cls = type(x)
    if _is(cls, _ATOMIC) or _is_class(x) or _is_enum_member(x):
        return x
    keep.append(x)  # keeps originals alive (ids stay unique) without showing them to the script
    if cls is list:
        y: Any = []
        memo[key] = y
        y.extend(_deep(item, memo, keep) for item in x)
        return y
    if cls is dict or cls is collections.OrderedDict:
        y = cls()
        memo[key] = y
        for k, v in x.items():
            y[_deep(k, memo, keep)] = _deep(v, memo, keep)
        return y
    if cls is collections.defaultdict:
        y = collections.defaultdict(x.default_factory)
        memo[key] = y
        for k, v in x.items():
            y[_deep(k, memo, keep)] = _deep(v, memo, keep)
        return y
    if cls is collections.Counter:
        y = collections.Counter()
        memo[key] = y
        for k, v in x.items():
            y[_deep(k, memo, keep)] = _deep(v, memo, keep)
        return y
    if cls is tuple:
        items = [_deep(item, memo, keep) for item in x]
        if key in memo:  # a cycle through the tuple
            return memo[key]
        y = x if all(a is b for a, b in zip(items, x)) else tuple(items)
        memo[key] = y
        return y
    if cls is set or cls is frozenset:
        y = cls(_deep(item, memo, keep) for item in x)
        memo[key] = y
        return y
    if cls is bytearray:
        y = bytearray(x)
        memo[key] = y
        return y
    if cls is collections.deque:
        y = collections.deque(maxlen=x.maxlen)
        memo[key] = y
        y.extend(_deep(item, memo, keep) for item in x)
        return y
    if cls is types.MethodType:
        y = types.MethodType(x.__func__, _deep(x.__self__, memo, keep))
        memo[key] = y
        return y
    if is_script_class(cls) and private_refusal(x, '_') is None:
        hook = _script_hook(cls, '__deepcopy__')
        if hook is not None:
            y = hook(x, memo)
        else:
            y = _reconstruct(x, _object_reduce_ex(x, 4), True, (memo, keep))
        memo[key] = y
        return y
    raise _refuse(x, 'deepcopy')


def _reconstruct(x: Any, reduced: Any, deep: bool, state_memo: tuple[dict[int, Any], list[Any]] | None) -> Any:
    """Apply a `__reduce_ex__` result as `copy._reconstruct` does, with the sandbox's attribute rules."""
    if type(reduced) is not tuple or not 2 <= len(reduced) <= 6:
        raise Error(f"{_type_name(type(x))}.__reduce_ex__() must return a tuple of 2 to 6 items")
    func, args, state, listiter, dictiter = (reduced + (None, None, None))[:5]

    def sub(value: Any) -> Any:
        if not deep:
            return value
        assert state_memo is not None
        return _deep(value, *state_memo)

    if deep:
        args = sub(args)
    y = func(*args)
    if deep and state_memo is not None:
        state_memo[0][id(x)] = y
    if state is not None:
        if deep:
            state = sub(state)
        if not (is_script_class(type(y)) and private_refusal(y, '_') is None):
            raise TypeError(f"copy: cannot restore the state of a '{_type_name(type(y))}' object in the sandbox")
        setstate = _script_hook(type(y), '__setstate__')
        if setstate is not None:
            setstate(y, state)
        else:
            slotstate = None
            if type(state) is tuple and len(state) == 2:
                state, slotstate = state
            if state:
                updates = dict(state)
                for name in updates:
                    if type(name) is not str or attribute_refusal(normalize(name)) is not None:
                        raise TypeError(f'copy: cannot restore attribute {name!r} in the sandbox')
                _object_getattribute(y, '__dict__').update(updates)
            if slotstate:
                for name, value in dict(slotstate).items():
                    guarded_setattr(y, name, value)
    if listiter is not None:
        for item in listiter:
            y.append(sub(item))
    if dictiter is not None:
        for k, v in dictiter:
            y[sub(k)] = sub(v)
    return y


copy.__module__ = deepcopy.__module__ = 'copy'
