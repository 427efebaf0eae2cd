"""The worker's event loop selector: with nothing to run, the loop asks the host for its next input."""

import selectors
import socket

from corral.worker.runtime import _HostSelector


def test_the_loop_asks_the_host_when_it_would_sleep_and_never_reads_a_file_itself():
    selector = _HostSelector()
    asked = []
    selector.wait = asked.append
    ours, theirs = socket.socketpair()
    with selector, ours, theirs:
        selector.register(ours, selectors.EVENT_READ)
        theirs.send(b'x')
        assert selector.select(0) == []  # callbacks are ready: the loop does not wait, nor ask
        assert selector.select(0.25) == []
        assert selector.select(None) == []
        assert asked == [0.25, None]
        assert ours.recv(1) == b'x'  # still there: the host's messages are read where they are asked for
