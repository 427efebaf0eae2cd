"""Warm workers follow demand: more after checkouts that found none idle, fewer after quiet periods.

The tests drive the demand signal (checkouts entered together, so each finds the idle list as the
one before left it) and the pool's clock (`pool._clock`), and count workers; nothing depends on timing.
"""

import asyncio
import contextlib
import time

import pytest

import corral
from corral.host.pool import WarmDemand


def test_each_miss_adds_one_up_to_the_cap():
    demand = WarmDemand(floor=2, cap=5, decay=10.0)
    targets = []
    for now in range(5):
        demand.miss(float(now))
        targets.append(demand.target)
    assert targets == [3, 4, 5, 5, 5]


def test_each_quiet_period_halves_the_surplus_down_to_the_floor():
    demand = WarmDemand(floor=2, cap=12, decay=10.0)
    for _ in range(10):
        demand.miss(100.0)
    assert demand.target == 12
    assert demand.settle(109.9) == 110.0  # not quiet long enough yet: the next decay is due at 110
    assert demand.target == 12
    assert demand.settle(110.0) == 120.0
    assert demand.target == 7  # 2 + 10 // 2
    assert demand.settle(135.0) == 140.0  # two periods passed: 2 + 5 // 2 = 4, then 2 + 2 // 2 = 3
    assert demand.target == 3
    assert demand.settle(140.0) is None  # 2 + 1 // 2: back at the floor, nothing more to decay
    assert demand.target == 2


def test_a_miss_restarts_the_quiet_period():
    demand = WarmDemand(floor=0, cap=4, decay=10.0)
    demand.miss(0.0)
    demand.miss(0.0)
    assert demand.settle(9.0) == 10.0
    demand.miss(9.0)
    assert (demand.target, demand.settle(18.0)) == (3, 19.0)
    assert (demand.settle(19.0), demand.target) == (29.0, 1)


async def settled(pool: corral.Pool) -> int:
    """Wait for the pool's refill to end; the number of idle workers then."""
    while pool._refill is not None and not pool._refill.done():
        await asyncio.wait([pool._refill])
    return len(pool._idle)


async def enter_together(stack: contextlib.AsyncExitStack, pool: corral.Pool, count: int) -> list[corral.Session]:
    """Check out `count` sessions at once (each kept open until `stack` closes): each one finds the
    idle workers the one before it left, so all but the ones idle workers serve are misses."""
    sessions = [pool.checkout() for _ in range(count)]
    await asyncio.gather(*(session.__aenter__() for session in sessions))
    for session in sessions:
        stack.push_async_callback(session.aclose)
    return sessions


@pytest.mark.slow
async def test_checkouts_that_find_no_idle_worker_keep_more_warm_then_the_surplus_decays():
    now = [0.0]
    async with corral.Pool(warm_workers=1, max_warm_workers=4, warm_decay=10.0) as pool, contextlib.AsyncExitStack() as stack:
        pool._clock = lambda: now[0]
        await enter_together(stack, pool, 1)  # the first checkout of a pool is no sign of demand
        assert (await settled(pool), pool._demand.target) == (1, 1)
        sessions = await enter_together(stack, pool, 4)  # one idle worker for four checkouts: three misses
        assert [await session.feed_run('6 * 7') for session in sessions] == [42] * 4
        assert (await settled(pool), pool._demand.target) == (4, 4)
        surplus = list(pool._idle[:3])
        now[0] = 10.0
        pool._decay()
        assert (len(pool._idle), pool._demand.target) == (2, 2)  # 1 + 3 // 2; the longest idle were killed
        assert [worker.alive() for worker in surplus] == [False, False, True]
        now[0] = 20.0
        pool._decay()
        assert (len(pool._idle), pool._demand.target, pool._decay_timer) == (1, 1, None)
        await enter_together(stack, pool, 12)  # one idle worker, eleven misses: up to the cap, no further
        assert (await settled(pool), pool._demand.target) == (4, 4)
        assert pool._decay_timer is not None  # the next decay is scheduled (at 30 s of the pool's clock)


async def test_a_worker_forked_for_a_target_the_decay_lowered_is_not_kept():
    now = [0.0]
    async with corral.Pool(warm_workers=1, max_warm_workers=4, warm_decay=10.0) as pool, contextlib.AsyncExitStack() as stack:
        pool._clock = lambda: now[0]
        await enter_together(stack, pool, 1)
        await settled(pool)
        await enter_together(stack, pool, 6)  # five misses: the refill forks toward 4 idle workers
        while not pool._idle:  # once it placed the first, it is forking the second
            await asyncio.sleep(0)
        now[0] = 100.0
        pool._decay()  # back to 1, which is what is idle already
        assert pool._demand.target == 1
        assert await settled(pool) == 1


async def test_a_fixed_warm_count_stays_fixed():
    async with corral.Pool(warm_workers=1, max_warm_workers=1) as pool, contextlib.AsyncExitStack() as stack:
        await enter_together(stack, pool, 1)
        await settled(pool)
        await enter_together(stack, pool, 4)
        assert (await settled(pool), pool._demand.target, pool._decay_timer) == (1, 1, None)


