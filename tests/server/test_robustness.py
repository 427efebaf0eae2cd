"""A `corral serve` against clients that break the rules: every mistake gets a clear error and
ends that client's session only; no client or script holds up another."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

import corral
from corral import Limits, RemotePool
from corral.server import protocol
from corral.server.app import create_app
from corral.server.metrics import Metrics

from .conftest import running_server, serving_app

#: Seconds a test waits for something the server does on its own (a lease released).
SETTLE_SECONDS = 20


@pytest.fixture(scope='module')
def small_server(tmp_path_factory):
    """A server with small bounds: frames of up to 4096 bytes, 256 KiB held for a client that does not read."""
    with running_server(tmp_path_factory.mktemp('small'), '--max-frame', '4096', '--max-outbox', str(256 * 1024)) as running:
        yield running


async def exchange(url: str, *frames: bytes | str) -> tuple[list[list], int | None]:
    """Send `frames` on a new connection; what the server sent back, and its close code."""
    received = []
    async with connect(url + protocol.PATH, compression=None, max_size=None) as ws:
        for data in frames:
            await ws.send(data)
        try:
            async for data in ws:
                received.append(protocol.decode(data))
        except ConnectionClosed:
            pass
        return received, ws.close_code


OPEN = protocol.encode([protocol.OPEN, protocol.PROTOCOL_VERSION, {}])


def opening(limits: dict) -> bytes:
    """An OPEN frame asking for `limits`."""
    return protocol.encode([protocol.OPEN, protocol.PROTOCOL_VERSION, {'limits': limits}])


def errors(received: list[list]) -> list[tuple[str, str]]:
    return [(message[1], message[2]) for message in received if message[0] == protocol.ERROR]


@pytest.mark.parametrize(
    ('frames', 'code', 'error'),
    [
        (['hello'], protocol.CLOSE_PROTOCOL, 'the client sent a text frame; corral frames are binary (msgpack)'),
        ([b'\xc1'], protocol.CLOSE_PROTOCOL, 'the client sent a malformed frame (ValueError: a message must be a non-empty list whose first item is its kind)'),
        ([protocol.encode({'not': 'a list'})], protocol.CLOSE_PROTOCOL, 'the client sent a malformed frame (ValueError: a message must be a non-empty list whose first item is its kind)'),
        ([protocol.encode([protocol.FEED, 'x', {}, {}, []])], protocol.CLOSE_PROTOCOL, 'the first frame of a connection must be OPEN'),
        (
            [protocol.encode([protocol.OPEN, 99, {}])],
            protocol.CLOSE_PROTOCOL,
            'this corral server speaks protocol version 2, the client version 99: use a corral client of the same version as the server',
        ),
        ([protocol.encode([protocol.OPEN, protocol.PROTOCOL_VERSION, {'colour': 'red'}])], protocol.CLOSE_PROTOCOL, "the OPEN frame is malformed (unknown options ['colour'])"),
        *(
            ([protocol.encode([protocol.OPEN, protocol.PROTOCOL_VERSION, {'modules': {'m': module}}])], protocol.CLOSE_PROTOCOL, "the OPEN frame is malformed (module 'm' is malformed)")
            for module in ([None, {}, ['VERSION', 3]], [None, {}, {}, {}], [None])
        ),
        *(
            ([protocol.encode([protocol.OPEN, protocol.PROTOCOL_VERSION, {'os_access': [None, None, None, cap]}])], protocol.CLOSE_PROTOCOL,
             'the OPEN frame is malformed (os_access max_urandom_bytes is malformed)')
            for cap in (-1, 2**64, 1.5, True, None)
        ),
        (
            [protocol.encode([protocol.OPEN, protocol.PROTOCOL_VERSION, {'mounts': [['/data', 'overlay', [['../escape', b'x', 0.0]], []]]}])],
            protocol.CLOSE_PROTOCOL,
            "the OPEN frame is malformed (a mount path '../escape' is not a plain relative path)",
        ),
        (
            [protocol.encode([protocol.OPEN, protocol.PROTOCOL_VERSION, {'mounts': [['/data', 'overlay', [], [['/etc', 0.0]]]]}])],
            protocol.CLOSE_PROTOCOL,
            "the OPEN frame is malformed (a mount path '/etc' is not a plain relative path)",
        ),
        (
            [protocol.encode([protocol.OPEN, protocol.PROTOCOL_VERSION, {'mounts': [['/data', 'overlay', [['a', b'x', 0.0], ['a/b', b'y', 0.0]], []]]}])],
            protocol.CLOSE_PROTOCOL,
            "the OPEN frame is malformed (the mount path 'a/b' cannot be written (File exists))",
        ),
        (
            [protocol.encode([protocol.OPEN, protocol.PROTOCOL_VERSION, {'mounts': [['/data', 'overlay', [['a', b'x', 0.0], ['a', b'y', 0.0]], []]]}])],
            protocol.CLOSE_PROTOCOL,
            "the OPEN frame is malformed (the mount path 'a' cannot be written (File exists))",
        ),
        (
            [protocol.encode([protocol.OPEN, protocol.PROTOCOL_VERSION, {'mounts': [['/data', 'read-write', [], []]]}])],
            protocol.CLOSE_ENDED,
            ('ValueError', "the read-write mount at /data cannot be served remotely (the server cannot write your files); use mode='overlay' or 'read-only'"),
        ),
        (
            [opening({'cpu_time': None})],
            protocol.CLOSE_ENDED,
            ('ValueError', "limits.cpu_time=None is over this server's ceiling of 600: a session of corral serve may lower its cpu_time, not raise or lift it"),
        ),
        (
            [opening({'memory': 2 * 1024**3})],
            protocol.CLOSE_ENDED,
            ('ValueError', "limits.memory=2147483648 is over this server's ceiling of 1073741824: a session of corral serve may lower its memory, not raise or lift it"),
        ),
        (
            [opening({'type_check_time': None})],
            protocol.CLOSE_ENDED,
            ('ValueError', "limits.type_check_time=None is over this server's ceiling of 10.0: a session of corral serve may lower its type_check_time, not raise or lift it"),
        ),
        # a limit that is no number of its kind, which passed the ceilings (NaN) or failed inside the server or worker
        (
            [opening({'wall_time': float('nan')})],
            protocol.CLOSE_ENDED,
            ('ValueError', 'Limits.wall_time must be from 0 to 9223372036854775807, not nan'),
        ),
        (
            [opening({'memory': float('nan')})],
            protocol.CLOSE_ENDED,
            ('TypeError', 'Limits.memory must be a whole number or None, not nan'),
        ),
        (
            [opening({'memory': -1})],
            protocol.CLOSE_ENDED,
            ('ValueError', 'Limits.memory must be from 0 to 9223372036854775807, not -1'),
        ),
        (
            [opening({'recursion': None})],
            protocol.CLOSE_ENDED,
            ('TypeError', 'Limits.recursion must be a whole number, not None'),
        ),
        (
            [opening({'wall_time': 'big'})],
            protocol.CLOSE_ENDED,
            ('TypeError', "Limits.wall_time must be a number or None, not 'big'"),
        ),
        (
            [opening({'grace': float('inf')})],
            protocol.CLOSE_ENDED,
            ('ValueError', 'Limits.grace must be from 0 to 9223372036854775807, not inf'),
        ),
        ([OPEN, protocol.encode([protocol.ANSWERS, [[5, 'ok', 1]]])], protocol.CLOSE_PROTOCOL, 'the client answered call 5, which the server never made'),
        ([OPEN, protocol.encode([99])], protocol.CLOSE_PROTOCOL, 'the client sent a frame of unknown kind 99'),
        ([OPEN, protocol.encode([protocol.FEED, 'x'])], protocol.CLOSE_PROTOCOL, 'the client sent a malformed frame (kind 2 with 2 items, expected 5)'),
        ([OPEN, protocol.encode([protocol.FEED, 'x', {'f': 'yes'}, {}, []])], protocol.CLOSE_PROTOCOL, 'the client sent a malformed frame (functions must map names to whether they are async)'),
    ],
)
async def test_a_malformed_frame_ends_the_connection_with_a_clear_error(server, frames, code, error):
    received, close_code = await exchange(server.url, *frames)
    assert (errors(received), close_code) == ([error if isinstance(error, tuple) else ('SandboxError', error)], code)


@pytest.mark.parametrize(
    ('answers', 'error'),
    [
        ([[0, 'maybe', 1]], "the client answered call 0 in an unknown way 'maybe'"),
        ([[0, 'error', 'boom']], 'the client sent a malformed error answer'),
        ([[0, 'ok']], 'the ANSWERS frame is malformed'),
        ([[0, 'ok', 1], [1, 'ok', 2]], 'the client answered call 1, which the server never made'),
        ([[0, 'ok', 1], [0, 'maybe', 2]], None),  # a second answer to a call is ignored, as an answer to a call already answered
    ],
)
async def test_answers_against_the_rules_end_the_connection_and_settle_no_call(server, answers, error):
    """Answers are taken as their frame is parsed, and only a frame whose every answer keeps the
    rules: one that breaks them goes to the request loop, which refuses it whole, so no call of
    it is answered (the feed's value never comes)."""
    async with connect(server.url + protocol.PATH, compression=None) as ws:
        await ws.send(OPEN)
        assert protocol.decode(await ws.recv())[0] == protocol.OPENED
        await ws.send(protocol.encode([protocol.FEED, 'await f()', {'f': True}, {}, []]))
        assert protocol.decode(await ws.recv()) == [protocol.EVENTS, [[protocol.CALL, 0, 'f', [], {}]]]
        await ws.send(protocol.encode([protocol.ANSWERS, answers]))
        if error is None:
            assert protocol.decode(await ws.recv()) == [protocol.RESULT, 1, None, []]
            return
        received = []
        with contextlib.suppress(ConnectionClosed):
            async for data in ws:
                received.append(protocol.decode(data))
    assert (errors(received), len(received), ws.close_code) == ([('SandboxError', error)], 1, protocol.CLOSE_PROTOCOL)


async def test_a_request_or_an_answer_sent_ahead_of_its_turn_is_refused(server):
    """The server takes a request and its answers as their frames are parsed: a second request
    sent behind the first, before its result, and an answer to a call the server has not made yet
    (the script computes first), are refused all the same, as a frame waiting for the request loop."""
    for ahead, error in (
        (protocol.encode([protocol.FEED, '1', {}, {}, []]), 'the client sent a request while another was running'),
        (protocol.encode([protocol.ANSWERS, [[0, 'ok', 1]]]), 'the client answered call 0, which the server never made'),
    ):
        async with connect(server.url + protocol.PATH, compression=None) as ws:
            await ws.send(OPEN)
            assert protocol.decode(await ws.recv())[0] == protocol.OPENED
            await ws.send(protocol.encode([protocol.FEED, 'sum(range(3_000_000))\nawait f()', {'f': True}, {}, []]))
            await ws.send(ahead)
            received = []
            with contextlib.suppress(ConnectionClosed):
                async for data in ws:
                    received.append(protocol.decode(data))
        assert (errors(received), ws.close_code) == ([('SandboxError', error)], protocol.CLOSE_PROTOCOL)


async def test_a_flood_of_stale_answers_while_a_call_waits_settles_nothing_but_its_own(server):
    """Answers to a call already answered are dropped as their frames are parsed; thousands of them
    while the next call waits change nothing, and that call's own answer settles it."""
    async with connect(server.url + protocol.PATH, compression=None) as ws:
        await ws.send(OPEN)
        assert protocol.decode(await ws.recv())[0] == protocol.OPENED
        await ws.send(protocol.encode([protocol.FEED, 'await f()', {'f': True}, {}, []]))
        assert protocol.decode(await ws.recv()) == [protocol.EVENTS, [[protocol.CALL, 0, 'f', [], {}]]]
        await ws.send(protocol.encode([protocol.ANSWERS, [[0, 'ok', 'first']]]))
        assert protocol.decode(await ws.recv()) == [protocol.RESULT, 'first', None, []]
        await ws.send(protocol.encode([protocol.FEED, 'x = await f()\n[x, await f()]', {'f': True}, {}, []]))
        assert protocol.decode(await ws.recv()) == [protocol.EVENTS, [[protocol.CALL, 1, 'f', [], {}]]]
        stale = protocol.encode([protocol.ANSWERS, [[0, 'ok', 'stale'], [0, 'error', ['ValueError', 'stale']]]])
        for _ in range(3000):
            await ws.send(stale)
        await ws.send(protocol.encode([protocol.ANSWERS, [[1, 'ok', 'second'], [0, 'ok', 'stale']]]))
        assert protocol.decode(await ws.recv()) == [protocol.EVENTS, [[protocol.CALL, 2, 'f', [], {}]]]
        for _ in range(3000):
            await ws.send(stale)
        await ws.send(protocol.encode([protocol.ANSWERS, [[2, 'ok', 'third']]]))
        assert protocol.decode(await ws.recv()) == [protocol.RESULT, ['second', 'third'], None, []]


async def test_a_small_answer_behind_a_large_one_is_not_taken_ahead_of_it(server):
    """A frame too large to take as it is parsed waits for the request loop; a small one behind it
    must wait too, not overtake it: the first answer to a call is the one that counts."""
    async with connect(server.url + protocol.PATH, compression=None, max_size=None) as ws:
        await ws.send(OPEN)
        assert protocol.decode(await ws.recv())[0] == protocol.OPENED
        code = 'import asyncio\na, b = await asyncio.gather(f(1), f(2))\n[len(a), b]'
        await ws.send(protocol.encode([protocol.FEED, code, {'f': True}, {}, []]))
        assert protocol.decode(await ws.recv()) == [protocol.EVENTS, [[protocol.CALL, 0, 'f', [1], {}], [protocol.CALL, 1, 'f', [2], {}]]]
        await ws.send(protocol.encode([protocol.ANSWERS, [[0, 'ok', 'x' * 200_000]]]))  # over the 64 KiB taken as parsed
        await ws.send(protocol.encode([protocol.ANSWERS, [[0, 'ok', 'second'], [1, 'ok', 'b']]]))
        assert protocol.decode(await ws.recv()) == [protocol.RESULT, [200_000, 'b'], None, []]


async def test_a_malformed_frame_from_the_server_ends_the_session_with_a_clear_error():
    """The client takes the server's frames as they are parsed: one it cannot decode ends the
    session with an error naming what was wrong, as when its reader found it."""
    from websockets.asyncio.server import serve

    async def handler(ws):
        await ws.recv()
        await ws.send(protocol.encode([protocol.OPENED, 'id', 7, protocol.MAX_FRAME, []]))
        await ws.recv()
        await ws.send(b'\x91\xc1')  # a list of a byte msgpack never uses
        with contextlib.suppress(ConnectionClosed):
            await ws.recv()

    async with serve(handler, '127.0.0.1', 0) as fake:
        port = fake.sockets[0].getsockname()[1]
        async with RemotePool(f'ws://127.0.0.1:{port}') as pool, pool.checkout() as session:
            assert session.random_seed == 7
            with pytest.raises(corral.SandboxError) as error:
                await session.feed_run('1 + 1')
            with pytest.raises(corral.SandboxError) as again:
                await session.feed_run('1 + 1')
    assert (type(error.value), str(error.value)) == (corral.SandboxError, 'the corral server sent a malformed frame (FormatError)')
    assert again.value is error.value


async def test_an_oversized_frame_is_refused_naming_the_limit(small_server):
    feed = protocol.encode([protocol.FEED, 'x = 1' + ' ' * 5000, {}, {}, []])
    received, close_code = await exchange(small_server.url, OPEN, feed)
    assert received[0][0] == protocol.OPENED
    assert (len(feed), errors(received), close_code) == (
        5013,
        [('SandboxError', "the client sent a frame of 5013 bytes, larger than the server's limit of 4096 bytes (corral serve --max-frame)")],
        protocol.CLOSE_TOO_LARGE,
    )
    async with RemotePool(small_server.url) as pool, pool.checkout() as session:  # the server goes on
        assert await session.feed_run('1 + 1') == 2
        with pytest.raises(ValueError) as too_large:
            await session.feed_run('x = 1' + ' ' * 5000)
    assert str(too_large.value) == "the request is 5013 bytes, larger than the corral server's limit of 4096 bytes"


async def test_a_host_result_over_the_frame_limit_is_an_error_in_the_script(small_server):
    async with RemotePool(small_server.url) as pool, pool.checkout() as session:
        with pytest.raises(corral.SandboxRuntimeError) as error:
            await session.feed_run('big()', external_lookup={'big': lambda: 'y' * 5000})
    assert error.value.message == "big() returned a value of type 'str' that cannot enter the sandbox: message of 5008 bytes is larger than the limit of 4032 bytes"


async def wait_until_free(pool: RemotePool, session_id: str) -> object:
    """Check out `session_id` as soon as its lease is free (bounded); the value of `x` in it."""
    deadline = asyncio.get_running_loop().time() + SETTLE_SECONDS
    while True:
        try:
            async with pool.checkout(session_id=session_id) as again:
                return await again.feed_run('x')
        except corral.SandboxSessionBusyError:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.1)


