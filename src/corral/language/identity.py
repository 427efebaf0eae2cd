"""Identity values a replay gives back: `id()`, identity hashes and default reprs, from a counter.

CPython derives an object's `id()`, the hash of an object hashed by identity (an instance of a
class that defines no `__hash__`, a function, a class, a bound method, `object()`) and its
default repr (`<__main__.Task object at 0x7f...>`) from its memory address. Addresses depend on
everything the process allocated before, so a worker replaying a stored session's journal (see
`corral.host.journal`) would order a set of the script's objects differently, print other ids,
and go another way than the recorded run. In the worker these values come from a counter of the
session instead: the first time an object's identity is asked for, it gets the next number, and
keeps it for its life. A replay asks in the same order, so it gets the same numbers, whatever
the allocator does.

- `id(x)` (the sandbox's `id`, for any object) is `_BASE + 16 * number`, an address-like int;
  two live objects never share one, and a number is never handed out twice.
- The identity hash of a *counted* object is `id(x) >> 4`, as CPython's is of an aligned
  address: the objects the script makes (instances of any class without a hash of its own,
  `object()` sentinels, tasks; the script's classes, functions, lambdas, generators and
  coroutines) and bound methods of them. Objects made before the session (the standard
  library's classes and functions, modules, builtins) keep CPython's hash: the interpreter's own
  tables are keyed by them.
- Default reprs of counted objects show their `id` (`<__main__.Task object at 0x7f0000000010>`).

How: `install()` (in the zygote, before any worker is forked) puts the functions of this module
in the type dicts of `object`, `type`, `function`, `method` and the generator types, and points
the hash (and repr) slot of every type that used CPython's address hash at CPython's own
generic slot function, which calls them; `activate()` (in each forked worker) turns counting on.
An object hashed before that keeps CPython's hash for its life, so no table built before it
breaks. A number is dropped when its object dies (a weak reference's callback); an object that
cannot have weak references (`object()`, a class with `__slots__` and no `__weakref__`) is kept
alive once its identity was asked for.
"""

from __future__ import annotations

import ctypes
import gc
import sys
import types
import weakref
from typing import Any

__all__ = ['activate', 'count_class', 'install', 'sandbox_id', 'uncounted']

#: The first id handed out, less 16: ids look like the addresses of a 64-bit heap.
_BASE = 0x7F0000000000

_TP_REPR = 11  # the index of `tp_repr` among the pointer-sized fields of a `PyTypeObject` (`install` checks the layout)
_TP_HASH = 15  # and of `tp_hash`
_SCRIPT = '<script '  # how the worker names the code of a script (`runtime.Worker._compile`)

_real_id = id
_object_hash = object.__hash__  # CPython's address hash, whatever the slots point at later
_object_repr = object.__repr__
_type_hash = type.__hash__
_function_repr = types.FunctionType.__repr__
_method_hash = types.MethodType.__hash__
_type_module = type.__dict__['__module__'].__get__
_type_qualname = type.__dict__['__qualname__'].__get__
_GENERATORS = (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)
#: Their ids: a script's class whose metaclass says it equals one (`__eq__`) is not one.
_GENERATOR_IDS = frozenset(map(_real_id, _GENERATORS))
_NOT_COUNTED = frozenset(map(_real_id, (types.ModuleType, types.BuiltinFunctionType, types.MethodWrapperType, types.CodeType)))


class _Number(weakref.ref):  # type: ignore[type-arg]
    """The number of a live object that can have weak references; the entry goes when it dies.
    `hashed`: its identity hash is the number (it is counted: see `_counted`)."""

    __slots__ = ('key', 'number', 'hashed')


class _Kept:
    """The number of an object that cannot have weak references: the entry keeps it alive."""

    __slots__ = ('key', 'number', 'hashed', 'obj')


_entries: dict[int, Any] = {}  # the object's address -> its _Number or _Kept
_counter = 0
_active = False
_old: dict[int, Any] = {}  # addresses of objects hashed before `activate`: CPython's hash for their life
_classes: dict[int, type] = {}  # classes the script made, counted (and kept: their addresses are never reused)


def _forget(ref: _Number) -> None:
    if _entries.get(ref.key) is ref:
        del _entries[ref.key]


def _old_gone(ref: _OldRef) -> None:
    if _old.get(ref.key) is ref:
        del _old[ref.key]


def _entry(obj: Any) -> Any:
    """The object's entry, with a number handed out now if it has none."""
    global _counter
    key = _real_id(obj)
    entry = _entries.get(key)
    if entry is not None:
        return entry
    _counter += 1
    if type(obj).__weakrefoffset__:  # it can have weak references
        entry = _Number(obj, _forget)
    else:
        entry = _Kept()
        entry.obj = obj
    entry.key = key
    entry.number = _counter
    entry.hashed = False
    _entries[key] = entry
    return entry


def sandbox_id(obj: Any, /) -> int:
    """The sandbox's `id()`: an int unique among the live objects, the same on every replay."""
    return _BASE + 16 * _entry(obj).number


