"""The run-time guards the rewritten script calls, and the guarded `getattr` family.

Rules (from `rules.py`):

- dunder and internal names: the same tables as the validator, applied to names that arrive as
  strings (`getattr(x, '__cl' + 'ass__')`, `operator.attrgetter`, `str.format` fields, class
  patterns' `__match_args__`, dataclass field names);
- private names (`_x`): allowed only on instances of classes the script defined, or on such a
  class itself, and only while every class in the lookup chain (the MRO, and the metaclass MRO
  for a class) is the script's own or one of a few reviewed bases (`object` and the other
  builtin types, `Enum` and friends, `typing.Generic`/`Protocol`, `collections.UserDict` ...).
  `class Q(asyncio.Queue)` is the script's class, but `Q()._loop` is refused: the attribute would
  come from asyncio;
- classes: every class the script makes (a class statement, `type(...)` under any name,
  `type.__new__`, a metaclass) passes one rule as CPython makes it (`namespace_refusal`: what a
  class body may define, plain `str` names, Python's own method resolution order); a class
  statement's class is registered as the script's when it also has a metaclass of the standard
  library or of a class statement, and the mark of that statement (`class_refusal`, `build_class`).

Written with care for hostile input: guards never call `isinstance` against a class the script
controls, never hash or compare a script class (caches are keyed by `id` and checked by
identity), coerce `str` subclasses to `str` before checking a name, and read class internals
through `type`'s own descriptors, so a metaclass cannot lie to them.
"""

from __future__ import annotations

import abc
import builtins
import collections
import collections.abc
import contextlib
import enum
import operator
import re
import sys
import types
import typing
from typing import Any

from . import identity
from .facades import clock_method, run, top_level_run
from .rules import (
    CLASS_ASSIGN_DUNDERS,
    CLOCK_ATTRIBUTES,
    DEFINABLE_DUNDERS,
    DICT_ATTRIBUTE,
    FILTERED_ATTRIBUTES,
    FORMAT_ATTRIBUTES,
    OWN_DUNDERS,
    OWN_STORE_DUNDERS,
    READ_DUNDERS,
    attribute_refusal,
    dunder_hint,
    is_dunder,
    is_private,
    normalize,
)
from .rewrite import INPLACE
from .stop import SandboxStop, due, find_stop, raise_due
from .strformat import safe_format

__all__ = [
    'MARK',
    'MARK_NAME',
    'check_private',
    'class_refusal',
    'guarded_delattr',
    'guarded_getattr',
    'guarded_setattr',
    'is_script_class',
    'make_guards',
    'namespace_refusal',
    'private_refusal',
    'register_class',
    'special_name_hook',
]

_type_mro = type.__dict__['__mro__'].__get__
_type_dict = type.__dict__['__dict__'].__get__
_type_flags = type.__dict__['__flags__'].__get__
_type_name = type.__dict__['__name__'].__get__
_type_delattr = type.__delattr__
_type_setattr = type.__setattr__
_str_str = str.__str__
_orig_build_class = builtins.__build_class__

_TPFLAGS_TYPE_SUBCLASS = 1 << 31
_TPFLAGS_MATCH_SELF = 1 << 22
_TPFLAGS_HEAPTYPE = 1 << 9
_TPFLAGS_IMMUTABLETYPE = 1 << 8

MARK_NAME = '__corral_classmark__'


class _BuildToken:
    """What a class body stores under MARK_NAME: one per class statement, good while it runs."""

    __slots__ = ()

    def __repr__(self) -> str:
        return '<script class mark>'


#: The class statements being built, innermost last (see `build_class`).
_building: list[_BuildToken] = []


class _Mark:
    """`__corral_mark__` in the script's builtins: every class body ends with
    `__corral_classmark__ = __corral_mark__()` (see `rewrite.py`), which stores the token of the
    class statement being built. A metaclass can read it out of the namespace, but it marks only
    a class made while that statement runs, and only one that passes `class_refusal`."""

    __slots__ = ()

    def __call__(self) -> _BuildToken:
        return _building[-1] if _building else _BuildToken()

    def __repr__(self) -> str:
        return '<script class mark>'


#: Also how the sandbox knows a builtins namespace is a script's (`modules._owned`).
MARK = _Mark()

_script_classes: dict[int, type] = {}


def _is_class(obj: Any) -> bool:
    """Whether obj is a class, without calling anything the script could define."""
    return bool(_type_flags(type(obj)) & _TPFLAGS_TYPE_SUBCLASS)


def is_script_class(cls: type) -> bool:
    """A class created by a class statement of the script (or by a reviewed factory for it)."""
    if _script_classes.get(id(cls)) is cls:
        return True
    # a class still being created (its __init_subclass__ or __set_name__ is running) carries the
    # token of a class statement still running, and must already pass the class rule
    token = _type_dict(cls).get(MARK_NAME)
    return token is not None and any(token is live for live in _building) and class_refusal(cls) is None


def register_class(cls: type) -> None:
    """Count `cls` as the script's own class (its own `__getattr__` wrapped: `special_name_hook`)."""
    _guard_getattr(cls)
    _script_classes[id(cls)] = cls
    identity.count_class(cls)


# ----- reviewed bases --------------------------------------------------------------------------

def _builtin_types() -> list[type]:
    return [value for name, value in vars(builtins).items() if not name.startswith('_') and isinstance(value, type)]


#: Foreign classes a script class may derive from and still use private names, with the private
#: names of theirs the script may use (all others found in their dicts stay refused).
_SAFE_BASES: dict[type, frozenset[str]] = {cls: frozenset() for cls in _builtin_types()}
_ENUM_NAMES = frozenset({'_value_', '_name_', '_missing_', '_generate_next_value_', '_member_names_', '_member_map_', '_value2member_map_', '_ignore_', '_order_'})
for _cls in (enum.Enum, enum.IntEnum, enum.StrEnum, enum.Flag, enum.IntFlag, enum.ReprEnum):
    _SAFE_BASES[_cls] = _ENUM_NAMES
for _cls in (enum.EnumType, typing.Generic, typing.Protocol, collections.UserDict, collections.UserList, collections.UserString):
    _SAFE_BASES[_cls] = frozenset()
# abstract bases a script's class may derive from (their own private names stay refused)
for _cls in (
    abc.ABC, contextlib.AbstractContextManager, contextlib.AbstractAsyncContextManager, contextlib.ContextDecorator,
    contextlib.AsyncContextDecorator, *(getattr(collections.abc, _name) for _name in collections.abc.__all__),
):
    _SAFE_BASES[_cls] = frozenset()
for _cls in list(_SAFE_BASES):
    # ABCMeta and the typing metaclasses: reviewed as metaclasses of the classes above
    for _meta in _type_mro(type(_cls)):
        _SAFE_BASES.setdefault(_meta, frozenset())
