"""The turn machine: Monty's requests answered by corral sessions, one checkout after another.

The parent sends one `ParentRequest`; the child answers with any number of `Print` events and one
event that ends the turn. `Configure` checks out a fresh corral session (a fresh worker, from the
pool this child keeps); `Feed` runs code in it through `Session.feed_run`; `Reset` ends it.

While a feed runs, the script reaches the parent three ways, each a suspension the parent answers:
a name the script calls but does not define becomes a host function whose calls are
`FunctionCall`s; a name it reads but does not define is a `NameLookup` before the feed starts
(a function, a value, or undefined); files, the environment and the clock are `OsCall`s, through
an `OsAccess` whose methods ask the parent (`ParentOs`). A suspension waits for its answer right
there (the link is the parent's alone), and any other request meanwhile is answered with an
`Error` saying what the child waits for, so nothing the parent sent is lost or taken out of turn.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import keyword
import re
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from google.protobuf.message import DecodeError

from ..errors import (
    CorralError,
    SandboxError,
    SandboxLimitError,
    SandboxRuntimeError,
    SandboxSyntaxError,
    SandboxTypingError,
    StubError,
)
from ..host.deferred import StopFeed
from ..host.external import ExternalModule, stub_functions
from ..host.pool import Pool
from ..host.session import Session
from ..limits import Limits
from ..typecheck import DIAGNOSTIC_FORMATS, format_diagnostics
from ..values import HostFunction
from . import monty_v1_pb2 as pb
from .codec import ArenaError, ClientClass, ClientFunction, ClientInstance, ClientModule, HeldClass, HeldFunction, HeldObject, decode, encode, exception_from, exception_value
from .names import Script
from .parent_os import ParentOs

__all__ = ['Closed', 'Link', 'MontyChild', 'PROTOCOL_VERSIONS']

#: The protocol versions this child serves (`Configure.protocol_version`).
PROTOCOL_VERSIONS = range(5, 7)

#: What a `SandboxLimitError` is in the script's terms, as Monty's clients name it.
_LIMIT_TYPES = {
    'wall_time': 'TimeoutError',
    'cpu_time': 'TimeoutError',
    'memory': 'MemoryError',
    'recursion': 'RecursionError',
    'output': 'OverflowError',
    'host_calls': 'OverflowError',
    'value_items': 'OverflowError',
    'value_size': 'OverflowError',
    'code_size': 'OverflowError',
}
_FRAME = re.compile(r'^  File "(?P<file>[^"]*)", line (?P<line>\d+)(?:, in (?P<name>.*))?$')
#: CPython's marks under the part of a traceback's line that failed (`^`, `~`), indented as the line is.
_MARKS = re.compile(r'^    \s*[\^~]+\s*$')
#: The call id of an OsCall made before a feed's type check (the client's mark for it).
_BEFORE_CHECK = 2**32 - 1
#: How long output waits to be sent with what follows it, when the parent does not say.
_PRINT_INTERVAL_MS = 50
_QUOTED = r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")"""
_OS_ERROR = re.compile(rf'\[Errno (\d+)\] (.*?)(?:: {_QUOTED}(?: -> {_QUOTED})?)?', re.DOTALL)


class Closed(Exception):
    """The parent closed the link, or a request ends the child (`Shutdown`, a fatal error)."""


class Link(Protocol):
    """One parent's messages: `await receive()` the next request (None when the parent closed the
    link; `ValueError` for bytes that are no request), `send()` one event (without waiting)."""

    async def receive(self) -> pb.ParentRequest | None: ...

    def send(self, event: pb.ChildEvent) -> None: ...


def parse_request(data: bytes) -> pb.ParentRequest:
    """The `ParentRequest` a frame's bytes hold, whatever the transport; `ValueError` for bytes that
    are none (protobuf's `DecodeError`, or nesting deep enough to exhaust the recursion limit)."""
    request = pb.ParentRequest()
    try:
        request.ParseFromString(data)
    except (DecodeError, RecursionError):
        raise ValueError(f'{len(data)} bytes that are no ParentRequest') from None
    return request


