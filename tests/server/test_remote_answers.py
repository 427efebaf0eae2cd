"""Host calls answered by a `RemotePool`'s client: the server's session takes each answer as its
frame is parsed (`RemoteAnswer`), and a call cut off by its feed is let go."""

from __future__ import annotations

import asyncio

import pytest

import corral
from corral import Limits, RemotePool
from corral.host.deferred import RemoteAnswer


async def test_an_answer_is_taken_as_it_is_settled_not_a_turn_later():
    loop = asyncio.get_running_loop()
    taken: list[object] = []
    answer = RemoteAnswer(loop=loop)
    answer.take_with(lambda future: taken.append(future.result()))
    answer.settle(5)
    failed = RemoteAnswer(loop=loop)
    failed.take_with(lambda future: taken.append(repr(future.exception())))
    failed.settle(error=KeyError('k'))
    assert taken == [5, "KeyError('k')"]  # no turn of the event loop between
    with pytest.raises(asyncio.InvalidStateError):
        answer.settle(6)
    assert taken == [5, "KeyError('k')"]


async def test_a_cancelled_answer_tells_its_taker_once():
    taken: list[bool] = []
    answer = RemoteAnswer(loop=asyncio.get_running_loop())
    answer.take_with(lambda future: taken.append(future.cancelled()))
    assert answer.cancel() is True
    assert answer.cancel() is False
    assert taken == [True]


async def test_an_answer_settled_before_its_taker_came_is_taken_in_the_next_turn():
    taken: list[object] = []
    answer = RemoteAnswer(loop=asyncio.get_running_loop())
    answer.settle('early')
    answer.take_with(lambda future: taken.append(future.result()))
    assert taken == []
    await asyncio.sleep(0)
    assert taken == ['early']


async def test_a_taker_that_fails_reaches_the_loops_exception_handler_not_the_settler():
    loop = asyncio.get_running_loop()
    reported: list[dict] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: reported.append(context))
    try:
        answer = RemoteAnswer(loop=loop)
        answer.take_with(lambda future: 1 / 0)
        answer.settle(1)  # does not raise
    finally:
        loop.set_exception_handler(previous)
    assert [(context['message'], type(context['exception']).__name__, context['future'] is answer) for context in reported] == [
        ('a taker of a RemoteAnswer failed', 'ZeroDivisionError', True)
    ]


async def slow() -> str:
    await asyncio.sleep(2.0)
    return 'late'


def add(a: int, b: int) -> int:
    return a + b


async def inc(i: int) -> int:
    return i + 1


@pytest.mark.slow
async def test_a_call_its_feed_cut_off_is_let_go_and_its_late_answer_ignored(server):
    # The feed passes its wall_time while the client runs slow(): the session cancels the call's
    # answer; the client's answer comes after, to a call no feed waits on, and the session goes on.
    async with RemotePool(server.url) as pool, pool.checkout(limits=Limits(wall_time=1)) as session:
        with pytest.raises(corral.SandboxLimitError) as stopped:
            await session.feed_run("x = 1\nawait slow()", external_lookup={'slow': slow, 'add': add})
        assert str(stopped.value) == 'TimeoutError: the script ran past the wall_time limit of 1 second'
        await asyncio.sleep(1.5)  # the late answer reaches the server
        assert await session.feed_run('x + add(1, 2)', external_lookup={'slow': slow, 'add': add}) == 4
        gathered = 'import asyncio\nawait asyncio.gather(*[inc(i) for i in range(3)])'
        assert await session.feed_run(gathered, external_lookup={'inc': inc}) == [1, 2, 3]
