"""Tests for corral.worker.lockdown.

Every test forks a child (`os.fork`) that locks itself down, tries something, and reports a JSON
value over a pipe it kept; the parent asserts exact outcomes. Children always leave by `os._exit`.
"""

from __future__ import annotations

import asyncio
import ctypes
import datetime
import decimal
import encodings.idna  # noqa: F401  (socket.create_connection needs it; a locked child cannot import)
import errno
import fcntl
import gc
import hashlib
import json
import mmap
import os
import random
import resource
import select
import signal
import socket
import subprocess
import sys
import termios
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from corral.worker import lockdown
from corral.worker import namespaces
from corral.worker.lockdown import LockdownLimits, available_layers, lock_down

pytestmark = pytest.mark.forks


def _layers() -> dict[str, str | None]:
    """`available_layers()` as a fresh process finds them: it forks a probe, which this process, where
    other threads may run (a library's native ones, from collecting other modules), must not."""
    code = 'import json; from corral.worker.lockdown import available_layers; print(json.dumps(available_layers()))'
    return json.loads(subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True, timeout=120).stdout)


LAYERS = _layers()
needs_seccomp = pytest.mark.skipif(LAYERS['seccomp'] is not None, reason=f'seccomp unavailable: {LAYERS["seccomp"]}')

_libc = ctypes.CDLL(None, use_errno=True)  # made before forking: dlopen after lockdown is not allowed
_PR_GET_DUMPABLE, _PR_SET_DUMPABLE, _PR_GET_SECCOMP, _PR_GET_NO_NEW_PRIVS = 3, 4, 21, 39
_PTRACE_TRACEME = 0
#: In a child, the write end of the pipe it reports through (so an action can keep it).
REPORT_FD = -1


class Child:
    """What a forked child reported and how it ended."""

    def __init__(self, report: Any, status: int) -> None:
        self.report = report
        self.status = status

    @property
    def exit_code(self) -> int | None:
        return os.WEXITSTATUS(self.status) if os.WIFEXITED(self.status) else None

    @property
    def signal(self) -> int | None:
        return os.WTERMSIG(self.status) if os.WIFSIGNALED(self.status) else None


