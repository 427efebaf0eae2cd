"""API keys: made, listed, revoked, refused; the store never holds a secret; a tenant's key reaches
only that tenant's sessions. Against a SQLite file and a real PostgreSQL server."""

from __future__ import annotations

import datetime
import hashlib
import hmac
import os
import re
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest

import corral
from corral.server import keys as keys_module

REFUSAL = (
    'the API key was refused: it is unknown, revoked, or not a corral key (those look like '
    'corral_<16 hex digits>_<43 characters>); ask the server\'s operator for a key, made with '
    '`corral keys create --tenant NAME`'
)
KEY = re.compile(r'corral_([0-9a-f]{16})_([A-Za-z0-9_-]{43})')


async def refusal(ring: corral.KeyRing, key: object) -> str:
    with pytest.raises(corral.SandboxAuthError) as info:
        await ring.authenticate(key)
    return info.value.display()


async def test_create_list_revoke(store):
    ring = corral.KeyRing(store)
    assert await ring.is_empty()
    before = datetime.datetime.now(datetime.timezone.utc)
    first, second, other = await ring.create('acme'), await ring.create('acme'), await ring.create('beta')
    ids = [KEY.fullmatch(key)[1] for key in (first, second, other)]
    assert len(set(ids)) == 3
    assert [await ring.authenticate(key) for key in (first, second, other)] == ['acme', 'acme', 'beta']
    listed = await ring.list()
    assert [(k.key_id, k.tenant, k.revoked) for k in listed] == [(ids[0], 'acme', None), (ids[1], 'acme', None), (ids[2], 'beta', None)]
    assert all(before - datetime.timedelta(seconds=5) <= k.created <= datetime.datetime.now(datetime.timezone.utc) for k in listed)
    assert all(k.created.tzinfo is datetime.timezone.utc for k in listed)

    await ring.revoke(ids[0])
    assert await refusal(ring, first) == REFUSAL
    assert await ring.authenticate(second) == 'acme'
    listed = await ring.list()
    assert [(k.key_id, k.revoked is not None) for k in listed] == [(ids[0], True), (ids[1], False), (ids[2], False)]
    revoked_at = listed[0].revoked
    await ring.revoke(ids[0])  # again: nothing changes
    assert (await ring.list())[0].revoked == revoked_at
    assert not await ring.is_empty()


async def test_a_key_made_through_one_store_works_through_another(store_url):
    """Replicas sharing a store: a key made by one is known to the others at once, and so is its revocation."""
    async with corral.KeyRing(store_url) as one, corral.KeyRing(store_url) as two:
        key = await one.create('acme')
        assert await two.authenticate(key) == 'acme'
        await two.revoke(KEY.fullmatch(key)[1])
        assert await refusal(one, key) == REFUSAL


async def test_revoking_every_key_does_not_make_the_ring_empty(store):
    ring = corral.KeyRing(store)
    key = await ring.create('acme')
    await ring.revoke(KEY.fullmatch(key)[1])
    assert not await ring.is_empty()


async def test_a_wrong_secret_an_unknown_id_and_a_revoked_key_get_one_text(store):
    ring = corral.KeyRing(store)
    key = await ring.create('acme')
    key_id, secret = KEY.fullmatch(key).groups()
    flipped = secret[:-1] + ('A' if secret[-1] != 'A' else 'B')
    assert await refusal(ring, f'corral_{key_id}_{flipped}') == REFUSAL
    assert await refusal(ring, f'corral_{"0" * 16}_{secret}') == REFUSAL
    other = await ring.create('beta')
    # the secret of one key with the id of another
    assert await refusal(ring, f'corral_{KEY.fullmatch(other)[1]}_{secret}') == REFUSAL
    await ring.revoke(key_id)
    assert await refusal(ring, key) == REFUSAL


