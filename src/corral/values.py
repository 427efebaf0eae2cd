"""What may cross the sandbox boundary, how it is encoded, and how much of it may cross.

Values cross as msgpack with a few extension types, both ways:

    None, bool, int (any size), float, str, bytes, list, tuple, dict, set, frozenset,
    datetime.datetime, datetime.date, datetime.time, datetime.timedelta, datetime.timezone,
    decimal.Decimal, uuid.UUID, complex, Ellipsis, pathlib.PurePosixPath

and, converted by the sender, a dict's `keys()`, `values()` or `items()` as a list of what it
iterates to, an `enum.Enum` member as its value (its class is code, which never
crosses; the script sees the value, as JSON would carry it) and a `pathlib.PureWindowsPath` as its
`str`. A POSIX path (`PurePosixPath`, `PosixPath`, the sandbox's `Path`) crosses as its text and
arrives as a path: on the host a `PurePosixPath` (pure: it opens nothing), in a worker the
sandbox's `pathlib.Path` (`worker_paths`), whose file operations go through the host's mounts as
any path's do, so a path given to a script grants no access by itself.
A script's objects cross as descriptions (`corral.described`): an exception, a named tuple (or
a struct sequence) and, from the worker, an instance of the script's own class, each an array
of its parts after a marker; the host keeps the descriptions, the worker rebuilds exceptions
and named tuples (`Decoder`'s `objects`). Anything else is refused with `TypeError` naming the
type. The sender converts subclasses of these types to the exact built-in type first (a `str`
subclass arrives as a plain `str`), so the receiver only ever builds plain built-in objects (or
corral's descriptions) and never runs code that came from the other side. Datetimes keep a fixed UTC offset, their `fold` and their zone's
name: a `zoneinfo` zone arrives as `datetime.timezone(offset, name)` (`'EDT'`), a named
`timezone(offset, 'EST')` as itself.

On the host, results of host functions may also be dataclass instances and pydantic models;
they are converted to dicts (`dataclasses.asdict`, `model_dump()`) before encoding.

numpy and pandas values (where a pool offers them, and on the host) cross in a plain form
(`package_form`): a numpy scalar as the Python scalar (`item()`), an array as nested lists
(`tolist()`), a pandas `Series` as `{'name': ..., 'index': [...], 'data': [...]}`, a `DataFrame`
as `{'columns': [...], 'index': [...], 'data': [[row], ...]}` (pandas' `orient='split'`), an
`Index` as a list; `Timestamp` and `Timedelta` as `datetime` and `timedelta`, `NaT` and `NA` as
None. What they hold is converted as any value is, so an object array holding a function is
refused as the function would be. A matplotlib figure (or the axes of one) crosses as an
`Image` of the figure drawn as PNG.

How much crosses is bounded twice. The sender measures a value before packing it (`measure`):
its items, its decoded size and its depth, counted as the receiver will build it (every reference
is a copy of its own there: `[[]] * 1000` becomes a thousand lists), and refuses a value that
contains itself; a numpy array or a pandas table is measured by its shape before its plain form
is made (`package_bound`), so one too large is refused without building the lists. The receiver
counts again while it decodes (`Decoder`), so a sender that skips its own check cannot make it
build more than the limits allow (a frame whose length alone keeps what it builds within them,
as most do, needs no count). Tuples, sets and frozensets are arrays whose first item is a
marker, so one decoder walks every container kind, and nesting is counted across all of them.
"""

from __future__ import annotations

import builtins
import contextlib
import contextvars
import dataclasses
import datetime
import decimal
import enum
import gc
import inspect
import itertools
import operator
import pathlib
import secrets
import struct
import sys
import types
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import msgpack

from .described import ExceptionValue, FileValue, InstanceValue, ModuleValue, NamedTupleValue
from .hostobjects import CONSTRUCT, GONE, NOT_GIVEN, HostClass, HostObject, HostObjects, ObjectRef, call_parts, gone, is_object_call, make_proxy

__all__ = [
    'pack', 'unpack', 'measure', 'fits', 'flat', 'packed_bound', 'Decoder', 'ValueLimitError', 'bounded_repr', 'host_default', 'sandbox_default',
    'Image', 'cut_text', 'describe_type', 'package_bound', 'package_form', 'library_repr', 'MAX_FRAME', 'MAX_DEPTH', 'REPR_LIMIT',
    'UNPACKABLE_RESULT', 'SandboxBuiltin', 'builtin_name', 'name_objects', 'named_object', 'HostCallables', 'HostFunction', 'giving_callables', 'worker_callables', 'worker_objects', 'worker_paths',
    'call_error', 'not_given', 'shown_name', 'unnamed',
]

#: Largest frame, in bytes, either side accepts (one message). A larger one is a protocol error.
MAX_FRAME = 64 * 1024 * 1024

#: Deepest nesting of containers (of every kind together) in one value that crosses.
MAX_DEPTH = 100

#: Characters of the longest repr the host makes of a sandbox value (`bounded_repr`).
REPR_LIMIT = 100_000

#: How the `TypeError` begins that a script gets when it ran to its end and its value cannot cross.
UNPACKABLE_RESULT = 'the value of the last expression cannot leave the sandbox'

_TUPLE, _SET, _FROZENSET, _BIGINT, _DATETIME, _DATE, _TIME, _TIMEDELTA, _TIMEZONE, _DECIMAL, _UUID, _IMAGE, _COMPLEX, _ELLIPSIS = range(1, 15)
_EXCEPTION, _NAMED_TUPLE, _INSTANCE, _FILE = range(15, 19)
#: The marker of a host module the script holds (`ModuleValue`).
_MODULE = 44
_MARKS = (_TUPLE, _SET, _FROZENSET, _EXCEPTION, _NAMED_TUPLE, _INSTANCE, _FILE, _MODULE)
#: The descriptions of a script's objects (`corral.described`), each an array of its parts after its marker.
_DESCRIBED = {ExceptionValue: _EXCEPTION, NamedTupleValue: _NAMED_TUPLE, InstanceValue: _INSTANCE, FileValue: _FILE, ModuleValue: _MODULE}
#: Their types' ids: a worker tests a value's type by id, so a script's class whose metaclass says it
#: equals another (`__eq__`, `__hash__`) is taken for none of these types.
_DESCRIBED_IDS = frozenset(map(id, _DESCRIBED))
_DURATION = struct.Struct('>iii')  # days, seconds, microseconds of a timedelta or a UTC offset
_COMPLEX_PARTS = struct.Struct('>dd')  # the real and imaginary parts of a complex

#: Containers up to this length are measured with a plain loop (`measure`).
_SHORT = 32
#: Items of one set or dict that may share a hash: more and rebuilding it costs quadratic time.
_MAX_COLLISIONS = 32
#: Items handled by one C call while decoding: a thread decoding a large message lets the GIL go
#: between such steps, so the event loop's thread waits for no more than one of them.
_STEP = 8192


#: The extension type of a `SandboxBuiltin` (apart from the codes above, which other kinds extend).
_NAMED = 40
#: The extension type of a POSIX path: its text, UTF-8 (a lone surrogate kept).
_PATH = 42
#: In a worker: what describes a file the script opened or a host module (`worker_objects`), None for other objects.
_DESCRIBE: list[Callable[[Any], Any]] = []
#: What a path arrives as: `pathlib.PurePosixPath` on the host, the sandbox's `Path` in a worker.
_PATH_TYPE: list[Callable[[str], Any]] = [pathlib.PurePosixPath]


def worker_objects(*describe: Callable[[Any], Any]) -> None:
    """In a worker: each of `describe(value)` is the description of an object it knows (the
    `FileValue` of a file the script opened, the `ModuleValue` of a host module), else None."""
    _DESCRIBE[:] = describe


def worker_paths(path_type: Callable[[str], Any]) -> None:
    """In a worker: a path arrives as `path_type(text)` (the sandbox's `pathlib.Path`)."""
    _PATH_TYPE[:] = [path_type]


@dataclasses.dataclass(frozen=True)
class SandboxBuiltin:
    """A type object or a builtin function of the sandbox's, by the name the script knows it by.

    Type objects and builtin functions cross the boundary by name, never as live objects: a data
    type (`int`, `datetime.datetime`, `ValueError`, ...) arrives as the receiver's own class of
    that name; any other (`len`, `open`, `type(print)` as `'builtin_function_or_method'`,
    `functools.partial`) arrives on the host as a `SandboxBuiltin` and, passed back in, is the
    sandbox's object again. `kind` is `'type'` or `'function'`; `name` is one of the names the
    sandbox offers (`corral.named`), else packing it raises `TypeError`.
    """

    kind: str
    name: str

    def __post_init__(self) -> None:
        if self.kind not in ('type', 'function') or type(self.name) is not str:
            raise ValueError(f"SandboxBuiltin kind must be 'type' or 'function' and its name a str, not {self.kind!r}, {self.name!r}")


#: This side's objects that cross by name: {id(object): (object, its name)}, and {name: object}
#: (None: a name this side knows only as a `SandboxBuiltin`), made at first use from the pairs
#: `name_objects` was given.
_BY_OBJECT: dict[int, tuple[Any, SandboxBuiltin]] = {}
_BY_NAME: dict[SandboxBuiltin, Any] = {}
_pairs: list[Callable[[], Iterable[tuple[SandboxBuiltin, Any]]]] = []


