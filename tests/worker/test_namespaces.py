"""The namespaces and the uid of the workers, seen from inside a worker and from the host.

A probe script runs in a real pool's worker with the language layer skipped (so it can make raw
system calls, as native code that got past the guard could) and reports what it sees: its ids, the
hostname, pids, the peers of its sockets, whether a host path, a host process, a host port and a
host SysV shared-memory segment can be reached. Each layer is also switched off on its own (with
seccomp off too, so that only the namespaces stand between the probe and the host), to show what
it blocks. CI runs as root, so the same checks run in a child that drops to uid 65534 first.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import json
import os
import select
import signal
import socket
import stat
import struct
import sys
import tempfile
from typing import Any

import pytest

import corral
from corral.worker import namespaces

_libc = ctypes.CDLL(None, use_errno=True)
_IPC_CREAT, _IPC_RMID = 0o1000, 0
_HOST_PATH = '/etc/passwd'  # exists on every Linux host; the probe only stats it

PROBE = r'''
import ctypes, errno, os, socket, struct

libc = ctypes.CDLL(None, use_errno=True)

def failure(result):
    return ctypes.get_errno() if result < 0 else 0

def connect():
    try:
        probe = socket.socket()
    except OSError as error:
        return error.errno
    try:
        probe.settimeout(2)
        probe.connect(('127.0.0.1', PORT))
        return 0
    except OSError as error:
        return error.errno
    finally:
        probe.close()

def kill():
    try:
        os.kill(HOST_PID, 0)
        return 0
    except OSError as error:
        return error.errno

peers = set()
for fd in range(64):
    try:
        sock = socket.socket(fileno=fd)
    except OSError:
        continue
    try:
        peers.add(struct.unpack('3i', sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0])
    except OSError:
        pass
    finally:
        sock.detach()
buffer = ctypes.create_string_buffer(256)
libc.syscall.restype = ctypes.c_long
{
    'ids': [list(os.getresuid()), list(os.getresgid()), os.getgroups()],
    'hostname': os.uname().nodename,
    'pid': os.getpid(),
    'ppid': os.getppid(),
    'peers': sorted(peers),
    'stat': failure(libc.syscall(262, -100, HOST_PATH.encode(), buffer, 0x1000)),
    'kill': kill(),
    'connect': connect(),
    'shm': failure(libc.shmget(SHM_KEY, 0, 0)),
}
'''


class Host:
    """What the probe tries to reach: a listening port, a shared-memory segment, this process."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(('127.0.0.1', 0))
        self.listener.listen()
        self.key = 0x6C0000 + os.getpid() % 0xFFFF
        self.shm = _libc.shmget(self.key, 4096, _IPC_CREAT | 0o666)
        assert self.shm >= 0, os.strerror(ctypes.get_errno())

    def script(self) -> str:
        values = {'PORT': self.listener.getsockname()[1], 'HOST_PID': os.getpid(), 'SHM_KEY': self.key, 'HOST_PATH': repr(_HOST_PATH)}
        code = PROBE
        for name, value in values.items():
            code = code.replace(name, str(value))
        return code

    def close(self) -> None:
        self.listener.close()
        _libc.shmctl(self.shm, _IPC_RMID, None)