_SAFE_IDS: dict[int, tuple[type, frozenset[str]]] = {id(cls): (cls, names) for cls, names in _SAFE_BASES.items()}
del _cls, _meta


def _chain_banned(chain: tuple[type, ...]) -> frozenset[str] | None:
    """Private names the chain's foreign classes define (refused), or None when a class is not reviewed."""
    banned: set[str] = set()
    for cls in chain:
        if is_script_class(cls):
            continue
        entry = _SAFE_IDS.get(id(cls))
        if entry is None or entry[0] is not cls:
            return None
        allowed = entry[1]
        for key in _type_dict(cls):
            if type(key) is str and is_private(key) and key not in allowed:
                banned.add(key)
    return frozenset(banned)


#: id(type) -> (type, private names refused on its instances); only script classes with a reviewed chain
_instance_ok: dict[int, tuple[type, frozenset[str]]] = {}
#: id(type) -> type, for the types of `_instance_ok` that refuse no private name: the fast path
_fast: dict[int, type] = {}
#: id(class) -> (class, private names refused on the class itself)
_class_ok: dict[int, tuple[type, frozenset[str]]] = {}


def private_refusal(obj: Any, name: str) -> str | None:
    """Why private attribute `name` of `obj` is refused, or None when it is allowed."""
    cls = type(obj)
    if cls is super:
        owner = obj.__self_class__
        if owner is None:
            return f"'{name}' cannot be read through an unbound super() in the sandbox"
        target = owner
        entry = _instance_entry(owner)
        where = f'{_type_name(owner)} objects'
        chains = [_type_mro(owner)]
    elif _is_class(obj):
        target = obj
        entry = _class_entry(obj)
        where = _type_name(obj)
        chains = [_type_mro(obj), _type_mro(type(obj))]
    else:
        target = cls
        entry = _instance_entry(cls)
        where = f'{_type_name(cls)} objects'
        chains = [_type_mro(cls)]
    if entry is None:
        if is_script_class(target):
            base = next(
                (c for chain in chains for c in chain if not is_script_class(c) and _SAFE_IDS.get(id(c), (None,))[0] is not c),
                None,
            )
            if base is not None:
                return (
                    f"attribute '{name}' is private: {_type_name(target)} derives from {_type_name(base)}, a class the script "
                    f"did not define, so the sandbox refuses names starting with '_' on it; use the public API"
                )
        return (
            f"attribute '{name}' is private: the sandbox allows names starting with '_' only on objects of classes "
            f"the script defines ({where} are not); use the public API"
        )
    if name in entry[1]:
        owner_name = next(
            (_type_name(c) for chain in chains for c in chain if not is_script_class(c) and name in _type_dict(c)),
            'a base',
        )
        return f"attribute '{name}' is private to {owner_name}, a class the script did not define; use the public API"
    return None


def _instance_entry(cls: type) -> tuple[type, frozenset[str]] | None:
    entry = _instance_ok.get(id(cls))
    if entry is not None and entry[0] is cls:
        return entry
    if not is_script_class(cls):
        return None
    banned = _chain_banned(_type_mro(cls))
    if banned is None:
        return None
    entry = (cls, banned)
    # cache only once registered (creation may still fail), and never for a metaclass: its
    # instances are classes, which `_class_entry` judges by their own MRO
    if _script_classes.get(id(cls)) is cls and not _type_flags(cls) & _TPFLAGS_TYPE_SUBCLASS:
        _instance_ok[id(cls)] = entry
        if not banned:
            _fast[id(cls)] = cls
    return entry


def _class_entry(cls: type) -> tuple[type, frozenset[str]] | None:
    entry = _class_ok.get(id(cls))
    if entry is not None and entry[0] is cls:
        return entry
    if not is_script_class(cls):
        return None
    banned = _chain_banned(_type_mro(cls))
    meta_banned = _chain_banned(_type_mro(type(cls)))
    if banned is None or meta_banned is None:
        return None
    entry = (cls, banned | meta_banned)
    if _script_classes.get(id(cls)) is cls:
        _class_ok[id(cls)] = entry
    return entry


def check_private(obj: Any, name: str) -> None:
    refusal = private_refusal(obj, name)
    if refusal is not None:
        raise AttributeError(refusal)


# ----- names arriving as strings ---------------------------------------------------------------

def _as_name(name: Any) -> str:
    if type(name) is str:
        return name
    if not issubclass(type(name), str):
        raise TypeError(f'attribute name must be string, not {_type_name(type(name))!r}')  # CPython's words
    return _str_str(name)  # a plain str copy: a subclass cannot lie to the checks below


def _refusal(obj: Any, name: str, *, store: bool) -> str | None:
    checked = normalize(name)
    if is_private(checked):
        return private_refusal(obj, checked)
    if checked == DICT_ATTRIBUTE and not store:
        return None  # read as a guarded copy: see attribute_dict
    if checked in OWN_DUNDERS and not store:
        return own_refusal(obj, checked)  # read through own_attribute
    return attribute_refusal(checked, store=store)


# ----- dunders of the script's own objects -----------------------------------------------------

_FunctionType = types.FunctionType
_function_code = _FunctionType.__dict__['__code__'].__get__
_function_dict = _FunctionType.__dict__['__dict__'].__get__
_code_filename = types.CodeType.__dict__['co_filename'].__get__
_LRU_WRAPPER = type(__import__('functools').lru_cache(None)(len))


def _is_script_function(obj: Any) -> bool:
    return type(obj) is _FunctionType and _code_filename(_function_code(obj)).startswith('<script ')


def _is_scripts(obj: Any) -> bool:
    """Whether `obj` is the script's own: a function of its code, a class of its class statements,
    or an object of one."""
    if _is_class(obj):
        return is_script_class(obj)
    return _is_script_function(obj) or is_script_class(type(obj))


def _found_in_script_class(chain: tuple[type, ...], name: str) -> bool:
    """Whether the first class of `chain` whose own dict holds `name` is the script's (found
    without comparing a key the script made, which could answer differently each time)."""
    for cls in chain:
        if any(type(key) is str and key == name for key in _type_dict(cls)):
            return is_script_class(cls)
    return False