def in_child(
    action: Callable[[Any], Any],
    *,
    prepare: Callable[[], tuple[Any, set[int]]] | None = None,
    limits: LockdownLimits | None = None,
    seccomp: bool = True,
    lock: bool = True,
    timeout: float = 60.0,
) -> Child:
    """Fork; in the child run `prepare()` (returns a state and fds to keep), lock down, then
    `action(state)`, and send back its JSON-able result (or the exception it raised)."""
    global REPORT_FD
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            REPORT_FD = write_end
            state, keep = prepare() if prepare is not None else (None, set())
            if lock:
                lock_down(keep_fds={write_end, *keep}, limits=limits or LockdownLimits(), seccomp=seccomp)
            try:
                report: Any = {'result': action(state)}
            except BaseException as error:  # noqa: BLE001 - reported to the parent
                report = {'raised': describe(error)}
            os.write(write_end, json.dumps(report).encode())
        except BaseException as error:  # noqa: BLE001 - a failure before the action ran
            try:
                os.write(write_end, json.dumps({'setup_failed': describe(error)}).encode())
            except BaseException:  # noqa: BLE001
                pass
        finally:
            os._exit(0)
    os.close(write_end)
    chunks = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            ready, _, _ = select.select([read_end], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                pytest.fail(f'the child did not finish within {timeout} s')
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        _, status = os.waitpid(pid, 0)
    data = b''.join(chunks)
    return Child(json.loads(data) if data else None, status)


def describe(error: BaseException) -> dict[str, Any]:
    return {'type': type(error).__name__, 'errno': getattr(error, 'errno', None), 'message': str(error)}


def attempt(function: Callable[[], Any]) -> dict[str, Any]:
    """What calling `function` did: {'returned': repr} or {'raised': type, 'errno': errno}."""
    try:
        value = function()
    except BaseException as error:  # noqa: BLE001
        return {'raised': type(error).__name__, 'errno': getattr(error, 'errno', None)}
    return {'returned': repr(value)}


EPERM = {'raised': 'PermissionError', 'errno': errno.EPERM}


def result(child: Child) -> Any:
    assert child.exit_code == 0, f'child ended with status {child.status:#x}, report {child.report}'
    assert child.report is not None and 'result' in child.report, child.report
    return child.report['result']


# ----- the workload a locked worker must still be able to run -------------------------------------

SCRIPT = r'''
import json, re

class Node:
    def __init__(self, value, next=None):
        self.value, self.next = value, next

    def __iter__(self):
        node = self
        while node is not None:
            yield node.value
            node = node.next

def squares(n):
    for i in range(n):
        yield i * i

def depth(n):
    return 0 if n == 0 else 1 + depth(n - 1)

chain = None
for i in range(1000):
    chain = Node(i, chain)
big = [0] * (100 * 1024 * 1024 // 8)   # 100 MB of pointers
big[-1] = 7
text = json.dumps({"squares": sum(squares(1000)), "chain": sum(chain), "nested": [1, {"a": None}]})
result = {
    "json": json.loads(text),
    "depth": depth(900),
    "big": len(big) + big[-1],
    "re": re.findall(r"(\w+)=(\d+)", "a=1 bb=22 ccc=333"),
    "comprehension": sorted({k: v for k, v in zip("cab", range(3))}.items()),
}
'''


def _prepare_loop() -> tuple[Any, set[int]]:
    loop: Any = asyncio.new_event_loop()  # its private fds: the selector's and the self-pipe
    output_read, output_write = os.pipe()
    keep = {loop._selector.fileno(), loop._ssock.fileno(), loop._csock.fileno(), output_read, output_write}
    return (loop, output_read, output_write), keep


def _workload(state: Any) -> dict[str, Any]:
    # Every module used here was imported before the fork: a locked worker cannot import.
    loop, output_read, output_write = state
    namespace: dict[str, Any] = {}
    exec(compile(SCRIPT, '<script>', 'exec'), namespace)
    report: dict[str, Any] = dict(namespace['result'])

    async def one(i: int) -> int:
        await asyncio.sleep(0.01)
        return i * 2

    async def gather() -> list[int]:
        return await asyncio.gather(*(one(i) for i in range(10)))

    started = time.monotonic()
    report['gather'] = loop.run_until_complete(gather())
    report['monotonic_advanced'] = time.monotonic() - started >= 0.01

    fired: list[int] = []
    signal.signal(signal.SIGALRM, lambda signum, frame: fired.append(signum))
    signal.setitimer(signal.ITIMER_REAL, 0.02)
    deadline = time.monotonic() + 5
    while not fired and time.monotonic() < deadline:
        time.sleep(0.001)
    report['alarm'] = fired == [signal.SIGALRM]

    held = threading.Lock()
    held.acquire()
    report['lock_timeout'] = held.acquire(timeout=0.01)  # a contended lock waits on a futex
    report['random'] = 0.0 <= random.random() < 1.0
    report['urandom'] = len(os.urandom(32))
    report['hash'] = hash('hello') == hash('hel' + 'lo')
    report['sha256'] = hashlib.sha256(b'corral').hexdigest()
    report['uuid'] = uuid.uuid4().version
    report['decimal'] = str(decimal.Decimal('1.10') * 3)
    report['datetime'] = datetime.datetime(2024, 1, 2, tzinfo=datetime.timezone.utc).isoformat()
    report['now'] = datetime.datetime.now().year >= 2024
    with os.fdopen(output_write, 'w', closefd=False) as output:
        print('printed', 42, file=output, flush=True)
    report['printed'] = os.read(output_read, 100).decode()
    loop.close()
    return report


@needs_seccomp
def test_locked_worker_runs_a_real_workload() -> None:
    report = result(in_child(_workload, prepare=_prepare_loop))
    assert report == {
        'json': {'squares': 332833500, 'chain': 499500, 'nested': [1, {'a': None}]},
        'depth': 900,
        'big': 100 * 1024 * 1024 // 8 + 7,
        're': [['a', '1'], ['bb', '22'], ['ccc', '333']],
        'comprehension': [['a', 1], ['b', 2], ['c', 0]],
        'gather': [0, 2, 4, 6, 8, 10, 12, 14, 16, 18],
        'monotonic_advanced': True,
        'alarm': True,
        'lock_timeout': False,
        'random': True,
        'urandom': 32,
        'hash': True,
        'sha256': hashlib.sha256(b'corral').hexdigest(),
        'uuid': 4,
        'decimal': '3.30',
        'datetime': '2024-01-02T00:00:00+00:00',
        'now': True,
        'printed': 'printed 42\n',
    }


@needs_seccomp
def test_print_reaches_a_kept_pipe() -> None:
    output_read, output_write = os.pipe()

    def prepare() -> tuple[Any, set[int]]:
        os.close(output_read)
        return output_write, {output_write}

    def action(fd: int) -> None:
        with os.fdopen(fd, 'w') as output:
            print('hello from', 'the sandbox', file=output)

    child = in_child(action, prepare=prepare)
    os.close(output_write)
    with os.fdopen(output_read) as output:
        assert output.read() == 'hello from the sandbox\n'
    assert result(child) is None


# ----- files, sockets, processes ------------------------------------------------------------------


@needs_seccomp
def test_files_cannot_be_opened_or_changed(tmp_path: Any) -> None:
    existing = tmp_path / 'existing'
    existing.write_text('x')

    def action(_: Any) -> dict[str, Any]:
        return {
            'open': attempt(lambda: open('/etc/passwd')),
            'os.open': attempt(lambda: os.open('/etc/passwd', os.O_RDONLY)),
            'create': attempt(lambda: open(str(tmp_path / 'new'), 'w')),
            'mkdir': attempt(lambda: os.mkdir(str(tmp_path / 'dir'))),
            'unlink': attempt(lambda: os.unlink(str(existing))),
            'rename': attempt(lambda: os.rename(str(existing), str(tmp_path / 'moved'))),
            'stat': attempt(lambda: os.stat('/etc/passwd')),
            'listdir': attempt(lambda: os.listdir('/')),
            'chdir': attempt(lambda: os.chdir('/')),
            'memfd': attempt(lambda: os.memfd_create('x')),
            'proc_environ': attempt(lambda: open('/proc/self/environ', 'rb')),
        }

    report = result(in_child(action))
    assert report == {name: EPERM for name in report}
    assert len(report) == 11
    assert sorted(p.name for p in tmp_path.iterdir()) == ['existing']


@needs_seccomp
def test_sockets_cannot_be_created() -> None:
    def action(_: Any) -> dict[str, Any]:
        return {
            'socket': attempt(socket.socket),
            'unix': attempt(lambda: socket.socket(socket.AF_UNIX)),
            'socketpair': attempt(socket.socketpair),
            'connection': attempt(lambda: socket.create_connection(('127.0.0.1', 9))),
        }

    assert result(in_child(action)) == {
        'socket': EPERM,
        'unix': EPERM,
        'socketpair': EPERM,
        'connection': EPERM,
    }


@needs_seccomp
def test_no_processes_or_threads(tmp_path: Any) -> None:
    marker = tmp_path / 'marker'

    def action(_: Any) -> dict[str, Any]:
        return {
            'fork': attempt(os.fork),
            'system': attempt(lambda: os.system(f'touch {marker}')),
            'subprocess': attempt(lambda: subprocess.run(['true'])),
            'execv': attempt(lambda: os.execv('/bin/true', ['true'])),
            'posix_spawn': attempt(lambda: os.posix_spawn('/bin/true', ['true'], {})),
            'thread': attempt(lambda: threading.Thread(target=lambda: None).start()),
        }

    assert result(in_child(action)) == {
        'fork': EPERM,
        # glibc's system() reports a failed posix_spawn as "exit status 127"
        'system': {'returned': repr(127 << 8)},
        'subprocess': EPERM,
        'execv': EPERM,
        'posix_spawn': EPERM,
        'thread': {'raised': 'RuntimeError', 'errno': None},
    }
    assert not marker.exists()


@needs_seccomp
def test_only_itself_can_be_signalled() -> None:
    def action(_: Any) -> dict[str, Any]:
        received: list[int] = []
        signal.signal(signal.SIGUSR1, lambda signum, frame: received.append(signum))
        return {
            'parent': attempt(lambda: os.kill(os.getppid(), 0)),
            'group': attempt(lambda: os.kill(0, 0)),
            'everyone': attempt(lambda: os.kill(-1, 0)),
            'init': attempt(lambda: os.kill(1, 0)),
            'pidfd': attempt(lambda: os.pidfd_open(os.getppid())),
            'self': attempt(lambda: os.kill(os.getpid(), 0)),
            'raise_signal': attempt(lambda: signal.raise_signal(signal.SIGUSR1)),
            'received': received,
        }

    assert result(in_child(action)) == {
        'parent': EPERM,
        'group': EPERM,
        'everyone': EPERM,
        'init': EPERM,
        'pidfd': EPERM,
        'self': {'returned': 'None'},
        'raise_signal': {'returned': 'None'},
        'received': [signal.SIGUSR1],
    }


@needs_seccomp
def test_each_worker_loads_the_filter_built_for_its_own_pid_however_late_it_is_forked() -> None:
    """The filter is compiled once and each worker patches its pid into its own copy: the program a
    worker loads is byte for byte the one libseccomp builds for that pid, the parent's copy keeps
    its placeholder, and a worker forked after others cannot signal a sibling alive beside it."""
    template = lockdown._template
    assert template is not None
    placeholder = bytes(template._patched)
    sibling = os.fork()
    if sibling == 0:
        time.sleep(60)
        os._exit(0)
    try:
        def prepare() -> tuple[Any, set[int]]:
            return lockdown._export_bpf(lockdown._build_filter(os.getpid())).hex(), set()

        def action(built: str) -> dict[str, Any]:
            return {
                'loaded is built': bytes(template._patched).hex() == built,
                'sibling': attempt(lambda: os.kill(sibling, 0)),
                'self': attempt(lambda: os.kill(os.getpid(), 0)),
            }

        for _ in range(4):
            assert result(in_child(action, prepare=prepare)) == {'loaded is built': True, 'sibling': EPERM, 'self': {'returned': 'None'}}
            assert bytes(template._patched) == placeholder
    finally:
        os.kill(sibling, signal.SIGKILL)
        os.waitpid(sibling, 0)


# ----- fds, environment, privileges ---------------------------------------------------------------


def test_fds_not_kept_are_closed() -> None:
    def prepare() -> tuple[Any, set[int]]:
        dropped = os.open('/dev/null', os.O_RDONLY)
        kept = os.open('/dev/null', os.O_RDONLY)
        return (dropped, kept), {kept}

    def action(fds: tuple[int, int]) -> dict[str, Any]:
        dropped, kept = fds
        return {
            'dropped': attempt(lambda: os.fstat(dropped)),
            'kept': attempt(lambda: os.read(kept, 1)),
            'stdin': attempt(lambda: os.fstat(0)),
        }

    ebadf = {'raised': 'OSError', 'errno': errno.EBADF}
    expected = {'dropped': ebadf, 'kept': {'returned': "b''"}, 'stdin': ebadf}
    if LAYERS['seccomp'] is None:
        assert result(in_child(action, prepare=prepare)) == expected
    assert result(in_child(action, prepare=prepare, seccomp=False)) == expected


def test_exactly_the_kept_fds_remain_open() -> None:
    """Without seccomp (so /proc can be read afterwards), the fd table holds only the kept fds."""

    def prepare() -> tuple[Any, set[int]]:
        # As the zygote does before it forks: no garbage of earlier tests left for the collector,
        # whose finalizers (a socket's, a file's) would open or close fds while the table is read.
        gc.collect()
        gc.disable()
        extra = [os.open('/dev/null', os.O_RDONLY) for _ in range(5)]
        high = os.dup2(extra[0], max(40, *extra) + 1)  # above every fd this process has open
        return [REPORT_FD, extra[2], high], {extra[2], high}

    def action(expected: list[int]) -> dict[str, Any]:
        def is_open(fd: int) -> bool:
            try:
                os.fstat(fd)
            except OSError:
                return False
            return True

        # The fd listdir() reads /proc/self/fd through is closed again when it returns.
        fds = sorted(fd for fd in map(int, os.listdir('/proc/self/fd')) if is_open(fd))
        names = {}
        for fd in fds:  # what each names, so a failure says which fd is extra
            try:
                names[fd] = os.readlink(f'/proc/self/fd/{fd}')
            except OSError as error:
                names[fd] = repr(error)
        return {'open': fds, 'names': names, 'expected': sorted(expected)}

    report = result(in_child(action, prepare=prepare, seccomp=False))
    assert len(set(report['expected'])) == 3 and max(report['expected']) > 40
    assert report['open'] == report['expected'], report['names']


@needs_seccomp
def test_environment_is_empty() -> None:
    getenv = _libc.getenv
    getenv.restype = ctypes.c_char_p

    def prepare() -> tuple[Any, set[int]]:
        os.environ['CORRAL_TEST_SECRET'] = 'hunter2'
        return None, set()

    def action(_: Any) -> dict[str, Any]:
        return {
            'os.environ': dict(os.environ),
            'environb': dict(os.environb),
            'getenv': [getenv(b'CORRAL_TEST_SECRET'), getenv(b'PATH')],
            'proc': attempt(lambda: open('/proc/self/environ', 'rb').read()),
        }

    assert result(in_child(action, prepare=prepare)) == {
        'os.environ': {},
        'environb': {},
        'getenv': [None, None],
        'proc': EPERM,
    }


def test_initial_environment_block_is_zeroed() -> None:
    """Even where /proc/self/environ can be read (no seccomp; as root: a process that is not
    dumpable cannot read its own as an ordinary user), it holds only NUL bytes: the memory it
    shows is zeroed."""
    assert 'PATH' in os.environ

    def action(_: Any) -> dict[str, Any]:
        if os.geteuid() == 0:
            with open('/proc/self/environ', 'rb') as environ:
                block = environ.read()
        else:
            start, end = lockdown._initial_environment or (0, 0)
            block = ctypes.string_at(start, end - start) if end else b''
        return {'length': len(block), 'nonzero': len(block.strip(b'\0'))}

    report = result(in_child(action, seccomp=False))
    assert report['nonzero'] == 0
    if lockdown._initial_environment is not None:
        assert report['length'] > 0


@needs_seccomp
def test_process_flags() -> None:
    prctl = _libc.prctl
    prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)

    def action(_: Any) -> dict[str, Any]:
        dumpable = prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0)
        set_dumpable = prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
        set_dumpable_errno = ctypes.get_errno()
        return {
            'dumpable': dumpable,
            'set_dumpable': [set_dumpable, set_dumpable_errno],
            'no_new_privs': prctl(_PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0),
            'seccomp': prctl(_PR_GET_SECCOMP, 0, 0, 0, 0),
            'dumpable_after': prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0),
        }

    assert result(in_child(action)) == {
        'dumpable': 0,
        'set_dumpable': [-1, errno.EPERM],
        'no_new_privs': 1,
        'seccomp': 2,  # SECCOMP_MODE_FILTER
        'dumpable_after': 0,
    }


