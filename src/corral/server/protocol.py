"""The wire protocol between `corral serve` and `corral.RemotePool`: one WebSocket per session.

Every WebSocket message is one binary frame holding one msgpack message (encoded as the worker
channel encodes values, `corral.values.pack`, so tuples, sets, datetimes and the other types of
`corral.values` cross unchanged): a list whose first item is its kind. Text frames are refused.

The client connects to `<url>/session` with, as headers of the upgrade request, `authorization:
Bearer <api key>` (when it has one) and the W3C trace context of the caller (`traceparent`,
`tracestate`), then sends:

    client -> server
      [OPEN, version, options]        first frame: the protocol version, and checkout's options (`checkout_options`)
      [FEED, code, functions, trace, held]   run a script; `functions` maps each external_lookup name to
                                      whether it is async; `held` (see below) is empty on a first attempt
      [ANSWERS, answers]              answers to host calls: `[call_id, how, value]` each, `how` one of
                                      'ok' (value), 'error' ([exception class name, args]), 'deferred' (payload)
      [RESUME, values, errors, functions, trace, held]   answer a paused feed's deferred calls (`functions`
                                      None: keep the feed's)
      [DUMP]                          the session's state
      [LOAD, state]                   load a state into this fresh session
      [CLOSE]                         end the session (a request running is cut off); the server
                                      answers CLOSED once the session has ended and its tenant's
                                      slot is free, then closes the connection
      [LIST, version]                 instead of OPEN: no session opens; the server answers SESSIONS
                                      and closes the connection
      [DELETE, version, session_id]   instead of OPEN: delete the tenant's stored session; the server
                                      answers DELETED (or ERROR) and closes the connection

    server -> client
      [OPENED, session_id, random_seed, max_frame, pending]   the session is ready
      [EVENTS, events]                host calls and prints, in the order the script made them:
                                      [CALL, call_id, name, args, kwargs] and [OUTPUT, stream, text]
      [RESULT, value, shown, pending] the request's result (a feed's value, a DUMP's state; None for LOAD);
                                      `shown`: a feed's numpy or pandas value in its library's own repr
                                      (`Session.value_repr`), else None
      [PAUSED, pending]               the feed paused on deferred calls
      [ERROR, kind, text, attributes, pending]   the request (or the connection) failed: `kind` names the
                                      corral exception (or a built-in one) raised in the client, `text`
                                      its exact text (`error_message`)
      [DRAIN, state]                  the server is shutting down: the session ends here, to be taken up
                                      elsewhere (a stored one from the store, by its id; an ephemeral one
                                      from `state`, its dumped state, None when it could not be dumped)
      [CLOSED]                        the answer to CLOSE: the session has ended, and no longer
                                      counts in its tenant's `concurrent_sessions`
      [SESSIONS, ids, pending]        the answer to LIST: the ids of the tenant's stored sessions, sorted
      [DELETED, pending]              the answer to DELETE: the session and its records are deleted

Every response to a request (and OPENED) ends with `pending`, the calls the session is paused on
(`[call_id, function, args, kwargs, payload]` each; empty when it is not paused).

A request cut short (the server went away, or drained while it ran) is sent again, to another
server, with `held`: the answers the client gave during the first attempt, `[name, args, kwargs,
how, value]` each. A call of the new attempt to the same function with equal arguments is
answered from them and does not run again, so each host call runs once; a held answer the new
attempt never used (it took another path) makes the request fail with a `SandboxWorkerError`
naming those calls.

A session serves one request at a time; host calls of the request in flight are answered while it
runs. Host calls that the script makes together (`asyncio.gather`) and the prints around them
travel in one EVENTS frame, and answers that are ready together in one ANSWERS frame.

A frame that breaks these rules (a text frame, bad msgpack, an unknown kind, a wrong shape, a
frame out of turn, one larger than the server's `max_frame`) ends the connection: the server
sends an ERROR saying what was wrong, then closes with one of the `CLOSE_*` codes; the session
ends as if the client had left. A client whose protocol version the server does not speak gets
an ERROR naming both versions.
"""

from __future__ import annotations

import builtins
import importlib
import json
from typing import Any

import msgpack

from .. import errors
from ..host.deferred import PendingCall
from ..language.builtins import STDLIB_EXCEPTIONS
from .. import values
from ..values import Decoder, bounded_repr, pack

