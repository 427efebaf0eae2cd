"""How a connection ends: `_Close` (its close code, and the error its client is told), the client
gone or asking to close, and the checks of a frame whose failure ends it (its shape, the protocol version)."""

from __future__ import annotations

import logging
from typing import Any

from ..errors import CorralError, SandboxError, SandboxStoreError
from . import protocol as p

_log = logging.getLogger('corral.server')

#: The WebSocket close code of an unexpected condition in the server (RFC 6455 7.4.1).
CLOSE_SERVER_ERROR = 1011


class _Close(Exception):
    """End the connection: send the client `error` (when it still reads) and close with `code`."""

    def __init__(self, code: int, error: BaseException | None, reason: str = '') -> None:
        error = None if error is None else _told(error)
        super().__init__(code, error)
        self.code = code
        self.error = error
        self.reason = reason if error is None else str(error)


def _told(error: BaseException) -> BaseException:
    """What a client is told of `error`: the error itself, unless it is a failure of the server's
    own parts, whose text names them (a store's database user, host, port and name; a bug's
    details): then a text that names none, and the details go to the server's log."""
    if isinstance(error, SandboxStoreError):
        _log.error('the session store failed: %s', error)
        return SandboxStoreError("the corral server's session store failed; try again later (the server's log has the details)")
    if p.error_message(error)[1] == 'SandboxError' and not isinstance(error, CorralError):  # neither corral's nor built-in
        _log.error('a session connection failed', exc_info=error)
        return _failed(error)
    return error


def _failed(error: BaseException) -> SandboxError:
    return SandboxError(f"the corral server failed ({type(error).__name__}); the server's log has the details")


def _check_version(version: Any) -> None:
    """Refuse a client of another protocol version than the server's, naming both."""
    if version != p.PROTOCOL_VERSION:
        raise _Close(
            p.CLOSE_PROTOCOL,
            SandboxError(
                f'this corral server speaks protocol version {p.PROTOCOL_VERSION}, the client version {version!r}: '
                'use a corral client of the same version as the server'
            ),
        )


class _Gone(Exception):
    """The client closed the connection."""


class _Closing(Exception):
    """The client asked to end the session (CLOSE): it is told when the session has ended (CLOSED)."""

def _shape(message: list[Any], length: int) -> list[Any]:
    if len(message) != length:
        raise _Close(p.CLOSE_PROTOCOL, SandboxError(f'the client sent a malformed frame (kind {message[0]} with {len(message)} items, expected {length})'))
    return message
