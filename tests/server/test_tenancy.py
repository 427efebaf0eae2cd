"""Keys, tenants and quotas through real `corral serve` processes on loopback: each connection is
its key's tenant, reaches only that tenant's sessions, and stays within that tenant's quotas."""

from __future__ import annotations

import asyncio
import re
import sqlite3
import subprocess
import sys

import pytest
from websockets.asyncio.client import connect

import corral
from corral import RemotePool, logfire
from corral.server import protocol
from corral.server.app import create_app
from corral.server.metrics import Metrics
from corral.server.quotas import SETTINGS_TTL, Quotas
from corral.server.tenancy import TenantHooks, authenticator

from .conftest import running_server, serving_app
from .test_replicas import key_file

REFUSAL = (
    'the API key was refused: it is unknown, revoked, or not a corral key (those look like '
    'corral_<16 hex digits>_<43 characters>); ask the server\'s operator for a key, made with '
    '`corral keys create --tenant NAME`'
)
BURN = 'total = 0\nfor i in range(2_000_000):\n    total += i\ntotal'


async def refused(pool: RemotePool, error: type[corral.SandboxError] = corral.SandboxError, **options) -> corral.SandboxError:
    with pytest.raises(error) as info:
        async with pool.checkout(**options) as session:
            await session.feed_run('1')
    return info.value


@pytest.mark.slow
async def test_keys_and_tenants_over_the_server(tmp_path, shared_store, monkeypatch):
    """Keyless on loopback until the first key is made; then a wrong key, no key and a revoked key
    get one text, and another tenant's session id (checkout, fork, resume) reads as an unknown one."""
    with running_server(tmp_path, '--state-key-file', key_file(tmp_path), store=shared_store) as server:
        async with RemotePool(server.url) as pool, pool.checkout(ephemeral=False) as session:  # no key made yet
            assert await session.feed_run('anonymous = 1\nanonymous') == 1
            anonymous_id = session.session_id
        async with corral.KeyRing(shared_store) as keys:
            acme, beta = await keys.create('acme'), await keys.create('beta')
            async with RemotePool(server.url) as pool:
                assert (await refused(pool, corral.SandboxAuthError)).display() == REFUSAL
            wrong = acme[:-4] + ('AAAA' if not acme.endswith('AAAA') else 'BBBB')
            async with RemotePool(server.url, api_key=wrong) as pool:
                assert (await refused(pool, corral.SandboxAuthError)).display() == REFUSAL

            async with RemotePool(server.url, api_key=acme) as pool:
                async with pool.checkout(ephemeral=False) as session:
                    await session.feed_run('secret = "of acme"')
                    acme_id = session.session_id
                async with pool.checkout(session_id=acme_id) as session:  # its own: resumed
                    assert await session.feed_run('secret') == 'of acme'
                # the keyless session was the single tenant '''s: not acme's
                assert (await refused(pool, corral.SandboxStateError, session_id=anonymous_id)).display() == (
                    f'no stored session with id {anonymous_id!r}'
                )
            # the documents' entry point: CORRAL_URL with the key in CORRAL_API_KEY
            monkeypatch.setenv('CORRAL_URL', server.url)
            monkeypatch.setenv('CORRAL_API_KEY', acme)
            async with logfire.agent_sandboxes() as pool, pool.checkout(session_id=acme_id) as session:
                assert await session.feed_run('secret') == 'of acme'
            nobody = 'f' * 32
            async with RemotePool(server.url, api_key=beta) as pool, RemotePool(server.url, api_key=acme) as owner:
                for options in ({'session_id': acme_id}, {'session_id': acme_id, 'fork': True}):
                    error = await refused(pool, corral.SandboxStateError, **options)
                    unknown = await refused(pool, corral.SandboxStateError, **{**options, 'session_id': nobody})
                    assert error.display() == f'no stored session with id {acme_id!r}'
                    assert unknown.display() == f'no stored session with id {nobody!r}'
                    async with owner.checkout(session_id=acme_id):  # in use by acme: still not "busy"
                        error = await refused(pool, corral.SandboxStateError, **options)
                        assert error.display() == f'no stored session with id {acme_id!r}'
                async with pool.checkout(ephemeral=False) as session:
                    assert await session.feed_run('secret = "of beta"\nsecret') == 'of beta'

            [acme_key] = [key for key in await keys.list() if key.tenant == 'acme']
            await keys.revoke(acme_key.key_id)
            async with RemotePool(server.url, api_key=acme) as pool:
                assert (await refused(pool, corral.SandboxAuthError)).display() == REFUSAL
            async with RemotePool(server.url) as pool:  # revoking every key opens nothing to callers without one
                await keys.revoke([key.key_id for key in await keys.list() if key.tenant == 'beta'][0])
                assert (await refused(pool, corral.SandboxAuthError)).display() == REFUSAL
    assert 'Traceback' not in server.output()


