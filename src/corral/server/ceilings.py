"""The operator's ceilings on sessions' `Limits` (`create_app(max_limits=...)`), and the bounds they give."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields

from ..limits import Limits

#: The defaults of a session's limits; with the server's ceilings, its bounds (`CorralServer.bounds`).
_DEFAULT_LIMITS = Limits()
#: The limits a client may lower but not raise even without an operator's ceiling (their ceiling is
#: then the default): the CPU and memory its worker and its type check take from the host, which
#: every tenant shares (a tenant's CPU quota is checked as a feed starts, so a feed's own
#: `cpu_time` is what bounds it), the bytes of each script (kept for the session's life: see
#: `_Connection._run`), and the items and bytes of the values the server decodes from
#: its worker and its client (a session's `value_items=None` let one result of 8 million empty
#: lists grow the server by 580 MB).
_CEILINGS = ('memory', 'cpu_time', 'code_size', 'stub_size', 'type_check_time', 'type_check_memory', 'value_items', 'value_size')


def _ceilings(max_limits: Mapping[str, float]) -> dict[str, float]:
    """The ceilings of `create_app(max_limits=...)`, each of the type of its limit's default; `_CEILINGS` by default."""
    names = [field.name for field in fields(Limits)]
    ceilings: dict[str, float] = {name: getattr(_DEFAULT_LIMITS, name) for name in _CEILINGS}
    for name, value in max_limits.items():
        if name not in names:
            raise ValueError(f'unknown limit {name!r} for a ceiling; the limits are the fields of corral.Limits: {", ".join(names)}')
        whole = isinstance(getattr(_DEFAULT_LIMITS, name), int)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 <= value < float('inf')) or (whole and value != int(value)):
            raise ValueError(f'the ceiling of {name} must be {"a whole number" if whole else "a number"} of 0 or more, not {value!r}')
        ceilings[name] = int(value) if whole else float(value)
        try:  # in the range a session's limit may take
            Limits(**{name: ceilings[name]})
        except ValueError as error:
            raise ValueError(f'the ceiling of {name} is out of range: {error}') from None
    return ceilings


def _lower(limit: int | None, bound: int | None) -> int:
    """The smaller of a session's limit and the server's bound (None: no limit)."""
    assert bound is not None
    return bound if limit is None else min(limit, bound)