__all__ = [
    'PROTOCOL_VERSION', 'PATH', 'MAX_FRAME', 'OPEN', 'FEED', 'ANSWERS', 'RESUME', 'DUMP', 'LOAD', 'CLOSE', 'LIST', 'DELETE',
    'OPENED', 'EVENTS', 'RESULT', 'PAUSED', 'ERROR', 'DRAIN', 'CLOSED', 'SESSIONS', 'DELETED', 'CALL', 'OUTPUT',
    'CLOSE_PROTOCOL', 'CLOSE_UNAUTHORIZED', 'CLOSE_TOO_LARGE', 'CLOSE_SLOW', 'CLOSE_ENDED', 'CLOSE_DRAIN', 'CLOSE_BUSY',
    'encode', 'decode', 'kind_of', 'error_message', 'error_from', 'builtin_exception', 'pending_from', 'pending_items',
]

#: The version of this protocol. The server refuses a client of another version, saying so.
PROTOCOL_VERSION = 2

#: The WebSocket path of a session, below the server's URL.
PATH = '/session'

#: Default largest frame, in bytes, a server accepts from a client (`corral serve --max-frame`): a
#: value as large as a worker's channel carries (`corral.values.MAX_FRAME`), and room for its envelope.
MAX_FRAME = values.MAX_FRAME + 64 * 1024

OPEN, FEED, ANSWERS, RESUME, DUMP, LOAD, CLOSE, LIST, DELETE = range(1, 10)
OPENED, EVENTS, RESULT, PAUSED, ERROR, DRAIN, CLOSED, SESSIONS, DELETED = range(11, 20)
CALL, OUTPUT = range(21, 23)

#: WebSocket close codes (4000-4999 are the application's, RFC 6455 7.4.2).
CLOSE_PROTOCOL = 4400  # a frame broke the protocol, or the versions differ
CLOSE_UNAUTHORIZED = 4401  # the API key was refused
CLOSE_TOO_LARGE = 4413  # a frame over the server's max_frame
CLOSE_SLOW = 4408  # the client did not read what the server sent
CLOSE_ENDED = 4410  # the session could not start, or ended (its worker died)
CLOSE_DRAIN = 4503  # the server is shutting down
CLOSE_BUSY = 4429  # too many connections wait to open a session (from the client's address, or in all)


def encode(message: list[Any]) -> bytes:
    """One message as the bytes of one binary frame (`corral.values.pack`, the host's conversions)."""
    return pack(message, side='host')


def decode(data: bytes, *, items: int | None = None, size: int | None = None, in_steps: bool = False) -> list[Any]:
    """The message in a frame; raises `ValueError` for anything that is not a non-empty list
    starting with an int kind (and what `corral.values.Decoder` raises, bounded by `items`, `size`).
    `in_steps`: decoded a few KiB at a time (`Decoder.decode_in_steps`), to run in a thread."""
    decoder = Decoder(items=items, size=size)
    message = decoder.decode_in_steps(data) if in_steps else decoder.decode(data)
    if not isinstance(message, list) or not message or type(message[0]) is not int:
        raise ValueError('a message must be a non-empty list whose first item is its kind')
    return message


def kind_of(data: bytes) -> int:
    """The kind of the message in a frame, read from its first few bytes without decoding the
    rest: what the server refuses by kind (a frame out of turn) costs it nothing to refuse. Raises
    `ValueError` where `decode` would not find a non-empty list starting with an int kind."""
    if len(data) > 1 and 0x91 <= data[0] <= 0x9F and data[1] < 0x80:  # a short array starting with a small int: every kind
        return data[1]
    unpacker = msgpack.Unpacker(max_buffer_size=16)
    unpacker.feed(data[:16])  # an array's header (5 bytes at most) and an int (9 at most)
    try:
        length = unpacker.read_array_header()
        kind = unpacker.unpack() if length else None
    except (msgpack.UnpackException, ValueError):  # not an array, cut short, or no msgpack
        kind = None
    if type(kind) is not int:
        raise ValueError('a message must be a non-empty list whose first item is its kind')
    return kind


#: The corral exceptions an ERROR may name, by class name.
_CORRAL = {
    name: getattr(errors, name) for name in errors.__all__
}


