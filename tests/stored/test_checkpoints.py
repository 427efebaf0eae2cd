"""Live checkpoints: a stored session's worker kept after it closed, taken by the next checkout of
that exact state, and the journal replayed to the same session whenever there is none."""

import asyncio
import socket

import pytest
from hypothesis import HealthCheck, given, settings

import corral
from corral.host.checkpoints import Checkpoint, Checkpoints, state_digest
from corral.host.journal import SessionState
from corral.host.workers import WorkerProcess

from .test_replay_property import outcome, runs

KEY = b'checkpoint-state-key-0123456789a'


class Recorder(corral.PoolObserver):
    def __init__(self):
        self.taken = []
        self.changes = []
        self.calls = 0

    def checkpoint_taken(self, used):
        self.taken.append(used)

    def checkpoints_changed(self, count, memory):
        self.changes.append((count, memory))

    def host_call(self, function):
        self.calls += 1


def dead(pid):
    """Whether process `pid` is gone, or a zombie."""
    try:
        with open(f'/proc/{pid}/stat') as stat:
            return stat.read().rpartition(')')[2].split()[0] in ('Z', 'X')
    except (FileNotFoundError, ProcessLookupError):  # reaped before the open, or between the open and the read
        return True


async def wait_dead(pid):
    for _ in range(200):
        if dead(pid):
            return True
        await asyncio.sleep(0.01)
    return False


async def fetch(n):
    return {'n': n, 'twice': n * 2}


@pytest.fixture
def store_url(tmp_path):
    return f'sqlite:///{tmp_path}/store.db'


async def stored(pool, codes, **options):
    """A stored session that ran `codes`, closed: its id and its worker's pid."""
    async with pool.checkout(ephemeral=False, **options) as session:
        for code in codes:
            await session.feed_run(code, external_lookup={'fetch': fetch})
        return session.session_id, session._worker.pid


SETUP = [
    'import asyncio\nclass Box:\n    def __init__(self, v):\n        self.v = v\nboxes = [Box(x) for x in range(3)]',
    "rows = await asyncio.gather(*(fetch(n) for n in range(4)))\ntotal = sum(r['twice'] for r in rows)\ntotal",
]


async def test_a_checkout_of_a_closed_stored_session_starts_from_its_worker_and_calls_nothing_again(store_url):
    recorder = Recorder()
    async with corral.Pool(state_key=KEY, store=store_url, observer=recorder) as pool:
        session_id, pid = await stored(pool, SETUP)
        assert recorder.calls == 4
        assert len(pool._checkpoints) == 1 and recorder.changes[-1][0] == 1 and recorder.changes[-1][1] > 0
        async with pool.checkout(session_id=session_id) as session:
            assert session._worker.pid == pid
            assert recorder.taken == [True] and len(pool._checkpoints) == 0
            assert await session.feed_run('[total, [b.v for b in boxes], type(boxes[0]).__name__]') == [12, [0, 1, 2], 'Box']
            assert await session.feed_run("(await fetch(5))['twice']", external_lookup={'fetch': fetch}) == 10
            assert session.cpu_seconds < 0.5
        assert recorder.calls == 5
        async with pool.checkout(session_id=session_id) as session:  # kept again after that feed: the newer state
            assert session._worker.pid == pid
            assert await session.feed_run('total') == 12
        assert recorder.taken == [True, True]


async def test_without_a_checkpoint_the_journal_replays_to_the_same_session(store_url):
    recorder = Recorder()
    async with corral.Pool(state_key=KEY, store=store_url, observer=recorder) as pool:
        session_id, pid = await stored(pool, SETUP)
    assert await wait_dead(pid)  # the pool closed: its checkpoints died with it
    async with corral.Pool(state_key=KEY, store=store_url, observer=recorder) as pool:
        async with pool.checkout(session_id=session_id) as session:
            assert session._worker.pid != pid
            assert await session.feed_run('[total, [b.v for b in boxes]]') == [12, [0, 1, 2]]
    assert recorder.taken == [False]
    assert recorder.calls == 4


async def test_a_checkpoint_of_a_state_that_moved_on_elsewhere_is_dropped_and_the_new_state_replayed(store_url):
    recorder = Recorder()
    async with corral.Pool(state_key=KEY, store=store_url, observer=recorder) as pool, corral.Pool(state_key=KEY, store=store_url, checkpoints=None) as other:
        session_id, pid = await stored(pool, ['x = 1'])
        async with other.checkout(session_id=session_id) as session:  # another process feeds it
            await session.feed_run('x = 2')
        async with pool.checkout(session_id=session_id) as session:
            assert session._worker.pid != pid
            assert await session.feed_run('x') == 2
        assert recorder.taken == [False]
        assert await wait_dead(pid)


