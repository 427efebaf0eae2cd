"""Runs one session's scripts inside a worker process, talking to the host over the channel."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import gc
import importlib
import linecache
import os
import select
import selectors
import signal
import socket
import sys
import time
import traceback
import types
from collections import deque
from collections.abc import Iterator
from typing import Any

from ..channel import CALL, CODE, COMPILE, DONE, FAIL, FEED, OUTPUT, PAUSE, REPLY, STOP, TIMED, WAIT, WAKE, FrameReader, ProtocolError, frame, poll
from ..language import catalog, facades, hostio, identity, logs
from ..language.packages import take_shown
from ..language import stop as stopping
from ..language.facades import recursion_limit
from ..language.facades import stderr as _STDERR
from ..language import EXCEPTIONS, STDLIB_EXCEPTIONS, CompiledScript, SandboxStop, compile_script, compile_unguarded, find_stop, import_module, make_builtins
from ..language.compile import compiler_tag, dump_compiled, load_compiled
from ..described import ModuleValue
from ..limits import amount
from ..language.guards import is_script_class
from ..language.named import sandbox_pairs
from ..language.rebuild import rebuild
from ..values import UNPACKABLE_RESULT, ValueLimitError, call_error, describe_instances, fits, flat, library_repr, measure, name_objects, pack, packed_bound, shown_name, unpack, worker_callables, worker_objects, worker_paths

__all__ = ['Worker', 'STDLIB_MODULES', 'PRELOAD_MODULES']

#: Standard library modules a script may import (the language's catalog, one list for the worker,
#: the type checker and the docs).
STDLIB_MODULES = catalog.STDLIB_MODULES

#: What the zygote imports before forking, because a locked-down worker cannot open files to
#: import anything later: the sandbox's modules, what they load lazily, and the time zones.
PRELOAD_MODULES = ('corral.language.preload',)

#: Iterators a host call's arguments may be: generators and the builtins' lazy iterators.
_ITERATORS = frozenset({types.GeneratorType, map, filter, zip, enumerate, reversed, type(iter([])), type(iter(())), type(iter(range(0)))})
_ITERATOR_IDS = frozenset(map(id, _ITERATORS))  # tested per call: an id's hash is an int's, a class's the language layer's (Python)

_RECV_SIZE = 1 << 18
_DONTWAIT = int(socket.MSG_DONTWAIT)
_SCRIPT_CACHE = 64
#: Bytes of messages a batched feed holds before it sends them anyway (see `Worker._write`), and
#: seconds the replies of replayed feeds that ran one after another are held at most (`_end_held`).
_HELD_BYTES = 1 << 16
_HELD_SECONDS = 0.005
#: The host's answers to what the worker asks in a feed (`_next_message`).
_ANSWERS = frozenset({REPLY, WAKE, PAUSE})
_NOTHING: Any = object()  # no builtin was hidden
#: A WAIT with no timer due, framed once: what a worker sends on each `await` of a host call.
_WAIT_FOREVER = frame(pack([WAIT, None], side='sandbox'))


class _HostSelector(selectors.EpollSelector):
    """The event loop's selector: the loop watches no file of its own; when it has nothing to run
    it asks the host for its next input (`wait`, the worker's `_wait`), so that every reply and
    every timer enters the worker at a point the host records (see `corral.channel`)."""

    wait: Any = None

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if (timeout is None or timeout > 0) and self.wait is not None:
            self.wait(timeout)
        return []


#: Code of these folders (the worker's own, asyncio's) is never interrupted by a stop: a stop that
#: arrives there waits `_STOP_RETRY` seconds and tries again, so the channel and the event loop
#: are always left whole. The host kills a worker that stays there past its grace period.
_SHIELDED = (os.path.dirname(os.path.dirname(__file__)) + os.sep, os.path.dirname(asyncio.__file__) + os.sep)
_STOP_RETRY = 0.005
#: The code of the sandbox's `time.sleep` (a sleep in the worker): a stop may be raised in it, where
#: it waits in CPython's `time.sleep`, which a signal handler that returns would resume (PEP 475).
_SLEEP = facades.sleep.__code__
#: Seconds the tasks a feed left behind have to end after they are cancelled, and again after they are stopped.
_CANCEL_GRACE = 0.1
_END_ATTEMPTS = 5
#: Tasks a session keeps between feeds (see `Worker._feed`): a feed that leaves more fails, and they end with it.
KEPT_TASKS = 100
#: Added to the depth `_recursion_depth` measures in `_run` / `_run_async` so that a script's
#: own frames, its top level included, reach exactly `Limits.recursion`: the frames between
#: (`start`, the task's step) less what the measure itself counts. Run plainly, run on the loop,
#: run on the loop with top-level await; tests/test_limits.py pins the depth each reaches.
#: Before 3.12 the measure's own call of `sys.setrecursionlimit` counts in the depth it
#: measures (a call through C code); from 3.12 C calls count apart, so there is one less to take.
_C_CALL = 1 if sys.version_info < (3, 12) else 0
_BELOW_SYNC = -1 - _C_CALL
_BELOW_LOOP = -1 - _C_CALL
_BELOW_AWAIT = -2 - _C_CALL

#: What the model reads when a limit stops its script: `limit -> (exception name, message)`.
#: `{}` is the limit's value with its unit (`limits.amount`).
_LIMIT_MESSAGES = {
    'wall_time': ('TimeoutError', 'the script ran past the wall_time limit of {}'),
    'cpu_time': ('TimeoutError', 'the script used more than the cpu_time limit of {}'),
    'host_calls': ('RuntimeError', 'the script made more than the host_calls limit of {}'),
    'memory': ('MemoryError', 'the script went past the memory limit of {}'),
    'recursion': ('RecursionError', 'maximum recursion depth exceeded'),
    'max_state_bytes': ('OverflowError', "the session's stored state would grow past the max_state_bytes limit of {} (Pool(max_state_bytes=...))"),
}


class _FeedTask(asyncio.Task):  # type: ignore[type-arg]
    """The task that runs a feed, as `asyncio.current_task()` shows it to the script: its repr
    names neither the worker's code nor the host's file paths."""

    def __repr__(self) -> str:
        return f"<Task {'finished' if self.done() else 'pending'} name={self.get_name()!r} coro=<<module>()>>"


class _Discard:
    """A channel that drops what is sent (the warm-up's)."""

    def sendall(self, data: bytes) -> None:
        pass


class _Stop(Exception):
    """The host closed the channel: the worker exits."""


class Worker:
    """One session's interpreter state and its side of the channel.

    `serve()` handles FEED messages until the host closes the channel. Host functions become
    plain (sync) or coroutine (async) functions in the script's builtins; each call sends a CALL
    frame and waits for its REPLY, so the script's frames stay in this process.

    The event loop runs only while a feed runs. Tasks a feed leaves are kept for the next feeds
    (up to `KEPT_TASKS`), settled first (`_settle_tasks`: no host call of theirs unanswered), so
    that everything a task took in is in the journal of the feed that took it in; a limit that
    stops a feed ends them all (`_end_leftover_tasks`).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, *, guarded: bool = True, packages: tuple[str, ...] = ()) -> None:
        self._packages = packages
        self._sock: socket.SocketType | _Discard = _Discard()
        self._fd = -1
        self._loop = loop
        self._reader = FrameReader()
        self._inbox: deque[list[Any]] = deque()
        self._futures: dict[int, asyncio.Future[Any]] = {}
        self._next_call = 0
        self._asking = False  # a WAIT was sent and its WAKE not yet taken in
        self._asked: float | None = None  # its timeout
        self._clock = 0.0  # the event loop's time: it moves only as the host's WAKE messages say
        loop.time = self._loop_time  # type: ignore[method-assign]
        selector = getattr(loop, '_selector', None)
        if isinstance(selector, _HostSelector):
            selector.wait = self._wait
        self._feeds = 0
        self._script_files: set[str] = set()
        self._script_name = 'main.py'
        self._modules: dict[str, types.ModuleType] = {}
        self._module_functions: dict[str, dict[str, Any]] = {}  # the host functions of each module, by their names
        self._host_names: set[str] = set()
        self._shadowed: dict[str, Any] = {}  # the builtins the feed's host functions hide, by name
        hostio.install(self._call_sync, self._call_async)  # files, environment, clock, sleeps and seed, through the host
        if guarded:
            logs.install()  # logging and warnings write to the script's stderr, timed by the host's clock
            describe_instances(is_script_class)  # the script's objects leave as InstanceValues
            self._builtins = make_builtins(print=self._print, import_=self._import)
            self._compile_script = compile_script
        else:  # the language layer skipped: plain Python, real builtins (see Pool(skip_layers=))
            self._builtins = {**vars(builtins), 'print': self._print}
            self._compile_script = compile_unguarded
        builtins_namespace = self._builtins
        name_objects(lambda: sandbox_pairs(builtins_namespace))  # type objects and builtins cross by name
        worker_callables(self._value_function)  # host callables given as values
        worker_objects(hostio.describe_file, self._describe_module)  # a file the script opened crosses as its path, mode and position; a host module as its name and attributes
        worker_paths(facades.PosixPath)  # a path given to the script is the sandbox's own, reaching files through the mounts
        self._compiler = compiler_tag(guarded)  # the code a CODE message may bring (see `_take_code`)
        self._globals: dict[str, Any] = {'__name__': '__main__', '__doc__': None, '__builtins__': self._builtins}
        self._limits: dict[str, Any] = {}
        self._packed_bound: int | None = 0  # the feed's `values.packed_bound`
        self._output = self._left_out = 0
        self._calls = 0
        self._scripts: dict[str, CompiledScript] = {}
        self._pending_stop: str | None = None
        self._kept = False  # tasks the last feed left (see `_end_leftover_tasks`)
        self._stops: list[SandboxStop] = []  # the stops this worker raised in the current feed
        self._held: list[bytes] | None = None  # messages a batched feed has not sent yet (see `_write`)
        self._replayed = False  # the last feed was batched: the next is a replay's too, or a live one's after a load (see `_receive`)
        self._held_bytes = 0
        self._held_since = 0.0  # when the messages held began (see `_end_held`)
        signal.signal(signal.SIGALRM, self._on_stop_signal)
        signal.signal(signal.SIGXCPU, self._on_stop_signal)

    def attach(self, sock: socket.SocketType) -> None:
        """Take `sock` as the channel to the host (once, in the forked worker)."""
        self._sock = sock
        self._fd = sock.fileno()
        # where `_wait` sleeps (see `_next_message`): the loop's epoll instance, which serves nothing else
        self._loop._selector.register(self._fd, selectors.EVENT_READ)  # type: ignore[attr-defined]

    # ----- channel -------------------------------------------------------------------------------

    def _send(self, message: list[Any]) -> None:
        self._write(frame(pack(message, side='sandbox')))

    def _write(self, data: bytes) -> None:
        """Send framed messages now, or, in a feed whose answers all came ahead of it (a replayed
        feed's: `limits['batched']`), when the worker next waits for the host or the feed ends
        (`_flush`): the host checks them, and runs nothing for them."""
        held = self._held
        if held is None:
            self._sock.sendall(data)
            return
        held.append(data)
        self._held_bytes += len(data)
        if self._held_bytes > _HELD_BYTES:
            self._flush()

    def _flush(self) -> None:
        """Send the messages `_write` holds."""
        if self._held:
            data = b''.join(self._held)
            self._held.clear()
            self._held_bytes = 0
            self._sock.sendall(data)

    def _stop_holding(self) -> None:
        """Send what batched feeds held, and send what comes next at once."""
        if self._held is not None:
            self._flush()
            self._held = None

    def _end_held(self) -> bool:
        """At the end of a batched feed: whether its messages stay held with the next feed's,
        which the host sent ahead and the worker has (a replay's feeds run one after another, their
        replies go to the host in one write, which wakes it once). Held for `_HELD_SECONDS` at most,
        so the host checks each feed soon after it ran; else they go now."""
        if not self._inbox:
            self._receive(block=False)
        return bool(self._inbox) and self._inbox[0][0] in (CODE, FEED) and time.monotonic() - self._held_since < _HELD_SECONDS

    def _receive(self, *, block: bool) -> bool:
        """Read what the socket has and queue whole messages; False when nothing was there.

        A blocking read polls (`channel.poll`) before it sleeps, but for the next feed of a replay
        (after a batched feed): the host sends it as it is ready, and the worker outran it.
        """
        data = self._recv_nowait()
        if data is None:
            if not block:
                return False
            if not self._replayed:
                data = poll(self._recv_nowait)
            if data is None:
                data = self._sock.recv(_RECV_SIZE)
        if not data:
            raise _Stop
        self._take(data)
        return True

    def _take(self, data: bytes) -> None:
        """Decode the whole messages `data` completes and queue them."""
        for payload in self._reader.feed(data):
            message = unpack(payload, objects=rebuild)
            if not isinstance(message, list) or not message:
                raise ProtocolError('malformed message from the host')
            self._inbox.append(message)

    def _recv_nowait(self) -> bytes | None:
        """What the socket has (b'' when the host closed it), or None when nothing is there."""
        try:
            return self._sock.recv(_RECV_SIZE, _DONTWAIT)
        except BlockingIOError:
            return None

    def _next_message(self, *, stoppable: bool = False) -> list[Any]:
        """The host's next message, in a feed: what answers the CALL or WAIT just sent.

        A PAUSE (the host holds the feed on a deferred call, maybe for days) stops the wall_time
        timer; the answer that ends the pause starts it again, the feed's whole wall_time afresh
        (a replayed feed's timer starts there too: see `_feed`).
        `stoppable`: sleep in the standard library's selector, where a stop (wall_time) may be
        raised, having read nothing; elsewhere in the worker's code a stop waits (see `_SHIELDED`).
        """
        paused = False
        while True:
            while not self._inbox:
                self._flush()  # what the host is to read before it answers
                if not stoppable:
                    self._receive(block=True)
                elif not self._receive(block=False) and not poll(lambda: self._receive(block=False)):
                    selectors.EpollSelector.select(self._loop._selector)  # type: ignore[attr-defined]  # stdlib code: a stop may land here
            message = self._inbox.popleft()
            if message[0] not in _ANSWERS:  # not an answer (a batched feed asked past its record): the host is to see where
                self._flush()
            if message[0] != PAUSE:
                break
            paused = True
            signal.setitimer(signal.ITIMER_REAL, 0)
        if paused and self._limits.get('wall_time'):
            signal.setitimer(signal.ITIMER_REAL, self._limits['wall_time'])
        return message

    def _wait(self, timeout: float | None) -> None:
        """The event loop has nothing to run until a reply or its next timer (`timeout` seconds
        of its clock away): ask the host, which answers with one WAKE, and take it in.

        A stop raised while the worker sleeps leaves the WAIT asked: the host answers it all the
        same (at the latest when the feed ends), and the next wait takes that answer.
        """
        if not self._asking:
            if timeout is None:
                self._write(_WAIT_FOREVER)
            else:
                self._send([WAIT, float(timeout)])
            self._asking, self._asked = True, timeout
        message = self._next_message(stoppable=True)
        if message[0] != WAKE:
            raise ProtocolError('expected a WAKE message from the host')
        self._take_wake(message)

    def _take_wake(self, message: list[Any]) -> None:
        """Take in the host's answer to the WAIT asked: move the clock on, hand over the reply."""
        if len(message) != 5 or not self._asking:
            raise ProtocolError('malformed WAKE message from the host')
        _, seconds, call_id, ok, value = message
        timeout = self._asked
        if type(seconds) is not float or seconds < 0.0 or (timeout is not None and seconds > timeout) or (timeout is None and call_id is None and seconds):
            raise ProtocolError('malformed WAKE message from the host')
        self._asking = False
        self._clock += seconds
        if not ok and value[0] == STOP:
            raise self._stop(*value[1])
        if call_id is not None:
            future = self._futures.pop(call_id, None)
            if future is not None and not future.cancelled():  # None: a call of a task that was cancelled
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(_host_exception(value))

    def _loop_time(self) -> float:
        return self._clock

    # ----- host functions ------------------------------------------------------------------------

    def _start_call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
        """Send the CALL of host function `name`; its id. Arguments that are all `flat` (most
        calls') are packed first and measured only when the packed message is longer than the
        feed's `packed_bound`: a 1-int call is not walked at all."""
        quick = flat(args, kwargs)
        # a generator or iterator handed to a host function goes as the list it iterates to, as
        # the host function would iterate it (the script's code runs here, once)
        if not quick and (not _ITERATOR_IDS.isdisjoint(map(id, map(type, args))) or (kwargs and not _ITERATOR_IDS.isdisjoint(map(id, map(type, kwargs.values()))))):
            args = tuple(list(value) if id(type(value)) in _ITERATOR_IDS else value for value in args)
            kwargs = {key: list(value) if id(type(value)) in _ITERATOR_IDS else value for key, value in kwargs.items()}
        self._calls += 1
        limit = self._limits.get('host_calls')
        if limit is not None and self._calls > limit:
            raise self._stop('host_calls')
        call_id = self._next_call
        data = None
        if quick:
            try:
                message = pack([CALL, call_id, name, list(args), kwargs], side='sandbox')
            except Exception:  # a str msgpack cannot encode: measured and packed below, for the error
                message = None
            if message is not None and (self._packed_bound is None or len(message) <= self._packed_bound):
                data = frame(message)
        try:
            if data is None:
                arguments = [list(args), kwargs]
                self._measure(arguments, name)
                data = frame(pack([CALL, call_id, name, *arguments], side='sandbox'))
        except ValueLimitError as error:
            raise OverflowError(str(error)) from None
        except (TypeError, ValueError, ProtocolError) as error:  # a RecursionError is the script's own recursion's, as it is
            raise TypeError(f'{shown_name(name)}() cannot be called with these arguments: {error}') from None
        self._next_call += 1  # ids the host sees are consecutive
        self._write(data)
        return call_id

    async def _call_async(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        future = self._loop.create_future()
        self._futures[self._start_call(name, args, kwargs)] = future
        try:
            return await future
        except NameError as error:  # the host's refusal of an object it did not give: named here
            named = call_error(error, name)
            if named is error:
                raise
            raise named from None

    def _call_sync(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        call_id = self._start_call(name, args, kwargs)
        message = self._next_message()
        while message[0] == WAKE:  # the answer to a WAIT a stop cut short
            self._take_wake(message)
            message = self._next_message()
        if message[0] != REPLY or len(message) != 4 or message[1] != call_id:
            raise ProtocolError('unexpected message from the host during a call')
        _, _, ok, value = message
        if not ok and value[0] == STOP:
            raise self._stop(*value[1])
        if self._pending_stop is not None:  # a time limit passed while the host answered: the script stops at the call
            limit, self._pending_stop = self._pending_stop, None
            raise self._stop(limit)
        if ok:
            return value
        raise call_error(_host_exception(value), name)

    def _host_function(self, name: str, is_async: bool) -> Any:
        call_async, call_sync = self._call_async, self._call_sync
        if is_async:

            async def host_function(*args: Any, **kwargs: Any) -> Any:
                return await call_async(name, args, kwargs)

        else:

            def host_function(*args: Any, **kwargs: Any) -> Any:
                return call_sync(name, args, kwargs)

        host_function.__name__ = host_function.__qualname__ = name.rpartition('.')[2]
        host_function.__module__ = name.rpartition('.')[0] or 'builtins'
        return host_function

    def _value_function(self, name: str, shown: str, is_async: bool) -> Any:
        """The script's function of a host callable it was given as a value: each call a host call
        to it, by `name`; it shows as the callable's own name (`shown`)."""
        function = self._host_function(name, is_async)
        function.__name__ = function.__qualname__ = shown
        return function

    def _install_host_functions(self, functions: dict[str, bool], modules: dict[str, dict[str, Any]]) -> None:
        for name in self._host_names - functions.keys():  # a builtin a host function hid is the script's again
            shadowed = self._shadowed.pop(name, _NOTHING)
            if shadowed is _NOTHING:
                self._builtins.pop(name, None)
            else:
                self._builtins[name] = shadowed
        for name, is_async in functions.items():
            if name not in self._host_names and name in self._builtins:
                self._shadowed[name] = self._builtins[name]
            self._builtins[name] = self._host_function(name, is_async)
        self._host_names = set(functions)
        previous, self._modules, self._module_functions = self._modules, {}, {}
        for module_name, members in modules.items():
            # a module an earlier feed had is the same object, its members this feed's: a script's
            # variable that holds it calls the functions the host offers now
            module = previous.get(module_name) or types.ModuleType(module_name)
            for name in [name for name in vars(module) if not name.startswith('__')]:
                delattr(module, name)
            functions = self._module_functions[module_name] = {}
            for name, member in members.items():  # a function (whether it is async) or [a value]
                if type(member) is bool:
                    functions[name] = self._host_function(f'{module_name}.{name}', member)
                    setattr(module, name, functions[name])
                elif type(member) is list and len(member) == 1:
                    setattr(module, name, member[0])
                else:
                    raise ProtocolError('malformed FEED message from the host')
            self._modules[module_name] = module
        for module_name, module in self._modules.items():  # a submodule is an attribute of its parent
            parent, _, attr = module_name.rpartition('.')
            if parent:
                if parent not in self._modules:
                    raise ProtocolError('malformed FEED message from the host')
                setattr(self._modules[parent], attr, module)

    def _describe_module(self, value: Any) -> ModuleValue | None:
        """A host module as the host receives it (`corral.ModuleValue`); None for anything else."""
        if type(value) is not types.ModuleType:
            return None
        name = value.__dict__.get('__name__')
        if type(name) is not str or self._modules.get(name) is not value:
            return None
        functions = self._module_functions.get(name, {})
        attrs = {attr: f'{name}.{attr}' if item is functions.get(attr) else item for attr, item in value.__dict__.items() if not attr.startswith('_')}
        return ModuleValue(name, attrs)

    def _import(self, name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        # host modules, or facades of the standard library modules (the public API only, never a
        # module inside it); `from m import x` is checked against the module it imports from
        return import_module(name, fromlist, level, host_modules=self._modules, stdlib=STDLIB_MODULES, packages=self._packages)

    # ----- output --------------------------------------------------------------------------------

    def _print(self, *values: Any, sep: str | None = ' ', end: str | None = '\n', file: Any = None, flush: bool = False) -> None:
        if sep is None:
            sep = ' '
        if end is None:
            end = '\n'
        if not isinstance(sep, str) or not isinstance(end, str):
            raise TypeError('sep and end must be None or a string')
        text = sep.join(map(str, values)) + end
        data = text.encode('utf-8', 'surrogatepass')
        limit = self._limits.get('output')
        if limit is not None and self._output + len(data) > limit:
            # past the limit the script runs on, as CPython's would, but its output is cut: what
            # fits is sent, the rest counted, and the feed's output ends with how much was left out
            kept = data[:max(limit - self._output, 0)].decode('utf-8', 'ignore')
            self._left_out += len(data) - len(kept.encode('utf-8', 'surrogatepass'))
            self._output = limit
            if not kept:
                return
            text = kept
        else:
            self._output += len(data)
        self._send([OUTPUT, 'stderr' if file is _STDERR else 'stdout', text])

    def _end_cut_output(self) -> None:
        """The marker that ends a feed's output cut at the `output` limit."""
        if self._left_out:
            limit = self._limits.get('output')
            self._send([OUTPUT, 'stdout', (
                f"\n[{amount('output', self._left_out)} of output left out: the script printed more than the output "
                f"limit of {amount('output', limit)}]\n"
            )])

    # ----- feeds ---------------------------------------------------------------------------------

    def _start_warm_up(self) -> tuple[Any, dict[str, Any]]:
        """Queue the warm-up feed (see `serve`): its CODE and FEED frames decoded as the host's are,
        the CODE's code loaded (and left unused: the FEED compiles its text, as a worker does a text
        the host never compiled), the channel swapped for one that drops what is sent and the
        namespace for a scratch one. Returns the channel and namespace to put back (`_end_warm_up`)."""
        kept = self._sock, self._globals
        self._sock = _Discard()  # type: ignore[assignment]
        self._globals = {'__name__': '__main__', '__doc__': None, '__builtins__': self._builtins}
        self._take(_WARM_UP)
        _, _, _, data, imports_asyncio = self._inbox[0]
        with identity.uncounted():
            load_compiled(data, imports_asyncio, '<warm-up>')
        return kept

    def _end_warm_up(self, kept: tuple[Any, dict[str, Any]]) -> None:
        """Put back what `_start_warm_up` swapped, and forget the warm-up feed's limits."""
        self._sock, self._globals = kept
        self._limits = {}

    def serve(self, *, warm_up: bool = False) -> None:
        """Run feeds until the host closes the channel.

        With `warm_up`, first run one small feed, before the first real one arrives, and forget it.
        A forked worker shares its memory with the zygote until it writes to it; the first feed
        would pay for copying those pages (some 150 page faults, over a millisecond). Doing it
        here, while the worker waits idle in the pool, takes most of that off the first feed
        (measured: checkout + first feed 1.6 ms without, 1.0 ms with); a second warm-up feed
        through the event loop and a traceback took it to 0.76 ms but cost a third of the
        pool's fork throughput. The warm-up runs in a scratch namespace and sends nothing. It
        takes the path of a host's CODE and FEED, this loop included: the feed's stack is the
        first real feed's, whose recursion depth (`_recursion_depth`, measured by bisection
        once per stack) is then known (0.05 ms of the first feed after 50 ms idle, measured).
        """
        warming = self._start_warm_up() if warm_up else None
        try:
            while True:
                while not self._inbox:
                    if warming is not None:
                        self._end_warm_up(warming)
                        warming = None
                    self._stop_holding()  # what the host is to read before it sends more
                    self._receive(block=True)
                message = self._inbox.popleft()
                if message[0] != CODE and message[0] != FEED:
                    self._stop_holding()
                if message[0] == WAKE:  # the answer to a WAIT a stop cut short, sent as its feed ended
                    self._take_wake(message)
                elif message[0] == FEED and len(message) == 6:
                    self._feed(*message[1:])
                elif message[0] == COMPILE and len(message) == 3:
                    if self._compile(*message[1:]) is not None:
                        self._send([DONE, None, None])
                elif message[0] == CODE and len(message) == 5:
                    self._take_code(*message[1:])
                else:
                    raise ProtocolError('expected a FEED, CODE or COMPILE message')
        except (_Stop, ProtocolError, OSError):
            with contextlib.suppress(OSError):
                self._flush()  # what the host reads before the channel closes: a replay that went another way says where
            return

    def _compile(self, code: str, script_name: str) -> CompiledScript | None:
        """Compile a feed's script, or send its SyntaxError and return None.

        Compiled scripts are kept by their text (the last `_SCRIPT_CACHE`): a COMPILE before a
        FEED (the host sends one before type checking, so a syntax error reads as Python's), the
        host's code of a replayed feed (a CODE: `_take_code`) and a script run again reuse it.
        """
        self._script_name = script_name
        hostio.set_script_name(script_name)
        script = self._scripts.pop(code, None)
        if script is None:
            filename = f'<script {self._feeds + 1}>'
            try:
                with identity.uncounted():  # a COMPILE whose feed never runs is not in the journal
                    script = self._compile_script(code, filename)
            except SyntaxError as error:
                error.filename = script_name
                display = ''.join(traceback.format_exception_only(SyntaxError, error)).rstrip('\n')
                self._send([FAIL, 'syntax', type(error).__name__, str(error.msg), display, None])
                return None
            except (RecursionError, MemoryError):
                message = 'the script is nested too deeply to compile; split long expressions into steps'
                self._send([FAIL, 'syntax', 'SyntaxError', message, f'SyntaxError: {message}', None])
                return None
            except Exception as error:  # noqa: BLE001 - a construct the language layer got wrong: the session goes on
                message = f'the sandbox could not compile this script ({type(error).__name__}: {error}); write it another way'
                self._send([FAIL, 'syntax', 'SyntaxError', message, f'SyntaxError: {message}', None])
                return None
            self._keep(code, filename)
        self._scripts[code] = script
        return script

    def _take_code(self, code: Any, compiler: Any, data: Any, imports_asyncio: Any) -> None:
        """Keep the host's compiled code of `code` (a CODE message, before a replayed feed's FEED)
        as `_compile` keeps what it compiles, so the FEED runs it without compiling the text again.

        Taken only when `compiler` is this worker's own compiler (see `language.compile.compiler_tag`)
        and the text is not compiled already (a script run again reuses its code, as it did when it
        first ran); anything else is dropped, and the FEED compiles the text itself.
        """
        if type(code) is not str or type(data) is not bytes or compiler != self._compiler or code in self._scripts:
            return
        filename = f'<script {self._feeds + 1}>'
        try:
            with identity.uncounted():
                script = load_compiled(data, imports_asyncio is True, filename)
        except (ValueError, RecursionError, MemoryError):
            return
        self._keep(code, filename)
        self._scripts[code] = script

    def _keep(self, code: str, filename: str) -> None:
        """Make a newly compiled script's lines show in tracebacks, its frames the script's own;
        make room for it among the scripts kept (the oldest goes)."""
        lines = code.splitlines(True)
        if lines and not lines[-1].endswith('\n'):
            lines[-1] += '\n'  # as linecache reads a file: traceback's carets count on the line's newline
        linecache.cache[filename] = (len(code), None, lines, filename)
        self._script_files.add(filename)
        if len(self._scripts) >= _SCRIPT_CACHE:
            del self._scripts[next(iter(self._scripts))]

    def _feed(self, code: str, script_name: str, functions: dict[str, bool], modules: dict[str, dict[str, bool]], limits: dict[str, Any]) -> None:
        """Run one feed. `limits` holds the session's limits; with `replay` set (the host replays a
        stored session's journal) its wall_time timer does not run until the feed's pause, when the
        host holds it on a deferred call: what follows the pause runs live, under wall_time."""
        script = self._compile(code, script_name)
        if script is None:
            return
        self._feeds += 1
        self._install_host_functions(functions, modules)
        self._limits = limits
        self._packed_bound = packed_bound(limits.get('value_items'), limits.get('value_size'))
        hostio.host_sleeps = bool(limits.get('host_sleeps'))
        hostio.host_urandom = bool(limits.get('host_urandom'))
        hostio.max_urandom_bytes = limits.get('max_urandom_bytes', hostio.MAX_URANDOM_BYTES)
        self._output = self._calls = self._left_out = 0
        self._stops.clear()
        if not limits.get('batched'):
            self._stop_holding()
        elif self._held is None:  # else the replies of the replayed feeds before it are held still
            self._held, self._held_since = [], time.monotonic()
        self._replayed = limits.get('batched') is True
        wall_time = limits.get('wall_time')
        if wall_time and not limits.get('replay'):  # a replayed feed: none until its pause, if it has one
            signal.setitimer(signal.ITIMER_REAL, wall_time)
        failure: BaseException | None = None
        value: Any = None
        feed_task: asyncio.Task[Any] | None = None
        try:
            if script.is_async or script.imports_asyncio or 'asyncio' in self._globals or self._kept:
                feed_task = _FeedTask(self._run_async(script), loop=self._loop)
                value = self._loop.run_until_complete(feed_task)
            else:  # plain code: no event loop to go round
                value = self._run(script)
        except BaseException as error:  # the script's own exception, whatever its type
            failure = error
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            stopping.release()
            self._pending_stop = None
        if self._stops and not any(find_stop(failure) is own for own in self._stops):
            # a stop was due: whatever the script did after it (ended, or raised something else),
            # the feed ends with the limit
            failure, value = self._stops[0], None
        kept = len(self._kept_tasks())
        self._kept = kept <= KEPT_TASKS and kept > 0 and not self._stops  # the next feed runs on the loop, for them
        if kept > KEPT_TASKS and not self._stops:
            message = f'the script left {kept} tasks running; a session keeps at most {KEPT_TASKS} between feeds, so they were cancelled'
            if failure is None:
                failure, value = RuntimeError(message), None
            else:  # the script's own error stands, and says so below it
                failure.add_note(message)
        self._end_leftover_tasks(keep=not self._stops and kept <= KEPT_TASKS, kept=kept)
        if feed_task is not None and feed_task.done() and not feed_task.cancelled():
            # a stop raised in the event loop left the feed's task to end with it later: its
            # exception is the feed's failure already, not one for asyncio to print to stderr
            feed_task.exception()
        self._end_cut_output()
        shown = take_shown()
        data: bytes | None = None
        if failure is not None:
            reply = self._failure(failure)
        else:
            if value is None and shown:  # plt.show(): the figures are the script's value
                value = shown[0] if len(shown) == 1 else shown
            try:
                self._measure(value)
                data = frame(pack([DONE, value, library_repr(value)], side='sandbox'))
            except ValueLimitError as error:
                reply = [FAIL, 'limit', error.limit, str(error), f'OverflowError: {error}', None]
            except Exception as error:  # a conversion failed (a library's own error included): the worker stays up
                message = f'{UNPACKABLE_RESULT}: {error}'
                reply = [FAIL, 'runtime', 'TypeError', message, f'TypeError: {message}', None]
        # The feed's value and exception go before the reply, and the code their objects run as
        # they go (a generator's `finally`) with them, under the stop signal: once the host has
        # the reply it takes the worker for idle (and may keep it as a live checkpoint), so no line
        # of the script may run after it. A stop there ends the feed as wall_time does.
        stops = len(self._stops)
        signal.setitimer(signal.ITIMER_REAL, _CANCEL_GRACE)
        try:
            failure = value = shown = None
            for stop in self._stops:  # kept until the next feed: without the frames it was raised over
                stop.__traceback__ = stop.__context__ = stop.__cause__ = None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            stopping.release()
            self._pending_stop = None
        if len(self._stops) > stops:
            message = f"the code the script's value or exception ran as they were dropped (a generator's finally) did not end within {_CANCEL_GRACE:g} seconds"
            self._send([FAIL, 'limit', 'wall_time', message, f'TimeoutError: {message}', None])
        elif data is not None:
            self._write(data)
        else:
            self._send(reply)
        if self._held is not None and self._end_held():
            return
        self._stop_holding()
        os.sched_yield()  # the host, woken by the reply on this CPU, takes it now, not after the worker's way back to its poll

    def _measure(self, value: Any, call: str | None = None) -> None:
        """Check a value before it leaves the sandbox (`values.measure`, with the feed's limits):
        the arguments of a call of the host function `call`, or the script's result (None)."""
        limits = self._limits
        items, size = limits.get('value_items'), limits.get('value_size')
        if fits(value, items, size):  # most values: no walk, and no subject named
            return
        subject = 'the result' if call is None else f'the call to {shown_name(call)}()'
        measure(value, items=items, size=size, subject=subject, crossing='leave the sandbox')

    def _stop(self, limit: str, *error: str, frame: types.FrameType | None = None) -> SandboxStop:
        """A stop for `limit`, to raise in the script (`frame` is where, if known): remembered as
        this feed's own (see `_failure`), and due from now on (see `stop.py`); the stop
        timer ticks every `stop.REPEAT_SECONDS` until the feed ends, to trace the script again.
        `limit` 'stopped': the host stopped the feed with `error` (its exc_type and message)."""
        stop = SandboxStop(limit, *error)
        self._stops.append(stop)
        stopping.enforce(stop, frame if frame is not None else sys._getframe(1), self._script_files)
        signal.setitimer(signal.ITIMER_REAL, stopping.REPEAT_SECONDS, stopping.REPEAT_SECONDS)
        return stop

    def _failure(self, error: BaseException) -> list[Any]:
        """The FAIL message of the exception that ended a script: a limit it broke, or its own error.

        Only a stop this worker raised in this feed, a RecursionError, or a MemoryError without a
        message (the allocator's) reports a limit. A script can get hold of
        a stop (one that ended a task it kept: `task.exception()`) and raise it, or another of
        its class: that is the script's own error, not a limit, and never an unknown one.
        """
        stop = find_stop(error)
        if stop is not None and not any(stop is own for own in self._stops):
            stop = None
        limit = stop.args[0] if stop is not None else {MemoryError: 'memory', RecursionError: 'recursion'}.get(type(error))
        if limit == 'memory' and error.args:  # raised with words (`os.urandom`'s cap, the script's own): not the allocator's
            limit = None
        if limit is None:
            message, display = _escaped(_message(error)), _escaped(self._format_traceback(error))
            return [FAIL, 'runtime', _escaped(type(error).__name__), message, display, _detail(error)]
        if limit == 'stopped':  # the host's own error (StopFeed)
            exc_type, message = _escaped(stop.args[1]), _escaped(stop.args[2])
        else:
            exc_type, template = _LIMIT_MESSAGES[limit]
            message = template.format(amount(limit, self._limits.get(limit)))
        if stop is not None:  # its traceback is where it was last raised; what it was raised over is noise
            stop.__cause__ = stop.__context__ = None
        frames = self._format_traceback(stop if stop is not None else error).splitlines()
        while frames and not frames[-1].startswith(' '):  # the exception's own lines
            frames.pop()
        display = '\n'.join([*frames, f'{exc_type}: {message}'])
        if limit == 'recursion':  # CPython's words, and the limit in a note below them, as `add_note` shows one
            display += f"\nthe sandbox's recursion limit is {amount(limit, self._limits.get(limit))} (Limits.recursion); write deep recursion as a loop"
        if limit == 'stopped':
            return [FAIL, 'runtime', exc_type, message, display, None]
        return [FAIL, 'limit', limit, message, display, None]

    def _on_stop_signal(self, signum: int, frame: types.FrameType | None) -> None:
        """SIGALRM (wall time, and the stop timer's ticks) and SIGXCPU (CPU time): stop the
        script, where that is safe; once a stop is due, trace the script again and raise it again."""
        if stopping.due() is not None:
            stopping.rearm(frame)
            if self._in_script(frame):
                stopping.raise_due()
            return
        filename = frame.f_code.co_filename if frame is not None else ''
        limit = 'cpu_time' if signum == signal.SIGXCPU else self._pending_stop or 'wall_time'
        if filename.startswith(_SHIELDED) and frame.f_code is not _SLEEP:  # type: ignore[union-attr]
            self._pending_stop = limit
            signal.setitimer(signal.ITIMER_REAL, _STOP_RETRY)
            return
        self._pending_stop = None
        raise self._stop(limit, frame=frame)

    def _in_script(self, frame: types.FrameType | None) -> bool:
        """Whether `frame` is the script's, or code the script called (not the worker's or asyncio's
        on the script's behalf: the event loop waiting in `selectors` is not)."""
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename in self._script_files:
                return True
            if filename.startswith(_SHIELDED):
                return False
            frame = frame.f_back
        return False

    def _run(self, script: CompiledScript) -> Any:
        """Run a script without top-level `await`, and return its value."""
        limit = self._limit_recursion(_BELOW_SYNC)
        try:
            return script.start(self._globals)
        finally:
            sys.setrecursionlimit(limit)  # the worker's own frames, reporting the script's end, need room
            hostio.flush_open_files()  # files the script left open are written back, as at exit

    async def _run_async(self, script: CompiledScript) -> Any:
        """Run a script with top-level `await` on the worker's event loop, and return its value
        once the tasks it keeps are settled (`_settle_tasks`), whether it ended or raised."""
        limit = self._limit_recursion(_BELOW_AWAIT if script.is_async else _BELOW_LOOP)
        try:
            try:
                result = script.start(self._globals)
                value = await result if script.is_async else result
            except BaseException:
                if not self._stops:
                    await self._settle_tasks()
                raise
            await self._settle_tasks()
            return value
        finally:
            sys.setrecursionlimit(limit)
            hostio.flush_open_files()

    async def _settle_tasks(self) -> None:
        """Once the feed's script has ended, run the tasks it keeps until each waits on a timer or
        on another task, with no host call of theirs unanswered: the answers to a feed's host calls
        are taken in within that feed, so the journal of each feed is whole (a replay, a rollback
        and a dump need nothing of the next). In the feed's own task, under its limits. Nothing
        here asks for an identity (`language.identity`): the ids a script sees count its own work."""
        loop = self._loop
        while True:
            while loop._ready:  # type: ignore[attr-defined]  # the others run before this one again
                await asyncio.sleep(0)
            unanswered = [future for future in self._futures.values() if not future.done()]  # not one a task gave up on
            if not unanswered:
                return
            answered = loop.create_future()

            def wake(future: asyncio.Future[Any]) -> None:
                if not answered.done():
                    answered.set_result(None)

            for future in unanswered:
                future.add_done_callback(wake)
            try:
                await answered
            finally:
                for future in unanswered:
                    future.remove_done_callback(wake)

    def _kept_tasks(self) -> list[asyncio.Task[Any]]:
        """The tasks the script started that have not ended (asked without an identity: see `_settle_tasks`)."""
        with identity.uncounted():  # iterating asyncio's WeakSet of tasks hashes a guard object
            return [task for task in asyncio.all_tasks(self._loop) if not task.done()]

    def _limit_recursion(self, below: int) -> int:
        """Let the script's own frames go exactly `recursion` deep: its top level and the calls
        under it, counted as the interpreter counts depth (a frame, or a call through C code).
        Returns the limit it replaced, to restore once the script is done.

        `below` is one of the `_BELOW_...` adjustments, for how the script is started.
        """
        previous = sys.getrecursionlimit()
        sys.setrecursionlimit(recursion_limit(self._limits.get('recursion', 1000), _recursion_depth() + below))
        return previous

    def _end_leftover_tasks(self, keep: bool, kept: int) -> None:
        """With `keep`, the tasks the script started and did not await stay for the next feeds, as
        they do in CPython's asyncio REPL: they wait (on a timer, another task, an event), their
        host calls answered (see `_settle_tasks`), and go on while a later feed runs the event
        loop (when it awaits); their timers move on the clock of those feeds (the host's WAKE
        messages), never between feeds. What the script left in reference cycles is finalized now,
        and the callbacks that queues run, as below; `kept` is how many tasks there are.

        Otherwise (a limit stopped the feed, or it left more than `KEPT_TASKS` tasks), the tasks
        end with the feed, those kept from earlier feeds too. Each is cancelled; one still
        running `_CANCEL_GRACE` seconds later (it swallowed the
        `CancelledError`, or it computes without awaiting) gets a `SandboxStop` at the point it
        waits, or from the stop signal while it computes: once that stop is due no line of the
        script runs (see `stop.py`); after a feed a stop ended, it is due from the start.
        Callbacks queued as they end run here too, not in the next feed (a stop leaves the loop
        with them still queued), and so does what the script left in reference cycles (under the
        stop signal too); the timers the feed scheduled are cancelled. The feed's own outcome stands. Tasks or
        callbacks left after `_END_ATTEMPTS` rounds fail the feed and end the worker, and with
        it the session; code a task runs in C past the stops ends the session too, the host
        killing the worker after `Limits.grace`.
        """
        loop = self._loop
        for future in self._futures.values():
            future.cancel()
        self._futures.clear()
        # Garbage the script left in reference cycles is finalized now, its code (a generator's
        # `finally`, an async generator's `aclose()` task) run in this feed, not whenever a later
        # feed's allocations start a collection: the young generations always (the session's
        # long-lived objects are not walked), all of them while an async generator is alive.
        # Their code runs under the stop signal, as the tasks' does below.
        signal.setitimer(signal.ITIMER_REAL, _CANCEL_GRACE)
        try:
            gc.collect(2 if loop._asyncgens else 1)  # type: ignore[attr-defined]
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            stopping.release()
            self._pending_stop = None
        timed = False  # a task outlived its cancellation, or a stop ended one: where depends on time
        for _ in range(_END_ATTEMPTS if keep else 0):
            if not loop._ready or self._stops:  # type: ignore[attr-defined]
                break
            # what the collection queued (an async generator's `aclose()`): its rounds run as the
            # feed's own code; the tasks it leaves wait with the others
            signal.setitimer(signal.ITIMER_REAL, _CANCEL_GRACE)
            try:
                _run_until_done(loop, [], _CANCEL_GRACE)
            except (SystemExit, KeyboardInterrupt):
                pass
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                stopping.release()
                self._pending_stop = None
        if keep and (loop._ready or self._stops):  # type: ignore[attr-defined]  # finalizers ran past their grace: the tasks end after all
            keep = False
        for attempt in range(0 if keep else _END_ATTEMPTS):
            tasks = self._kept_tasks()
            if not tasks and not loop._ready:  # type: ignore[attr-defined]
                break  # nothing left, not even a callback queued as a task ended under a stop
            if attempt == 0 and self._stops:
                # the feed ended by a stop (one raised in the event loop leaves the feed's task
                # pending): the stop stays due, so the tasks end without running a line
                stopping.enforce(self._stops[0], None, self._script_files)
            timed = timed or attempt > 0
            for task in tasks:
                if attempt == 0:
                    task.cancel()
                else:
                    waiter = task._fut_waiter  # type: ignore[attr-defined]
                    if waiter is not None and not waiter.done() and not isinstance(waiter, asyncio.Task):
                        waiter.set_exception(self._stop('wall_time'))
            signal.setitimer(signal.ITIMER_REAL, _CANCEL_GRACE)
            try:
                _run_until_done(loop, tasks, _CANCEL_GRACE)
            except (SystemExit, KeyboardInterrupt) as error:  # a task ended by a stop (or raising these): the loop passes it on
                timed = timed or find_stop(error) is not None
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                stopping.release()
                self._pending_stop = None
        # timers the feed scheduled (an `asyncio.timeout` it entered and never left) end with it,
        # unless a task it keeps (`kept` of them) may wait on one
        if not keep or not kept:
            for timer in loop._scheduled:  # type: ignore[attr-defined]
                timer.cancel()
        if timed:
            self._send([TIMED])
        if not keep and (loop._ready or self._kept_tasks()):  # type: ignore[attr-defined]  # they would run in the next feed
            message = f'tasks the script started did not end with its feed (cancelled, then stopped {_END_ATTEMPTS - 1} times); the session is over'
            self._send([FAIL, 'runtime', 'RuntimeError', message, f'RuntimeError: {message}', None])
            raise _Stop

    def _format_traceback(self, error: BaseException) -> str:
        """Python's traceback text, keeping only the script's own frames."""
        _drop_repeated_frames(error)
        try:
            summary = traceback.TracebackException.from_exception(error)
        except Exception:
            # From 3.12 a NameError's hint looks the name up on the `self` of the last frame
            # (`Did you mean: 'self.x'?`), which runs that object's `__getattr__` (a script's, or
            # a refused builtin's) and can raise: the texts then go without a hint.
            for current in _chain(error):
                if isinstance(current, NameError):
                    current.name = None
            summary = traceback.TracebackException.from_exception(error)
        for current in _chain(summary):
            frames = [frame for frame in current.stack if frame.filename in self._script_files]
            for frame_summary in frames:
                frame_summary.line  # load the source line before renaming the file
                frame_summary.filename = self._script_name
            current.stack = traceback.StackSummary.from_list(frames)
        return ''.join(summary.format()).rstrip('\n')


def _drop_repeated_frames(error: BaseException) -> None:
    """Unlink, from the tracebacks of `error` and the exceptions chained to it, an entry for the
    frame and line of the entry before it: a `raise` in a handler of the same frame adds one on
    some CPython 3.11 releases (3.11.2) and not on others (3.11.7); a stop re-raised in the
    script's `except` (`language.stop`) would show that line twice there."""
    for current in _chain(error):
        entry = current.__traceback__
        while entry is not None and entry.tb_next is not None:
            following = entry.tb_next
            if following.tb_frame is entry.tb_frame and following.tb_lineno == entry.tb_lineno:
                entry.tb_next = following.tb_next
            else:
                entry = following


def _chain(first: Any) -> Iterator[Any]:
    """`first` and every exception chained to it (`__cause__`, `__context__`), each once: of
    exceptions or of `traceback.TracebackException`s, which chain the same way."""
    seen: set[int] = set()
    pending = [first]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending.extend(chained for chained in (current.__cause__, current.__context__) if chained is not None)


def _run_until_done(loop: asyncio.AbstractEventLoop, tasks: list[asyncio.Task[Any]], seconds: float) -> None:
    """Run `loop` until every one of `tasks` is done and the callbacks queued by then have run
    (with no tasks: until the callbacks queued now have run), or `seconds` pass."""
    pending = {task for task in tasks if not task.done()}
    running = True

    def on_done(task: asyncio.Task[Any]) -> None:
        pending.discard(task)
        if running and not pending:
            loop.call_soon(loop.stop)  # after the callbacks queued with this one

    for task in pending:
        task.add_done_callback(on_done)
    if not pending:
        loop.call_soon(loop.stop)
    timer = loop.call_later(seconds, loop.stop)
    try:
        loop.run_forever()
    finally:
        running = False  # an `on_done` still queued (a stop cut the run short) does nothing
        timer.cancel()
        for task in pending:
            task.remove_done_callback(on_done)


#: The ids of the code of the Python frames below the caller -> that code (kept alive, so that no
#: other code object gets one of those ids) and the interpreter's depth there (see `_recursion_depth`).
_depths: dict[tuple[int, ...], tuple[tuple[types.CodeType, ...], int]] = {}
_STOP_SIGNALS = {signal.SIGALRM, signal.SIGXCPU}


def _recursion_depth() -> int:
    """The interpreter's recursion depth at the caller, as `sys.setrecursionlimit` measures it:
    the lowest limit it accepts there (it refuses one at or below the depth). The frames of
    `sys._getframe` miss the calls through C code, which count too; the worker's stack below a
    feed has the same shape every time, so the depth is measured (by bisection, with the stop
    signals held: a handler must not run under a limit that low) once per stack of code. The
    stack is looked up by the ids of its code objects: hashing the code objects themselves hashes
    their constants, 30 µs of every feed (measured)."""
    codes = []
    caller: types.FrameType | None = sys._getframe(1)
    while caller is not None:
        codes.append(caller.f_code)
        caller = caller.f_back
    frames = tuple(codes)
    key = tuple(map(id, frames))
    known = _depths.get(key)
    if known is not None:
        return known[1]
    limit = sys.getrecursionlimit()
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        low, high = 1, max(limit, 1 << 16)
        while low < high:
            middle = (low + high) // 2
            try:
                sys.setrecursionlimit(middle)
            except RecursionError:
                low = middle + 1
            else:
                high = middle
    finally:
        sys.setrecursionlimit(limit)
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
    _depths[key] = (frames, low - 1)  # less this function's own frame
    return low - 1


def _message(error: BaseException) -> str:
    try:
        return str(error)
    except Exception:
        return ''


#: The largest text or bytes an exception's fields carry out (`doc`, `object`); past it the field is ''.
DETAIL_TEXT = 65536


def _detail(error: BaseException) -> list[Any]:
    """`[module, fields]`: the module of the exception's class ('builtins' for a built-in; '' when
    the class names none) and, for a decoding error of the standard library, its constructor's
    fields as plain data (None otherwise): `encoding`, `object`, `start`, `end`, `reason` of a
    `UnicodeEncodeError`/`UnicodeDecodeError`; `msg`, `doc`, `pos`, `lineno`, `colno` of a
    `json.JSONDecodeError` (an `object` over `DETAIL_TEXT` is carried as '', a `doc` left out). Only
    those exact classes, and fields of the exact types they hold, are read: no script code runs."""
    cls = type(error)
    module = _MODULE_OF(cls, type)
    fields: dict[str, Any] | None = None
    if cls is UnicodeEncodeError or cls is UnicodeDecodeError:  # their setters keep these types
        obj = error.object
        fields = {
            'encoding': error.encoding,
            'object': obj if len(obj) <= DETAIL_TEXT else obj[:0],
            'start': error.start,
            'end': error.end,
            'reason': error.reason,
        }
    elif (decoder := sys.modules.get('json.decoder')) is not None and cls is getattr(decoder, 'JSONDecodeError', None):
        state = error.__dict__
        values = [dict.get(state, name) for name in ('msg', 'doc', 'pos', 'lineno', 'colno')]
        if [type(value) for value in values] == [str, str, int, int, int]:
            msg, doc, pos, lineno, colno = values
            fields = {'msg': msg, 'pos': pos, 'lineno': lineno, 'colno': colno} | ({'doc': doc} if len(doc) <= DETAIL_TEXT else {})
    if fields is not None and not all(type(value) is not str or _utf8(value) for value in fields.values()):
        fields = None  # a lone surrogate (the object of a UnicodeEncodeError over one) crosses in no frame
    return [module if type(module) is str and _utf8(module) else '', fields]


def _escaped(text: str) -> str:
    """`text` with each lone surrogate as its escape (`\\ud800`), as CPython writes it to stderr:
    no frame carries one."""
    return text if _utf8(text) else text.encode('utf-8', 'backslashreplace').decode('utf-8')


def _utf8(text: str) -> bool:
    try:
        text.encode('utf-8')
    except UnicodeEncodeError:
        return False
    return True


_MODULE_OF = type.__dict__['__module__'].__get__  # a class's module, past any metaclass of the script's


def _host_exception(value: Any) -> BaseException:
    """Rebuild an exception a host function raised, as the built-in or standard library class
    (`STDLIB_EXCEPTIONS`) of the same name."""
    exc_type, args = value
    cls = EXCEPTIONS.get(exc_type)
    if exc_type in STDLIB_EXCEPTIONS:  # `json.JSONDecodeError`: the class the script's `import json` has
        module, name = STDLIB_EXCEPTIONS[exc_type]
        try:
            cls = getattr(sys.modules.get(module) or importlib.import_module(module), name)
        except (ImportError, AttributeError):
            cls = None
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = RuntimeError
    try:
        return cls(*args)
    except Exception:
        return cls(*map(str, args))


def _warm_up_messages() -> bytes:
    """The CODE and FEED frames of the warm-up feed (see `Worker.serve`), made once, in the zygote.
    The CODE names no compiler, so the worker drops it, as a CODE of another compiler."""
    code = 'def f(a, *, b=2):\n    return [a, {"k": (a, b)}, f"{a}"]\nf(1)'
    limits = {
        'wall_time': 60.0, 'recursion': 100, 'output': 1 << 20, 'host_calls': 1, 'memory': None, 'cpu_time': None,
        'value_items': 1000, 'value_size': 1 << 20, 'host_sleeps': False,
    }
    script = compile_unguarded(code, '<warm-up>')
    return frame(pack([CODE, code, b'', dump_compiled(script), False], side='host')) + frame(pack([FEED, code, 'main.py', {}, {}, limits], side='host'))


_WARM_UP = _warm_up_messages()


def prepare_worker(*, guarded: bool = True, packages: tuple[str, ...] = ()) -> Worker:
    """Build a worker, with its event loop, ahead of any fork: in the zygote, once.

    Every forked worker gets its own copy of it (fork copies memory on write) and calls
    `run_worker`. Built in each worker instead, the event loop and the `Worker` cost some 450 page
    faults (writes to pages shared with the zygote, each copied: about 1.3 ms of a worker's start,
    measured); inherited, they cost a few. `packages`: the third-party packages this process
    loaded (`language.packages.load`), which scripts may import.
    """
    loop = asyncio.SelectorEventLoop(_HostSelector())
    # The loop's self-pipe wakes a loop blocked in its selector from a thread or a signal handler;
    # this one never blocks there (`_HostSelector`), a worker has one thread and sets no signal
    # handler through the loop. Closed here, no worker has to renew it (see `_renew_loop_fds`),
    # and `_write_to_self` does nothing without it.
    loop._close_self_pipe()  # type: ignore[attr-defined]
    asyncio.set_event_loop(loop)
    worker = Worker(loop, guarded=guarded, packages=packages)
    if guarded:
        identity.install()  # ids, identity hashes and default reprs a replay gives back
    return worker


def run_worker(worker: Worker, sock: socket.SocketType, lock_down: Any = None) -> None:
    """Entry point of a forked worker: renew the inherited event loop's epoll instance, lock
    down, warm up, serve, exit."""
    loop = worker._loop
    _renew_loop_fds(loop)
    identity.activate()
    worker.attach(sock)
    if lock_down is not None:
        lock_down({sock.fileno(), loop._selector.fileno()})  # type: ignore[attr-defined]
    worker.serve(warm_up=True)
    os._exit(0)


def _renew_loop_fds(loop: Any) -> None:
    """Give a forked worker an epoll instance of its own, under the inherited fd's number.

    After fork, the loop's epoll fd still names the zygote's instance: shared by every worker, a
    channel between sessions. `dup2` puts a new one under the same number, so the loop's
    selector stays as it is. The zygote's loop watches nothing (`prepare_worker` closed its
    self-pipe), so the new instance starts empty, as the old one is.
    """
    epoll = select.epoll()
    try:
        os.dup2(epoll.fileno(), loop._selector.fileno())
    finally:
        epoll.close()