async def test_a_client_that_disconnects_mid_feed_leaves_its_session_stored_and_the_server_unaffected(server):
    async with connect(server.url + protocol.PATH, compression=None) as gone:
        await gone.send(protocol.encode([protocol.OPEN, protocol.PROTOCOL_VERSION, {'ephemeral': False}]))
        session_id = protocol.decode(await gone.recv())[1]
        await gone.send(protocol.encode([protocol.FEED, 'x = 1', {}, {}, []]))
        assert protocol.decode(await gone.recv()) == [protocol.RESULT, None, None, []]
        await gone.send(protocol.encode([protocol.FEED, 'x = 2\nawait wait_forever()', {'wait_forever': True}, {}, []]))
        assert protocol.decode(await gone.recv()) == [protocol.EVENTS, [[protocol.CALL, 0, 'wait_forever', [], {}]]]
    # it left without answering: its session ended, the feed it cut off undone
    async with RemotePool(server.url) as pool:
        assert await wait_until_free(pool, session_id) == 1
        async with pool.checkout() as other:
            assert await other.feed_run('sum(range(10))') == 45


@pytest.mark.slow
async def test_a_client_that_never_reads_is_cut_off_without_holding_up_others(small_server):
    options = {'ephemeral': False, 'limits': {'output': None, 'wall_time': 60.0}}
    async with connect(small_server.url + protocol.PATH, compression=None, max_size=None, max_queue=1) as slow:
        await slow.send(protocol.encode([protocol.OPEN, protocol.PROTOCOL_VERSION, options]))
        session_id = protocol.decode(await slow.recv())[1]
        await slow.send(protocol.encode([protocol.FEED, 'x = 1', {}, {}, []]))
        assert protocol.decode(await slow.recv()) == [protocol.RESULT, None, None, []]
        await slow.send(protocol.encode([protocol.FEED, "x = 2\nwhile True:\n    print('z' * 10000)", {}, {}, []]))
        # from now on it reads nothing; meanwhile, other clients are served
        async with RemotePool(small_server.url) as pool:
            for _ in range(20):
                async with pool.checkout() as other:
                    assert await other.feed_run('[i * i for i in range(5)]') == [0, 1, 4, 9, 16]
            assert await wait_until_free(pool, session_id) == 1  # cut off: its session ended, the stalled feed undone