MALFORMED = {
    'none': None,
    'empty': '',
    'bytes': b'corral_0123456789abcdef_' + b'a' * 43,
    'int': 12345,
    'prefix only': 'corral_',
    'prefix and id': 'corral_0123456789abcdef',
    'prefix, id and separator': 'corral_0123456789abcdef_',
    'short secret': 'corral_0123456789abcdef_' + 'a' * 42,
    'long secret': 'corral_0123456789abcdef_' + 'a' * 44,
    'upper-case id': 'corral_0123456789ABCDEF_' + 'a' * 43,
    'another prefix': 'CORRAL_0123456789abcdef_' + 'a' * 43,
    'padding': 'corral_0123456789abcdef_' + 'a' * 42 + '=',
    'newline at the end': 'corral_0123456789abcdef_' + 'a' * 42 + '\n',
    'a space': 'corral_0123456789abcdef ' + 'a' * 43,
    'a NUL': 'corral_0123456789abcdef_' + 'a' * 42 + '\x00',
    'non-ASCII letter': 'corral_0123456789abcdef_' + 'a' * 42 + 'é',
    'full-width digits': 'corral_０123456789abcdef_' + 'a' * 43,
    'lone surrogate': 'corral_0123456789abcdef_' + 'a' * 42 + '\udc80',
    'huge': 'x' * 10_000_000,
    'huge with the prefix': 'corral_0123456789abcdef_' + 'a' * 10_000_000,
    'bearer scheme left in': 'Bearer corral_0123456789abcdef_' + 'a' * 43,
}


@pytest.mark.parametrize('key', MALFORMED.values(), ids=MALFORMED.keys())
async def test_malformed_keys_get_the_same_text(store, key):
    ring = corral.KeyRing(store)
    await ring.create('acme')
    assert await refusal(ring, key) == REFUSAL


async def test_the_secret_is_compared_in_constant_time(store, monkeypatch):
    compared = []
    real = hmac.compare_digest

    def compare_digest(a, b):
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(keys_module.hmac, 'compare_digest', compare_digest)
    ring = corral.KeyRing(store)
    key = await ring.create('acme')
    key_id, secret = KEY.fullmatch(key).groups()
    digest = keys_module._digest(key_id, secret)
    assert await ring.authenticate(key) == 'acme'
    wrong = f'corral_{key_id}_{"A" * 43}'
    assert await refusal(ring, wrong) == REFUSAL
    assert await refusal(ring, f'corral_{"0" * 16}_{secret}') == REFUSAL
    assert compared == [
        (digest, digest),
        (keys_module._digest(key_id, 'A' * 43), digest),
        (keys_module._digest('0' * 16, secret), bytes(32)),  # an unknown id: a dummy compare all the same
    ]


def test_the_digest_is_sha256_of_the_secret_bound_to_its_id():
    assert keys_module._digest('0123456789abcdef', 's' * 43) == hashlib.sha256(
        b'corral api key\x00' + b'0123456789abcdef' + b'\x00' + b's' * 43
    ).digest()


def files_holding(directory: Path, needle: bytes) -> list[str]:
    found = []
    for root, _, names in os.walk(directory):
        for name in names:
            path = Path(root) / name
            try:
                if needle in path.read_bytes():
                    found.append(str(path))
            except OSError:
                pass
    return found


async def test_the_database_never_holds_the_secret(store_url, tmp_path, request):
    async with corral.KeyRing(store_url) as ring:
        keys = [await ring.create('acme') for _ in range(3)]
        await ring.authenticate(keys[0])
        await ring.revoke(KEY.fullmatch(keys[1])[1])
    secrets_ = [KEY.fullmatch(key)[2].encode() for key in keys]
    if store_url.startswith('sqlite'):
        directory = tmp_path
    else:
        server = request.getfixturevalue('postgres_server')
        connection = await asyncpg.connect(store_url)
        try:
            rows = await connection.fetch('SELECT * FROM corral_api_keys')
            await connection.execute('CHECKPOINT')  # the tables' pages on disk, not only in the WAL
        finally:
            await connection.close()
        assert len(rows) == 3 and all(len(row['digest']) == 32 for row in rows)
        assert not any(secret.decode() in repr(dict(row)) for row in rows for secret in secrets_)
        directory = server.data
    assert files_holding(directory, KEY.fullmatch(keys[0])[1].encode()), 'the scan reads the database files'
    for secret in secrets_:
        assert files_holding(directory, secret) == []
        assert files_holding(directory, secret[:16]) == []