def test_capabilities_are_dropped() -> None:
    def action(_: Any) -> dict[str, str]:
        with open('/proc/self/status') as status:
            return {
                key: value.strip()
                for key, _, value in (line.partition(':') for line in status)
                if key in ('CapInh', 'CapPrm', 'CapEff', 'CapAmb')
            }

    assert result(in_child(action, seccomp=False)) == {
        'CapInh': '0000000000000000',
        'CapPrm': '0000000000000000',
        'CapEff': '0000000000000000',
        'CapAmb': '0000000000000000',
    }


# ----- memory, ioctl, fcntl -----------------------------------------------------------------------


@needs_seccomp
def test_no_executable_memory_and_few_fd_operations() -> None:
    def prepare() -> tuple[Any, set[int]]:
        read_end, write_end = os.pipe()
        return (read_end, write_end), {read_end, write_end}

    def action(fds: tuple[int, int]) -> dict[str, Any]:
        read_end, write_end = fds
        return {
            'mmap_rw': attempt(lambda: len(mmap.mmap(-1, 1 << 20))),
            'mmap_exec': attempt(lambda: mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_EXEC)),
            'dup': attempt(lambda: os.dup(write_end)),
            'dup2': attempt(lambda: os.dup2(write_end, 50)),
            'pipe': attempt(os.pipe),
            'F_DUPFD': attempt(lambda: fcntl.fcntl(write_end, fcntl.F_DUPFD, 0)),
            'F_SETOWN': attempt(lambda: fcntl.fcntl(write_end, fcntl.F_SETOWN, os.getppid())),
            'set_blocking': attempt(lambda: os.set_blocking(read_end, False)),
            'read_nonblocking': attempt(lambda: os.read(read_end, 1)),
            'set_inheritable': attempt(lambda: os.set_inheritable(read_end, True)),
            'isatty': attempt(lambda: os.isatty(read_end)),
            'TIOCSTI': attempt(lambda: fcntl.ioctl(read_end, termios.TIOCSTI, b'x')),
            'fstat': attempt(lambda: os.fstat(read_end).st_size),
        }

    assert result(in_child(action, prepare=prepare)) == {
        'mmap_rw': {'returned': str(1 << 20)},
        'mmap_exec': EPERM,
        'dup': EPERM,
        'dup2': EPERM,
        'pipe': EPERM,
        'F_DUPFD': EPERM,
        'F_SETOWN': EPERM,
        'set_blocking': {'returned': 'None'},
        'read_nonblocking': {'raised': 'BlockingIOError', 'errno': errno.EAGAIN},
        'set_inheritable': {'returned': 'None'},
        'isatty': {'returned': 'False'},
        'TIOCSTI': EPERM,
        'fstat': {'returned': '0'},
    }


