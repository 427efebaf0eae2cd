"""The zygote: a warm Python process that forks one worker per request.

The host starts it once (`main([FD, SKIP, PACKAGES])`, by `corral.host.workers.ZYGOTE_PROGRAM`),
with one end of a Unix socketpair as file descriptor FD, SKIP the comma-separated lockdown layers the host chose to run
without and PACKAGES the comma-separated third-party packages scripts may import (loaded here by
`language.modules.load_packages`, before anything is locked down). The process imports everything a worker needs, probes seccomp, enters the namespaces
(`namespaces.enter`: user, network, mount, UTS, IPC, PID) and forks the zygote proper, pid 1 of
the new PID namespace, then only waits for it. The zygote builds one worker (its event loop,
builtins and guards: `runtime.prepare_worker`) that every forked worker starts from, makes an
empty tmpfs its root, switches to the sandbox uid, and reports the layers to the host (one msgpack
map, `{layer: None or the reason it is missing}`, framed like every channel message). Then it
serves spawn requests.

A spawn request is `_REQUEST` (`b'S'`, RLIMIT_AS bytes, RLIMIT_CPU seconds; 0 means no limit). For
each, the zygote forks a worker that locks itself down before it reads its first message, and
sends back `_SPAWNED` with two file descriptors: the host's end of the worker's channel and a
pidfd the host kills the worker with (and learns its pid from). A forked worker shares the zygote's memory pages until it
writes them; each page it writes is copied, and those copies (some 900 before its first feed, about
2.5 ms of CPU on a virtual machine) are most of what a new worker costs. The zygote exits when the
host closes its socket (and dies with the host), and its workers exit when their channels close.
"""

from __future__ import annotations

import _socket
import ctypes
import gc
import os
import signal
import socket
import struct
import sys

import msgpack

from ..channel import frame
from . import lockdown, namespaces, runtime

__all__ = ['main', 'LAYERS']

#: The layers, by the names `Pool(skip_layers=...)` takes: the language guard, then the lockdown.
LAYERS = ('language', 'seccomp', *namespaces.LAYERS, 'rlimits', 'no_new_privs')

_PR_SET_PDEATHSIG = 1
_REQUEST = struct.Struct('>cQQ')
#: The two fds sent with `_SPAWNED` (SCM_RIGHTS data: C ints).
_FDS = struct.Struct('2i')
#: The sets of limits the zygote keeps made (a pool asks with a few, over and over).
_KNOWN_LIMITS = 64
#: The reply to a spawn request, with the worker's two fds (a pid would be one of the PID namespace's).
_SPAWNED = b'W'

_libc = ctypes.CDLL(None, use_errno=True)
_libc_fork = ctypes.PyDLL(None, use_errno=True).fork  # PyDLL: called with the GIL held


def _die_with_parent() -> None:
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _fork() -> int:
    """fork(2) without CPython's at-fork handlers; returns 0 in the child, the child's pid in the zygote.

    `os.fork()` runs the handlers that `threading`, `random`, `logging` ... registered. In the
    warm zygote they write to some 220 pages the worker shares with it, each then copied: 0.45 ms of
    a worker's start (measured: 257 page faults before the child's first line against 35). They
    reset state a single-threaded process does not need reset (locks no other thread can hold, the
    main thread's identity, which `pthread_self()` keeps across fork) and reseed `random`'s hidden
    instance, which scripts never reach (their `random` is seeded by the host, per session). The
    zygote checks it is single-threaded before it forks a worker.

    Raises `OSError` when the kernel refuses the fork.
    """
    pid = _libc_fork()
    if pid < 0:
        code = ctypes.get_errno()
        raise OSError(code, f'fork() failed: {os.strerror(code)}')
    return pid


def _receive_request(control: socket.SocketType) -> tuple[int, int] | None:
    data = b''
    while len(data) < _REQUEST.size:
        try:
            chunk = control.recv(_REQUEST.size - len(data))
        except OSError:  # the host closed the pool (or died)
            return None
        if not chunk:
            return None
        data += chunk
    kind, address_space, cpu_seconds = _REQUEST.unpack(data)
    if kind != b'S':
        return None
    return address_space, cpu_seconds


def _lockdown_limits(skip: frozenset[str], address_space: int, cpu_seconds: int) -> lockdown.LockdownLimits:
    """The rlimits of a spawn request, made in the zygote: one made in the worker costs it some 30
    page faults (measured)."""
    if 'rlimits' in skip:
        return lockdown.LockdownLimits(address_space=None, cpu_seconds=None)
    return lockdown.LockdownLimits(address_space=address_space or None, cpu_seconds=cpu_seconds or None)