async def test_anonymous_callers_only_while_no_key_was_ever_made(store):
    """A server that may run single-tenant (on loopback) lets callers without a key in as tenant ''
    until the first key is made; from then on, and after every key is revoked, it needs one."""
    ring = corral.KeyRing(store)
    assert await ring.authenticate(None, anonymous=True) == ''
    assert await ring.authenticate('', anonymous=True) == ''
    assert await refusal(ring, None) == REFUSAL  # not anonymous: a key is always needed
    assert await refusal(ring, 'corral_0123456789abcdef_' + 'a' * 43) == REFUSAL
    with pytest.raises(corral.SandboxAuthError) as info:
        await ring.authenticate('corral_0123456789abcdef_' + 'a' * 43, anonymous=True)  # a key given is checked
    assert info.value.display() == REFUSAL
    key = await ring.create('acme')
    with pytest.raises(corral.SandboxAuthError) as info:
        await ring.authenticate(None, anonymous=True)
    assert info.value.display() == REFUSAL
    assert await ring.authenticate(key, anonymous=True) == 'acme'
    await ring.revoke(KEY.fullmatch(key)[1])
    with pytest.raises(corral.SandboxAuthError) as info:
        await ring.authenticate('', anonymous=True)
    assert info.value.display() == REFUSAL


async def test_bad_tenants_and_key_ids(store):
    ring = corral.KeyRing(store)
    with pytest.raises(ValueError) as info:
        await ring.create('')
    assert str(info.value) == 'a key needs a tenant: 1 to 128 characters, each an ASCII letter, a digit or one of "_.:-"'
    with pytest.raises(ValueError) as info:
        await ring.create('acme corp')
    assert str(info.value) == 'tenant must be 1 to 128 characters, each an ASCII letter, a digit or one of "_.:-"; got \'acme corp\''
    with pytest.raises(ValueError) as info:
        await ring.revoke('corral_0123')
    assert str(info.value) == (
        "a key id is 16 hex digits (the part after 'corral_', as `corral keys list` shows it); got 'corral_0123'"
    )
    with pytest.raises(LookupError) as info:
        await ring.revoke('0123456789abcdef')
    assert str(info.value) == "there is no API key with id '0123456789abcdef'"


def test_a_store_without_tenant_tables_is_refused():
    class Elsewhere:
        pass

    with pytest.raises(TypeError) as info:
        corral.KeyRing(Elsewhere())
    assert str(info.value) == 'Elsewhere keeps no API keys: use a SQLiteStore, a PostgresStore or a store URL'


# -- a tenant's key reaches only its own sessions


async def test_a_tenant_never_reaches_another_tenants_sessions(store):
    """Tenant A's key gives tenant 'a'; with it, B's session cannot be read, leased away, listed,
    overwritten or deleted, and every refusal reads as it does for a session that does not exist."""
    ring = corral.KeyRing(store)
    tenant_a = await ring.authenticate(await ring.create('a'))
    tenant_b = await ring.authenticate(await ring.create('b'))
    await store.put('shared-id', b'state of b', holder='holder-b', generation=1, tenant=tenant_b)
    await store.acquire('shared-id', holder='holder-b', ttl=60, tenant=tenant_b)

    async def refusals() -> list[str]:
        texts = []
        for attempt in (
            store.get('shared-id', tenant=tenant_a),
            store.delete('shared-id', tenant=tenant_a),
            store.delete('shared-id', tenant=tenant_a, holder='holder-a'),
        ):
            with pytest.raises(corral.SandboxStateError) as info:
                await attempt
            texts.append(info.value.display())
        return texts

    while_b_has_it = await refusals()
    assert while_b_has_it == ["no stored session with id 'shared-id'"] * 3
    assert await store.list(tenant=tenant_a) == []
    # A's lease and A's state under the same id are A's own: B's lease and state are untouched.
    await store.acquire('shared-id', holder='holder-a', ttl=60, tenant=tenant_a)
    await store.put('shared-id', b'state of a', holder='holder-a', generation=1, tenant=tenant_a)
    assert (await store.get('shared-id', tenant=tenant_b)).state == b'state of b'
    await store.renew('shared-id', holder='holder-b', ttl=60, tenant=tenant_b)
    with pytest.raises(corral.SandboxSessionBusyError):
        await store.put('shared-id', b'x', holder='holder-a', generation=2, tenant=tenant_b)
    await store.delete('shared-id', tenant=tenant_a, holder='holder-a')
    assert (await store.get('shared-id', tenant=tenant_b)).state == b'state of b'
    assert await store.list(tenant=tenant_b) == ['shared-id']
    assert await store.stored_bytes(tenant_a) == 0
    assert await store.stored_bytes(tenant_b) == len(b'state of b')
    # the same refusals once B's session is gone: nothing told A that it existed
    await store.delete('shared-id', tenant=tenant_b, holder='holder-b')
    assert await refusals() == while_b_has_it


