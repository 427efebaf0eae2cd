"""Stored states are bound to their place in the store: tenant, session id and generation.

Each attack edits the store's rows directly, as someone who can write the database could: a row
copied into another session's (or another tenant's), an older state put back, records dropped,
reordered or spliced in from another session. Each is refused by name. Run against the SQLite
store and a real PostgreSQL server.
"""

from __future__ import annotations

import sqlite3

import asyncpg
import pytest

import corral

KEY = b'test-state-key-0123456789abcdef!'


class Rows:
    """The store's rows of one database, read and written behind the store's back."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def _sql(self, statement: str, *args: object, fetch: bool = False) -> list[tuple]:
        if self.url.startswith('sqlite'):
            path = self.url.removeprefix('sqlite://')
            with sqlite3.connect(path) as db:
                return [tuple(row) for row in db.execute(statement.replace('$1', '?').replace('$2', '?').replace('$3', '?').replace('$4', '?'), args)]
        db = await asyncpg.connect(self.url)
        try:
            return [tuple(row) for row in await db.fetch(statement, *args)]
        finally:
            await db.close()

    async def read(self, tenant: str, session_id: str) -> tuple[bytes, int, list[tuple[int, bytes]]]:
        key = (tenant, session_id)
        ((state,),) = await self._sql('SELECT state FROM corral_sessions WHERE tenant = $1 AND session_id = $2', *key)
        ((generation,),) = await self._sql(f'SELECT generation FROM {self._generations} WHERE tenant = $1 AND session_id = $2', *key)
        records = await self._sql('SELECT generation, record FROM corral_records WHERE tenant = $1 AND session_id = $2 ORDER BY generation', *key)
        return bytes(state), generation, [(number, bytes(record)) for number, record in records]

    async def write(self, tenant: str, session_id: str, state: bytes, generation: int, records: list[tuple[int, bytes]]) -> None:
        """Make the rows of `(tenant, session_id)` these, whether or not the session was stored."""
        key = (tenant, session_id)
        for table in ('corral_sessions', 'corral_generations', 'corral_records'):
            if table != 'corral_generations' or self._generations == table:
                await self._sql(f'DELETE FROM {table} WHERE tenant = $1 AND session_id = $2', *key)
        if self._generations == 'corral_generations':  # SQLite keeps the generation in a table of its own
            await self._sql('INSERT INTO corral_sessions (tenant, session_id, state, updated) VALUES ($1, $2, $3, 0)', *key, state)
            await self._sql('INSERT INTO corral_generations (tenant, session_id, generation) VALUES ($1, $2, $3)', *key, generation)
        else:
            await self._sql('INSERT INTO corral_sessions (tenant, session_id, state, updated, generation) VALUES ($1, $2, $3, now(), $4)', *key, state, generation)
        for number, record in records:
            await self._sql('INSERT INTO corral_records (tenant, session_id, generation, record) VALUES ($1, $2, $3, $4)', *key, number, record)

    @property
    def _generations(self) -> str:
        return 'corral_generations' if self.url.startswith('sqlite') else 'corral_sessions'


@pytest.fixture
async def pool(url):
    async with corral.Pool(state_key=KEY, store=url, warm_workers=1) as pool:
        yield pool


async def stored(pool, *codes, tenant='', tools=None):
    """A new stored session of `tenant` that ran `codes`, closed: its id."""
    async with pool.checkout(ephemeral=False, tenant=tenant) as session:
        for code in codes:
            await session.feed_run(code, external_lookup=tools)
        return session.session_id


async def checkout_error(pool, session_id, tenant='', **options):
    with pytest.raises(corral.SandboxStateError) as info:
        async with pool.checkout(session_id=session_id, tenant=tenant, **options):
            pass
    return str(info.value)


async def test_a_stored_feed_appends_a_record_and_costs_the_feed_not_the_session(pool, url):
    rows = Rows(url)
    session_id = await stored(pool, 'big = fetch()', 'a = 1', 'b = 2', tools={'fetch': lambda: 'x' * 200_000})
    state, generation, records = await rows.read('', session_id)
    assert generation == 4 and [number for number, _ in records] == [2, 3, 4]  # the new session's full state is generation 1
    assert len(records[0][1]) > 200_000  # the journal of the feed that read 200 kB, whose answer it holds
    assert len(records[1][1]) < 2_000 and len(records[2][1]) < 2_000  # the feeds after it: their own size only
    async with pool.checkout(session_id=session_id) as session:
        assert await session.feed_run('(len(big), a, b)') == (200_000, 1, 2)
        await session.feed_run('c = 3')
    assert (await rows.read('', session_id))[1] == 6


async def test_records_are_compacted_into_a_full_state_when_they_outgrow_it(pool, url):
    rows = Rows(url)
    codes = [f'x{i} = "{str(i) * 100_000}"' for i in range(6)]  # each record holds its script: 100 kB
    session_id = await stored(pool, *codes)
    state, generation, records = await rows.read('', session_id)
    assert generation == 7 and len(records) < 6 and len(state) > 300_000  # a full state was written again
    async with pool.checkout(session_id=session_id) as session:
        assert await session.feed_run('[len(x) for x in (x0, x1, x2, x3, x4, x5)]') == [100_000] * 6


async def test_a_row_copied_into_another_sessions_row_is_refused(pool, url):
    rows = Rows(url)
    a = await stored(pool, 'who = "a"', 'n = 1')
    b = await stored(pool, 'who = "b"')
    await rows.write('', b, *await rows.read('', a))
    assert await checkout_error(pool, b) == (
        f"the stored state of session {b!r} holds a state of another session: it was copied into this row, so it is refused"
    )
    assert await checkout_error(pool, b, fork=True) == await checkout_error(pool, b)
    async with pool.checkout(session_id=a) as session:  # the original is untouched
        assert await session.feed_run('who') == 'a'


async def test_another_tenants_row_copied_into_a_row_is_refused_and_says_nothing_of_that_tenant(pool, url):
    rows = Rows(url)
    theirs = await stored(pool, 'secret = 42', tenant='tenant-a')
    mine = await stored(pool, 'x = 1', tenant='tenant-b')
    await rows.write('tenant-b', mine, *await rows.read('tenant-a', theirs))
    assert await checkout_error(pool, mine, tenant='tenant-b') == (
        f"the stored state of session {mine!r} holds a state of another tenant's session: it was copied into this row, so it is refused"
    )
    # A row copied under the same session id in another tenant's place reads the same way.
    await rows.write('tenant-b', theirs, *await rows.read('tenant-a', theirs))
    assert await checkout_error(pool, theirs, tenant='tenant-b') == (
        f"the stored state of session {theirs!r} holds a state of another tenant's session: it was copied into this row, so it is refused"
    )


async def test_an_older_state_put_back_is_refused(pool, url):
    rows = Rows(url)
    session_id = await stored(pool, 'balance = 100')
    before = await rows.read('', session_id)  # generation 2: the full state and one record
    async with pool.checkout(session_id=session_id) as session:
        await session.feed_run('balance -= 70')
        await session.feed_run('balance -= 20')
    state, generation, records = await rows.read('', session_id)
    assert generation == 4
    # The old rows put back, with the store's generation as it is: a replayed row.
    await rows.write('', session_id, before[0], generation, before[2])
    assert await checkout_error(pool, session_id) == (
        f"the stored state of session {session_id!r} is of generation 2 where the store is at generation 4: "
        'an older state of the session was put back (rolled back), so it is refused'
    )
    # The last record dropped: rolled back by one feed.
    await rows.write('', session_id, state, generation, records[:-1])
    assert await checkout_error(pool, session_id) == (
        f"the stored state of session {session_id!r} is of generation 3 where the store is at generation 4: "
        'an older state of the session was put back (rolled back), so it is refused'
    )
    await rows.write('', session_id, state, generation, records)
    async with pool.checkout(session_id=session_id) as session:
        assert await session.feed_run('balance') == 10


async def test_records_dropped_reordered_or_spliced_from_another_session_are_refused(pool, url):
    rows = Rows(url)
    session_id = await stored(pool, 'log = []', 'log.append(1)', 'log.append(2)', 'log.append(3)')
    state, generation, records = await rows.read('', session_id)
    assert [number for number, _ in records] == [2, 3, 4, 5]
    dropped = [records[0], (3, records[2][1]), (4, records[3][1])]  # the feed of generation 3 removed, the rest renumbered
    await rows.write('', session_id, state, 4, dropped)
    assert await checkout_error(pool, session_id) == (
        f'the stored state of session {session_id!r} was altered: its record of generation 4 does not follow the part '
        'before it (generation 2): a record was dropped, reordered, or put back from an older state'
    )
    swapped = [records[0], (3, records[2][1]), (4, records[1][1]), records[3]]
    await rows.write('', session_id, state, generation, swapped)
    assert await checkout_error(pool, session_id) == (
        f'the stored state of session {session_id!r} was altered: its record of generation 4 does not follow the part '
        'before it (generation 2): a record was dropped, reordered, or put back from an older state'
    )
    other = await stored(pool, 'log = []', 'log.append(99)')
    spliced = [*records, (6, (await rows.read('', other))[2][1][1])]
    await rows.write('', session_id, state, 6, spliced)
    assert await checkout_error(pool, session_id) == (
        f"the stored state of session {session_id!r} holds a record of another session: it was copied into this row, so it is refused"
    )
    await rows.write('', session_id, state, generation, records)
    async with pool.checkout(session_id=session_id) as session:
        assert await session.feed_run('log') == [1, 2, 3]


async def test_a_dumped_state_put_in_a_row_is_refused_and_stored_bytes_are_not_a_dump(pool, url):
    rows = Rows(url)
    async with pool.checkout() as ephemeral:
        await ephemeral.feed_run('x = "dumped"')
        dumped = await ephemeral.dump()
    session_id = await stored(pool, 'x = "stored"')
    state, generation, _ = await rows.read('', session_id)
    await rows.write('', session_id, dumped, 1, [])
    assert await checkout_error(pool, session_id) == (
        f"the stored state of session {session_id!r} is a dumped state, not one stored for this session: "
        'it was copied into the store, so it is refused'
    )
    async with pool.checkout() as session:
        with pytest.raises(corral.SandboxStateError) as info:
            await session.load_session(state)
    assert str(info.value) == (
        "these bytes are a stored session's state, bound to its place in the store, not a dumped one: "
        'check the session out with pool.checkout(session_id=...), or load what session.dump() returns'
    )
    # A dump loads anywhere with the pool's key: into a stored session of any tenant too.
    async with pool.checkout(ephemeral=False, tenant='someone') as session:
        await session.load_session(dumped)
        loaded_id = session.session_id
    async with pool.checkout(session_id=loaded_id, tenant='someone') as session:
        assert await session.feed_run('x') == 'dumped'


async def test_two_writers_of_one_session_cannot_lose_each_others_feed(pool, url):
    rows = Rows(url)
    session_id = await stored(pool, 'feeds = []')
    first = pool.checkout(session_id=session_id)
    await first.__aenter__()
    try:
        await first.feed_run('feeds.append("first")')
        # The first holder's lease is lost (it expired, say), and a second holder writes a feed.
        await rows._sql('DELETE FROM corral_leases WHERE session_id = $1', session_id)
        async with pool.checkout(session_id=session_id) as second:
            await second.feed_run('feeds.append("second")')
        with pytest.raises(corral.SandboxSessionBusyError) as info:
            await first.feed_run('feeds.append("lost?")')
        assert str(info.value) == (
            f'the stored session {session_id!r} was written by another holder since this one loaded it '
            '(the store is at generation 4; this write follows generation 3): nothing was written; check the session out again'
        )
    finally:
        await first.aclose()
    async with pool.checkout(session_id=session_id) as session:
        assert await session.feed_run('feeds') == ['first', 'second']


async def test_tenants_check_out_resume_and_fork_their_own_sessions_only(pool):
    mine = await stored(pool, 'owner = "a"', tenant='a')
    never = 'f' * 32
    for tenant in ('b', ''):
        for options in ({}, {'fork': True}):
            # Another tenant's session reads exactly as one that was never stored.
            assert await checkout_error(pool, mine, tenant=tenant, **options) == f'no stored session with id {mine!r}'
            assert await checkout_error(pool, never, tenant=tenant, **options) == f'no stored session with id {never!r}'
    async with pool.checkout(session_id=mine, tenant='a') as session:
        assert session.tenant == 'a'
        # While tenant a holds it, another tenant is not told it is busy: it is not stored, for them.
        assert await checkout_error(pool, mine, tenant='b') == f'no stored session with id {mine!r}'
        with pytest.raises(corral.SandboxSessionBusyError):
            async with pool.checkout(session_id=mine, tenant='a'):
                pass
        assert await session.feed_run('owner') == 'a'
    async with pool.checkout(session_id=mine, tenant='a', fork=True) as fork:
        assert fork.tenant == 'a'
        await fork.feed_run('owner = "fork"')
    async with pool.checkout(session_id=fork.session_id, tenant='a') as again:
        assert await again.feed_run('owner') == 'fork'
    assert await pool._get_store().list(tenant='a') == sorted([mine, fork.session_id])
    assert await pool._get_store().list(tenant='b') == []


def test_tenants_are_checked_at_checkout():
    pool = corral.Pool()
    rule = '1 to 128 characters, each an ASCII letter, a digit or one of "_.:-"'
    with pytest.raises(ValueError) as info:
        pool.checkout(ephemeral=False, tenant='a tenant')
    assert str(info.value) == f"tenant must be {rule}; got 'a tenant'"
    with pytest.raises(TypeError) as type_info:
        pool.checkout(ephemeral=False, tenant=7)
    assert str(type_info.value) == 'tenant must be a str, not int'


def test_has_store_says_whether_the_pool_was_given_a_store(tmp_path):
    assert corral.Pool().has_store is False
    assert corral.Pool(store=f'sqlite:///{tmp_path}/s.db').has_store is True
    assert corral.Pool(store=corral.SQLiteStore(tmp_path / 's.db')).has_store is True


async def test_a_paused_feed_stored_then_resumed_in_another_checkout_replaces_its_open_record(pool, url):
    def approve():
        raise corral.Deferred()

    async with pool.checkout(ephemeral=False) as session:
        await session.feed_run('a = 1')
        with pytest.raises(corral.SandboxPaused):
            await session.feed_run('b = approve()\nc = b + 1', external_lookup={'approve': approve})
        session_id = session.session_id
    async with pool.checkout(session_id=session_id) as session:
        (call,) = session.pending_calls
        await session.resume({call.call_id: 41})
    _, generation, records = await Rows(url).read('', session_id)
    assert generation == 5 and len(records) == 4  # the feed, its pause, its answers (the open feed gone), and its end
    async with pool.checkout(session_id=session_id) as session:
        assert not session.paused
        assert await session.feed_run('(a, b, c)') == (1, 41, 42)


async def test_records_never_pass_a_small_quota(url, tmp_path):
    """A file rewritten by each feed is in each record: records must be compacted before they add
    up past the quota, or the session could not be loaded."""
    quota = 150_000
    (tmp_path / 'data').mkdir()
    mount = corral.Mount(tmp_path / 'data', '/data')
    async with corral.Pool(state_key=KEY, store=url, warm_workers=0, max_state_bytes=quota) as pool:
        async with pool.checkout(ephemeral=False, mounts=mount) as session:
            for i in range(5):
                await session.feed_run(f'open("/data/f.txt", "w").write("{i}" * 40_000)')
            session_id = session.session_id
        _, _, records = await Rows(url).read('', session_id)
        assert sum(len(record) for _, record in records) <= quota // 2
        async with pool.checkout(session_id=session_id, mounts=mount) as session:
            assert await session.feed_run('import os\nos.path.getsize("/data/f.txt")') == 40_000


async def test_a_live_checkpoint_is_taken_only_for_the_very_rows_it_was_kept_with(pool, url):
    """A stored session's checkpoint is kept with the digest of its rows, and a checkout that reads
    those very rows back takes its state unchecked. Rows attacked while it is kept are checked as
    ever: refused with the text a pool that keeps no checkpoints gives, the checkpoint left alone;
    the same rows copied under another session's id or another tenant's reach no checkpoint."""
    rows = Rows(url)
    session_id = await stored(pool, 'log = []', 'log.append(1)', 'log.append(2)')
    other = await stored(pool, 'log = ["other"]')
    theirs = await stored(pool, 'log = ["theirs"]', tenant='tenant-a')
    kept = pool._checkpoints._kept[('', session_id)]
    assert kept.stored is not None
    state, generation, records = await rows.read('', session_id)
    assert generation == 4 and len(records) == 3
    last = records[-1][1]
    altered = last[:-40] + bytes([last[-40] ^ 1]) + last[-39:]
    async with corral.Pool(state_key=KEY, store=url, checkpoints=None, warm_workers=0) as cold:
        for attack in (
            (state, generation, [*records[:-1], (generation, altered)]),  # a byte of the last record changed
            (state, generation, [records[0], (3, records[2][1]), (4, records[1][1])]),  # two records swapped
            await rows.read('', other),  # another session's rows copied in
        ):
            await rows.write('', session_id, *attack)
            assert await checkout_error(pool, session_id) == await checkout_error(cold, session_id)
            assert pool._checkpoints._kept[('', session_id)] is kept
        assert await checkout_error(pool, session_id) == (
            f'the stored state of session {session_id!r} holds a state of another session: it was copied into this row, so it is refused'
        )
        # This session's rows, byte for byte, under another id and another tenant's: checked, refused.
        await rows.write('', other, state, generation, records)
        await rows.write('tenant-a', theirs, state, generation, records)
        assert await checkout_error(pool, other) == await checkout_error(cold, other) == (
            f'the stored state of session {other!r} holds a state of another session: it was copied into this row, so it is refused'
        )
        assert await checkout_error(pool, theirs, tenant='tenant-a') == await checkout_error(cold, theirs, tenant='tenant-a') == (
            f"the stored state of session {theirs!r} holds a state of another tenant's session: it was copied into this row, so it is refused"
        )
        await rows.write('', session_id, state, generation, records)  # put back as they were: the checkpoint's
        async with pool.checkout(session_id=session_id) as session:
            assert session._worker.pid == kept.worker.pid
            assert await session.feed_run('log') == [1, 2]
        assert await checkout_error(pool, other) == await checkout_error(cold, other)
        # An older state put back whole, its generation with it, checks as a state: not the
        # checkpoint's, which is dropped, the older state replayed (as a pool without checkpoints does).
        kept = pool._checkpoints._kept[('', session_id)]
        state, generation, records = await rows.read('', session_id)
        await rows.write('', session_id, state, generation - 2, records[:-2])
        async with pool.checkout(session_id=session_id) as session, cold.checkout(session_id=session_id, fork=True) as replayed:
            assert session._worker.pid != kept.worker.pid
            assert await session.feed_run('log') == await replayed.feed_run('log') == [1]


async def test_a_checkout_by_id_is_one_call_to_the_store_and_a_new_session_or_fork_leases_with_its_first_write(pool, url):
    """A checkout by id takes the lease and reads the state in one call; a new stored session, and
    a fork, take the lease of their new id in the write of their first state: held from there, as
    another pool's checkout of it finds."""
    store, calls = pool.store, []
    for name in ('get', 'acquire', 'acquire_and_get', 'put', 'append'):
        def counted(*args, _name=name, _method=getattr(store, name), **options):
            calls.append(_name)
            return _method(*args, **options)
        setattr(store, name, counted)

    async def busy(session_id):
        async with corral.Pool(state_key=KEY, store=url, warm_workers=0) as other:
            with pytest.raises(corral.SandboxSessionBusyError) as info:
                async with other.checkout(session_id=session_id):
                    pass
        return str(info.value).partition(', which')[0]

    async with pool.checkout(ephemeral=False) as session:
        assert calls == ['put']
        source = session.session_id
        assert await busy(source) == f'the stored session {source!r} is checked out elsewhere: another holder has its lease'
        await session.feed_run('x = 1')
    calls.clear()
    async with pool.checkout(session_id=source, fork=True) as fork:
        assert calls == ['get', 'put']
        assert await busy(fork.session_id) == f'the stored session {fork.session_id!r} is checked out elsewhere: another holder has its lease'
    calls.clear()
    async with pool.checkout(session_id=source) as session:
        assert calls == ['acquire_and_get']
        assert await session.feed_run('x') == 1
    assert calls == ['acquire_and_get', 'append']
