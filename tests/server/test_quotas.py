"""Tenant quotas: settings, and each quota refused with its exact text, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import re
import sqlite3
import time

import asyncpg
import pytest

import corral
from corral.server.quotas import Quotas, TenantQuotas

STATE_KEY = b'k' * 32
BURN = 'total = 0\nfor i in range(2_000_000):\n    total += i\ntotal'


async def quota_error(awaitable) -> corral.SandboxQuotaError:
    with pytest.raises(corral.SandboxQuotaError) as info:
        await awaitable
    return info.value


# -- settings


def test_tenant_quotas_refuse_bad_values():
    for kwargs, error, text in [
        ({'concurrent_sessions': -1}, ValueError, 'the quota concurrent_sessions must be 0 or more; got -1'),
        ({'stored_bytes': 1.5}, TypeError, 'the quota stored_bytes must be an int or None, not float'),
        ({'concurrent_sessions': True}, TypeError, 'the quota concurrent_sessions must be an int or None, not bool'),
        ({'cpu_seconds_per_hour': float('nan')}, ValueError, 'the quota cpu_seconds_per_hour must be 0 or more; got nan'),
        ({'cpu_seconds_per_hour': float('inf')}, ValueError, 'the quota cpu_seconds_per_hour must be 0 or more; got inf'),
        ({'cpu_seconds_per_hour': '60'}, TypeError, 'the quota cpu_seconds_per_hour must be a number or None, not str'),
    ]:
        with pytest.raises(error) as info:
            TenantQuotas(**kwargs)
        assert str(info.value) == text
    assert TenantQuotas() == TenantQuotas(concurrent_sessions=20, stored_bytes=1 << 30, cpu_seconds_per_hour=3600.0)


async def test_a_tenants_own_settings_win_over_the_defaults(store_url):
    defaults = TenantQuotas(concurrent_sessions=5, stored_bytes=None, cpu_seconds_per_hour=60.0)
    async with Quotas(store_url, defaults=defaults) as quotas, Quotas(store_url, defaults=defaults) as replica:
        assert await quotas.of('acme') == defaults
        await quotas.set('acme', concurrent_sessions=2, stored_bytes=1000)
        await quotas.set('acme', cpu_seconds_per_hour=0.5)
        assert await replica.of('acme') == TenantQuotas(concurrent_sessions=2, stored_bytes=1000, cpu_seconds_per_hour=0.5)
        assert await replica.settings('acme') == {'concurrent_sessions': 2, 'stored_bytes': 1000, 'cpu_seconds_per_hour': 0.5}
        await quotas.set('acme', stored_bytes=None)  # back to the default
        assert await quotas.of('acme') == TenantQuotas(concurrent_sessions=2, stored_bytes=None, cpu_seconds_per_hour=0.5)
        assert await replica.of('beta') == defaults
        assert await quotas.tenants() == ['acme']
        with pytest.raises(ValueError) as info:
            await quotas.set('acme', sessions=3)
        assert str(info.value) == "unknown quota(s) ['sessions']; the quotas are ['concurrent_sessions', 'stored_bytes', 'cpu_seconds_per_hour']"
        with pytest.raises(ValueError) as info:
            await quotas.set('acme', concurrent_sessions=-2)
        assert str(info.value) == 'the quota concurrent_sessions must be 0 or more; got -2'


async def test_a_tenants_settings_are_read_once_per_settings_ttl(store):
    # Every feed's CPU check waited for a read of the tenant's settings from the store (a thread hop
    # with SQLite, a round trip with PostgreSQL). They stand for settings_ttl seconds now: a change
    # made elsewhere counts within them, one made through these quotas at once.
    quotas, other = Quotas(store, settings_ttl=0.3), Quotas(store)
    reads = []

    def counted(tenant, read=store.tenant_quotas):
        reads.append(tenant)
        return read(tenant)

    quotas._tables.tenant_quotas = counted
    for _ in range(3):
        assert (await quotas.of('acme')).concurrent_sessions == 20
    assert reads == ['acme']
    await other.set('acme', concurrent_sessions=1)  # another replica, or `corral tenants set`
    assert (await quotas.of('acme')).concurrent_sessions == 20
    await asyncio.sleep(0.35)
    assert (await quotas.of('acme')).concurrent_sessions == 1
    assert reads == ['acme', 'acme']
    await quotas.set('acme', concurrent_sessions=3)  # its own change: at once
    assert (await quotas.of('acme')).concurrent_sessions == 3
    assert (await quotas.of('beta')).concurrent_sessions == 20  # each tenant's own
    assert reads == ['acme', 'acme', 'acme', 'beta']
    # a reading that a set of its own overtook is not kept: the next check reads again
    release = asyncio.Event()

    async def slow(tenant, read=store.tenant_quotas):
        reads.append(tenant)
        settings = await read(tenant)
        await release.wait()
        return settings

    quotas._tables.tenant_quotas = slow
    await asyncio.sleep(0.35)  # acme's reading lapsed
    reading = asyncio.ensure_future(quotas.of('acme'))
    await asyncio.sleep(0.05)
    quotas._tables.tenant_quotas = counted
    await quotas.set('acme', concurrent_sessions=4)
    release.set()
    assert (await reading).concurrent_sessions == 3
    assert (await quotas.of('acme')).concurrent_sessions == 4
    reads.clear()
    every = Quotas(store, settings_ttl=0)
    every._tables.tenant_quotas = counted
    await every.of('acme')
    await every.of('acme')
    assert reads == ['acme', 'acme']
    for seconds in (-1, float('inf'), float('nan')):
        with pytest.raises(ValueError) as info:
            Quotas(store, settings_ttl=seconds)
        assert str(info.value) == f'settings_ttl must be a finite number of seconds, 0 or more; got {seconds!r}'


# -- concurrent sessions


async def test_concurrent_sessions_are_counted_across_replicas(store_url):
    async with Quotas(store_url) as one, Quotas(store_url, settings_ttl=0) as two:  # two sees one's changes at once
        await one.set('acme', concurrent_sessions=2)
        async with one.session('acme'), two.session('acme'):
            error = await quota_error(one.session('acme').__aenter__())
            assert error.display() == "tenant 'acme' has 2 sessions open; its quota is 2 (concurrent_sessions)"
            assert (error.tenant, error.quota, error.limit, error.used) == ('acme', 'concurrent_sessions', 2, 2)
            error = await quota_error(two.session('acme').__aenter__())
            assert error.display() == "tenant 'acme' has 2 sessions open; its quota is 2 (concurrent_sessions)"
            async with two.session('beta'):  # another tenant's sessions count apart
                pass
        async with one.session('acme'), two.session('acme'):  # given back at the end of the blocks
            pass
        await one.set('acme', concurrent_sessions=1)
        async with one.session('acme'):
            error = await quota_error(two.session('acme').__aenter__())
            assert error.display() == "tenant 'acme' has 1 session open; its quota is 1 (concurrent_sessions)"
        await one.set('acme', concurrent_sessions=0)
        error = await quota_error(one.session('acme').__aenter__())
        assert error.display() == "tenant 'acme' has 0 sessions open; its quota is 0 (concurrent_sessions)"


@pytest.mark.slow
async def test_a_held_session_is_renewed_and_a_crashed_replicas_expires(store_url):
    # TTLs of seconds, renewed every third of one: a loaded machine's stalls stay well inside them
    async with Quotas(store_url, slot_ttl=2.0) as quotas:
        await quotas.set('acme', concurrent_sessions=1)
        async with quotas.session('acme'):
            await asyncio.sleep(4.5)  # past two TTLs: only the renewals keep it
            error = await quota_error(quotas.session('acme').__aenter__())
            assert error.display() == "tenant 'acme' has 1 session open; its quota is 1 (concurrent_sessions)"
        # a replica that died holding a slot: nobody renews it
        async with corral.open_store(store_url) as store:
            assert await store.take_tenant_slot('acme', 'dead-replica', limit=1, ttl=2.0) == (True, 0)
            assert await store.take_tenant_slot('acme', 'other', limit=1, ttl=2.0) == (False, 1)
            await asyncio.sleep(2.5)
            assert await store.take_tenant_slot('acme', 'other', limit=1, ttl=30) == (True, 0)


LAPSED = (
    "tenant 'acme' has 1 session open; its quota is 1 (concurrent_sessions), and this session's slot lapsed "
    '(not renewed within 30 seconds) and was taken meanwhile: it runs no feed until one of the others closes'
)


async def test_a_lapsed_slot_is_taken_again_only_under_the_quota(store_url):
    """A slot whose holder was away past its TTL (its row gone, as the next count removes an
    expired one) is renewed only if the tenant is under its quota: others may have taken its place."""
    async with Quotas(store_url) as quotas, Quotas(store_url) as replica, corral.open_store(store_url) as store:
        await quotas.set('acme', concurrent_sessions=1)
        async with quotas.session('acme') as slot:
            await slot.renew()  # live: extended
            await store.release_tenant_slot('acme', slot.holder)  # lapsed while its holder was away
            async with replica.session('acme'):  # and another session took the place meanwhile
                for attempt in (slot.renew(), slot.check()):
                    error = await quota_error(attempt)
                    assert error.display() == LAPSED
                    assert (error.tenant, error.quota, error.limit, error.used) == ('acme', 'concurrent_sessions', 1, 1)
                assert slot.lost is not None
                assert await store.take_tenant_slot('acme', 'probe', limit=1, ttl=30) == (False, 1)  # one held, not two
            await slot.check()  # the place is free again: taken back
            assert slot.lost is None
            error = await quota_error(replica.session('acme').__aenter__())
            assert error.display() == "tenant 'acme' has 1 session open; its quota is 1 (concurrent_sessions)"
        # a live slot is renewed even past a quota lowered meanwhile: lowering it bounds new sessions only
        await quotas.set('acme', concurrent_sessions=2)
        async with quotas.session('acme') as one, quotas.session('acme') as two:
            await quotas.set('acme', concurrent_sessions=1)
            await one.renew()
            await two.renew()
        assert await store.take_tenant_slot('acme', 'probe', limit=1, ttl=30) == (True, 0)  # both given back


async def test_the_last_slot_goes_to_one_of_many_racing_for_it(store_url):
    async with Quotas(store_url) as quotas:
        await quotas.set('acme', concurrent_sessions=3)
        stores = [corral.open_store(store_url) for _ in range(4)]
        try:
            results = await asyncio.gather(
                *(store.take_tenant_slot('acme', f'holder-{i}-{j}', limit=3, ttl=30) for i, store in enumerate(stores) for j in range(3))
            )
        finally:
            for store in stores:
                await store.close()
    assert sorted(taken for taken, _ in results) == [False] * 9 + [True] * 3


async def test_sessions_of_a_pool_under_the_quota(store_url):
    async with Quotas(store_url) as quotas, corral.Pool(warm_workers=0) as pool:
        await quotas.set('acme', concurrent_sessions=1)
        async with quotas.session('acme'), pool.checkout() as session:
            assert await session.feed_run('1 + 1') == 2
            error = await quota_error(quotas.session('acme').__aenter__())
            assert error.display() == "tenant 'acme' has 1 session open; its quota is 1 (concurrent_sessions)"


# -- stored bytes


async def test_stored_bytes_refused_with_the_tenants_use(store):
    quotas = Quotas(store)
    guarded = quotas.guard(store)
    assert isinstance(guarded, corral.Store)
    await quotas.set('acme', stored_bytes=1024)
    await guarded.put('a', b'x' * 600, holder='h', generation=1, tenant='acme')
    await guarded.put('b', b'x' * 400, holder='h', generation=1, tenant='acme')
    await guarded.put('c', b'x' * 2000, holder='h', generation=1, tenant='beta')  # another tenant's, under the default
    error = await quota_error(guarded.put('c', b'x' * 200, holder='h', generation=1, tenant='acme'))
    assert error.display() == (
        "tenant 'acme' stores 1000 bytes of sessions, and the state of 'c' (200 bytes) would bring that to 1200; "
        'its quota is 1024 bytes (stored_bytes). The state was not stored'
    )
    assert (error.tenant, error.quota, error.limit, error.used) == ('acme', 'stored_bytes', 1024, 1000)
    assert await store.list(tenant='acme') == ['a', 'b']
    # replacing a state counts the new one instead of the old one
    await guarded.put('a', b'y' * 624, holder='h', generation=2, tenant='acme')  # exactly the quota
    assert await store.stored_bytes('acme') == 1024
    error = await quota_error(guarded.put('a', b'y' * 625, holder='h', generation=3, tenant='acme'))
    assert error.display() == (
        "tenant 'acme' stores 400 bytes of sessions, and the state of 'a' (625 bytes) would bring that to 1025; "
        'its quota is 1024 bytes (stored_bytes). The state was not stored'
    )
    assert (await store.get('a', tenant='acme')).state == b'y' * 624
    await guarded.delete('b', tenant='acme')  # the other calls go to the store as they are
    await guarded.put('a', b'z' * 1024, holder='h', generation=3, tenant='acme')
    assert await store.stored_bytes('acme') == 1024 and await store.stored_bytes('beta') == 2000


async def test_a_tenants_stored_bytes_follow_every_write(store_url):
    """The total (kept by triggers in SQLite, summed in PostgreSQL) after each kind of write, as a
    sum over the stored states says it is."""
    async with corral.open_store(store_url) as store, corral.open_store(store_url) as other_process:
        expected: dict[tuple[str, str], int] = {}

        async def check() -> None:
            for tenant in ('acme', 'beta', 'gamma'):
                ids = [session_id for t, session_id in expected if t == tenant]
                assert await other_process.stored_bytes(tenant) == sum(expected[tenant, i] for i in ids)
                for session_id in [*ids, 'absent']:
                    rest = sum(expected[tenant, i] for i in ids if i != session_id)
                    assert await store.stored_bytes(tenant, excluding=session_id) == rest

        steps = [('put', 'acme', 's1', 100), ('put', 'acme', 's2', 2500), ('put', 'beta', 's1', 7), ('put', 'acme', 's1', 40),
                 ('put', 'acme', 's1', 9000), ('delete', 'acme', 's2', 0), ('put', 'beta', 's2', 0), ('delete', 'beta', 's1', 0),
                 ('delete', 'acme', 's1', 0), ('put', 'acme', 's3', 1)]
        await check()
        for action, tenant, session_id, size in steps:
            if action == 'put':
                generation = (await store.get(session_id, tenant=tenant)).generation + 1 if (tenant, session_id) in expected else 1
                await store.put(session_id, b'x' * size, holder='h', generation=generation, tenant=tenant)
                expected[tenant, session_id] = size
            else:
                await store.delete(session_id, tenant=tenant)
                del expected[tenant, session_id]
            await check()
        with pytest.raises(corral.SandboxSessionBusyError):  # a refused put changes no total
            await store.acquire('s3', holder='other', ttl=60, tenant='acme')
            await store.put('s3', b'x' * 50, holder='h', generation=2, tenant='acme')
        await check()


async def test_totals_start_from_the_sessions_stored_before_the_tenant_tables(tmp_path):
    path = tmp_path / 'sessions.db'
    with sqlite3.connect(path) as db:  # a database of a store that had no tenant tables yet
        db.execute(
            'CREATE TABLE corral_sessions (tenant TEXT NOT NULL, session_id TEXT NOT NULL, state BLOB NOT NULL, '
            'updated REAL NOT NULL, PRIMARY KEY (tenant, session_id))'
        )
        db.executemany('INSERT INTO corral_sessions VALUES (?, ?, ?, 0)', [('acme', 'a', b'x' * 10), ('acme', 'b', b'x' * 5), ('beta', 'a', b'x')])
    async with corral.SQLiteStore(path) as store:
        assert (await store.stored_bytes('acme'), await store.stored_bytes('beta')) == (15, 1)
        await store.put('c', b'x' * 100, holder='h', generation=1, tenant='acme')
    async with corral.SQLiteStore(path) as store:  # opened again: counted once
        assert (await store.stored_bytes('acme'), await store.stored_bytes('beta')) == (115, 1)


async def test_a_tenants_stored_bytes_count_the_records_appended(store_url):
    """States and the records appended to them count together (a trigger on each table in SQLite,
    a sum over both in PostgreSQL); a put replaces a state's records, a delete removes both."""
    async with corral.open_store(store_url) as store, corral.open_store(store_url) as other_process:
        await store.put('s1', b'x' * 100, holder='h', generation=1, tenant='acme')
        await store.append('s1', b'r' * 30, holder='h', generation=2, tenant='acme')
        await store.append('s1', b'r' * 20, holder='h', generation=3, tenant='acme')
        await store.put('s2', b'x' * 7, holder='h', generation=1, tenant='acme')
        await store.append('s2', b'r' * 5, holder='h', generation=2, tenant='acme')
        await store.put('s1', b'x' * 9, holder='h', generation=1, tenant='beta')
        await store.append('s1', b'r' * 4, holder='h', generation=2, tenant='beta')
        assert await other_process.stored_bytes('acme') == 162
        assert await store.stored_bytes('acme', excluding='s1') == 12
        assert await store.stored_bytes('acme', excluding='s2') == 150
        assert await store.stored_bytes('beta') == 13
        await store.put('s1', b'y' * 60, holder='h', generation=4, tenant='acme')  # its two records go
        assert await other_process.stored_bytes('acme') == 72
        await store.append('s1', b'r' * 8, holder='h', generation=5, tenant='acme')
        assert await other_process.stored_bytes('acme') == 80
        await store.delete('s2', tenant='acme')
        assert await other_process.stored_bytes('acme') == 68
        await store.delete('s1', tenant='acme')
        assert (await other_process.stored_bytes('acme'), await other_process.stored_bytes('beta')) == (0, 13)