# ----- resource limits ----------------------------------------------------------------------------


@needs_seccomp
def test_rlimits_are_set_and_cannot_be_raised() -> None:
    def action(_: Any) -> dict[str, Any]:
        return {
            'as': resource.getrlimit(resource.RLIMIT_AS),
            'cpu': resource.getrlimit(resource.RLIMIT_CPU),
            'nofile': resource.getrlimit(resource.RLIMIT_NOFILE),
            'fsize': resource.getrlimit(resource.RLIMIT_FSIZE),
            'nproc': resource.getrlimit(resource.RLIMIT_NPROC),
            'core': resource.getrlimit(resource.RLIMIT_CORE),
            'raise': attempt(lambda: resource.setrlimit(resource.RLIMIT_AS, (4 * 1024**3, 4 * 1024**3))),
            'lower': attempt(lambda: resource.setrlimit(resource.RLIMIT_CPU, (5, 5))),
        }

    gib = 1024**3
    rejected = {'raised': 'ValueError', 'errno': None}  # CPython turns setrlimit's EPERM into ValueError
    assert result(in_child(action)) == {
        'as': [2 * gib, 2 * gib],
        'cpu': [60, 61],
        'nofile': [64, 64],
        'fsize': [0, 0],
        'nproc': [0, 0],
        'core': [0, 0],
        'raise': rejected,
        'lower': rejected,
    }