async def probe(skip: set[str]) -> dict[str, Any]:
    """The probe's report from a worker of `Pool(skip_layers=skip | {'language'})`, and the pids
    the host sees: the worker's and the zygote's, and the peer of its end of the channel."""
    host = Host()
    try:
        async with corral.Pool(warm_workers=0, skip_layers=skip | {'language'}) as pool:
            async with pool.checkout() as session:
                report = await session.feed_run(host.script())
                peer = struct.unpack('3i', session._worker.sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
                report['host view'] = {'worker': session._worker.pid, 'zygote': pool._zygote.pid, 'channel peer': peer}
    finally:
        host.close()
    return report


def _expected_ids() -> list[list[int]]:
    # inside the user namespace the worker is 65534; its supplementary groups are the host
    # user's, shown as 65534 (unmapped), or none when started as root (they are cleared)
    groups = [] if os.geteuid() == 0 else [65534] * len(os.getgroups())
    return [[65534] * 3, [65534] * 3, groups]


def _check_full_lockdown(report: dict[str, Any]) -> None:
    view = report.pop('host view')
    assert report == {
        'ids': _expected_ids(),
        'hostname': 'sandbox',
        'pid': report['pid'],
        'ppid': 1,
        'peers': [1],  # the channel, made by the zygote (pid 1): a worker's event loop holds no socket
        'stat': errno.ENOENT,
        'kill': errno.EPERM,  # seccomp
        'connect': errno.EPERM,  # seccomp: no socket()
        'shm': errno.EPERM,  # seccomp
    }
    assert 2 <= report['pid'] < view['zygote']  # a pid of the PID namespace, never the host's
    assert view['channel peer'] == view['zygote'] != view['worker']  # the host sees host pids


async def test_a_worker_runs_in_its_namespaces_as_an_unprivileged_uid():
    _check_full_lockdown(await probe(set()))


async def test_the_namespaces_alone_keep_native_code_from_the_host():
    # seccomp off: only the namespaces and the uid stand between the probe and the host
    report = await probe({'seccomp'})
    report.pop('host view')
    assert {key: report[key] for key in ('ids', 'hostname', 'ppid', 'stat', 'kill', 'connect', 'shm')} == {
        'ids': _expected_ids(),
        'hostname': 'sandbox',
        'ppid': 1,
        'stat': errno.ENOENT,  # the root is an empty tmpfs
        'kill': errno.ESRCH,  # the host's pid names no process in the PID namespace
        'connect': errno.ENETUNREACH,  # the network namespace has only a loopback device, down
        'shm': errno.ENOENT,  # the IPC namespace has none of the host's segments
    }


@pytest.mark.parametrize(
    ('layer', 'field', 'blocked', 'open_'),
    [
        ('mntns', 'stat', errno.ENOENT, 0),
        ('netns', 'connect', errno.ENETUNREACH, 0),
        ('ipcns', 'shm', errno.ENOENT, 0),
        ('utsns', 'hostname', 'sandbox', os.uname().nodename),
        ('pidns', 'ppid', 1, 'zygote'),
    ],
)
async def test_each_namespace_blocks_on_its_own(layer, field, blocked, open_):
    """With seccomp off, each namespace is what blocks its probe: skip it too and the host shows."""
    with_layer = await probe({'seccomp'})
    without = await probe({'seccomp', layer})
    if open_ == 'zygote':
        open_ = without['host view']['zygote']
    assert (with_layer[field], without[field]) == (blocked, open_)


async def test_without_the_pid_namespace_a_worker_sees_host_pids():
    report = await probe({'pidns'})
    view = report['host view']
    assert (report['pid'], report['ppid'], view['channel peer']) == (view['worker'], view['zygote'], view['zygote'])
    assert report['peers'] == [view['zygote']]


@pytest.mark.skipif(os.geteuid() != 0, reason='the uid switch is a root start')
async def test_started_as_root_without_a_user_namespace_workers_run_as_nobody():
    report = await probe({'userns'})
    assert report['ids'] == [[65534] * 3, [65534] * 3, []]


@pytest.mark.skipif(os.geteuid() != 0, reason='the uid switch is a root start')
async def test_skipping_the_uid_layer_keeps_root():
    report = await probe({'userns', 'uid'})
    assert report['ids'][0] == [0, 0, 0]


# ----- as an ordinary user -------------------------------------------------------------------------

_CLONE_NEWNS, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x20000, 4096, 16384, 1 << 18


def _done(result: int) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def _reach_the_interpreter() -> None:
    """In a private mount namespace, let every user reach this interpreter's files (a venv's and
    the Python it was made from): the first folder on each path that others may not enter (such
    as a 0700 home of root) is covered by a tmpfs holding the next folder of the path, bound back
    in place."""
    covered: dict[str, str] = {}  # folder covered -> the holder of its real content
    for prefix in sorted({os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)}):
        folder = '/'
        for part in prefix.strip('/').split('/'):
            inner = os.path.join(folder, part)
            if folder in covered or not os.stat(folder).st_mode & stat.S_IXOTH:
                if folder not in covered:
                    _done(_libc.unshare(_CLONE_NEWNS))
                    _done(_libc.mount(None, b'/', None, _MS_REC | _MS_PRIVATE, None))
                    covered[folder] = tempfile.mkdtemp()
                    _done(_libc.mount(folder.encode(), covered[folder].encode(), None, _MS_BIND | _MS_REC, None))
                    _done(_libc.mount(b'tmpfs', folder.encode(), b'tmpfs', 0, b'mode=0755'))
                if not os.path.isdir(inner):
                    os.mkdir(inner)
                    held = os.path.join(covered[folder], part).encode()
                    _done(_libc.mount(held, inner.encode(), None, _MS_BIND | _MS_REC, None))
                break
            folder = inner


