"""A worker's warm-up feed: run before the first real feed, through its very path, sending nothing."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from corral.channel import DONE, FEED, FrameReader, frame
from corral.values import pack, unpack

#: A worker without the language layer or the lockdown (a script then reads the worker's own
#: modules), serving the channel given as its fd argument, warm-up first, as a forked worker does.
_WORKER = (
    'import socket, sys\n'
    'from corral.worker import runtime\n'
    'runtime.run_worker(runtime.prepare_worker(guarded=False), socket.socket(fileno=int(sys.argv[1])))\n'
)

_LIMITS = {'wall_time': 10.0, 'recursion': 100, 'output': 1 << 20, 'host_calls': 10, 'memory': None, 'cpu_time': None, 'value_items': 1000, 'value_size': 1 << 20}


def _feed(sock: socket.socket, reader: FrameReader, code: str) -> list[object]:
    sock.sendall(frame(pack([FEED, code, 'main.py', {}, {}, _LIMITS], side='host')))
    while True:
        data = sock.recv(1 << 16)
        assert data, 'the worker closed its channel'
        payloads = reader.feed(data)
        if payloads:
            assert len(payloads) == 1  # nothing of the warm-up's came before the reply
            return unpack(payloads[0])


def test_the_first_feed_finds_its_recursion_depth_measured_by_the_warm_up_and_gets_only_its_own_reply():
    # The depth a feed's recursion limit counts from is measured once per stack of code below the
    # feed (by bisection: 0.05 ms of a first feed on a worker that slept). The warm-up feed runs
    # through the loop that serves the host's messages, so its stack is the first real feed's:
    # one stack measured, not two.
    ours, theirs = socket.socketpair()
    env = {'PYTHONHASHSEED': '0', 'PYTHONPATH': os.pathsep.join(sys.path)}
    worker = subprocess.Popen([sys.executable, '-c', _WORKER, str(theirs.fileno())], pass_fds=[theirs.fileno()], env=env)
    theirs.close()
    reader = FrameReader()
    try:
        with ours:
            ours.settimeout(30)
            code = 'import corral.worker.runtime as runtime\nlen(runtime._depths), __name__, "f" in globals()'
            assert _feed(ours, reader, code) == [DONE, (1, '__main__', False), None]
            assert _feed(ours, reader, 'def g(n):\n    return g(n - 1) if n else 0\ng(98)') == [DONE, 0, None]
            assert _feed(ours, reader, 'len(runtime._depths)') == [DONE, 1, None]
        assert worker.wait(timeout=30) == 0
    finally:
        worker.kill()
        worker.wait()
