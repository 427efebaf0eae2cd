"""API keys: who may use a server, and as which tenant.

A key is shown once, when it is made, and looks like

    corral_0123456789abcdef_<43 characters of base64url>

a typed prefix (so a leaked key is recognisable, e.g. by secret scanners), the key's id (16 hex
digits, public: `corral keys list` shows it, `corral keys revoke` takes it), and its secret
(`secrets.token_urlsafe(32)`: 256 random bits). The store keeps the id, the tenant and a SHA-256
digest of the secret, never the secret itself.
"""

from __future__ import annotations

import builtins
import dataclasses
import datetime
import hashlib
import hmac
import logging
import re
import secrets
from ..errors import SandboxAuthError
from ..store.base import check_tenant
from ..store.tenants import TenantTables
from ..store.url import open_tenant_tables

__all__ = ['ApiKey', 'KeyRing', 'KEY_PREFIX']

_log = logging.getLogger('corral.server')

#: What every key starts with.
KEY_PREFIX = 'corral_'
_ID_HEX_DIGITS = 16
_SECRET_BYTES = 32
_SECRET_CHARACTERS = 43  # base64url of 32 bytes, unpadded
_KEY_LENGTH = len(KEY_PREFIX) + _ID_HEX_DIGITS + 1 + _SECRET_CHARACTERS
_KEY = re.compile(r'corral_([0-9a-f]{16})_([A-Za-z0-9_-]{43})', re.ASCII)
_KEY_ID = re.compile(r'[0-9a-f]{16}', re.ASCII)
_DOMAIN = b'corral api key\x00'

_REFUSAL = (
    'the API key was refused: it is unknown, revoked, or not a corral key (those look like '
    'corral_<16 hex digits>_<43 characters>); ask the server\'s operator for a key, made with '
    '`corral keys create --tenant NAME`'
)

#: Compared against when the key id is unknown, so that a refusal takes the same steps either way.
_NO_DIGEST = bytes(32)


def _digest(key_id: str, secret: str) -> bytes:
    """SHA-256 of the secret, bound to its key id (a digest copied to another id's row matches nothing).

    A fast hash is enough here, unlike for passwords: slow hashes (bcrypt, scrypt, Argon2) make
    guessing a low-entropy password from a leaked digest expensive, and a secret of 256 random bits
    cannot be guessed at any speed; a slow hash would only cost every connection ~100 ms of CPU.
    """
    return hashlib.sha256(_DOMAIN + key_id.encode() + b'\x00' + secret.encode()).digest()


@dataclasses.dataclass(frozen=True)
class ApiKey:
    """One key as `KeyRing.list()` shows it: never its secret. `created` and `revoked` are UTC
    datetimes; `revoked` is None while the key is valid."""

    key_id: str
    tenant: str
    created: datetime.datetime
    revoked: datetime.datetime | None


class KeyRing:
    """The API keys of a server, kept in its session store (`corral_api_keys`).

        async with KeyRing('postgresql://...') as keys:
            key = await keys.create('acme')          # show it to the user once
            tenant = await keys.authenticate(key)    # 'acme'

    `store` is a store with the tenant tables (`SQLiteStore`, `PostgresStore`), a store URL as
    `open_store` takes it, or None for the embedded default; a store the key ring opened itself is
    closed by `close()`. Store failures raise `SandboxStoreError`.
    """

    def __init__(self, store: TenantTables | str | None = None) -> None:
        self._store, self._owned = open_tenant_tables(store, 'API keys')

    async def __aenter__(self) -> KeyRing:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the store if the key ring opened it."""
        if self._owned:
            await self._store.close()

    async def create(self, tenant: str) -> str:
        """A new key for `tenant` (1 to 128 characters from `A-Z a-z 0-9 _ . : -`, else
        `ValueError`). The returned key is the only copy of its secret: show it once."""
        if tenant == '':
            raise ValueError('a key needs a tenant: 1 to 128 characters, each an ASCII letter, a digit or one of "_.:-"')
        tenant = check_tenant(tenant)
        key_id = secrets.token_hex(_ID_HEX_DIGITS // 2)
        secret = secrets.token_urlsafe(_SECRET_BYTES)
        await self._store.add_api_key(key_id, tenant, _digest(key_id, secret))
        return f'{KEY_PREFIX}{key_id}_{secret}'

    async def authenticate(self, key: object, *, anonymous: bool = False) -> str:
        """The tenant of `key`. Raises `SandboxAuthError`, with one text for every case, when the
        key is missing (None, ''), not a str, not shaped like a corral key (any length, any
        characters), unknown, or revoked. The secret's digest is compared in constant time
        (`hmac.compare_digest`), and an unknown id is compared against a dummy digest all the same.

        `anonymous=True` (for a server that may run single-tenant, e.g. one listening on loopback
        only): a missing key gives the single tenant `''` while no key was ever made here
        (`is_empty`); once one is, every caller needs a key. A key given is always checked."""
        if anonymous and key in (None, '') and await self.is_empty():
            return ''
        if key in (None, ''):
            raise _refused('no API key was given; this server needs one')
        if not isinstance(key, str) or len(key) != _KEY_LENGTH or not key.isascii():
            raise _refused('the API key is not shaped like a corral key')
        match = _KEY.fullmatch(key)
        if match is None:
            raise _refused('the API key is not shaped like a corral key')
        key_id, secret = match.groups()
        row = await self._store.find_api_key(key_id)
        matches = hmac.compare_digest(_digest(key_id, secret), row[1] if row is not None else _NO_DIGEST)
        if row is None:
            raise _refused(f'no key has the id {key_id}')
        if row[2]:
            raise _refused(f'the key {key_id} of tenant {row[0]!r} is revoked')
        if not matches:
            raise _refused(f'the key {key_id} of tenant {row[0]!r} came with a wrong secret')
        return row[0]

    async def list(self) -> builtins.list[ApiKey]:
        """Every key, revoked ones too, by tenant then creation time."""
        return [
            ApiKey(key_id, tenant, _utc(created), None if revoked is None else _utc(revoked))
            for key_id, tenant, created, revoked in await self._store.list_api_keys()
        ]

    async def revoke(self, key_id: str) -> None:
        """Revoke the key with this id (for good: `authenticate` refuses it from now on). Revoking
        a revoked key does nothing. Raises `ValueError` for an id that is not 16 hex digits,
        `LookupError` for one that names no key."""
        if not isinstance(key_id, str) or _KEY_ID.fullmatch(key_id) is None:
            shown = repr(key_id) if not isinstance(key_id, str) or len(key_id) <= 40 else repr(key_id[:40]) + '...'
            raise ValueError(f'a key id is 16 hex digits (the part after {KEY_PREFIX!r}, as `corral keys list` shows it); got {shown}')
        if not await self._store.revoke_api_key(key_id):
            raise LookupError(f'there is no API key with id {key_id!r}')

    async def is_empty(self) -> bool:
        """True when no key was ever made here. A revoked key still counts: revoking every key
        does not open a server that requires keys to callers without one."""
        return await self._store.count_api_keys() == 0


def _refused(why: str) -> SandboxAuthError:
    """The one refusal the caller sees; `why`, for the server's operator, is logged at info."""
    _log.info('refused (API key): %s', why)
    return SandboxAuthError(_REFUSAL)


def _utc(seconds: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
