"""The zygote: a warm Python process that forks one worker per request.

The host starts it once (`python -m corral.worker FD`), with one end of a Unix socketpair as
file descriptor FD. It imports everything a worker needs, then for each request byte `S` forks a
worker and sends back, over that socket, the worker's pid and two file descriptors: the host's end
of the worker's channel and a pidfd the host kills the worker with. A forked worker starts in
well under a millisecond of Python work and shares the zygote's memory pages until it writes them.
The zygote exits when the host closes its socket, and its workers exit when their channel closes.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import struct
import sys

from . import runtime

__all__ = ['main']

_PR_SET_PDEATHSIG = 1
_PID = struct.Struct('>I')


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _preimport() -> None:
    for name in runtime.STDLIB_MODULES:
        __import__(name)


def main(argv: list[str]) -> None:
    control = socket.socket(fileno=int(argv[0]))
    _die_with_parent()
    _preimport()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps finished workers
    while True:
        request = control.recv(1)
        if not request:
            return
        host_end, worker_end = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            try:
                control.close()
                host_end.close()
                _die_with_parent()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                runtime.run_worker(worker_end)
            finally:
                os._exit(0)
        worker_end.close()
        pidfd = os.pidfd_open(pid)
        socket.send_fds(control, [_PID.pack(pid)], [host_end.fileno(), pidfd])
        host_end.close()
        os.close(pidfd)


if __name__ == '__main__':
    main(sys.argv[1:])