class MontyChild:
    """Serves one parent's requests over `link` with sessions of `pool`, until it shuts down."""

    def __init__(self, pool: Pool, link: Link) -> None:
        self._pool = pool
        self._link = link
        self._session: Session | None = None
        self._config = pb.Configure()
        self._bound: set[str] = set()  # names earlier feeds of the session may have bound
        self._called: dict[str, bool] = {}  # names earlier feeds' code calls (a function it defined may): awaited?
        self._next_call = 0
        self._futures: dict[int, asyncio.Future[Any]] = {}
        self._resolver: asyncio.Task[None] | None = None
        self._awaited: set[str] = set()  # names by which the session's feeds call what they await
        self._stub_texts: dict[str, str | None] = {}  # the stubs of each module the parent was asked for
        self._restored: set[str] = set()  # modules a loaded state offered, not yet asked of the parent
        self._held: dict[bytes, HeldClass | HeldObject] = {}  # the parent's classes and objects the session was given, by id
        self._methods: dict[tuple[bytes, str, bool], HostFunction] = {}  # their methods the script read: object id, name, awaited
        self._module_ids: dict[str, bytes] = {}  # the id each module was first imported with: the script's one object of it
        self._printed: list[tuple[int, list[str]]] = []  # output not sent yet: (stream, texts)
        self._flush_timer: asyncio.TimerHandle | None = None
        self._interrupt: str | None = None  # 'reset', 'shutdown' or 'closed', come while a feed ran
        self._loop: asyncio.AbstractEventLoop | None = None  # where `serve` runs (see `os_call`)
        self._loop_thread = 0
        self._turn = asyncio.Lock()  # one suspension at a time waits on the parent
        self._asking = 0  # suspensions asked or waiting their turn: futures are resolved after them

    # ----- the request loop ----------------------------------------------------------------------

    async def serve(self) -> None:
        """Answer requests until `Shutdown`, a fatal error, or the parent closing the link."""
        self._loop, self._loop_thread = asyncio.get_running_loop(), threading.get_ident()
        try:
            while True:
                request = await self._receive()
                await self._handle(request)
        except Closed:
            pass
        finally:
            await self._end_session()

    async def _receive(self) -> pb.ParentRequest:
        while True:
            try:
                request = await self._link.receive()
            except OverflowError as error:  # the rest of the frame cannot be skipped safely
                self._fatal(str(error))
            except ValueError as error:
                self._error('ValueError', f'malformed request: {error}')
                continue
            if request is None:
                self._interrupt = 'closed'
                raise Closed
            return request

    async def _handle(self, request: pb.ParentRequest) -> None:
        kind = request.WhichOneof('kind')
        if kind == 'configure':
            await self._configure(request.configure)
        elif kind == 'load':
            await self._load(request.load)
        elif kind == 'shutdown':
            await self._end_session()
            self._send(pb.ChildEvent(ok=pb.Ok()))
            raise Closed
        elif kind == 'reset':
            await self._end_session()
            self._send(pb.ChildEvent(ok=pb.Ok()))
        elif self._session is None:
            self._error('RuntimeError', f'{kind or "an empty request"} needs a session: send Configure first')
        elif kind == 'feed':
            try:
                await self._feed(request.feed)
            except _Interrupted:
                pass
            await self._after_interrupt()
        elif kind == 'dump':
            await self._dump()
        elif kind == 'install_dependencies':
            self._install(request.install_dependencies)
        else:
            self._error('RuntimeError', f'{kind or "an empty request"} is out of turn: no feed is waiting for an answer')

    # ----- events ----------------------------------------------------------------------------------

    def _send(self, event: pb.ChildEvent) -> None:
        if self._interrupt is None:  # else the feed is being ended: what it says goes nowhere
            self._link.send(event)

    async def _after_interrupt(self) -> None:
        """Act on a Reset or Shutdown that came while a feed waited on the parent (or its end)."""
        interrupt, self._interrupt = self._interrupt, None
        if interrupt is None:
            return
        if interrupt == 'closed':
            raise Closed
        await self._end_session()
        self._send(pb.ChildEvent(ok=pb.Ok()))
        if interrupt == 'shutdown':
            raise Closed

    def _ended(self, event: pb.ChildEvent) -> None:
        """Send a turn-ending event with the session's counters."""
        if self._session is not None:
            micros = int(self._session.cpu_seconds * 1e6)
            event.total_execution_micros = micros
            event.feed_execution_micros = micros
            limits = self._config.limits
            event.max_suspensions = limits.max_suspensions if limits.HasField('max_suspensions') else 1000
        self._flush()
        self._send(event)

    def _error(self, exc_type: str, message: str, traceback: Iterable[pb.StackFrame] = ()) -> None:
        raised = exception_value(exc_type, message)
        raised.traceback.extend(traceback)
        self._ended(pb.ChildEvent(error=pb.Error(exception=raised)))

    def _fatal(self, message: str) -> None:
        self._send(pb.ChildEvent(fatal_error=pb.FatalError(message=message)))
        raise Closed

    # ----- checkouts -------------------------------------------------------------------------------

    async def _configure(self, config: pb.Configure) -> None:
        if config.protocol_version not in PROTOCOL_VERSIONS:
            self._fatal(
                f'protocol version {config.protocol_version} is not served: this child serves versions '
                f'{PROTOCOL_VERSIONS.start} to {PROTOCOL_VERSIONS.stop - 1}'
            )
        if self._session is not None:
            self._error('RuntimeError', 'Configure is out of turn: this child has a session; send Reset first')
            return
        if config.type_check_format not in pb.TypeCheckFormat.values():
            self._error('ValueError', f'unknown type check format {config.type_check_format}, expected one of: {", ".join(DIAGNOSTIC_FORMATS)}')
            return
        try:
            session = await self._open(config)
        except (ValueError, TypeError, CorralError) as error:  # bad options, a quota, a store's refusal
            self._refused(error)
            return
        self._started(session, config)

    def _refused(self, error: Exception) -> None:
        """A checkout refused, as the built-in error the client knows (corral's own are RuntimeError)."""
        name = 'ValueError' if isinstance(error, StubError) else 'RuntimeError' if isinstance(error, CorralError) else type(error).__name__
        self._error(name, str(error))

    def _started(self, session: Session, config: pb.Configure, *, loaded: bool = False) -> None:
        """`session` is the child's, checked out for `config` (or `loaded` from a state, whose names
        the earlier feeds may have bound are kept): the turn ends with `Ok`. A session from a state
        checks types as the one dumped did, in its format, and its modules keep their ids."""
        door = session.door_state  # what this door kept in the state the session came from, if any
        if door or session.type_check != config.type_check:
            config = _as_dumped(config, session.type_check, door)
        self._session, self._config = session, config
        self._held, self._methods = {}, {}
        if not loaded:
            self._bound, self._called, self._next_call, self._awaited, self._stub_texts = set(), {}, 0, set(), {}
            self._restored = set()
        ids, stubs = door.get('module_ids'), door.get('stubs')
        self._module_ids = {name: id for name, id in _items(ids) if isinstance(id, bytes) and len(id) == 16}
        for name, text in _items(stubs):  # the parent's answers for the type check are final for the session
            if text is None or isinstance(text, str):
                self._stub_texts.setdefault(name, text)
        session.door_state = {
            'type_check_format': config.type_check_format,
            'type_check_color': config.type_check_color,
            'module_ids': self._module_ids,
            'stubs': self._stub_texts,
        }
        ok = pb.ChildEvent(ok=pb.Ok())
        if not session.ephemeral:  # a stored session: the client names it to load it again
            ok.session_id = session.session_id.encode()
        self._ended(ok)

    async def _open(self, config: pb.Configure) -> Session:
        """A started session for `config` (a front door checks its caller's rights here)."""
        session = self._checkout(config)
        await session.__aenter__()
        return session

    def _checkout(self, config: pb.Configure) -> Session:
        return self._pool.checkout(**self._checkout_options(config))

    def _checkout_options(self, config: pb.Configure) -> dict[str, Any]:
        stubs = config.type_check_stubs if config.HasField('type_check_stubs') else None
        policy = config.os_policy
        seed = None
        if policy.WhichOneof('random_start') == 'seed' and policy.seed.WhichOneof('value') == 'int':
            seed = int.from_bytes(policy.seed.int, 'little', signed=True)
        return dict(
            type_check=config.type_check,
            type_check_stubs=stubs,
            limits=_limits(config.limits),
            script_name=config.script_name or 'main.py',
            os_access=ParentOs(self, policy),
            random_seed=seed,
        )

    async def _end_session(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await self._close(session)

    async def _close(self, session: Session) -> None:
        await session.aclose()

    async def _load(self, load: pb.Load) -> None:
        """A session from a dumped state: in place of the one configured, if any (with its options)."""
        config = self._config if self._session is not None else pb.Configure()
        try:
            session = await self._open(config)
        except (ValueError, TypeError, CorralError) as error:
            self._refused(error)
            return
        restored: dict[str, str | None] = {}
        try:
            await session.load_session(load.state, modules=lambda dumped: self._offer_state_modules(session, dumped, restored))
        except SandboxError as error:
            await self._close(session)
            self._error('ValueError', str(error))
            return
        await self._end_session()
        self._started_from_state(session, config, restored)

    async def _offer_state_modules(self, session: Session, modules: dict[str, tuple[str | None, list[str]]], restored: dict[str, str | None]) -> None:
        """Offer `session` the `modules` a state was made with (`Session.OfferModules`): they are
        host state, offered with the stubs and functions the state brings (calls reach the parent
        by their dotted names), and asked of the parent again at the first feed that names them.
        `restored` gets the stubs of each (see `_started_from_state`)."""
        for name, (stubs, names) in modules.items():
            functions = {function: self._function(f'{name}.{function}', asynchronous=False) for function in names}
            session.add_external_module(name, ExternalModule(functions, stubs=stubs))
            restored[name] = stubs

    def _started_from_state(self, session: Session, config: pb.Configure, restored: dict[str, str | None]) -> None:
        """`session`, taken up from a state whose modules it was offered (`restored`: their stubs),
        is the child's (see `_started`)."""
        self._stub_texts.update(restored)
        self._restored = {name for name in restored if '.' not in name}
        self._started(session, config, loaded=True)

    async def _dump(self) -> None:
        assert self._session is not None
        try:
            state = await self._session.dump()
        except SandboxError as error:
            self._error('RuntimeError', str(error))
            return
        self._ended(pb.ChildEvent(dump_result=pb.DumpResult(state=state)))

    def _install(self, install: pb.InstallDependencies) -> None:
        wanted = list(install.requirements)
        if not wanted:
            self._ended(pb.ChildEvent(ok=pb.Ok()))
            return
        offered = set(self._pool.packages)
        missing = [name for name in wanted if name not in offered]
        if missing:
            self._error(
                'RuntimeError',
                f'cannot install {", ".join(missing)}: this sandbox offers only the packages its pool loads '
                f'({", ".join(sorted(offered)) or "none"}) and installs nothing',
            )
            return
        self._ended(pb.ChildEvent(ok=pb.Ok()))

    # ----- feeds -----------------------------------------------------------------------------------

    async def _feed(self, feed: pb.Feed) -> None:
        session = self._session
        assert session is not None
        try:
            values = decode(feed.values, [ref.value for ref in feed.inputs], functions=self._parent_function)
        except ArenaError as error:
            self._error('ValueError', f'the inputs cannot enter the sandbox: {error}')
            return
        inputs = {ref.name: value for ref, value in zip(feed.inputs, values)}
        for name in inputs:  # each becomes a variable of the script's
            if not name.isidentifier() or keyword.iskeyword(name):
                self._error('SyntaxError', f'Input name {name!r} not a valid identifier')
                return
        if feed.cwd:
            session.chdir(feed.cwd)
        checked = self._config.type_check and not feed.skip_type_check
        script = Script(feed.code)  # parsed once for all the door asks of it
        asked = script.module_imports()  # the parent is asked once for each import of the code
        modules = script.imported_modules()
        if self._restored:  # a loaded state's module the code names is asked of the parent now, as an import's is
            named = script.named_modules(self._restored)
            asked += [name for name in named if name not in modules]
            self._restored -= set(named)
        self._awaited |= script.awaited_callees()
        if checked:  # each module's stubs are asked once, all at once, before the check
            failed = await self._stubs(session, [name for name in modules if name not in self._stub_texts])
            if failed is not None:  # the parent's module failed to load: the feed fails with that
                self._ended(pb.ChildEvent(error=pb.Error(exception=failed)))
                return
        if checked:  # before anything of the script reaches the parent, whose answer may be a type error
            try:
                await session.check(feed.code, concise=_format(self._config) != 'full')
            except SandboxTypingError as error:
                self._ended(pb.ChildEvent(typing_error=pb.TypingError(diagnostics=_diagnostics(error, self._config))))
                return
            except SandboxError as error:
                self._ended(pb.ChildEvent(error=pb.Error(exception=_raised(error))))
                return
        for module in asked:  # asked at each import: the parent's entry may have changed
            failed = await self._import(session, module)
            if failed is not None:  # the parent's module failed to load: its import raises that
                self._ended(pb.ChildEvent(error=pb.Error(exception=failed)))
                return
        # a function of the parent's given by value is a HeldFunction the script may hold and return;
        # one it awaits is an async host function of that name, its calls the parent's
        functions = {name: value for name, value in inputs.items() if isinstance(value, HeldFunction) and name in self._awaited}
        for name in functions:
            del inputs[name]
        called, read = script.free_names(self._bound | set(inputs) | set(functions))
        lookup: dict[str, Callable[..., Any]] = {}
        for name, function in functions.items():
            lookup[name] = self._function(function.client.name, asynchronous=True)
        for name in self._called.keys() - called:  # a function an earlier feed defined calls them
            lookup[name] = self._function(name, asynchronous=self._called[name])
        for name in called | set(stub_functions(self._config.type_check_stubs)):
            lookup[name] = self._function(name, asynchronous=name in called.awaited, eager=name in called.eager)
        self._called.update({name: name in called.awaited or self._called.get(name, False) for name in called})
        for name in sorted(read - called):
            answer = await self._lookup_name(name)
            if answer is None:
                continue
            if isinstance(answer, pb.RaisedException):
                self._ended(pb.ChildEvent(error=pb.Error(exception=answer)))
                return
            if isinstance(answer[0], HeldFunction):  # a function: called by name, as the script's own names are
                lookup[name] = self._function(answer[0].client.name, asynchronous=name in called.awaited)
                self._called.setdefault(name, False)  # a variable may keep it: a later feed's call still reaches the parent
            else:
                inputs[name] = answer[0]
        try:
            if inputs:
                await self._set_inputs(session, inputs)
            value = await session.feed_run(feed.code, external_lookup=lookup, print_callback=self._print, type_check=False)
        except SandboxError as error:
            self._bound |= script.bound_names()
            self._ended(pb.ChildEvent(error=pb.Error(exception=_raised(error, _clock(self._config.limits)))))
            return
        except StubError as error:
            self._error('ValueError', str(error))
            return
        finally:
            self._cancel_futures()
        self._bound |= script.bound_names()
        complete = pb.ChildEvent()
        (root,) = encode([value], complete.complete.values, module_ids=self._module_ids)
        complete.complete.value = root
        self._ended(complete)

    async def _stubs(self, session: Session, names: list[str]) -> pb.RaisedException | None:
        """Ask the parent for the stubs of host modules `names` (one ask, in the order the code
        names them), each offered to the type check at once. Returns the error the parent raised
        making them (a module's factory failed), else None."""
        if not names:
            return None
        try:
            found = await self._os_call('import_stubs', pb.OsCall.ImportStubs(modules=names), default=None, call_id=_BEFORE_CHECK)
        except (NameError, _NotHandled):  # the parent has no stubs to give
            found = None
        except _Interrupted:
            raise
        except Exception as error:  # noqa: BLE001 - the parent's own error, for the script
            return exception_value(type(error).__name__, str(error), type(error).__module__)
        found = found if isinstance(found, dict) else {}
        for name in names:  # a module's answer holds its submodules' stubs too (`pkg.sub`), a package
            tree = sorted((key for key in found if isinstance(key, str) and key.startswith(f'{name}.')), key=lambda key: key.count('.'))
            for key in (name, *tree):
                text = found.get(key)
                self._stub_texts[key] = text if isinstance(text, str) else None
                if isinstance(text, str):
                    try:
                        session.add_external_module(key, ExternalModule({}, stubs=text))
                    except ValueError:  # not a module name, or its parent has no stubs: the check says it is unresolved
                        self._stub_texts[key] = None
        return None

    async def _import(self, session: Session, name: str) -> pb.RaisedException | None:
        """Ask the parent for host module `name`; a module it has is offered to the session as an
        `ExternalModule` (with the stubs the parent gave) whose functions call the parent's. Returns the
        error the parent raised making the module (its factory failed), else None."""
        try:
            value = await self._os_call('import', pb.OsCall.Import(module=name), default=None)
        except (NameError, ImportError, _NotHandled):
            return None  # not the parent's: the script's import fails as Python's does
        except _Interrupted:
            raise
        except Exception as error:  # noqa: BLE001 - the parent's own error, for the script
            return exception_value(type(error).__name__, str(error), type(error).__module__)
        if isinstance(value, ClientModule):
            self._offer(session, name, value)
        return None

    def _offer(self, session: Session, name: str, module: ClientModule) -> None:
        """Offer the parent's `module` to the session as `name` (with the stubs the parent gave for
        it), and each module among its attributes as a submodule (`name.attr`)."""
        functions = {  # the module's functions (an answer's Function nodes are HeldFunctions)
            attr: self._function(item.client.name, asynchronous=attr in self._awaited)
            for attr, item in module.attrs.items()
            if isinstance(item, HeldFunction)
        }
        values = {attr: item for attr, item in module.attrs.items() if not isinstance(item, (HeldFunction, ClientModule))}
        session.add_external_module(name, ExternalModule(functions, stubs=self._stub_texts.get(name), values=values))
        if module.id is not None:  # the script's module is one object, with the id of its first import
            self._module_ids.setdefault(name, module.id)
        for attr, item in module.attrs.items():
            if isinstance(item, ClientModule):
                self._offer(session, f'{name}.{attr}', item)

    async def _set_inputs(self, session: Session, inputs: dict[str, Any]) -> None:
        names = sorted(inputs)
        code = f'{", ".join(names)}, = _monty_inputs()'
        await session.feed_run(code, external_lookup={'_monty_inputs': lambda: [inputs[name] for name in names]}, print_callback=self._print, type_check=False)
        self._bound |= set(names)

    def _print(self, stream: str, text: str) -> None:
        """Buffer the script's output: one `Print` of its runs goes out after the configured
        interval (`print_flush_interval_ms`, 0: each line at once), and before any turn ends."""
        kind = pb.PRINT_STREAM_STDERR if stream == 'stderr' else pb.PRINT_STREAM_STDOUT
        if self._printed and self._printed[-1][0] == kind:
            self._printed[-1][1].append(text)
        else:
            self._printed.append((kind, [text]))
        interval = self._config.print_flush_interval_ms if self._config.HasField('print_flush_interval_ms') else _PRINT_INTERVAL_MS
        if interval == 0:
            self._flush()
        elif self._flush_timer is None:
            self._flush_timer = asyncio.get_running_loop().call_later(interval / 1000, self._flush)

    def _flush(self) -> None:
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        if self._printed:
            segments = [pb.PrintSegment(stream=kind, text=''.join(texts)) for kind, texts in self._printed]
            self._printed = []
            self._send(pb.ChildEvent(print=pb.Print(segments=segments)))

    # ----- suspensions -----------------------------------------------------------------------------

    async def _suspend(self, event: pb.ChildEvent, answers: tuple[str, ...]) -> pb.ParentRequest:
        """Send a suspension and take the parent's answer (see `_answer`); one at a time, in the
        order asked (calls made together wait their turn)."""
        self._asking += 1
        try:
            async with self._turn:
                self._ended(event)
                return await self._answer(answers)
        finally:
            self._asking -= 1

    async def _answer(self, answers: tuple[str, ...]) -> pb.ParentRequest:
        """The parent's answer to the suspension sent: a request of a kind in `answers`, or
        `AbortFeed`; any other request is answered with an Error naming what the child waits for,
        and the suspension still waits."""
        while True:
            request = await self._receive()
            kind = request.WhichOneof('kind')
            if kind in answers:
                return request
            if kind == 'abort_feed':
                return request
            if kind in ('reset', 'shutdown'):  # the feed ends where it waits, and then the session
                self._interrupt = kind
                raise _Interrupted(f'the parent sent {kind.capitalize()} while the feed waited on it')
            self._error('RuntimeError', f'{kind or "an empty request"} is out of turn: the child waits for {" or ".join(answers)}')

    async def _lookup_name(self, name: str, object_id: bytes | None = None) -> tuple[Any] | pb.RaisedException | None:
        """Ask the parent what `name` is (an attribute of its object `object_id`, while the feed
        runs): (value,), its error, or None when it is undefined."""
        lookup = pb.NameLookup(name=name)
        if object_id is not None:
            lookup.object_id.data = object_id
        while True:
            request = await self._suspend(pb.ChildEvent(name_lookup=lookup), ('resume_name_lookup',))
            if request.WhichOneof('kind') == 'abort_feed':
                if object_id is not None:  # the feed ends at the read
                    raise _stop_feed(request.abort_feed.exception)
                return request.abort_feed.exception
            answer = request.resume_name_lookup
            kind = answer.WhichOneof('kind')
            if kind == 'value':
                try:
                    return (decode(answer.values, [answer.value], functions=self._parent_function)[0],)
                except ArenaError as error:
                    self._error('ValueError', f'the value of {name!r} cannot enter the sandbox: {error}')
                    continue
            if kind == 'error':
                return answer.error
            return None

    def _parent_function(self, function: ClientFunction | ClientClass | ClientInstance) -> HeldFunction | HeldClass | HeldObject:
        """A function, class or object of the parent's the script holds as a value: each call a
        `FunctionCall` (a class's or an object's with its id); one per id in a session, so the
        script holds one object of each."""
        if type(function) is ClientFunction:
            return HeldFunction(function, self._function(function.name, asynchronous=False))
        held = self._held.get(function.id)
        if held is not None and type(held.client) is type(function):  # sent again: the attributes sent now
            if type(function) is ClientInstance or function.attrs:  # a class sent with none keeps its own
                held.client = function  # type: ignore[assignment]
            return held
        read = lambda name: self._attribute(function.id, name)  # noqa: E731
        if type(function) is ClientClass:
            held = HeldClass(function, self._function('__call__', asynchronous=False, object_id=function.id), read)
        else:
            cls = self._parent_function(function.cls)
            assert isinstance(cls, HeldClass)
            held = HeldObject(function, cls, read)
        self._held[function.id] = held
        return held

    async def _attribute(self, object_id: bytes, name: str) -> Any:
        """Attribute `name` of the parent's object `object_id`, asked of the parent (a lazy
        attribute); where it has none, a function calling its method `name` (one per name, which
        later reads give without asking; async where the session's code awaits a call of that
        name), whose calls the parent's wrapper allows or refuses."""
        awaited = name in self._awaited
        method = self._methods.get((object_id, name, awaited))
        if method is not None:  # the parent said the name is no attribute of the object: it stays a method
            return method
        answer = await self._lookup_name(name, object_id)
        if isinstance(answer, tuple):
            return answer[0]
        if answer is not None and answer.exc_type != 'AttributeError':
            raise _exception(answer)
        method = self._methods[object_id, name, awaited] = HostFunction(self._function(name, asynchronous=awaited, object_id=object_id), name=name)
        return method

    def _function(self, name: str, *, asynchronous: bool, eager: bool = False, object_id: bytes | None = None) -> Callable[..., Any]:
        """A host function calling the parent's function `name` (async when the script awaits it;
        `eager` when it awaits each call right there: the parent may then await it and answer), or
        method `name` of the parent's object or class `object_id`."""
        if asynchronous:

            async def call_async(*args: Any, **kwargs: Any) -> Any:
                result = await self._call(name, args, kwargs, eager=eager, object_id=object_id)
                return await result if isinstance(result, asyncio.Future) else result

            return call_async

        async def answer(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            result = await self._call(name, args, kwargs, object_id=object_id)
            if isinstance(result, asyncio.Future):  # a future answering a call the script does not await
                await self._resolve([self._next_call - 1])
                return result.result()
            return result

        def call(*args: Any, **kwargs: Any) -> Any:  # a sync call to the script: its answer is awaited by the session
            return answer(args, kwargs)

        return call

    async def _call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], *, eager: bool = False, object_id: bytes | None = None) -> Any:
        if self._interrupt is not None:
            raise _Interrupted('the feed is being ended')
        call_id = self._next_call
        self._next_call += 1
        event = pb.ChildEvent()
        call = event.function_call
        call.function_name, call.call_id, call.allow_eager_await = name, call_id, eager
        if object_id is not None:
            call.object_id.data = object_id
        roots = encode([*args, *kwargs.values()], call.values, module_ids=self._module_ids)
        call.args.extend(roots[: len(args)])
        keys = encode(list(kwargs), call.values) if kwargs else []
        call.kwargs.extend(pb.NodePair(key=key, value=value) for key, value in zip(keys, roots[len(args):]))
        answers = ('resume_call', 'resume_futures') if eager else ('resume_call',)  # eager: the parent's awaited answer
        request = await self._suspend(event, answers)
        while (outcome := self._outcome(request, call_id, name)) is _AGAIN:
            request = await self._answer(answers)
        if isinstance(outcome, _Future):
            return self._pending(call_id)
        return outcome

    def _pending(self, call_id: int) -> asyncio.Future[Any]:
        """The future of call `call_id`, which the parent answered with a future: resolved by a
        `ResolveFutures` once the worker waits."""
        future = asyncio.get_running_loop().create_future()
        self._futures[call_id] = future
        if self._resolver is None or self._resolver.done():
            self._resolver = asyncio.ensure_future(self._resolve_when_waiting())
        return future

    def _outcome(self, request: pb.ParentRequest, call_id: int, name: str) -> Any:
        """A call's answer: its value, `_Future()`, or `_AGAIN` (a wrong answer, refused); raises its error."""
        if request.WhichOneof('kind') == 'abort_feed':
            raise _stop_feed(request.abort_feed.exception)
        if request.WhichOneof('kind') == 'resume_futures':  # the parent awaited the call, as it may for an eager one
            futures = request.resume_futures
            found = [result for result in futures.results if result.call_id == call_id]
            if len(futures.results) != 1 or not found:
                self._error('ValueError', f'ResumeFutures answers calls {[result.call_id for result in futures.results]}, but the child waits for call {call_id}')
                return _AGAIN
            return self._result(found[0].result, futures.values, name)
        answer = request.resume_call
        if answer.call_id != call_id:
            self._error('ValueError', f'ResumeCall answers call {answer.call_id}, but the child waits for call {call_id}')
            return _AGAIN
        return self._result(answer.result, answer.values, name)

    def _result(self, result: pb.ExtFunctionResult, values: pb.Arena, name: str) -> Any:
        kind = result.WhichOneof('kind')
        if kind == 'return_value':
            try:
                return decode(values, [result.return_value], functions=self._parent_function)[0]
            except ArenaError as error:
                raise TypeError(f'{name}() returned a value that cannot enter the sandbox: {error}') from None
        if kind == 'error':
            raise _exception(result.error)
        if kind == 'future':
            return _Future()
        if kind == 'not_handled':
            raise _NotHandled
        raise NameError(f"name '{name}' is not defined")

    async def _resolve_when_waiting(self) -> None:
        """Once the worker has nothing else to run, ask the parent for the futures it waits on."""
        session = self._session
        try:
            while self._futures and session is not None and session is self._session:
                if not session.worker_waiting or self._asking:
                    await asyncio.sleep(0.0005)
                    continue
                await self._resolve(sorted(self._futures))
                await asyncio.sleep(0)
        except (_Interrupted, Closed) as error:
            for future in self._futures.values():
                if not future.done():
                    future.set_exception(_Interrupted(str(error)))

    async def _resolve(self, pending: list[int]) -> None:
        event = pb.ChildEvent(resolve_futures=pb.ResolveFutures(pending_call_ids=pending))
        request = await self._suspend(event, ('resume_futures',))
        while request.WhichOneof('kind') == 'resume_futures' and (
            forged := [result.call_id for result in request.resume_futures.results if result.call_id not in self._futures]
        ):
            self._error('ValueError', f'ResumeFutures answers call {forged[0]}, which is not pending; pending: {pending}')
            request = await self._answer(('resume_futures',))
        if request.WhichOneof('kind') == 'abort_feed':
            error = _stop_feed(request.abort_feed.exception)
            for call_id in pending:
                future = self._futures.pop(call_id, None)
                if future is not None and not future.done():
                    future.set_exception(error)
            return
        answer = request.resume_futures
        for result in answer.results:
            future = self._futures.pop(result.call_id)
            try:
                value = self._result(result.result, answer.values, f'call {result.call_id}')
            except Exception as error:
                future.set_exception(error)
            else:
                if isinstance(value, _Future):
                    self._futures[result.call_id] = future
                else:
                    future.set_result(value)

    def _cancel_futures(self) -> None:
        for future in self._futures.values():
            future.cancel()
        self._futures.clear()
        if self._resolver is not None:
            self._resolver.cancel()
            self._resolver = None

    def os_call(self, call: str, argument: Any, *, values: pb.Arena | None = None, default: str | None) -> Any:
        """Ask the parent to perform one OS operation (an `OsCall` arm and its argument); its value.
        Called from a thread of its own (`ParentOs.threaded`): it waits while the event loop asks.

        Raises what the parent raised, or, when it has no handler, `default`'s error (`_NotHandled`
        for None)."""
        if self._loop is None or threading.get_ident() == self._loop_thread:
            raise RuntimeError('os_call waits on the event loop: call it from another thread')
        asking = self._os_call(call, argument, values=values, default=default)
        return asyncio.run_coroutine_threadsafe(asking, self._loop).result()

    async def _os_call(self, call: str, argument: Any, *, values: pb.Arena | None = None, default: str | None, call_id: int | None = None) -> Any:
        if self._interrupt is not None:
            raise _Interrupted('the feed is being ended')
        if call_id is None:
            call_id = self._next_call
            self._next_call += 1
        event = pb.ChildEvent()
        os_call = event.os_call
        os_call.call_id = call_id
        field = getattr(os_call, call) if not isinstance(argument, (str, bool)) else None
        if isinstance(argument, str):
            setattr(os_call, call, argument)
        elif field is not None and argument is not None:
            field.CopyFrom(argument)
        else:
            field.SetInParent()
        if values is not None:
            os_call.values.CopyFrom(values)
        request = await self._suspend(event, ('resume_call',))
        while True:
            try:
                outcome = self._outcome(request, call_id, call)
            except _NotHandled:
                if default is None:
                    raise
                raise _default_error(default, argument) from None
            if isinstance(outcome, _Future):  # resolved once the worker waits on the call
                return await self._pending(call_id)
            if outcome is not _AGAIN:
                return outcome
            request = await self._answer(('resume_call',))