async def test_a_script_that_stalls_does_not_stall_another_connection(server):
    async with RemotePool(server.url) as pool, pool.checkout(limits=Limits(wall_time=60)) as stalled:
        spinning = asyncio.ensure_future(stalled.feed_run('while True:\n    pass'))
        for index in range(20):
            async with pool.checkout() as other:
                assert await other.feed_run(f'{index} * 2') == index * 2
        assert not spinning.done()
        spinning.cancel()
        with pytest.raises(asyncio.CancelledError):
            await spinning


CATCH = 'try:\n    f()\nexcept Exception as error:\n    caught = (type(error).__name__, error.args)\ncaught'


@pytest.mark.parametrize(
    ('payload', 'caught'),
    [
        # a StopIteration cannot be raised into the server's future: the script sees PEP 479's RuntimeError
        (['StopIteration', ['x']], ('RuntimeError', ("the host function raised StopIteration('x')",))),
        (['StopIteration', []], ('RuntimeError', ('the host function raised StopIteration()',))),
        # an exception group cannot be made without its exceptions: an Exception with the args stands in
        (['ExceptionGroup', ['x']], ('Exception', ('x',))),
        (['BaseExceptionGroup', ['x']], ('Exception', ('x',))),
    ],
)
async def test_an_error_answer_of_a_class_no_future_can_hold_reaches_the_script(server, payload, caught):
    async with connect(server.url + protocol.PATH, compression=None, max_size=None) as ws:
        await ws.send(OPEN)
        assert protocol.decode(await ws.recv())[0] == protocol.OPENED
        await ws.send(protocol.encode([protocol.FEED, CATCH, {'f': False}, {}, []]))
        assert protocol.decode(await ws.recv()) == [protocol.EVENTS, [[protocol.CALL, 0, 'f', [], {}]]]
        await ws.send(protocol.encode([protocol.ANSWERS, [[0, 'error', payload]]]))
        assert protocol.decode(await ws.recv()) == [protocol.RESULT, caught, None, []]
        await ws.send(protocol.encode([protocol.FEED, '1 + 1', {}, {}, []]))  # the session goes on
        assert protocol.decode(await ws.recv()) == [protocol.RESULT, 2, None, []]


