"""Stored sessions have a lifecycle: a pool lists and deletes a tenant's sessions, and its retention
deletes those untouched for longer, Code Mode's stored runs among them."""

from __future__ import annotations

import asyncio

import pytest

import corral


class Expired(corral.PoolObserver):
    def __init__(self) -> None:
        self.counts: list[int] = []

    def sessions_expired(self, count: int) -> None:
        self.counts.append(count)


async def stored(pool: corral.Pool, code: str = 'x = 1', tenant: str = '') -> str:
    async with pool.checkout(ephemeral=False, tenant=tenant) as session:
        await session.feed_run(code)
        return session.session_id


async def test_list_and_delete(tmp_path):
    async with corral.Pool(warm_workers=0, store=f'sqlite:///{tmp_path}/s.db') as pool:
        first, second = await stored(pool), await stored(pool)
        theirs = await stored(pool, tenant='acme')
        assert await pool.list_sessions() == sorted([first, second])
        assert await pool.list_sessions(tenant='acme') == [theirs]
        assert len(pool._checkpoints) == 3  # each left its worker as a live checkpoint
        await pool.delete_session(first)
        assert await pool.list_sessions() == [second]
        assert len(pool._checkpoints) == 2  # the deleted session's went with it
        with pytest.raises(corral.SandboxStateError) as info:
            await pool.delete_session(first)
        assert str(info.value) == f'no stored session with id {first!r}'
        with pytest.raises(corral.SandboxStateError) as info:
            await pool.delete_session(theirs)  # another tenant's reads as one nobody has
        assert str(info.value) == f'no stored session with id {theirs!r}'
        with pytest.raises(corral.SandboxStateError) as info:
            async with pool.checkout(session_id=first):
                pass
        assert str(info.value) == f'no stored session with id {first!r}'
        async with pool.checkout(session_id=second):
            with pytest.raises(corral.SandboxSessionBusyError):
                await pool.delete_session(second)  # checked out: kept
        with pytest.raises(ValueError, match='^session_id must be 1 to 128 characters'):
            await pool.delete_session('no such/id')
        with pytest.raises(ValueError, match='^tenant must be 1 to 128 characters'):
            await pool.list_sessions(tenant='a b')


@pytest.mark.parametrize('bad', [0, -1, float('nan'), float('inf'), True, '30d'])
def test_retention_takes_seconds_above_0(bad):
    with pytest.raises(ValueError) as info:
        corral.Pool(retention=bad)
    assert str(info.value) == f'retention must be a number of seconds above 0, or None to keep stored sessions for ever; not {bad!r}'


async def test_retention_deletes_sessions_untouched_for_longer(tmp_path):
    observer = Expired()
    async with corral.Pool(warm_workers=0, store=f'sqlite:///{tmp_path}/s.db', retention=1.0, observer=observer) as pool:
        old = await stored(pool)
        theirs = await stored(pool, tenant='acme')
        await asyncio.sleep(0.6)
        async with pool.checkout(ephemeral=False) as kept:
            await kept.feed_run('y = 2')
            await asyncio.sleep(1.0)  # checked out: its lease keeps it
            assert await pool.list_sessions() == [kept.session_id]
        assert sum(observer.counts) == 2  # old and theirs, in one sweep or two
        assert len(pool._checkpoints) == 1  # the expired sessions' checkpoints went with them: kept's stays
        assert (await pool.list_sessions(), await pool.list_sessions(tenant='acme')) == ([kept.session_id], [])
        with pytest.raises(corral.SandboxStateError):
            await pool.store.get(theirs, tenant='acme')
        with pytest.raises(corral.SandboxStateError):
            await pool.store.get(old)
    async with corral.Pool(warm_workers=0, store=f'sqlite:///{tmp_path}/s.db') as pool:
        assert await pool.expire_sessions() == []  # no retention: kept for ever


async def test_code_mode_runs_stored_in_a_pool_are_reclaimed_by_its_retention(tmp_path):
    pytest.importorskip('pydantic_ai')
    from pydantic_ai import Agent

    from corral.pydantic_ai import CodeMode

    from integrations.scripted_model import Script

    observer = Expired()
    async with corral.Pool(warm_workers=0, store=f'sqlite:///{tmp_path}/s.db', retention=3600, observer=observer) as pool:
        for _ in range(3):
            await Agent(Script('x = 1').model, capabilities=[CodeMode(pool=pool)]).run('x')
        runs = await pool.list_sessions()
        assert len(runs) == 3
        pool.retention = 0.5
        await asyncio.sleep(0.6)
        assert [session_id for _, session_id in await pool.expire_sessions()] == runs
        assert (await pool.list_sessions(), observer.counts) == ([], [3])