async def test_an_append_past_the_quota_is_refused(store):
    quotas = Quotas(store)
    guarded = quotas.guard(store)
    await quotas.set('acme', stored_bytes=1000)
    await guarded.put('a', b'x' * 600, holder='h', generation=1, tenant='acme')
    await guarded.append('a', b'r' * 300, holder='h', generation=2, tenant='acme')
    await guarded.put('b', b'x' * 50, holder='h', generation=1, tenant='acme')
    error = await quota_error(guarded.append('a', b'r' * 51, holder='h', generation=3, tenant='acme'))
    assert error.display() == (
        "tenant 'acme' stores 950 bytes of sessions, and the record of 'a' (51 bytes) would bring that to 1001; "
        'its quota is 1000 bytes (stored_bytes). The record was not stored'
    )
    assert (error.tenant, error.quota, error.limit, error.used) == ('acme', 'stored_bytes', 1000, 950)
    assert await store.get('a', tenant='acme') == corral.StoredState(b'x' * 600, [b'r' * 300], 2)
    await guarded.append('a', b'r' * 50, holder='h', generation=3, tenant='acme')  # exactly the quota
    assert await store.stored_bytes('acme') == 1000
    # a put replaces the state's records: 900 bytes of 'a' make room for a state of 950
    await guarded.put('a', b'y' * 950, holder='h', generation=4, tenant='acme')
    assert await store.stored_bytes('acme') == 1000