class _Future:
    """The parent answered a call with a future."""


class _Interrupted(Exception):
    """A Reset or Shutdown came while the feed waited on the parent: the feed ends."""


class _NotHandled(Exception):
    """The parent has no handler for an OS call."""


_AGAIN = object()


def _default_error(default: str, argument: Any) -> Exception:
    if default == 'path':  # in the words a parent without a handler uses: no errno
        return PermissionError(f"Permission denied: {argument if isinstance(argument, str) else getattr(argument, 'path', None)!r}")
    return RuntimeError(f'{default!r} is not supported in this environment')


def _stop_feed(raised: pb.RaisedException) -> StopFeed:
    """The uncatchable end of the feed an `AbortFeed` asks for, with its exception (a name that is
    none is a RuntimeError)."""
    message = raised.message if raised.HasField('message') else ''
    try:
        return StopFeed(raised.exc_type, message)
    except ValueError:
        return StopFeed('RuntimeError', message)


def _exception(raised: pb.RaisedException) -> BaseException:
    """The built-in or standard library exception a parent's `RaisedException` is (RuntimeError for
    one that is neither)."""
    message = raised.message if raised.HasField('message') else None
    known = exception_from(raised, message)
    if known is not None:
        return known
    name = raised.exc_type.rpartition('.')[2]
    cls = getattr(builtins, name, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = RuntimeError
    if issubclass(cls, OSError) and message is not None and (match := _OS_ERROR.fullmatch(message)):
        number, text, path, path2 = match.groups()
        if path is None:
            return cls(int(number), text)
        return cls(int(number), text, ast.literal_eval(path), None, None if path2 is None else ast.literal_eval(path2))
    try:
        return cls() if message is None else cls(message)
    except Exception:
        return RuntimeError(message)


def _items(plain: Any) -> list[tuple[str, Any]]:
    """The entries of a map under str keys that the door kept in a state ([] for anything else)."""
    return [(key, value) for key, value in plain.items() if isinstance(key, str)] if isinstance(plain, dict) else []


def _as_dumped(config: pb.Configure, type_check: bool, door: dict[str, Any]) -> pb.Configure:
    """`config` with the type check of a session from a state: on or off as the dumped session's
    (`type_check`), in the format and colour this door kept in the state (`door`), if any."""
    copied = pb.Configure()
    copied.CopyFrom(config)
    copied.type_check = type_check
    fmt, color = door.get('type_check_format'), door.get('type_check_color')
    if type(fmt) is int and fmt in pb.TypeCheckFormat.values():
        copied.type_check_format = fmt  # type: ignore[assignment]
    if type(color) is bool:
        copied.type_check_color = color
    return copied


def _diagnostics(error: SandboxTypingError, config: pb.Configure) -> str:
    """ty's text in the format and colour the parent chose (`full`, each diagnostic ending in a
    blank line as ty prints it, when it named none)."""
    return format_diagnostics(error.display(), _format(config), color=config.type_check_color, concise=error.concise)


def _format(config: pb.Configure) -> str:
    """The name of the diagnostics format the parent chose (`full` when it named none)."""
    fmt = pb.TypeCheckFormat.Name(config.type_check_format).removeprefix('TYPE_CHECK_FORMAT_').lower().replace('_', '')
    return 'full' if fmt == 'unspecified' else fmt


def _raised(error: SandboxError, clock: str = 'feed') -> pb.RaisedException:
    """A corral error as the script's `RaisedException`, with its frames."""
    text = error.display()
    module, fields = 'builtins', None
    if isinstance(error, SandboxRuntimeError):
        exc_type, message, module, fields = error.exc_type, error.message, error.module, error.fields
    elif isinstance(error, SandboxSyntaxError):
        exc_type, _, message = text.rstrip().rpartition('\n')[2].partition(': ')
    elif isinstance(error, SandboxLimitError):
        exc_type, message = _LIMIT_TYPES.get(error.limit, 'RuntimeError'), text.rstrip().rpartition('\n')[2].partition(': ')[2] or text
        if error.limit == 'wall_time':  # the client's words for its feed and turn budgets, then corral's
            message = f'{clock} time limit exceeded: {message}'
        elif error.limit == 'memory':  # the words Code Mode tells the limit by, then corral's
            message = f'memory limit exceeded: {message}'
    else:
        exc_type, message = 'RuntimeError', text
    raised = exception_value(exc_type or 'Exception', message, module, fields)
    lines = text.splitlines()
    for number, line in enumerate(lines):
        match = _FRAME.match(line)
        if match is None:
            continue
        line = int(match['line'])
        frame = pb.StackFrame(filename=match['file'], start=pb.CodeLoc(line=line, column=1), end=pb.CodeLoc(line=line, column=1))
        if match['name']:
            frame.frame_name = match['name']
        if number + 1 < len(lines) and lines[number + 1].startswith('    '):
            frame.preview_line = lines[number + 1].strip()
            frame.end.column = len(frame.preview_line) + 1
            marks = lines[number + 2] if number + 2 < len(lines) else ''
            if _MARKS.match(marks):  # the part of the line that failed, marked as CPython marks it
                frame.start.column = len(marks) - len(marks.lstrip()) - 3
                frame.end.column = len(marks.rstrip()) - 3
        raised.traceback.append(frame)
    return raised


#: Seconds between a budget's stop and the kill of a worker that ignores it, in a session with a budget.
_GRACE = 0.5


def _limits(limits: pb.ResourceLimits) -> Limits:
    """corral's `Limits` for Monty's `ResourceLimits` (what it leaves out keeps corral's default)."""
    given: dict[str, Any] = {}
    if limits.HasField('max_memory_bytes'):
        given['memory'] = max(limits.max_memory_bytes, 256 * 1024 * 1024)
    if limits.HasField('max_recursion_depth'):
        given['recursion'] = max(limits.max_recursion_depth, 1)
    budgets = [getattr(limits, name) for name in ('max_feed_duration_micros', 'max_turn_duration_micros') if limits.HasField(name)]
    if budgets:  # corral's wall_time is one budget for the feed: the smaller of the two
        given['wall_time'] = max(min(budgets) / 1e6, 0.001)
        # a loop inside one builtin (`sum(range(10**18))`) ignores the stop and is killed `grace`
        # later; pydantic_monty's parent kills the child itself 1 s past the budget (its pool's
        # `feed_duration_limit_grace` and `turn_duration_limit_grace` default), so corral kills first
        given['grace'] = _GRACE
    return Limits(**given)


def _clock(limits: pb.ResourceLimits) -> str:
    """Which of Monty's budgets corral's wall_time stands for: 'turn' when it is the smaller."""
    if limits.HasField('max_turn_duration_micros') and (
        not limits.HasField('max_feed_duration_micros') or limits.max_turn_duration_micros < limits.max_feed_duration_micros
    ):
        return 'turn'
    return 'feed'