async def test_demand_grows_from_no_warm_workers_when_a_cap_allows_it():
    async with corral.Pool(warm_workers=0, max_warm_workers=2) as pool, contextlib.AsyncExitStack() as stack:
        await enter_together(stack, pool, 1)
        assert await settled(pool) == 0
        await enter_together(stack, pool, 3)
        assert (await settled(pool), pool._demand.target) == (2, 2)


async def test_warm_counts_are_checked():
    with pytest.raises(ValueError) as info:
        corral.Pool(warm_workers=3, max_warm_workers=2)
    assert str(info.value) == 'max_warm_workers (2) must be at least warm_workers (3)'
    with pytest.raises(ValueError) as info:
        corral.Pool(warm_decay=0)
    assert str(info.value) == 'warm_decay must be positive (seconds)'
    assert corral.Pool(warm_workers=3).max_warm_workers == 12


async def test_a_checkout_takes_the_last_forked_worker_that_has_started():
    async with corral.Pool(warm_workers=3) as pool, contextlib.AsyncExitStack() as stack:
        await enter_together(stack, pool, 1)
        assert await settled(pool) == 3
        oldest, middle, newest = pool._idle
        now = time.monotonic()
        oldest.forked, middle.forked, newest.forked = now - 2.0, now - 1.0, now + 3600.0  # the newest still starting
        taken = [(await stack.enter_async_context(pool.checkout()))._worker for _ in range(3)]
        assert taken == [middle, oldest, newest]  # started, the last forked first; then the one still starting


async def test_the_zygote_is_asked_for_two_workers_at_once():
    asked, most = [0], [0]
    async with corral.Pool(warm_workers=0, max_warm_workers=0) as pool, contextlib.AsyncExitStack() as stack:
        spawn = pool._zygote.spawn

        async def counted(**limits):
            asked[0] += 1
            most[0] = max(most[0], asked[0])
            try:
                return await spawn(**limits)
            finally:
                asked[0] -= 1

        pool._zygote.spawn = counted
        sessions = await enter_together(stack, pool, 3)  # three checkouts wait: two forks asked at once, then the third
        assert [await session.feed_run('6 * 7') for session in sessions] == [42] * 3
        assert (most[0], await settled(pool)) == (2, 0)


async def test_a_session_that_ends_starts_its_replacement_at_once(monkeypatch):
    monkeypatch.setattr(corral.host.pool, '_REFILL_DELAY', 3600.0)
    async with corral.Pool(warm_workers=1) as pool:
        async with pool.checkout():
            pass
        assert await asyncio.wait_for(settled_or_napping(pool), 10) == 1
        pool._idle[0].forked -= 1.0  # started a second ago: taking it is no miss
        async with pool.checkout() as session:
            assert pool._refill_sleeping  # the replacement waits (an hour here) while the session runs
            assert await session.feed_run('1 + 1') == 2
        assert not pool._refill_sleeping  # its end woke the refill
        assert await asyncio.wait_for(settled(pool), 10) == 1


async def test_a_checkout_that_takes_a_worker_still_starting_is_a_miss():
    async with corral.Pool(warm_workers=1, max_warm_workers=4) as pool, contextlib.AsyncExitStack() as stack:
        await enter_together(stack, pool, 1)
        assert await settled(pool) == 1
        pool._idle[0].forked = time.monotonic()  # forked just now: it may still be locking down, warming up
        await enter_together(stack, pool, 1)
        assert pool._demand.target == 2
        assert await settled(pool) == 2
        pool._idle[0].forked -= 1.0  # a second ago: started
        await enter_together(stack, pool, 1)
        assert pool._demand.target == 2


async def test_the_extra_warm_workers_are_forked_once_no_session_runs(monkeypatch):
    monkeypatch.setattr(corral.host.pool, '_REFILL_DELAY', 3600.0)
    async with corral.Pool(warm_workers=1, max_warm_workers=4) as pool:
        async with pool.checkout():
            pass
        assert await asyncio.wait_for(settled_or_napping(pool), 10) == 1
        async with contextlib.AsyncExitStack() as stack:
            sessions = await enter_together(stack, pool, 4)  # four misses (one took a worker just forked): the cap
            assert [await session.feed_run('6 * 7') for session in sessions] == [42] * 4
            assert pool._demand.target == 4
            await sessions[0].aclose()  # a replacement, but only up to warm_workers while the others run
            assert (await asyncio.wait_for(settled_or_napping(pool), 10), pool._refill_sleeping) == (1, True)
        assert await asyncio.wait_for(settled(pool), 10) == 4  # the last session ended: up to the target


async def settled_or_napping(pool: corral.Pool) -> int:
    """Wait for the pool's refill to end or to nap before forking more; the number of idle workers then."""
    while pool._refill is not None and not pool._refill.done() and not (pool._refill_sleeping and not pool._zygote._waiting):
        await asyncio.sleep(0.01)
    return len(pool._idle)
