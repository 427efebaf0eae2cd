"""Type objects and builtin functions that cross the sandbox boundary by name (`SandboxBuiltin`).

One table, read by both sides: the host resolves a name to its own class (`host_pairs`), a worker
to the object its script reaches by that name (`sandbox_pairs`: the session's builtins, the
standard library facades). Nothing crosses that the script could not reach itself, and a name
outside the table is refused on both sides.

- `DATA_TYPES`: the data types (and the exception classes) a host has too: each side gets its
  own class. The `pathlib` classes are one, `pathlib.PurePosixPath` (a path names a place in the
  sender's files, so the receiver gets a path that reaches none of its own).
- `OTHER_TYPES`: types with no host counterpart a host should hold (`function`, `dict_keys`,
  `itertools.chain`): the host gets their `SandboxBuiltin`.
- `FUNCTIONS`: the builtin functions of a script (`len`, `open`, `print`, `object.__setattr__`,
  and the stand-ins of those it may not use, `exec`): the host gets their `SandboxBuiltin`.
"""

from __future__ import annotations

import builtins
import importlib
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

from ..values import SandboxBuiltin
from .builtins import EXCEPTIONS, SAFE_BUILTINS, STDLIB_EXCEPTIONS, UNAVAILABLE_BUILTINS
from .catalog import STDLIB_MODULES
from .guards import OBJECT_SETTERS
from .modules import stdlib_module
from .native import BUILTIN_FUNCTION_TYPE

__all__ = ['DATA_TYPES', 'FUNCTIONS', 'OTHER_TYPES', 'host_pairs', 'sandbox_pairs']

#: name -> (module, attribute) of each data type; 'builtins' is the script's builtins.
DATA_TYPES: dict[str, tuple[str, str]] = {
    **{name: ('builtins', name) for name in (
        'int', 'float', 'complex', 'str', 'bytes', 'bool', 'list', 'tuple', 'dict', 'set', 'frozenset', 'type', 'object',
    )},
    'NoneType': ('types', 'NoneType'),
    'ellipsis': ('types', 'EllipsisType'),
    'NotImplementedType': ('types', 'NotImplementedType'),
    **{f'datetime.{name}': ('datetime', name) for name in ('datetime', 'date', 'time', 'timedelta', 'timezone', 'tzinfo')},
    'decimal.Decimal': ('decimal', 'Decimal'),
    'uuid.UUID': ('uuid', 'UUID'),
    'pathlib.PurePosixPath': ('pathlib', 'PurePosixPath'),
    're.Pattern': ('re', 'Pattern'),
    're.Match': ('re', 'Match'),
    'collections.deque': ('collections', 'deque'),
    'types.GenericAlias': ('types', 'GenericAlias'),
    'types.UnionType': ('types', 'UnionType'),
    **{name: ('builtins', name) for name in EXCEPTIONS},
    **STDLIB_EXCEPTIONS,
}  # fmt: skip

#: The other classes of the data types' names: they cross as that name, and come back as its class.
_ALIASES: dict[str, tuple[tuple[str, str], ...]] = {
    'pathlib.PurePosixPath': (('pathlib', 'PurePath'), ('pathlib', 'PosixPath'), ('pathlib', 'Path')),
}