@needs_seccomp
def test_address_space_limit() -> None:
    def action(_: Any) -> dict[str, Any]:
        return {
            'huge': attempt(lambda: bytearray(3 * 1024**3)),
            'fine': attempt(lambda: len(bytearray(256 * 1024**2))),
        }

    assert result(in_child(action)) == {
        'huge': {'raised': 'MemoryError', 'errno': None},
        'fine': {'returned': str(256 * 1024**2)},
    }


def test_file_size_limit(tmp_path: Any) -> None:
    path = tmp_path / 'grow'

    def prepare() -> tuple[Any, set[int]]:
        fd = os.open(str(path), os.O_WRONLY | os.O_CREAT, 0o600)
        return fd, {fd}

    def action(fd: int) -> dict[str, Any]:
        return {'write': attempt(lambda: os.write(fd, b'x'))}

    assert result(in_child(action, prepare=prepare, seccomp=LAYERS['seccomp'] is None)) == {
        'write': {'raised': 'OSError', 'errno': errno.EFBIG},
    }
    assert path.read_bytes() == b''


def test_cpu_limit_ends_the_worker() -> None:
    def action(_: Any) -> None:
        while True:
            pass

    child = in_child(action, limits=LockdownLimits(cpu_seconds=1), seccomp=LAYERS['seccomp'] is None)
    assert child.signal == signal.SIGXCPU
    assert child.report is None