async def test_totals_start_from_the_records_stored_before_the_tenant_tables(tmp_path):
    path = tmp_path / 'sessions.db'
    async with corral.SQLiteStore(path) as store:
        await store.put('a', b'x' * 10, holder='h', generation=1, tenant='acme')
        await store.append('a', b'r' * 6, holder='h', generation=2, tenant='acme')
    with sqlite3.connect(path) as db:  # as a database of a store that had no tenant tables yet
        db.execute('DROP TABLE corral_tenant_bytes')
        for trigger in ('insert', 'update', 'delete', 'record_insert', 'record_delete'):
            db.execute(f'DROP TRIGGER corral_tenant_bytes_{trigger}')
    async with corral.SQLiteStore(path) as store:
        assert await store.stored_bytes('acme') == 16
        await store.append('a', b'r' * 4, holder='h', generation=3, tenant='acme')
    async with corral.SQLiteStore(path) as store:  # opened again: counted once
        assert await store.stored_bytes('acme') == 20


async def test_a_pool_on_a_guarded_store_refuses_a_state_past_the_quota(store_url):
    async with corral.open_store(store_url) as store:
        quotas = Quotas(store)
        async with corral.Pool(warm_workers=0, store=quotas.guard(store), state_key=STATE_KEY) as pool:
            async with pool.checkout(ephemeral=False) as session:
                await session.feed_run('small = 1')
                size = len(await session.dump())
                await quotas.set('', stored_bytes=size + 1000)
                await session.feed_run('more = 2')  # appended as a record
                stored = await store.stored_bytes('')
                with pytest.raises(corral.SandboxQuotaError) as info:
                    await session.feed_run('big = "' + 'x' * 3000 + '"\nNone')  # the journal keeps the code
                session_id = session.session_id
        record = int(re.search(r'\((\d+) bytes\)', info.value.display()).group(1))
        assert record > 3000
        assert info.value.display() == (
            f"tenant '' stores {stored} bytes of sessions, and the record of {session_id!r} ({record} bytes) would bring that "
            f'to {stored + record}; its quota is {size + 1000} bytes (stored_bytes). The record was not stored'
        )
        assert await store.stored_bytes('') == stored
        async with corral.Pool(warm_workers=0, store=store, state_key=STATE_KEY) as pool:
            async with pool.checkout(session_id=session_id) as session:  # the state stored before the refusal
                assert await session.feed_run('(small, more)') == (1, 2)
                with pytest.raises(corral.SandboxRuntimeError):
                    await session.feed_run('big')


