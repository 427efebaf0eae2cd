"""Stored sessions: dump and load, pause and resume, the store, and states refused."""

import asyncio
import hashlib
import hmac
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import msgpack
import pytest

import corral
from corral.host.journal import FORMAT_VERSION
from security.helpers import fake_worker_session


KEY = b'test-state-key-0123456789abcdef!'
CHILD = str(Path(__file__).parent / 'child.py')


@pytest.fixture
async def pool(tmp_path):
    async with corral.Pool(state_key=KEY, store=f'sqlite:///{tmp_path}/store.db') as pool:
        yield pool


def child(*args: str, stdin: str | None = None) -> list[str]:
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, CHILD, *args], input=stdin, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


SETUP = '''
import asyncio, json, random, uuid
from dataclasses import dataclass

@dataclass
class Point:
    x: int
    y: int
    def norm(self):
        return abs(self.x) + abs(self.y)

def counter():
    n = 0
    def step():
        nonlocal n
        n += 1
        return n
    return step

def numbers():
    yield 1
    yield 2
    yield 3

tick = counter()
tick()
gen = numbers()
first = next(gen)
token = uuid.uuid4().hex
r = random.random()
fetched = await asyncio.gather(fetch(1), fetch(2), fetch(3))
'''

REST = '(Point(1, -2).norm(), tick(), next(gen), token == token, random.random(), uuid.uuid4().hex, fetched, json.dumps({"a": 1}))'


async def fetch(n):
    await asyncio.sleep(0.01 * (4 - n))  # replies arrive last-called first
    return n * 10


async def test_a_loaded_session_has_every_variable_function_class_and_import_and_goes_on_as_the_original(pool):
    async with pool.checkout(random_seed=7) as original:
        await original.feed_run(SETUP, external_lookup={'fetch': fetch})
        state = await original.dump()
        expected = await original.feed_run(REST)
    async with pool.checkout() as loaded:
        await loaded.load_session(state)
        assert loaded.random_seed == 7
        assert await loaded.feed_run(REST) == expected
    assert expected[:4] == (3, 2, 2, True) and expected[6:] == ([10, 20, 30], '{"a": 1}')


async def test_loading_one_state_twice_gives_two_independent_sessions(pool):
    async with pool.checkout() as original:
        await original.feed_run('items = [1]')
        state = await original.dump()
    async with pool.checkout() as a, pool.checkout() as b:
        await a.load_session(state)
        await b.load_session(state)
        await a.feed_run('items.append(2)')
        assert await a.feed_run('items') == [1, 2]
        assert await b.feed_run('items') == [1]


async def test_no_host_function_runs_again_on_load(pool):
    calls = []

    def record(n):
        calls.append(n)
        return n

    async with pool.checkout() as original:
        await original.feed_run('a = record(1)\nb = record(2)', external_lookup={'record': record})
        state = await original.dump()
    async with pool.checkout() as loaded:
        await loaded.load_session(state)
        assert await loaded.feed_run('a + b') == 3
    assert calls == [1, 2]


async def test_a_feed_that_failed_part_way_keeps_its_partial_effects_after_a_load(pool):
    async with pool.checkout() as original:
        with pytest.raises(corral.SandboxRuntimeError):
            await original.feed_run('done = 1\nraise ValueError("half way")\nnever = 2')
        state = await original.dump()
    async with pool.checkout() as loaded:
        await loaded.load_session(state)
        assert await loaded.feed_run('done') == 1
        with pytest.raises(corral.SandboxRuntimeError, match="name 'never' is not defined"):
            await loaded.feed_run('never')


async def test_sleeps_wait_for_timeouts_and_replies_in_any_order_replay_exactly(pool):
    async def slow(n, delay):
        await asyncio.sleep(delay)
        return n

    code = '''
import asyncio
order = []
async def job(n, delay):
    order.append(await slow(n, delay))
async def late():
    await asyncio.sleep(0.03)
    order.append('timer')
await asyncio.gather(job(1, 0.05), job(2, 0.0), late(), job(3, 0.02))
try:
    await asyncio.wait_for(slow(4, 1.0), timeout=0.02)
    timed_out = False
except TimeoutError:
    timed_out = True
(order, timed_out)
'''
    async with pool.checkout() as original:
        result = await original.feed_run(code, external_lookup={'slow': slow})
        state = await original.dump()
    assert sorted(map(str, result[0])) == ['1', '2', '3', 'timer'] and result[1] is True  # the live order is the machine's
    async with pool.checkout() as loaded:
        await loaded.load_session(state)
        assert await loaded.feed_run('(order, timed_out)') == result


async def test_overlay_writes_come_back_and_other_mounts_must_be_given_again(pool, tmp_path):
    data = tmp_path / 'data'
    data.mkdir()
    (data / 'in.txt').write_text('host')
    out = tmp_path / 'out'
    out.mkdir()
    mounts = [corral.Mount(data, '/data'), corral.Mount(out, '/out', mode='read-write')]
    async with pool.checkout(mounts=mounts) as original:
        await original.feed_run('open("/data/new.txt", "w").write("overlay")\nopen("/out/o.txt", "w").write("host side")')
        state = await original.dump()
    assert (out / 'o.txt').read_text() == 'host side' and not (data / 'new.txt').exists()
    async with pool.checkout(mounts=mounts) as loaded:
        await loaded.load_session(state)
        assert await loaded.feed_run('[open("/data/new.txt").read(), open("/data/in.txt").read()]') == ['overlay', 'host']
    async with pool.checkout(mounts=mounts[:1]) as missing:
        with pytest.raises(corral.SandboxStateError) as info:
            await missing.load_session(state)
    assert str(info.value) == (
        "the session state uses the read-write mount at /out, which this checkout does not have: "
        "pass checkout(mounts=Mount(<host folder>, '/out', mode='read-write'))"
    )


