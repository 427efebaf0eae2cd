"""Values of Monty's wire protocol: an `Arena` of nodes to Python values, and back.

An arena is a flat list of nodes; a container names its children by index, and every child comes
before its holder, so a value is built in one pass and a reference to a node that is not built yet
(a dangling index, or a cycle) cannot be expressed: it is refused. A sub-value shared by two
holders is one node, and one object here.

What is built is plain data of the kinds that cross into corral's sandbox (see `corral.values`);
a host function is a `ClientFunction` (the parent's function of that name, called through it); a
builtin type or function (`type` and `builtin_function` nodes) is the host's class or a
`SandboxBuiltin`, by name. Nodes that are only ever output (`repr`, `cycle`) or that name objects
living in the parent (host class instances, the parent's own classes) are refused with
`ArenaError` naming the node.
"""

from __future__ import annotations

import builtins
import datetime
import decimal
import importlib
import json
import pathlib
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..described import ExceptionValue, FileValue, InstanceValue, ModuleValue, NamedTupleValue
from ..language.builtins import STDLIB_EXCEPTIONS
from ..hostobjects import HostClass, HostObject
from ..values import HostFunction, SandboxBuiltin, bounded_repr, builtin_name, named_object
from . import monty_v1_pb2 as pb

__all__ = [
    'ArenaError', 'ClientClass', 'ClientFunction', 'ClientInstance', 'ClientModule', 'HeldClass', 'HeldFunction', 'HeldObject', 'MAX_NODES',
    'decode', 'encode', 'exception_from', 'exception_value',
]

#: Most nodes one arena may hold, whatever its `node_count` claims.
MAX_NODES = 1_000_000


class ArenaError(ValueError):
    """An arena that cannot be built: a dangling index, a node that cannot be an input, too many nodes."""


@dataclass(frozen=True)
class ClientFunction:
    """A function of the parent's (a `Function` node): calling it in a script suspends the feed
    on a `FunctionCall` the parent answers."""

    name: str
    docstring: str | None = None


class HeldFunction(HostFunction):
    """A function of the parent's that a script holds as a value (a `Function` node among the
    inputs or in a result): a `HostFunction` calling it through `call`, which goes back to the
    parent as the `Function` it came as (`client`)."""

    __slots__ = ('client',)

    def __init__(self, client: ClientFunction, call: Callable[..., Any]) -> None:
        super().__init__(call, name=client.name)
        self.client = client


@dataclass(frozen=True)
class ClientClass:
    """A class of the parent's (a `type` node of origin host, the client's `ClassType`): its name,
    its id and the class attributes sent with it."""

    name: str
    id: bytes
    attrs: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class ClientInstance:
    """An object of the parent's (a `class_instance` node of a host class, the client's
    `ClassInstance`): its class, its id and the attributes sent with it."""

    cls: ClientClass
    id: bytes
    attrs: dict[str, Any]


class HeldClass(HostClass):
    """A class of the parent's the script holds: a `HostClass` whose construction is a
    `FunctionCall` of `__call__` with the class's id (`construct`, a function the door gives; the
    parent decides whether it may be made), and whose attributes are read as a `HeldObject`'s are
    (`read`: the parent's lazy class attribute, else its classmethod)."""

    __slots__ = ('client', '_construct', '_read')

    def __init__(self, client: ClientClass, construct: Callable[..., Any], read: Callable[[str], Any]) -> None:
        self.client, self._construct, self._read = client, construct, read
        self.cls, self.init, self.methods, self.attributes, self.instance_methods, self.instance_attributes = object, True, (), None, (), ()

    @property
    def name(self) -> str:
        return self.client.name

    def construct(self, *args: Any, **kwargs: Any) -> Any:
        return self._construct(*args, **kwargs)

    def read_attribute(self, name: str) -> Any:
        return self.client.attrs[name] if name in self.client.attrs else self._read(name)