async def test_the_rows_a_checkpoint_was_kept_with_are_not_checked_again_and_any_other_rows_are(store_url, monkeypatch):
    """A checkout (or fork) that reads back the very rows its checkpoint was kept with takes the
    checkpoint's state without checking the rows' signatures and decoding them again; rows
    another process wrote are checked, and replayed."""
    from corral.host import session as session_module

    opened = []
    check = session_module.open_stored
    monkeypatch.setattr(session_module, 'open_stored', lambda *args, **options: opened.append(1) or check(*args, **options))
    codes = [*SETUP, *(f'n{i} = {i}' for i in range(40))]
    options = {'state_key': KEY, 'store': store_url, 'max_state_bytes': 20_000}  # records appended, full states written again
    async with corral.Pool(**options) as pool, corral.Pool(**options, checkpoints=None) as other:
        session_id, pid = await stored(pool, codes)
        rows = await pool.store.get(session_id)
        assert rows.generation == 43 and 0 < len(rows.records) < 40
        assert pool._checkpoints._kept[('', session_id)].stored is not None
        async with pool.checkout(session_id=session_id) as session:
            assert session._worker.pid == pid and opened == []
            assert await session.feed_run('total + n39') == 51
        async with pool.checkout(session_id=session_id, fork=True) as fork:
            assert fork._worker.pid == pid and opened == []
            assert await fork.feed_run('total + n39') == 51
            fork_id = fork.session_id
        async with other.checkout(session_id=fork_id) as session:  # another process feeds the fork
            assert opened == [1]
            await session.feed_run('n39 = 0')
        async with pool.checkout(session_id=fork_id) as session:
            assert opened == [1, 1] and session._worker.pid != pid
            assert await session.feed_run('total + n39') == 12


async def test_a_session_changed_since_its_last_write_keeps_no_checkpoint_of_the_stored_rows(store_url):
    """A stored session whose working folder or door_state (changed in place) moved on after its
    last write closes with a state the store does not have: the next checkout replays the store's."""
    async with corral.Pool(state_key=KEY, store=store_url) as pool:
        for change in ('door', 'chdir'):
            async with pool.checkout(ephemeral=False) as session:
                await session.feed_run('x = 1')
                if change == 'door':
                    session.door_state['turn'] = 1
                else:
                    session.chdir('/tmp')
                session_id, pid = session.session_id, session._worker.pid
            assert pool._checkpoints._kept[('', session_id)].stored is None
            async with pool.checkout(session_id=session_id) as session:
                assert session._worker.pid != pid
                assert (session.door_state, session._system.cwd, await session.feed_run('x')) == ({}, '/', 1)


async def test_rows_appended_by_a_checkout_with_another_mount_are_taken_as_the_rows_hold_them(store_url, tmp_path):
    """A record carries no mounts: a checkout given a mount the stored session lacked appends rows
    that hold the session without it. The next checkout, without the mount, gets the session as
    the rows hold it, from the checkpoint or by a replay alike, never refused for the mount."""
    results = []
    for checkpoints in ({}, {'checkpoints': None}):
        async with corral.Pool(state_key=KEY, store=f'{store_url}{len(results)}', **checkpoints) as pool:
            session_id, _ = await stored(pool, ['x = 1'])
            async with pool.checkout(session_id=session_id, mounts=corral.Mount(str(tmp_path), '/data', mode='read-only')) as session:
                await session.feed_run('x = 2')
            async with pool.checkout(session_id=session_id) as session:
                results.append((await session.feed_run('x'), session._system.mounts()))
    assert results == [(2, []), (2, [])]


async def test_the_bytes_a_dump_gave_out_are_not_checked_again_and_any_other_bytes_are(monkeypatch):
    """A load of the very bytes a session's dump gave out (it closed right after) takes the
    checkpoint's state without checking and decoding them again; bytes altered by one bit, or
    loaded by another tenant, are checked as without checkpoints (refused, or replayed)."""
    from corral.host import replay

    opened = []
    check = replay.open_state
    monkeypatch.setattr(replay, 'open_state', lambda *args, **options: opened.append(1) or check(*args, **options))
    async with corral.Pool(state_key=KEY) as pool, corral.Pool(state_key=KEY, checkpoints=None) as cold:
        for _ in range(2):
            async with pool.checkout(tenant='acme') as session:
                for code in SETUP:
                    await session.feed_run(code, external_lookup={'fetch': fetch})
                state, pid = await session.dump(), session._worker.pid
            altered = state[:-40] + bytes([state[-40] ^ 1]) + state[-39:]
            errors = []
            for chosen in (pool, cold):
                async with chosen.checkout(tenant='acme') as session:
                    with pytest.raises(corral.SandboxStateError) as refused:
                        await session.load_session(altered)
                    errors.append(str(refused.value))
            assert errors[0] == errors[1] and len(pool._checkpoints) == 1 and opened == [1, 1]
            opened.clear()
            async with pool.checkout(tenant='other') as session:  # the same bytes, another tenant: replayed
                await session.load_session(state)
                assert session._worker.pid != pid and opened == [1]
            async with pool.checkout(tenant='acme') as session:
                await session.load_session(state)
                assert session._worker.pid == pid and opened == [1]
                assert await session.feed_run('[total, [b.v for b in boxes]]') == [12, [0, 1, 2]]
            opened.clear()