async def test_a_deferred_call_pauses_the_feed_and_resume_goes_on_without_calling_anything_twice(pool):
    calls = []

    async def fetch(n):
        calls.append(n)
        await asyncio.sleep(0.01)
        return n * 10

    def approve(what):
        calls.append(what)
        raise corral.Deferred({'approve': what})

    tools = {'fetch': fetch, 'approve': approve}
    code = 'import asyncio\nbefore = await fetch(1)\nboth = await asyncio.gather(fetch(2), approve_async("send"))\n[before, both, await fetch(3)]'

    async def approve_async(what):
        approve(what)

    tools['approve_async'] = approve_async
    async with pool.checkout() as session:
        with pytest.raises(corral.SandboxPaused) as info:
            await session.feed_run(code, external_lookup=tools)
        assert info.value.calls == [corral.PendingCall(call_id=2, function='approve_async', args=['send'], kwargs={}, payload={'approve': 'send'})]
        assert str(info.value) == 'the script is paused waiting on approve_async() [call 2]; answer with session.resume()'
        assert session.paused
        state = await session.dump()
        with pytest.raises(RuntimeError, match='paused'):
            await session.feed_run('1')
        assert await session.resume({2: 'sent'}) == [10, [20, 'sent'], 30]
    assert calls == [1, 2, 'send', 3]
    async with pool.checkout() as loaded:  # the same pause, answered with an error this time
        await loaded.load_session(state)
        assert loaded.paused
        with pytest.raises(corral.SandboxRuntimeError) as failed:
            await loaded.resume(errors={2: PermissionError('denied by a person')}, external_lookup=tools)
        assert failed.value.display().endswith('PermissionError: denied by a person')
        assert await loaded.feed_run('before') == 10
    assert calls == [1, 2, 'send', 3]


async def test_a_sync_deferred_call_and_a_second_pause(pool):
    asked = []

    def approve(what):
        asked.append(what)
        raise corral.Deferred()

    async with pool.checkout() as session:
        with pytest.raises(corral.SandboxPaused) as first:
            await session.feed_run('a = approve("one")\nb = approve("two")\n[a, b]', external_lookup={'approve': approve})
        (call,) = first.value.calls
        with pytest.raises(corral.SandboxPaused) as second:
            await session.resume({call.call_id: 1})
        assert [c.args for c in second.value.calls] == [['two']]
        state = await session.dump()
    async with pool.checkout() as loaded:
        await loaded.load_session(state)
        with pytest.raises(KeyError):
            await loaded.resume({call.call_id: 1})
        assert await loaded.resume({second.value.calls[0].call_id: 2}) == [1, 2]
    assert asked == ['one', 'two']


async def test_stored_sessions_resume_by_id_fork_and_refuse_a_second_holder(pool):
    async with pool.checkout(ephemeral=False) as session:
        session_id = session.session_id
        assert isinstance(session_id, str)
        await session.feed_run('x = 1')
        with pytest.raises(corral.SandboxSessionBusyError):
            async with pool.checkout(session_id=session_id):
                pass
        async with pool.checkout(session_id=session_id, fork=True) as fork:
            assert fork.session_id != session_id
            await fork.feed_run('x = 100')
    async with pool.checkout(session_id=session_id) as resumed:
        assert resumed.session_id == session_id
        assert await resumed.feed_run('x') == 1
        await resumed.feed_run('x += 1')
    async with pool.checkout(session_id=session_id) as again:
        assert await again.feed_run('x') == 2
    async with pool.checkout(session_id=fork.session_id) as forked:
        assert await forked.feed_run('x') == 100
    with pytest.raises(corral.SandboxStateError) as info:
        async with pool.checkout(session_id='nope'):
            pass
    assert str(info.value) == "no stored session with id 'nope'"


async def test_a_stored_feed_stopped_by_wall_time_is_undone_and_an_ephemeral_one_cannot_be_dumped(pool):
    limits = corral.Limits(wall_time=0.3)
    async with pool.checkout(ephemeral=False, limits=limits) as stored:
        await stored.feed_run('x = 1')
        with pytest.raises(corral.SandboxLimitError):
            await stored.feed_run('x = 2\nwhile True:\n    pass')
        assert await stored.feed_run('x') == 1
    async with pool.checkout(limits=limits) as ephemeral:
        with pytest.raises(corral.SandboxLimitError):
            await ephemeral.feed_run('x = 2\nwhile True:\n    pass')
        with pytest.raises(corral.SandboxStateError) as info:
            await ephemeral.dump()
    assert str(info.value) == (
        'this session cannot be dumped: feed 1 was stopped by the wall_time limit at a point no replay can reproduce, '
        'so its state would not replay exactly'
    )