class HeldObject(HostObject):
    """An object of the parent's the script holds: a `HostObject` whose attributes are those the
    parent sent with it and, for any other public name, what `read(name)` gives: the door asks the
    parent (a `NameLookup` with the object's id) and gives its value, or a function whose calls are
    `FunctionCall`s of that method with the object's id, the parent checking what it allows."""

    __slots__ = ('client', '_read')

    def __init__(self, client: ClientInstance, cls: HeldClass, read: Callable[[str], Any]) -> None:
        self.client, self._read = client, read
        self.value, self.cls, self.methods, self.attributes = None, cls, (), None

    def read_attribute(self, name: str) -> Any:
        return self.client.attrs[name] if name in self.client.attrs else self._read(name)


@dataclass(frozen=True)
class ClientModule:
    """A module of the parent's (a `module` node): its attributes, functions as `ClientFunction`,
    and its `id` (16 bytes; None when the node has none), which every import of it carries."""

    name: str
    attrs: dict[str, Any]
    id: bytes | None = None


def decode(arena: pb.Arena, roots: Sequence[int], *, functions: Callable[[ClientFunction], Any] | None = None) -> list[Any]:
    """The values at indexes `roots` of `arena`, built bottom up; raises `ArenaError`.
    `functions` makes what a `Function` node is (given its `ClientFunction`: one the script may
    hold as a value and call), and a host class or object (given its `ClientClass` or
    `ClientInstance`: a `HeldClass`, a `HeldObject`); without it, the `Client...` itself."""
    nodes = arena.nodes
    if len(nodes) > MAX_NODES:
        raise ArenaError(f'the arena has {len(nodes)} nodes, more than the {MAX_NODES} a message may carry')
    built: list[Any] = []
    for index, node in enumerate(nodes):
        value = _node(node, index, built)
        built.append(functions(value) if functions is not None and type(value) in _HELD else value)
    out = []
    for root in roots:
        if root >= len(built):
            raise ArenaError(f'value index {root} is past the end of an arena of {len(built)} nodes')
        out.append(built[root])
    return out


#: The nodes `decode`'s `functions` makes something of: the parent's functions, classes, objects.
_HELD = (ClientFunction, ClientClass, ClientInstance)


def _public(attrs: list[tuple[Any, Any]]) -> bool:
    """Whether each attribute a host class or object came with has a public name."""
    return all(isinstance(name, str) and name.isidentifier() and not name.startswith('_') for name, _ in attrs)


def _child(built: list[Any], index: int, child: int) -> Any:
    if child >= index:
        raise ArenaError(f'node {index} refers to node {child}, which does not come before it')
    return built[child]


def _pairs(built: list[Any], index: int, pairs: Any) -> list[tuple[Any, Any]]:
    return [(_child(built, index, pair.key), _child(built, index, pair.value)) for pair in pairs]