async def test_a_fork_starts_from_the_checkpoint_other_limits_and_a_pool_without_checkpoints_replay(store_url):
    recorder = Recorder()
    async with corral.Pool(state_key=KEY, store=store_url, observer=recorder) as pool:
        session_id, pid = await stored(pool, ['x = [1, 2]'])
        async with pool.checkout(session_id=session_id, fork=True) as fork:  # the source's state, in a new session
            assert fork._worker.pid == pid and fork.session_id != session_id
            assert await fork.feed_run('x.append(3)\nx') == [1, 2, 3]
            fork_id = fork.session_id
        assert list(pool._checkpoints._kept) == [('', fork_id)]  # the fork's own; the source's was taken
        async with pool.checkout(session_id=session_id) as session:
            assert session._worker.pid != pid
            assert await session.feed_run('x') == [1, 2]
        async with pool.checkout(session_id=session_id, limits=corral.Limits(memory=256 * 1024 * 1024)) as session:
            assert await session.feed_run('x') == [1, 2]  # its worker's rlimits are the checkout's: replayed
        assert recorder.taken == [True, False, False]
    async with corral.Pool(state_key=KEY, store=store_url, checkpoints=None) as pool:
        session_id, pid = await stored(pool, ['y = 3'])
        assert pool._checkpoints is None and await wait_dead(pid)
        async with pool.checkout(session_id=session_id) as session:
            assert await session.feed_run('y') == 3


async def test_a_dumped_session_closed_right_after_is_loaded_from_its_worker_once_and_by_its_tenant_only():
    recorder = Recorder()
    async with corral.Pool(state_key=KEY, observer=recorder) as pool:
        async with pool.checkout(tenant='a') as session:
            for code in SETUP:
                await session.feed_run(code, external_lookup={'fetch': fetch})
            state = await session.dump()
            pid = session._worker.pid
        assert len(pool._checkpoints) == 1
        async with pool.checkout(tenant='b') as other:  # another tenant holding the bytes: replayed
            await other.load_session(state)
            assert other._worker.pid != pid and await other.feed_run('total') == 12
        async with pool.checkout(tenant='a') as first, pool.checkout(tenant='a') as second:
            await first.load_session(state)
            await second.load_session(state)  # the checkpoint is used once: the second replays
            assert first._worker.pid == pid and second._worker.pid != pid
            assert await first.feed_run('boxes.append(Box(9))\n[b.v for b in boxes]') == [0, 1, 2, 9]
            assert await second.feed_run('[b.v for b in boxes]') == [0, 1, 2]
        assert recorder.taken == [False, True, False] and recorder.calls == 4
        async with pool.checkout() as session:
            await session.feed_run('z = 1')
            await session.dump()
            await session.feed_run('z = 2')  # its state moved on from the one given out
        assert len(pool._checkpoints) == 0


async def test_what_a_script_leaves_in_its_worker_reaches_no_other_session(store_url):
    leave = 'import asyncio\nsecret = "of session A"\nasync def later():\n    await asyncio.sleep(0)\n    return secret\ntask = asyncio.ensure_future(later())\nsecret'
    async with corral.Pool(state_key=KEY, store=store_url, warm_workers=1) as pool:
        session_a, pid = await stored(pool, [leave], tenant='t')
        idle = [worker.pid for worker in pool._idle]
        assert pid not in idle  # parked apart: never a warm worker for the next checkout
        async with pool.checkout(ephemeral=False, tenant='t') as other, pool.checkout(tenant='t') as ephemeral:
            for session in (other, ephemeral):
                assert session._worker.pid != pid
                with pytest.raises(corral.SandboxRuntimeError) as raised:
                    await session.feed_run('secret')
                assert raised.value.display().endswith("NameError: name 'secret' is not defined")
            state = await other.dump()
        async with pool.checkout(tenant='t') as loader:  # a load of another session's state: never A's worker
            await loader.load_session(state)
            assert loader._worker.pid != pid
        async with pool.checkout(session_id=session_a, tenant='t') as again:
            assert again._worker.pid == pid
            assert await again.feed_run('[secret, task.done()]') == ['of session A', True]