async def test_the_replay_after_a_stopped_feed_counts_in_cpu_seconds(pool):
    """The new worker that replays the journal counted from 0 again: `cpu_seconds` fell back, and
    a server's CPU quota (which counts what it grew by) counted neither the replay nor what
    followed until it was past the old worker's reading."""
    burn = 'total = 0\nfor i in range(1_500_000):\n    total += i\ntotal'
    async with pool.checkout(ephemeral=False, limits=corral.Limits(wall_time=2)) as stored:
        assert await stored.feed_run(burn) == sum(range(1_500_000))
        fed = stored.cpu_seconds
        assert fed > 0.05
        with pytest.raises(corral.SandboxLimitError):
            await stored.feed_run('while True:\n    pass')
        stopped = stored.cpu_seconds
        assert stopped > fed + 0.2  # the loop's CPU, and the journal's replayed in a new worker
        assert stored._ended_cpu > fed  # the stopped worker's reading, counted on
        assert await stored.feed_run('total') == sum(range(1_500_000))
        assert stored.cpu_seconds >= stopped


async def test_a_feed_stopped_by_a_limit_its_steps_reach_replays_to_the_same_point(pool):
    limits = corral.Limits(host_calls=2)
    async with pool.checkout(limits=limits) as original:
        with pytest.raises(corral.SandboxLimitError):
            await original.feed_run('got = []\nfor i in range(5):\n    got.append(f(i))', external_lookup={'f': lambda i: i})
        state = await original.dump()
    async with pool.checkout(limits=limits) as loaded:
        await loaded.load_session(state)
        assert await loaded.feed_run('got') == [0, 1]


async def test_checkout_options_of_stored_sessions_are_checked(pool):
    with pytest.raises(ValueError) as info:
        pool.checkout(session_id='abc', ephemeral=True)
    assert str(info.value) == 'a session_id names a stored session: do not pass ephemeral=True with it'
    with pytest.raises(ValueError) as info:
        pool.checkout(fork=True)
    assert str(info.value) == 'fork=True needs the session_id of the stored session to fork'
    async with pool.checkout() as session:
        assert session.session_id is None
        await session.feed_run('x = 1')
        with pytest.raises(RuntimeError) as runtime:
            await session.load_session(await session.dump())
    assert str(runtime.value) == 'load_session needs a freshly checked-out session; this one has run feeds'


async def test_time_monotonic_and_perf_counter_come_back_the_same_after_a_load(pool):
    async with pool.checkout() as original:
        await original.feed_run('import time\nstamps = [time.monotonic(), time.perf_counter_ns()]\ntime.sleep(0.01)\nstamps.append(time.perf_counter())')
        state = await original.dump()
        stamps = await original.feed_run('stamps')
    assert stamps[2] - stamps[0] >= 0.01
    async with pool.checkout() as loaded:
        await loaded.load_session(state)
        assert await loaded.feed_run('stamps') == stamps


# ----- states refused --------------------------------------------------------------------------

async def dumped(pool, code='x = 1'):
    async with pool.checkout() as session:
        await session.feed_run(code)
        return await session.dump()


async def load_error(pool, state, **options):
    async with pool.checkout(**options) as session:
        with pytest.raises(corral.SandboxStateError) as info:
            await session.load_session(state)
        return str(info.value)


def resign(body_state: bytes, version: int = FORMAT_VERSION, key: bytes = KEY) -> bytes:
    head = struct.pack('>8sHI', b'CORRAL\x00S', version, len(body_state))
    return head + body_state + hmac.new(key, head + body_state, hashlib.sha256).digest()


async def test_tampered_truncated_oversized_foreign_and_wrong_version_states_are_refused(pool, tmp_path):
    state = await dumped(pool)
    body = state[14:-32]
    tampered = bytearray(state)
    tampered[20] ^= 1
    assert await load_error(pool, bytes(tampered)) == (
        "the session state was altered, or signed with another key: its signature does not match this pool's state key"
    )
    assert await load_error(pool, state[:-5]) == f'the session state is truncated: {len(state) - 5} of its {len(state)} bytes'
    assert await load_error(pool, state[:9]) == 'the session state is truncated: 9 bytes, shorter than its header'
    assert await load_error(pool, state + b'x') == 'the session state was altered: 1 bytes follow its signature'
    assert await load_error(pool, b'{"x": 1}') == 'these bytes are not a corral session state (they do not start with its magic bytes)'
    assert await load_error(pool, resign(body, version=FORMAT_VERSION + 1)) == (
        f'the session state has format version {FORMAT_VERSION + 1}; this corral reads version {FORMAT_VERSION} only'
    )
    module = corral.ExternalModule({'f': lambda: 1}, stubs='def f() -> int: ...')
    assert await load_error(pool, state, external_modules={'tools': module}) == (
        "the session state was made for other host functions: the names and stubs of this pool's external functions "
        'and modules (type_check_stubs, external_modules) differ from those it was dumped with'
    )
    async with corral.Pool(state_key=b'another-key-0123456789abcdef', max_state_bytes=len(state) - 1) as other:
        assert await load_error(other, state) == (
            f'the session state is {len(state)} bytes, over the quota of {len(state) - 1} bytes (Pool(max_state_bytes=...)); it was not loaded'
        )
        async with other.checkout() as session:
            await session.feed_run('x = "y" * 1000')
            with pytest.raises(corral.SandboxStateError, match=r'^the session state is \d+ bytes, over the quota of \d+ bytes .*it was not dumped$'):
                await session.dump()
    # signed with the right key but malformed inside: refused, never executed
    assert await load_error(pool, resign(msgpack.packb({'feeds': 'nope'}))) == "the session state is malformed ('fingerprint')"