async def test_a_server_beyond_loopback_refuses_callers_without_a_key(tmp_path):
    """Listening on every address (0.0.0.0) with no key made, it lets no caller in without one."""
    store = f'sqlite:///{tmp_path}/store.db'
    with running_server(tmp_path, '--host', '0.0.0.0', store=store) as server:
        async with RemotePool(server.url) as pool:
            assert (await refused(pool, corral.SandboxAuthError)).display() == REFUSAL
        async with corral.KeyRing(store) as keys:
            key = await keys.create('acme')
        async with RemotePool(server.url, api_key=key) as pool, pool.checkout() as session:
            assert await session.feed_run('1 + 1') == 2


@pytest.mark.slow
async def test_each_quota_over_the_server(tmp_path, shared_store):
    """Concurrent sessions, stored bytes and CPU seconds, each refused with its text (the error's
    attributes cross the connection too), and another tenant is not held back by them."""
    with running_server(tmp_path, '--state-key-file', key_file(tmp_path), store=shared_store) as server:
        async with corral.KeyRing(shared_store) as keys, Quotas(shared_store) as quotas:
            acme, beta = await keys.create('acme'), await keys.create('beta')
            async with RemotePool(server.url, api_key=acme) as pool, RemotePool(server.url, api_key=beta) as other:
                # concurrent sessions
                await quotas.set('acme', concurrent_sessions=1)
                async with pool.checkout() as session:
                    error = await refused(pool, corral.SandboxQuotaError)
                    assert error.display() == "tenant 'acme' has 1 session open; its quota is 1 (concurrent_sessions)"
                    assert (error.tenant, error.quota, error.limit, error.used) == ('acme', 'concurrent_sessions', 1, 1)
                    async with other.checkout() as theirs:
                        assert await theirs.feed_run('2') == 2
                    assert await session.feed_run('1') == 1
                async with pool.checkout() as session:  # the slot was given back
                    assert await session.feed_run('3') == 3

                # stored bytes
                await quotas.set('acme', stored_bytes=200)
                await asyncio.sleep(SETTINGS_TTL)  # the server read acme's settings less than SETTINGS_TTL ago
                with pytest.raises(corral.SandboxQuotaError) as info:  # its first state, written at checkout
                    async with pool.checkout(ephemeral=False) as session:
                        await session.feed_run('x = 1')
                session_id, size = re.search(r"the state of '([0-9a-f]{32})' \((\d+) bytes\)", info.value.display()).groups()
                size = int(size)
                assert size > 200
                assert info.value.display() == (
                    f"tenant 'acme' stores 0 bytes of sessions, and the state of {session_id!r} ({size} bytes) would bring "
                    f'that to {size}; its quota is 200 bytes (stored_bytes). The state was not stored'
                )
                assert (info.value.quota, info.value.limit, info.value.used) == ('stored_bytes', 200, 0)
                async with other.checkout(ephemeral=False) as theirs:  # beta stores under the default
                    await theirs.feed_run('x = 1')
                await quotas.set('acme', stored_bytes=None)

            # CPU seconds per hour: a feed starts only while the tenant is under it
            gamma = await keys.create('gamma')  # no CPU used yet
            await quotas.set('gamma', cpu_seconds_per_hour=0.01)
            async with RemotePool(server.url, api_key=gamma) as pool, RemotePool(server.url, api_key=beta) as other:
                async with pool.checkout() as session:
                    assert await session.feed_run(BURN) == sum(range(2_000_000))
                    with pytest.raises(corral.SandboxQuotaError) as info:
                        await session.feed_run('1')
                    used = info.value.used
                    assert used >= 0.01
                    assert info.value.display() == (
                        f"tenant 'gamma' used {used:.1f} CPU seconds in the last hour; its quota is 0.01 (cpu_seconds_per_hour)"
                    )
                async with other.checkout() as theirs:
                    assert await theirs.feed_run('4') == 4
    assert 'Traceback' not in server.output()


