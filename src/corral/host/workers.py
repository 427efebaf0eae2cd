"""Worker processes as the host sees them: the zygote that forks them, and a handle on each."""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable

import msgpack

from ..channel import FrameReader
from ..errors import SandboxInsecureError
from ..supported import platform_refusal
from ..worker.namespaces import REMEDIES

__all__ = ['WorkerProcess', 'Zygote', 'refusal']

_SPAWNED = b'W'  # the zygote's reply to a spawn request, with the worker's channel and pidfd
_REQUEST = struct.Struct('>cQQ')  # the zygote's spawn request: b'S', RLIMIT_AS, RLIMIT_CPU
#: The variables OpenBLAS, OpenMP and MKL read for their number of threads.
_BLAS_THREADS = ('OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS', 'MKL_NUM_THREADS')
#: The kernel's clock ticks per second, the unit of `/proc/<pid>/stat`'s CPU times.
_CLOCK_TICKS = os.sysconf('SC_CLK_TCK')
#: The zygote's program (`python -c`; its arguments follow): `corral.worker.zygote.main`, with the
#: `corral` package registered but its `__init__` not run. That imports the host's whole API
#: (pools, sessions, the server's client, stores, the type checker, integrations: 83 modules), which
#: no worker runs; left out, the zygote has 4.4 MiB less anonymous memory (of 24.9), whose page
#: tables every fork copies and every worker's exit tears down.
ZYGOTE_PROGRAM = (
    'import importlib.util, sys\n'
    "sys.modules['corral'] = importlib.util.module_from_spec(importlib.util.find_spec('corral'))\n"
    'from corral.worker.zygote import main\n'
    'main(sys.argv[1:])\n'
)


class _Unclaimed(asyncio.Protocol):
    """The protocol of a warm worker's channel until a session takes it (`WorkerProcess.take_transport`).

    A worker sends nothing before the host's first message: anything it sends meanwhile closes
    the channel, and a closed channel is a worker no checkout takes (`WorkerProcess.alive`).
    """

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._transport.abort()  # type: ignore[attr-defined]


class WorkerProcess:
    """One forked worker: a pidfd to kill it by, and the host's end of its channel.

    `on_kill`, when set, is called (with no arguments) by the first `kill()`: the pool learns
    that a worker it handed out is done with, and forks its replacement then. `forked`: when the
    host got the worker (`time.monotonic()` seconds), which starts on its own from then.
    `transport`: the channel's asyncio transport, made ahead of a session (`connect`), or None.
    """

    __slots__ = ('_pid', '_stat', 'forked', 'on_kill', 'pidfd', 'sock', 'transport')

    def __init__(self, pidfd: int, sock: socket.socket) -> None:
        self._pid: int | None = None
        self._stat = -1  # `/proc/<pid>/stat`, opened at the first reading (cpu_seconds)
        self.forked = time.monotonic()
        self.on_kill: Callable[[], None] | None = None
        self.pidfd = pidfd
        self.sock = sock
        self.transport: asyncio.Transport | None = None

    async def connect(self) -> None:
        """Make the channel's asyncio transport now, while the worker waits in the pool, so that a
        session takes it (`take_transport`) without `connect_accepted_socket`'s turns of the event
        loop (0.1 ms of a checkout after 50 ms idle, measured). Until then the host reads nothing
        from the worker but its channel closing. Does nothing when the channel is closed already."""
        if self.sock.fileno() < 0 or self.transport is not None:
            return
        loop = asyncio.get_running_loop()
        self.transport, _ = await loop.connect_accepted_socket(_Unclaimed, self.sock)

    def take_transport(self, protocol: asyncio.Protocol) -> asyncio.Transport | None:
        """The transport `connect` made, now `protocol`'s (its `connection_made` called), or None
        when there is none (or it is closing): the caller then connects the channel itself."""
        transport, self.transport = self.transport, None
        if transport is None or transport.is_closing():
            return None
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        return transport

    @property
    def pid(self) -> int | None:
        """The worker's pid as this process sees it (the worker, in its PID namespace, has another),
        read from the pidfd's ``/proc/self/fdinfo`` entry (proc(5)) the first time it is asked;
        None once the worker was killed before anyone asked. Read with `os.open` and `os.read`:
        Python's `open` of the text took 0.11 ms, a sixth of a trivial feed, at a session's close."""
        if self._pid is None and self.pidfd >= 0:
            fd = os.open(f'/proc/self/fdinfo/{self.pidfd}', os.O_RDONLY | os.O_CLOEXEC)
            try:
                info = os.read(fd, 4096)
            finally:
                os.close(fd)
            self._pid = next(int(line.split()[1]) for line in info.splitlines() if line.startswith(b'Pid:'))
        return self._pid

    def alive(self) -> bool:
        """True while the worker's end of the channel is open (the worker has not exited), and the
        transport `connect` made, if any, is open too."""
        if self.sock.fileno() < 0 or (self.transport is not None and self.transport.is_closing()):
            return False
        try:
            return self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b''
        except BlockingIOError:
            return True
        except OSError:
            return False

    def idle(self) -> bool:
        """True while the worker is alive and has sent nothing the host has not read."""
        if self.sock.fileno() < 0:
            return False
        try:
            self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return True
        except OSError:
            return False
        return False

    def cpu_seconds(self) -> float | None:
        """The CPU seconds (user + system, all threads) the worker has used since its fork, from
        fields 14 and 15 of `/proc/<pid>/stat` (clock ticks; proc(5)); None once it was killed or
        has been reaped. The file is opened once, at the first reading, and the pidfd asked then
        whether the process is still there, so a pid reused by another process is never read as
        the worker's: the open file stays the worker's, and reading it fails once it is reaped.
        A reading is one `pread` (about a third of an open, read and close)."""
        if self.pidfd < 0:
            return None
        try:
            if self._stat < 0:
                self._stat = os.open(f'/proc/{self.pid}/stat', os.O_RDONLY | os.O_CLOEXEC)
                signal.pidfd_send_signal(self.pidfd, 0)
            fields = os.pread(self._stat, 1024, 0).rpartition(b')')[2].split()
        except (OSError, StopIteration):
            return None
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS

    def kill(self) -> None:
        """SIGKILL the worker (through its pidfd, so a reused pid is never hit) and close the channel."""
        if self._stat >= 0:
            os.close(self._stat)
            self._stat = -1
        if self.pidfd >= 0:
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.close(self.pidfd)
            self.pidfd = -1
        if self.transport is not None:
            self.transport.abort()
            self.transport = None
        self.sock.close()
        if self.on_kill is not None:
            on_kill, self.on_kill = self.on_kill, None
            on_kill()