def own_refusal(obj: Any, name: str) -> str | None:
    """Why dunder `name` (of `OWN_DUNDERS`) of `obj` is refused, or None: it is read only where it
    gives back what the script made. Allowed on a function of the script; on a class of the script
    when the class's own dict or its script bases define it (`__annotations__`: the class's own,
    as CPython reads it); on an object of a script class when a script class (or the object's own
    dict) holds it; `__wrapped__` also on a wrapper the standard library made
    (`functools.lru_cache`, `singledispatch`) around a function or class of the script."""
    if name in _SETTERS:
        # only as `own_attribute` wraps them: the object's own would set any name (`__class__`)
        return f"attribute '{name}' can be read in the sandbox only as x.{name} or C.{name}, written out"
    if _is_script_function(obj):
        return None
    if _is_class(obj):
        if is_script_class(obj) and (name == '__annotations__' or _found_in_script_class(_type_mro(obj), name)):
            return None
    elif is_script_class(type(obj)):
        if _found_in_script_class(_type_mro(type(obj)), name):
            return None
        try:
            own = _object_getattribute_(obj, '__dict__')
        except AttributeError:
            own = None
        if type(own) is dict and any(type(key) is str and key == name for key in own) and not any(
            type(key) is str and key == name for cls in _type_mro(type(obj)) for key in _type_dict(cls)
        ):
            return None
    elif name == '__wrapped__' and type(obj) in (_FunctionType, _LRU_WRAPPER):
        holder = _function_dict(obj) if type(obj) is _FunctionType else _object_getattribute_(obj, '__dict__')
        wrapped = next((value for key, value in holder.items() if type(key) is str and key == '__wrapped__'), None)
        if wrapped is not None and _is_scripts(wrapped):
            return None
    hint = dunder_hint(name)
    text = f"attribute '{name}' can be read in the sandbox only on the script's own classes, functions and their objects ({_describe(obj)})"
    return f'{text}; {hint}' if hint else text


_SETTERS = ('__setattr__', '__delattr__')


def _describe(obj: Any) -> str:
    """`class str is not`, `int objects are not`: what a refusal of the script's own dunders says of `obj`."""
    if _is_class(obj):
        return f'class {_type_name(obj)} is not'
    return f'{_type_name(type(obj))} objects are not'


def own_attribute(obj: Any, name: str) -> Any:
    """`x.__annotations__`, `x.__wrapped__` ... (`OWN_DUNDERS`, rewritten): read when `own_refusal`
    allows it. `__setattr__` / `__delattr__` give functions that set or delete the attributes of
    the script's own objects by the rules of `setattr`, past their class's own `__setattr__`
    (`object.__setattr__(self, 'y', v)` in a frozen dataclass's `__post_init__`)."""
    if name in _SETTERS:
        return OBJECT_SETTERS[name] if obj is object else _own_setter(obj, name)
    refusal = own_refusal(obj, name)
    if refusal is not None:
        raise AttributeError(refusal)
    return getattr(obj, name)


def _own_setter(owner: Any, name: str) -> Any:
    """`C.__setattr__` (C a class: the setter takes the object first) or `x.__setattr__` (bound to x)."""
    store = name == '__setattr__'
    unbound = _is_class(owner)
    real = getattr(owner, name)  # CPython's own refusal for a missing one (AttributeError)
    if not unbound and type(owner) is super:  # `super().__setattr__`: the next class's, bound to the object
        owner = owner.__self__

    def _target(obj: Any, attribute: Any) -> str:
        attribute = _as_name(attribute)
        if not _is_scripts(obj):
            raise TypeError(
                f"{name}() can change attributes in the sandbox only of the script's own classes, functions and "
                f'their objects ({_describe(obj)})'
            )
        refusal = _refusal(obj, attribute, store=True)
        if refusal is not None:
            raise AttributeError(refusal)
        return attribute

    if unbound:
        if store:
            def setter(obj: Any, attribute: Any, value: Any, /) -> None:
                if attribute in OWN_STORE_DUNDERS and type(attribute) is str:
                    return own_store(value, obj, attribute)
                real(obj, _target(obj, attribute), value)
        else:
            def setter(obj: Any, attribute: Any, /) -> None:  # type: ignore[misc]
                real(obj, _target(obj, attribute))
    elif store:
        def setter(attribute: Any, value: Any, /) -> None:  # type: ignore[misc]
            if attribute in OWN_STORE_DUNDERS and type(attribute) is str:
                return own_store(value, owner, attribute)
            real(_target(owner, attribute), value)
    else:
        def setter(attribute: Any, /) -> None:  # type: ignore[misc]
            real(_target(owner, attribute))
    setter.__name__ = name
    setter.__qualname__ = f'{_type_name(owner) if unbound else _type_name(type(owner))}.{name}'
    return setter


#: `object.__setattr__` and `object.__delattr__`: one function each, as CPython's are one object.
OBJECT_SETTERS = {name: _own_setter(object, name) for name in _SETTERS}


def own_store(value: Any, obj: Any, name: str) -> None:
    """`C.__init__ = f` (`OWN_STORE_DUNDERS`, rewritten; and `setattr`): a method set on a class of
    the script after its class statement, as a class body would define it: a `__getattr__` is
    wrapped to answer no special name (`special_name_hook`)."""
    if not (_is_class(obj) and is_script_class(obj)):
        raise AttributeError(f"attribute '{name}' can be assigned in the sandbox only on the script's own classes ({_describe(obj)})")
    if name == '__getattr__':
        value = special_name_hook(value)
    _type_setattr(obj, name, value)


_NO_DEFAULT: Any = object()


def guarded_getattr(obj: Any, name: Any, default: Any = _NO_DEFAULT, /) -> Any:
    """`getattr` with the sandbox's attribute rules; a refused name behaves as a missing attribute."""
    default = () if default is _NO_DEFAULT else (default,)
    name = _as_name(name)
    if name in _SETTERS:
        return own_attribute(obj, name)
    refusal = _refusal(obj, name, store=False)
    if refusal is not None:
        if default:
            return default[0]
        raise AttributeError(refusal)
    if normalize(name) == DICT_ATTRIBUTE:
        try:
            return attribute_dict(obj)
        except AttributeError:
            if default:
                return default[0]
            raise
    value = getattr(obj, name, *default)
    if name in FORMAT_ATTRIBUTES:
        return filter_format(value)
    if name in CLOCK_ATTRIBUTES:
        return filter_clock(value)
    return value


def guarded_hasattr(obj: Any, name: Any, /) -> bool:
    name = _as_name(name)
    if name in _SETTERS:
        return hasattr(obj, name)
    if _refusal(obj, name, store=False) is not None:
        return False
    return hasattr(obj, name)


def guarded_setattr(obj: Any, name: Any, value: Any, /) -> None:
    name = _as_name(name)
    if name in OWN_STORE_DUNDERS:
        return own_store(value, obj, name)
    refusal = _refusal(obj, name, store=True)
    if refusal is not None:
        raise AttributeError(refusal)
    setattr(obj, name, value)