def name_objects(pairs: Callable[[], Iterable[tuple[SandboxBuiltin, Any]]]) -> None:
    """Set which objects cross by name on this side (the host's table, or a worker's for its
    script): `pairs()` gives `(name, object)` pairs, called when a value first needs them. The
    first pair of a name gives the object it decodes to (None: it stays a `SandboxBuiltin`);
    every pair is an object that encodes to the name (several may: the host's `PosixPath` and
    `PurePath` both cross as `pathlib.PurePosixPath`)."""
    _BY_OBJECT.clear()
    _BY_NAME.clear()
    _pairs[:] = [pairs]


def _table() -> dict[SandboxBuiltin, Any]:
    if _pairs:  # made whole or not at all: a failure is raised again at the next use
        by_name: dict[SandboxBuiltin, Any] = {}
        by_object: dict[int, tuple[Any, SandboxBuiltin]] = {}
        for named, obj in _pairs[0]():
            by_name.setdefault(named, obj)
            if obj is not None:
                by_object.setdefault(id(obj), (obj, named))
        _BY_NAME.update(by_name)
        _BY_OBJECT.update(by_object)
        _pairs.clear()
    return _BY_NAME


def named_object(named: SandboxBuiltin) -> Any:
    """What `named` decodes to on this side: its object, or `named` itself when this side has
    none (a builtin of the sandbox's, on the host); raises `ValueError` for a name the sandbox
    does not offer."""
    try:
        obj = _table()[named]
    except KeyError:
        raise ValueError(f'the sandbox has no builtin {named.kind} named {named.name!r}') from None
    return named if obj is None else obj


def builtin_name(value: Any) -> SandboxBuiltin | None:
    """The name a type object or builtin function crosses as on this side (by identity), else None."""
    _table()
    entry = _BY_OBJECT.get(id(value))
    return entry[1] if entry is not None and entry[0] is value else None


def _named_form(value: Any) -> Any:
    """A type object or builtin function that crosses by name as its `SandboxBuiltin` (by
    identity: a class that takes another's name is not it); a type alias (`list[int]`,
    `int | None`) as its repr, having no counterpart the receiver could rebuild; else None."""
    if id(type(value)) in _ALIAS_IDS:
        return repr(value)
    return builtin_name(value) if callable(value) else None  # only a callable may be one: others never build the table


#: Type aliases' types, by id: a script's class whose metaclass says it equals one (`__eq__`, `__hash__`) is not one.
_ALIAS_IDS = frozenset(map(id, (types.GenericAlias, types.UnionType)))


# ----- host callables as values --------------------------------------------------------------------

#: The extension type of a host callable a script holds as a value.
_CALLABLE = 41
#: The extension type of a host object or class (`corral.hostobjects`).
_HOST_OBJECT = 43


@dataclasses.dataclass(frozen=True)
class _CallableRef:
    """The wire form of a host callable given to a script as a value: the name its calls carry,
    the name the script sees (`__name__`), and whether the script awaits its calls."""

    name: str
    shown: str
    is_async: bool


class HostFunction:
    """A host callable (a function, a class, a bound method) wrapped to give it to a script as a
    value, in a host function's result: in the script it is a function of its own, named `name`
    (default: the callable's `__name__`), whose calls are host calls to `function`; back out of
    the sandbox it is this `HostFunction` again. A callable not wrapped is refused, so no host
    function hands a script a capability by accident. Raises `TypeError` for one not callable."""

    __slots__ = ('function', 'name')

    def __init__(self, function: Callable[..., Any], *, name: str | None = None) -> None:
        if not callable(function):
            raise TypeError(f'HostFunction needs a callable, not {type(function).__name__}')
        shown = getattr(function, '__name__', None) if name is None else name
        self.function = function
        self.name: str = shown if type(shown) is str else type(function).__name__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f'HostFunction({self.function!r}, name={self.name!r})'


class HostCallables:
    """The `HostFunction`s one session gave its script as values: each gets a name no other has
    (`<value ...>`), by which the script's calls of it reach it as host calls, and by which it
    comes back out of the sandbox as itself. A name is random, so a name from another session, or
    from before a session was stored and loaded, reaches nothing here (`get` gives None)."""

    def __init__(self) -> None:
        self._by_name: dict[str, HostFunction] = {}
        self._by_id: dict[int, tuple[HostFunction, _CallableRef]] = {}
        self.objects = HostObjects()  # host objects and classes, whose calls are named after them

    def ref(self, function: HostFunction) -> _CallableRef:
        """`function`'s wire form, named the first time it crosses."""
        entry = self._by_id.get(id(function))
        if entry is not None and entry[0] is function:
            return entry[1]
        is_async = inspect.iscoroutinefunction(function.function)
        name = f'<{"async " if is_async else ""}value {secrets.token_hex(8)}>'
        ref = _CallableRef(name, function.name, is_async)
        self._by_name[ref.name] = function
        self._by_id[id(function)] = (function, ref)
        return ref

    def get(self, name: str) -> Any:
        """The callable given under `name` (a host object's member: what `HostObjects.resolve`
        gives), or None."""
        if is_object_call(name):
            return self.objects.resolve(name)
        return self._by_name.get(name)

    def shown(self, name: str) -> str | None:
        """The name the script sees for the callable named `name` (`len`; a host object's member as
        `Counter.add`), or None."""
        if is_object_call(name):
            return self.objects.shown(name)
        function = self._by_name.get(name)
        return None if function is None else self._by_id[id(function)][1].shown

    @staticmethod
    def awaited(name: str) -> bool:
        """Whether the script awaits the calls of the callable named `name` (its name says so, so
        a replay, which has none of the callables, knows it too), a host object's method too."""
        return name.startswith('<async ')


#: The callables of the session whose values the host is packing (`giving_callables`).
_GIVING: contextvars.ContextVar[HostCallables | None] = contextvars.ContextVar('corral_giving_callables', default=None)
#: In a worker: what makes the script's function of a `_CallableRef` (`worker_callables`), and
#: those it made, {id: (function, ref)}, so they go back out as the host's callables.
_MAKE: list[Callable[[str, str, bool], Any]] = []
_MADE: dict[int, tuple[Any, _CallableRef]] = {}
_MADE_BY_NAME: dict[str, Any] = {}


@contextlib.contextmanager
def giving_callables(callables: HostCallables) -> Iterator[None]:
    """While packing on the host: a `HostFunction` in a value crosses into the sandbox as one of
    `callables` (elsewhere it is refused, as any value of a type that cannot cross)."""
    token = _GIVING.set(callables)
    try:
        yield
    finally:
        _GIVING.reset(token)


def worker_callables(make: Callable[[str, str, bool], Any]) -> None:
    """In a worker: `make(name, shown, is_async)` gives the script's function calling the host's
    callable `name` (made once per name; it goes back out as that callable)."""
    _MAKE[:] = [make]


def _object_form(value: Any) -> ObjectRef | None:
    """A host object's or class's wire form: on the host a `HostObject` or `HostClass` while
    `giving_callables`, in a worker one it made (None for any other value)."""
    if issubclass(type(value), (HostObject, HostClass)):  # by its type: `isinstance` would read a `__class__` the object may fake
        giving = _GIVING.get()
        return None if giving is None else giving.objects.ref(value)
    entry = _OBJECTS_MADE.get(id(value))
    return entry[1] if entry is not None and entry[0] is value else None


#: In a worker: the classes made for host classes, by their names, and the objects made, by id.
_CLASSES_MADE: dict[str, type] = {}
_OBJECTS_MADE: dict[int, tuple[Any, ObjectRef]] = {}


def _host_object(data: bytes, callables: HostCallables | None) -> Any:
    """The object a `_HOST_OBJECT` extension decodes to: on the host the object or class of
    `callables` it names (else its wire form: one from before a load, or forged), in a worker
    the script's object of it (one per name)."""
    try:
        ref = ObjectRef.from_parts(msgpack.unpackb(data))
    except (ValueError, TypeError, msgpack.UnpackException):
        raise ValueError('malformed host object in a frame') from None
    if not _MAKE:
        found = None if callables is None else callables.objects.get(ref.token)
        return ref if found is None else found
    known = _CLASSES_MADE.get(ref.token) if ref.is_class else _OBJECTS_BY_TOKEN.get(ref.token)
    if known is not None:
        return known
    make = _MAKE[0]
    made = make_proxy(ref, _CLASSES_MADE, lambda name, awaited: make(name, name.rpartition('.')[2], awaited), _OBJECTS_MADE)
    if not ref.is_class:
        _OBJECTS_BY_TOKEN[ref.token] = made
    return made


_OBJECTS_BY_TOKEN: dict[str, Any] = {}


#: How the names of callables given as values start (`HostCallables.ref`).
_VALUE_NAMES = ('<value ', '<async value ')


def unnamed(name: str) -> str:
    """A host call's name as a message may show it without knowing what it reaches: a callable
    given as a value as `<host function>`, a host object's or class's member as `<host
    object>.add` (`<host class>` for a construction), never with the session's random name for
    it; a host function's name as it is."""
    if name.startswith(_VALUE_NAMES):
        return '<host function>'
    if not is_object_call(name):
        return name
    token, member, _, _ = call_parts(name)
    owner = '<host object>' if token.startswith('<object ') else '<host class>'
    return owner if member == CONSTRUCT else f'{owner}.{member}'