def error_message(error: BaseException) -> list[Any]:
    """The ERROR message that makes the client raise `error` again: its class and exact text.

    corral's exceptions keep their attributes (`exc_type` and `message`, `limit` and `value`,
    `diagnostics`, a quota's `tenant`, `quota`, `limit` and `used`); a built-in exception (`RuntimeError`, `KeyError`, `ValueError`, `TypeError`
    from a misused API) keeps its first argument; anything else becomes a `SandboxError` naming it.
    """
    attributes: dict[str, Any] = {}
    if isinstance(error, errors.SandboxRuntimeError):
        attributes = {'exc_type': error.exc_type, 'message': error.message}
    elif isinstance(error, errors.SandboxLimitError):
        attributes = {'limit': error.limit, 'value': error.value}
    elif isinstance(error, errors.StubError):
        attributes = {'diagnostics': error.diagnostics}
    elif isinstance(error, errors.SandboxQuotaError):
        attributes = {'tenant': error.tenant, 'quota': error.quota, 'limit': error.limit, 'used': error.used}
    name = type(error).__name__
    if name in _CORRAL and type(error) is _CORRAL[name]:
        text = str(error)
    elif getattr(builtins, name, None) is type(error) and isinstance(error, Exception):
        text = error.args[0] if len(error.args) == 1 and isinstance(error.args[0], str) else str(error)
    else:
        name, text = 'SandboxError', f'the server failed ({type(error).__name__}: {error})'
    return [ERROR, name, text, attributes]


def error_from(kind: Any, text: Any, attributes: Any) -> BaseException:
    """The exception an ERROR message stands for (see `error_message`); a malformed one is a `SandboxError`."""
    if not isinstance(text, str) or not isinstance(attributes, dict):
        return errors.SandboxError('the corral server sent a malformed error')
    cls = _CORRAL.get(kind) if isinstance(kind, str) else None
    if cls is errors.SandboxRuntimeError:
        return cls(text, exc_type=str(attributes.get('exc_type', '')), message=str(attributes.get('message', '')))
    if cls is errors.SandboxLimitError:
        return cls(text, limit=str(attributes.get('limit', '')), value=attributes.get('value'))
    if cls is errors.StubError:
        return cls(text, diagnostics=attributes.get('diagnostics'))
    if cls is errors.SandboxQuotaError:
        limit, used = attributes.get('limit'), attributes.get('used')
        return cls(
            text,
            tenant=str(attributes.get('tenant', '')),
            quota=str(attributes.get('quota', '')),
            limit=limit if isinstance(limit, (int, float)) else 0,
            used=used if isinstance(used, (int, float)) else 0,
        )
    if cls is not None:
        return cls(text)
    builtin = builtin_exception(kind, [text]) if isinstance(kind, str) else None
    if builtin is not None and type(builtin).__name__ == kind:
        return builtin
    return errors.SandboxError(text)


def builtin_exception(name: str, args: list[Any]) -> Exception:
    """An instance of the built-in exception class `name` with exactly `args` (no `__init__` runs,
    so any args fit), or an `Exception` with them when `name` is not a built-in exception class
    (or a standard library one of `STDLIB_EXCEPTIONS`: `json.JSONDecodeError` from its
    `[msg, doc, pos]`).

    `corral.host.external.exception_payload` turns it back into `[name, args]`: a host function's
    error crosses the network as it would have crossed the worker's channel. Two classes cannot be
    made so: an exception group needs its exceptions (an `Exception` with `args` stands in), and a
    `StopIteration` cannot be raised into an awaited future, so it becomes the `RuntimeError` that
    PEP 479 makes of a `StopIteration` leaving a coroutine.
    """
    cls = getattr(builtins, name, None)
    if name in STDLIB_EXCEPTIONS:  # `json.JSONDecodeError`: a standard library class the sandbox offers
        module, attr = STDLIB_EXCEPTIONS[name]
        cls = getattr(importlib.import_module(module), attr)
        if cls is json.JSONDecodeError:  # its args are [msg, doc, pos], its attributes made from them
            return cls(*args) if [type(arg) for arg in args] == [str, str, int] else Exception(*args)
    if cls is StopIteration:
        return RuntimeError(f'the host function raised StopIteration({bounded_repr(list(args), limit=200)[1:-1]})')
    if not (isinstance(cls, type) and issubclass(cls, Exception)) or issubclass(cls, BaseExceptionGroup):
        cls = Exception
    error = cls.__new__(cls)
    error.args = tuple(args)
    return error


def pending_from(items: Any) -> list[PendingCall]:
    """The `PendingCall`s of a PAUSED message (or of OPENED's `pending`)."""
    if not isinstance(items, list):
        raise ValueError('malformed pending calls')
    calls = []
    for item in items:
        if not (isinstance(item, list) and len(item) == 5 and isinstance(item[0], int) and isinstance(item[1], str)):
            raise ValueError('malformed pending call')
        if not (isinstance(item[2], list) and isinstance(item[3], dict)):
            raise ValueError('malformed pending call')
        calls.append(PendingCall(*item))
    return calls


def pending_items(calls: list[PendingCall]) -> list[list[Any]]:
    """The `pending` item of a response: what `pending_from` reads back."""
    return [[call.call_id, call.function, call.args, call.kwargs, call.payload] for call in calls]