def guarded_delattr(obj: Any, name: Any, /) -> None:
    name = _as_name(name)
    refusal = _refusal(obj, name, store=True)
    if refusal is not None:
        raise AttributeError(refusal)
    delattr(obj, name)


guarded_getattr.__name__ = guarded_getattr.__qualname__ = 'getattr'
guarded_hasattr.__name__ = guarded_hasattr.__qualname__ = 'hasattr'
guarded_setattr.__name__ = guarded_setattr.__qualname__ = 'setattr'
guarded_delattr.__name__ = guarded_delattr.__qualname__ = 'delattr'


# ----- x.__dict__ and vars(x) ------------------------------------------------------------------

_object_getattribute_ = object.__getattribute__
_dict_setitem = dict.__setitem__
_dict_delitem = dict.__delitem__
_dict_pop = dict.pop


class _AttributeDict(dict):  # type: ignore[type-arg]
    """`x.__dict__` / `vars(x)` of an object of the script's classes: a dict of the attributes
    the script may read by name, whose changes also go to the object's own dict, each name
    checked by the rules of `setattr` (a copy: the object's dict itself never reaches a script,
    nor a name the rules refuse; a change made to the object later does not show here)."""

    __slots__ = ('_target',)

    def __setitem__(self, name: Any, value: Any) -> None:
        name = _as_name(name)
        refusal = _refusal(self._target, name, store=True)
        if refusal is not None:
            raise AttributeError(refusal)
        _object_getattribute_(self._target, '__dict__')[name] = value
        _dict_setitem(self, name, value)

    def __delitem__(self, name: Any) -> None:
        name = _as_name(name)
        refusal = _refusal(self._target, name, store=True)
        if refusal is not None:
            raise AttributeError(refusal)
        _dict_delitem(self, name)
        _object_getattribute_(self._target, '__dict__').pop(name, None)

    def update(self, other: Any = (), /, **kwargs: Any) -> None:
        items = other.keys() if hasattr(other, 'keys') else None
        pairs = [(key, other[key]) for key in items] if items is not None else list(other)
        for key, value in [*pairs, *kwargs.items()]:
            self[key] = value

    def __ior__(self, other: Any) -> Any:
        self.update(other)
        return self

    def setdefault(self, name: Any, default: Any = None, /) -> Any:
        if name not in self:
            self[name] = default
        return dict.__getitem__(self, name)

    def pop(self, name: Any, *default: Any) -> Any:
        if name not in self:
            return _dict_pop(self, name, *default)
        value = dict.__getitem__(self, name)
        del self[name]
        return value

    def popitem(self) -> tuple[Any, Any]:
        if not self:
            raise KeyError('popitem(): dictionary is empty')
        name = next(reversed(list(dict.keys(self))))
        return name, self.pop(name)

    def clear(self) -> None:
        for name in list(dict.keys(self)):
            del self[name]


_AttributeDict.__name__ = _AttributeDict.__qualname__ = 'dict'
_AttributeDict.__module__ = 'builtins'


def attribute_dict(obj: Any, *, function: str | None = None) -> Any:
    """`x.__dict__` (rewritten, and `getattr(x, '__dict__')`) or `vars(x)` (`function='vars'`).

    An object of a script class gets an `_AttributeDict`; a script class gets a read-only
    mapping of what it defines (CPython's is a read-only `mappingproxy` too); anything else is
    refused, as before, with AttributeError (TypeError for vars, as CPython's for an object
    without a `__dict__`).
    """
    if _is_class(obj):
        if not is_script_class(obj):
            raise _dict_refusal(obj, function)
        names = {key: value for key, value in _type_dict(obj).items() if _listed(obj, key)}
        return types.MappingProxyType(names)
    if not is_script_class(type(obj)):
        raise _dict_refusal(obj, function)
    try:
        own = _object_getattribute_(obj, '__dict__')
    except AttributeError:
        if function is not None:
            raise TypeError(f'{function}() argument must have __dict__ attribute') from None
        raise
    view = _AttributeDict({key: value for key, value in own.items() if _listed(obj, key)})
    _object_setattr_(view, '_target', obj)
    return view


_object_setattr_ = object.__setattr__


def _listed(obj: Any, key: Any) -> bool:
    """Whether a key of `obj`'s dict shows in its `__dict__`: a name the script may read by name.
    Never `__dict__` itself: a class's is the descriptor that hands out its objects' real dicts."""
    return type(key) is str and normalize(key) != DICT_ATTRIBUTE and _refusal(obj, key, store=False) is None


def _dict_refusal(obj: Any, function: str | None) -> BaseException:
    what = f'{_type_name(obj)} (a class the script did not define)' if _is_class(obj) else f'{_type_name(type(obj))} objects'
    text = (
        f"the __dict__ of {what} cannot be read in the sandbox: only objects and classes the script defines show "
        f'theirs; read the attributes by name'
    )
    return TypeError(f'{function}(): {text}') if function is not None else AttributeError(text)


def guarded_vars(obj: Any = _NO_DEFAULT, /) -> Any:
    """`vars(x)`: as `x.__dict__`; `vars()` (the caller's variables) is not available."""
    if obj is _NO_DEFAULT:
        raise NameError('vars() without an argument is not available in the sandbox; use your variables directly, or keep values in a dict', name='vars')
    return attribute_dict(obj, function='vars')


# ----- private attribute syntax: x._y ----------------------------------------------------------

def private_getattr(obj: Any, name: str) -> Any:
    """`x._y` (rewritten). The fast path: an instance of a script class seen before."""
    cls = type(obj)
    if _fast.get(id(cls)) is cls:
        return getattr(obj, name)
    refusal = private_refusal(obj, name)
    if refusal is not None:
        raise AttributeError(refusal)
    return getattr(obj, name)


class _AttributeTarget:
    """`__corral_attrs__(x)['_y'] = v`: the target of a rewritten private store or delete."""

    __slots__ = ('_obj',)

    def __init__(self, obj: Any) -> None:
        self._obj = obj

    def __getitem__(self, name: str) -> Any:
        return private_getattr(self._obj, name)

    def __setitem__(self, name: str, value: Any) -> None:
        obj = self._obj
        if name in OWN_STORE_DUNDERS:  # `C.__init__ = f`
            return own_store(value, obj, name)
        cls = type(obj)
        entry = _instance_ok.get(id(cls))
        if not (entry is not None and entry[0] is cls and name not in entry[1]):
            check_private(obj, name)
        setattr(obj, name, value)

    def __delitem__(self, name: str) -> None:
        check_private(self._obj, name)
        delattr(self._obj, name)


# ----- str.format ------------------------------------------------------------------------------

_STR_FORMAT = str.__dict__['format']
_STR_FORMAT_MAP = str.__dict__['format_map']
_BuiltinMethod = types.BuiltinMethodType