async def test_refusals_are_counted_in_the_errors_by_kind(tmp_path):
    """The app as `corral serve` builds it, with the metrics' observer: a refused key counts as
    `auth`, a refused session and a refused feed as `quota`."""
    store = corral.open_store(f'sqlite:///{tmp_path}/store.db')
    keys, quotas, metrics = corral.KeyRing(store), Quotas(store), Metrics()
    pool = corral.Pool(store=quotas.guard(store), observer=metrics, warm_workers=0)
    app = create_app(pool=pool, authenticate=authenticator(keys, anonymous=False), hooks=[TenantHooks(quotas)])
    try:
        async with serving_app(app, pool) as address:
            url = f'ws://{address}'
            key = await keys.create('acme')
            await quotas.set('acme', concurrent_sessions=1)
            async with RemotePool(url) as anonymous:
                assert (await refused(anonymous, corral.SandboxAuthError)).display() == REFUSAL
            async with RemotePool(url, api_key=key) as remote, remote.checkout() as session:
                error = await refused(remote, corral.SandboxQuotaError)
                assert error.display() == "tenant 'acme' has 1 session open; its quota is 1 (concurrent_sessions)"
                await quotas.set('acme', cpu_seconds_per_hour=0)
                with pytest.raises(corral.SandboxQuotaError) as info:
                    await session.feed_run('1')
                assert info.value.display() == "tenant 'acme' used 0.0 CPU seconds in the last hour; its quota is 0 (cpu_seconds_per_hour)"
    finally:
        await quotas.close()
        await store.close()
    errors = {labels['kind']: value for labels, value in _samples(metrics, 'corral_errors_total')}
    assert errors == {'auth': 1.0, 'quota': 2.0}
    assert dict((labels['outcome'], value) for labels, value in _samples(metrics, 'corral_feeds_total')) == {'error': 1.0}


def _samples(metrics: Metrics, name: str) -> list[tuple[dict[str, str], float]]:
    return [(sample.labels, sample.value) for family in metrics.registry.collect() for sample in family.samples if sample.name == name]


def test_serve_refuses_an_unknown_store_url_before_it_listens():
    """The store is opened (for its keys and quotas) before the server listens: a bad URL is a usage error."""
    done = subprocess.run([sys.executable, '-m', 'corral', 'serve', '--store', 'ftp://x'], capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout) == (2, '')
    assert done.stderr == (
        "corral serve: error: --store: unknown store URL 'ftp://x': the accepted store URLs are 'sqlite:///absolute/path.db', "
        "'sqlite:relative/path.db', and 'postgresql://user:password@host:port/database' (or 'postgres://...')\n"
    )


