"""A connection's host calls: the session's host functions as proxies that send each call to the
client (`_SyncProxy`, `_AsyncProxy`), and the client's answers, checked and settled (`ClientCalls`),
including those it held from a first attempt on a server that went away."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import SandboxError
from ..host.deferred import Deferred, RemoteAnswer
from ..values import bounded_repr
from . import protocol as p
from .ending import _Close, _shape

if TYPE_CHECKING:
    from .connection import _Connection


class _SyncProxy:
    """A sync host function of the session: the script waits for it (the session awaits the answer).
    The call goes to the client as it is made, and the future returned is its answer."""

    __slots__ = ('_connection', '_name')

    def __init__(self, connection: _Connection, name: str) -> None:
        self._connection = connection
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._connection.call(self._name, args, kwargs)


class _AsyncProxy(_SyncProxy):
    """An async host function of the session (`is_async_callable` says so): it too returns the
    future, so that the call is queued for the client as the session runs it, not in a task's turn."""

    __slots__ = ()
    corral_awaited = True


def _proxies(connection: _Connection, functions: Any, prefix: str = '') -> dict[str, _SyncProxy]:
    if not (isinstance(functions, dict) and all(isinstance(k, str) and isinstance(v, bool) for k, v in functions.items())):
        raise ValueError('functions must map names to whether they are async')
    return {name: (_AsyncProxy if is_async else _SyncProxy)(connection, prefix + name) for name, is_async in functions.items()}


class ClientCalls:
    """The part of `_Connection` that sends the session's host calls to the client and settles them
    with its answers.

    It uses the calls in flight (`_calls`, `_next_call`, `_feed_calls`), the answers held from a
    first attempt (`_held`), the connection's event loop (`_loop`) and `_event`, which queues a call
    for the client.
    """

    def _held_answers(self, held: Any) -> dict[str, list[list[Any]]]:
        """The answers a client gave to host calls of this request's first attempt, on a server
        that went away: `[name, args, kwargs, how, value]` each, by function name."""
        if not isinstance(held, list):
            raise _Close(p.CLOSE_PROTOCOL, SandboxError('the held answers are malformed'))
        by_name: dict[str, list[list[Any]]] = {}
        for entry in held:
            if not (isinstance(entry, list) and len(entry) == 5 and isinstance(entry[0], str) and isinstance(entry[1], list) and isinstance(entry[2], dict)):
                raise _Close(p.CLOSE_PROTOCOL, SandboxError('the held answers are malformed'))
            if entry[3] not in ('ok', 'error', 'deferred') or (entry[3] == 'error' and not _is_error_payload(entry[4])):
                raise _Close(p.CLOSE_PROTOCOL, SandboxError('the held answers are malformed'))
            by_name.setdefault(entry[0], []).append(entry)
        return by_name

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> RemoteAnswer:
        """Send a host call to the client; the future is its answer. A call the client already
        answered in this request's first attempt (same function, equal arguments) is answered with
        what it answered then, and does not run again."""
        future = RemoteAnswer(loop=self._loop)
        entries = self._held.get(name)
        if entries:
            for index, (_, held_args, held_kwargs, how, value) in enumerate(entries):
                if held_args == list(args) and held_kwargs == kwargs:
                    del entries[index]
                    self._settle_call(future, -1, how, value)
                    return future
        call_id = self._next_call
        self._next_call += 1
        self._feed_calls += 1
        self._calls[call_id] = future  # until it is answered (`_settle_call`), or the next request starts
        self._event([p.CALL, call_id, name, list(args), kwargs])
        return future

    def _answers(self, message: list[Any]) -> None:
        for future, call_id, how, value in self._checked_answers(message):
            self._settle_call(future, call_id, how, value)

    def _checked_answers(self, message: list[Any]) -> list[tuple[RemoteAnswer, int, str, Any]]:
        """The answers of an ANSWERS frame to calls still waiting, `(future, call_id, how, value)`
        each, all checked before any is settled; raises `_Close` for a frame that breaks the rules."""
        _, answers = _shape(message, 2)
        if not isinstance(answers, list):
            raise _Close(p.CLOSE_PROTOCOL, SandboxError('the ANSWERS frame is malformed'))
        checked: list[tuple[RemoteAnswer, int, str, Any]] = []
        taken: set[int] = set()
        for answer in answers:
            if not (isinstance(answer, list) and len(answer) == 3 and type(answer[0]) is int):  # a bool is no call id
                raise _Close(p.CLOSE_PROTOCOL, SandboxError('the ANSWERS frame is malformed'))
            call_id, how, value = answer
            if not 0 <= call_id < self._next_call:
                raise _Close(p.CLOSE_PROTOCOL, SandboxError(f'the client answered call {call_id}, which the server never made'))
            future = self._calls.get(call_id)
            if future is None or future.done() or call_id in taken:
                continue  # a call of a feed that has ended, or already answered
            if how not in ('ok', 'error', 'deferred'):
                raise _Close(p.CLOSE_PROTOCOL, SandboxError(f'the client answered call {call_id} in an unknown way {how!r}'))
            if how == 'error' and not _is_error_payload(value):
                raise _Close(p.CLOSE_PROTOCOL, SandboxError('the client sent a malformed error answer'))
            taken.add(call_id)
            checked.append((future, call_id, how, value))
        return checked

    def _settle_call(self, future: RemoteAnswer, call_id: int, how: Any, value: Any) -> None:
        """Answer a call; the session sends the answer to the worker before this returns."""
        self._calls.pop(call_id, None)
        if future.done():  # let go by the session as an answer before it in the frame was taken
            return
        if how == 'ok':
            future.settle(value)
        elif how == 'error':
            future.settle(error=_error(value))
        elif how == 'deferred':
            future.settle(error=Deferred(value))
        else:
            raise _Close(p.CLOSE_PROTOCOL, SandboxError(f'the client answered call {call_id} in an unknown way {how!r}'))


def _is_error_payload(payload: Any) -> bool:
    return isinstance(payload, list) and len(payload) == 2 and isinstance(payload[0], str) and isinstance(payload[1], list)


def _error(payload: Any) -> Exception:
    """The exception a host function raised in the client, `[class name, args]` as `exception_payload` made it."""
    if not _is_error_payload(payload):
        raise _Close(p.CLOSE_PROTOCOL, SandboxError('the client sent a malformed error answer'))
    return p.builtin_exception(payload[0], payload[1])


def _diverged(unused: list[list[Any]]) -> str:
    calls = ', '.join(f'{name}({bounded_repr(args, limit=200)[1:-1]}{", " if args and kwargs else ""}{", ".join(f"{k}={bounded_repr(v, limit=200)}" for k, v in kwargs.items())})' for name, args, kwargs, _, _ in unused)
    return (
        f'the feed was taken up again on another server after the first went away, and took another path: {calls} '
        'ran once in your process during the first attempt, but the second attempt did not call it again; the feed ran, '
        'but the effects of those calls are not in its result'
    )