async def test_a_signed_record_that_does_not_replay_is_refused(pool):
    state = await dumped(pool, 'x = 1')
    plain = msgpack.unpackb(state[14:-32])
    plain['feeds'][0][4] = ['f']  # the record claims a host call the script never makes
    assert await load_error(pool, resign(msgpack.packb(plain))) == (
        'the session state could not be replayed: feed 1 went another way than the recorded run: '
        'its host calls, waits, output or value differ from the record'
    )
    async with pool.checkout() as session:
        await session.feed_run('x = f()', external_lookup={'f': lambda: 1})
        state = await session.dump()
    plain = msgpack.unpackb(state[14:-32])
    plain['feeds'][0][4] = ['g']
    assert await load_error(pool, resign(msgpack.packb(plain))) == (
        'the session state could not be replayed: feed 1 went another way than the recorded run: call 0 is to f() where the record has g()'
    )


async def test_a_replay_refused_at_one_feed_with_later_feeds_sent_ahead_ends_its_worker(pool):
    """The worker gets a replay's feeds ahead of their turn, and a batched feed sends its requests
    when it waits or ends: a record that goes another way in its second feed of four (a call it
    does not make, or fewer answers than the feed takes) is refused at that feed, with the
    request that went another way, and the worker that had the later feeds ends with the load."""
    async with pool.checkout() as session:
        for code in ('a = 1', 'b = f()', 'c = f() + f()', 'd = 4'):
            await session.feed_run(code, external_lookup={'f': lambda: 2})
        state = await session.dump()
    plain = msgpack.unpackb(state[14:-32])
    plain['feeds'][2][4] = ['f', 'g']
    assert await load_error(pool, resign(msgpack.packb(plain))) == (
        'the session state could not be replayed: feed 3 went another way than the recorded run: call 2 is to f() where the record has g()'
    )
    plain = msgpack.unpackb(state[14:-32])
    plain['feeds'][1][3] = []  # the answer of b's call left out: the worker reads feed 3's messages in its place
    async with pool.checkout() as session:
        with pytest.raises(corral.SandboxStateError) as info:
            await session.load_session(resign(msgpack.packb(plain)))
        assert str(info.value) == (
            'the session state could not be replayed: feed 2 went another way than the recorded run: it asked for a reply to call 0 past the end of the record'
        )
        with pytest.raises(corral.SandboxWorkerError) as info:
            await session.feed_run('1')
        assert str(info.value) == (
            'this session cannot run scripts: its replay went another way than the recorded run: '
            'it asked for a reply to call 0 past the end of the record; check out a new session'
        )
    async with pool.checkout() as loaded:  # and the record as it was replays whole
        await loaded.load_session(state)
        assert await loaded.feed_run('[a, b, c, d]') == [1, 2, 4, 4]


async def test_replayed_feeds_whose_replies_go_together_are_each_checked_in_their_turn(pool):
    """A worker holds the replies of replayed feeds that run one after another (the next feed's
    messages came ahead) and sends them in one write: each feed is still checked against its own
    record, a record altered late in a run of short feeds is refused at its feed, and a feed that
    runs longer than the replies are held (a loop of half a million steps) sends those before it."""
    codes = [f'v{i} = await asyncio.gather(f({i}), f({i + 1}))' for i in range(12)]
    codes[5] = 'n = 0\nfor i in range(500_000):\n    n += i\nv5 = [await f(5), await f(6)]'
    async def f(n):
        return n * 10

    async with pool.checkout() as session:
        await session.feed_run('import asyncio')
        for code in codes:
            await session.feed_run(code, external_lookup={'f': f})
        state = await session.dump()
    async with pool.checkout() as loaded:
        await loaded.load_session(state)
        assert await loaded.feed_run('[v0, v5, v11]') == [[0, 10], [50, 60], [110, 120]]
    for feed, call in ((3, 3), (8, 13), (13, 23)):  # feed 1 is the import, 7 the loop
        plain = msgpack.unpackb(state[14:-32])
        plain['feeds'][feed - 1][4] = ['f', 'g']
        assert await load_error(pool, resign(msgpack.packb(plain))) == (
            f'the session state could not be replayed: feed {feed} went another way than the recorded run: call {call} is to f() where the record has g()'
        )


# ----- across processes --------------------------------------------------------------------------

async def test_a_state_loads_in_another_process(pool, tmp_path):
    async with pool.checkout() as session:
        await session.feed_run(SETUP, external_lookup={'fetch': fetch})
        (tmp_path / 'state').write_bytes(await session.dump())
        expected = await session.feed_run(REST)
    pool._state_key_option = KEY
    lines = child('load', str(tmp_path / 'state'), REST)
    assert lines == [repr(expected), 'calls []']


async def test_a_paused_call_resumes_in_another_process_without_calling_anything_twice(tmp_path):
    async with corral.Pool(state_key=KEY) as pool, pool.checkout() as session:
        async def fetch(n):
            return n * 10

        def approve(what):
            raise corral.Deferred({'approve': what})

        with pytest.raises(corral.SandboxPaused):
            await session.feed_run('a = await fetch(1)\nb = approve("send")\nc = await fetch(2)\n[a, b, c]', external_lookup={'fetch': fetch, 'approve': approve})
        (tmp_path / 'state').write_bytes(await session.dump())
    assert child('resume', str(tmp_path / 'state'), 'yes') == ["[10, 'yes', 20]", "calls ['fetch 2']"]