def _worker(worker: runtime.Worker, sock: socket.SocketType, skip: frozenset[str], limits: lockdown.LockdownLimits) -> None:
    def lock(keep: set[int]) -> None:
        lockdown.lock_down(keep_fds=keep, limits=limits, seccomp='seccomp' not in skip)

    runtime.run_worker(worker, sock, lock)


def _become_pid_one(control: socket.SocketType) -> None:
    """Fork the zygote proper, pid 1 of the PID namespace this process entered, and return in it.

    This process stays outside the namespace: it closes its copy of the host's socket (so the host
    sees the zygote's end close when the zygote exits), waits for the zygote and exits with its
    status. It dies with the host; the zygote dies with it, and every worker with the zygote (the
    kernel kills a PID namespace's processes when its pid 1 exits).
    """
    pid = os.fork()
    if pid == 0:
        _die_with_parent()
        return
    control.close()
    _, status = os.waitpid(pid, 0)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def main(argv: list[str]) -> None:
    control = socket.SocketType(fileno=int(argv[0]))  # C-level sockets throughout: see the loop below
    skip = frozenset(filter(None, argv[1].split(','))) if len(argv) > 1 else frozenset()
    packages = tuple(filter(None, argv[2].split(','))) if len(argv) > 2 else ()
    _die_with_parent()
    for name in runtime.PRELOAD_MODULES:
        __import__(name)
    if packages:
        from ..language.modules import load_packages

        load_packages(packages)
    # it forks from here on (the probe, the maps' helper, the zygote proper, every worker): a fork
    # beside a running thread may leave the child waiting forever on a lock that thread held
    lockdown.require_single_thread('the zygote (it forks without at-fork handlers)')
    layers = lockdown.available_layers()
    layers.update(namespaces.enter(skip))
    in_userns = 'userns' not in skip and layers['userns'] is None
    if 'pidns' not in skip and layers['pidns'] is None:
        _become_pid_one(control)
    worker = runtime.prepare_worker(guarded='language' not in skip, packages=packages)
    # checked while /proc is there to count native threads; nothing starts one afterwards
    lockdown.require_single_thread('the zygote (it forks without at-fork handlers)')
    if 'mntns' not in skip and layers['mntns'] is None:
        try:
            namespaces.empty_root()
        except OSError as error:
            layers['mntns'] = namespaces.explain('mntns', error, in_userns=in_userns)
    if 'uid' not in skip and layers['uid'] is None:
        try:
            namespaces.drop_uid(in_userns=in_userns)
        except OSError as error:
            layers['uid'] = namespaces.explain('uid', error, in_userns=in_userns)
        _die_with_parent()  # a change of credentials cleared it
    control.sendall(frame(msgpack.packb(layers)))
    if any(reason is not None and layer not in skip for layer, reason in layers.items()):
        return  # the host refuses to use an insecure zygote
    lockdown.prepare_zygote()
    os.chdir('/')
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps finished workers
    # Objects that exist now live as long as the zygote: keep the collector away from them, so a
    # worker's collections do not write to (and so copy) the pages it shares with the zygote.
    gc.collect()
    gc.freeze()
    # Every page the zygote writes after a fork is copied (a worker shares it), at each fork: the
    # loop touches few objects. Its sockets are `_socket`'s (no Python-level methods to run), its
    # fds go out in one `sendmsg`, and a pool's few sets of limits are made once (measured: 112
    # page faults per fork before, 65 after).
    known: dict[tuple[int, int], lockdown.LockdownLimits] = {}
    while (request := _receive_request(control)) is not None:
        limits = known.get(request)
        if limits is None:
            if len(known) >= _KNOWN_LIMITS:
                known.clear()
            limits = known[request] = _lockdown_limits(skip, *request)
        host_end, worker_end = _socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = _fork()
        if pid == 0:
            try:
                control.close()
                host_end.close()
                _die_with_parent()
                # SIGCHLD stays ignored: a worker cannot fork, so it never has a child to wait for
                _worker(worker, worker_end, skip, limits)
            finally:
                os._exit(0)
        worker_end.close()
        pidfd = os.pidfd_open(pid)
        try:
            control.sendmsg([_SPAWNED], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, _FDS.pack(host_end.fileno(), pidfd))])
        except OSError:  # the host is gone (a pool closed while a worker was being forked)
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            return
        finally:
            host_end.close()
            os.close(pidfd)


if __name__ == '__main__':
    main(sys.argv[1:])