def _node(node: pb.MontyNode, index: int, built: list[Any]) -> Any:
    kind = node.WhichOneof('kind')
    if kind is None:
        raise ArenaError(f'node {index} is empty')
    value = getattr(node, kind)
    if kind in ('none', 'ellipsis'):
        return None if kind == 'none' else ...
    if kind in ('boolean', 'int', 'str', 'bytes'):
        return value
    if kind == 'float':
        return value
    if kind == 'bigint':
        magnitude = int.from_bytes(value.magnitude, 'big')
        return -magnitude if value.negative else magnitude
    if kind in ('list', 'tuple', 'set', 'frozen_set'):
        items = [_child(built, index, item) for item in value.items]
        try:
            return {'list': list, 'tuple': tuple, 'set': set, 'frozen_set': frozenset}[kind](items)
        except TypeError as error:
            raise ArenaError(f'node {index}: {error}') from None
    if kind == 'named_tuple':
        return _named_tuple_in(value, index, built)
    if kind == 'exception':
        return _exception_in(value)
    if kind == 'dict':
        try:
            return dict(_pairs(built, index, value.pairs))
        except TypeError as error:
            raise ArenaError(f'node {index}: {error}') from None
    if kind == 'complex':
        return complex(value.real, value.imag)
    if kind == 'path':
        return pathlib.PurePosixPath(value)
    if kind == 'file_handle':  # the parent's description of a file: data, which does not reach the sandbox as a file
        return FileValue(value.path, value.mode, value.position)
    if kind == 'decimal':
        try:
            return decimal.Decimal(value)
        except decimal.InvalidOperation:
            raise ArenaError(f'node {index}: {value!r} is not a decimal') from None
    if kind == 'module':
        attrs = _pairs(built, index, value.attrs.pairs)
        if not all(isinstance(name, str) for name, _ in attrs):
            raise ArenaError(f'node {index}: a module attribute name that is not a str')
        return ClientModule(value.name, dict(attrs), value.id.data if value.HasField('id') else None)
    if kind == 'function':
        return ClientFunction(value.name, value.docstring if value.HasField('docstring') else None)
    if kind == 'type' and value.origin == pb.TYPE_ORIGIN_HOST:
        attrs = _pairs(built, index, value.attrs.pairs)
        if len(value.id.data) != 16 or not value.name.isidentifier() or not _public(attrs):
            raise ArenaError(f'node {index}: a host class needs a name, a 16-byte id and public attribute names')
        return ClientClass(value.name, value.id.data, dict(attrs))
    if kind == 'class_instance':
        cls = _child(built, index, value.class_type)
        cls = cls.client if isinstance(cls, HeldClass) else cls
        if type(cls) is not ClientClass:
            raise ArenaError(f"node {index}: an instance of a class that is not the parent's cannot be a value sent into the sandbox")
        attrs = _pairs(built, index, value.attrs.pairs)
        if len(value.instance_id.data) != 16 or not _public(attrs):
            raise ArenaError(f'node {index}: a host object needs a 16-byte id and public attribute names')
        return ClientInstance(cls, value.instance_id.data, dict(attrs))
    if kind in ('type', 'builtin_function'):
        return _builtin_in(kind, value, index)
    try:
        if kind == 'date':
            return datetime.date(value.year, value.month, value.day)
        if kind == 'time':
            return datetime.time(value.hour, value.minute, value.second, value.microsecond, _zone(value), fold=value.fold)
        if kind == 'datetime':
            return datetime.datetime(value.year, value.month, value.day, value.hour, value.minute, value.second, value.microsecond, _zone(value))
        if kind == 'timedelta':
            return datetime.timedelta(days=value.days, seconds=value.seconds, microseconds=value.microseconds)
        if kind == 'timezone':
            return _timezone(value.offset_seconds, value.name if value.HasField('name') else None)
    except (ValueError, OverflowError) as error:
        raise ArenaError(f'node {index}: {error}') from None
    raise ArenaError(f'node {index}: a {kind} node cannot be a value sent into the sandbox')


def _named_tuple_in(value: pb.NamedTupleNode, index: int, built: list[Any]) -> NamedTupleValue:
    """A `named_tuple` node (`type_name` a class's dotted name, `module.Name`) as a `NamedTupleValue`."""
    if len(value.field_names) != len(value.values):
        raise ArenaError(f'node {index}: a named tuple of {len(value.field_names)} names and {len(value.values)} values')
    module, _, name = value.type_name.rpartition('.')
    return NamedTupleValue([_child(built, index, item) for item in value.values], name, module or '__main__', tuple(value.field_names))


def _exception_in(value: pb.Exception) -> ExceptionValue:
    """An `exception` node (a Monty name, its one optional message) as an `ExceptionValue`."""
    args = (value.arg,) if value.HasField('arg') else ()
    cls = _CLASSES.get(value.exc_type) or getattr(builtins, value.exc_type, None)
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):  # a name the sandbox has no class of
        return ExceptionValue(value.exc_type, 'builtins', args, 'Exception')
    base = next(klass for klass in cls.__mro__ if getattr(builtins, klass.__name__, None) is klass)
    return ExceptionValue(cls.__name__, cls.__module__, args, base.__name__)