def not_given(name: str) -> NameError:
    """On the host: the error for a call named `name` that reaches no callable: `GONE` for a
    callable value's name (the session did not give it: the worker names the function), else
    `'name' is not a host function of this session`."""
    if name.startswith(_VALUE_NAMES):
        return NameError(GONE)
    return NameError(f'{name!r} is not a host function of this session')


def call_error(error: BaseException, name: str) -> BaseException:
    """In a worker: what the script gets for a host call named `name` that raised `error`: itself,
    or for the host's refusal of an object, class or callable value it did not give (`GONE`), one
    naming it as the script knows it (`hostobjects.gone`; `the host function add this calls ...`)."""
    if type(error) is not NameError or error.args != (GONE,):
        return error
    if is_object_call(name):
        return gone(name, _made_class_name(call_parts(name)[0]))
    function = _MADE_BY_NAME.get(name)
    return error if function is None else NameError(f'the host function {function.__name__} this calls {NOT_GIVEN}')


def _made_class_name(token: str) -> str | None:
    """In a worker: the name of the script's class of the host object or class `token` (None: no
    proxy of it was made here)."""
    cls = _CLASSES_MADE.get(token)
    if cls is None and token in _OBJECTS_BY_TOKEN:
        cls = type(_OBJECTS_BY_TOKEN[token])
    return None if cls is None else type.__dict__['__name__'].__get__(cls)


def shown_name(name: str) -> str:
    """In a worker: the name a script knows the host callable by whose calls carry `name`, for its
    errors: a callable given as a value by its own name (`plain`), a host object's or class's
    member as `Counter.add`, a class's construction as `Counter` (`name` itself for a host
    function, or a name no callable of the script has)."""
    if is_object_call(name):
        token, member, _, _ = call_parts(name)
        shown = _made_class_name(token)
        if shown is None:
            return name
        return shown if member == CONSTRUCT else f'{shown}.{member}'
    function = _MADE_BY_NAME.get(name)
    return name if function is None else function.__name__


def _callable_form(value: Any) -> _CallableRef | None:
    """A callable's wire form: on the host a `HostFunction` while `giving_callables`, in a
    worker one it made."""
    if type(value) is HostFunction or isinstance(value, HostFunction):
        giving = _GIVING.get()
        return None if giving is None else giving.ref(value)
    entry = _MADE.get(id(value))
    return entry[1] if entry is not None and entry[0] is value else None


def _callable(data: bytes, callables: HostCallables | None) -> Any:
    """The object a `_CALLABLE` extension decodes to: on the host the callable of `callables`
    it names (else its wire form), in a worker the script's function of it."""
    try:
        name, shown, is_async = msgpack.unpackb(data)
    except (ValueError, TypeError, msgpack.UnpackException):
        raise ValueError('malformed host callable in a frame') from None
    if type(name) is not str or type(shown) is not str or type(is_async) is not bool:
        raise ValueError('malformed host callable in a frame')
    if not _MAKE:  # on the host: one given before the session was stored and loaded is gone, its wire form alone
        function = None if callables is None else callables.get(name)
        return _CallableRef(name, shown, is_async) if function is None else function
    function = _MADE_BY_NAME.get(name)
    if function is None:
        function = _MADE_BY_NAME[name] = _MAKE[0](name, shown, is_async)
        _MADE[id(function)] = (function, _CallableRef(name, shown, is_async))
    return function


#: The image formats an `Image` may hold.
IMAGE_TYPES = frozenset({'image/png'})


@dataclasses.dataclass(frozen=True)
class Image:
    """An image a script made: a matplotlib figure as the script's value (or shown with
    `plt.show()`) arrives as `Image(data=<PNG bytes>, mime_type='image/png')`.

    `data`: the encoded image; `mime_type`: its format, one of `IMAGE_TYPES`. Its size counts
    towards the `value_size` limit like any bytes.
    """

    data: bytes
    mime_type: str = 'image/png'

    def __post_init__(self) -> None:
        if type(self.data) is not bytes:
            raise TypeError(f'Image data must be bytes, not {type(self.data).__name__}')
        if self.mime_type not in IMAGE_TYPES:
            raise ValueError(f'Image mime_type must be one of {sorted(IMAGE_TYPES)}, not {self.mime_type!r}')

    def __sizeof__(self) -> int:
        return object.__sizeof__(self) + sys.getsizeof(self.data)

    def __repr__(self) -> str:
        return f'Image(<{len(self.data):,} bytes of {self.mime_type}>)'


def describe_type(value: object) -> str:
    """The name of a value's type as a script sees it: `'Foo'`, `'function'`, `'module'`."""
    return type(value).__name__


def _refuse(value: object) -> TypeError:
    return TypeError(
        f"a value of type '{describe_type(value)}' cannot cross the sandbox boundary; use None, bool, "
        'int, float, str, bytes, list, tuple, dict, set, frozenset, datetime, Decimal or UUID values'
    )


#: Types msgpack packs through `default` (ext types, marked arrays, and ints past 64 bits).
_EXTENSION_TYPES = frozenset({
    int, tuple, set, frozenset, datetime.datetime, datetime.date, datetime.time, datetime.timedelta, datetime.timezone,
    decimal.Decimal, uuid.UUID, Image, complex, type(Ellipsis), SandboxBuiltin, _CallableRef, pathlib.PurePosixPath, ObjectRef,
})
#: The exact types that may cross; anything else goes through the side's conversion first.
_BOUNDARY_TYPES = _EXTENSION_TYPES | {type(None), bool, float, str, bytes, list, dict}
_CONTAINER_TYPES = frozenset({list, tuple, dict, set, frozenset})
_SCALAR_TYPES = _BOUNDARY_TYPES - _CONTAINER_TYPES
#: The ids of those types, for the loops that test a type per value: in a worker a class's hash is
#: the language layer's (`identity`), a call of Python code, where an id's is an int's.
_BOUNDARY_IDS, _CONTAINER_IDS, _SCALAR_IDS = (frozenset(map(id, types)) for types in (_BOUNDARY_TYPES, _CONTAINER_TYPES, _SCALAR_TYPES))
_MARK_BYTES = {code: msgpack.ExtType(code, b'') for code in _MARKS}