async def test_close_then_checkout_at_a_quota_of_one_never_finds_the_slot_taken(tmp_path):
    """A session's close returns once the server has given its slot back: 50 sessions in a row,
    each checked out as the one before it closed, at `concurrent_sessions=1`."""
    store = f'sqlite:///{tmp_path}/store.db'
    with running_server(tmp_path, store=store) as server:
        async with corral.KeyRing(store) as keys, Quotas(store) as quotas:
            key = await keys.create('acme')
            await quotas.set('acme', concurrent_sessions=1)
            async with RemotePool(server.url, api_key=key) as pool:
                for index in range(50):
                    async with pool.checkout(ephemeral=index % 2 == 0) as session:
                        assert await session.feed_run(f'{index} + 1') == index + 1
                    async with pool.checkout():  # closed at once
                        pass
                # a feed cancelled while it runs closes the session too; its close and the block's wait for one answer
                for _ in range(3):
                    async with pool.checkout() as session:
                        spinning = asyncio.ensure_future(session.feed_run('while True:\n    pass'))
                        await asyncio.sleep(0.2)
                        spinning.cancel()
                        await asyncio.gather(spinning, session.aclose(), return_exceptions=True)
                        assert spinning.cancelled()
                    async with pool.checkout() as session:
                        assert await session.feed_run('2 + 2') == 4
    assert 'Traceback' not in server.output()


async def test_a_dropped_connection_gives_its_slot_back_once_the_server_sees_it_gone(tmp_path):
    """A client that vanishes without a close frame (its TCP connection cut) frees its slot as soon
    as the server reads the connection's end: the next checkout at `concurrent_sessions=1` opens."""
    store = f'sqlite:///{tmp_path}/store.db'
    with running_server(tmp_path, store=store) as server:
        async with corral.KeyRing(store) as keys, Quotas(store) as quotas:
            key = await keys.create('acme')
            await quotas.set('acme', concurrent_sessions=1)
            headers = {'authorization': f'Bearer {key}'}
            async with RemotePool(server.url, api_key=key) as pool:
                for _ in range(3):
                    async with connect(server.url + protocol.PATH, additional_headers=headers, compression=None) as ws:
                        await ws.send(protocol.encode([protocol.OPEN, protocol.PROTOCOL_VERSION, {}]))
                        assert protocol.decode(await ws.recv())[0] == protocol.OPENED
                        error = await refused(pool, corral.SandboxQuotaError)
                        assert error.display() == "tenant 'acme' has 1 session open; its quota is 1 (concurrent_sessions)"
                        ws.transport.abort()  # gone, with no close frame
                    for attempt in range(200):  # bounded: the server reads the end at once, then ends the session
                        try:
                            async with pool.checkout() as session:
                                assert await session.feed_run('1 + 1') == 2
                            break
                        except corral.SandboxQuotaError:
                            await asyncio.sleep(0.05)
                    else:
                        pytest.fail('the slot of the dropped connection was never given back')
    assert 'Traceback' not in server.output()


async def test_a_session_whose_slot_lapsed_and_was_taken_runs_no_feed_until_a_place_frees(tmp_path):
    """The replica was away past the slot's TTL, and another session of the tenant took the place:
    the renewal that follows finds the quota full, and the session's feeds are refused, saying so,
    until a place frees and the slot is taken back."""
    store = corral.open_store(f'sqlite:///{tmp_path}/store.db')
    keys, quotas = corral.KeyRing(store), Quotas(store, slot_ttl=1.5)
    pool = corral.Pool(store=quotas.guard(store), warm_workers=0)
    app = create_app(pool=pool, authenticate=authenticator(keys, anonymous=False), hooks=[TenantHooks(quotas)])
    try:
        async with serving_app(app, pool) as address:
            key = await keys.create('acme')
            await quotas.set('acme', concurrent_sessions=1)
            async with RemotePool(f'ws://{address}', api_key=key) as remote, remote.checkout() as session:
                assert await session.feed_run('1') == 1
                with sqlite3.connect(store.path) as db:  # its slot lapsed, and another session's took the place
                    db.execute("UPDATE corral_tenant_sessions SET holder = 'another' WHERE tenant = 'acme'")
                for _ in range(200):  # bounded: the next renewal, a third of the TTL later, finds it
                    try:
                        await session.feed_run('2')
                    except corral.SandboxQuotaError as refusal:
                        error = refusal
                        break
                    await asyncio.sleep(0.05)
                else:
                    pytest.fail('the lapsed slot was renewed past the quota')
                assert error.display() == (
                    "tenant 'acme' has 1 session open; its quota is 1 (concurrent_sessions), and this session's slot lapsed "
                    '(not renewed within 1.5 seconds) and was taken meanwhile: it runs no feed until one of the others closes'
                )
                with sqlite3.connect(store.path) as db:  # the other session closed
                    db.execute("DELETE FROM corral_tenant_sessions WHERE holder = 'another'")
                assert await session.feed_run('3') == 3
                assert await store.take_tenant_slot('acme', 'probe', limit=1, ttl=30) == (False, 1)  # held again
    finally:
        await quotas.close()
        await store.close()