def count_class(cls: type) -> None:
    """Count `cls`, a class the script made: its own identity from now on (its instances, like
    every object made in the session, are counted anyway)."""
    _classes[_real_id(cls)] = cls


def _counted(obj: Any) -> bool:
    """Whether the identity of `obj` comes from the counter (see the module's docstring)."""
    kind = type(obj)
    if kind is types.FunctionType:
        return obj.__code__.co_filename.startswith(_SCRIPT)
    if _real_id(kind) in _GENERATOR_IDS:
        return _code(obj).co_filename.startswith(_SCRIPT)
    if issubclass(kind, type):
        return _real_id(obj) in _classes
    if _real_id(kind) in _NOT_COUNTED:
        return False
    key = _real_id(obj)
    if key in _old:
        return False
    if not _active:
        _remember_old(obj, key)
        return False
    return True


def _code(generator: Any) -> types.CodeType:
    return generator.gi_code if type(generator) is types.GeneratorType else generator.cr_code if type(generator) is types.CoroutineType else generator.ag_code


class _OldRef(weakref.ref):  # type: ignore[type-arg]
    __slots__ = ('key',)


def _remember_old(obj: Any, key: int) -> None:
    if not type(obj).__weakrefoffset__:
        _old[key] = obj  # kept alive: its address is never another object's
        return
    ref = _OldRef(obj, _old_gone)
    ref.key = key
    _old[key] = ref


def _identity_hash(self: Any) -> int:
    entry = _entries.get(_real_id(self))
    if entry is not None and entry.hashed:  # hashed before: the same number
        return (_BASE >> 4) + entry.number
    if _counted(self):
        entry = _entry(self)
        entry.hashed = True
        return (_BASE >> 4) + entry.number
    return _object_hash(self)


def _class_hash(self: Any) -> int:
    if _real_id(self) in _classes:
        return (_BASE >> 4) + _entry(self).number
    return _type_hash(self)


def _bound_hash(self: Any) -> int:
    if type(self) is not types.MethodType:  # `MethodType.__hash__(x)`: CPython's TypeError
        return _method_hash(self)
    owner, function = self.__self__, self.__func__
    if _counted(owner) or _counted(function):
        return hash((sandbox_id(owner), function))
    return _method_hash(self)


def _identity_repr(self: Any) -> str:
    if not _counted(self):
        return _object_repr(self)
    kind = type(self)
    module, qualname = _type_module(kind), str.__str__(_type_qualname(kind))
    if not isinstance(module, str):  # as CPython: a module that is not a str is left out
        return f'<{qualname} object at {sandbox_id(self):#x}>'
    module = str.__str__(module)  # a str subclass's own methods do not run
    name = qualname if module == 'builtins' else f'{module}.{qualname}'
    return f'<{name} object at {sandbox_id(self):#x}>'


def _function_identity_repr(self: Any) -> str:
    own = _slot_wrappers.get(_real_id(self))
    if own is not None:  # one of this module's: shown as the slot wrapper it stands in for
        return own
    if type(self) is not types.FunctionType or not _counted(self):  # CPython's (its TypeError for another type)
        return _function_repr(self)
    return f'<function {self.__qualname__} at {sandbox_id(self):#x}>'


def _generator_identity_repr(kind: type) -> Any:
    real = kind.__repr__

    def __repr__(self: Any) -> str:
        if type(self) is not kind or not _counted(self):
            return real(self)
        return f'<{kind.__name__} object {self.__qualname__} at {sandbox_id(self):#x}>'

    return __repr__


_slot_wrappers: dict[int, str] = {}


def _dressed(function: Any, owner: type, name: str) -> Any:
    function.__name__ = name
    function.__qualname__ = f'{owner.__name__}.{name}'
    function.__module__ = 'builtins'
    _slot_wrappers[_real_id(function)] = f"<slot wrapper '{name}' of '{owner.__name__}' objects>"
    return function


def _slot(cls: type, index: int) -> ctypes.c_void_p:
    return ctypes.c_void_p.from_address(_real_id(cls) + index * ctypes.sizeof(ctypes.c_void_p))


def _generic_slots() -> tuple[int, int]:
    """CPython's generic `tp_hash` and `tp_repr` (`slot_tp_hash`, `slot_tp_repr`: they call the
    type's `__hash__` and `__repr__`), read off a class that defines both."""

    class Probe:
        def __hash__(self) -> int:
            return 0

        def __repr__(self) -> str:
            return ''

    return _slot(Probe, _TP_HASH).value or 0, _slot(Probe, _TP_REPR).value or 0


def _all_types() -> list[type]:
    subclasses = type.__dict__['__subclasses__']
    found: dict[int, type] = {_real_id(object): object}
    pending: list[type] = [object]
    while pending:
        for sub in subclasses(pending.pop()):
            if _real_id(sub) not in found:
                found[_real_id(sub)] = sub
                pending.append(sub)
    return list(found.values())


