"""A script's objects that cross the boundary as data: exceptions, named tuples, class instances, open files, host modules.

An object of a class the script made (or of the standard library's: an exception, a named tuple)
has code the other side must never run, so it crosses as a description: its class's name and
module, and its data. The host receives these classes, inert (no reference to the object, its
class or the worker; they compare and hash by their data, as the data crosses), and may send
an exception or a named tuple back in, where the sandbox builds the real object again:

    a script's value                       arrives on the host as
    ValueError('bad', 3)                   ExceptionValue('ValueError', 'builtins', ('bad', 3), 'ValueError')
    Point(x=1, y=2) (a named tuple)        NamedTupleValue((1, 2), 'Point', '__main__', ('x', 'y'))
    an instance of a class, a dataclass    InstanceValue('Order', '__main__', {'id': 7, ...}, is_dataclass=True)
    open('/data/a.txt')                    FileValue('/data/a.txt', 'r', 0)
    import tools; tools (a host module)    ModuleValue('tools', {'add': 'tools.add', 'VERSION': 3})

What a description holds is plain data of the kinds in `corral.values`, converted and bounded as
any value is (`value_items`, `value_size`, `MAX_DEPTH`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ['ExceptionValue', 'FileValue', 'InstanceValue', 'ModuleValue', 'NamedTupleValue']


@dataclasses.dataclass(frozen=True)
class ExceptionValue:
    """An exception as a value (made or caught, not raised).

    `type_name` and `module`: its class's `__name__` and `__module__` (`'JSONDecodeError'`,
    `'json.decoder'`); `args`: its `args`; `base`: the name of the nearest class of `builtins`
    among its classes (`'ValueError'` for `class MyError(ValueError)`), which the sandbox builds
    when it has no class of that name (an exception sent in is rebuilt as its class when that is
    a built-in one or one of the standard library's the sandbox has, else as `base`).
    """

    type_name: str
    module: str
    args: tuple[Any, ...]
    base: str

    def __str__(self) -> str:
        """What `str()` of a built-in exception of these args is (its own class may differ)."""
        if not self.args:
            return ''
        return str(self.args[0]) if len(self.args) == 1 else str(self.args)


class NamedTupleValue(tuple):  # type: ignore[type-arg]
    """A named tuple (or a struct sequence: `sys.version_info`) as data: a tuple of its values, whose
    fields read as attributes (`p.x`), with `_fields`, `_type_name` and `_module` (its class's
    `__name__` and `__module__`). Compares and hashes as the tuple it is; read-only."""

    _fields: tuple[str, ...]
    _type_name: str
    _module: str

    def __new__(cls, values: Any, type_name: str, module: str, fields: tuple[str, ...]) -> NamedTupleValue:
        self = super().__new__(cls, values)
        if len(fields) != len(self):
            raise ValueError(f'a named tuple of {len(fields)} fields and {len(self)} values')
        object.__setattr__(self, '_fields', tuple(fields))
        object.__setattr__(self, '_type_name', type_name)
        object.__setattr__(self, '_module', module)
        return self

    def __getattr__(self, name: str) -> Any:
        fields = self.__dict__['_fields']
        if name in fields:
            return self[fields.index(name)]
        raise AttributeError(f"'{self.__dict__['_type_name']}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"'{self._type_name}' object is read-only")

    def __repr__(self) -> str:
        return f'{self._type_name}({", ".join(f"{name}={value!r}" for name, value in zip(self._fields, self))})'

    def __reduce__(self) -> Any:
        return (NamedTupleValue, (tuple(self), self._type_name, self._module, self._fields))

    def _asdict(self) -> dict[str, Any]:
        """The fields and their values, in order."""
        return dict(zip(self._fields, self))


@dataclasses.dataclass(frozen=True)
class InstanceValue:
    """An instance of a class of the script's (a dataclass's too), as data.

    `type_name` and `module`: its class's `__name__` and `__module__`; `attrs`: its attributes
    (a dataclass's fields, in order, else the instance's `__dict__` and `__slots__` values);
    `is_dataclass`: whether its class is a dataclass. A description stays on the host: it does
    not cross back into the sandbox (its class is the script's code)."""

    type_name: str
    module: str
    attrs: dict[str, Any]
    is_dataclass: bool = False

    __hash__ = None  # type: ignore[assignment]  # its attrs are a dict: unhashable, as a dict is


@dataclasses.dataclass(frozen=True)
class FileValue:
    """A file the script opened (`open()`), as data: its `path` as the script named it, its `mode`
    as the script gave it (`'r'`, `'wb'`, ...) and its `position` (bytes from its start; 0 once
    closed). It opens nothing: a description stays on the host and does not cross back into the
    sandbox. `binary`, `readable` and `writable` follow from the mode."""

    path: str
    mode: str
    position: int

    @property
    def binary(self) -> bool:
        return 'b' in self.mode

    @property
    def readable(self) -> bool:
        return 'r' in self.mode or '+' in self.mode

    @property
    def writable(self) -> bool:
        return any(c in self.mode for c in 'wax+')


@dataclasses.dataclass(frozen=True)
class ModuleValue:
    """A module the session offered (`external_modules`, `add_external_module`) that the script
    holds as a value (`import tools` then `tools`), as data: its `name` as offered (`'pkg.sub'`),
    and `attrs`, its public attributes as the script sees them: a value as it is, a submodule as
    a `ModuleValue`, a host function as its dotted name (`'tools.add'`). A script gets one object
    for every import of a name, as CPython does. A description stays on the host: it does not
    cross back into the sandbox (a script imports its modules)."""

    name: str
    attrs: dict[str, Any]

    __hash__ = None  # type: ignore[assignment]  # its attrs are a dict: unhashable, as a dict is