FORK_ATTEMPTS = """
import ctypes, errno, os, signal
libc = ctypes.CDLL(None, use_errno=True)
tried = {}
try:
    os.fork()
    tried['os.fork'] = 'forked'
except OSError as error:
    tried['os.fork'] = errno.errorcode[error.errno]
for name, call in (('fork', lambda: libc.fork()), ('vfork', lambda: libc.vfork()), ('clone', lambda: libc.syscall(56, int(signal.SIGCHLD), 0, 0, 0, 0)),
                   ('clone3', lambda: libc.syscall(435, 0, 0))):
    tried[name] = errno.errorcode[ctypes.get_errno()] if call() == -1 else 'forked'
tried
"""


async def test_a_worker_taken_from_a_checkpoint_cannot_fork_even_without_the_language_layer(store_url):
    expected = {'os.fork': 'EPERM', 'fork': 'EPERM', 'vfork': 'EPERM', 'clone': 'EPERM', 'clone3': 'ENOSYS'}
    async with corral.Pool(state_key=KEY, store=store_url, skip_layers={'language'}, warm_workers=0) as pool:
        async with pool.checkout(ephemeral=False) as session:
            assert await session.feed_run(FORK_ATTEMPTS) == expected
            session_id, pid = session.session_id, session._worker.pid
        async with pool.checkout(session_id=session_id) as session:
            assert session._worker.pid == pid
            assert await session.feed_run(FORK_ATTEMPTS) == expected
            assert await session.feed_run('os.getpid()') == pid_in_namespace(pid)


def pid_in_namespace(pid):
    """The pid `pid` has in the innermost PID namespace it is in (the last NSpid of its status)."""
    with open(f'/proc/{pid}/status') as status:
        return int(next(line for line in status if line.startswith('NSpid:')).split()[-1])


def approve(what):
    raise corral.Deferred({'approve': what})


PAUSING = [
    'import asyncio\nlog = []\nasync def step(n):\n    log.append(await fetch(n))\n    return n',
    "first = await asyncio.gather(step(1), step(2))\nok = approve('send')\nlog.append(ok)\n[first, ok, await step(3), await asyncio.sleep(0.01), len(log)]",
]


async def paused_then_resumed(pool, replaying, *, tenant=''):
    """A stored session paused on `approve`, closed, taken from its checkpoint and from a replay: what each resume gives."""
    lookup = {'fetch': fetch, 'approve': approve}
    async with pool.checkout(ephemeral=False, tenant=tenant) as session:
        await session.feed_run(PAUSING[0], external_lookup=lookup)
        with pytest.raises(corral.SandboxPaused) as paused:
            await session.feed_run(PAUSING[1], external_lookup=lookup)
        session_id, pid = session.session_id, session._worker.pid
    (call,) = paused.value.calls
    results = []
    async with pool.checkout(session_id=session_id, tenant=tenant) as resumed, replaying.checkout(session_id=session_id, fork=True, tenant=tenant) as replayed:
        assert resumed._worker.pid == pid and replayed._worker.pid != pid
        for session in (resumed, replayed):
            assert session.paused and [c.call_id for c in session.pending_calls] == [call.call_id]
            results.append(await session.resume({call.call_id: 'yes'}, external_lookup=lookup))
            results.append(await session.feed_run('log'))
    return results


async def test_a_paused_stored_session_resumes_from_its_checkpoint_as_from_a_replay(store_url):
    recorder = Recorder()
    async with corral.Pool(state_key=KEY, store=store_url, observer=recorder) as pool, corral.Pool(state_key=KEY, store=store_url, checkpoints=None) as replaying:
        results = await paused_then_resumed(pool, replaying)
    value = [[1, 2], 'yes', 3, None, 4]
    log = [{'n': 1, 'twice': 2}, {'n': 2, 'twice': 4}, 'yes', {'n': 3, 'twice': 6}]
    assert results == [value, log, value, log]
    assert recorder.taken == [True]


async def test_a_paused_session_dumped_and_closed_loads_from_its_checkpoint_and_resumes():
    lookup = {'fetch': fetch, 'approve': approve}
    async with corral.Pool(state_key=KEY) as pool:
        async with pool.checkout() as session:
            await session.feed_run(PAUSING[0], external_lookup=lookup)
            with pytest.raises(corral.SandboxPaused) as paused:
                await session.feed_run(PAUSING[1], external_lookup=lookup)
            state, pid = await session.dump(), session._worker.pid
        (call,) = paused.value.calls
        values = []
        for _ in range(2):  # from the checkpoint, then replayed
            async with pool.checkout() as session:
                await session.load_session(state)
                values.append((session._worker.pid == pid, await session.resume({call.call_id: 'ok'}, external_lookup=lookup)))
        assert values == [(True, [[1, 2], 'ok', 3, None, 4]), (False, [[1, 2], 'ok', 3, None, 4])]