def _make_default(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    tuple_mark, set_mark, frozenset_mark = (_MARK_BYTES[code] for code in _MARKS[:3])

    def default(value: Any) -> Any:
        t = type(value)
        if id(t) not in _BOUNDARY_IDS:  # a subclass (a named tuple, say) or a host type: convert first
            value = convert(value)
            t = type(value)
            if t in _DESCRIBED:
                return [_MARK_BYTES[_DESCRIBED[t]], *_parts(value)]
            if t not in _EXTENSION_TYPES:
                return value
        if t is int:  # only reached when it does not fit in 64 bits
            return msgpack.ExtType(_BIGINT, format(value, 'x').encode())
        if t is tuple:
            return [tuple_mark, *value]
        if t is set:
            return [set_mark, *value]
        if t is frozenset:
            return [frozenset_mark, *value]
        if t is datetime.datetime:
            return msgpack.ExtType(_DATETIME, _moment(value))
        if t is datetime.date:
            return msgpack.ExtType(_DATE, value.isoformat().encode())
        if t is datetime.time:
            return msgpack.ExtType(_TIME, _moment(value))
        if t is datetime.timedelta:
            return msgpack.ExtType(_TIMEDELTA, _DURATION.pack(value.days, value.seconds, value.microseconds))
        if t is decimal.Decimal:
            return msgpack.ExtType(_DECIMAL, str(value).encode())  # exact, NaN and infinities included
        if t is pathlib.PurePosixPath:
            return msgpack.ExtType(_PATH, str(value).encode('utf-8', 'surrogatepass'))
        if t is uuid.UUID:
            return msgpack.ExtType(_UUID, value.bytes)
        if t is Image:
            return msgpack.ExtType(_IMAGE, value.mime_type.encode() + b'\0' + value.data)
        if t is complex:
            return msgpack.ExtType(_COMPLEX, _COMPLEX_PARTS.pack(value.real, value.imag))  # -0.0 and NaN kept
        if value is Ellipsis:
            return msgpack.ExtType(_ELLIPSIS, b'')
        if t is SandboxBuiltin:
            named_object(value)  # a name the sandbox does not offer: ValueError
            return msgpack.ExtType(_NAMED, f'{value.kind}:{value.name}'.encode())
        if t is _CallableRef:
            return msgpack.ExtType(_CALLABLE, msgpack.packb([value.name, value.shown, value.is_async]))
        if t is ObjectRef:
            return msgpack.ExtType(_HOST_OBJECT, msgpack.packb(value.parts()))
        offset = value.utcoffset(None)  # datetime.timezone: the one type left
        name = _zone_name(offset, value.tzname(None))
        return msgpack.ExtType(_TIMEZONE, _DURATION.pack(offset.days, offset.seconds, offset.microseconds) + name.encode('utf-8', 'surrogatepass'))

    return default


def _parts(value: Any) -> list[Any]:
    """A description's parts, as its array holds them after its marker (see `corral.described`)."""
    if type(value) is ExceptionValue:
        return [value.type_name, value.module, value.base, *value.args]
    if type(value) is NamedTupleValue:
        return [value._type_name, value._module, list(value._fields), *tuple.__iter__(value)]
    if type(value) is FileValue:
        return [value.path, value.mode, value.position]
    if type(value) is ModuleValue:
        return [value.name, dict(value.attrs)]
    return [value.type_name, value.module, value.is_dataclass, dict(value.attrs)]


def _described(code: int, parts: list[Any]) -> Any:
    """The description `_parts` made `parts` of; ValueError for parts of the wrong kinds."""
    if code == _MODULE and len(parts) == 2 and type(parts[0]) is str and type(parts[1]) is dict and all(type(name) is str for name in parts[1]):
        return ModuleValue(parts[0], parts[1])
    if len(parts) < 3 or type(parts[0]) is not str or type(parts[1]) is not str:
        raise ValueError('malformed description of an object in a frame')
    if code == _FILE and len(parts) == 3 and type(parts[2]) is int and parts[2] >= 0:
        return FileValue(*parts)
    if code == _EXCEPTION and type(parts[2]) is str:
        return ExceptionValue(parts[0], parts[1], tuple(parts[3:]), parts[2])
    if code == _NAMED_TUPLE and type(parts[2]) is list and all(type(name) is str for name in parts[2]) and len(parts[2]) == len(parts) - 3:
        return NamedTupleValue(parts[3:], parts[0], parts[1], tuple(parts[2]))
    if code == _INSTANCE and len(parts) == 4 and type(parts[2]) is bool and type(parts[3]) is dict and all(type(name) is str for name in parts[3]):
        return InstanceValue(parts[0], parts[1], parts[3], parts[2])
    raise ValueError('malformed description of an object in a frame')


def _zone_name(offset: datetime.timedelta | None, name: str | None) -> str:
    """The name a zone of `offset` crosses with: '' for none, or the one `timezone(offset)` gives itself."""
    if offset is None or name is None or name == datetime.timezone(offset).tzname(None):
        return ''
    return name


def _moment(value: datetime.datetime | datetime.time) -> bytes:
    """A datetime's or a time's ext data: its ISO text; then, when it has a `fold` or its zone a
    name of its own (`timezone(offset, 'EST')`, or a `zoneinfo` zone's `'EDT'`), a NUL, the fold's
    digit and the name, so the receiver's `timezone(offset, name)` shows what the sender's did."""
    kind = datetime.datetime if isinstance(value, datetime.datetime) else datetime.time  # its own methods, not a subclass's
    text = kind.isoformat(value).encode()
    try:
        name = kind.tzname(value)
    except Exception:  # a tzinfo of the sender's own whose tzname() fails, or gives no str: no name
        name = None
    extra = _zone_name(kind.utcoffset(value), name)
    fold = kind.__dict__['fold'].__get__(value)
    if not extra and not fold:
        return text
    return text + b'\0' + str(fold).encode() + extra.encode('utf-8', 'surrogatepass')


def _exact(value: Any) -> Any:
    """Convert an instance of a subclass of a boundary type to the exact built-in type.

    Uses the base type's own C methods (`str.__str__`, `dict.items`), so an override in the
    subclass (`__str__`, `__iter__`, `keys`) is never called. An enum member becomes its value
    (read from its own dict, not through a `value` property), a POSIX path a `PurePosixPath`, a
    Windows one its text; numpy and pandas
    values their plain form (`package_form`: first, as pandas' `NaT` is a datetime).
    """
    form = _object_form(value)
    if form is not None:
        return form
    form = _named_form(value)
    if form is not None:
        return form
    if callable(value) and (form := _callable_form(value)) is not None:
        return form
    form = package_form(value)
    if form is not _NOT_A_PACKAGE_VALUE:
        return form
    if id(type(value)) in _DESCRIBED_IDS:
        return value
    if isinstance(value, BaseException):
        return _exception(value)
    if isinstance(value, tuple) and (fields := _named_fields(type(value), tuple.__len__(value))) is not None:
        return NamedTupleValue(tuple.__getitem__(value, slice(None)), _class_name(type(value)), _class_module(type(value)), fields)
    if isinstance(value, enum.Enum):
        return object.__getattribute__(value, '__dict__')['_value_']
    if isinstance(value, pathlib.PurePath):  # its own method: a subclass's `__str__` is not called
        text = pathlib.PurePath.__str__(value)
        return pathlib.PurePosixPath(text) if isinstance(value, pathlib.PurePosixPath) else text
    if isinstance(value, decimal.Decimal):
        return decimal.Decimal(decimal.Decimal.__str__(value))
    if isinstance(value, uuid.UUID):
        return uuid.UUID(int=_uuid_int(value))
    if isinstance(value, bool):
        return bool(int.__index__(value))
    if isinstance(value, int):
        return int.__index__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, complex):
        return complex.__complex__(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bytes):
        return bytes.__getitem__(value, slice(None))
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, list):
        return list.copy(value)
    if isinstance(value, tuple):
        return tuple(tuple.__getitem__(value, slice(None)))
    if isinstance(value, dict):
        return dict(dict.items(value))
    if isinstance(value, frozenset):
        return frozenset(frozenset.__iter__(value))
    if isinstance(value, set):
        return set(set.__iter__(value))
    if isinstance(value, datetime.datetime):
        return _decode_moment(_DATETIME, _moment(value))
    if isinstance(value, datetime.date):
        return datetime.date.fromordinal(datetime.date.toordinal(value))
    if isinstance(value, datetime.timedelta):
        return datetime.timedelta(_days(value), _seconds(value), _microseconds(value))
    if id(type(value)) in _DICT_VIEW_IDS:  # what it iterates to, as `list(view)`: keys, values, or (key, value) pairs
        return list(value)
    if _is_script_class(type(value)):
        return _instance(value)
    for describe in _DESCRIBE:
        if (described := describe(value)) is not None:
            return described
    raise _refuse(value)


_class_name = type.__dict__['__name__'].__get__
_class_module = type.__dict__['__module__'].__get__
_exception_args = BaseException.__dict__['args'].__get__
_BUILTIN_NAMES = vars(builtins)


def _exception(value: BaseException) -> ExceptionValue:
    """An exception's description, read with `BaseException`'s and `type`'s own descriptors."""
    cls = type(value)
    base = next(klass for klass in cls.__mro__ if _BUILTIN_NAMES.get(_class_name(klass)) is klass)
    return ExceptionValue(_class_name(cls), _class_module(cls), _exception_args(value), _class_name(base))


def _named_fields(cls: type, length: int) -> tuple[str, ...] | None:
    """The fields of a named tuple's class (`_fields`) or a struct sequence's (`sys.version_info`:
    its `__match_args__`), when they name each item; None for another tuple subclass."""
    fields = cls.__dict__.get('__match_args__') if 'n_sequence_fields' in cls.__dict__ else getattr(cls, '_fields', None)
    if type(fields) is tuple and len(fields) == length and all(type(name) is str and name.isidentifier() for name in fields):
        return fields
    return None


#: Whether a class is the script's own, whose instances cross as `InstanceValue`s: none but in
#: the worker, where the language layer says (`describe_instances`).
_is_script_class: Callable[[type], bool] = lambda cls: False


def describe_instances(is_script_class: Callable[[type], bool]) -> None:
    """Send instances of the classes `is_script_class` accepts (the script's) as `InstanceValue`s."""
    global _is_script_class
    _is_script_class = is_script_class


def _instance(value: Any) -> InstanceValue:
    """An instance's description: its dataclass fields, or its `__dict__` and `__slots__` values,
    read from the instance's own storage (no property or `__getattr__` of its class runs)."""
    cls = type(value)
    stored: dict[str, Any] = {}
    try:
        own = object.__getattribute__(value, '__dict__')
    except AttributeError:  # a class with `__slots__` alone
        own = {}
    if type(own) is dict:
        stored.update((name, item) for name, item in dict.items(own) if type(name) is str)
    for klass in cls.__mro__:
        if not _is_script_class(klass):
            continue
        for name, slot in vars(klass).items():
            if type(slot) is types.MemberDescriptorType and name not in stored:
                try:
                    stored[name] = slot.__get__(value)
                except AttributeError:  # a slot never set
                    pass
    fields = getattr(cls, '__dataclass_fields__', None)
    if type(fields) is dict:
        names = [name for name, field in fields.items() if getattr(field, '_field_type', None) is dataclasses._FIELD]  # type: ignore[attr-defined]
        return InstanceValue(_class_name(cls), _class_module(cls), {name: stored[name] for name in names if name in stored}, True)
    return InstanceValue(_class_name(cls), _class_module(cls), stored, False)


#: `dict.keys()`, `.values()`, `.items()`: they cross as lists (no subclass can change how they iterate).
_DICT_VIEW_IDS = frozenset(map(id, (type({}.keys()), type({}.values()), type({}.items()))))


_days = datetime.timedelta.__dict__['days'].__get__
_seconds = datetime.timedelta.__dict__['seconds'].__get__
_microseconds = datetime.timedelta.__dict__['microseconds'].__get__
_NOT_A_PACKAGE_VALUE: Any = object()


def _package_types() -> tuple[Any, Any]:
    """numpy and pandas, where this process has loaded them (never imported here)."""
    return sys.modules.get('numpy'), sys.modules.get('pandas')