@pytest.mark.slow
def test_a_stored_session_survives_its_host_process_killed_between_feeds(tmp_path):
    store = str(tmp_path / 'store.db')
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join(sys.path)}
    process = subprocess.Popen([sys.executable, CHILD, 'feeds', store], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    session_id = process.stdout.readline().strip()
    process.stdin.write('import random\\nx = [await fetch(1), random.random()]\n')
    process.stdin.flush()
    assert process.stdout.readline() == f'{session_id} None\n'
    process.send_signal(signal.SIGKILL)  # between feeds: no close, no release of the lease
    process.wait()

    async def check_out():
        async with corral.Pool(state_key=KEY, store=f'sqlite:///{store}') as pool:
            with pytest.raises(corral.SandboxSessionBusyError):  # the dead holder's lease (1 s) still runs
                async with pool.checkout(session_id=session_id):
                    pass
            async with pool.checkout(session_id=session_id, fork=True) as fork:  # a fork needs no lease of it
                return await fork.feed_run('x')

    x = asyncio.run(check_out())
    assert x[0] == 10
    time.sleep(1.1)  # the lease expires: a process that died does not lock its session forever
    lines = child('feeds', store, session_id, stdin='x\nx.append(2)\n')
    assert lines == [session_id, f'{session_id} {x!r}', f'{session_id} None', 'calls []']
    assert child('feeds', store, session_id, stdin='len(x)\n') == [session_id, f'{session_id} 3', 'calls []']


def test_the_readme_example_of_stored_sessions_runs():
    readme = (Path(__file__).parents[2] / 'README.md').read_text()
    start = readme.index('```python\n', readme.index('### Stored sessions')) + len('```python\n')
    code = readme[start : readme.index('```', start)]
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env=env, timeout=120)
    assert (done.returncode, done.stdout) == (0, "[3, 'sent']\n"), done.stderr


def test_the_sync_session_dumps_loads_and_resumes():
    def approve():
        raise corral.Deferred('ok?')

    with corral.SyncPool(state_key=KEY) as pool:
        with pool.checkout() as session:
            with pytest.raises(corral.SandboxPaused) as info:
                session.feed_run('a = 1\nb = approve()\n[a, b]', external_lookup={'approve': approve})
            state = session.dump()
        with pool.checkout() as loaded:
            loaded.load_session(state)
            assert loaded.resume({info.value.calls[0].call_id: 2}) == [1, 2]


async def test_a_timer_pending_in_a_paused_feed_runs_after_its_resume(pool):
    def approve():
        raise corral.Deferred()

    code = 'import asyncio\nasync def ask():\n    return approve()\nasync def late():\n    await asyncio.sleep(0.2)\n    return "timer"\nawait asyncio.gather(ask(), late())'
    async with pool.checkout() as session:
        with pytest.raises(corral.SandboxPaused) as info:
            await session.feed_run(code, external_lookup={'approve': approve})
        state = await session.dump()
        assert await session.resume({info.value.calls[0].call_id: 'yes'}) == ['yes', 'timer']  # the timer is set again
    async with pool.checkout() as loaded:
        await loaded.load_session(state)
        assert await loaded.resume({info.value.calls[0].call_id: 'no'}) == ['no', 'timer']


async def test_a_feed_whose_leftover_tasks_had_to_be_stopped_is_not_dumped_and_undone_when_stored(pool):
    code = (
        'import asyncio\nasync def stubborn():\n    while True:\n        try:\n            await asyncio.sleep(10)\n'
        '        except BaseException:\n            pass\nx = 2\nt = asyncio.create_task(stubborn())\nawait asyncio.sleep(0)\n'
        # more tasks than a session keeps between feeds: they end with the feed, stubborn() by a stop
        'crowd = [asyncio.create_task(asyncio.sleep(10)) for _ in range(100)]\n1'
    )
    crowded = 'RuntimeError: the script left 101 tasks running; a session keeps at most 100 between feeds, so they were cancelled'
    async with pool.checkout() as ephemeral:
        with pytest.raises(corral.SandboxRuntimeError) as failed:
            await ephemeral.feed_run(code)
        assert failed.value.display().splitlines()[-1] == crowded
        with pytest.raises(corral.SandboxStateError) as info:
            await ephemeral.dump()
    assert str(info.value) == (
        'this session cannot be dumped: feed 1 was stopped by time (tasks it left running ignored their cancellation) '
        'at a point no replay can reproduce, so its state would not replay exactly'
    )
    async with pool.checkout(ephemeral=False) as stored:
        await stored.feed_run('x = 1')
        with pytest.raises(corral.SandboxRuntimeError):
            await stored.feed_run(code)
        assert await stored.feed_run('x') == 1


async def test_an_undone_feed_takes_its_overlay_writes_with_it(pool, tmp_path):
    (tmp_path / 'data').mkdir()
    mount = corral.Mount(tmp_path / 'data', '/data')
    async with pool.checkout(ephemeral=False, mounts=mount, limits=corral.Limits(wall_time=0.3)) as stored:
        await stored.feed_run('open("/data/a.txt", "w").write("kept")')
        with pytest.raises(corral.SandboxLimitError):
            await stored.feed_run('open("/data/b.txt", "w").write("undone")\nwhile True:\n    pass')
        assert await stored.feed_run('import os\nsorted(os.listdir("/data"))') == ['a.txt']


async def test_the_type_check_context_comes_back(pool):
    async with pool.checkout(type_check=True) as original:
        await original.feed_run('count: int = 2')
        state = await original.dump()
    async with pool.checkout(type_check=True) as loaded:
        await loaded.load_session(state)
        assert await loaded.feed_run('count + 1') == 3  # without the context, ty reports `count` unresolved
        with pytest.raises(corral.SandboxTypingError):
            await loaded.feed_run('count.upper()')



