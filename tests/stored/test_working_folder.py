"""The folder a feed ran in is journaled: a dumped session, or a stored one checked out again (its
journal replayed in another pool), starts its next feed where its last one ran."""

from __future__ import annotations

import corral


async def test_a_dump_keeps_the_working_folder(pool) -> None:
    async with pool.checkout() as session:
        session.chdir('/work/reports')
        assert await session.feed_run('import os\nos.getcwd()') == '/work/reports'
        state = await session.dump()
    async with pool.checkout() as session:
        await session.load_session(state)
        assert await session.feed_run('import os\nos.getcwd()') == '/work/reports'


async def test_a_stored_session_keeps_the_working_folder(tmp_path) -> None:
    store = corral.SQLiteStore(tmp_path / 'sessions.db')
    async with corral.Pool(store=store) as pool:
        async with pool.checkout(ephemeral=False) as session:
            session.chdir('/a')
            await session.feed_run('x = 1')
            session.chdir('/b/c')
            await session.feed_run('y = 2')
            session_id = session.session_id
    async with corral.Pool(store=store) as pool:  # no checkpoint: the journal is replayed
        async with pool.checkout(session_id=session_id) as session:
            assert await session.feed_run('import os\n[os.getcwd(), x, y]') == ['/b/c', 1, 2]
