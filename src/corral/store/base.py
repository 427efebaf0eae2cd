"""The `Store` protocol every session store implements, and the rules its arguments follow.

A store keeps, per tenant and session id, the opaque bytes of a session's signed state, and a lease
that says which holder (one checkout, in any process on any machine) has the session. It never
reads the state: signing, versions and sizes are the session's business.
"""

from __future__ import annotations

import builtins
import math
import re
from typing import Protocol, runtime_checkable
from urllib.parse import urlsplit

from ..errors import SandboxSessionBusyError, SandboxStateError

__all__ = [
    'Store',
    'MAX_ID_LENGTH',
    'busy_error',
    'check_holder',
    'check_session_id',
    'check_state',
    'check_tenant',
    'check_ttl',
    'lost_lease_error',
    'not_found_error',
    'redact_url',
]

#: The longest session id, tenant or holder, in characters.
MAX_ID_LENGTH = 128

_ID = re.compile(r'[A-Za-z0-9_.:-]{1,%d}' % MAX_ID_LENGTH)
_ID_RULE = f'1 to {MAX_ID_LENGTH} characters, each an ASCII letter, a digit or one of "_.:-"'


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

    async def put(self, session_id: str, state: bytes, *, holder: str, tenant: str = '') -> None:
        """Store `state` (bytes) as the session's state, replacing the previous one atomically.

        Raises `SandboxSessionBusyError` if a holder other than `holder` has a live lease on it.
        Holding the lease is not required when nobody does.
        """
        ...

    async def get(self, session_id: str, *, tenant: str = '') -> bytes:
        """The session's stored state. Raises `SandboxStateError('no stored session with id ...')`
        when there is none (the same text when another tenant has one with that id)."""
        ...

    async def acquire(self, session_id: str, *, holder: str, ttl: float, tenant: str = '') -> None:
        """Take the session's lease for `ttl` seconds (or extend it, if `holder` has it already).

        Raises `SandboxSessionBusyError` if another holder's lease is live; an expired one is taken
        over. The session need not be stored yet.
        """
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