async def test_a_load_refused_for_a_missing_mount_kills_the_checkpoint_and_leaves_the_session_fresh(tmp_path):
    async with corral.Pool(state_key=KEY) as pool:
        async with pool.checkout(mounts=corral.Mount(str(tmp_path), '/data', mode='overlay')) as session:
            await session.feed_run("open('/data/a.txt', 'w').write('x')\nkept = 1")
            state, pid = await session.dump(), session._worker.pid
        assert len(pool._checkpoints) == 1
        async with pool.checkout() as session:
            with pytest.raises(corral.SandboxStateError) as raised:
                await session.load_session(state)
            assert str(raised.value) == (
                "the session state uses the overlay mount at /data, which this checkout does not have: "
                "pass checkout(mounts=Mount(<host folder>, '/data', mode='overlay'))"
            )
            assert session._worker.pid != pid and await wait_dead(pid)
            with pytest.raises(corral.SandboxRuntimeError):
                await session.feed_run('kept')  # nothing of the state reached it
            assert await session.feed_run('1 + 1') == 2
        assert len(pool._checkpoints) == 0


async def test_an_ephemeral_session_never_dumped_and_a_checkout_that_failed_keep_no_checkpoint(store_url):
    async with corral.Pool(state_key=KEY, store=store_url) as pool:
        async with pool.checkout() as session:
            await session.feed_run('x = 1')
        with pytest.raises(corral.SandboxStateError):
            async with pool.checkout(session_id='0' * 32):
                pass
        assert len(pool._checkpoints) == 0


async def test_checkpoints_are_bounded_per_pool_and_per_tenant_least_recently_kept_first(store_url):
    limits = corral.CheckpointLimits(count=3, tenant_count=2)
    async with corral.Pool(state_key=KEY, store=store_url, checkpoints=limits) as pool:
        a1, pid_a1 = await stored(pool, ['v = "a1"'], tenant='a')
        a2, pid_a2 = await stored(pool, ['v = "a2"'], tenant='a')
        a3, pid_a3 = await stored(pool, ['v = "a3"'], tenant='a')  # over tenant a's two: a1 goes
        assert await wait_dead(pid_a1)
        assert list(pool._checkpoints._kept) == [('a', a2), ('a', a3)]
        b1, pid_b1 = await stored(pool, ['v = "b1"'], tenant='b')
        b2, pid_b2 = await stored(pool, ['v = "b2"'], tenant='b')  # over the pool's three: a2 goes
        assert await wait_dead(pid_a2)
        assert list(pool._checkpoints._kept) == [('a', a3), ('b', b1), ('b', b2)]
        async with pool.checkout(session_id=a1, tenant='a') as session:  # evicted: replayed
            assert session._worker.pid != pid_a1 and await session.feed_run('v') == 'a1'
        async with pool.checkout(session_id=b1, tenant='b') as session:
            assert session._worker.pid == pid_b1 and await session.feed_run('v') == 'b1'
        memory = pool._checkpoints.memory
        assert memory == sum(kept.memory for kept in pool._checkpoints._kept.values()) > 0
    assert await wait_dead(pid_a3) and await wait_dead(pid_b2)
    async with corral.Pool(state_key=KEY, store=store_url, checkpoints=corral.CheckpointLimits(tenant_memory=4096)) as pool:
        _, pid = await stored(pool, ['w = 1'])  # a worker holds more than 4 KiB of its own
        assert len(pool._checkpoints) == 0 and await wait_dead(pid)


def fake_worker():
    """A handle on no process, whose channel's other end is returned too."""
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    return WorkerProcess(-1, theirs), ours


def test_a_checkpoint_is_taken_only_by_its_tenant_and_session_for_the_exact_state_and_rlimits():
    state = SessionState(fingerprint=b'f', seed=1, script_name='main.py', feeds=[], mounts=[], overlay={'/data': [{'b': 1, 'a': 2}, [], []]})
    digest = state_digest(state)
    reordered = SessionState(fingerprint=b'f', seed=1, script_name='main.py', feeds=[], mounts=[], overlay={'/data': [{'a': 2, 'b': 1}, [], []]})
    assert state_digest(reordered) == digest
    assert state_digest(SessionState(fingerprint=b'f', seed=2, script_name='main.py', feeds=[], mounts=[], overlay={})) != digest
    recorder = Recorder()
    checkpoints = Checkpoints(corral.CheckpointLimits(), recorder)
    for tenant, session_id in (('b', 's'), ('a', 't')):  # another tenant's, another session's: not found
        worker, _ = fake_worker()
        checkpoints._kept[('a', 's')] = Checkpoint('a', 's', digest, (None, None), worker, [], [], 0, 0, {})
        assert checkpoints.take(tenant, session_id, digest, (None, None)) is None
        assert ('a', 's') in checkpoints._kept and worker.sock.fileno() >= 0
    for wanted, rlimits in ((b'other', (None, None)), (digest, (1 << 30, None))):  # another state, other rlimits: dropped
        worker, _ = fake_worker()
        checkpoints._kept[('a', 's')] = Checkpoint('a', 's', digest, (None, None), worker, [], [], 0, 0, {})
        assert checkpoints.take('a', 's', wanted, rlimits) is None
        assert ('a', 's') not in checkpoints._kept and worker.sock.fileno() == -1
    assert recorder.taken == [False, False, False, False]
    worker, host = fake_worker()
    checkpoints._kept.clear()
    checkpoints._kept[('a', 's')] = Checkpoint('a', 's', digest, (None, None), worker, [], [], 0, 0, {})
    host.sendall(b'x')  # the worker sent something nobody read: not idle, not taken
    assert checkpoints.take('a', 's', digest, (None, None)) is None and worker.sock.fileno() == -1
    worker, host = fake_worker()
    checkpoints._kept[('a', 's')] = Checkpoint('a', 's', digest, (None, None), worker, [], [], 0, 0, {})
    assert checkpoints.take('a', 's', digest, (None, None)).worker is worker
    assert recorder.taken[-2:] == [False, True]