async def test_a_host_function_of_the_client_that_raises_stop_iteration_fails_in_the_script(server):
    def f():
        return next(iter([]))

    async with RemotePool(server.url) as pool, pool.checkout() as session:
        assert await session.feed_run(CATCH, external_lookup={'f': f}) == ('RuntimeError', ('the host function raised StopIteration()',))
        assert await session.feed_run('1 + 1') == 2


@pytest.mark.parametrize(
    ('limits', 'value'),
    [
        ({'value_items': None}, ('value_items', 'None', '1000000')),
        ({'value_items': 10**12}, ('value_items', '1000000000000', '1000000')),
        ({'value_size': None}, ('value_size', 'None', '67108864')),
        ({'value_size': 2**40}, ('value_size', '1099511627776', '67108864')),
        ({'code_size': None}, ('code_size', 'None', '131072')),
    ],
)
async def test_a_client_cannot_lift_the_bounds_on_the_values_the_server_decodes(server, limits, value):
    """A session may lower `value_items` and `value_size`, never raise or lift them: the server
    decodes its worker's values and its client's frames within them (with `value_items=None`, a
    feed of `[[]] * 8_000_000` grew the server by 580 MB)."""
    name, asked, ceiling = value
    received, close_code = await exchange(server.url, opening(limits))
    text = f"limits.{name}={asked} is over this server's ceiling of {ceiling}: a session of corral serve may lower its {name}, not raise or lift it"
    assert (errors(received), close_code) == ([('ValueError', text)], protocol.CLOSE_ENDED)