async def _cpu_rose(quotas: Quotas, tenant: str, above: float) -> float:
    """The tenant's CPU seconds in the store once they rose above `above` (the server writes them within its flush interval)."""
    for _ in range(100):
        used = await quotas.cpu_used(tenant)
        if used > above:
            return used
        await asyncio.sleep(0.1)
    return used


def _cpu_refusal(error: corral.SandboxQuotaError, limit: str) -> str:
    assert (error.tenant, error.quota) == ('acme', 'cpu_seconds_per_hour')
    return f"tenant 'acme' used {error.used:.1f} CPU seconds in the last hour; its quota is {limit} (cpu_seconds_per_hour)"


@pytest.mark.slow
async def test_replays_count_toward_the_cpu_quota_and_wait_for_it(tmp_path):
    """A stored session whose journal burns CPU, opened, forked and loaded by a tenant: each
    replay's CPU counts toward its cpu_seconds_per_hour though no feed follows, and once the
    tenant is over it, no open, fork or load starts (they replayed uncounted and unchecked)."""
    store = f'sqlite:///{tmp_path}/store.db'
    burn = 'total = 0\nfor i in range(6_000_000):\n    total += i\ntotal'
    # no live checkpoints: each open, fork and load replays, as on a replica that did not run the session
    with running_server(tmp_path, '--state-key-file', key_file(tmp_path), '--checkpoints', '0', store=store) as server:
        async with corral.KeyRing(store) as keys, Quotas(store) as quotas:
            acme = await keys.create('acme')
            async with RemotePool(server.url, api_key=acme) as pool:
                async with pool.checkout(ephemeral=False) as session:
                    assert await session.feed_run(burn) == sum(range(6_000_000))
                    session_id = session.session_id
                fed = await _cpu_rose(quotas, 'acme', 0.0)
                for options in ({'session_id': session_id}, {'session_id': session_id, 'fork': True}):
                    before = await quotas.cpu_used('acme')
                    async with pool.checkout(**options):  # replayed as it opens; no feed
                        pass
                    assert await _cpu_rose(quotas, 'acme', before + fed / 2) > before + fed / 2, options
                async with pool.checkout(session_id=session_id) as session:
                    state = await session.dump()
                before = await quotas.cpu_used('acme')
                async with pool.checkout() as fresh:
                    await fresh.load_session(state)
                    assert await fresh.feed_run('total') == sum(range(6_000_000))
                assert await _cpu_rose(quotas, 'acme', before + fed / 2) > before + fed / 2

                async with pool.checkout() as fresh:  # over the quota from here on
                    await quotas.set('acme', cpu_seconds_per_hour=1)
                    await asyncio.sleep(SETTINGS_TTL)  # counts once the server's reading of acme's settings lapses
                    with pytest.raises(corral.SandboxQuotaError) as info:
                        await fresh.load_session(state)
                    assert info.value.display() == _cpu_refusal(info.value, '1')
                    assert info.value.used > 1
                for options in ({'session_id': session_id}, {'session_id': session_id, 'fork': True}, {}):
                    error = await refused(pool, corral.SandboxQuotaError, **options)
                    assert error.display() == _cpu_refusal(error, '1'), options
    assert 'Traceback' not in server.output()