@pytest.mark.parametrize(
    ('options', 'message'),
    [
        ({'count': 0}, 'CheckpointLimits.count must be a positive int, not 0'),
        ({'memory': 1.5}, 'CheckpointLimits.memory must be a positive int, not 1.5'),
        ({'tenant_count': -1}, 'CheckpointLimits.tenant_count must be a positive int, not -1'),
        ({'tenant_memory': True}, 'CheckpointLimits.tenant_memory must be a positive int, not True'),
    ],
)
def test_checkpoint_limits_refuse_what_is_no_positive_int(options, message):
    with pytest.raises(ValueError) as raised:
        corral.CheckpointLimits(**options)
    assert str(raised.value) == message


async def both_paths(store_url, feeds, later):
    """The generated feeds run in a stored session that closes; one checkout starts from its
    checkpoint, a fork of it replays the journal in a pool without checkpoints; both go on alike."""
    recorder = Recorder()
    async with corral.Pool(state_key=KEY, store=store_url, observer=recorder, warm_workers=1) as pool, corral.Pool(
        state_key=KEY, store=store_url, checkpoints=None, warm_workers=1
    ) as replaying:
        async with pool.checkout(ephemeral=False) as original:
            await original.feed_run('import asyncio, random, uuid')
            for code, _ in feeds:
                await outcome(original, code)
            session_id = original.session_id
        assert pool._checkpoints._kept[('', session_id)].stored is not None  # its rows are taken unchecked: see `StoredBytes`
        async with replaying.checkout(session_id=session_id, fork=True) as replayed, pool.checkout(session_id=session_id) as resumed:
            assert recorder.taken == [True]
            reads = '[' + ', '.join(read for _, read in feeds) + ']'
            for code in [*later, reads]:
                results = [await outcome(session, code) for session in (resumed, replayed)]
                assert results[0] == results[1], code


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(runs())
@pytest.mark.slow
def test_a_session_from_its_checkpoint_goes_on_exactly_as_one_replayed(tmp_path_factory, run):
    feeds, later, _ = run
    store_url = f'sqlite:///{tmp_path_factory.mktemp("store")}/store.db'
    asyncio.run(both_paths(store_url, feeds, later))


def cpu_ticks(pid):
    with open(f'/proc/{pid}/stat') as stat:
        fields = stat.read().rpartition(')')[2].split()
    return int(fields[11]) + int(fields[12])