# -- CPU seconds per hour


async def test_cpu_seconds_are_counted_per_feed_and_refused_past_the_quota(store_url):
    async with corral.open_store(store_url) as store, corral.Pool(warm_workers=0) as pool:
        quotas, replica = Quotas(store, flush_interval=60), Quotas(store)
        async with pool.checkout() as session:
            async with quotas.feed('acme', session):
                assert await session.feed_run(BURN) == sum(range(2_000_000))
            first = await quotas.cpu_used('acme')  # counted here at once, as the feed ended
            assert 0.05 < first <= session.cpu_seconds  # the worker may use a little more after its feed
            assert await replica.cpu_used('acme') == 0.0  # and in the store after the flush
            await quotas.flush()
            assert await replica.cpu_used('acme') == pytest.approx(first)
            assert await store.cpu_seconds_last_hour('acme') == pytest.approx(first)
            async with quotas.feed('acme', session):
                await session.feed_run(BURN)
            used = await quotas.cpu_used('acme')
            assert first < used <= session.cpu_seconds
            assert await quotas.cpu_used('beta') == 0.0
            await quotas.set('acme', cpu_seconds_per_hour=round(used / 2, 2))
            for refusing in (quotas, replica):
                await quotas.flush()
                error = await quota_error(refusing.feed('acme', session).__aenter__())
                assert error.display() == (
                    f"tenant 'acme' used {used:.1f} CPU seconds in the last hour; its quota is {round(used / 2, 2):g} (cpu_seconds_per_hour)"
                )
                assert (error.tenant, error.quota, error.limit) == ('acme', 'cpu_seconds_per_hour', round(used / 2, 2))
                assert error.used == pytest.approx(used)
            async with quotas.feed('beta', session):  # another tenant's hour is its own
                await session.feed_run(BURN)
        await quotas.close()
        assert await store.cpu_seconds_last_hour('beta') > 0  # written at close