def refusal(missing: dict[str, str]) -> str:
    """The text of the `SandboxInsecureError` for lockdown layers this machine lacks: each layer and
    why (`missing`: layer -> reason), the settings that enable them, and `skip_layers`."""
    lines = ['refusing to run scripts: these lockdown layers are not available on this machine:']
    lines += [f'- {layer}: {reason}' for layer, reason in missing.items()]
    remedies = dict.fromkeys(remedy for layer in missing for remedy in REMEDIES.get(layer, ()))
    if remedies:
        lines.append('To enable them:')
        lines += [f'- {remedy}' for remedy in remedies]
    names = sorted(missing)
    lines.append(
        f'Or run without them, knowing scripts are then less contained: Pool(skip_layers={names!r}), '
        f"or on the command line --skip-layers {','.join(names)}."
    )
    return '\n'.join(lines)


class Zygote:
    """The warm parent process that forks workers (see `corral.worker.zygote`).

    Started on the first `spawn()`; restarted by a later `spawn()` if it died. `skip_layers` names
    lockdown layers to run without (see `corral.worker.zygote.LAYERS`); any other layer that the
    machine lacks makes `spawn()` raise `SandboxInsecureError`. `packages`: the third-party
    packages (`catalog.PACKAGES`, with what they need) the zygote loads for its workers.
    """

    def __init__(self, skip_layers: frozenset[str] = frozenset(), packages: tuple[str, ...] = ()) -> None:
        self._skip = skip_layers
        self._packages = packages
        self._process: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self._lock = asyncio.Lock()
        self._waiting: collections.deque[asyncio.Future[WorkerProcess]] = collections.deque()

    @property
    def pid(self) -> int | None:
        """The pid, as this process sees it, of the process that forks the workers: the started
        process's child, pid 1 of the PID namespace it made (see `corral.worker.zygote`), or the
        started process itself when the pool skips that layer; None while none runs."""
        if self._process is None:
            return None
        pid = self._process.pid
        if 'pidns' in self._skip:
            return pid
        with open(f'/proc/{pid}/task/{pid}/children') as children:
            return int(children.read().split()[0])

    @property
    def running(self) -> bool:
        """True while the started process runs (it exits with the zygote proper)."""
        return self._process is not None and self._process.poll() is None

    async def _start(self) -> socket.socket:
        unsupported = platform_refusal(sys.platform)
        if unsupported is not None:
            raise SandboxInsecureError(unsupported)
        ours, theirs = socket.socketpair()
        # A fixed hash seed keeps a worker deterministic given its inputs; PYTHONPATH is kept so a
        # source checkout on the path works. Nothing else of the host's environment is passed on.
        env = {'PYTHONHASHSEED': '0'}
        if 'PYTHONPATH' in os.environ:
            env['PYTHONPATH'] = os.environ['PYTHONPATH']
        if self._packages:
            # BLAS libraries start threads when loaded, unless told to use one: the zygote must
            # stay single-threaded to fork workers
            env.update(dict.fromkeys(_BLAS_THREADS, '1'))
        self._process = subprocess.Popen(  # -P: no working folder on sys.path, where `-c` puts ''
            [sys.executable, '-P', '-c', ZYGOTE_PROGRAM, str(theirs.fileno()), ','.join(sorted(self._skip)), ','.join(self._packages)],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # stdout may be the application's protocol (an MCP server on stdio)
            env=env,
            cwd='/',
        )
        theirs.close()
        ours.setblocking(False)
        self._control = ours
        layers = await self._read_report(ours)
        missing = {layer: reason for layer, reason in layers.items() if reason is not None and layer not in self._skip}
        if missing:
            self.close()
            raise SandboxInsecureError(refusal(missing))
        return ours

    @staticmethod
    async def _read_report(control: socket.socket) -> dict[str, str | None]:
        loop = asyncio.get_running_loop()
        reader = FrameReader(max_frame=4096)
        async with asyncio.timeout(60):
            while True:
                data = await loop.sock_recv(control, 4096)
                if not data:
                    raise OSError('the zygote process exited while starting')
                frames = reader.feed(data)
                if frames:
                    report = msgpack.unpackb(frames[0])
                    if not isinstance(report, dict):
                        raise OSError('the zygote sent a malformed report')
                    return report

    async def start(self) -> None:
        """Start the zygote unless it runs; raises as `spawn()` does."""
        async with self._lock:
            await self._running()

    async def _running(self) -> socket.socket:
        """The running zygote's socket, started anew if there is none or it died (hold `_lock`)."""
        control = self._control
        if control is None or not self.running:
            if control is not None:
                self._lost(control)
            control = await self._start()
        return control

    async def spawn(self, *, memory: int | None, cpu_time: int | None) -> WorkerProcess:
        """Fork a new worker with these rlimits (bytes of address space, seconds of CPU).

        Requests are pipelined: the zygote forks the next worker while the host takes the last
        one, and answers in the order it was asked. Raises `SandboxInsecureError` (see the class)
        or `OSError` when the zygote cannot be started or dies.
        """
        loop = asyncio.get_running_loop()
        async with self._lock:  # (re)starting the zygote and sending, in order
            control = await self._running()
            request = _REQUEST.pack(b'S', memory or 0, cpu_time or 0)
            try:
                sent = control.send(request)  # 17 bytes: the socket buffer holds thousands
            except OSError:
                sent = 0
            if sent != len(request):
                self._lost(control)
                raise OSError('the zygote process stopped taking requests; a new one starts on the next checkout')
            reply: asyncio.Future[WorkerProcess] = loop.create_future()
            if not self._waiting:
                loop.add_reader(control.fileno(), self._on_replies, control)
            self._waiting.append(reply)
        return await reply

    def _on_replies(self, control: socket.socket) -> None:
        """Hand the zygote's replies (a pid, the channel and a pidfd) to the spawns waiting, in order."""
        while self._waiting:
            try:
                data, fds, _, _ = socket.recv_fds(control, len(_SPAWNED), 2)
            except BlockingIOError:
                return
            except OSError:
                data, fds = b'', []
            if data != _SPAWNED or len(fds) != 2:
                for fd in fds:
                    os.close(fd)
                self._lost(control)
                return
            sock = socket.socket(fileno=fds[0])
            sock.setblocking(False)
            worker = WorkerProcess(fds[1], sock)
            reply = self._waiting.popleft()
            if reply.done():  # its caller gave up waiting: nobody will use the worker
                worker.kill()
            else:
                worker.cpu_seconds()  # its first reading opens its stat file: here, ahead of the checkout, not as its session closes
                reply.set_result(worker)
        asyncio.get_running_loop().remove_reader(control.fileno())

    def _lost(self, control: socket.socket, error: type[Exception] = OSError, reason: str = 'the zygote process exited; a new one starts on the next checkout') -> None:
        """The zygote's channel broke (or the pool closed it): every waiting spawn fails with
        `error(reason)`; the next spawn starts a new zygote."""
        if self._waiting:
            asyncio.get_running_loop().remove_reader(control.fileno())
        while self._waiting:
            reply = self._waiting.popleft()
            if not reply.done():
                reply.set_exception(error(reason))
        control.close()
        if self._control is control:
            self._control = None

    def close(self) -> None:
        """Stop the zygote, and with it every worker it forked (they die with their parent).

        Spawns still waiting raise `RuntimeError('the pool is closed')`.
        """
        if self._control is not None:
            self._lost(self._control, RuntimeError, 'the pool is closed')
        if self._process is not None:
            try:
                self._process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