async def test_a_loaded_session_type_checks_as_the_dumped_one_did_and_keeps_its_doors_data(pool):
    async with pool.checkout(type_check=True) as original:
        original.door_state = {'format': 'concise', 'ids': {'tools': b'\x01' * 16}}
        await original.feed_run('count: int = 2')
        checked = await original.dump()
    async with pool.checkout() as loaded:  # unchecked as checked out: the state's setting wins
        await loaded.load_session(checked)
        assert loaded.door_state == {'format': 'concise', 'ids': {'tools': b'\x01' * 16}}
        with pytest.raises(corral.SandboxTypingError) as error:
            await loaded.feed_run('count.upper()')
        assert error.value.display().splitlines()[0] == 'error[unresolved-attribute]: Object of type `Literal[2]` has no attribute `upper`'
        assert await loaded.feed_run('count + 1') == 3
    async with pool.checkout() as original:
        await original.feed_run('count = 2')
        unchecked = await original.dump()
    async with pool.checkout(type_check=True) as loaded:
        await loaded.load_session(unchecked)
        assert loaded.door_state == {}
        with pytest.raises(corral.SandboxRuntimeError) as error:
            await loaded.feed_run('count.upper()')
        assert error.value.message == "'int' object has no attribute 'upper'"
    # a state written before states carried the setting: the checkout's own
    plain = msgpack.unpackb(checked[14:-32])
    del plain['type_check'], plain['door']
    async with pool.checkout() as loaded:
        await loaded.load_session(resign(msgpack.packb(plain)))
        assert loaded.door_state == {}
        with pytest.raises(corral.SandboxRuntimeError):
            await loaded.feed_run('count.upper()')


async def test_a_stored_sessions_records_carry_its_doors_data(pool):
    async with pool.checkout(ephemeral=False, type_check=True) as session:
        session.door_state = {'format': 1}  # set after the session opened: its first record carries it
        await session.feed_run('x = 1')
        session.door_state = {'format': 2, 'ids': {'m': b'id'}}
        await session.feed_run('y = 2')
        session_id = session.session_id
    async with pool.checkout(session_id=session_id) as again, pool.checkout(session_id=session_id, fork=True) as fork:
        assert (again.door_state, again.type_check, await again.feed_run('x + y')) == ({'format': 2, 'ids': {'m': b'id'}}, True, 3)
        assert (fork.door_state, fork.type_check) == ({'format': 2, 'ids': {'m': b'id'}}, True)

async def test_a_tampered_type_check_setting_or_doors_data_is_refused(pool):
    async with pool.checkout(type_check=True) as original:
        original.door_state = {'format': 'concise'}
        await original.feed_run('count: int = 2')
        state = await original.dump()
    setting = msgpack.packb('type_check') + msgpack.packb(True)
    assert state.count(setting) == 1
    off = state.replace(setting, msgpack.packb('type_check') + msgpack.packb(False))
    assert await load_error(pool, off) == (
        "the session state was altered, or signed with another key: its signature does not match this pool's state key"
    )
    door = msgpack.packb('format') + msgpack.packb('concise')
    assert state.count(door) == 1
    assert await load_error(pool, state.replace(door, msgpack.packb('format') + msgpack.packb('pylint_'))) == (
        "the session state was altered, or signed with another key: its signature does not match this pool's state key"
    )
    # signed with the right key, yet of the wrong shape: refused as malformed
    plain = msgpack.unpackb(state[14:-32])
    assert await load_error(pool, resign(msgpack.packb({**plain, 'type_check': 'yes'}))) == 'the session state is malformed (malformed type_check setting)'
    assert await load_error(pool, resign(msgpack.packb({**plain, 'door': ['format']}))) == "the session state is malformed (malformed front door's data)"
    assert await load_error(pool, resign(msgpack.packb({**plain, 'door': {1: 'format'}}))) == (
        'the session state is malformed (int is not allowed for map key when strict_map_key=True)'
    )

async def test_a_replay_whose_worker_never_finishes_fails_the_load_in_time(pool):
    """A replayed feed runs with no wall_time; a worker that never finished one (it stalls, or its
    replay went another way and waits) held the load for ever. Now it has ten times wall_time."""
    async with corral.Pool(state_key=KEY) as other:  # dumped elsewhere: no checkpoint of it here
        state = await dumped(other)
    async with fake_worker_session(pool, wall_time=0.1) as (session, worker):
        started = time.monotonic()
        with pytest.raises(corral.SandboxStateError) as info:
            await asyncio.wait_for(session.load_session(state), 30)
    assert str(info.value) == (
        'the session state could not be replayed: feed 1 did not run as recorded (the sandbox worker stopped: it did not '
        'finish a replayed feed in 10 times the wall_time limit of 0.1 seconds; check out a new session)'
    )
    assert time.monotonic() - started < 10


async def test_a_replay_that_prints_or_returns_something_else_is_refused_and_addresses_do_not_count(pool):
    async with pool.checkout() as session:
        await session.feed_run('class A:\n    pass\na = A()\nprint(a)\nrepr(a)', print_callback=lambda stream, text: None)
        state = await session.dump()
    async with pool.checkout() as loaded:  # the object's address differs in the new worker: no matter
        await loaded.load_session(state)
        assert (await loaded.feed_run('repr(a)')).startswith('<__main__.A object at 0x')
    plain = msgpack.unpackb(state[14:-32])
    plain['feeds'][0][5] = b'x' * 16  # a trace of another run
    assert await load_error(pool, resign(msgpack.packb(plain))) == (
        'the session state could not be replayed: feed 1 went another way than the recorded run: '
        'its host calls, waits, output or value differ from the record'
    )