async def test_values_the_server_decodes_are_bounded_by_its_ceilings(server):
    """A result of 8 million items stays in the worker, and a client's frame of more items than the
    server's bound ends its connection, with the bound's own texts."""
    async with RemotePool(server.url) as pool, pool.checkout() as session:
        with pytest.raises(corral.SandboxLimitError) as info:
            await session.feed_run('x = [[]] * 8_000_000\nx')
        assert (str(info.value), info.value.limit) == (
            'OverflowError: the result has at least 8,000,000 items; at most 1,000,000 may leave the sandbox (the value_items limit)',
            'value_items',
        )
        assert await session.feed_run('len(x)') == 8_000_000
    async with connect(server.url + protocol.PATH, compression=None, max_size=None) as ws:
        await ws.send(OPEN)
        assert protocol.decode(await ws.recv())[0] == protocol.OPENED
        await ws.send(protocol.encode([protocol.FEED, 'f()', {'f': False}, {}, []]))
        assert protocol.decode(await ws.recv()) == [protocol.EVENTS, [[protocol.CALL, 0, 'f', [], {}]]]
        await ws.send(protocol.encode([protocol.ANSWERS, [[0, 'ok', [[[]] * 1000] * 1100]]]))
        assert protocol.decode(await ws.recv()) == [
            protocol.ERROR, 'SandboxError', 'the client sent a malformed frame (ValueLimitError: a message has more than 1,001,024 items)', {}, [],
        ]
        with pytest.raises(ConnectionClosed):
            await ws.recv()
        assert ws.close_code == protocol.CLOSE_PROTOCOL