async def test_the_cpu_check_reads_the_hours_seconds_once_per_flush_interval(store):
    # Every feed read the tenant's setting and its hour from the store: two waits for the store
    # (two thread hops with SQLite) on every feed. The seconds, which replicas write every
    # flush_interval, are read once per interval, and again after a flush of the replica's own; the
    # setting here on every check (settings_ttl=0; see the test above for its lifetime).
    quotas, other = Quotas(store, flush_interval=60, settings_ttl=0), Quotas(store)
    reads = []
    for name in ('tenant_quotas', 'cpu_seconds_last_hour'):
        def counted(tenant, read=getattr(store, name), name=name):
            reads.append(name)
            return read(tenant)
        setattr(quotas._tables, name, counted)
    await store.add_cpu_seconds('acme', 2.0)
    for _ in range(3):
        await quotas.check_cpu('acme')
    assert reads == ['tenant_quotas', 'cpu_seconds_last_hour', 'tenant_quotas', 'tenant_quotas']
    await other.set('acme', cpu_seconds_per_hour=2)  # another replica's setting: counts at once
    error = await quota_error(quotas.check_cpu('acme'))
    assert error.display() == "tenant 'acme' used 2.0 CPU seconds in the last hour; its quota is 2 (cpu_seconds_per_hour)"
    await other.set('acme', cpu_seconds_per_hour=3)
    await quotas.check_cpu('acme')
    quotas._add_pending('acme', 1.5)  # counted here since the last flush: always added
    assert (await quota_error(quotas.check_cpu('acme'))).used == pytest.approx(3.5)
    assert reads.count('cpu_seconds_last_hour') == 1
    await quotas.flush()  # now in the store: read again, not counted twice
    assert (await quota_error(quotas.check_cpu('acme'))).used == pytest.approx(3.5)
    assert reads.count('cpu_seconds_last_hour') == 2
    await quotas.close()
    await other.close()