#: Why a test that runs as uid 65534 is skipped where that user cannot run this interpreter.
_UNREACHABLE = (
    'uid 65534 cannot run this interpreter ({error}) and this process cannot make it reachable (that takes '
    'root and a mount namespace): run the tests as an ordinary user, or with a Python that every user may '
    'read and execute (installed under /usr or /opt, not in a home folder)'
)


def _drop_to_nobody() -> None:
    try:
        _reach_the_interpreter()
    except OSError as error:
        raise _Unreachable(_UNREACHABLE.format(error=error.strerror)) from None
    home = tempfile.mkdtemp()
    os.chown(home, 65534, 65534)
    os.environ['HOME'] = home
    os.setgroups([])
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)
    for path in (os.path.realpath(sys.executable), os.path.join(os.path.realpath(sys.base_prefix), 'lib')):
        if not os.access(path, os.R_OK | os.X_OK):
            raise _Unreachable(_UNREACHABLE.format(error=f'{path} is not readable and executable by it'))


class _Unreachable(Exception):
    """The child cannot become a user that runs this interpreter: the test is skipped, saying why."""


def in_child(setup: Any, coroutine_function: Any) -> Any:
    """Run `setup()` then `coroutine_function()` in a forked child; return the JSON-able result."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            try:
                setup()
            except _Unreachable as error:
                os.write(write_end, json.dumps({'skip': str(error)}).encode())
                os._exit(0)
            try:
                report: Any = {'result': asyncio.run(coroutine_function())}
            except BaseException as error:  # noqa: BLE001 - reported to the parent
                report = {'raised': f'{type(error).__name__}: {error}'}
            os.write(write_end, json.dumps(report).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([read_end], [], [], 120)
            if not ready:
                os.kill(pid, signal.SIGKILL)
                pytest.fail('the child did not finish within 120 s')
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    report = json.loads(b''.join(chunks))
    if 'skip' in report:
        pytest.skip(report['skip'])
    assert 'result' in report, report
    return report['result']


def as_ordinary_user(coroutine_function: Any) -> Any:
    """Run `coroutine_function()` as uid and gid 65534 with no groups, and return its JSON-able
    result: in a forked child that drops to that user when this process is root, else here."""
    if os.geteuid() != 0:
        return asyncio.run(coroutine_function())
    return in_child(_drop_to_nobody, coroutine_function)


async def refusal(skip: set[str] = frozenset()) -> str:
    """The display text of the pool's refusal to start (or 'started')."""
    try:
        async with corral.Pool(warm_workers=0, skip_layers=skip) as pool:
            await pool.start()
    except corral.SandboxInsecureError as error:
        return error.display()
    return 'started'


def get_data(key: str) -> dict[str, Any]:
    return {'key': key, 'rows': [1, 2, 3]}


async def _ordinary_user_session() -> dict[str, Any]:
    async with corral.Pool(warm_workers=0) as pool:
        async with pool.checkout() as session:
            total = await session.feed_run("data = get_data('k')\nsum(data['rows'])", external_lookup={'get_data': get_data})
            again = await session.feed_run('data["key"] * 2')
    return {'uid': os.getuid(), 'total': total, 'again': again, 'probe': await probe(set())}


