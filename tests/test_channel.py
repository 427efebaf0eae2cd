"""The channel and the value codec, under generated and hostile input.

A worker is untrusted: whatever bytes it sends, the host reports an error for that session and
never crashes or hangs. The "worker" here is the test itself, on the far end of a socketpair.
"""

import asyncio
import datetime
import struct

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import corral
from corral.channel import CALL, DONE, FAIL, OUTPUT, WAIT, FrameReader, ProtocolError, frame, idle, poll_readable
from corral.values import MAX_FRAME, pack, unpack
from security.helpers import fake_worker_session

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(), st.binary(),
    st.datetimes(), st.dates(), st.times(), st.timedeltas(),
    st.datetimes(timezones=st.just(datetime.timezone.utc)),
    st.decimals(allow_nan=False), st.uuids(),
)
hashables = st.recursive(scalars, lambda inner: st.one_of(st.tuples(inner, inner), st.frozensets(inner, max_size=3)), max_leaves=8)
boundary_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(hashables, inner, max_size=4),
        st.sets(hashables, max_size=4),
        st.frozensets(hashables, max_size=4),
    ),
    max_leaves=20,
)


@given(boundary_values)
@pytest.mark.slow
def test_every_boundary_value_round_trips_with_its_exact_type(value):
    for side in ('host', 'sandbox'):
        decoded = unpack(pack(value, side=side))
        assert decoded == value
        assert _types(decoded) == _types(value)


def _types(value):
    if isinstance(value, (list, tuple)):
        return (type(value), [_types(item) for item in value])
    if isinstance(value, dict):
        return (dict, sorted((repr(_types(k)), repr(_types(v))) for k, v in value.items()))
    return type(value)


@pytest.mark.parametrize(
    ('code', 'data', 'message'),
    [
        (10, b'1.2.3', 'malformed Decimal in a frame'),
        (10, b'\xff', 'malformed Decimal in a frame'),
        (11, b'short', 'bytes is not a 16-char string'),
        (8, b'\x00', 'malformed timedelta or time zone in a frame'),  # found by hypothesis: it raised struct.error
        (9, b'', 'malformed timedelta or time zone in a frame'),
        (8, b'\x7f\xff\xff\xff' + bytes(8), 'malformed timedelta or time zone in a frame'),  # past timedelta's days: OverflowError
    ],
    ids=['decimal-syntax', 'decimal-bytes', 'uuid-length', 'timedelta-short', 'timezone-empty', 'timedelta-days'],
)
def test_a_malformed_extension_is_a_value_error(code, data, message):
    with pytest.raises(ValueError, match=message):
        unpack(msgpack.packb(msgpack.ExtType(code, data)))


@given(st.lists(st.binary(max_size=50), max_size=10), st.data())
def test_frames_survive_any_chunking(payloads, data):
    stream = b''.join(frame(p) for p in payloads)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    reader = FrameReader()
    received = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)]):
        received.extend(reader.feed(stream[start:end]))
    assert received == payloads and reader.pending == 0


async def test_a_loop_is_idle_with_nothing_but_cancelled_handles_to_run():
    loop = asyncio.get_running_loop()
    await asyncio.sleep(0)
    assert idle(loop)
    handle = loop.call_soon(lambda: None)
    assert not idle(loop)
    handle.cancel()
    assert idle(loop)  # a side may poll: nothing waits for the loop
    assert not idle(object())  # a loop whose queue cannot be seen is never held up


def test_a_socket_is_polled_until_it_is_readable_or_the_time_passes():
    import socket
    import time

    left, right = socket.socketpair()
    with left, right:
        started = time.perf_counter()
        assert poll_readable(left.fileno(), 0.01) is False
        assert time.perf_counter() - started >= 0.01
        right.send(b'x')
        assert poll_readable(left.fileno(), 10.0) is True


def test_an_oversized_frame_is_refused_before_it_is_buffered():
    reader = FrameReader(max_frame=100)
    with pytest.raises(ProtocolError, match='frame of 101 bytes announced, larger than the limit of 100 bytes'):
        reader.feed(struct.pack('>I', 101))
    with pytest.raises(ProtocolError, match='larger than the limit'):
        frame(b'x' * (MAX_FRAME + 1))


@given(st.binary(max_size=200))
def test_unpack_of_garbage_raises_a_value_error_or_returns_plain_data(data):
    try:
        unpack(data)
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, UnicodeDecodeError, OverflowError):
        pass