async def test_a_failed_feed_counts_its_cpu_too(store):
    quotas = Quotas(store)
    async with corral.Pool(warm_workers=0) as pool, pool.checkout() as session:
        with pytest.raises(corral.SandboxRuntimeError):
            async with quotas.feed('acme', session):
                await session.feed_run(BURN + '\n1 / 0')
        # counted as the feed ended: the worker's own clean-up after its failure may add a little
        assert 0.05 < await quotas.cpu_used('acme') <= session.cpu_seconds
    await quotas.close()


async def test_cpu_seconds_the_store_fails_to_take_are_kept_for_the_next_flush(tmp_path):
    async with corral.open_store(f'sqlite://{tmp_path}/sessions.db') as store, corral.Pool(warm_workers=0) as pool:
        quotas = Quotas(store, flush_interval=60)
        await store.cpu_seconds_last_hour('acme')  # creates the tables
        with sqlite3.connect(store.path) as db:  # the counter's writes fail; its reads work
            db.execute("CREATE TRIGGER refuse BEFORE INSERT ON corral_tenant_cpu BEGIN SELECT RAISE(ABORT, 'refused'); END")
        async with pool.checkout() as session:
            async with quotas.feed('acme', session):
                assert await session.feed_run(BURN) == sum(range(2_000_000))
            await quotas.flush()
            assert await store.cpu_seconds_last_hour('acme') == 0.0
            counted = await quotas.cpu_used('acme')  # still counted here
            assert 0.05 < counted <= session.cpu_seconds
            with sqlite3.connect(store.path) as db:
                db.execute('DROP TRIGGER refuse')
            await quotas.flush()
            assert await store.cpu_seconds_last_hour('acme') == pytest.approx(counted)
            assert await quotas.cpu_used('acme') == pytest.approx(counted)  # not twice
        await quotas.close()