# ----- syscalls that kill -------------------------------------------------------------------------

# (name, arguments): each call must kill the worker with SIGSYS before the kernel runs it.
KILLED = [
    ('ptrace', (_PTRACE_TRACEME, 0, 0, 0)),
    ('process_vm_readv', ('ppid', 0, 0, 0, 0, 0)),
    ('process_vm_writev', ('ppid', 0, 0, 0, 0, 0)),
    ('unshare', (0x40000000,)),
    ('setns', (0, 0)),
    ('mount', (0, 0, 0, 0, 0)),
    ('bpf', (0, 0, 0)),
    ('userfaultfd', (0,)),
    ('io_uring_setup', (1, 0)),
    ('perf_event_open', (0, 0, -1, -1, 0)),
    ('keyctl', (0, 0, 0, 0, 0)),
    ('init_module', (0, 0, 0)),
    ('personality', (0xFFFFFFFF,)),
]


@needs_seccomp
@pytest.mark.parametrize(('name', 'arguments'), KILLED, ids=[name for name, _ in KILLED])
def test_dangerous_syscalls_kill_the_worker(name: str, arguments: tuple[Any, ...]) -> None:
    number = lockdown._syscall_number(name)
    if number is None:
        pytest.skip(f'{name} does not exist on this architecture')
    syscall = _libc.syscall
    syscall.restype = ctypes.c_long

    def action(_: Any) -> Any:
        values = [os.getppid() if value == 'ppid' else value for value in arguments]
        return [syscall(number, *(ctypes.c_long(v) for v in values)), ctypes.get_errno()]

    child = in_child(action)
    assert child.signal == signal.SIGSYS, f'{name}: status {child.status:#x}, report {child.report}'
    assert child.report is None


