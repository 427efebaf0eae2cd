"""What may cross the sandbox boundary, and how it is encoded.

Values cross as msgpack with a few extension types, both ways:

    None, bool, int (any size), float, str, bytes, list, tuple, dict, set, frozenset,
    datetime.datetime, datetime.date, datetime.time, datetime.timedelta, datetime.timezone,
    decimal.Decimal, uuid.UUID

and, converted by the sender, an `enum.Enum` member as its value (its class is code, which never
crosses; the script sees the value, as JSON would carry it) and a `pathlib.PurePath` as its `str`
(a path names a place in the sender's files: the host's and the sandbox's differ, the sandbox
seeing only its mounts, so the receiver gets the text to map, not an object to open).
Anything else is refused with `TypeError` naming the type. The sender converts subclasses of
these types to the exact built-in type first (a `str` subclass arrives as a plain `str`, a named
tuple as a `tuple`), so the receiver only ever builds plain built-in objects and never runs code
that came from the other side. Datetimes keep a fixed UTC offset: a `zoneinfo` zone arrives as
`datetime.timezone(offset)`.

On the host, results of host functions may also be dataclass instances and pydantic models;
they are converted to dicts (`dataclasses.asdict`, `model_dump()`) before encoding.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import pathlib
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import msgpack

__all__ = ['pack', 'unpack', 'safe_repr', 'host_default', 'sandbox_default', 'describe_type', 'MAX_FRAME', 'UNPACKABLE_RESULT']

#: Largest frame, in bytes, either side accepts (one message). A larger one is a protocol error.
MAX_FRAME = 64 * 1024 * 1024

#: How the `TypeError` begins that a script gets when it ran to its end and its value cannot cross.
UNPACKABLE_RESULT = 'the value of the last expression cannot leave the sandbox'

_TUPLE, _SET, _FROZENSET, _BIGINT, _DATETIME, _DATE, _TIME, _TIMEDELTA, _TIMEZONE, _DECIMAL, _UUID = range(1, 12)


def describe_type(value: object) -> str:
    """The name of a value's type as a script sees it: `'Foo'`, `'function'`, `'module'`."""
    return type(value).__name__


def _refuse(value: object) -> TypeError:
    return TypeError(
        f"a value of type '{describe_type(value)}' cannot cross the sandbox boundary; use None, bool, "
        'int, float, str, bytes, list, tuple, dict, set, frozenset, datetime, Decimal or UUID values'
    )


#: Types msgpack packs through `default` (ext types, and ints past 64 bits).
_EXTENSION_TYPES = frozenset({
    int, tuple, set, frozenset, datetime.datetime, datetime.date, datetime.time, datetime.timedelta, datetime.timezone,
    decimal.Decimal, uuid.UUID,
})
#: The exact types that may cross; anything else goes through the side's conversion first.
_BOUNDARY_TYPES = _EXTENSION_TYPES | {type(None), bool, float, str, bytes, list, dict}