async def test_large_host_results_packed_off_the_loop_are_journaled_and_replay(pool):
    calls = []

    async def rows(n):
        calls.append(n)
        return list(range(n))

    def texts(n):
        calls.append(n)
        return [str(i) for i in range(n)]

    async def approve(what):
        raise corral.Deferred()

    tools = {'rows': rows, 'texts': texts, 'approve': approve}
    code = (
        'import asyncio\n'
        'big, ok = await asyncio.gather(rows(50_000), approve("x"))\n'
        'strings = texts(30_000)\n'
        'try:\n'
        '    texts(200_000)\n'
        'except OverflowError as error:\n'
        '    refused = str(error)\n'
        '[len(big), big[-1], ok, len(strings), strings[-1], refused]'
    )
    expected = [
        50_000, 49_999, 'yes', 30_000, '29999',
        'the value texts() returned has at least 200,000 items; at most 100,000 may enter the sandbox (the value_items limit)',
    ]
    async with pool.checkout(limits=corral.Limits(value_items=100_000)) as session:
        with pytest.raises(corral.SandboxPaused) as info:
            await session.feed_run(code, external_lookup=tools)
        assert [call.function for call in info.value.calls] == ['approve']
        assert await session.resume({info.value.calls[0].call_id: 'yes'}) == expected
        state = await session.dump()
    async with pool.checkout(limits=corral.Limits(value_items=100_000)) as loaded:
        await loaded.load_session(state)
        assert await loaded.feed_run('[len(big), big[-1], ok, len(strings), strings[-1], refused]') == expected
    assert calls == [50_000, 30_000, 200_000]


IDENTITY_SETUP = '''
import asyncio

class Task:
    def __init__(self, n):
        self.n = n
    def run(self):
        return self.n

class Other:
    pass

class Third(Other, Exception):
    pass

def first():
    pass

def second():
    pass

async def job(n):
    await asyncio.sleep(0)
    return n

tasks = {Task(c) for c in 'abcdefghijklmnopqrstuvwxyz'}
sentinels = {object(): i for i in range(20)}
functions = {first, second, lambda: 1, lambda: 2, Task.run, Other.__init__}
classes = {Task, Other, type(Task('x')), Third}
methods = {t.run for t in tasks}
running = {asyncio.ensure_future(job(i)) for i in range(10)}
done, pending = await asyncio.wait(running)
kept = [Task(i) for i in range(5)]
by_id = sorted(kept, key=id)
text = repr(kept[0])
ids = [id(t) for t in kept]
print(kept[1], first, id(kept[2]))
'''

IDENTITY_READ = (
    '([t.n for t in tasks], list(sentinels.values()), [f.__name__ for f in functions], [c.__name__ for c in classes], '
    '[m() for m in methods], [t.result() for t in done], [t.n for t in by_id], text, repr(kept[1]), repr(first), ids, '
    '[id(t) for t in kept], [hash(t) for t in kept], id(kept[0]) < id(kept[1]), sorted(kept, key=id) == by_id, '
    '[id(t) >> 4 == hash(t) for t in kept], [t.n for t in {Task(i) for i in range(40)}], [repr(o) for o in sentinels][:3])'
)


async def test_ids_identity_hashes_and_default_reprs_come_back_the_same_after_a_load(pool):
    """Sets of the script's objects, functions, classes, bound methods and tasks keep their order,
    and `id()` and default reprs their values, in a worker whose allocations went another way."""
    printed = []
    async with pool.checkout() as original:
        await original.feed_run(IDENTITY_SETUP, print_callback=lambda stream, text: printed.append(text))
        state = await original.dump()
        expected = await original.feed_run(IDENTITY_READ)
    assert printed == ['<__main__.Task object at 0x7f0000000460> <function first at 0x7f0000000320> 139637976728688\n']
    assert expected[7:10] == ('<__main__.Task object at 0x7f0000000450>', '<__main__.Task object at 0x7f0000000460>', '<function first at 0x7f0000000320>')
    assert expected[10] == [0x7F0000000450 + 16 * i for i in range(5)] == expected[11] and expected[12] == [(0x7F0000000450 >> 4) + i for i in range(5)]
    assert expected[13:16] == (True, True, [True] * 5) and expected[17] == [f'<object object at 0x7f0000000{n:x}>' for n in (0x1E0, 0x1F0, 0x200)]
    async with pool.checkout() as never_stored:  # another session running the same feeds: the same values
        await never_stored.feed_run(IDENTITY_SETUP, print_callback=lambda stream, text: None)
        assert await never_stored.feed_run(IDENTITY_READ) == expected
    for _ in range(3):
        async with pool.checkout() as loaded:
            await loaded.load_session(state)
            assert await loaded.feed_run(IDENTITY_READ) == expected
    async with pool.checkout(ephemeral=False) as stored:
        await stored.feed_run(IDENTITY_SETUP, print_callback=lambda stream, text: None)
        session_id = stored.session_id
    async with pool.checkout(session_id=session_id) as resumed:
        assert await resumed.feed_run(IDENTITY_READ) == expected


