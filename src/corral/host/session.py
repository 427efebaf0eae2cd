"""A session: one worker, checked out of a pool, running one script after another.

Its lifecycle, feeds and checks are here; its other parts are mixins of their own modules: the
channel to its worker (`channel`), its host calls (`host_calls`), its dump, load and replay
(`replay`) and a stored session's writes and size (`stored`)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import re
import secrets
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from time import perf_counter
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from ..channel import COMPILE, FEED, frame
from ..errors import (
    CorralError,
    SandboxError,
    SandboxLimitError,
    SandboxRuntimeError,
    SandboxSyntaxError,
    SandboxTypingError,
    SandboxWorkerError,
    StubError,
)
from ..limits import Limits
from ..language.named import host_pairs
from ..values import UNPACKABLE_RESULT, HostCallables, giving_callables, name_objects, pack
from .channel import _REPLAY_SLACK, PrintCallback, WorkerChannel, _Protocol, print_to_host
from .checkpoints import StoredBytes, state_digest
from .compiled import COMPILED_FEEDS
from .deferred import PendingCall, SandboxPaused
from .external import ExternalModule, exception_payload, is_async_callable, missing_functions, module_name_problem
from .host_calls import HostCalls, _tracer
from .journal import DONE as FEED_DONE
from .journal import (
    ENVELOPE_BYTES,
    FAILED,
    STOPPED,
    Chain,
    FeedRecord,
    SessionState,
    check_fingerprint,
    check_packages,
    feed_size,
    open_stored,
    state_modules,
)
from .lease import Lease
from .os_access import MAX_URANDOM_BYTES, Mount, OsAccess, SystemCalls
from .replay import DumpAndReplay
from .stored import _HEADROOM, _RESERVE, StoredState
from .workers import WorkerProcess

if TYPE_CHECKING:
    from .pool import Pool

__all__ = ['OfferModules', 'Session', 'PrintCallback', 'print_to_host']

#: Offers a state's external modules to the session taking it up (`load_session(modules=)`,
#: `pool.checkout(session_id=..., modules=)`): awaited with `{name: (stubs, function names)}` of
#: each module the state was made with, parents before their submodules, before the state is
#: checked against the session's modules; it offers those the session lacks (`add_external_module`).
OfferModules = Callable[[dict[str, tuple[str | None, list[str]]]], Awaitable[None]]

name_objects(host_pairs)  # type objects cross as the host's classes, the sandbox's builtins as SandboxBuiltin

#: A session's limits when it is given none (a `Limits` is frozen: made once, not checked again at each checkout).
_DEFAULT_LIMITS = Limits()
#: Texts a session remembers sending its worker, which keeps them compiled (fewer than `runtime._SCRIPT_CACHE`).
_WORKER_TEXTS = 16
#: The first line of one of ty's diagnostics (`error[invalid-argument-type]: ...`): its rule name.
_DIAGNOSTIC_HEADER = re.compile(r'^(?:error|warning|info)\[([a-z0-9-]+)\]: ', re.MULTILINE)


def _tracing() -> bool:
    """Whether an OpenTelemetry tracer provider is installed: without one every span is a
    non-recording stand-in, and making them costs about a tenth of a trivial feed's host time."""
    return not isinstance(trace.get_tracer_provider(), (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


def _escape_surrogates(text: str) -> str:
    return re.sub('[\ud800-\udfff]', lambda match: f'\\u{ord(match[0]):04x}', text)


def _refuse_surrogates(code: str, script_name: str) -> None:
    """Raise `SandboxSyntaxError` if `code` holds a lone surrogate (U+D800..U+DFFF on its own, as a
    JSON string's `\\ud800` escape decodes): it is not a character, so no UTF-8 source, and no
    compiler, can hold it. The display points at it as Python points at a syntax error."""
    try:
        code.encode('utf-8')
    except UnicodeEncodeError as error:
        start = code.rfind('\n', 0, error.start) + 1
        end = code.find('\n', error.start)
        shown = _escape_surrogates(code[start : len(code) if end < 0 else end].lstrip())
        before = _escape_surrogates(code[start : error.start].lstrip())
        char = code[error.start]
        raise SandboxSyntaxError(
            f'  File "{script_name}", line {code.count(chr(10), 0, error.start) + 1}\n'
            f'    {shown}\n'
            f'    {" " * len(before)}^\n'
            f'SyntaxError: the script holds a lone surrogate, U+{ord(char):04X}, which is not a character; '
            f"inside a string, write it as the escape '\\u{ord(char):04x}'"
        ) from None


class Session(WorkerChannel, HostCalls, DumpAndReplay, StoredState):
    """A checked-out sandbox: a worker of its own, whose variables persist between feeds.

    Use it as an async context manager (`async with pool.checkout() as session:`); leaving the
    block kills the worker, which is never reused for another session.

    A session keeps a journal of what entered its worker (see `corral.host.journal`): `dump()`
    seals it into signed bytes, `load_session()` replays them in a fresh session, and a stored
    session (`pool.checkout(ephemeral=False)`) is written to the pool's store after every feed.

    `value_repr`: when the last feed's value was a numpy or pandas value (which arrives in its
    plain form, see `corral.values`), the library's own repr of it, as the sandbox made it (the
    table a model expects to read); otherwise None.
    """

    def __init__(
        self,
        pool: Pool,
        *,
        type_check: bool,
        type_check_stubs: str | None,
        external_modules: Mapping[str, ExternalModule] | None,
        ephemeral: bool,
        limits: Limits | None,
        script_name: str,
        os_access: OsAccess | None = None,
        mounts: Mount | Sequence[Mount] | None = None,
        random_seed: int | None = None,
        session_id: str | None = None,
        fork: bool = False,
        tenant: str = '',
        modules: OfferModules | None = None,
    ) -> None:
        for name, module in (external_modules or {}).items():
            if not isinstance(module, ExternalModule):
                raise TypeError(f'external_modules[{name!r}] must be an ExternalModule, not {type(module).__name__}')
            problem = module_name_problem(name, external_modules or {})
            if problem is not None:
                raise ValueError(f'external_modules key {problem}')
        self._pool = pool
        self._type_check = type_check
        self._stubs = type_check_stubs
        self._modules = dict(external_modules or {})
        self.ephemeral = ephemeral
        self.limits = limits if limits is not None else _DEFAULT_LIMITS
        self.script_name = script_name
        self.value_repr: str | None = None
        #: What a front door keeps with the session (its own settings): plain data of the kinds a
        #: state holds, under str keys, dumped and stored with the state, signed with it, and
        #: restored by a load (`load_session`, a stored session's checkout).
        self.door_state: dict[str, Any] = {}
        self._worker: WorkerProcess | None = None
        self._transport: asyncio.Transport | None = None
        self._dead: str | None = None
        self._heard = 0.0  # perf_counter() when the worker last sent something
        self._worker_texts: OrderedDict[str, None] = OrderedDict()  # texts its worker was sent last (see `_code_message`)
        self._context: list[str] = []
        self._done: asyncio.Future[Any] | None = None
        self._deadline: float | None = None  # the event loop's time at which the feed's wall_time ends
        self._lookup: Mapping[str, Callable[..., Any]] = {}
        self._callables = HostCallables()  # host callables its script was given as values
        self._print: PrintCallback = print_to_host
        self._calls = 0
        self._span_context: otel_context.Context | None = None
        self._traced = False  # whether a tracer provider was installed when the feed began (`_tracing`)
        self._call_tasks: set[asyncio.Future[Any]] = set()  # host calls in flight: their tasks, or the futures they returned
        self._system = _system_calls(os_access, mounts, random_seed)
        self._lookup_checked = not type_check  # the stubs' functions against the first external_lookup
        # the journal, and the feed in flight (see corral.channel: replies are pulled by the worker)
        self._journal: list[FeedRecord] = []
        self._record: FeedRecord | None = None
        self._trace = hashlib.blake2b(digest_size=16)
        self._asyncs: dict[str, bool] = {}  # host function name -> async, as the worker was told
        self._next_call = 0  # the worker's next call id
        self._answers: deque[tuple[int, bytes]] = deque()  # async replies the worker has not asked for yet
        self._running: set[int] = set()  # async host calls in flight
        self._deferred: dict[int, PendingCall] = {}
        self._resumed: list[int] = []  # the deferred calls of the feed in flight that resume() answered
        # the calls a resumption answered whose feed was then stopped, and why: a second answer is refused
        self._answered: tuple[list[int], str] = ([], '')
        self._blocked: int | None = None  # the sync call the worker waits on
        self._waiting: tuple[float, float | None] | None = None  # (since, timeout) of the worker's WAIT
        #: Called (no arguments, on the event loop) each time the worker of a feed sends a WAIT: a link
        #: that holds host calls until `worker_waiting` (`corral serve`) sends them then, not at its next look.
        self.on_worker_waiting: Callable[[], None] | None = None
        self._tick: asyncio.TimerHandle | None = None
        self._paused = False
        self._timed = False  # the worker said the feed's end depended on time (TIMED)
        self._unreplayable: str | None = None
        # a replay (load_session): the inputs of the feed being replayed, and whether live answers may follow them
        self._replay: deque[list[Any]] | None = None
        self._replaying: FeedRecord | None = None
        self._replay_final = False
        self._ahead = 0  # feeds of the replay whose messages went to the worker ahead of their turn
        # a stored session
        self.session_id: str | None = session_id
        self._fork = fork
        self.tenant = tenant
        self._offer_modules = modules
        self._stored_fingerprint = b''  # the fingerprint (host functions and modules) as the store has it
        self._lease: Lease | None = None
        self._overlay: dict[str, list[Any]] = {}  # a stored session's overlay writes before its feed
        self._cwd = self._system.cwd  # and its working folder
        self._chain: Chain | None = None  # where the next write to the store goes; None: a full state, at generation 1
        self._stored = 0  # feeds of the journal the store has, the last one open when `_stored_open`
        self._stored_open = False
        self._stored_overlay: dict[str, list[Any]] = {}  # the overlay as the store has it
        self._full_due = False  # the next write is a full state (the session loaded another state)
        # On a pool that keeps checkpoints: the digest of the bytes the store has, and the state they hold
        self._stored_bytes: StoredBytes | None = None
        self._stored_state: SessionState | None = None
        # what a stored session's state may hold (`Pool(max_state_bytes)`), less a reserve for what
        # comes in after a stop; its size is counted as it grows (`_journal_bytes`, the overlay's)
        self._quota = None if ephemeral else pool.max_state_bytes
        self._room = 0 if self._quota is None else self._quota - min(_RESERVE, self._quota // 4)  # for a script
        self._input_room = 0 if self._quota is None else self._room - min(_HEADROOM, self._quota // 16)  # for what comes in
        self._fixed_bytes = ENVELOPE_BYTES + 1024 + len(script_name) + sum(len(path) + len(mode) + 16 for path, mode in self._system.mounts())
        self._journal_bytes = 0
        self._stopping = False  # a stop (max_state_bytes, a StopFeed) went to the worker in this feed
        if self._quota is not None:
            self._system.room = self._overlay_room
        self._cpu_seconds = 0.0  # the worker's CPU at the last reading (cpu_seconds)
        self._checker_cpu = 0.0  # the CPU of the session's type checks (cpu_seconds)
        self._ended_cpu = 0.0  # the CPU of its workers before this one (a feed rolled back) (cpu_seconds)
        self._cpu_base = 0.0  # what a checkpoint's worker had used before this session took it
        self._dumped: bytes | None = None  # the digest of the state dump() last gave out
        self._dumped_bytes: bytes | None = None  # and of the bytes it gave out
        self._opened = False  # entered, and its end not yet reported to the pool's observer

    @property
    def cpu_seconds(self) -> float:
        """The CPU seconds (user + system) the session's worker has used since it was forked,
        replays of a loaded state included (a worker taken from a live checkpoint: since this
        session took it), and those of the workers a stored session's feed stopped by a time limit
        replaced (which replay its journal), and its type checker's processes in the session's
        checks (its stubs', its scripts'): read from the kernel (`/proc`, and as each ty check
        ends), never from the worker. After the worker ends it stays at the last reading, taken as
        the session killed it. A server counts a tenant's CPU from it (see `corral.server.quotas`)."""
        self._read_cpu()
        return self._ended_cpu + self._cpu_seconds - self._cpu_base + self._checker_cpu

    def _count_check(self, seconds: float) -> None:
        self._checker_cpu += seconds

    def _read_cpu(self) -> None:
        seconds = self._worker.cpu_seconds() if self._worker is not None else None
        if seconds is not None:
            self._cpu_seconds = seconds

    @property
    def journal_bytes(self) -> int:
        """Bytes of what the session keeps to replay or dump its state: its scripts and what came
        into them from outside (host call results, answers), as counted toward `Pool(max_state_bytes)`.
        They grow with each feed; a stored session's stop at that bound, an ephemeral session's do not."""
        return self._journal_bytes

    @property
    def random_seed(self) -> int:
        """The seed of the script's `random` module (and `uuid.uuid4`): the same seed, the same numbers."""
        return self._system.seed

    @property
    def type_check(self) -> bool:
        """Whether the session type-checks its feeds: `checkout(type_check=)`, or after a load the
        dumped session's setting."""
        return self._type_check

    @property
    def alive(self) -> bool:
        """Whether the session can run another feed: False before it is entered, after it is closed,
        and once its worker was killed (a `memory` or `cpu_time` limit, a script that did not stop at
        `wall_time`, a dead worker: the error said so). A stored session whose feed a time limit
        stopped goes back to its state before that feed and stays alive."""
        return self._worker is not None and self._dead is None

    @property
    def paused(self) -> bool:
        """Whether the session's feed is paused on deferred calls (`SandboxPaused`); `resume()` goes on."""
        return self._paused

    @property
    def pending_calls(self) -> list[PendingCall]:
        """The deferred calls a paused feed waits on, by call id (as `SandboxPaused.calls` listed them);
        empty when the session is not paused. After `checkout(session_id=...)` of a paused session,
        this is what `resume()` answers."""
        return [self._deferred[call_id] for call_id in sorted(self._deferred)] if self._paused else []

    @property
    def worker_waiting(self) -> bool:
        """Whether the worker of the feed in flight waits on the host: for a sync call's reply, or,
        having nothing else to run, for an async call's answer or a timer. A link that sends host
        calls on (`corral serve`) sends the calls made together (`asyncio.gather`) once this is True."""
        return self._blocked is not None or self._waiting is not None

    def add_external_module(self, name: str, module: ExternalModule) -> None:
        """Offer `module` to the next feeds as an import named `name`, as `checkout(external_modules=)`
        does (a module the host learns of between feeds, as a caller answering imports does), in
        place of the one the session offered under that name and its submodules, if any. A dotted
        `name` (`pkg.sub`) offers a submodule of a module the session offers (`pkg`): the script
        imports it as `import pkg.sub` and reaches it as `pkg.sub` too.

        Raises `TypeError` for a module that is not an `ExternalModule`, `ValueError` for a name that
        is not one a module can have, or a submodule of a module not offered.
        """
        if not isinstance(module, ExternalModule):
            raise TypeError(f'external module {name!r} must be an ExternalModule, not {type(module).__name__}')
        problem = module_name_problem(name, self._modules)
        if problem is not None:
            raise ValueError(f'external module name {problem}')
        for offered in [offered for offered in self._modules if offered.startswith(f'{name}.')]:
            del self._modules[offered]
        self._modules[name] = module

    def chdir(self, path: str) -> None:
        """Make `path` (absolute, in the sandbox's terms, normalized; the host's word, so not
        looked up as a script's `os.chdir` is) the folder relative paths of the next feeds start
        at; the session's state keeps it. Raises `ValueError` for a relative path."""
        self._system.chdir(path)

    # ----- lifecycle -----------------------------------------------------------------------------

    async def __aenter__(self) -> Session:
        try:
            self._check_stub_size()
            if self._type_check:
                await self._check_stubs()
            try:
                if not self.ephemeral:
                    await self._open_stored()
                else:
                    await self._start_worker()
            except BaseException:
                await self.aclose()
                raise
        except BaseException as error:
            self._pool.observer.checkout_failed(error)
            raise
        self._opened = True
        self._pool.observer.session_opened()
        return self

    async def _start_worker(self, worker: WorkerProcess | None = None) -> None:
        """Take a fresh worker from the pool (or `worker`, a checkpoint's) and connect its channel."""
        base = 0.0
        if worker is None:
            worker = await self._pool._take_worker(self.limits)
        else:
            base = worker.cpu_seconds() or 0.0
        protocol = _Protocol(self)
        transport = worker.take_transport(protocol)  # made as the worker waited in the pool, if it did
        if transport is None:
            transport, _ = await asyncio.get_running_loop().connect_accepted_socket(lambda: protocol, worker.sock)
        self._transport = transport
        self._worker = worker
        self._worker_texts.clear()
        # The last reading of the one before is kept; this one counts from what it had used.
        self._ended_cpu += self._cpu_seconds - self._cpu_base
        self._cpu_seconds, self._cpu_base = base, base

    async def _open_stored(self) -> None:
        """Take the lease of the stored session (a new one, the one named, or a fork of it) and its state."""
        store = self._pool._get_store()
        source = self.session_id
        stored = None
        if source is None or self._fork:
            self.session_id = secrets.token_hex(16)
        self._lease = lease = Lease(store, self.session_id, ttl=self._pool.lease_ttl, tenant=self.tenant)  # type: ignore[arg-type]
        if source is not None and not self._fork:  # the lease first: the state as no other holder can change it
            stored = await lease.acquire_and_get()
        elif source is not None:  # a fork (as a new session) takes the lease of its new id with its first write
            stored = await store.get(source, tenant=self.tenant)
        if stored is None:
            await self._start_worker()
        else:
            checkpoints, kept, raw = self._pool._checkpoints, None, None
            if checkpoints is not None:  # the store holds the very bytes a checkpoint of it was kept with: its state, as checked then
                raw = StoredBytes.of(stored)
                kept = checkpoints.peek(self.tenant, source, raw.digest(stored.generation))  # type: ignore[arg-type]
            if kept is not None:
                state, chain = kept.held_state(), dataclasses.replace(kept.chain)  # type: ignore[type-var]
                check_packages(state, self._pool.packages)
            else:
                state, chain = open_stored(
                    stored.state,
                    stored.records,
                    stored.generation,
                    self._pool._state_key(),
                    quota=self._pool.max_state_bytes,
                    expected=None,
                    tenant=self.tenant,
                    session_id=source,  # type: ignore[arg-type]
                    packages=self._pool.packages,
                )
            if self._offer_modules is not None:  # the caller offers the modules the stored session had
                await self._offer_modules(state_modules(state))
            check_fingerprint(state, self._fingerprint())
            checkpoint = None
            if checkpoints is not None:  # a fork takes it too: the source replays next time
                digest = kept.digest if kept is not None else state_digest(state)
                checkpoint = checkpoints.take(self.tenant, source, digest, (self.limits.memory, self.limits.cpu_time))  # type: ignore[arg-type]
            if checkpoint is None:
                await self._start_worker()
            await self._restore(state, checkpoint)
            if not self._fork:  # the store has it: the next feed appends to it
                self._chain, self._stored, self._stored_open = chain, len(self._journal), self._paused
                self._stored_fingerprint = state.fingerprint
                self._stored_overlay = self._system.overlay()
                if raw is not None:
                    self._stored_bytes = raw
                    self._keep_stored(state)
                return
        await self._store_state()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _check_stub_size(self) -> None:
        """Raise `SandboxLimitError` for stubs (the session's and its external modules') past `Limits.stub_size`."""
        limit = self.limits.stub_size
        texts = [text for text in (self._stubs, *(module.stubs for module in self._modules.values())) if isinstance(text, str)]
        if limit is None or sum(len(text) for text in texts) * 4 <= limit:  # else short enough
            return
        size = sum(len(text.encode('utf-8', 'surrogatepass')) for text in texts)
        if size > limit:
            raise SandboxLimitError(
                f"the stubs are {size} bytes (type_check_stubs and the external modules' stubs together), "
                f'more than the stub_size limit of {limit} bytes; the session did not open',
                limit='stub_size',
                value=limit,
            )

    async def _check_stubs(self) -> None:
        """Raise `StubError` for stubs ty finds errors in, or an external module's stub of a function
        the module does not have: either would leave a script's use of it unchecked."""
        for name, module in self._modules.items():
            problem = missing_functions(module.stubs, module.functions, f'external module {name!r}')
            if problem is not None:
                raise StubError(problem)
        modules = {name: module.stubs or '' for name, module in self._modules.items()}
        diagnostics = await self._pool._type_checker().check_stubs(
            self._stubs, modules, time_limit=self.limits.type_check_time, memory=self.limits.type_check_memory, on_cpu=self._count_check
        )
        if diagnostics is not None:
            raise StubError(f'ty finds errors in the stubs, which would leave their functions unchecked:\n{diagnostics}', diagnostics=diagnostics)

    async def aclose(self) -> None:
        """Kill the worker and end the session (a stored session stays in the store). Safe to call twice."""
        for task in list(self._call_tasks):
            task.cancel()
        if self._tick is not None:
            self._tick.cancel()
        checkpoint = None
        if self._worker is not None:
            self._read_cpu()  # the last reading, before the worker's counters go with it
            checkpoint = self._checkpoint()
            if self._transport is not None:
                self._transport.abort()
            self._worker.kill()
            self._worker = None
        if self._dead is None:
            self._dead = 'the session is closed'
        if checkpoint is not None:
            await self._pool._checkpoints.keep(checkpoint)  # type: ignore[union-attr]
        if self._opened:
            self._opened = False
            self._pool.observer.session_closed()
        if self._lease is not None:
            lease, self._lease = self._lease, None
            await lease.release()

    # ----- running -------------------------------------------------------------------------------

    async def feed_run(
        self,
        code: str,
        *,
        external_lookup: Mapping[str, Callable[..., Any]] | None = None,
        print_callback: PrintCallback | None = None,
        type_check: bool = True,
    ) -> Any:
        """Run `code` in the session and return the value of its last expression.

        The value is None when the last statement is not an expression. `external_lookup` maps
        names the script can call to host functions, sync or async; `print_callback` receives the
        script's printed output as `(stream, text)` (default: the host's stdout, and its stderr for
        what the script wrote to `sys.stderr`). `type_check=False` runs this script unchecked in a
        session checked out with `type_check=True`.

        Raises `SandboxTypingError` (the check failed; nothing ran), `SandboxCheckerError` (ty
        could not check it; nothing ran), `SandboxSyntaxError`, `SandboxRuntimeError` (an
        uncaught exception in the script), `SandboxLimitError` (`code_size`, `type_check_time`
        and `type_check_memory` before anything ran; the others while it ran),
        `SandboxWorkerError` (the worker died; the session is over), `SandboxPaused` (a host
        function raised `Deferred`: answer with `resume()`).
        """
        if not isinstance(code, str):
            raise TypeError(f'code must be a str, not {type(code).__name__}')
        self._check_usable()
        if self._paused:
            raise RuntimeError('this session is paused on deferred host calls: answer them with session.resume() first')
        lookup = _checked_lookup(external_lookup)
        self._answered = ([], '')
        if not self.ephemeral:
            self._overlay = self._system.overlay()  # what the feed leaves if it is undone (see `_roll_back`)
            self._cwd = self._system.cwd
        spans = _tracer.start_as_current_span('run code') if _tracing() else contextlib.nullcontext(trace.INVALID_SPAN)
        with spans as span:
            if span.is_recording():
                span.set_attributes({'code': code, 'script_name': self.script_name})
            try:
                return await self._observed(self._settle(self._feed(code, lookup, print_callback or print_to_host, type_check)))
            except SandboxError as error:
                span.set_status(trace.Status(trace.StatusCode.ERROR, type(error).__name__))
                await self._remember_ran(code, error)
                raise

    async def resume(
        self,
        values: Mapping[int, Any] | None = None,
        *,
        errors: Mapping[int, BaseException] | None = None,
        external_lookup: Mapping[str, Callable[..., Any]] | None = None,
        print_callback: PrintCallback | None = None,
    ) -> Any:
        """Answer deferred calls of the paused feed and go on with it: its value, as `feed_run` returns it.

        `values` maps a `PendingCall.call_id` to the value its function returns; `errors` to the
        exception it raises (in the script, as the nearest built-in exception, as for any host
        function). Answers enter the script in the order of their call ids. Calls left unanswered
        stay pending: the feed pauses again (`SandboxPaused`) when it needs them. After
        `load_session` or `checkout(session_id=...)`, pass `external_lookup` (and
        `print_callback`, without which the rest of the feed prints to the host's stdout and
        stderr) again for the calls the rest of the feed makes; on the session that paused, its
        feed's are kept unless given.

        A call is answered once. A stored session writes the answers to its store before they
        reach the worker, as a state without the paused feed: should the feed not end (a time
        limit or a dead worker stops it, or the host running it stops), the session goes back to
        its state before that feed, here and in the store, and an answer to the same call again
        is refused, whoever checks the session out.

        Raises `RuntimeError` when the session is not paused (naming the calls answered already
        when those are answered again), `KeyError` for a call id that is not pending,
        `SandboxStateError` when the store cannot take the answers (nothing reached the worker),
        and what `feed_run` raises.
        """
        self._check_usable()
        values, errors = dict(values or {}), dict(errors or {})
        again = sorted((set(values) | set(errors)) & set(self._answered[0]))
        if again:
            raise RuntimeError(
                f"call id(s) {again} were answered already: {self._answered[1]}, so the session went back to its state before that feed "
                'and the calls are not pending any more; a call is answered once'
            )
        if not self._paused:
            raise RuntimeError('this session is not paused: resume() answers the deferred calls of a paused feed')
        unknown = sorted((set(values) | set(errors)) - set(self._deferred))
        if unknown:
            raise KeyError(f'call id(s) {unknown} are not pending; the pending calls are {sorted(self._deferred)}')
        both = sorted(set(values) & set(errors))
        if both:
            raise ValueError(f'call id(s) {both} are given both a value and an error')
        for error in errors.values():
            if not isinstance(error, BaseException):
                raise TypeError(f'errors must map call ids to exceptions, not {type(error).__name__}')
        if external_lookup is not None:
            self._lookup = {**_checked_lookup(external_lookup), **self._module_lookup()}
        if print_callback is not None:
            self._print = print_callback
        await self._store_answered(sorted((*values, *errors)))
        sync_answer: bytes | None = None
        for call_id in sorted((*values, *errors)):
            call = self._deferred.pop(call_id)
            ok, value = (False, exception_payload(errors[call_id])) if call_id in errors else (True, values[call_id])
            payload = self._answer(call_id, call.function, ok, value, sync=call_id == self._blocked)
            if call_id == self._blocked:
                sync_answer = payload
            else:
                self._answers.append((call_id, payload))
        self._paused = False
        blocked = self._blocked

        def go_on() -> None:
            if self._waiting is not None:  # the script's clock did not run while it was paused
                self._waiting = (perf_counter(), self._waiting[1])
            if sync_answer is not None:
                self._deliver(blocked, sync_answer)  # type: ignore[arg-type]
            else:
                self._offer()
            self._check_pause()
            self._arm_tick()

        return await self._observed(self._settle(self._exchange_with(go_on, timeout=self.limits.wall_time)))

    def _check_usable(self) -> None:
        if self._worker is None or self._dead is not None:
            raise SandboxWorkerError(f'this session cannot run scripts: {self._dead or "it is not entered"}; check out a new session')
        if self._done is not None:
            raise RuntimeError('feed_run is already running on this session; await it before the next one')

    async def _observed(self, run: Any) -> Any:
        """Await a feed or its resumption (not a replay's) and report how it ended to the pool's observer."""
        started = perf_counter()
        try:
            value = await run
        except BaseException as error:
            self._pool.observer.feed_ended(perf_counter() - started, error)
            raise
        self._pool.observer.feed_ended(perf_counter() - started, None)
        return value

    async def _settle(self, run: Any) -> Any:
        """Await a feed (or its resumption) and keep the journal and the store up to date with how it ended."""
        try:
            value = await run
        except SandboxPaused:
            await self._store_state()
            raise
        except BaseException as error:
            record = self._record
            if record is not None:
                self._close_record(record, error)
                if self._replaying is not None:
                    raise
                if record.outcome == STOPPED and not self.ephemeral:
                    await self._roll_back(record)
                elif record.outcome == FAILED:
                    await self._store_state()
            raise
        record = self._record
        if record is not None:
            self._close_record(record, None)
            self._context.append(record.code)
            if record.outcome == STOPPED:
                if not self.ephemeral and self._replaying is None:
                    await self._roll_back(record)
                return value
            await self._store_state()
        return value

    def _close_record(self, record: FeedRecord, error: BaseException | None) -> None:
        self._record = None
        self._stopping = False
        self._lookup = {}
        self._deferred.clear()
        self._answers.clear()
        self._blocked = self._waiting = None
        record.trace = self._trace.digest()
        timed, self._timed = self._timed, False
        if error is None and not timed:
            record.outcome = FEED_DONE
        elif not timed and (isinstance(error, (SandboxRuntimeError, SandboxSyntaxError)) or (isinstance(error, SandboxLimitError) and error.limit not in _TIMED)):
            record.outcome = FAILED  # a replay reaches the same point and fails there too
        else:
            record.outcome = STOPPED
            if timed:
                what = 'time (tasks it left running ignored their cancellation)'
            else:
                what = f'the {error.limit} limit' if isinstance(error, SandboxLimitError) else type(error).__name__
            record.why = f'feed {self._journal.index(record) + 1} was stopped by {what} at a point no replay can reproduce'
            if self.ephemeral:
                self._unreplayable = record.why

    async def _roll_back(self, stopped: FeedRecord) -> None:
        """A stored session's feed stopped by a time limit (or a dead worker): go back to the state
        before that feed, as the store has it (a resumed feed's answers were stored with it gone:
        `_store_answered`), replayed in a new worker. When that fails too, the session ends (the
        store still has the state)."""
        if self._resumed:
            self._answered = (self._resumed, f'the feed went on with the answers and was stopped ({stopped.why})')
        self._journal.remove(stopped)
        self._kill(stopped.why)
        self._system.restore_overlay(self._overlay)
        self._system.cwd = self._cwd
        state = self._state()
        self._journal, self._context, self._next_call, self._journal_bytes = [], [], 0, 0
        try:
            await self._start_worker()
            self._dead = None
            await self._replay_state(state)
        except (CorralError, OSError, RuntimeError) as error:
            self._kill(f'{stopped.why}, and going back to the state before it failed ({error})')

    async def _remember_ran(self, code: str, error: SandboxError) -> None:
        """Keep, as context of the next type check, the part of a failed script that ran: the names
        it bound stay in the worker (see `TypeChecker.ran_part`)."""
        if not self._type_check or self._dead is not None:
            return
        from ..typecheck import failing_line  # as the pool does: loaded when checks are on

        if isinstance(error, SandboxRuntimeError) and error.exc_type == 'TypeError' and error.message.startswith(UNPACKABLE_RESULT):
            part = code  # it ran to its end
        elif isinstance(error, (SandboxRuntimeError, SandboxLimitError)):
            frames = error.display()
            if isinstance(error, SandboxRuntimeError) and error.message and frames.endswith(error.message):
                frames = frames[: -len(error.message)]  # the script's own text: it could hold a frame's line
            part = await self._pool._type_checker().ran_part(code, failing_line(frames, self.script_name))
        else:  # nothing ran
            return
        if part.strip():
            self._context.append(part)

    async def check(self, code: str, *, concise: bool = False) -> None:
        """Check `code` as `feed_run` does before it runs a script, without running it: its size,
        and in a session checked out with `type_check=True`, its syntax, the constructs the
        sandbox refuses and its types. A caller that must answer a type error before anything of
        the script reaches it (a name it reads, a module it imports) checks first, then runs the
        script with `feed_run(code, type_check=False)`. `concise=True` gives the error, when the
        types are wrong, ty's own one-line text of the diagnostics too (its `concise`, for
        `format_diagnostics`): the warm ty server's words, or a second ty check's.

        Raises `SandboxTypingError`, `SandboxCheckerError`, `SandboxSyntaxError` and
        `SandboxLimitError` (`code_size`, `type_check_time`, `type_check_memory`) as `feed_run` does.
        """
        if not isinstance(code, str):
            raise TypeError(f'code must be a str, not {type(code).__name__}')
        self._check_usable()
        await self._check(code, type_check=True, concise=concise)

    async def _check(self, code: str, *, type_check: bool, concise: bool = False) -> None:
        limits = self.limits
        if not code.isascii():
            _refuse_surrogates(code, self.script_name)
        if limits.code_size is not None and len(code) * 4 > limits.code_size:  # else short enough
            size = len(code.encode('utf-8', 'surrogatepass'))
            if size > limits.code_size:
                raise SandboxLimitError(
                    f'the script is {size} bytes, more than the code_size limit of {limits.code_size} bytes; it was not checked or run',
                    limit='code_size',
                    value=limits.code_size,
                )
        if self._type_check and type_check:
            # The worker compiles while ty checks: a syntax error (or a refused construct) wins,
            # so it reads as Python shows it rather than as a type error; the compiled script
            # waits in the worker for the feed, whose wall_time starts when the script does.
            lines: list[str] = []
            check = asyncio.ensure_future(self._check_types(code, lines.append if concise else None))
            try:
                await self._exchange([COMPILE, code, self.script_name], timeout=limits.type_check_time, limit='type_check_time')
                self._worker_has(code)  # it keeps the script compiled for the feed
            except BaseException:
                check.cancel()
                await asyncio.gather(check, return_exceptions=True)
                raise
            diagnostics = await check
            if diagnostics is not None:
                raise SandboxTypingError(diagnostics, concise=lines[0] if lines else None)

    async def _feed(self, code: str, lookup: dict[str, Callable[..., Any]], print_callback: PrintCallback, type_check: bool = True) -> Any:
        limits = self.limits
        await self._check(code, type_check=type_check)
        if self._type_check and type_check and not self._lookup_checked:
            problem = missing_functions(self._stubs, lookup, 'the external_lookup of the first feed')
            if problem is not None:
                raise StubError(problem)
            self._lookup_checked = True
        functions = {name: is_async_callable(function) for name, function in lookup.items()}
        modules: dict[str, dict[str, Any]] = {  # a function: whether it is async; a value: [value]
            name: {**{fname: is_async_callable(f) for fname, f in module.functions.items()}, **{vname: [value] for vname, value in module.values.items()}}
            for name, module in self._modules.items()
        }
        lookup.update(self._module_lookup())
        self._lookup = lookup
        self._print = print_callback
        self._span_context = otel_context.get_current()
        self._traced = _tracing()  # once a feed: OpenTelemetry looks the provider up in os.environ, 2.4 µs a host call
        worker_limits = {
            'wall_time': limits.wall_time,
            'recursion': limits.recursion,
            'output': limits.output,
            'host_calls': limits.host_calls,
            'memory': limits.memory,
            'cpu_time': limits.cpu_time,
            'value_items': limits.value_items,
            'value_size': limits.value_size,
            'host_sleeps': self._system.host_sleeps,
        }
        if self._system.host_urandom:
            worker_limits['host_urandom'] = True
        if self._system.os_access.max_urandom_bytes != MAX_URANDOM_BYTES:  # the worker's default is left out of each feed's record
            worker_limits['max_urandom_bytes'] = self._system.os_access.max_urandom_bytes
        if self._quota is not None:
            worker_limits['max_state_bytes'] = self._quota
        with giving_callables(self._callables):  # a module's value may hold a HostFunction
            payload = pack([FEED, code, self.script_name, functions, modules, worker_limits], side='host')
        record = FeedRecord(payload, code, self._next_call)
        if self._quota is not None and self._over(feed_size(record), self._room):
            raise SandboxLimitError(
                f"OverflowError: the session's stored state would grow past the max_state_bytes limit of {self._quota} bytes "
                '(Pool(max_state_bytes=...)) with this script; it was not run',
                limit='max_state_bytes',
                value=self._quota,
            )
        return await self._run_feed(record, functions, modules, code=self._code_message(code))

    def _code_message(self, code: str) -> tuple[bytes, ...]:
        """What goes before the FEED of `code`: the host's compiled code of it (`COMPILED_FEEDS.live`),
        unless its worker was sent the text among the last `_WORKER_TEXTS` (it keeps more compiled
        scripts than that: `runtime._SCRIPT_CACHE`). Either way the worker runs what it would have
        compiled itself; this only spares its compile."""
        if self._worker_has(code):
            return ()
        compiled = COMPILED_FEEDS.live(code, guarded='language' not in self._pool.skip_layers, scope=self.tenant)
        return () if compiled is None else (compiled,)

    def _worker_has(self, code: str) -> bool:
        """Whether the worker was sent the text `code` among the last `_WORKER_TEXTS`; it is remembered as sent now."""
        texts = self._worker_texts
        if code in texts:
            texts.move_to_end(code)
            return True
        texts[code] = None
        if len(texts) > _WORKER_TEXTS:
            texts.popitem(last=False)
        return False

    def _module_lookup(self) -> dict[str, Callable[..., Any]]:
        return {f'{name}.{fname}': function for name, module in self._modules.items() for fname, function in module.functions.items()}

    async def _run_feed(
        self, record: FeedRecord, functions: dict[str, bool], modules: dict[str, dict[str, bool]], *, replay: bool = False, code: tuple[bytes, ...] = ()
    ) -> Any:
        """Send a feed's FEED message (after `code`, the CODE message of its text, if any), journaled, and wait for its value.

        `replay`: a journaled feed replayed (see `_replay_state`), whose messages went to the
        worker already; it runs with no wall_time limit, on either side, but a worker that has not
        finished it in `_REPLAY_SLACK` times wall_time is killed (a load never waits for ever).
        A live feed's messages go first: the worker starts on them while the host keeps its journal.
        """
        if not replay:
            assert self._transport is not None
            self._transport.write(b''.join(map(frame, (*code, record.feed))))
        self._asyncs = dict(functions)
        for name, members in modules.items():
            for fname, is_async in members.items():
                if type(is_async) is bool:
                    self._asyncs[f'{name}.{fname}'] = is_async
        self._calls = 0
        self._resumed = []
        self._trace = hashlib.blake2b(digest_size=16)
        self._record = record
        self._journal.append(record)
        self._journal_bytes += feed_size(record)
        if replay:
            wall_time = self.limits.wall_time
            return await self._exchange_with(self._take_held, timeout=None if wall_time is None else wall_time * _REPLAY_SLACK, limit='replay')
        return await self._exchange_with(self._poll_briefly, timeout=self.limits.wall_time)

    async def _check_types(self, code: str, on_concise: Callable[[str], None] | None = None) -> str | None:
        """ty's diagnostics of `code`, or None (`on_concise`: see `TypeChecker.check`); the `type check` span records the outcome:
        `outcome` (`'passed'` or `'failed'`), and for a failure `diagnostics` (how many) and
        `rules` (their rule names, e.g. `invalid-argument-type`, each once, in order)."""
        with _tracer.start_as_current_span('type check') as span:
            started = perf_counter()
            diagnostics = await self._pool._type_checker().check(
                code,
                script_name=self.script_name,
                stubs=self._stubs,
                modules={name: module.stubs or '' for name, module in self._modules.items()},
                context=self._context,
                time_limit=self.limits.type_check_time,
                memory=self.limits.type_check_memory,
                on_cpu=self._count_check,
                on_concise=on_concise,
            )
            self._pool.observer.type_checked(perf_counter() - started, diagnostics is None)
            if span.is_recording():
                if diagnostics is None:
                    span.set_attribute('outcome', 'passed')
                else:
                    rules = _DIAGNOSTIC_HEADER.findall(diagnostics)
                    span.set_attributes({'outcome': 'failed', 'diagnostics': len(rules), 'rules': list(dict.fromkeys(rules))})
            return diagnostics


#: Limits that stop a script at a point no replay reproduces (time, not the script's own steps).
_TIMED = frozenset({'wall_time', 'cpu_time'})


def _checked_lookup(external_lookup: Mapping[str, Callable[..., Any]] | None) -> dict[str, Callable[..., Any]]:
    lookup = dict(external_lookup or {})
    for name, function in lookup.items():
        if not callable(function):
            raise TypeError(f'external_lookup[{name!r}] is not callable: {type(function).__name__}')
    return lookup


def _system_calls(os_access: OsAccess | None, mounts: Mount | Sequence[Mount] | None, seed: int | None) -> SystemCalls:
    if os_access is not None and not isinstance(os_access, OsAccess):
        raise TypeError(f'os_access must be an OsAccess, not {type(os_access).__name__}')
    if isinstance(mounts, Mount):
        mounts = [mounts]
    mounts = list(mounts or [])
    for mount in mounts:
        if not isinstance(mount, Mount):
            raise TypeError(f'mounts must be Mount objects, not {type(mount).__name__}')
    if seed is None:
        seed = secrets.randbits(64)
    elif not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f'random_seed must be an int, not {type(seed).__name__}')
    return SystemCalls(os_access, mounts, seed)
