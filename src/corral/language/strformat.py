"""`str.format` for the sandbox: replacement fields may not read refused attributes.

`'{0.__class__}'.format(1)` and `'{0.__globals__}'.format(f)` are the classic ways to read an
attribute that attribute syntax refuses. Format strings without attribute access in a field (the
vast majority: `'{:>10}'`, `'{name}'`, `'{0[key]}'`) go straight to CPython's own `str.format`;
the others are formatted here, field by field, reading each attribute through the same rules as
`getattr`. This module does not derive from `string.Formatter`, so no script can reach an
unguarded `get_field` through `super()` or by patching a class.
"""

from __future__ import annotations

import _string
from collections.abc import Callable
from typing import Any

__all__ = ['safe_format']

_parse = _string.formatter_parser
_split = _string.formatter_field_name_split


def safe_format(text: str, args: tuple[Any, ...], kwargs: Any, *, refusal: Callable[..., str | None], mapping: bool = False) -> str:
    """`text.format(*args, **kwargs)`, or `text.format_map(kwargs)` when `mapping`. `refusal(obj,
    name, store=False)` is why a field may not read attribute `name` of `obj`, or None (the
    guards' rule, which they pass: they import this module)."""
    try:
        plain = True
        for _literal, field, spec, _conversion in _parse(text):
            if field is not None and ('.' in field or (spec and '{' in spec and '.' in spec)):
                plain = False
                break
    except ValueError:
        plain = False
    if plain:
        return str.format_map(text, kwargs) if mapping else str.format(text, *args, **kwargs)
    result, _ = _vformat(text, args, kwargs, refusal, 2, 0)
    return result


def _vformat(text: str, args: tuple[Any, ...], kwargs: Any, refusal: Callable[..., str | None], depth: int, auto: int | bool) -> tuple[str, int | bool]:
    if depth < 0:
        raise ValueError('Max string recursion exceeded')
    parts: list[str] = []
    for literal, field, spec, conversion in _parse(text):
        if literal:
            parts.append(literal)
        if field is None:
            continue
        if field == '' or field[0] in '.[':
            if auto is False:
                raise ValueError('cannot switch from manual field specification to automatic field numbering')
            field = f'{auto}{field}'
            auto = auto + 1
        elif field.split('.', 1)[0].split('[', 1)[0].isdigit():
            if auto:
                raise ValueError('cannot switch from automatic field numbering to manual field specification')
            auto = False
        value = _field(field, args, kwargs, refusal)
        if conversion is not None:
            value = _convert(value, conversion)
        if spec:
            spec, auto = _vformat(spec, args, kwargs, refusal, depth - 1, auto)
        parts.append(format(value, spec or ''))
    return ''.join(parts), auto


def _field(field: str, args: tuple[Any, ...], kwargs: Any, refusal: Callable[..., str | None]) -> Any:
    first, rest = _split(field)
    if isinstance(first, int):
        if first >= len(args):
            raise IndexError(f'Replacement index {first} out of range for positional args tuple')
        value = args[first]
    else:
        value = kwargs[first]
    for is_attribute, key in rest:
        if is_attribute:
            refused = refusal(value, key, store=False)
            if refused is not None:
                raise AttributeError(f'str.format() field {{{field}}}: {refused}')
            value = getattr(value, key)
        else:
            value = value[key]
    return value


def _convert(value: Any, conversion: str) -> Any:
    if conversion == 's':
        return str(value)
    if conversion == 'r':
        return repr(value)
    if conversion == 'a':
        return ascii(value)
    raise ValueError(f"Unknown conversion specifier {conversion}")