STOPPED_AS_DROPPED = (
    "TimeoutError: the code the script's value or exception ran as they were dropped (a generator's finally) did not end within 0.1 seconds"
)
SPIN_IN_FINALLY = 'def spin():\n    try:\n        yield 1\n    finally:\n        while True:\n            pass\n'
# The feed's value, or a frame of its exception, holds a generator whose `finally` never ends:
# it ran as the worker dropped them after its reply, in a worker the host took for idle and kept.
DROPPED_AFTER_THE_REPLY = [
    (
        SPIN_IN_FINALLY + 'def started():\n    z = spin()\n    next(z)\n    return z\nstarted()',
        STOPPED_AS_DROPPED,
    ),
    (
        SPIN_IN_FINALLY + 'def fails():\n    z = spin()\n    next(z)\n    raise ValueError("no")\nfails()',
        STOPPED_AS_DROPPED,
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(('code', 'message'), DROPPED_AFTER_THE_REPLY)
async def test_no_line_of_the_script_runs_after_its_reply_in_a_kept_worker(store_url, code, message):
    async with corral.Pool(state_key=KEY, store=store_url) as pool:
        async with pool.checkout(ephemeral=False, limits=corral.Limits(wall_time=2)) as session:
            with pytest.raises(corral.SandboxLimitError) as raised:
                await session.feed_run(code)
            assert str(raised.value) == message
            assert await session.feed_run('1 + 1') == 2
            session_id, pid = session.session_id, session._worker.pid
        assert len(pool._checkpoints) == 1
        ticks = cpu_ticks(pid)
        await asyncio.sleep(1)
        assert cpu_ticks(pid) - ticks <= 1  # parked, it computes nothing (it spun with no end, counted by no one)
        async with pool.checkout(session_id=session_id, limits=corral.Limits(wall_time=2)) as session:
            assert session._worker.pid == pid
            assert await session.feed_run('2 + 2') == 4
            assert session.cpu_seconds < 0.5


def tamper_rows(db, session_id, how, older):
    """Change the SQLite rows of a stored session as someone who can write the store would."""
    import sqlite3

    tables = ('corral_sessions', 'corral_generations', 'corral_records')
    connection = sqlite3.connect(db)
    last = 'SELECT max(generation) FROM corral_records WHERE session_id = ?'
    if how == 'a byte of the last record flipped':
        generation, record = connection.execute(f'SELECT generation, record FROM corral_records WHERE session_id = ? AND generation = ({last})', (session_id, session_id)).fetchone()
        record = bytearray(record)
        record[len(record) // 2] ^= 1
        connection.execute('UPDATE corral_records SET record = ? WHERE session_id = ? AND generation = ?', (bytes(record), session_id, generation))
    elif how == 'the last record dropped':
        connection.execute(f'DELETE FROM corral_records WHERE session_id = ? AND generation = ({last})', (session_id, session_id))
    elif how == 'two records swapped':
        (first, one), (second, other) = connection.execute('SELECT generation, record FROM corral_records WHERE session_id = ? ORDER BY generation', (session_id,)).fetchall()[-2:]
        connection.execute('UPDATE corral_records SET record = ? WHERE session_id = ? AND generation = ?', (other, session_id, first))
        connection.execute('UPDATE corral_records SET record = ? WHERE session_id = ? AND generation = ?', (one, session_id, second))
    elif how == 'the generation moved on':
        connection.execute('UPDATE corral_generations SET generation = generation + 1 WHERE session_id = ?', (session_id,))
    elif how != 'nothing':  # every row put back as it was, or copied under another session id or tenant
        for table in tables:
            rows = older[table] if how == 'an older state put back' else connection.execute(f'SELECT * FROM {table} WHERE session_id = ?', (session_id,)).fetchall()
            if how == 'an older state put back':
                connection.execute(f'DELETE FROM {table} WHERE session_id = ?', (session_id,))
            for row in rows:
                row = list(row)
                if how == 'the rows under another id':
                    row[1] = 'f' * 32
                elif how == 'the rows under another tenant':
                    row[0] = 'other'
                connection.execute(f'INSERT INTO {table} VALUES ({", ".join("?" * len(row))})', row)
    older.update({table: connection.execute(f'SELECT * FROM {table} WHERE session_id = ?', (session_id,)).fetchall() for table in tables})
    connection.commit()
    connection.close()


TAMPERED = {
    'nothing': ('ok', [3, 4]),
    'a byte of the last record flipped': "the session state was altered, or signed with another key: its signature does not match this pool's state key",
    'the last record dropped': "the stored state of session 'SID' is of generation 4 where the store is at generation 5: an older state of the session was put back (rolled back), so it is refused",
    'two records swapped': "the stored state of session 'SID' was altered: its record of generation 5 does not follow the part before it (generation 3): a record was dropped, reordered, or put back from an older state",
    'the generation moved on': "the stored state of session 'SID' is of generation 5 where the store is at generation 6: an older state of the session was put back (rolled back), so it is refused",
    'an older state put back': ('ok', 'no y'),  # whole and signed: as a replay takes it
    'the rows under another id': "the stored state of session 'ffffffffffffffffffffffffffffffff' holds a state of another session: it was copied into this row, so it is refused",
    'the rows under another tenant': "the stored state of session 'SID' holds a state of another tenant's session: it was copied into this row, so it is refused",
}


@pytest.mark.parametrize('fork', [False, True])
@pytest.mark.parametrize('how', list(TAMPERED))
async def test_rows_changed_in_the_store_while_a_checkpoint_is_kept_are_refused_or_replayed_as_without_it(tmp_path, how, fork):
    """Whoever can write the store changes a stored session's rows while this pool keeps its
    checkpoint: the checkout by id (or fork) refuses them, or takes what they hold, exactly as a
    pool without checkpoints does; the checkpoint's worker serves only the untouched rows."""
    outcomes = []
    for number, checkpoints in enumerate(({}, {'checkpoints': None})):
        db, older = f'{tmp_path}/store{number}.db', {}
        async with corral.Pool(state_key=KEY, store=f'sqlite:///{db}', **checkpoints) as pool:
            async with pool.checkout(ephemeral=False) as session:
                for code in ('x = 1', 'x = 2'):
                    await session.feed_run(code)
                tamper_rows(db, session.session_id, 'nothing', older)
                for code in ('x = 3', 'y = 4'):
                    await session.feed_run(code)
                session_id, pid = session.session_id, session._worker.pid
            tamper_rows(db, session_id, how, older)
            target = 'f' * 32 if how == 'the rows under another id' else session_id
            try:
                async with pool.checkout(session_id=target, tenant='other' if how.endswith('tenant') else '', fork=fork) as session:
                    value = await session.feed_run("try:\n    found = [x, y]\nexcept NameError:\n    found = 'no y'\nfound")
                    outcomes.append(('ok', value))
                    assert (session._worker.pid == pid) is (how == 'nothing' and not checkpoints)
            except corral.SandboxStateError as error:
                outcomes.append(str(error).replace(session_id, 'SID'))
    assert outcomes == [TAMPERED[how]] * 2


async def test_concurrent_checkouts_of_one_id_take_its_checkpoint_once_and_forks_of_forks_keep_apart(store_url):
    """Three checkouts of one stored session at once: the lease lets one in (it takes the
    checkpoint), the others are refused as busy. Two forks at once: one starts from the checkpoint,
    the other replays, both from the same state. A fork of a fork starts from its source's
    checkpoint, and each session keeps its own state."""
    async with corral.Pool(state_key=KEY, store=store_url) as pool:
        session_id, pid = await stored(pool, ['x = 1'])

        async def bump():
            try:
                async with pool.checkout(session_id=session_id) as session:
                    value = await session.feed_run('x += 1\nx')
                    await asyncio.sleep(0.2)
                    return value, session._worker.pid == pid
            except corral.SandboxSessionBusyError as error:
                return str(error).replace(session_id, 'SID')

        busy = "the stored session 'SID' is checked out elsewhere: another holder has its lease, which expires in 30 s unless that holder renews it"
        assert sorted(await asyncio.gather(bump(), bump(), bump()), key=str) == [(2, True), busy, busy]

        async def fork(source):
            async with pool.checkout(session_id=source, fork=True) as session:
                return await session.feed_run('x'), session.session_id, session._worker.pid

        (one, one_id, one_pid), (other, other_id, other_pid) = await asyncio.gather(fork(session_id), fork(session_id))
        assert (one, other) == (2, 2) and len({one_id, other_id, session_id}) == 3 and pid in (one_pid, other_pid) and one_pid != other_pid
        async with pool.checkout(session_id=session_id, fork=True) as first:
            await first.feed_run('x = 100')
            first_id, first_pid = first.session_id, first._worker.pid
        async with pool.checkout(session_id=first_id, fork=True) as second:
            assert (await second.feed_run('x'), second._worker.pid) == (100, first_pid)
            await second.feed_run('x = 200')
            second_id = second.session_id
        values = []
        for source in (session_id, first_id, second_id):
            async with pool.checkout(session_id=source) as session:
                values.append(await session.feed_run('x'))
        assert values == [2, 100, 200]


@pytest.mark.parametrize('door', [{'k': [1, (2, 3)]}, {'k': {1: 'one'}}], ids=['tuple', 'int-key'])
async def test_door_state_comes_back_from_a_checkpoint_as_the_bytes_hold_it(store_url, door):
    """A load from a checkpoint (a stored session's checkout by id, a dumped session's load) gives
    door_state as a load that reads the bytes does: a tuple as a list; a map keyed by an int,
    which the bytes cannot hold, refused the same way."""
    outcomes = []
    for number, checkpoints in enumerate(({}, {'checkpoints': None})):
        async with corral.Pool(state_key=KEY, store=f'{store_url}{number}', **checkpoints) as pool:
            async with pool.checkout(ephemeral=False) as session:
                await session.feed_run('x = 1')
                session.door_state.update(door)
                await session.feed_run('y = 2')  # written with the door
                session_id = session.session_id
            async with pool.checkout() as session:
                await session.feed_run('x = 1')
                session.door_state.update(door)
                dumped = await session.dump()
            for load in ('checkout', 'load_session'):
                try:
                    if load == 'checkout':
                        async with pool.checkout(session_id=session_id) as session:
                            outcomes.append((load, session.door_state))
                    else:
                        async with pool.checkout() as session:
                            await session.load_session(dumped)
                            outcomes.append((load, session.door_state))
                except corral.SandboxStateError as error:
                    outcomes.append((load, str(error)))
    refused = 'the session state is malformed (int is not allowed for map key when strict_map_key=True)'
    expected = {'k': [1, [2, 3]]} if 'k' in door and isinstance(door['k'], list) else refused
    assert outcomes == [('checkout', expected), ('load_session', expected)] * 2