async def test_a_replay_does_not_run_under_wall_time_and_what_follows_its_pause_does(pool):
    """A slow machine (here the worker stopped for longer than wall_time and grace, in the middle of
    a replayed feed) does not fail a load; the live part of a replayed paused feed has its wall_time."""
    limits = corral.Limits(wall_time=1.0)
    tools = {'step': lambda n: n}
    code = 'a = step(1)\nfor i in range(1_000_000):\n    pass\nb = step(2)\na + b'
    async with pool.checkout(limits=limits) as original:
        await original.feed_run(code, external_lookup=tools)
        state = await original.dump()
        await original.feed_run('None')  # its state moves on: no live checkpoint, the load replays
    async with pool.checkout(limits=limits) as loaded:
        pid, serve = loaded._worker.pid, loaded._serve_replay
        going_on = asyncio.get_running_loop().create_future()

        def stalled(call_id):  # the worker, in the loop by now, is stopped for longer than wall_time and grace
            if call_id == 0:
                os.kill(pid, signal.SIGSTOP)
                asyncio.get_running_loop().call_later(3.0, lambda: (os.kill(pid, signal.SIGCONT), going_on.set_result(None)))
            serve(call_id)

        loaded._serve_replay = stalled
        await loaded.load_session(state)
        await going_on
        assert await loaded.feed_run('a + b') == 3

    def approve(what):
        raise corral.Deferred()

    limits = corral.Limits(wall_time=1.0, grace=5.0)  # a busy machine: the worker stops the script itself
    async with pool.checkout(limits=limits) as original:
        with pytest.raises(corral.SandboxPaused) as paused:
            await original.feed_run('x = approve("go")\nwhile x:\n    pass', external_lookup={'approve': approve})
        state = await original.dump()
    async with pool.checkout(limits=limits) as loaded:
        await loaded.load_session(state)
        with pytest.raises(corral.SandboxLimitError) as stopped:
            await loaded.resume({paused.value.calls[0].call_id: True})
        assert stopped.value.limit == 'wall_time'
        assert str(stopped.value).splitlines()[-1] == 'TimeoutError: the script ran past the wall_time limit of 1 second'


async def test_prints_before_a_pause_reach_the_callback_and_those_after_it_arrive_once_after_a_load(pool, tmp_path, capsys):
    def approve(what):
        raise corral.Deferred()

    code = 'print("before")\nx = approve("go")\nprint("after", x)\nprint("more", file=sys.stderr)\nx'
    code = 'import sys\n' + code
    printed = []
    async with pool.checkout() as original:
        with pytest.raises(corral.SandboxPaused) as paused:
            await original.feed_run(code, external_lookup={'approve': approve}, print_callback=lambda stream, text: printed.append((stream, text)))
        assert printed == [('stdout', 'before\n')]
        state = await original.dump()
    (call,) = paused.value.calls
    async with pool.checkout() as loaded:
        await loaded.load_session(state)
        assert printed == [('stdout', 'before\n')]
        assert await loaded.resume({call.call_id: 'yes'}, print_callback=lambda stream, text: printed.append((stream, text))) == 'yes'
    assert printed == [('stdout', 'before\n'), ('stdout', 'after yes\n'), ('stderr', 'more\n')]
    async with pool.checkout() as loaded:  # no print_callback given again: the default one, the host's stdout and stderr
        await loaded.load_session(state)
        assert await loaded.resume({call.call_id: 'no'}) == 'no'
    assert capsys.readouterr() == ('after no\n', 'more\n')
    path = tmp_path / 'state'
    path.write_bytes(state)
    assert child('resume', str(path), 'later') == ['after later', "'later'", 'calls []']  # in another process, nothing called again
    async with pool.checkout(ephemeral=False) as stored:
        with pytest.raises(corral.SandboxPaused):
            await stored.feed_run(code, external_lookup={'approve': approve}, print_callback=lambda stream, text: None)
        session_id = stored.session_id
    capsys.readouterr()
    async with pool.checkout(session_id=session_id) as resumed:
        (call,) = resumed.pending_calls
        assert await resumed.resume({call.call_id: 'stored'}) == 'stored'
    assert capsys.readouterr() == ('after stored\n', 'more\n')


KINDS_SETUP = '''
import abc
class M(type):
    pass
class A(metaclass=M):
    pass
class B(abc.ABC):
    pass
class S:
    __slots__ = ('x',)
    def __init__(self, x):
        self.x = x
class E(Exception):
    pass
class H:
    def __eq__(self, other):
        return self is other
    def __hash__(self):
        return super().__hash__()
def gen(n):
    yield n
things = {A, B, M, S, E, H, gen}
slotted = {S(i) for i in range(20)}
errors = {E(i) for i in range(20)}
hs = {H(): i for i in range(20)}
gens = {gen(i): i for i in range(5)}
'''
KINDS_READ = '([getattr(c, "__name__") for c in things], [s.x for s in slotted], [e.args[0] for e in errors], list(hs.values()), [repr(g) for g in gens][:2], repr(A()))'


async def test_identity_values_of_metaclass_abc_slotted_exception_and_generator_objects_come_back(pool):
    async with pool.checkout() as original:
        await original.feed_run(KINDS_SETUP)
        state = await original.dump()
        expected = await original.feed_run(KINDS_READ)
    assert expected[4:] == (['<generator object gen at 0x7f0000000450>', '<generator object gen at 0x7f0000000460>'], '<__main__.A object at 0x7f00000004b0>')
    async with pool.checkout() as loaded:
        await loaded.load_session(state)
        assert await loaded.feed_run(KINDS_READ) == expected
