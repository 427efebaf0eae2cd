"""The builtins a script sees: an allow-list, plus corral's own `print` and `__import__`."""

from __future__ import annotations

import builtins
from typing import Any, Callable

__all__ = ['make_builtins', 'EXCEPTIONS', 'SAFE_BUILTINS']

#: Exception classes a script can name, raise and catch; host exceptions map onto these by name.
EXCEPTIONS: dict[str, type[BaseException]] = {
    name: value
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException) and not name.startswith('_')
}

SAFE_BUILTINS = (
    'abs', 'aiter', 'all', 'anext', 'any', 'ascii', 'bin', 'bool', 'bytearray', 'bytes', 'callable',
    'chr', 'classmethod', 'complex', 'dict', 'divmod', 'enumerate', 'filter', 'float', 'format',
    'frozenset', 'getattr', 'hasattr', 'hash', 'hex', 'id', 'int', 'isinstance', 'issubclass', 'iter',
    'len', 'list', 'map', 'max', 'min', 'next', 'object', 'oct', 'ord', 'pow', 'property', 'range',
    'repr', 'reversed', 'round', 'set', 'setattr', 'delattr', 'slice', 'sorted', 'staticmethod', 'str',
    'sum', 'super', 'tuple', 'type', 'zip', 'Ellipsis', 'NotImplemented', 'None', 'True', 'False',
    '__build_class__',
)


def make_builtins(*, print: Callable[..., None], import_: Callable[..., Any]) -> dict[str, Any]:
    """A fresh builtins namespace for one session."""
    namespace = {name: getattr(builtins, name) for name in SAFE_BUILTINS}
    namespace.update(EXCEPTIONS)
    namespace['print'] = print
    namespace['__import__'] = import_
    return namespace