# ----- network namespace --------------------------------------------------------------------------


def enter_network_namespace() -> None:
    """The user namespace (so that an ordinary user may) and the network namespace, as the zygote
    makes them."""
    report = namespaces.enter(frozenset(namespaces.LAYERS) - {'userns', 'netns'})
    assert report == {'userns': None, 'netns': None}


def test_network_namespace_is_empty_and_isolated() -> None:
    listener = socket.socket()
    listener.bind(('127.0.0.1', 0))
    listener.listen()
    port = listener.getsockname()[1]
    interfaces_before = socket.if_nameindex()

    def action(_: Any) -> dict[str, Any]:
        before = os.readlink('/proc/self/ns/net')
        enter_network_namespace()
        probe = socket.socket()
        try:
            connect = attempt(lambda: probe.connect(('127.0.0.1', port)))
        finally:
            probe.close()
        return {
            'moved': os.readlink('/proc/self/ns/net') != before,
            'interfaces': socket.if_nameindex(),
            'connect': connect,
        }

    try:
        report = result(in_child(action, lock=False))
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()
    assert report == {
        'moved': True,
        'interfaces': [[1, 'lo']],
        'connect': {'raised': 'OSError', 'errno': errno.ENETUNREACH},
    }
    assert socket.if_nameindex() == interfaces_before  # the parent's namespace is untouched