def _keys_hashed_so_far() -> None:
    """Remember the objects already in a dict or set: their hash stays CPython's."""
    seen: set[int] = set()

    def take(key: Any) -> None:
        if type(key) is tuple:
            for item in key:
                take(item)
        elif issubclass(type(key), weakref.ref):
            target = key()
            if target is not None:
                take(target)
        elif type(key).__hash__ is _object_hash and _real_id(key) not in _old:
            _remember_old(key, _real_id(key))

    def scan(container: Any) -> None:
        if _real_id(container) in seen:
            return
        seen.add(_real_id(container))
        kind = type(container)
        keys = list(dict.keys(container)) if issubclass(kind, dict) else list(set.__iter__(container)) if issubclass(kind, set) else list(frozenset.__iter__(container))
        for key in keys:
            take(key)

    for obj in gc.get_objects():
        if issubclass(type(obj), (dict, set, frozenset)):
            scan(obj)
        for referent in gc.get_referents(obj):
            if type(referent) is dict and not gc.is_tracked(referent):  # a dict of atoms and untracked objects
                scan(referent)


def install() -> None:
    """Route identity hashes and default reprs through this module (once, before workers fork).

    Raises RuntimeError when this interpreter's type objects are not laid out as expected
    (the address hash is not where `tp_hash` should be): identity values would not replay.
    """
    if object.__dict__['__hash__'] is _identity_hash:
        return
    address_hash = _address_hash()
    object_repr = _slot(object, _TP_REPR).value
    if _slot(object, _TP_HASH).value != address_hash or _slot(type, _TP_HASH).value != address_hash:
        raise RuntimeError(f'this Python ({sys.version.split()[0]}) lays out its type objects in a way corral does not know; identity values would not replay')
    hash_slot, repr_slot = _generic_slots()
    _keys_hashed_so_far()
    overrides: list[tuple[type, str, Any, int, int]] = [
        (object, '__hash__', _dressed(_identity_hash, object, '__hash__'), _TP_HASH, hash_slot),
        (object, '__repr__', _dressed(_identity_repr, object, '__repr__'), _TP_REPR, repr_slot),
        (type, '__hash__', _dressed(_class_hash, type, '__hash__'), _TP_HASH, hash_slot),
        (types.MethodType, '__hash__', _dressed(_bound_hash, types.MethodType, '__hash__'), _TP_HASH, hash_slot),
        (types.FunctionType, '__repr__', _dressed(_function_identity_repr, types.FunctionType, '__repr__'), _TP_REPR, repr_slot),
    ]
    overrides += [(kind, '__repr__', _dressed(_generator_identity_repr(kind), kind, '__repr__'), _TP_REPR, repr_slot) for kind in _GENERATORS]
    for cls, name, function, index, generic in overrides:
        (namespace,) = gc.get_referents(cls.__dict__)
        namespace[name] = function
        _slot(cls, index).value = generic
        _modified(cls)
    # types that took CPython's address hash (or object's repr) from their base when they were made
    for cls in _all_types():
        if _slot(cls, _TP_HASH).value == address_hash:
            _slot(cls, _TP_HASH).value = hash_slot
        if _slot(cls, _TP_REPR).value == object_repr:
            _slot(cls, _TP_REPR).value = repr_slot
    sys._clear_type_cache()


def _address_hash() -> int | None:
    """Where CPython's address hash function is: `_Py_HashPointer` up to 3.12. 3.13 no longer
    exports it (its public `Py_HashPointer` is another function), so there it is `object`'s
    `tp_hash`, if hashing a probe through that slot gives the probe's address hash (else None)."""
    if sys.version_info < (3, 13):
        return ctypes.cast(ctypes.pythonapi._Py_HashPointer, ctypes.c_void_p).value
    address = _slot(object, _TP_HASH).value
    probe = object()
    hash_of = ctypes.pythonapi.Py_HashPointer
    hash_of.argtypes, hash_of.restype = [ctypes.c_void_p], ctypes.c_ssize_t
    if not address or ctypes.CFUNCTYPE(ctypes.c_ssize_t, ctypes.py_object)(address)(probe) != hash_of(_real_id(probe)):
        return None
    return address


def _modified(cls: type) -> None:
    """Tell CPython a type's dict changed behind its back (its caches of lookups, and its subclasses')."""
    ctypes.pythonapi.PyType_Modified(ctypes.py_object(cls))


def activate() -> None:
    """Count from now on (in a forked worker, before its first feed)."""
    global _active
    _active = True


def uncounted() -> _Uncounted:
    """Hand out no numbers meanwhile (`with uncounted():`): for the worker's own work that a
    journal does not record (compiling a script whose type check may then fail, so that its feed
    never runs)."""
    return _Uncounted()


class _Uncounted:
    """The context manager of `uncounted`, which every feed enters: a class, since a
    `contextlib.contextmanager` took 3.9× its time (alternated in one process)."""

    __slots__ = ('_active',)

    def __enter__(self) -> None:
        global _active
        self._active, _active = _active, False

    def __exit__(self, *exc_info: object) -> None:
        global _active
        _active = self._active