def _unbound_format(self: Any, /, *args: Any, **kwargs: Any) -> str:
    if not issubclass(type(self), str):
        raise TypeError(f"descriptor 'format' for 'str' objects doesn't apply to a '{_type_name(type(self))}' object")
    return safe_format(_str_str(self), args, kwargs, refusal=_refusal)


def _unbound_format_map(self: Any, mapping: Any, /) -> str:
    if not issubclass(type(self), str):
        raise TypeError(f"descriptor 'format_map' for 'str' objects doesn't apply to a '{_type_name(type(self))}' object")
    return safe_format(_str_str(self), (), mapping, refusal=_refusal, mapping=True)


_unbound_format.__name__ = 'format'
_unbound_format.__qualname__ = 'str.format'
_unbound_format_map.__name__ = 'format_map'
_unbound_format_map.__qualname__ = 'str.format_map'


def _bound_format(text: str) -> Any:
    def format(*args: Any, **kwargs: Any) -> str:
        return safe_format(text, args, kwargs, refusal=_refusal)

    format.__qualname__ = 'str.format'
    return format


def _bound_format_map(text: str) -> Any:
    def format_map(mapping: Any, /) -> str:
        return safe_format(text, (), mapping, refusal=_refusal, mapping=True)

    format_map.__qualname__ = 'str.format_map'
    return format_map


def filter_format(value: Any) -> Any:
    """Replace `str.format` / `str.format_map` (bound or not) with the sandbox's safe versions."""
    if value is _STR_FORMAT:
        return _unbound_format
    if value is _STR_FORMAT_MAP:
        return _unbound_format_map
    if type(value) is _BuiltinMethod:
        owner = value.__self__
        if issubclass(type(owner), str):
            method = value.__name__
            if method == 'format':
                return _bound_format(_str_str(owner))
            if method == 'format_map':
                return _bound_format_map(_str_str(owner))
    return value


def format_attribute(obj: Any, name: str) -> Any:
    """`x.format` / `x.format_map` (rewritten)."""
    if type(obj) is str:
        return _bound_format(obj) if name == 'format' else _bound_format_map(obj)
    return filter_format(getattr(obj, name))


# ----- the clock -------------------------------------------------------------------------------

_date = __import__('datetime').date


def _reads_clock(cls: Any) -> bool:
    """`cls` is `datetime.date` or a subclass (`datetime`, a script's subclass): its now/today read the clock."""
    return _is_class(cls) and any(base is _date for base in _type_mro(cls))


def filter_clock(value: Any) -> Any:
    """Replace the bound `now` / `today` / `utcnow` of `datetime.date` and its subclasses with the
    sandbox's, which read the clock through the host."""
    if type(value) is _BuiltinMethod and value.__name__ in CLOCK_ATTRIBUTES:
        owner = value.__self__
        if _reads_clock(owner):
            return clock_method(owner, value.__name__)
    return value


def clock_attribute(obj: Any, name: str) -> Any:
    """`x.now` / `x.today` / `x.utcnow` (rewritten)."""
    return filter_clock(getattr(obj, name))


# ----- classes ---------------------------------------------------------------------------------

def build_class(func: Any, name: Any, /, *bases: Any, **kwds: Any) -> Any:
    """`__build_class__`: build as CPython does, then check the class and register it as the script's.

    The body ends by storing this statement's token (see `_Mark`); the class the metaclass returns
    is the script's when its own dict holds that token (the token is then removed) and it passes
    `class_refusal`, which raises TypeError otherwise. A metaclass returning some other class
    (`metaclass=lambda *a: asyncio.Queue`) gets no registration.
    """
    token = _BuildToken()
    _building.append(token)
    try:
        cls = _orig_build_class(func, name, *bases, **kwds)
    finally:
        _building.remove(token)
    if _is_class(cls) and _type_dict(cls).get(MARK_NAME) is token:
        _type_delattr(cls, MARK_NAME)
        refusal = class_refusal(cls)
        if refusal is not None:
            _defang(cls)
            raise TypeError(refusal)
        _check_subclasses(cls)
        register_class(cls)
    return cls


#: Dunder names a class's dict may hold besides those a class body may define: what CPython and
#: the standard library's metaclasses put there (ABCMeta, EnumType, NamedTuple, TypedDict, Generic),
#: and what 3.12 and 3.13 add: a class statement's `__type_params__`, `__firstlineno__` and
#: `__static_attributes__`, Protocol's and TypedDict's tables, namedtuple's and dataclass's `__replace__`.
_CREATED_DUNDERS = frozenset({
    '__module__', '__annotations__', '__orig_bases__', '__parameters__', '__abstractmethods__',
    '__required_keys__', '__optional_keys__', '__total__', '__getnewargs__',
    '__type_params__', '__firstlineno__', '__static_attributes__', '__protocol_attrs__',
    '__callable_proto_members_only__', '__non_callable_proto_members__', '__mutable_keys__',
    '__readonly_keys__', '__replace__',
})
#: What the rewrite itself stores in a class body: the lookups of its class patterns (`__corral_t<N>__`).
_REWRITE_NAME = re.compile(r'__corral_t[0-9]+__')
_default_mro = type.__dict__['mro']
_GetSet = types.GetSetDescriptorType


def _protocol_hook() -> Any:
    """What `typing.Protocol` puts in a protocol class's dict as `__subclasshook__`: on 3.11 a
    function of its own per class, all of one code object (the code is returned); from 3.12 one
    classmethod that all share, `typing._proto_hook` (returned itself)."""

    class _Probe(typing.Protocol):
        pass

    hook = _type_dict(_Probe)['__subclasshook__']
    return hook if type(hook) is classmethod else hook.__code__


_PROTOCOL_HOOK = _protocol_hook()


def _is_protocol_hook(value: Any) -> bool:
    if type(value) is types.FunctionType:
        return value.__code__ is _PROTOCOL_HOOK
    return value is _PROTOCOL_HOOK


def _metaclasses_before_scripts() -> frozenset[int]:
    """The ids of every metaclass this interpreter has before any script runs (the standard
    library's): the foreign metaclasses a script class may have. Taken when the first script
    builtins are made (`make_guards`), after the sandbox's modules are loaded."""
    subclasses = type.__dict__['__subclasses__']
    found: dict[int, type] = {id(type): type}
    pending = [type]
    while pending:
        for sub in subclasses(pending.pop()):
            if id(sub) not in found:
                found[id(sub)] = sub
                pending.append(sub)
    return frozenset(found)


_FOREIGN_METACLASSES: frozenset[int] = frozenset()


