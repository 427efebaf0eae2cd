"""What may cross the sandbox boundary, and how it is encoded.

Values cross as msgpack with a few extension types, both ways:

    None, bool, int (any size), float, str, bytes, list, tuple, dict, set, frozenset,
    datetime.datetime, datetime.date, datetime.time, datetime.timedelta, datetime.timezone

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
from typing import Any, Callable

import msgpack

__all__ = ['pack', 'unpack', 'host_default', 'sandbox_default', 'describe_type', 'MAX_FRAME']

#: Largest frame, in bytes, either side accepts (one message). A larger one is a protocol error.
MAX_FRAME = 64 * 1024 * 1024

_TUPLE, _SET, _FROZENSET, _BIGINT, _DATETIME, _DATE, _TIME, _TIMEDELTA, _TIMEZONE = range(1, 10)


def describe_type(value: object) -> str:
    """The name of a value's type as a script sees it: `'Foo'`, `'function'`, `'module'`."""
    return type(value).__name__


def _refuse(value: object) -> TypeError:
    return TypeError(
        f"a value of type '{describe_type(value)}' cannot cross the sandbox boundary; use None, bool, "
        'int, float, str, bytes, list, tuple, dict, set, frozenset or datetime values'
    )


#: Types msgpack packs through `default` (ext types, and ints past 64 bits).
_EXTENSION_TYPES = frozenset({
    int, tuple, set, frozenset, datetime.datetime, datetime.date, datetime.time, datetime.timedelta, datetime.timezone,
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
        offset = value.utcoffset(None)  # datetime.timezone: the one type left
        return msgpack.ExtType(_TIMEZONE, _packb([offset.days, offset.seconds, offset.microseconds], default))

    return default


def _exact(value: Any) -> Any:
    """Convert an instance of a subclass of a boundary type to the exact built-in type.

    Uses the base type's own C methods (`str.__str__`, `dict.items`), so an override in the
    subclass (`__str__`, `__iter__`, `keys`) is never called.
    """
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


def _ext_hook(code: int, data: bytes) -> Any:
    if code == _BIGINT:
        return int(data.decode(), 16)
    if code in (_DATETIME, _DATE, _TIME):
        text = data.decode()
        kind = {_DATETIME: datetime.datetime, _DATE: datetime.date, _TIME: datetime.time}[code]
        return kind.fromisoformat(text)
    items = _unpackb(data)
    if code == _TUPLE:
        return tuple(items)
    if code == _SET:
        return set(items)
    if code == _FROZENSET:
        return frozenset(items)
    if code == _TIMEDELTA:
        return datetime.timedelta(days=items[0], seconds=items[1], microseconds=items[2])
    if code == _TIMEZONE:
        return datetime.timezone(datetime.timedelta(days=items[0], seconds=items[1], microseconds=items[2]))
    raise ValueError(f'unknown extension type {code} in a frame')


def _unpackb(data: bytes) -> Any:
    return msgpack.unpackb(data, ext_hook=_ext_hook, strict_map_key=False, raw=False, use_list=True)


def pack(message: Any, *, side: str) -> bytes:
    """Encode one message as msgpack bytes.

    `side` is `'host'` or `'sandbox'`: the sender, which decides the conversions allowed (see the
    module docstring). Raises `TypeError` for a value that may not cross, `ValueError` for data
    nested deeper than msgpack's limit (512 levels).
    """
    return _packb(message, _HOST_DEFAULT if side == 'host' else _SANDBOX_DEFAULT)


def unpack(data: bytes) -> Any:
    """Decode one message. Raises `ValueError` (or a subclass) for malformed data."""
    return _unpackb(data)