@needs_seccomp
def test_network_namespace_then_lock_down() -> None:
    """The zygote's order: enter the namespace, fork, lock down; the worker still works."""

    def prepare() -> tuple[Any, set[int]]:
        enter_network_namespace()
        return _prepare_loop()

    report = result(in_child(_workload, prepare=prepare))
    assert report['gather'] == [0, 2, 4, 6, 8, 10, 12, 14, 16, 18]


# ----- API behaviour ------------------------------------------------------------------------------


def test_available_layers_is_cached_and_well_formed() -> None:
    layers = available_layers()
    assert set(layers) == {'seccomp', 'rlimits', 'no_new_privs'}
    assert all(value is None or (isinstance(value, str) and value) for value in layers.values())
    started = time.perf_counter()
    assert available_layers() == layers
    assert time.perf_counter() - started < 0.01
    layers['seccomp'] = 'changed by the caller'
    assert available_layers()['seccomp'] == LAYERS['seccomp']


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError, match='open_files'):
        LockdownLimits(open_files=-1)
    with pytest.raises(ValueError, match='file_size'):
        not_an_int: Any = None
        LockdownLimits(file_size=not_an_int)
    assert LockdownLimits(address_space=None, cpu_seconds=None).rlimits()[-1][0] == resource.RLIMIT_CORE


def test_refuses_threads_bad_fds_and_a_second_call() -> None:
    def action(_: Any) -> dict[str, Any]:
        keep = {REPORT_FD}
        gate = threading.Event()
        thread = threading.Thread(target=gate.wait)
        thread.start()
        threaded = attempt(lambda: lock_down(keep_fds=keep, limits=LockdownLimits()))
        gate.set()
        thread.join()
        deadline = time.monotonic() + 5
        while len(os.listdir('/proc/self/task')) > 1 and time.monotonic() < deadline:
            time.sleep(0.001)  # the OS thread outlives join() by a moment
        bad_fd = attempt(lambda: lock_down(keep_fds={*keep, 1000}, limits=LockdownLimits()))
        lock_down(keep_fds=keep, limits=LockdownLimits(), seccomp=False)
        again = attempt(lambda: lock_down(keep_fds=keep, limits=LockdownLimits(), seccomp=False))
        return {'threaded': threaded, 'bad_fd': bad_fd, 'again': again}

    # This child locks itself down inside the action.
    assert result(in_child(action, lock=False)) == {
        'threaded': {'raised': 'RuntimeError', 'errno': None},
        'bad_fd': {'raised': 'ValueError', 'errno': None},
        'again': {'raised': 'RuntimeError', 'errno': None},
    }


def test_what_forks_refuses_a_process_where_another_thread_runs() -> None:
    """The layer probe and the user namespace's helper fork: beside a running thread the child could
    wait forever on a lock it held, so each refuses, naming itself; nothing is forked."""

    def action(_: Any) -> dict[str, Any]:
        gate = threading.Event()
        thread = threading.Thread(target=gate.wait)
        thread.start()
        refused = {}
        for name, call in (('probe', lambda: lockdown._run_probe_child(try_seccomp=False)), ('userns', namespaces._enter_user_namespace)):
            try:
                call()
                refused[name] = 'forked'
            except RuntimeError as error:
                refused[name] = str(error)
        gate.set()
        thread.join()
        return refused

    assert result(in_child(action, lock=False)) == {
        'probe': 'probing the lockdown layers (it forks) needs a single-threaded process: Python threads are running',
        'userns': 'entering a user namespace (it forks) needs a single-threaded process: Python threads are running',
    }