def class_refusal(cls: type) -> str | None:
    """Why `cls` cannot be a script class, or None: `namespace_refusal`, and its metaclass is the
    standard library's or a class statement's (one made by calling `type` could have dodged the
    check: a base's `__init_subclass__` that does not call `super()` skips `_init_subclass`)."""
    refusal = namespace_refusal(cls)
    if refusal is not None:
        return refusal
    for meta in _type_mro(type(cls)):
        if meta is not object and id(meta) not in _FOREIGN_METACLASSES and _script_classes.get(id(meta)) is not meta:
            return (
                f"class {_type_name(cls)} cannot be made in the sandbox: its metaclass {_type_name(meta)} was not made by a "
                f'class statement; define the metaclass with a class statement'
            )
    return None


def namespace_refusal(cls: type) -> str | None:
    """Why the script may not make `cls`, or None. The one rule for every class a script makes,
    by a class statement, `type(name, bases, namespace)` under any name, `type.__new__` or a
    metaclass, whatever the metaclass did to the namespace:

    - its dict holds the names a class body may define (`rules.DEFINABLE_DUNDERS`,
      `CLASS_ASSIGN_DUNDERS`) and what CPython and the standard library's metaclasses add, all
      of them plain `str`: no `__getattribute__`, `__class__`, `__del__`, `__instancecheck__` ...;
    - Python's own method resolution order, for it and its metaclasses (a metaclass's `mro()`
      could hide a foreign base from the guards), and no `mro` defined by a metaclass.
    """
    name = _type_name(cls)
    is_metaclass = bool(_type_flags(cls) & _TPFLAGS_TYPE_SUBCLASS)
    for key, value in _type_dict(cls).items():
        if type(key) is not str:
            return f"class {name} cannot be made in the sandbox: its namespace has a key of type '{_type_name(type(key))}'; attribute names are strings"
        if _refused_key(key, value, is_metaclass):
            if key == 'mro':
                return f"class {name} cannot define 'mro' in the sandbox: classes keep Python's method resolution order"
            hint = dunder_hint(key)
            text = f"class {name} cannot define '{key}' in the sandbox"
            return f'{text}; {hint}' if hint else text
    current: type = cls
    while current is not type:
        mro = _type_mro(current)
        default = _default_mro(current)
        if len(mro) != len(default) or any(a is not b for a, b in zip(mro, default)):
            return f"class {name} cannot be made in the sandbox: the metaclass of {_type_name(current)} changes its method resolution order"
        current = type(current)
    return None


def _refused_key(key: str, value: Any, is_metaclass: bool) -> bool:
    if key == 'mro':
        return is_metaclass
    if not is_dunder(key):
        return False
    if key in DEFINABLE_DUNDERS or key in CLASS_ASSIGN_DUNDERS or key in _CREATED_DUNDERS or _REWRITE_NAME.fullmatch(key):
        return False
    if key == MARK_NAME and type(value) is _BuildToken:  # a class statement still being built
        return False
    if key in ('__dict__', '__weakref__') and type(value) is _GetSet:
        return False
    return not (key == '__subclasshook__' and _is_protocol_hook(value))


def _defang(cls: type) -> None:
    """Take what the rule refuses out of a class the script may still hold (a `__set_name__` or
    `__init_subclass__` ran before the refusal and can keep it): no finalizer, no lying attributes."""
    import gc

    is_metaclass = bool(_type_flags(cls) & _TPFLAGS_TYPE_SUBCLASS)
    for key, value in list(_type_dict(cls).items()):
        if type(key) is str and _refused_key(key, value, is_metaclass):
            try:
                _type_delattr(cls, key)
            except (TypeError, AttributeError):  # `__class__`: type's own descriptor answers the delete
                del gc.get_referents(_type_dict(cls))[0][key]
                sys._clear_type_cache()


def special_name_hook(hook: Any) -> Any:
    """`hook` (a `__getattr__`, a function or any descriptor) made to answer no dunder name but
    those a script may read or a class may define: C code reads special names off an object
    through `__getattr__` (numpy's `__array_interface__`, which names any address to read;
    `__array_struct__`, `__dlpack__` ...), and a script's `__getattr__` must not answer them, nor
    a library's that serves the script's data by name (a pandas Series labelled
    `'__array_interface__'`)."""

    def __getattr__(self: Any, name: Any, /) -> Any:
        if type(name) is str and is_dunder(name) and name not in READ_DUNDERS and name not in DEFINABLE_DUNDERS:
            raise AttributeError(f"'{_type_name(type(self))}' object has no attribute '{name}'")
        bind = getattr(type(hook), '__get__', None)
        return (bind(hook, self, type(self)) if bind is not None else hook)(name)

    __getattr__._corral_checked = True  # type: ignore[attr-defined]
    return __getattr__


def _guard_getattr(cls: type) -> None:
    """Wrap a class's own `__getattr__` with `special_name_hook` (once), as the class is made."""
    own = _type_dict(cls).get('__getattr__')
    if own is not None and not getattr(own, '_corral_checked', False):
        _type_setattr(cls, '__getattr__', special_name_hook(own))


def _check_subclasses(cls: type) -> None:
    """A class's own `__init_subclass__` (a function in its dict) takes the place of
    `_init_subclass` for its subclasses: it is wrapped, so they are checked all the same."""
    own = _type_dict(cls).get('__init_subclass__')
    if type(own) is not classmethod or getattr(own, '_corral_checked', False):
        return

    def __init_subclass__(sub: type, /, *args: Any, **kwargs: Any) -> None:
        _check_made(sub)
        own.__get__(None, sub)(*args, **kwargs)

    checked = classmethod(__init_subclass__)
    checked._corral_checked = True  # type: ignore[attr-defined]
    _type_setattr(cls, '__init_subclass__', checked)


_object_init_subclass = object.__dict__['__init_subclass__']
_CORRAL = __file__.rpartition('/language/')[0] + '/'


def _made_by_script() -> bool:
    """Whether the class being made (in `_init_subclass`) is made by the script's own code, or by
    the standard library on its behalf (`abc.ABCMeta(name, bases, ns)`), not by corral's."""
    frame: Any = sys._getframe(3)
    try:
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename.startswith('<script '):
                return True
            if filename.startswith(_CORRAL):
                return False
            frame = frame.f_back
        return False
    finally:
        del frame


def _check_made(cls: type) -> None:
    if _made_by_script():
        identity.count_class(cls)  # counted from here on, before its metaclass or the script can hash it
        refusal = namespace_refusal(cls)
        if refusal is not None:
            _defang(cls)
            raise TypeError(refusal)
        _check_subclasses(cls)
        _guard_getattr(cls)