def _make_default(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def default(value: Any) -> Any:
        t = type(value)
        if t not in _BOUNDARY_TYPES:  # a subclass (a named tuple, say) or a host type: convert first
            value = convert(value)
            t = type(value)
            if t not in _EXTENSION_TYPES:
                return value
        if t is int:  # only reached when it does not fit in 64 bits
            return msgpack.ExtType(_BIGINT, format(value, 'x').encode())
        if t is tuple:
            return msgpack.ExtType(_TUPLE, _packb(list(value), default))
        if t is set:
            return msgpack.ExtType(_SET, _packb(list(value), default))
        if t is frozenset:
            return msgpack.ExtType(_FROZENSET, _packb(list(value), default))
        if t is datetime.datetime:
            return msgpack.ExtType(_DATETIME, value.isoformat().encode())
        if t is datetime.date:
            return msgpack.ExtType(_DATE, value.isoformat().encode())
        if t is datetime.time:
            return msgpack.ExtType(_TIME, value.isoformat().encode())
        if t is datetime.timedelta:
            return msgpack.ExtType(_TIMEDELTA, _packb([value.days, value.seconds, value.microseconds], default))
        if t is decimal.Decimal:
            return msgpack.ExtType(_DECIMAL, str(value).encode())  # exact, NaN and infinities included
        if t is uuid.UUID:
            return msgpack.ExtType(_UUID, value.bytes)
        offset = value.utcoffset(None)  # datetime.timezone: the one type left
        return msgpack.ExtType(_TIMEZONE, _packb([offset.days, offset.seconds, offset.microseconds], default))

    return default


def _exact(value: Any) -> Any:
    """Convert an instance of a subclass of a boundary type to the exact built-in type.

    Uses the base type's own C methods (`str.__str__`, `dict.items`), so an override in the
    subclass (`__str__`, `__iter__`, `keys`) is never called. An enum member becomes its value
    (read from its own dict, not through a `value` property), a path its text.
    """
    if isinstance(value, enum.Enum):
        return object.__getattribute__(value, '__dict__')['_value_']
    if isinstance(value, pathlib.PurePath):
        return pathlib.PurePath.__str__(value)
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
        return datetime.datetime.fromisoformat(datetime.datetime.isoformat(value))
    if isinstance(value, datetime.date):
        return datetime.date.fromordinal(datetime.date.toordinal(value))
    raise _refuse(value)


_uuid_int = uuid.UUID.__dict__['int'].__get__  # the slot itself: a subclass's `int` property is not called


def sandbox_default(value: Any) -> Any:
    """Conversion for values leaving the sandbox: subclasses become exact types, others refused."""
    return _exact(value)


def host_default(value: Any) -> Any:
    """Conversion for values leaving the host: also accepts dataclass instances and pydantic models."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    model_dump = getattr(type(value), 'model_dump', None)
    if model_dump is not None and hasattr(type(value), 'model_fields'):
        return value.model_dump()
    return _exact(value)


_SANDBOX_DEFAULT = _make_default(sandbox_default)
_HOST_DEFAULT = _make_default(host_default)


def _packb(value: Any, default: Callable[[Any], Any]) -> bytes:
    return msgpack.packb(value, default=default, strict_types=True, use_bin_type=True)


class _Decoder:
    """Decodes one message; with a `budget`, rebuilds sets and dicts under a time limit.

    Hashes of ints, floats and tuples are not randomised, so a worker can send a set (or dict)
    whose items all collide: rebuilding it costs time quadratic in its size, on the host's event
    loop. With a budget (seconds for the whole message), sets and dicts are filled item by item,
    checking the clock, and a message that takes longer is refused with `ValueError`.
    """

    __slots__ = ('_deadline',)

    def __init__(self, budget: float | None) -> None:
        self._deadline = None if budget is None else time.monotonic() + budget

    def unpackb(self, data: bytes) -> Any:
        if self._deadline is None:
            return msgpack.unpackb(data, ext_hook=self._ext_hook, strict_map_key=False, raw=False, use_list=True)
        return msgpack.unpackb(
            data, ext_hook=self._ext_hook, object_pairs_hook=self._dict, strict_map_key=False, raw=False, use_list=True
        )

    def _fill(self, container: Any, add: Callable[[Any], None], items: Iterable[Any]) -> Any:
        deadline = self._deadline
        for index, item in enumerate(items):
            add(item)
            if deadline is not None and index & 255 == 255 and time.monotonic() > deadline:
                raise ValueError(
                    f'rebuilding a {type(container).__name__} of the message took too long (its items collide '
                    'in their hashes)'
                )
        return container

    def _dict(self, pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        return self._fill(result, lambda pair: result.__setitem__(*pair), pairs)

    def _ext_hook(self, code: int, data: bytes) -> Any:
        if code == _BIGINT:
            return int(data.decode(), 16)
        if code == _UUID:
            return uuid.UUID(bytes=data)  # ValueError unless 16 bytes
        if code == _DECIMAL:
            return _decimal(data)
        if code in (_DATETIME, _DATE, _TIME):
            text = data.decode()
            kind = {_DATETIME: datetime.datetime, _DATE: datetime.date, _TIME: datetime.time}[code]
            return kind.fromisoformat(text)
        items = self.unpackb(data)
        if code == _TUPLE:
            return tuple(items)
        if code == _SET:
            result: set[Any] = set()
            return self._fill(result, result.add, items)
        if code == _FROZENSET:
            seen: set[Any] = set()
            return frozenset(self._fill(seen, seen.add, items))
        if code == _TIMEDELTA:
            return datetime.timedelta(days=items[0], seconds=items[1], microseconds=items[2])
        if code == _TIMEZONE:
            return datetime.timezone(datetime.timedelta(days=items[0], seconds=items[1], microseconds=items[2]))
        raise ValueError(f'unknown extension type {code} in a frame')


def _decimal(data: bytes) -> decimal.Decimal:
    try:
        return decimal.Decimal(data.decode('ascii'))
    except (UnicodeDecodeError, decimal.InvalidOperation):
        raise ValueError('malformed Decimal in a frame') from None


def pack(message: Any, *, side: str) -> bytes:
    """Encode one message as msgpack bytes.

    `side` is `'host'` or `'sandbox'`: the sender, which decides the conversions allowed (see the
    module docstring). Raises `TypeError` for a value that may not cross, `ValueError` for data
    nested deeper than msgpack's limit (512 levels).
    """
    return _packb(message, _HOST_DEFAULT if side == 'host' else _SANDBOX_DEFAULT)


def unpack(data: bytes, *, budget: float | None = None) -> Any:
    """Decode one message. Raises `ValueError` (or a subclass) for malformed data.

    `budget`: seconds the sets and dicts of the message may take to rebuild (see `_Decoder`);
    the host gives one for every message from a worker.
    """
    return _Decoder(budget).unpackb(data)


def safe_repr(value: Any) -> str:
    """`repr(value)`, except that an int too long for Python's int-to-str limit (4300 digits by
    default, `sys.get_int_max_str_digits()`) shows as `<int of N bits>` instead of raising."""
    try:
        return repr(value)
    except ValueError:
        pass
    if isinstance(value, int) and not isinstance(value, bool):
        return f'<int of {value.bit_length()} bits>'
    if isinstance(value, list):
        return '[' + ', '.join(map(safe_repr, value)) + ']'
    if isinstance(value, tuple):
        return '(' + ', '.join(map(safe_repr, value)) + (',)' if len(value) == 1 else ')')
    if isinstance(value, dict):
        return '{' + ', '.join(f'{safe_repr(k)}: {safe_repr(v)}' for k, v in value.items()) + '}'
    if isinstance(value, (set, frozenset)):
        inner = ', '.join(map(safe_repr, value))
        return f'{{{inner}}}' if type(value) is set else f'frozenset({{{inner}}})'
    return f'<{type(value).__name__}>'