@pytest.mark.slow
async def test_a_mount_of_many_files_is_written_without_holding_up_other_sessions(server):
    """A mount's files are written to disk off the event loop: while one connection's 100,000
    folders are made, another session opens and runs, and the mount arrives whole."""
    dirs = [[f'd{index}', 0.0] for index in range(99_999)]
    options = {'mounts': [['/data', 'read-only', [['d7/note.txt', b'kept', 0.0]], dirs]]}
    async with connect(server.url + protocol.PATH, compression=None, max_size=None) as big:
        await big.send(protocol.encode([protocol.OPEN, protocol.PROTOCOL_VERSION, options]))
        async with RemotePool(server.url) as pool, pool.checkout() as other:
            assert await other.feed_run('6 * 7') == 42
            opened = asyncio.ensure_future(big.recv())
            await asyncio.sleep(0)
            assert not opened.done()  # the big mount is still being written meanwhile
        assert protocol.decode(await opened)[0] == protocol.OPENED
        await big.send(protocol.encode([protocol.FEED, "import os\n(len(os.listdir('/data')), open('/data/d7/note.txt').read())", {}, {}, []]))
        assert protocol.decode(await big.recv()) == [protocol.RESULT, (99_999, 'kept'), None, []]


async def test_a_session_may_lower_the_limits_the_server_holds_to_a_ceiling(server):
    async with RemotePool(server.url) as pool, pool.checkout(limits=Limits(cpu_time=1, memory=512 * 1024**2, type_check_time=5.0)) as session:
        with pytest.raises(corral.SandboxLimitError) as info:
            await session.feed_run('total = 0\nwhile True:\n    total += 1')
        assert (info.value.limit, info.value.value) == ('cpu_time', 1)


