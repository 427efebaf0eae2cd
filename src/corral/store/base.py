"""The `Store` protocol every session store implements, and the rules its arguments follow.

A store keeps, per tenant and session id, the opaque bytes of a session's signed state (a full
state, and the records appended to it since), its generation, and a lease that says which holder
(one checkout, in any process on any machine) has the session. It never reads the state: signing,
versions and sizes are the session's business; the generation is the store's, a counter every
write moves on by one, and a write names the generation it follows (a compare-and-set).
"""

from __future__ import annotations

import builtins
import math
import re
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable
from urllib.parse import urlsplit

from ..errors import SandboxSessionBusyError, SandboxStateError

__all__ = [
    'Store',
    'StoredState',
    'MAX_ID_LENGTH',
    'busy_error',
    'check_generation',
    'check_holder',
    'check_session_id',
    'check_state',
    'check_tenant',
    'check_ttl',
    'conflict_error',
    'lost_lease_error',
    'not_found_error',
    'redact_url',
]

#: The longest session id, tenant or holder, in characters.
MAX_ID_LENGTH = 128

_ID = re.compile(r'[A-Za-z0-9_.:-]{1,%d}' % MAX_ID_LENGTH)
_ID_RULE = f'1 to {MAX_ID_LENGTH} characters, each an ASCII letter, a digit or one of "_.:-"'


@dataclass(frozen=True)
class StoredState:
    """What a store holds for one session: `state`, the bytes of its last full state (written by
    `put`), `records`, the bytes appended since (by `append`, oldest first), and `generation`, the
    store's counter of the session's writes (the generation of the last write)."""

    state: bytes
    records: builtins.list[bytes] = field(default_factory=list)
    generation: int = 1


@runtime_checkable
class Store(Protocol):
    """Where stored sessions live: opaque signed state bytes per session id, plus leases.

    Every row is keyed by `(tenant, session_id)`; a tenant never reads, lists, leases or deletes
    another tenant's sessions, and a refusal never tells whether another tenant has a session with
    that id (`tenant=''` is the tenant of a store that has only one). Ids, tenants and holders are
    1 to 128 characters from `A-Z a-z 0-9 _ . : -` (`ValueError` otherwise).

    A lease is held by a `holder` (a random token per checkout) until it is released or `ttl`
    seconds pass without a renewal, after which any holder may take it over, so a crashed process
    does not lock a session forever. A lease can be taken before the session's first `put`.

    Failures of the store itself (a full disk, a lost connection) raise `SandboxStoreError`; writes
    are atomic, so what was stored before stays intact.
    """

    async def put(self, session_id: str, state: bytes, *, holder: str, generation: int, tenant: str = '', ttl: float | None = None) -> None:
        """Store `state` (bytes) as the session's full state at `generation`, replacing the previous
        state and the records appended to it, atomically.

        A compare-and-set: the session's generation must be `generation - 1` (no stored session
        for `generation=1`), else `SandboxSessionBusyError` (`conflict_error`: another holder wrote
        it since). Also `SandboxSessionBusyError` if a holder other than `holder` has a live lease
        on it; holding the lease is not required when nobody does. With `ttl`, the same write
        takes `holder`'s lease for `ttl` seconds, as `acquire` does (not when it is refused).
        """
        ...

    async def append(self, session_id: str, record: bytes, *, holder: str, generation: int, tenant: str = '') -> None:
        """Append `record` (bytes) to the session's stored state at `generation`: costs the record,
        not the state. The same compare-and-set and lease rules as `put`; the session must be
        stored (`SandboxStateError('no stored session with id ...')` otherwise)."""
        ...

    async def get(self, session_id: str, *, tenant: str = '') -> StoredState:
        """The session's `StoredState`. Raises `SandboxStateError('no stored session with id ...')`
        when there is none (the same text when another tenant has one with that id)."""
        ...

    async def acquire(self, session_id: str, *, holder: str, ttl: float, tenant: str = '') -> None:
        """Take the session's lease for `ttl` seconds (or extend it, if `holder` has it already).

        Raises `SandboxSessionBusyError` if another holder's lease is live; an expired one is taken
        over. The session need not be stored yet.
        """
        ...

    async def acquire_and_get(self, session_id: str, *, holder: str, ttl: float, tenant: str = '') -> StoredState:
        """Take the session's lease as `acquire` does and read its `StoredState` as `get` does, at
        once (one call to the store): the state as the lease found it. Raises as
        `acquire` does, and `SandboxStateError('no stored session with id ...')` when the session
        is not stored, leaving no lease then."""
        ...

    async def renew(self, session_id: str, *, holder: str, ttl: float, tenant: str = '') -> None:
        """Extend `holder`'s lease to `ttl` seconds from now. Raises `SandboxSessionBusyError` if
        the lease was lost: released, or taken over by another holder after it expired."""
        ...

    async def release(self, session_id: str, *, holder: str, tenant: str = '') -> None:
        """Give up `holder`'s lease; nothing happens when `holder` does not have it."""
        ...

    async def delete(self, session_id: str, *, tenant: str = '', holder: str | None = None) -> None:
        """Delete the session's state and lease. Raises `SandboxStateError('no stored session with
        id ...')` when it is not stored, `SandboxSessionBusyError` when a holder other than
        `holder` has a live lease on it."""
        ...

    async def list(self, *, tenant: str = '') -> builtins.list[str]:
        """The ids of the tenant's stored sessions, sorted."""
        ...

    async def delete_untouched(self, seconds: float) -> builtins.list[tuple[str, str]]:
        """Delete, with their records and leases, the stored sessions of every tenant that were
        untouched for `seconds` (a finite number above 0): not written (`put`, `append`) and not
        leased in that time. Returns the `(tenant, session_id)` of each, sorted. A session whose
        lease is live, or expired less than `seconds` ago, is kept."""
        ...

    def default_state_key(self) -> bytes:
        """The key that signs states when the pool is given none (`Pool(state_key=None)`), or an
        error that says to pass one."""
        ...

    async def close(self) -> None:
        """Close the store's connections. Operations after it raise `RuntimeError`."""
        ...