def _plain_times(np: Any, value: Any) -> Any:
    """Dates and durations in microseconds, which `item()` and `tolist()` give as datetime and
    timedelta (in nanoseconds they give ints)."""
    if value.dtype.kind in 'mM':
        return value.astype(f'{value.dtype.kind}8[us]')
    return value


def package_form(value: Any) -> Any:
    """The plain form of a numpy or pandas value (see the module's docstring), or a marker
    (`_NOT_A_PACKAGE_VALUE`) for anything else. Reads the value with the libraries' own methods,
    so a subclass's overrides are not called."""
    np, pd = _package_types()
    if np is not None:
        if isinstance(value, np.ndarray):
            return np.ndarray.tolist(_plain_times(np, value))
        if isinstance(value, np.generic):
            return np.generic.item(_plain_times(np, value))
    figure = _figure_of(value)
    if figure is not None:
        return figure_image(figure)
    if pd is not None:
        if value is pd.NaT or value is pd.NA:
            return None
        if isinstance(value, pd.DataFrame):
            split = pd.DataFrame.to_dict(value, orient='split')
            return {'columns': split['columns'], 'index': split['index'], 'data': split['data']}
        if isinstance(value, pd.Series):
            return {'name': value.name, 'index': pd.Index.to_list(value.index), 'data': pd.Series.to_list(value)}
        if isinstance(value, pd.Index):
            return pd.Index.to_list(value)
    return _NOT_A_PACKAGE_VALUE


_EMPTY_LIST, _EMPTY_DICT, _LEAST_OBJECT = sys.getsizeof([]), sys.getsizeof({}), sys.getsizeof(None)


def package_bound(value: Any) -> tuple[int, int] | None:
    """At least the (items, bytes) `measure` counts of a numpy array's or a pandas table's plain
    form (`package_form`), from its shape alone, so it is checked before the form is made (for a
    large array, many times the array's own memory). None for any other value.

    An array of shape (a, b) becomes a list of a lists of b items: a + a*b items (references),
    1 + a lists, a*b objects, each at least the smallest (None); a `DataFrame` of n rows and m
    columns is a dict of three entries: m names, n labels, and n row lists of m cells.
    """
    np, pd = _package_types()
    dicts = 1
    if np is not None and isinstance(value, np.ndarray):
        shape = np.ndarray.shape.__get__(value)
        if not shape:
            return None
        dicts = lists = references = 0
        leaves = 1
        for length in shape:
            lists += leaves
            leaves *= length
            references += leaves
    elif pd is not None and isinstance(value, pd.DataFrame):
        rows, columns = pd.DataFrame.shape.fget(value)
        lists, references, leaves = 3 + rows, columns + 2 * rows + rows * columns, columns + rows + rows * columns
    elif pd is not None and isinstance(value, pd.Series):
        rows = pd.Series.__len__(value)
        lists, references, leaves = 2, 2 * rows, 2 * rows
    elif pd is not None and isinstance(value, pd.Index):
        dicts, lists, references = 0, 1, pd.Index.__len__(value)
        leaves = references
    else:
        return None
    items = references + 3 * dicts
    return items, dicts * _EMPTY_DICT + lists * _EMPTY_LIST + 8 * references + leaves * _LEAST_OBJECT


def _figure_of(value: Any) -> Any:
    """The matplotlib figure `value` is, or whose axes it is (the whole figure, for axes in a
    subfigure); None for anything else."""
    figure, axes = sys.modules.get('matplotlib.figure'), sys.modules.get('matplotlib.axes')
    if figure is not None and isinstance(value, figure.Figure):
        return value
    if axes is not None and isinstance(value, axes.Axes):
        found = axes.Axes.get_figure(value)
        while isinstance(found, figure.SubFigure):
            found = found._parent
        return found
    return None


#: matplotlib's Agg renderer refuses a canvas this many pixels wide or high, in its own words
#: ("Image size of ... pixels is too large. It must be less than 2^23 in each direction."),
#: before it allocates one (matplotlib's src/_backend_agg.h).
AGG_MAX_SIDE = 1 << 23


def figure_pixels(figure: Any, dpi: Any = None) -> tuple[int, int]:
    """(width, height) in pixels of `figure` drawn by `savefig` at `dpi` (None: the
    `savefig.dpi` setting; 'figure': the figure's own dpi), read with matplotlib's own methods
    (a subclass's overrides are not called). Agg draws it into width * height * 4 bytes (RGBA)."""
    matplotlib = sys.modules['matplotlib']
    figure_class = sys.modules['matplotlib.figure'].Figure
    if dpi is None:
        dpi = matplotlib.rcParams['savefig.dpi']
    if dpi == 'figure':
        dpi = figure_class.dpi.fget(figure)
    width, height = figure_class.get_size_inches(figure) * dpi
    return int(width), int(height)


def figure_image(figure: Any) -> Image:
    """A matplotlib figure drawn as a PNG `Image` (with the figure's own size and dpi)."""
    import io

    buffer = io.BytesIO()
    sys.modules['matplotlib.figure'].Figure.savefig(figure, buffer, format='png')
    return Image(buffer.getvalue())


def library_repr(value: Any) -> str | None:
    """The repr numpy or pandas make of their value (the table a model expects), at most
    `REPR_LIMIT` characters; None for any other value. Calls the library's own `__repr__` (of
    the nearest of its classes the value's class derives from), never a subclass's."""
    np, pd = _package_types()
    kinds = (*((np.ndarray, np.generic) if np is not None else ()), *((pd.DataFrame, pd.Series, pd.Index) if pd is not None else ()))
    if not kinds or not isinstance(value, kinds):
        return None
    for cls in type(value).__mro__:
        if type.__dict__['__module__'].__get__(cls).partition('.')[0] in ('numpy', 'pandas'):
            return cut_text(cls.__repr__(value))
    return None


_uuid_int = uuid.UUID.__dict__['int'].__get__  # the slot itself: a subclass's `int` property is not called


def sandbox_default(value: Any) -> Any:
    """Conversion for values leaving the sandbox: subclasses become exact types, others refused."""
    return _exact(value)


def host_default(value: Any) -> Any:
    """Conversion for values leaving the host: also accepts dataclass instances and pydantic models.
    (`measure` refuses an `InstanceValue`, a script's object described, going into the sandbox.)"""
    if type(value) in _DESCRIBED:
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    model_dump = getattr(type(value), 'model_dump', None)
    if model_dump is not None and hasattr(type(value), 'model_fields'):
        return value.model_dump()
    return _exact(value)


_SANDBOX_DEFAULT = _make_default(sandbox_default)
_HOST_DEFAULT = _make_default(host_default)


# ----- measuring a value before it is packed -----------------------------------------------------


class ValueLimitError(ValueError):
    """A value has more items, or a larger decoded size, than may cross the boundary.

    `limit` is the `Limits` field (`'value_items'` or `'value_size'`), `value` its setting.
    """

    def __init__(self, message: str, *, limit: str, value: int) -> None:
        super().__init__(message)
        self.limit = limit
        self.value = value


def _elements(container: Any) -> Any:
    """The items of an exact container type, a dict's keys and values in turn."""
    if type(container) is dict:
        return list(itertools.chain.from_iterable(dict.items(container)))
    return container


#: Items of the largest value `measure` counts without its full walk.
_QUICK_ITEMS = 64


def _quick(value: Any, depth: int) -> tuple[int, int] | None:
    """(items, bytes) of a small value of exact boundary types, at most 3 containers deep and
    `_QUICK_ITEMS` items in all, counted as `measure` counts them; None for any other value (it
    gets the full walk, which also finds a value that contains itself)."""
    t = id(type(value))
    if t in _SCALAR_IDS:
        return 0, _sizeof(value)
    if t not in _CONTAINER_IDS or depth == 3:
        return None
    count = len(value)
    if count > _QUICK_ITEMS:
        return None
    total = _sizeof(value)
    if not count:
        return 0, total
    for element in value if t != _DICT_ID else itertools.chain.from_iterable(dict.items(value)):
        kind = id(type(element))
        if kind in _SCALAR_IDS or (kind in _CONTAINER_IDS and not element and depth < 2):  # most are: no call below
            total += _sizeof(element)
            continue
        below = _quick(element, depth + 1)
        if below is None:
            return None
        count += below[0]
        total += below[1]
        if count > _QUICK_ITEMS:
            return None
    return count, total


_sizeof = sys.getsizeof
_DICT_ID = id(dict)


def fits(value: Any, items: int | None, size: int | None) -> bool:
    """Whether `value` may cross on a quick count alone: a small value of exact boundary types (at
    most 3 containers deep and `_QUICK_ITEMS` items) within `items` and `size` (None: no limit),
    counted as `measure` counts it. Such a value needs no conversion to be packed (no session's
    callables) and no `measure`; any other value needs `measure`, which does not count it again."""
    quick = _quick(value, 0)
    return quick is not None and (items is None or quick[0] <= items) and (size is None or quick[1] <= size)


#: Arguments, and characters of a str or bytes argument, `flat` takes at most.
_FLAT_ARGS = 64
_FLAT_TEXT = 4096
_FIXED_IDS = frozenset(map(id, (type(None), bool, float)))
_INT_ID = id(int)
_TEXT_IDS = frozenset(map(id, (str, bytes)))