async def test_connections_that_never_open_a_session_are_bounded_per_address_and_in_all(tmp_path):
    """Connections that have not sent OPEN count against `max_pending_per_address` (one client
    address) and `max_pending` (every address): past either, a connection is refused as it is
    accepted, with an error and a close reason saying which, and counted in the metrics. A
    connection stops counting once it sends OPEN (or ends)."""
    metrics = Metrics()
    pool = corral.Pool(warm_workers=0, observer=metrics)
    app = create_app(pool=pool, max_pending=3, max_pending_per_address=2)
    metrics.watch(app.state.corral)
    per_address = "too many connections from 127.0.0.1 wait to open a session (2, the server's limit per address); open fewer at once"
    in_all = "too many connections wait to open a session (3, the server's limit); try again later, or another replica"

    async def refused_at_accept(url: str, host: str) -> tuple[list[tuple[str, str]], int | None, str | None]:
        received = []
        async with connect(url + protocol.PATH, compression=None, local_addr=(host, 0)) as ws:
            with contextlib.suppress(ConnectionClosed):
                async for data in ws:
                    received.append(protocol.decode(data))
            return errors(received), ws.close_code, ws.close_reason

    async with serving_app(app, pool) as address:
        url = f'ws://{address}'
        async with contextlib.AsyncExitStack() as held:
            first = await held.enter_async_context(connect(url + protocol.PATH, compression=None))
            await held.enter_async_context(connect(url + protocol.PATH, compression=None))
            assert await refused_at_accept(url, '127.0.0.1') == ([('SandboxConnectionError', per_address)], protocol.CLOSE_BUSY, per_address)
            await held.enter_async_context(connect(url + protocol.PATH, compression=None, local_addr=('127.0.0.2', 0)))  # another address
            assert await refused_at_accept(url, '127.0.0.3') == ([('SandboxConnectionError', in_all)], protocol.CLOSE_BUSY, in_all)
            async with RemotePool(url) as remote:
                with pytest.raises(corral.SandboxConnectionError) as info:  # the application's to act on, not the model's
                    async with remote.checkout():
                        pass
                assert info.value.display() == per_address
            assert app.state.corral.pending == 3
            assert _metric(metrics, 'corral_connections_pending') == {(): 3.0}
            await first.send(OPEN)  # opened: it no longer counts as pending
            assert protocol.decode(await first.recv())[0] == protocol.OPENED
            assert app.state.corral.pending == 2
            async with RemotePool(url) as remote, remote.checkout() as session:
                assert await session.feed_run('1 + 1') == 2
        assert _metric(metrics, 'corral_connections_refused_total') == {
            (('reason', 'pending_per_address'),): 2.0,
            (('reason', 'pending_total'),): 1.0,
        }
        for _ in range(200):  # bounded: the server sees the held connections end
            if app.state.corral.pending == 0:
                break
            await asyncio.sleep(0.05)
        assert app.state.corral.pending == 0


