"""The worker's event loop selector: it polls briefly before it sleeps, and returns what epoll returns."""

import selectors
import socket
import threading

from corral.worker.runtime import _SpinningSelector


def test_the_spinning_selector_returns_what_epoll_returns():
    selector = _SpinningSelector()
    ours, theirs = socket.socketpair()
    with selector, ours, theirs:
        key = selector.register(ours, selectors.EVENT_READ)
        assert selector.select(0) == []
        assert selector.select(0.01) == []
        theirs.send(b'x')
        assert selector.select(None) == [(key, selectors.EVENT_READ)]
        assert selector.select(0.01) == [(key, selectors.EVENT_READ)]
        assert ours.recv(1) == b'x'
        # data that arrives after the polling window still wakes the sleeping select
        timer = threading.Timer(0.02, theirs.send, args=(b'y',))
        timer.start()
        assert selector.select(None) == [(key, selectors.EVENT_READ)]
        timer.join()