def _init_subclass(cls: type, /, *args: Any, **kwargs: Any) -> None:
    """`object.__init_subclass__`, which CPython calls as it makes every class whose bases do not
    define their own (and a base's own is wrapped to do the same, `_check_subclasses`): a class
    the script makes must pass `namespace_refusal`. (A class statement's class is checked again,
    with its metaclass, when the statement ends: see `build_class`.)"""
    _check_made(cls)
    _object_init_subclass.__get__(None, cls)(*args, **kwargs)


def _install_class_rule() -> None:
    """Put `_init_subclass` in `object`'s own dict, where CPython's `type.__new__` finds it for
    every class (object's dict is read-only from Python: it is reached through the garbage
    collector's view of its proxy), and drop the cached lookups of the old one."""
    import gc

    if object.__dict__['__init_subclass__'] is not _object_init_subclass:
        return
    (real,) = gc.get_referents(object.__dict__)
    real['__init_subclass__'] = classmethod(_init_subclass)
    sys._clear_type_cache()
    # the classes that define their own `__init_subclass__` (random.Random's does not call
    # super()) check their subclasses too; a type of C code cannot be changed (zoneinfo.ZoneInfo)
    subclasses = type.__dict__['__subclasses__']
    seen: set[int] = set()
    pending: list[type] = [object]
    while pending:
        for cls in subclasses(pending.pop()):
            if id(cls) in seen:
                continue
            seen.add(id(cls))
            pending.append(cls)
            if _type_flags(cls) & _TPFLAGS_HEAPTYPE and not _type_flags(cls) & _TPFLAGS_IMMUTABLETYPE:
                _check_subclasses(cls)


# ----- with ------------------------------------------------------------------------------------

def _special(obj: Any, name: str) -> Any:
    return getattr(type(obj), name)


class _With:
    """`with cm:` (rewritten): the manager's own `__exit__`, but a SandboxStop is never suppressed."""

    __slots__ = ('_cm', '_exit')

    def __init__(self, cm: Any) -> None:
        self._cm = cm
        self._exit: Any = None

    def __enter__(self) -> Any:
        cm = self._cm
        try:
            enter = _special(cm, '__enter__')
            self._exit = _special(cm, '__exit__')
        except AttributeError:
            raise TypeError(f"'{_type_name(type(cm))}' object does not support the context manager protocol") from None
        return enter(cm)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        suppress = self._exit(self._cm, exc_type, exc, tb)
        if exc is not None and (due() is not None or find_stop(exc) is not None):
            return False
        return suppress


class _AsyncWith:
    __slots__ = ('_cm', '_exit')

    def __init__(self, cm: Any) -> None:
        self._cm = cm
        self._exit: Any = None

    async def __aenter__(self) -> Any:
        cm = self._cm
        try:
            enter = _special(cm, '__aenter__')
            self._exit = _special(cm, '__aexit__')
        except AttributeError:
            raise TypeError(
                f"'{_type_name(type(cm))}' object does not support the asynchronous context manager protocol"
            ) from None
        return await enter(cm)

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        suppress = await self._exit(self._cm, exc_type, exc, tb)
        if exc is not None and (due() is not None or find_stop(exc) is not None):
            return False
        return suppress


# ----- except ----------------------------------------------------------------------------------

_exc_info = sys.exc_info


_exception_context = BaseException.__dict__['__context__'].__get__
_exception_cause = BaseException.__dict__['__cause__'].__get__


def reraise_stop() -> None:
    """First statement of every handler: once the worker has raised a stop, it is raised again
    here, whatever the handler caught (see `stop.py`). A stop the script holds and raised itself
    (`raise task.exception()`) is raised again too, also when an exception raised in a `finally`
    block or an `__exit__` replaced it (it is that exception's context)."""
    raise_due()
    error = _exc_info()[1]
    seen = 0
    while error is not None and seen < 100:  # contexts can form a cycle; a stop is near the top
        cls = type(error)
        if issubclass(cls, SandboxStop):
            raise error
        if issubclass(cls, BaseExceptionGroup):
            stop = find_stop(error)
            if stop is not None:
                raise stop
        if issubclass(cls, GeneratorExit):
            return  # a frame being closed (its context is whatever was in flight): let it close
        error = _exception_cause(error) or _exception_context(error)
        seen += 1


# ----- match -----------------------------------------------------------------------------------

class _MatchProxyMeta(type):
    """The metaclass of the class a checked class pattern sees.

    `isinstance(subject, proxy)` accepts real instances of the pattern's class (checking private
    attribute names against the subject), and delegates to `isinstance` for virtual subclasses
    only when every attribute the pattern reads is public. `__match_args__` is a snapshot taken
    and checked by `match_class`, so no code can change it between the check and the reads.
    """

    def __instancecheck__(proxy: Any, subject: Any) -> bool:
        target = proxy._corral_target
        private = proxy._corral_private
        for cls in _type_mro(type(subject)):
            if cls is target:
                for name in private:
                    check_private(subject, name)
                return True
        if private:
            return False
        return isinstance(subject, target)

    def __subclasscheck__(proxy: Any, cls: Any) -> bool:
        return issubclass(cls, proxy._corral_target)


_proxies: dict[tuple[int, int, tuple[str, ...], bool], tuple[type, tuple[Any, ...], type]] = {}


def _match_args(cls: type) -> tuple[Any, ...]:
    """The `__match_args__` of `cls`'s classes, then of its metaclass's, as CPython looks it up,
    found without comparing a key the script made: a namespace key can be a str subclass whose
    `__eq__` answers differently each time."""
    for base in (*_type_mro(cls), *_type_mro(type(cls))):
        for key, value in _type_dict(base).items():
            if type(key) is str and key == '__match_args__':
                if type(value) is not tuple:
                    raise TypeError(f'{_type_name(cls)}.__match_args__ must be a tuple (got {_type_name(type(value))})')
                return value
    return ()