def _exception_out(value: ExceptionValue) -> pb.Exception:
    """An `ExceptionValue` as an `exception` node: its class's Monty name (a class the client has
    no name for, a script's own, as its nearest built-in base) and `str()` of it, as CPython's own
    class makes it (None for no args)."""
    name = _DOTTED.get((value.module.partition('.')[0], value.type_name))
    cls = _CLASSES[name] if name is not None else getattr(builtins, value.type_name, None) if value.module == 'builtins' else None
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        name, cls = value.base, getattr(builtins, value.base, Exception)
    node = pb.Exception(exc_type=name or cls.__name__)
    if value.args:
        try:
            node.arg = str(cls(*value.args))
        except Exception:  # args its constructor refuses: the text of its args; an int past str()'s digits: a bounded one
            try:
                node.arg = str(value)
            except ValueError:
                node.arg = bounded_repr(value.args[0] if len(value.args) == 1 else value.args)
    return node


def _timezone(offset: int, name: str | None) -> datetime.timezone:
    delta = datetime.timedelta(seconds=offset)
    return datetime.timezone(delta) if name is None else datetime.timezone(delta, name)


def _zone(value: Any) -> datetime.timezone | None:
    if not value.HasField('offset_seconds'):
        return None
    return _timezone(value.offset_seconds, value.timezone_name if value.HasField('timezone_name') else None)


#: The names Monty's clients give the standard library's exceptions corral names otherwise.
_MONTY_EXCEPTION_NAMES = {'re.error': 're.PatternError', 'csv.Error': '_csv.Error'}
#: And the types (`SandboxBuiltin`).
_MONTY_TYPE_NAMES = {
    **_MONTY_EXCEPTION_NAMES, 'pathlib.PurePosixPath': 'PosixPath', 'types.UnionType': 'typing.Union', 'sys.version_info': 'namedtuple',
}
_CORRAL_TYPE_NAMES = {monty: name for name, monty in _MONTY_TYPE_NAMES.items()}


def _builtin_in(kind: str, value: Any, index: int) -> Any:
    """A `type` node of a builtin type, or a `builtin_function` node: the host's class of a data
    type, else the `SandboxBuiltin` the sandbox resolves; a name it does not offer is refused."""
    if kind == 'type':
        if value.origin != pb.TYPE_ORIGIN_BUILTIN or value.HasField('id'):
            raise ArenaError(f'node {index}: a class of the parent\'s ({value.name!r}) cannot be a value sent into the sandbox')
        named = SandboxBuiltin('type', _CORRAL_TYPE_NAMES.get(value.name, value.name))
    else:
        named = SandboxBuiltin('function', value)
    try:
        return named_object(named)
    except ValueError as error:
        raise ArenaError(f'node {index}: {error}') from None


def _builtin_out(node: pb.MontyNode, value: Any) -> bool:
    """Fill `node` with `value` as a builtin type or function, if it is one (True)."""
    named = value if type(value) is SandboxBuiltin else builtin_name(value)
    if named is None:
        return False
    if named.kind == 'function':
        node.builtin_function = named.name
    else:
        node.type.name = _MONTY_TYPE_NAMES.get(named.name, named.name)
        node.type.origin = pb.TYPE_ORIGIN_BUILTIN
    return True