def flat(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a call's arguments are at most `_FLAT_ARGS` values each None, a bool, a float, an
    int msgpack packs as one (64 bits) or a str or bytes of at most `_FLAT_TEXT` items: packed
    with no conversion and in little memory, so a sender may pack them first and measure them
    only when the packed message is too long for `packed_bound` to prove them within the limits."""
    if len(args) + len(kwargs) > _FLAT_ARGS:
        return False
    for value in (args, kwargs.values()) if kwargs else (args,):
        for value in value:
            kind = id(type(value))
            if kind in _FIXED_IDS or (kind == _INT_ID and -0x8000000000000000 <= value <= 0xFFFFFFFFFFFFFFFF):
                continue
            if kind not in _TEXT_IDS or len(value) > _FLAT_TEXT:
                return False
    return True


def packed_bound(items: int | None, size: int | None) -> int | None:
    """The longest packed message holding no marked array and no host object (as `flat` values
    are packed) that `measure` lets through whatever it holds, under `items` and `size` (None:
    no limit): each item takes a byte at least, each byte at most `_PER_BYTE` bytes decoded
    (`Decoder.decode` takes such a frame without counting on the same proof). None: any length."""
    if size is not None:
        size //= _PER_BYTE
    if items is None or (size is not None and size < items):
        return size
    return items


def measure(
    value: Any, *, items: int | None, size: int | None, subject: str, crossing: str, convert: Callable[[Any], Any] = sandbox_default
) -> None:
    """Check that `value` may cross, before it is packed; raise if it may not. The walk of a
    value `fits` did not let through (ask it first: most values need nothing more).

    Counts what the receiver will build: every item of every list, tuple, set and frozenset and
    every entry of every dict (`items`), and the bytes of all the objects (`size`, as
    `sys.getsizeof` gives them), each reference counted as the copy it becomes. `subject` names
    the value in the error (`'the result'`), `crossing` the direction (`'leave the sandbox'`).
    A container referenced many times is walked once; the walk stops at the first limit passed.

    A numpy array or a pandas table is checked by its shape before its plain form is made
    (`package_bound`), so one too large to cross is refused without the memory the form takes.

    Raises `ValueLimitError` past `items` or `size` (None: no limit), `ValueError` for a value that
    contains itself or is nested deeper than `MAX_DEPTH`, and `convert`'s `TypeError` for a
    value of a type that may not cross.
    """
    walk = _Walk(items, size, subject, crossing, convert)
    root = value if id(type(value)) in _BOUNDARY_IDS else walk.converted(value)
    own = sys.getsizeof(root)
    if id(type(root)) not in _CONTAINER_IDS:
        walk.check(0, own, exact=True)
        return
    count, total, _ = walk.container(root, value, 1, own)
    walk.check(count, own + total, exact=True)


class _Walk:
    """One `measure`: the subtrees measured so far, by the id of the object (`memo`), and the
    containers being walked (`path`)."""

    __slots__ = ('items', 'size', 'subject', 'crossing', 'convert', 'memo', 'path')

    def __init__(self, items: int | None, size: int | None, subject: str, crossing: str, convert: Callable[[Any], Any]) -> None:
        self.items, self.size, self.subject, self.crossing, self.convert = items, size, subject, crossing, convert
        self.memo: dict[int, tuple[int, int, int]] = {}
        self.path: set[int] = set()

    def check(self, count: int, total: int, *, exact: bool = False) -> None:
        at_least = '' if exact else 'at least '
        if self.items is not None and count > self.items:
            raise ValueLimitError(
                f'{self.subject} has {at_least}{count:,} items; at most {self.items:,} may {self.crossing} (the value_items limit)',
                limit='value_items',
                value=self.items,
            )
        if self.size is not None and total > self.size:
            raise ValueLimitError(
                f'{self.subject} takes {at_least}{total:,} bytes; at most {self.size:,} may {self.crossing} (the value_size limit)',
                limit='value_size',
                value=self.size,
            )

    def converted(self, value: Any) -> Any:
        """`value` converted to a type that may cross; a numpy array's or a pandas table's plain
        form only once the least it takes (`package_bound`) is within the limits."""
        bound = package_bound(value)
        if bound is not None:
            self.check(*bound)
        figure = _figure_of(value)
        if figure is not None and self.size is not None:
            self.check_figure(*figure_pixels(figure))
        converted = self.convert(value)
        if type(converted) is InstanceValue and self.convert is host_default:
            raise TypeError(f"{self.subject} holds an InstanceValue (the script's {converted.type_name}), which cannot go back into the sandbox: its class is the script's code; send its attrs")
        if type(converted) is FileValue and self.convert is host_default:
            raise TypeError(f'{self.subject} holds a FileValue ({converted.path!r}), which cannot go back into the sandbox: it is a description, not an open file; send its path')
        if type(converted) is ModuleValue and self.convert is host_default:
            raise TypeError(f'{self.subject} holds a ModuleValue ({converted.name!r}), which cannot go back into the sandbox: a script imports its modules; send its name')
        return _parts(converted) if id(type(converted)) in _DESCRIBED_IDS else converted

    def check_figure(self, width: int, height: int) -> None:
        """A figure is drawn into width * height * 4 bytes before it is a PNG: refused past
        `size` before it is drawn (past `AGG_MAX_SIDE` a side, matplotlib refuses it itself)."""
        drawn = width * height * 4
        if width < AGG_MAX_SIDE and height < AGG_MAX_SIDE and drawn > self.size:  # type: ignore[operator]
            raise ValueLimitError(
                f'{self.subject} takes {drawn:,} bytes drawn (a figure of {width:,} x {height:,} pixels, 4 bytes each); '
                f'at most {self.size:,} may {self.crossing} (the value_size limit)',
                limit='value_size',
                value=self.size,  # type: ignore[arg-type]
            )

    def container(self, container: Any, original: Any, depth: int, own: int) -> tuple[int, int, int]:
        """(items, bytes, levels) below `container`, an exact container type made from `original`
        at `depth`; `own` its own bytes, counted by its parent, here only to check the limits."""
        key = id(original)
        known = self.memo.get(key)
        if known is not None:
            if depth + known[2] - 1 > MAX_DEPTH:
                raise ValueError(f'{self.subject} is nested more than {MAX_DEPTH} levels deep')
            return known
        if key in self.path:
            raise ValueError('the value contains a reference to itself')
        if depth > MAX_DEPTH:
            raise ValueError(f'{self.subject} is nested more than {MAX_DEPTH} levels deep')
        count = len(container)
        self.check(count, own)
        elements = _elements(container)
        if count <= _SHORT:  # a plain loop costs less than the passes below
            total = 0
            others = []
            for element in elements:
                if id(type(element)) in _SCALAR_IDS:
                    total += sys.getsizeof(element)
                else:
                    others.append(element)
            repeats = [(element, 1) for element in others]
        else:  # each pass in C; a container referenced many times is measured once
            scalar = list(map(_SCALAR_IDS.__contains__, map(id, map(type, elements))))
            total = sum(map(sys.getsizeof, itertools.compress(elements, scalar)))
            others = list(itertools.compress(elements, map(operator.not_, scalar)))
            if others and all(map(operator.is_, others, itertools.repeat(others[0]))):  # `[x] * n`
                repeats = [(others[0], len(others))]
            else:
                distinct = dict(zip(map(id, others), others))
                repeats = [(distinct[identity], times) for identity, times in Counter(map(id, others)).items()]
        self.check(count, own + total)
        levels = 1
        if others:
            self.path.add(key)
            for element, times in repeats:
                converted = element if id(type(element)) in _BOUNDARY_IDS else self.converted(element)
                element_size = sys.getsizeof(converted)
                total += element_size * times
                if id(type(converted)) in _CONTAINER_IDS:
                    below, below_size, below_levels = self.container(converted, element, depth + 1, element_size)
                    count += below * times
                    total += below_size * times
                    levels = max(levels, below_levels + 1)
                self.check(count, own + total)
            self.path.discard(key)
        self.memo[key] = result = (count, total, levels)
        return result


def _packb(value: Any, default: Callable[[Any], Any]) -> bytes:
    return msgpack.packb(value, default=default, strict_types=True, use_bin_type=True)


def pack(message: Any, *, side: str) -> bytes:
    """Encode one message as msgpack bytes.

    `side` is `'host'` or `'sandbox'`: the sender, which decides the conversions allowed (see the
    module docstring). Raises `TypeError` for a value that may not cross, `ValueError` for data
    nested deeper than msgpack's packer allows (about a thousand levels, every container kind
    counted). A value is measured (`measure`) before it is put in a message, which keeps it to
    `MAX_DEPTH`.
    """
    return _packb(message, _HOST_DEFAULT if side == 'host' else _SANDBOX_DEFAULT)


# ----- decoding ----------------------------------------------------------------------------------


class _Mark:
    """The first item of an array that stands for a tuple, set or frozenset: made anew for each
    marker read, so the decoder can tell that each one it made was used where it belongs."""

    __slots__ = ('code',)

    def __init__(self, code: int) -> None:
        self.code = code


class _NotPlain(Exception):
    """A frame `Decoder.decode` took for plain holds what only the counted decoding takes."""


#: Bytes, as `Decoder` counts them, a frame holding no marked array (no tuple, set or description)
#: and no host object, callable or named builtin decodes to per byte of its length, at most. The
#: densest is a chain of one-entry maps keyed by empty strs: 273 bytes (a dict of 224, a str of
#: 49: CPython 3.11, 64-bit) every two bytes; a str takes 49 bytes for its first byte, an int 28,
#: a list 56 and 8 a reference, an extension at least 3 bytes for a Decimal's 104.
_PER_BYTE = 256
#: How the marker of every marked array (a tuple, a set, a description), an Ellipsis and an empty
#: path are packed, but for their code: an extension with no data. A frame without these bytes
#: has none of them (another encoding of one is seen by `Decoder._plain_ext`).
_EMPTY_EXT = b'\xc7\x00'
_EXT_8 = _EMPTY_EXT[0]
#: Frames shorter than this hold no dict of more than `_MAX_COLLISIONS` entries (each entry takes
#: two bytes at least), so their hashes need no check.
_NO_COLLISIONS = 3 + 2 * _MAX_COLLISIONS
#: The extensions whose objects take at most `_PER_BYTE` bytes per byte of their data.
_PLAIN_EXTENSIONS = frozenset({_BIGINT, _DATETIME, _DATE, _TIME, _TIMEDELTA, _TIMEZONE, _DECIMAL, _UUID, _IMAGE, _COMPLEX, _PATH})


class Decoder:
    """Decodes one message, counting what it builds against the receiver's limits.

    `items` and `size` (None: no limit) bound the items and the bytes of the objects built, as
    `measure` counts them, for the whole message; past either, `ValueLimitError`. No container
    longer than `items` is allocated at all. Sets and dicts whose items share hashes (rebuilding
    them costs quadratic time: hashes of ints, floats and tuples are not randomised) are refused
    with `ValueError` before they are built. Anything malformed raises `ValueError` or another
    exception of msgpack's or of the built-in types; none runs code of the sender's.

    A script's objects arrive as their descriptions (`corral.described`); `objects`, where given
    (the worker's), makes each description into the object the receiver uses instead. A host's
    `HostFunction` coming back out is one of the session's `callables`.

    `decode(data)` decodes a whole frame at once; `decode_in_steps(data)` feeds it to msgpack a
    `_STEP`-sized piece at a time, so that no single C call runs long: made to run in a thread
    while the event loop goes on in another.
    """

    __slots__ = ('_items', '_size', '_max_items', '_max_size', '_marks', '_counting', '_objects', '_callables')

    def __init__(
        self, *, items: int | None = None, size: int | None = None, objects: Callable[[Any], Any] | None = None, callables: HostCallables | None = None
    ) -> None:
        self._objects = objects
        self._callables = callables
        self._items = 0
        self._size = 0
        self._max_items = items
        self._max_size = size
        self._marks = 0
        self._counting = items is not None or size is not None

    def _options(self, length: int, *, plain: bool = False) -> dict[str, Any]:
        longest = min(length, self._max_items) if self._max_items is not None else length
        return {
            **({'ext_hook': self._plain_ext} if plain else {'list_hook': self._list, 'ext_hook': self._ext}),
            'object_pairs_hook': self._dict,
            'strict_map_key': False,
            'raw': False,
            'use_list': True,
            'max_str_len': length,
            'max_bin_len': length,
            'max_ext_len': length,
            'max_array_len': longest,
            'max_map_len': longest,
        }

    def decode(self, data: bytes) -> Any:
        """The message in `data`, decoded in one call.

        A frame whose length alone keeps it within the limits (`_PER_BYTE`), holding no marked
        array and no extension whose object may be larger than its data, is decoded by msgpack
        with no hook but for its extensions: it builds what the counted decoding (`walked`)
        would, or fails as it does (the same error: it is decoded again that way).
        """
        if _plain(data, self._max_items, self._max_size):
            try:
                if len(data) < _NO_COLLISIONS:
                    return _short(data, self._plain_ext)
                return msgpack.unpackb(data, **self._options(len(data), plain=True))
            except Exception:
                self._items = self._size = self._marks = 0
        return self.walked(data)

    def walked(self, data: bytes) -> Any:
        """The message in `data`, decoded in one call, counting every container it builds."""
        return self._finish(msgpack.unpackb(data, **self._options(len(data))))

    def _plain_ext(self, code: int, data: bytes) -> Any:
        """An extension of a frame `decode` takes without counting: one whose object takes at
        most `_PER_BYTE` bytes per byte of its data; any other sends the frame to `walked`."""
        if code not in _PLAIN_EXTENSIONS:
            raise _NotPlain
        return self._ext(code, data)

    def decode_in_steps(self, data: bytes) -> Any:
        """The message in `data`, decoded `_STEP` bytes at a time.

        The cyclic garbage collector is paused meanwhile (if it was on): it would walk every
        container built so far, again and again, as the message adds up to `items` of them
        (measured: a million empty lists decode in a sixth of the time without it). What a message
        builds has no cycles; the collector's next run sees it.
        """
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._decode_in_steps(data)
        finally:
            if collecting:
                gc.enable()

    def _decode_in_steps(self, data: bytes) -> Any:
        unpacker = msgpack.Unpacker(max_buffer_size=len(data), **self._options(len(data)))
        view = memoryview(data)
        for start in range(0, len(data), _STEP):
            unpacker.feed(view[start : start + _STEP])
            try:
                message = unpacker.unpack()
            except msgpack.OutOfData:
                continue
            if start + _STEP < len(data):
                raise ValueError('a frame holds more than one message')
            return self._finish(message)
        raise ValueError('a frame ends inside its message')

    def _finish(self, message: Any) -> Any:
        if self._marks:
            raise ValueError('a tuple or set marker out of place in a frame')
        self._count(0, sys.getsizeof(message))
        return message

    def _count(self, items: int, size: int) -> None:
        self._items += items
        self._size += size
        if self._max_items is not None and self._items > self._max_items:
            raise ValueLimitError(
                f'a message has more than {self._max_items:,} items', limit='value_items', value=self._max_items
            )
        if self._max_size is not None and self._size > self._max_size:
            raise ValueLimitError(
                f'a message takes more than {self._max_size:,} bytes decoded', limit='value_size', value=self._max_size
            )

    def _count_items(self, elements: list[Any]) -> None:
        if not self._counting:
            return
        if len(elements) <= _STEP:
            self._count(len(elements), sum(map(sys.getsizeof, elements)))
            return
        for start in range(0, len(elements), _STEP):
            part = elements[start : start + _STEP]
            self._count(len(part), sum(map(sys.getsizeof, part)))

    def _list(self, elements: list[Any]) -> Any:
        if not elements:
            return elements
        if type(elements[0]) is not _Mark:
            self._count_items(elements)
            return elements
        code = elements[0].code
        self._marks -= 1
        del elements[0]
        self._count_items(elements)
        if code == _TUPLE:
            return tuple(elements)
        if code in (_EXCEPTION, _NAMED_TUPLE, _INSTANCE, _FILE, _MODULE):
            described = _described(code, elements)
            return described if self._objects is None else self._objects(described)
        self._check_hashes(elements, 'set')
        result: set[Any] = set()
        for start in range(0, len(elements), _STEP):
            result.update(elements[start : start + _STEP])
        return result if code == _SET else frozenset(result)

    def _dict(self, pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
        for start in range(0, len(pairs) if self._counting else 0, _STEP):
            part = pairs[start : start + _STEP]
            self._count(len(part), sum(map(sys.getsizeof, itertools.chain.from_iterable(part))))
        self._check_hashes(list(map(operator.itemgetter(0), pairs)), 'dict')
        result: dict[Any, Any] = {}
        for start in range(0, len(pairs), _STEP):
            result.update(pairs[start : start + _STEP])
        return result

    @staticmethod
    def _check_hashes(keys: list[Any], kind: str) -> None:
        """Refuse keys of which more than `_MAX_COLLISIONS` share a hash (distinct keys rarely
        share one by chance; equal ones, which a sender never puts in one set, count too)."""
        if len(keys) <= _MAX_COLLISIONS:
            return
        counts: Counter[int] = Counter()
        for start in range(0, len(keys), _STEP):
            counts.update(map(hash, keys[start : start + _STEP]))
        if len(counts) < len(keys) and max(counts.values()) > _MAX_COLLISIONS:
            raise ValueError(f'more than {_MAX_COLLISIONS} items of a {kind} of the message share one hash')

    def _ext(self, code: int, data: bytes) -> Any:
        if code in _MARKS:
            if data:
                raise ValueError('a tuple or set marker with data in a frame')
            self._marks += 1
            return _Mark(code)
        if code == _BIGINT:
            return int(data.decode(), 16)
        if code == _UUID:
            return uuid.UUID(bytes=data)  # ValueError unless 16 bytes
        if code == _PATH:
            text = data.decode('utf-8', 'surrogatepass')
            if self._counting:
                self._count(0, sys.getsizeof(text))  # the text the path holds, beyond the path object
            return _PATH_TYPE[0](text)
        if code == _IMAGE:
            mime_type, _, image = data.partition(b'\0')
            return Image(image, mime_type.decode())  # ValueError for a format not in IMAGE_TYPES
        if code == _DECIMAL:
            return _decimal(data)
        if code == _COMPLEX:
            try:
                return complex(*_COMPLEX_PARTS.unpack(data))
            except struct.error:
                raise ValueError('malformed complex in a frame') from None
        if code == _CALLABLE:
            return _callable(data, self._callables)
        if code == _HOST_OBJECT:
            return _host_object(data, self._callables)
        if code == _NAMED:
            kind, _, name = data.decode().partition(':')
            return named_object(SandboxBuiltin(kind, name))  # ValueError for a name not offered
        if code == _ELLIPSIS:
            if data:
                raise ValueError('an Ellipsis with data in a frame')
            return Ellipsis
        if code in (_DATETIME, _TIME):
            return _decode_moment(code, data)
        if code == _DATE:
            return datetime.date.fromisoformat(data.decode())
        if code in (_TIMEDELTA, _TIMEZONE):
            if code == _TIMEDELTA and len(data) != _DURATION.size:
                raise ValueError('malformed timedelta or time zone in a frame')
            try:
                days, seconds, microseconds = _DURATION.unpack(data[: _DURATION.size])
                duration = datetime.timedelta(days=days, seconds=seconds, microseconds=microseconds)
            except (struct.error, OverflowError):  # not 12 bytes; more than timedelta's 999,999,999 days
                raise ValueError('malformed timedelta or time zone in a frame') from None
            return duration if code == _TIMEDELTA else _zone(duration, data[_DURATION.size :].decode('utf-8', 'surrogatepass'))
        raise ValueError(f'unknown extension type {code} in a frame')


def _zone(offset: datetime.timedelta, name: str) -> datetime.timezone:
    """`timezone(offset, name)`, or `timezone(offset)` for no name; ValueError for an offset of a day or more."""
    return datetime.timezone(offset, name) if name else datetime.timezone(offset)


def _decode_moment(code: int, data: bytes) -> datetime.datetime | datetime.time:
    """A datetime or a time from `_moment`'s data; ValueError for malformed data."""
    text, nul, extra = data.partition(b'\0')
    kind = datetime.datetime if code == _DATETIME else datetime.time
    value = kind.fromisoformat(text.decode())
    if not nul:
        return value
    fold, name = extra[:1], extra[1:].decode('utf-8', 'surrogatepass')
    if fold not in (b'0', b'1'):
        raise ValueError('malformed datetime or time in a frame')
    offset = value.utcoffset()
    tzinfo = value.tzinfo if offset is None or not name else _zone(offset, name)
    return value.replace(tzinfo=tzinfo, fold=int(fold))


def _decimal(data: bytes) -> decimal.Decimal:
    try:
        return decimal.Decimal(data.decode('ascii'))
    except (UnicodeDecodeError, decimal.InvalidOperation):
        raise ValueError('malformed Decimal in a frame') from None


def unpack(
    data: bytes, *, items: int | None = None, size: int | None = None, objects: Callable[[Any], Any] | None = None, callables: HostCallables | None = None
) -> Any:
    """Decode one message in one call (see `Decoder` for the arguments, the limits and the errors raised)."""
    if len(data) < _NO_COLLISIONS and _plain(data, items, size):
        try:  # a short plain frame, as most are (see `Decoder.decode`), with no decoder made
            return _short(data, _UNBOUNDED._plain_ext)
        except Exception:
            pass
    return Decoder(items=items, size=size, objects=objects, callables=callables).decode(data)


def _plain(data: bytes, items: int | None, size: int | None) -> bool:
    """Whether `Decoder.decode` may take `data` without counting: its length alone keeps what it
    builds within `items` and `size` (an item a byte, `_PER_BYTE` bytes a byte; None: no limit),
    and it has no empty extension (a marked array's marker, an Ellipsis, an empty path)."""
    length = len(data)
    return (
        (items is None or length <= items)
        and (size is None or length * _PER_BYTE <= size)
        and (_EXT_8 not in data or _EMPTY_EXT not in data)  # a byte is found faster than two
    )


def _short(data: bytes, ext_hook: Callable[[int, bytes], Any]) -> Any:
    """A frame shorter than `_NO_COLLISIONS` that `Decoder.decode` takes without counting, decoded."""
    length = len(data)
    return msgpack.unpackb(
        data, ext_hook=ext_hook, strict_map_key=False, raw=False, max_str_len=length, max_bin_len=length, max_ext_len=length,
        max_array_len=length, max_map_len=length,
    )  # fmt: skip


#: What `unpack` decodes a short plain frame's extensions with (they need no limits, objects or callables).
_UNBOUNDED = Decoder()


# ----- showing a value ---------------------------------------------------------------------------


class _Full(Exception):
    """The repr being made has reached its limit."""


class _ReprWriter:
    """Writes the repr of a value piece by piece, stopping once it holds `limit` characters."""

    __slots__ = ('parts', 'length', 'limit', 'open')

    def __init__(self, limit: int) -> None:
        self.open: set[int] = set()  # ids of the containers being written, as repr() shows a cycle
        self.parts: list[str] = []
        self.length = 0
        self.limit = limit

    def write(self, text: str) -> None:
        self.parts.append(text)
        self.length += len(text)
        if self.length > self.limit:
            raise _Full

    def value(self, value: Any, depth: int) -> None:
        t = type(value)
        if t in (list, tuple, set, frozenset, dict):
            if depth >= MAX_DEPTH or id(value) in self.open:
                self.write('[...]' if t is list else '(...)' if t is tuple else '{...}')
                return
            self.open.add(id(value))
            self.container(value, t, depth)
            self.open.discard(id(value))
        elif t in _DESCRIBED:
            self.described(value, depth)
        elif t is str or t is bytes:
            self.write(repr(value[: self.limit - self.length + 1]))
        elif t is int and value.bit_length() > 14_000:  # past Python's int-to-str limit of 4300 digits
            self.write(f'<int of {value.bit_length()} bits>')
        elif t is SandboxBuiltin:  # as CPython shows the object: `<built-in function len>`, `<class 'functools.partial'>`
            name = value.name if value.kind == 'type' else value.name.rpartition('.')[2]
            self.write(f"<class '{name}'>" if value.kind == 'type' else f'<built-in function {name}>')
        else:
            try:
                text = repr(value)
            except Exception:
                text = f'<{describe_type(value)}>'
            self.write(text[: self.limit - self.length + 1])

    def described(self, value: Any, depth: int) -> None:
        """A script's object as CPython shows it: `ValueError('bad', 3)`, `Point(x=1, y=2)`, a
        dataclass's `Order(id=7)`; another instance as `<__main__.Plain object: a=1>`."""
        if type(value) is ModuleValue:  # CPython's repr of a module that has no file
            self.write(f'<module {value.name!r}>')
            return
        if type(value) is ExceptionValue:
            opening, closing, pairs = f'{value.type_name}(', ')', [(None, item) for item in value.args]
        elif type(value) is NamedTupleValue:
            opening, closing, pairs = f'{value._type_name}(', ')', list(zip(value._fields, value))
        elif value.is_dataclass:
            opening, closing, pairs = f'{value.type_name}(', ')', list(value.attrs.items())
        else:
            opening, closing, pairs = f'<{value.module}.{value.type_name} object', '>', list(value.attrs.items())
            if pairs:
                opening += ': '
        if depth >= MAX_DEPTH:
            self.write(opening + '...' + closing)
            return
        self.write(opening)
        for index, (name, item) in enumerate(pairs):
            if index:
                self.write(', ')
            if name is not None:
                self.write(f'{name}=')
            self.value(item, depth + 1)
        self.write(closing)

    def container(self, value: Any, t: type, depth: int) -> None:
        if t is dict:
            self.write('{')
            for index, (key, item) in enumerate(value.items()):
                if index:
                    self.write(', ')
                self.value(key, depth + 1)
                self.write(': ')
                self.value(item, depth + 1)
            self.write('}')
            return
        if not value and t in (set, frozenset):
            self.write(f'{t.__name__}()')
            return
        opening, closing = {list: ('[', ']'), tuple: ('(', ',)' if len(value) == 1 else ')'), set: ('{', '}'), frozenset: ('frozenset({', '})')}[t]
        self.write(opening)
        for index, item in enumerate(value):
            if index:
                self.write(', ')
            self.value(item, depth + 1)
        self.write(closing)


def bounded_repr(value: Any, *, limit: int = REPR_LIMIT) -> str:
    """The repr of a value that came out of the sandbox, at most about `limit` characters; never raises.

    The same text as `repr(value)` when that is no longer than `limit`; otherwise its first
    `limit` characters and a note that says it was cut. Ints past Python's int-to-str limit
    (4300 digits) show as `<int of N bits>`, containers nested past `MAX_DEPTH` as `[...]`, and
    an object whose own repr raises as `<type>`. A script's object (`corral.described`) shows as
    CPython shows it (`ValueError('bad')`, `Point(x=1, y=2)`, `Order(id=7)`), another
    instance as `<__main__.Plain object: a=1>`, a `SandboxBuiltin` as `<built-in function len>`
    or `<class 'functools.partial'>`.
    """
    writer = _ReprWriter(limit)
    try:
        writer.value(value, 0)
    except _Full:
        pass
    except Exception as error:  # RecursionError, MemoryError: still a text
        return f'<{describe_type(value)} that cannot be shown: {type(error).__name__}>'
    return cut_text(''.join(writer.parts), limit)


def cut_text(text: str, limit: int = REPR_LIMIT) -> str:
    """`text` when it has at most `limit` characters, else its first `limit` and a note that it was cut."""
    if len(text) <= limit:
        return text
    return text[:limit] + f'... (cut at {limit:,} characters)'