def match_class(cls: Any, positional: int, keywords: tuple[str, ...]) -> Any:
    """The class a pattern `cls(p1, ..., k=p)` should match with: `cls` itself when it reads no
    attributes that need checking, else a proxy (see `_MatchProxyMeta`)."""
    if not _is_class(cls):
        return cls  # CPython raises "called match pattern must be a class"
    for name in keywords:  # the validator refuses these already
        if name in FILTERED_ATTRIBUTES:
            raise TypeError(f"a class pattern cannot read '{name}' in the sandbox; match without it and read .{name} in the case body")
    private_keywords = tuple(name for name in keywords if is_private(name))
    if not positional and not private_keywords:
        return cls
    match_args = _match_args(cls)
    if positional and not match_args and not private_keywords and _type_flags(cls) & _TPFLAGS_MATCH_SELF:
        # int(x), str(x) ...: the subject itself, no attribute read. A builtin class is used as it
        # is; a script's subclass gets a proxy: CPython would look up its __match_args__ again, in
        # its namespace, a metaclass's too, where script code can answer otherwise.
        if not _type_flags(cls) & _TPFLAGS_HEAPTYPE:
            return cls
        return _match_proxy(cls, (), (), self_match=True)
    for name in match_args[:positional]:
        if type(name) is not str:
            continue  # CPython reports it
        refusal = attribute_refusal(name)
        if refusal is not None:
            raise TypeError(
                f'class pattern {_type_name(cls)}(...) would read {refusal[0].lower()}{refusal[1:]} '
                f'(named in {_type_name(cls)}.__match_args__)'
            )
        if name in FILTERED_ATTRIBUTES:  # CPython would read it with no filter
            raise TypeError(
                f"class pattern {_type_name(cls)}(...) would read '{name}' (named in {_type_name(cls)}.__match_args__), "
                f'which a class pattern cannot read in the sandbox; match {_type_name(cls)}() and read .{name} in the case body'
            )
    private = tuple(name for name in match_args[:positional] if type(name) is str and is_private(name)) + private_keywords
    return _match_proxy(cls, match_args, private)


def _match_proxy(cls: type, match_args: tuple[Any, ...], private: tuple[str, ...], *, self_match: bool = False) -> type:
    """The proxy class a pattern matches with instead of `cls` (see `_MatchProxyMeta`), cached.

    Its `__match_args__` is `match_args`, the snapshot `match_class` checked. A `self_match` proxy
    (a subclass of a builtin that matches itself, with no `__match_args__`) has none and derives
    from that builtin, so CPython matches the subject itself.
    """
    key = (id(cls), id(match_args), private, self_match)
    cached = _proxies.get(key)
    if cached is not None and cached[0] is cls and cached[1] is match_args:
        return cached[2]
    namespace: dict[str, Any] = {'_corral_target': cls, '_corral_private': private, '__slots__': ()}
    bases: tuple[type, ...] = ()
    builtin = next((base for base in _type_mro(cls) if not _type_flags(base) & _TPFLAGS_HEAPTYPE and _type_flags(base) & _TPFLAGS_MATCH_SELF), None)
    if self_match and builtin is not None:
        bases = (builtin,)
    else:  # a metaclass's mro() can hide the builtin: then it accepts no positional sub-pattern
        namespace['__match_args__'] = match_args
    proxy = _MatchProxyMeta(_type_name(cls), bases, namespace)
    _proxies[key] = (cls, match_args, proxy)
    return proxy


class _MatchResolver:
    """`__corral_match__.c<N>`: the class of rewritten class pattern N, looked up when the case runs.

    The rewrite puts `__corral_t<N>__ = lambda: <the dotted name>` before the match statement, so
    the lookup happens in the pattern's own scope (closures included), and only if the case runs.
    """

    __slots__ = ('_specs',)

    def __init__(self, specs: list[tuple[tuple[str, ...], int, tuple[str, ...]]]) -> None:
        self._specs = specs

    def __getattr__(self, key: str) -> Any:
        index = int(key[1:])
        path, positional, keywords = self._specs[index]
        frame = sys._getframe(1)
        try:
            scope = frame.f_locals
            top = frame.f_globals  # the script's top level is a function whose names are all global
            class_body = not (frame.f_code.co_flags & _CO_OPTIMIZED) and scope is not top
        finally:
            del frame
        head = path[0]
        if class_body and head in scope:  # a name of the class body itself (the thunk cannot see those)
            obj = scope[head]
            for part in path[1:]:
                obj = guarded_getattr(obj, part)
        else:
            thunk = f'__corral_t{index}__'
            obj = (scope[thunk] if thunk in scope else top[thunk])()
        return match_class(obj, positional, keywords)


_CO_OPTIMIZED = 0x1


# ----- refused builtins ------------------------------------------------------------------------

_object_getattribute = object.__getattribute__


class _Unavailable:
    """Stands in the builtins for a builtin the sandbox does not offer; using it raises NameError."""

    __slots__ = ('_hint', '_name')

    def __init__(self, name: str, hint: str) -> None:
        self._name = name
        self._hint = hint

    def _error(self) -> NameError:
        name = _object_getattribute(self, '_name')
        hint = _object_getattribute(self, '_hint')
        return NameError(f'{name}() is not available in the sandbox; {hint}', name=name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise _object_getattribute(self, '_error')()

    def __getattribute__(self, name: str) -> Any:
        raise _object_getattribute(self, '_error')()

    def __repr__(self) -> str:
        return f"<{_object_getattribute(self, '_name')}: not available in the sandbox>"


def unavailable(name: str, hint: str) -> Any:
    return _Unavailable(name, hint)


def private_setattr(value: Any, obj: Any, name: str) -> None:
    """`x._y = v` (rewritten; the value comes first, as Python evaluates it first)."""
    cls = type(obj)
    if _fast.get(id(cls)) is not cls:
        check_private(obj, name)
    setattr(obj, name, value)


async def top_level_call(func: Any, /, *args: Any, **kwargs: Any) -> Any:
    """`await __corral_run__(f, ...)` (rewritten from a top-level `f(...)` named `run`): the
    sandbox's `asyncio.run` awaits its coroutine on the feed's loop; anything else is called."""
    if func is run:
        return await top_level_run(*args, **kwargs)
    return func(*args, **kwargs)


def make_guards(match_specs: list[tuple[tuple[str, ...], int, tuple[str, ...]]]) -> dict[str, Any]:
    """The `__corral...` names the rewritten code calls, for a builtins namespace."""
    global _FOREIGN_METACLASSES
    if not _FOREIGN_METACLASSES:
        _FOREIGN_METACLASSES = _metaclasses_before_scripts()
        _install_class_rule()
        if sys.version_info >= (3, 12):
            # Protocol lists a protocol's members as the class is made, the mark still in its dict
            typing.EXCLUDED_ATTRIBUTES = typing.EXCLUDED_ATTRIBUTES | {MARK_NAME}  # type: ignore[attr-defined]

    inplace = {f'__corral_{name}__': getattr(operator, name) for name in INPLACE.values()}
    return {
        **inplace,
        '__corral_setattr__': private_setattr,
        '__corral_getattr__': private_getattr,
        '__corral_attrs__': _AttributeTarget,
        '__corral_format__': format_attribute,
        '__corral_dict__': attribute_dict,
        '__corral_own__': own_attribute,
        '__corral_clock__': clock_attribute,
        '__corral_stop__': reraise_stop,
        '__corral_with__': _With,
        '__corral_async_with__': _AsyncWith,
        '__corral_match__': _MatchResolver(match_specs),
        '__corral_run__': top_level_call,
        '__corral_mark__': MARK,
        '__build_class__': build_class,
    }
