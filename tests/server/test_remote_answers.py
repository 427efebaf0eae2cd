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


async def test_answers_a_client_should_not_send_are_ignored_or_refused_and_the_session_goes_on(server):
    """A client's ANSWERS as an attacker writes them: the same call answered twice in one frame
    (the first counts), answered again after an error answer, tens of thousands of answers to calls
    long answered (ignored, the session goes on), a call of the last feed answered during the next,
    a call never made (the connection closes, saying which), answers after CLOSE."""
    import contextlib

    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    from corral.server import protocol as p

    async def received(ws):
        return p.decode(await ws.recv())

    async with connect(server.url + p.PATH, compression=None, max_size=None) as ws:
        await ws.send(p.encode([p.OPEN, p.PROTOCOL_VERSION, {}]))
        assert (await received(ws))[0] == p.OPENED
        await ws.send(p.encode([p.FEED, 'a = f(1)\nb = f(2)\n[a, b]', {'f': False}, {}, []]))
        assert await received(ws) == [p.EVENTS, [[p.CALL, 0, 'f', [1], {}]]]
        await ws.send(p.encode([p.ANSWERS, [[0, 'ok', 10], [0, 'ok', 99], [0, 'error', ['ValueError', ['no']]]]]))
        assert await received(ws) == [p.EVENTS, [[p.CALL, 1, 'f', [2], {}]]]
        await ws.send(p.encode([p.ANSWERS, [[1, 'error', ['ValueError', ['no']]], [1, 'ok', 5]]]))
        assert await received(ws) == [
            p.ERROR, 'SandboxRuntimeError', 'Traceback (most recent call last):\n  File "main.py", line 2, in <module>\n    b = f(2)\n        ^^^^\nValueError: no',
            {'exc_type': 'ValueError', 'message': 'no'}, [],
        ]  # fmt: skip
        await ws.send(p.encode([p.ANSWERS, [[0, 'ok', 1], [1, 'ok', 1]] * 20_000]))
        await ws.send(p.encode([p.FEED, 'c = f(3)\n[a, c]', {'f': False}, {}, []]))
        assert await received(ws) == [p.EVENTS, [[p.CALL, 2, 'f', [3], {}]]]
        await ws.send(p.encode([p.ANSWERS, [[1, 'ok', 'stale'], [2, 'ok', 30]]]))
        assert await received(ws) == [p.RESULT, [10, 30], None, []]
        await ws.send(p.encode([p.CLOSE]))
        await ws.send(p.encode([p.ANSWERS, [[2, 'ok', 1]]]))
        after = []
        with contextlib.suppress(ConnectionClosed):
            async for data in ws:
                after.append(p.decode(data))
        assert (after, ws.close_code) == ([[p.CLOSED]], 1000)
    async with connect(server.url + p.PATH, compression=None, max_size=None) as ws:
        await ws.send(p.encode([p.OPEN, p.PROTOCOL_VERSION, {}]))
        assert (await received(ws))[0] == p.OPENED
        await ws.send(p.encode([p.FEED, 'f(1)', {'f': False}, {}, []]))
        assert await received(ws) == [p.EVENTS, [[p.CALL, 0, 'f', [1], {}]]]
        await ws.send(p.encode([p.ANSWERS, [[1, 'ok', 1]]]))
        assert await received(ws) == [p.ERROR, 'SandboxError', 'the client answered call 1, which the server never made', {}, []]
        with contextlib.suppress(ConnectionClosed):
            await ws.recv()
        assert ws.close_code == p.CLOSE_PROTOCOL
    for call_id in (True, 0.0, '0', None):  # a call id is an int: msgpack's true, a float, a str are malformed, not call 0 or 1
        async with connect(server.url + p.PATH, compression=None, max_size=None) as ws:
            await ws.send(p.encode([p.OPEN, p.PROTOCOL_VERSION, {}]))
            assert (await received(ws))[0] == p.OPENED
            await ws.send(p.encode([p.FEED, 'f(1) + f(2)', {'f': False}, {}, []]))
            assert await received(ws) == [p.EVENTS, [[p.CALL, 0, 'f', [1], {}]]]
            await ws.send(p.encode([p.ANSWERS, [[0, 'ok', 1], [call_id, 'ok', 1]]]))
            assert await received(ws) == [p.ERROR, 'SandboxError', 'the ANSWERS frame is malformed', {}, []], call_id
            with contextlib.suppress(ConnectionClosed):
                await ws.recv()
            assert ws.close_code == p.CLOSE_PROTOCOL