@pytest.mark.forks
def test_an_ordinary_user_runs_a_checkout_a_host_call_and_the_lockdown_checks():
    report = as_ordinary_user(_ordinary_user_session)
    uid = 65534 if os.geteuid() == 0 else os.getuid()  # root drops to 65534; an ordinary user stays itself
    assert {key: report[key] for key in ('uid', 'total', 'again')} == {'uid': uid, 'total': 6, 'again': 'kk'}
    probed = report['probe']
    if os.geteuid() == 0:
        probed['ids'][2] = []  # the child cleared its groups before it dropped to 65534
    _check_full_lockdown(probed)


async def _ordinary_user_checkpoint() -> dict[str, Any]:
    async with corral.Pool(warm_workers=0, state_key=b'ordinary-user-state-key-01234567') as pool:
        async with pool.checkout() as session:
            await session.feed_run('x = [1, 2, 3]')
            state = await session.dump()
            pid = session._worker.pid
        kept = len(pool._checkpoints)
        async with pool.checkout() as session:
            await session.load_session(state)
            return {'kept': kept, 'taken': session._worker.pid == pid, 'x': await session.feed_run('x')}


@pytest.mark.forks
def test_an_ordinary_users_pool_keeps_live_checkpoints():
    """A worker is not dumpable, so a host that is not root may not read its smaps_rollup: the
    checkpoint's memory could not be read, and every checkpoint was killed as it was kept."""
    assert as_ordinary_user(_ordinary_user_checkpoint) == {'kept': 1, 'taken': True, 'x': [1, 2, 3]}


@pytest.mark.forks
def test_an_ordinary_user_without_a_user_namespace_is_refused_with_the_ways_on():
    lines = as_ordinary_user(lambda: refusal({'userns'})).split('\n')
    why = 'Operation not permitted (it needs CAP_SYS_ADMIN, which an ordinary user has only inside a user namespace: layer userns)'
    assert lines == [
        'refusing to run scripts: these lockdown layers are not available on this machine:',
        f'- netns: unshare(CLONE_NEWNET) failed: {why}',
        f'- mntns: unshare(CLONE_NEWNS) failed: {why}',
        f'- pidns: unshare(CLONE_NEWPID) failed: {why}',
        f'- utsns: unshare(CLONE_NEWUTS) failed: {why}',
        f'- ipcns: unshare(CLONE_NEWIPC) failed: {why}',
        'To enable them:',
        '- ' + namespaces.REMEDIES['netns'][0],
        '- ' + namespaces.REMEDIES['mntns'][1],
        "Or run without them, knowing scripts are then less contained: Pool(skip_layers=['ipcns', 'mntns', 'netns', 'pidns', 'utsns']), "
        'or on the command line --skip-layers ipcns,mntns,netns,pidns,utsns.',
    ]


_SKIP_HINT = (
    "Or run without them, knowing scripts are then less contained: Pool(skip_layers=['ipcns', 'mntns', 'netns', 'pidns', 'userns', 'utsns']), "
    'or on the command line --skip-layers ipcns,mntns,netns,pidns,userns,utsns.'
)


def _refuse_namespaces() -> None:
    """A seccomp filter that answers unshare(2) with EPERM, as Docker's default profile does for a
    container without CAP_SYS_ADMIN."""
    import pyseccomp

    rules = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    rules.add_rule(pyseccomp.ERRNO(errno.EPERM), 'unshare')
    rules.load()