@pytest.fixture
async def fake_worker(pool):
    async with fake_worker_session(pool, wall_time=5) as session_and_worker:
        yield session_and_worker


def _message(*items):
    return frame(msgpack.packb(list(items)))


HOSTILE = {
    'not msgpack': frame(b'\xc1\xc1\xc1'),
    'not a list': frame(msgpack.packb({'a': 1})),
    'empty list': frame(msgpack.packb([])),
    'unknown kind': _message(99, 1),
    'short CALL': _message(CALL, 1),
    'CALL with a bad name': _message(CALL, 1, 5, [], {}),
    'OUTPUT of bytes': _message(OUTPUT, 'stdout', b'x'),
    'OUTPUT to a bad stream': _message(OUTPUT, 'tty', 'x'),
    'FAIL of numbers': _message(FAIL, 1, 2, 3, 4, None),
    'FAIL without its detail': _message(FAIL, 'runtime', 'ValueError', 'm', 'ValueError: m'),
    'FAIL with a detail of objects': _message(FAIL, 'runtime', 'ValueError', 'm', 'ValueError: m', ['json.decoder', {'doc': [1]}]),
    'FAIL with a detail of no module': _message(FAIL, 'runtime', 'ValueError', 'm', 'ValueError: m', [None, None]),
    'DONE with extra items': _message(DONE, 1, None, 2),
    'DONE with a repr that is not text': _message(DONE, 1, 2),
    'unknown extension type': frame(msgpack.packb([DONE, msgpack.ExtType(77, b'')])),
    'oversized frame header': struct.pack('>I', MAX_FRAME + 1),
    'deep nesting': frame(b'\x91' * 100_000 + b'\xc0'),
    'WAIT with a text timeout': _message(WAIT, 'soon'),
    'WAIT with a negative timeout': _message(WAIT, -1.0),
    'a second WAIT before its answer': _message(WAIT, None) + _message(WAIT, None),
    'CALL with an id out of order': _message(CALL, 7, 'f', [], {}),
}


@pytest.mark.parametrize('data', HOSTILE.values(), ids=HOSTILE.keys())
async def test_a_malformed_message_ends_the_session_with_a_clear_error(fake_worker, data):
    session, worker = fake_worker
    feed = asyncio.ensure_future(session.feed_run('1'))
    await asyncio.sleep(0.01)
    worker.sendall(data)
    with pytest.raises(corral.SandboxWorkerError) as info:
        await asyncio.wait_for(feed, 5)
    assert info.value.display().startswith('the sandbox worker stopped: it sent a malformed message (')
    assert info.value.display().endswith('); check out a new session')


async def test_a_truncated_frame_then_exit_is_reported(fake_worker):
    session, worker = fake_worker
    feed = asyncio.ensure_future(session.feed_run('1'))
    await asyncio.sleep(0.01)
    worker.sendall(struct.pack('>I', 50) + b'abc')
    worker.close()
    with pytest.raises(corral.SandboxWorkerError) as info:
        await asyncio.wait_for(feed, 5)
    assert info.value.display() == 'the sandbox worker stopped: the worker process exited; check out a new session'


async def test_a_message_outside_a_feed_ends_the_session(fake_worker):
    session, worker = fake_worker
    worker.sendall(_message(DONE, 1, None))
    await asyncio.sleep(0.05)
    with pytest.raises(corral.SandboxWorkerError) as info:
        await session.feed_run('1')
    assert info.value.display() == (
        "this session cannot run scripts: it sent a malformed message (ProtocolError: message of kind 5 outside a feed); "
        'check out a new session'
    )


async def test_a_worker_that_goes_silent_hits_the_wall_time_limit(fake_worker):
    session, worker = fake_worker
    session.limits = corral.Limits(wall_time=0.2)
    with pytest.raises(corral.SandboxLimitError):
        await session.feed_run('1')


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(garbage=st.binary(min_size=1, max_size=300))
@pytest.mark.slow
async def test_random_bytes_from_a_worker_never_crash_or_hang_the_host(pool, garbage):
    async with fake_worker_session(pool, wall_time=0.3) as (session, worker):
        feed = asyncio.ensure_future(session.feed_run('1'))
        await asyncio.sleep(0)
        worker.sendall(garbage)
        try:
            await asyncio.wait_for(feed, 5)
        except corral.SandboxError:
            pass