async def test_the_hour_rolls(store_url, request):
    """Minutes older than the last 60 stop counting (and are pruned at the next write)."""
    minute = int(time.time() // 60)
    rows = [('acme', minute - 60, 100.0), ('acme', minute - 59, 7.0), ('acme', minute - 1, 3.0), ('beta', minute - 1, 50.0)]
    async with corral.open_store(store_url) as store:
        await store.cpu_seconds_last_hour('acme')  # creates the tables
        if store_url.startswith('sqlite'):
            with sqlite3.connect(store.path) as db:
                db.executemany('INSERT INTO corral_tenant_cpu VALUES (?, ?, ?)', rows)
        else:
            connection = await asyncpg.connect(store_url)
            try:
                # the rows' minutes on the database server's clock
                now = await connection.fetchval('SELECT floor(extract(epoch FROM now()) / 60)::bigint')
                await connection.executemany(
                    'INSERT INTO corral_tenant_cpu VALUES ($1, $2, $3)', [(t, m - minute + now, s) for t, m, s in rows]
                )
            finally:
                await connection.close()
        if int(time.time() // 60) != minute:
            pytest.skip('the minute turned while the rows were written')  # the sums below read the current minute
        assert await store.cpu_seconds_last_hour('acme') == 10.0
        await store.add_cpu_seconds('acme', 0.5)
        assert await store.cpu_seconds_last_hour('acme') == 10.5
        assert await store.cpu_seconds_last_hour('beta') == 50.0


# -- the CPU figure of a session


async def test_session_cpu_seconds_come_from_the_kernel():
    async with corral.Pool(warm_workers=0) as pool:
        async with pool.checkout() as session:
            start = session.cpu_seconds
            await session.feed_run(BURN)
            after = session.cpu_seconds
            assert after > start + 0.05
            worker = session._worker
        assert worker.cpu_seconds() is None  # killed: never read again, whoever gets its pid
        assert session.cpu_seconds == after or session.cpu_seconds >= after  # the last reading stays
        async with pool.checkout(limits=corral.Limits(cpu_time=1)) as session:
            with pytest.raises(corral.SandboxLimitError):
                await session.feed_run('while True:\n    pass')
            assert session._worker is None and session.cpu_seconds > 0.5  # read as the session killed it (limit: 1 s)


async def test_the_cpu_used_while_a_flush_writes_counts_its_seconds_once(store):
    """Read while a flush moves the tenant's seconds to the store, they are not missed (read from
    the store before the flush wrote them, and no longer counted here)."""
    quotas = Quotas(store, flush_interval=3600)
    async with corral.Pool(warm_workers=0) as pool, pool.checkout() as session:
        async with quotas.counting('acme', session):
            await session.feed_run('sum(range(1_000_000))')
        counted = await quotas.cpu_used('acme')
        assert counted > 0
        reading = asyncio.ensure_future(quotas.cpu_used('acme'))
        await asyncio.sleep(0)  # the reading asked the store
        await quotas.flush()  # meanwhile the flush takes the seconds from here, and writes them
        assert await reading == pytest.approx(counted)
        reading = asyncio.ensure_future(quotas.cpu_used('acme'))
        await asyncio.sleep(0)
        await quotas.flush()  # nothing to write
        assert await reading == pytest.approx(counted)
    await quotas.close()


@pytest.mark.slow
async def test_a_long_feed_counts_as_it_runs(store):
    """The worker's CPU is read while the feed runs: other feeds of the tenant see it before the
    feed ends (and a worker that dies on its own keeps what was read)."""
    quotas = Quotas(store, flush_interval=0.1)
    async with corral.Pool(warm_workers=0) as pool, pool.checkout() as session:
        async with quotas.feed('acme', session):
            feed = asyncio.ensure_future(session.feed_run('total = 0\nfor i in range(30_000_000):\n    total += i\ntotal'))
            while not feed.done() and await quotas.cpu_used('acme') == 0.0:
                await asyncio.sleep(0.05)
            assert not feed.done(), 'the feed ended before any of its CPU was counted'
            await feed
        counted = await quotas.cpu_used('acme')  # as the feed ended: the worker may use a little more after
        assert 0.0 < counted <= session.cpu_seconds
        for _ in range(400):  # the flusher writes it within flush_interval
            if await store.cpu_seconds_last_hour('acme') == pytest.approx(counted):
                break
            await asyncio.sleep(0.05)
        assert await store.cpu_seconds_last_hour('acme') == pytest.approx(counted)
    await quotas.close()



async def test_the_servers_flow_key_to_tenant_to_quotas(store_url):
    """What a server does per connection: the key gives the tenant; the tenant's quotas hold the
    session, each feed and each stored state."""
    async with corral.open_store(store_url) as store:
        keys, quotas = corral.KeyRing(store), Quotas(store, defaults=TenantQuotas(concurrent_sessions=1))
        key = await keys.create('acme')
        async with corral.Pool(warm_workers=0, store=quotas.guard(store), state_key=STATE_KEY) as pool:
            tenant = await keys.authenticate(key)
            async with quotas.session(tenant), pool.checkout(ephemeral=False, tenant=tenant) as session:
                async with quotas.feed(tenant, session):
                    assert await session.feed_run(BURN) == sum(range(2_000_000))
                error = await quota_error(quotas.session(tenant).__aenter__())
                assert error.display() == "tenant 'acme' has 1 session open; its quota is 1 (concurrent_sessions)"
            async with quotas.session(tenant):  # the first one was given back
                pass
        counted = await quotas.cpu_used('acme')
        assert 0.0 < counted <= session.cpu_seconds  # as the feed ended: the worker may use a little more after
        await quotas.close()
        assert await store.cpu_seconds_last_hour('acme') == pytest.approx(counted)