async def test_a_stored_session_checked_out_through_a_pool_is_out_of_another_tenants_reach(store, tmp_path):
    """A real stored session (a Pool checkout) belongs to the single tenant ''; a key's tenant sees none of it."""
    ring = corral.KeyRing(store)
    tenant = await ring.authenticate(await ring.create('acme'))
    async with corral.Pool(store=store, state_key=b'k' * 32) as pool:
        async with pool.checkout(ephemeral=False) as session:
            await session.feed_run('secret_value = 42')
            session_id = session.session_id
    assert await store.list() == [session_id]
    assert await store.list(tenant=tenant) == []
    with pytest.raises(corral.SandboxStateError) as info:
        await store.get(session_id, tenant=tenant)
    assert info.value.display() == f'no stored session with id {session_id!r}'


# -- the commands


def corral_command(*args: str) -> tuple[int, str, str]:
    done = subprocess.run([sys.executable, '-m', 'corral', *args], capture_output=True, text=True, timeout=120, check=False)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.slow
def test_keys_commands(tmp_path):
    store = f'sqlite://{tmp_path}/server.db'
    code, key, note = corral_command('keys', 'create', '--tenant', 'acme', '--store', store)
    assert (code, note) == (0, "the key above acts as tenant 'acme'; it is shown only now (the store keeps a digest of it)\n")
    key_id = KEY.fullmatch(key.strip())[1]
    code, listing, _ = corral_command('keys', 'list', '--store', store)
    created = r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ'
    assert code == 0 and re.fullmatch(
        rf'KEY ID            TENANT  CREATED               REVOKED\n{key_id}  acme    {created}  -\n', listing
    ), listing
    assert corral_command('keys', 'revoke', key_id, '--store', store) == (0, f'revoked the key {key_id}\n', '')
    code, listing, _ = corral_command('keys', 'list', '--store', store)
    assert re.fullmatch(rf'KEY ID            TENANT  CREATED               REVOKED\n{key_id}  acme    {created}  {created}\n', listing)
    assert corral_command('keys', 'revoke', '0' * 16, '--store', store) == (
        1, '', "corral: error: there is no API key with id '0000000000000000'\n"
    )
    assert corral_command('keys', 'create', '--tenant', 'a b', '--store', store) == (
        2, '', 'corral: error: tenant must be 1 to 128 characters, each an ASCII letter, a digit or one of "_.:-"; got \'a b\'\n'
    )
    assert corral_command('keys', 'list', '--store', 'mysql://db') == (
        2, '', "corral: error: unknown store URL 'mysql://db': the accepted store URLs are 'sqlite:///absolute/path.db', "
        "'sqlite:relative/path.db', and 'postgresql://user:password@host:port/database' (or 'postgres://...')\n"
    )


@pytest.mark.slow
def test_tenants_commands(tmp_path):
    store = f'sqlite://{tmp_path}/server.db'
    corral_command('keys', 'create', '--tenant', 'beta', '--store', store)
    assert corral_command('tenants', 'set', 'acme', '--concurrent-sessions', '10', '--stored-bytes', '1GiB', '--store', store) == (
        0, 'acme: concurrent_sessions=10, stored_bytes=1073741824, cpu_seconds_per_hour=default\n', ''
    )
    assert corral_command('tenants', 'set', 'acme', '--stored-bytes', 'default', '--cpu-seconds-per-hour', '90.5', '--store', store) == (
        0, 'acme: concurrent_sessions=10, stored_bytes=default, cpu_seconds_per_hour=90.5\n', ''
    )
    assert corral_command('tenants', 'list', '--store', store) == (
        0,
        'TENANT  CONCURRENT_SESSIONS  STORED_BYTES  CPU_SECONDS_PER_HOUR\n'
        'acme    10                   default       90.5\n'
        'beta    default              default       default\n',
        '',
    )
    assert corral_command('tenants', 'set', 'acme', '--store', store) == (
        2, '', 'corral: error: say which quotas to set: --concurrent-sessions, --stored-bytes, --cpu-seconds-per-hour\n'
    )
    code, _, error = corral_command('tenants', 'set', 'acme', '--stored-bytes', '12 parsecs', '--store', store)
    assert (code, error.splitlines()[-1]) == (
        2, "corral tenants set: error: argument --stored-bytes: takes a number of bytes with an optional unit "
        "(KiB, MiB, GiB, KB, MB, GB) or 'default', not '12 parsecs'"
    )