@pytest.mark.forks
def test_a_seccomp_profile_that_refuses_namespaces_is_named_with_the_ways_on():
    text = in_child(_refuse_namespaces, refusal)
    policy = 'Operation not permitted (a seccomp, AppArmor or SELinux policy forbids it)'
    if os.geteuid() != 0:
        policy = 'Operation not permitted (it needs CAP_SYS_ADMIN, which an ordinary user has only inside a user namespace: layer userns)'
    assert text.split('\n') == [
        'refusing to run scripts: these lockdown layers are not available on this machine:',
        '- userns: unshare(CLONE_NEWUSER) failed: Operation not permitted '
        "(a seccomp profile forbids it (Docker's default profile does), or the process is in a chroot)",
        f'- netns: unshare(CLONE_NEWNET) failed: {policy}',
        f'- mntns: unshare(CLONE_NEWNS) failed: {policy}',
        f'- pidns: unshare(CLONE_NEWPID) failed: {policy}',
        f'- utsns: unshare(CLONE_NEWUTS) failed: {policy}',
        f'- ipcns: unshare(CLONE_NEWIPC) failed: {policy}',
        'To enable them:',
        '- ' + namespaces.REMEDIES['userns'][0],
        '- ' + namespaces.REMEDIES['netns'][0],
        '- ' + namespaces.REMEDIES['mntns'][1],
        _SKIP_HINT,
    ]


_CLONE_NEWUSER = 0x10000000


def _no_user_namespaces() -> None:
    """A user namespace (root in it, and 65534) whose sysctl user.max_user_namespaces is 0, as on a
    host where an administrator set it so."""
    ready_read, ready_write = os.pipe()
    me = os.getpid()
    helper = os.fork()
    if helper == 0:
        os.read(ready_read, 1)
        for name, data in (('uid_map', '0 0 1\n65534 65534 1'), ('gid_map', '0 0 1\n65534 65534 1')):
            with open(f'/proc/{me}/{name}', 'w') as file:
                file.write(data)
        os._exit(0)
    assert _libc.unshare(_CLONE_NEWUSER) == 0
    os.write(ready_write, b'y')
    os.waitpid(helper, 0)
    os.setresuid(0, 0, 0)
    with open('/proc/sys/user/max_user_namespaces', 'w') as file:
        file.write('0')


@pytest.mark.forks
@pytest.mark.skipif(os.geteuid() != 0, reason='mapping two ids into a user namespace takes root')
def test_a_sysctl_that_forbids_user_namespaces_is_named():
    assert in_child(_no_user_namespaces, refusal).split('\n') == [
        'refusing to run scripts: these lockdown layers are not available on this machine:',
        '- userns: unshare(CLONE_NEWUSER) failed: No space left on device (the sysctl user.max_user_namespaces is 0: 0 forbids them)',
        'To enable them:',
        '- ' + namespaces.REMEDIES['userns'][0],
        "Or run without them, knowing scripts are then less contained: Pool(skip_layers=['userns']), "
        'or on the command line --skip-layers userns.',
    ]


@pytest.mark.forks
def test_a_sessions_cpu_seconds_are_read_as_an_ordinary_user():
    """`Session.cpu_seconds` reads the worker's /proc entry, which an ordinary user may read too."""

    async def burn() -> list[float]:
        async with corral.Pool(warm_workers=0) as pool, pool.checkout() as session:
            start = session.cpu_seconds
            await session.feed_run('total = 0\nfor i in range(2_000_000):\n    total += i\ntotal')
            return [start, session.cpu_seconds]

    start, after = as_ordinary_user(burn)
    assert after > start + 0.05


def _hidden_from_others() -> bool:
    """Whether this interpreter lies behind a folder that other users may not enter."""
    for prefix in {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)}:
        folder = '/'
        for part in prefix.strip('/').split('/'):
            if not os.stat(folder).st_mode & stat.S_IXOTH:
                return True
            folder = os.path.join(folder, part)
    return False


@pytest.mark.forks
@pytest.mark.skipif(os.geteuid() != 0 or not _hidden_from_others(), reason='needs root, with this interpreter in a folder others may not enter')
def test_a_test_that_cannot_make_the_interpreter_reachable_for_nobody_skips_saying_why():
    with pytest.raises(pytest.skip.Exception) as info:
        in_child(lambda: (_refuse_namespaces(), _drop_to_nobody()), refusal)
    assert info.value.msg == _UNREACHABLE.format(error='Operation not permitted')