class _Encoder:
    def __init__(self, arena: pb.Arena, module_ids: Mapping[str, bytes]) -> None:
        self.arena = arena
        self.module_ids = module_ids
        self.seen: dict[int, int] = {}  # id() of a container -> its node
        self.open: set[int] = set()  # containers being encoded: a reference to one is a cycle
        self.classes: dict[tuple[str, str, bool], int] = {}  # a script's class -> its `type` node

    def add(self, node: pb.MontyNode) -> int:
        self.arena.nodes.append(node)
        return len(self.arena.nodes) - 1

    def instance(self, value: InstanceValue) -> pb.ClassInstanceNode:
        """A script's instance as a `class_instance` of a sandbox `type` (one node per class in an
        arena; its id derived from the class's module and name, the instance's fresh: the client's
        read-only proxy, which resolves to no object if sent back)."""
        attrs = [pb.NodePair(key=self.value(name), value=self.value(item)) for name, item in value.attrs.items()]
        kind = (value.module, value.type_name, value.is_dataclass)
        if kind not in self.classes:
            class_id = uuid.uuid5(_SANDBOX_CLASSES, f'{value.module}.{value.type_name}').bytes
            cls = pb.Type(name=value.type_name, id=pb.Uuid(data=class_id), origin=pb.TYPE_ORIGIN_SANDBOX, is_dataclass=value.is_dataclass)
            self.classes[kind] = self.add(pb.MontyNode(type=cls))
        return pb.ClassInstanceNode(class_type=self.classes[kind], instance_id=pb.Uuid(data=uuid.uuid4().bytes), attrs=pb.NodePairs(pairs=attrs))

    def value(self, value: Any) -> int:
        key = id(value)
        if key in self.seen:
            return self.seen[key]
        if key in self.open:
            return self.add(pb.MontyNode(cycle=_CYCLE.get(type(value), '...')))
        node = pb.MontyNode()
        if isinstance(value, (ClientFunction, HeldFunction)):  # the parent's function, as the script held it
            function = value.client if isinstance(value, HeldFunction) else value
            node.function.name = function.name
            if function.docstring is not None:
                node.function.docstring = function.docstring
        elif isinstance(value, HeldObject):  # the parent's object, as it came
            client = value.client
            attrs = [pb.NodePair(key=self.value(name), value=self.value(item)) for name, item in client.attrs.items()]
            node.class_instance.CopyFrom(pb.ClassInstanceNode(class_type=self.value(value.cls), instance_id=pb.Uuid(data=client.id), attrs=pb.NodePairs(pairs=attrs)))
        elif isinstance(value, HostFunction):  # a method of the parent's object the script read: no node of its own
            node.repr = f"<method {value.name!r} of the parent's object>"
        elif isinstance(value, HeldClass):
            node.type.CopyFrom(pb.Type(name=value.client.name, id=pb.Uuid(data=value.client.id), origin=pb.TYPE_ORIGIN_HOST))
        elif _builtin_out(node, value):
            pass
        elif value is None:
            node.none.SetInParent()
        elif value is ...:
            node.ellipsis.SetInParent()
        elif isinstance(value, bool):
            node.boolean = value
        elif isinstance(value, int):
            if -(2**63) <= value < 2**63:
                node.int = value
            else:
                magnitude = abs(value)
                node.bigint.negative = value < 0
                node.bigint.magnitude = magnitude.to_bytes((magnitude.bit_length() + 7) // 8, 'big')
        elif isinstance(value, float):
            node.float = value
        elif isinstance(value, str):
            node.str = value
        elif isinstance(value, bytes):
            node.bytes = value
        elif isinstance(value, complex):
            node.complex.real, node.complex.imag = value.real, value.imag
        elif isinstance(value, decimal.Decimal):
            node.decimal = str(value)
        elif isinstance(value, datetime.datetime):
            node.datetime.CopyFrom(pb.DateTime(year=value.year, month=value.month, day=value.day, hour=value.hour, minute=value.minute, second=value.second, microsecond=value.microsecond, **_offset(value.utcoffset(), value.tzname())))
        elif isinstance(value, datetime.date):
            node.date.CopyFrom(pb.Date(year=value.year, month=value.month, day=value.day))
        elif isinstance(value, datetime.time):
            node.time.CopyFrom(pb.Time(hour=value.hour, minute=value.minute, second=value.second, microsecond=value.microsecond, fold=value.fold, **_offset(value.utcoffset(), value.tzname())))
        elif isinstance(value, datetime.timedelta):
            node.timedelta.CopyFrom(pb.TimeDelta(days=value.days, seconds=value.seconds, microseconds=value.microseconds))
        elif isinstance(value, datetime.timezone):
            offset = value.utcoffset(None)
            node.timezone.offset_seconds = int(offset.total_seconds())
            if value is not datetime.timezone.utc and value.tzname(None) != _default_name(offset):
                node.timezone.name = value.tzname(None)
        elif isinstance(value, pathlib.PurePath):
            node.path = value.as_posix()
        elif type(value) is FileValue:
            node.file_handle.CopyFrom(pb.FileHandle(path=value.path, mode=value.mode, position=value.position))
        elif type(value) is ExceptionValue:
            node.exception.CopyFrom(_exception_out(value))
        elif type(value) is NamedTupleValue:
            self.open.add(key)
            try:
                items = [self.value(item) for item in value]
            finally:
                self.open.discard(key)
            type_name = value._type_name if value._module in ('builtins', '__main__') else f'{value._module}.{value._type_name}'
            node.named_tuple.CopyFrom(pb.NamedTupleNode(type_name=type_name, field_names=value._fields, values=items))
        elif type(value) is ModuleValue:
            attrs = [pb.NodePair(key=self.value(name), value=self.value(item)) for name, item in value.attrs.items()]
            node.module.CopyFrom(pb.ModuleNode(name=value.name, attrs=pb.NodePairs(pairs=attrs)))
            if value.name in self.module_ids:
                node.module.id.data = self.module_ids[value.name]
        elif type(value) is InstanceValue:
            self.open.add(key)
            try:
                node.class_instance.CopyFrom(self.instance(value))
            finally:
                self.open.discard(key)
        elif isinstance(value, (list, tuple, set, frozenset, dict)):
            self.open.add(key)
            try:
                if isinstance(value, dict):
                    pairs = [pb.NodePair(key=self.value(k), value=self.value(v)) for k, v in value.items()]
                    node.dict.pairs.extend(pairs)
                else:
                    items = [self.value(item) for item in value]
                    field = {list: 'list', tuple: 'tuple', set: 'set', frozenset: 'frozen_set'}[_base(value)]
                    getattr(node, field).items.extend(items)
            finally:
                self.open.discard(key)
        else:
            node.repr = repr(value)
        index = self.add(node)
        if isinstance(value, (list, tuple, set, frozenset, dict, HeldClass, HeldObject)):
            self.seen[key] = index
        return index


#: The namespace of the ids of a script's classes (`uuid5` of the class's dotted name).
_SANDBOX_CLASSES = uuid.UUID('6f1d2c1e-5b0a-4c55-9a57-2f4f8f0d7c3a')

_CYCLE = {list: '[...]', tuple: '(...)', dict: '{...}', set: '{...}', frozenset: '{...}'}


def _base(value: Any) -> type:
    for kind in (list, tuple, set, frozenset):
        if isinstance(value, kind):
            return kind
    raise AssertionError(type(value))


def _default_name(offset: datetime.timedelta) -> str:
    return datetime.timezone(offset).tzname(None)


def _offset(offset: datetime.timedelta | None, name: str | None) -> dict[str, Any]:
    if offset is None:
        return {}
    out: dict[str, Any] = {'offset_seconds': int(offset.total_seconds())}
    if name is not None and name != _default_name(offset):
        out['timezone_name'] = name
    return out


def encode(values: Sequence[Any], arena: pb.Arena, *, module_ids: Mapping[str, bytes] = {}) -> list[int]:
    """Add `values` to `arena` (children first, a container shared twice once); their indexes.
    A `ModuleValue` is a `module` node with the id `module_ids` gives its name (none if none)."""
    encoder = _Encoder(arena, module_ids)
    roots = [encoder.value(value) for value in values]
    arena.node_count = len(arena.nodes)
    return roots


def exception_from(raised: pb.RaisedException, message: str | None) -> BaseException | None:
    """The exception of the standard library a parent's `RaisedException` names (a Monty name:
    `json.JSONDecodeError`, `re.PatternError`, `UnicodeDecodeError` with its data), built with
    `message` or its data; None for a name that is none of those."""
    name = raised.exc_type
    data = raised.data
    try:
        if name in ('UnicodeEncodeError', 'UnicodeDecodeError', 'UnicodeTranslateError', 'UnicodeError'):
            if data.WhichOneof('kind') != 'unicode' or name not in ('UnicodeEncodeError', 'UnicodeDecodeError'):  # a message alone: its base's
                return ValueError(*([] if message is None else [message]))
            u = data.unicode
            obj = u.object_bytes if u.WhichOneof('object') == 'object_bytes' else u.object_str
            return getattr(builtins, name)(u.encoding, obj, u.start, u.end, u.reason)
        if name == 'json.JSONDecodeError':
            if data.WhichOneof('kind') != 'json':
                return ValueError(*([] if message is None else [message]))
            return json.JSONDecodeError(data.json.msg, data.json.doc, data.json.pos)
    except (TypeError, ValueError, OverflowError):  # data that does not fit its class: the message alone
        return ValueError(*([] if message is None else [message]))
    cls = _CLASSES.get(name)
    if cls is None:
        return None
    return cls() if message is None else cls(message)


#: The standard library's exception classes a script may meet (`STDLIB_EXCEPTIONS`), by the
#: names Monty's clients give them (`json.JSONDecodeError`, `re.PatternError`, `_csv.Error`).
_CLASSES: dict[str, type[BaseException]] = {
    _MONTY_EXCEPTION_NAMES.get(name, name): getattr(importlib.import_module(module), attr)
    for name, (module, attr) in STDLIB_EXCEPTIONS.items()
}
#: Those names by the top-level module and the name of the class, as a script's error gives them.
_DOTTED = {(cls.__module__.partition('.')[0], cls.__name__): name for name, cls in _CLASSES.items()}


def exception_value(
    exc_type: str, message: str | None, module: str = 'builtins', fields: Mapping[str, str | bytes | int] | None = None
) -> pb.RaisedException:
    """A `RaisedException` of a type name and its message (None: raised without one). `module` is
    the module of the exception's class: one of the standard library's Monty's clients know is
    named by it (`json.JSONDecodeError`). `fields`, a decoding error's constructor arguments (see
    `SandboxRuntimeError.fields`), travel as its data, so the client rebuilds the real exception."""
    raised = pb.RaisedException(exc_type=_DOTTED.get((module.partition('.')[0], exc_type), exc_type))
    if message is not None:
        raised.message = message
    try:  # fields of the wrong kinds (from a worker that broke) leave the message alone
        if fields is not None and raised.exc_type in ('UnicodeEncodeError', 'UnicodeDecodeError'):
            data = pb.UnicodeErrorData(encoding=fields['encoding'], start=fields['start'], end=fields['end'], reason=fields['reason'])
            setattr(data, 'object_bytes' if isinstance(fields['object'], bytes) else 'object_str', fields['object'])
            raised.data.unicode.CopyFrom(data)
        elif fields is not None and raised.exc_type == 'json.JSONDecodeError':
            raised.data.json.CopyFrom(pb.JsonErrorData(msg=fields['msg'], pos=fields['pos'], lineno=fields['lineno'], colno=fields['colno']))
            if 'doc' in fields:  # left out: a document too large to carry
                raised.data.json.doc = fields['doc']
    except (KeyError, TypeError, ValueError):  # a lone surrogate is a ValueError: no string of protobuf's
        raised.ClearField('data')
    return raised