def _check_id(kind: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f'{kind} must be a str, not {type(value).__name__}')
    if _ID.fullmatch(value) is None:
        shown = repr(value) if len(value) <= 40 else repr(value[:40]) + f'... ({len(value)} characters)'
        raise ValueError(f'{kind} must be {_ID_RULE}; got {shown}')
    return value


def check_session_id(session_id: object) -> str:
    """`session_id` if it is 1 to 128 characters from `A-Z a-z 0-9 _ . : -`; else `ValueError`
    (`TypeError` for a non-str) naming the rule and the value."""
    return _check_id('session_id', session_id)


def check_holder(holder: object) -> str:
    """`holder`, under the same rule as a session id."""
    return _check_id('holder', holder)


def check_tenant(tenant: object) -> str:
    """`tenant`: `''` (the only tenant of a single-tenant store) or the same rule as a session id."""
    if tenant == '':
        return ''
    return _check_id('tenant', tenant)


def check_ttl(ttl: object) -> float:
    """`ttl` as float seconds: a finite number above 0, else `ValueError`."""
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)):
        raise TypeError(f'ttl must be a number of seconds, not {type(ttl).__name__}')
    if not (math.isfinite(ttl) and ttl > 0):
        raise ValueError(f'ttl must be a finite number of seconds above 0; got {ttl!r}')
    return float(ttl)


def check_generation(generation: object) -> int:
    """`generation`: an int from 1 to 2**62, else `ValueError` (`TypeError` for a non-int)."""
    if isinstance(generation, bool) or not isinstance(generation, int):
        raise TypeError(f'generation must be an int, not {type(generation).__name__}')
    if not 1 <= generation <= 1 << 62:
        raise ValueError(f'generation must be from 1 to 2**62; got {generation}')
    return generation


def check_state(state: object) -> bytes:
    """`state` as bytes (bytes, bytearray or memoryview accepted), else `TypeError`."""
    if isinstance(state, bytes):
        return state
    if isinstance(state, (bytearray, memoryview)):
        return bytes(state)
    raise TypeError(f'state must be bytes, not {type(state).__name__}')


def not_found_error(session_id: str) -> SandboxStateError:
    """The error for a session that is not stored: the same text whether it never existed, was
    deleted, or belongs to another tenant."""
    return SandboxStateError(f'no stored session with id {session_id!r}')


def busy_error(session_id: str, seconds_left: float) -> SandboxSessionBusyError:
    """The error for a session whose lease another holder has, live for `seconds_left` more
    seconds unless renewed."""
    return SandboxSessionBusyError(
        f'the stored session {session_id!r} is checked out elsewhere: another holder has its lease, '
        f'which expires in {math.ceil(max(seconds_left, 0.0))} s unless that holder renews it'
    )


def conflict_error(session_id: str, stored: int, generation: int) -> SandboxSessionBusyError:
    """The error for a write that follows generation `generation - 1` where the store is at `stored`
    (0: not stored): another holder wrote the session since this one loaded it."""
    return SandboxSessionBusyError(
        f'the stored session {session_id!r} was written by another holder since this one loaded it '
        f'(the store is at generation {stored}; this write follows generation {generation - 1}): '
        'nothing was written; check the session out again'
    )


def lost_lease_error(session_id: str) -> SandboxSessionBusyError:
    """The error for a renewal whose lease is gone: released, or expired and taken over."""
    return SandboxSessionBusyError(
        f'the lease on the stored session {session_id!r} was lost: it expired and another holder '
        'took it over, or it was released'
    )


def redact_url(url: str) -> str:
    """`url` as errors and reprs may show it: without its password, query and fragment (libpq reads a
    password from the query too), e.g. `postgresql://user@host:5432/database`."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url.partition(':')[0] + ':...'
    user, at, host = parts.netloc.rpartition('@')
    netloc = user.partition(':')[0] + '@' + host if at else host
    scheme = f'{parts.scheme}:' if parts.scheme else ''
    authority = f'//{netloc}' if url[len(scheme):].startswith('//') else ''
    return f'{scheme}{authority}{parts.path}'