#: name -> how a worker reaches each other type (the host has no class for them).
OTHER_TYPES: dict[str, Callable[[], type]] = {
    'function': lambda: types.FunctionType,
    'builtin_function_or_method': lambda: types.BuiltinFunctionType,
    'dict_keys': lambda: type({}.keys()),
    'dict_values': lambda: type({}.values()),
    'dict_items': lambda: type({}.items()),
    'list_iterator': lambda: type(iter([])),
    'tuple_iterator': lambda: type(iter(())),
    'set_iterator': lambda: type(iter(set())),
    'str_ascii_iterator': lambda: type(iter('')),
    'range_iterator': lambda: type(iter(range(0))),
    'callable_iterator': lambda: type(iter(list, None)),
    'generator': lambda: types.GeneratorType,
    'coroutine': lambda: types.CoroutineType,
    'sys.version_info': lambda: type(stdlib_module('sys').version_info),
    **{name: (lambda name=name: getattr(builtins, name)) for name in (
        'bytearray', 'range', 'slice', 'enumerate', 'zip', 'map', 'filter', 'reversed', 'property', 'classmethod',
        'staticmethod', 'super',
    )},
    **{f'itertools.{name}': (lambda name=name: getattr(stdlib_module('itertools'), name)) for name in (
        'chain', 'count', 'cycle', 'repeat', 'islice', 'product', 'permutations', 'combinations', 'groupby',
        'zip_longest', 'accumulate', 'starmap', 'takewhile', 'dropwhile', 'pairwise',
    )},
    'functools.partial': lambda: stdlib_module('functools').partial,
    **{f'collections.{name}': (lambda name=name: getattr(stdlib_module('collections'), name)) for name in (
        'OrderedDict', 'Counter', 'defaultdict', 'ChainMap',
    )},
}  # fmt: skip

#: The sandbox's `object.__setattr__` and `object.__delattr__` (`guards.OBJECT_SETTERS`), by name.
_OBJECT_SETTERS = {'object.__setattr__': '__setattr__', 'object.__delattr__': '__delattr__'}

#: The names of a script's builtin functions (its own `print`, `open`, `getattr`, ... among them).
FUNCTIONS: frozenset[str] = frozenset(
    name for name in SAFE_BUILTINS if callable(getattr(builtins, name)) and not isinstance(getattr(builtins, name), type)
) | {'getattr', 'hasattr', 'setattr', 'delattr', 'vars', 'id', 'print', 'open'} | UNAVAILABLE_BUILTINS.keys() | _OBJECT_SETTERS.keys()


def _real(module: str, attr: str) -> Any:
    return getattr(sys.modules.get(module) or importlib.import_module(module), attr)


def host_pairs() -> Iterator[tuple[SandboxBuiltin, Any]]:
    """The host's `(name, object)` pairs for `values.name_objects`: its own class of each data
    type, None for the other types and the functions."""
    for name, (module, attr) in DATA_TYPES.items():
        named = SandboxBuiltin('type', name)
        yield named, _real(module, attr)
        for alias in _ALIASES.get(name, ()):
            yield named, _real(*alias)
    for name in OTHER_TYPES:
        yield SandboxBuiltin('type', name), None
    for name in FUNCTIONS:
        yield SandboxBuiltin('function', name), None


def sandbox_pairs(namespace: dict[str, Any]) -> Iterator[tuple[SandboxBuiltin, Any]]:
    """A worker's `(name, object)` pairs: what its script reaches by each name, its builtins
    `namespace` for the builtins, the standard library facades for the rest."""

    def reach(module: str, attr: str) -> Any:
        if module == 'builtins':
            return namespace[attr]
        facade = stdlib_module(module) if module in STDLIB_MODULES else None
        return getattr(facade, attr) if facade is not None and hasattr(facade, attr) else _real(module, attr)

    for name, (module, attr) in DATA_TYPES.items():
        named = SandboxBuiltin('type', name)
        yield named, reach(module, attr)
        for alias in _ALIASES.get(name, ()):
            yield named, reach(*alias)
    # the class of the sandbox's own stand-ins (`print`, `open`, `getattr`) first: `type(print)` comes back as itself
    yield SandboxBuiltin('type', 'builtin_function_or_method'), BUILTIN_FUNCTION_TYPE
    for name, get in OTHER_TYPES.items():
        yield SandboxBuiltin('type', name), get()
    for name in FUNCTIONS - _OBJECT_SETTERS.keys():
        yield SandboxBuiltin('function', name), namespace[name]
    for name, attr in _OBJECT_SETTERS.items():
        yield SandboxBuiltin('function', name), OBJECT_SETTERS[attr]