def _metric(metrics: Metrics, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {tuple(sorted(sample.labels.items())): sample.value for family in metrics.registry.collect() for sample in family.samples if sample.name == name}


async def test_the_operator_sets_the_ceilings_of_the_limits_higher_or_lower(tmp_path):
    """`--max-limit NAME=VALUE`: memory's ceiling raised over the default, wall_time given one (2 s,
    lower than its default), cpu_time's lowered: a session may go up to each ceiling, not past
    it, and a limit it leaves at its default gets the ceiling where that is lower."""
    options = ('--max-limit', f'memory={2 * 1024**3}', '--max-limit', 'wall_time=2', '--max-limit', 'cpu_time=300')
    with running_server(tmp_path, *options) as server:
        for limits, error in [
            ({'memory': 3 * 1024**3}, "limits.memory=3221225472 is over this server's ceiling of 2147483648: a session of corral serve may lower its memory, not raise or lift it"),
            ({'wall_time': None}, "limits.wall_time=None is over this server's ceiling of 2.0: a session of corral serve may lower its wall_time, not raise or lift it"),
            ({'wall_time': 2.5}, "limits.wall_time=2.5 is over this server's ceiling of 2.0: a session of corral serve may lower its wall_time, not raise or lift it"),
            ({'cpu_time': 600}, "limits.cpu_time=600 is over this server's ceiling of 300: a session of corral serve may lower its cpu_time, not raise or lift it"),
        ]:
            received, close_code = await exchange(server.url, opening(limits))
            assert (errors(received), close_code) == ([('ValueError', error)], protocol.CLOSE_ENDED)
        async with RemotePool(server.url) as pool:
            with pytest.raises(ValueError) as info:
                async with pool.checkout(limits=Limits(memory=3 * 1024**3)):
                    pass
            assert str(info.value) == "limits.memory=3221225472 is over this server's ceiling of 2147483648: a session of corral serve may lower its memory, not raise or lift it"
            # up to the raised ceiling; the others left at their defaults get their lower ceilings
            async with pool.checkout(limits=Limits(memory=2 * 1024**3, host_calls=5)) as session:
                assert await session.feed_run('1 + 1') == 2  # opened: over the default's 1 GiB, under the ceiling
                with pytest.raises(corral.SandboxLimitError) as stopped:
                    await session.feed_run('while True:\n    pass')
                assert (stopped.value.limit, stopped.value.value) == ('wall_time', 2)
            async with pool.checkout() as session:  # no limits given: the server's defaults, under its ceilings
                with pytest.raises(corral.SandboxLimitError) as stopped:
                    await session.feed_run('while True:\n    pass')
                assert (stopped.value.limit, stopped.value.value) == ('wall_time', 2)
            async with pool.checkout(limits=Limits(wall_time=1.0)) as session:  # lowered further by the session
                with pytest.raises(corral.SandboxLimitError) as stopped:
                    await session.feed_run('while True:\n    pass')
                assert (stopped.value.limit, stopped.value.value) == ('wall_time', 1.0)
    assert 'Traceback' not in server.output()


def test_ceilings_of_unknown_limits_or_bad_values_are_refused():
    for max_limits, text in [
        ({'colour': 3}, "unknown limit 'colour' for a ceiling; the limits are the fields of corral.Limits: wall_time, memory, cpu_time, recursion, host_calls, output, code_size, stub_size, type_check_time, type_check_memory, value_items, value_size, grace"),
        ({'memory': 1.5}, 'the ceiling of memory must be a whole number of 0 or more, not 1.5'),
        ({'wall_time': -1}, 'the ceiling of wall_time must be a number of 0 or more, not -1'),
        ({'wall_time': float('nan')}, 'the ceiling of wall_time must be a number of 0 or more, not nan'),
        ({'cpu_time': None}, 'the ceiling of cpu_time must be a whole number of 0 or more, not None'),
        ({'memory': 10**30}, 'the ceiling of memory is out of range: Limits.memory must be from 0 to 9223372036854775807, not 1000000000000000000000000000000'),
        ({'recursion': 0}, 'the ceiling of recursion is out of range: Limits.recursion must be from 1 to 9223372036854775807, not 0'),
    ]:
        with pytest.raises(ValueError) as info:
            create_app(pool=corral.Pool(warm_workers=0), max_limits=max_limits)
        assert str(info.value) == text


async def test_an_ephemeral_session_keeps_no_more_of_its_scripts_than_the_servers_max_state_bytes():
    """Every script an ephemeral session ran is kept with what came into it (to type-check the
    next, to park it as its state): 20 feeds of an 8 MiB comment, `code_size` lifted, grew the
    server by 176 MB, and feeds of 128 KiB as many times as a client sent them, without bound."""
    pool = corral.Pool(warm_workers=0, max_state_bytes=1 << 20)
    async with serving_app(create_app(pool=pool), pool) as address, RemotePool(f'ws://{address}') as remote:
        async with remote.checkout() as session:
            script = '#' + 'a' * 100_000 + '\n1'
            ran = 0
            with pytest.raises(corral.SandboxStateError) as info:
                for _ in range(20):  # each keeps 200 KB: 20 would keep 4 MB
                    assert await session.feed_run(script) == 1
                    ran += 1
            assert (ran, str(info.value)) == (
                6,
                'this session keeps 1,201,206 bytes of scripts and what came into them, more than the 1,048,576 (max_state_bytes) '
                'a session of this server may keep: it runs no more feeds; open a new session',
            )
        async with remote.checkout() as session:  # a new session runs
            assert await session.feed_run('1 + 1') == 2
        async with remote.checkout(ephemeral=False) as session:  # a stored one is bounded by its own stops
            assert await session.feed_run(script) == 1
