"""A session: one worker, checked out of a pool, running one script after another."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import copy
import dataclasses
import functools
import hashlib
import inspect
import os
import re
import secrets
import socket
import struct
import sys
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from time import perf_counter
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from ..channel import CALL, COMPILE, DONE, FAIL, FEED, OUTPUT, PAUSE, POLL_SECONDS, REPLY, STOP, TIMED, WAIT, WAKE, FrameReader, ProtocolError, frame, idle, poll
from ..errors import (
    CorralError,
    SandboxError,
    SandboxLimitError,
    SandboxRuntimeError,
    SandboxStateError,
    SandboxSyntaxError,
    SandboxTypingError,
    SandboxWorkerError,
    StubError,
)
from ..limits import Limits, amount
from ..language.named import host_pairs
from ..values import MAX_FRAME, UNPACKABLE_RESULT, Decoder, HostCallables, ValueLimitError, bounded_repr, describe_type, fits, giving_callables, host_default, measure, name_objects, pack, unpack
from .checkpoints import Checkpoint, StoredBytes, bytes_digest, state_digest
from .compiled import COMPILED_FEEDS
from .deferred import Deferred, PendingCall, RemoteAnswer, SandboxPaused, StopFeed
from .external import ExternalModule, exception_payload, is_async_callable, missing_functions, module_name_problem
from .journal import DONE as FEED_DONE
from .journal import (
    ENVELOPE_BYTES,
    FAILED,
    OPEN,
    STOPPED,
    Binding,
    Chain,
    FeedRecord,
    SessionState,
    StateRecord,
    call_size,
    check_fingerprint,
    check_packages,
    dumped_modules,
    feed_size,
    fingerprint,
    input_size,
    mac_of,
    open_state,
    open_stored,
    overlay_changes,
    read_back,
    seal,
    seal_record,
    state_modules,
)
from .lease import Lease
from .os_access import MAX_URANDOM_BYTES, OVERLAY_LIMIT, Mount, OsAccess, SystemCalls
from .workers import WorkerProcess

if TYPE_CHECKING:
    from .pool import Pool

__all__ = ['OfferModules', 'Session', 'PrintCallback', 'print_to_host']

#: Receives the script's printed text as `(stream, text)`; `stream` is `'stderr'` for what the script
#: wrote to `sys.stderr` (`print(..., file=sys.stderr)`, `sys.stderr.write()`), `'stdout'` otherwise.
PrintCallback = Callable[[str, str], None]

#: Offers a state's external modules to the session taking it up (`load_session(modules=)`,
#: `pool.checkout(session_id=..., modules=)`): awaited with `{name: (stubs, function names)}` of
#: each module the state was made with, parents before their submodules, before the state is
#: checked against the session's modules; it offers those the session lacks (`add_external_module`).
OfferModules = Callable[[dict[str, tuple[str | None, list[str]]]], Awaitable[None]]

_tracer = trace.get_tracer('corral')

name_objects(host_pairs)  # type objects cross as the host's classes, the sandbox's builtins as SandboxBuiltin

#: Frames up to this many bytes are decoded as they arrive, on the event loop (a few milliseconds
#: at most); larger ones in a thread (`_Protocol`).
_INLINE_FRAME = 64 * 1024
#: Bytes of a replay's feeds its worker may have ahead of the one the host checks, and seconds the
#: host's event loop spends compiling feeds ahead in one turn (see `Session._replay_state`).
_AHEAD_BYTES = 1 << 20
_AHEAD_SECONDS = 0.01
#: Times its wall_time a replayed feed may take (the machine may be slower, or busier, than the
#: one that ran it) before its worker is taken for one that will never finish, and the load fails.
_REPLAY_SLACK = 10
#: A session's limits when it is given none (a `Limits` is frozen: made once, not checked again at each checkout).
_DEFAULT_LIMITS = Limits()
#: Texts a session remembers sending its worker, which keeps them compiled (fewer than `runtime._SCRIPT_CACHE`).
_WORKER_TEXTS = 16
#: Items of a host function's result measured and packed on the event loop; a larger one is
#: measured and packed in the decoding thread.
_INLINE_ITEMS = 10_000
#: Items of a message beyond `Limits.value_items`: the message's own list and its other fields.
_ENVELOPE_ITEMS = 64
_PEEK = int(socket.MSG_PEEK | socket.MSG_DONTWAIT)  # an int: or-ing the flags costs more than the call
#: The first line of one of ty's diagnostics (`error[invalid-argument-type]: ...`): its rule name.
_DIAGNOSTIC_HEADER = re.compile(r'^(?:error|warning|info)\[([a-z0-9-]+)\]: ', re.MULTILINE)
_LIMIT_FIELDS = frozenset({'wall_time', 'cpu_time', 'output', 'host_calls', 'memory', 'recursion', 'value_items', 'value_size', 'max_state_bytes'})


def _tracing() -> bool:
    """Whether an OpenTelemetry tracer provider is installed: without one every span is a
    non-recording stand-in, and making them costs about a tenth of a trivial feed's host time."""
    return not isinstance(trace.get_tracer_provider(), (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


def print_to_host(stream: str, text: str) -> None:
    """The default `PrintCallback`: the script's output to the host's stdout, or its stderr."""
    (sys.stderr if stream == 'stderr' else sys.stdout).write(text)


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


class Session:
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

    async def _exchange(self, message: list[Any], *, timeout: float | None, limit: str = 'wall_time') -> Any:
        """Send `message` and wait for the worker's DONE (its value) or FAIL (raised)."""
        payload = pack(message, side='host')
        return await self._exchange_with(lambda: self._write(payload), timeout=timeout, limit=limit)

    async def _exchange_with(self, start: Callable[[], None], *, timeout: float | None, limit: str = 'wall_time') -> Any:
        """Call `start` (it sends what sets the worker going) and wait for the worker's DONE (its
        value), FAIL (raised) or a pause (`SandboxPaused`, raised).

        The worker stops a script at `timeout` seconds itself; one that has not answered
        `Limits.grace` seconds later is killed, and the session ends (`limit` names the limit
        `timeout` is: `'wall_time'` for a feed, `'type_check_time'` for a compile alongside the
        check, `'replay'` for a replayed feed). A feed whose caller is cancelled ends the session too: its worker is mid-script.
        """
        loop = asyncio.get_running_loop()
        done = self._done = loop.create_future()
        deadline = None if timeout is None else loop.call_later(timeout + self.limits.grace, self._on_deadline, timeout, limit)
        self._deadline = None if timeout is None or limit != 'wall_time' else loop.time() + timeout
        try:
            start()
            return await done
        except asyncio.CancelledError:
            self._kill('a feed was cancelled while the script ran')
            raise
        finally:
            if deadline is not None:
                deadline.cancel()
            self._done = None
            if not self._paused:
                if self._tick is not None:
                    self._tick.cancel()
                    self._tick = None
                for task in list(self._call_tasks):  # calls of tasks the worker cancelled as the feed ended
                    task.cancel()
                self._running.clear()

    def _on_deadline(self, timeout: float, limit: str) -> None:
        if limit == 'replay':
            self._on_broken(f"it did not finish a replayed feed in {_REPLAY_SLACK} times the wall_time limit of {amount('wall_time', timeout / _REPLAY_SLACK)}")
            return
        if limit == 'type_check_time':
            self._kill(f"the worker took longer than the type_check_time limit of {amount(limit, timeout)} to compile a script")
            text = f"compiling the script took longer than the type_check_time limit of {amount(limit, timeout)}; the script did not run and the sandbox was stopped"
        else:
            self._kill(f"the script ran past the wall_time limit of {amount(limit, timeout)} and did not stop")
            text = f"TimeoutError: the script ran past the wall_time limit of {amount(limit, timeout)} and was killed"
        self._fail(SandboxLimitError(text, limit=limit, value=timeout))

    def _write(self, *payloads: bytes) -> None:
        assert self._transport is not None
        self._transport.write(frame(payloads[0]) if len(payloads) == 1 else b''.join(map(frame, payloads)))
        self._poll_briefly()

    def _poll_briefly(self) -> None:
        """Poll (`channel.poll`) the channel of a worker that is itself still polling, when the
        event loop has nothing else to run; otherwise the loop sleeps until the worker answers.

        A worker polls for `POLL_SECONDS` after it last wrote; one that has gone to sleep takes as
        long to wake whether the host polls or not. An event loop whose queue cannot be seen
        (not asyncio's own) is never held up.
        """
        if perf_counter() - self._heard > POLL_SECONDS or not idle(asyncio.get_running_loop()) or self._worker is None:
            return
        sock = self._worker.sock

        def readable() -> bool:
            try:
                sock.recv(1, _PEEK)
            except BlockingIOError:
                return False
            except OSError:
                pass
            return True

        poll(readable)

    def _kill(self, reason: str) -> None:
        """End the session: the worker is killed and never used again."""
        if self._dead is None:
            self._dead = reason
        if self._worker is not None:
            self._read_cpu()  # the last reading, before the worker's counters go with it
            if self._transport is not None:
                self._transport.abort()
            self._worker.kill()
            self._worker = None

    def _fail(self, error: BaseException) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_exception(error)

    # ----- messages from the worker --------------------------------------------------------------

    def _on_message(self, message: Any) -> None:
        if not isinstance(message, list) or not message:
            raise ProtocolError('a message is not a non-empty list')
        kind = message[0]
        if self._done is None or self._done.done():
            raise ProtocolError(f'message of kind {kind!r} outside a feed')
        if kind == CALL:
            _, call_id, name, args, kwargs = _shape(message, 5)
            if not (isinstance(call_id, int) and isinstance(name, str) and isinstance(args, list) and isinstance(kwargs, dict)):
                raise ProtocolError('malformed CALL message')
            if call_id != self._next_call or self._blocked is not None:
                raise ProtocolError('a CALL message out of order')
            self._next_call += 1
            self._trace.update(b'C' + name.encode('utf-8', 'surrogatepass') + b'\x00')
            self._on_call(call_id, name, args, kwargs)
        elif kind == WAIT:
            _, timeout = _shape(message, 2)
            if not (timeout is None or (type(timeout) is float and timeout >= 0.0)) or self._waiting is not None or self._blocked is not None:
                raise ProtocolError('malformed WAIT message')
            self._trace.update(b'W')
            self._on_wait(timeout)
        elif kind == TIMED:
            _shape(message, 1)
            self._timed = True
        elif kind == OUTPUT:
            _, stream, text = _shape(message, 3)
            if not isinstance(text, str) or stream not in ('stdout', 'stderr'):
                raise ProtocolError('malformed OUTPUT message')
            self._witness(text.encode('utf-8', 'surrogatepass'))
            self._print(stream, text)
        elif kind == DONE:
            _, value, shown = _shape(message, 3)
            if shown is not None and not isinstance(shown, str):
                raise ProtocolError('malformed DONE message')
            with giving_callables(self._callables):
                self._witness(pack(value, side='host'))
            self._end_of_feed()
            self.value_repr = shown
            self._done.set_result(value)
        elif kind == FAIL:
            _, failure, exc_type, text, display, detail = _shape(message, 6)
            if not all(isinstance(item, str) for item in (failure, exc_type, text, display)) or not _is_detail(detail):
                raise ProtocolError('malformed FAIL message')
            self._witness(display.encode('utf-8', 'surrogatepass'))
            self._end_of_feed()
            if failure == 'syntax':
                self._done.set_exception(SandboxSyntaxError(display))
            elif failure == 'limit':
                if exc_type not in _LIMIT_FIELDS:
                    raise ProtocolError(f'unknown limit {exc_type!r}')
                if exc_type == 'cpu_time':  # the kernel kills the worker a second later
                    self._kill(f"the script used more than the cpu_time limit of {amount('cpu_time', self.limits.cpu_time)}")
                value = self._quota if exc_type == 'max_state_bytes' else getattr(self.limits, exc_type)
                self._done.set_exception(SandboxLimitError(display, limit=exc_type, value=value))
            elif failure == 'runtime':
                module, fields = detail if detail is not None else ('', None)
                self._done.set_exception(SandboxRuntimeError(display, exc_type=exc_type, message=text, module=module, fields=fields))
            else:
                raise ProtocolError(f'unknown failure kind {failure!r}')
        else:
            raise ProtocolError(f'unknown message kind {kind!r}')

    def _witness(self, data: bytes) -> None:
        """Fold what the feed printed or ended with into its trace, so a replay that prints or
        returns something else is refused. Memory addresses (`0x7f...`, in default reprs) differ
        from process to process and are left out."""
        self._trace.update(_ADDRESS.sub(b'0x', data))

    def _end_of_feed(self) -> None:
        """The worker ended the feed: a replayed feed must have used all its recorded inputs, and
        a WAIT a stop cut short gets its answer (an empty WAKE) all the same."""
        if self._replay is not None and self._replay:
            self._diverged('it ended before taking in all the messages recorded for it')
        if self._waiting is not None:
            self._waiting = None
            if self._tick is not None:
                self._tick.cancel()
                self._tick = None
            self._write(_EMPTY_WAKE)

    def _on_broken(self, reason: str) -> None:
        """The worker died or sent something against the rules: kill it, fail the feed."""
        self._kill(reason)
        self._fail(SandboxWorkerError(f'the sandbox worker stopped: {reason}; check out a new session'))

    # ----- host calls ----------------------------------------------------------------------------

    def _on_call(self, call_id: int, name: str, args: list[Any], kwargs: dict[str, Any]) -> None:
        sync = name != _ASYNC_SLEEP if name.startswith(SYSTEM_PREFIX) else not (self._asyncs.get(name, False) or HostCallables.awaited(name))
        if sync:
            self._blocked = call_id
        record = self._record
        assert record is not None
        recorded = self._replaying
        if recorded is not None and call_id - recorded.first_call < len(recorded.calls):  # answered from the record
            if recorded.calls[call_id - recorded.first_call] != name:
                self._diverged(f'call {call_id} is to {_shown(name)}() where the record has {_shown(recorded.calls[call_id - recorded.first_call])}()')
                return
            record.calls.append(name)
            self._journal_bytes += call_size(name)
            if sync and (self._replay or not self._replay_final):
                self._serve_replay(call_id)
            elif sync:  # the call a paused feed waits on
                self._check_pause()
            return
        if self._replay is not None and not self._replay_final:
            self._diverged(f'it made a call the record does not have ({_shown(name)}())')
            return
        record.calls.append(name)
        self._journal_bytes += call_size(name)
        self._start_call(call_id, name, args, kwargs, sync)

    def _start_call(self, call_id: int, name: str, args: list[Any], kwargs: dict[str, Any], sync: bool) -> None:
        """Run a host call: a sync function right here, an async one in a task of its own."""
        function = self._system_function(name) if name.startswith(SYSTEM_PREFIX) else self._lookup.get(name) or self._callables.get(name)
        limit = self.limits.host_calls
        self._calls += 1
        if limit is not None and self._calls > limit:  # the worker stops a script first: this one ignored it
            raise ProtocolError(f"the worker made more than the host_calls limit of {amount('host_calls', limit)}")
        if function is None:
            self._reply(call_id, name, False, exception_payload(NameError(f'{name!r} is not a host function of this session')), sync)
            return
        if not name.startswith(SYSTEM_PREFIX):
            self._pool.observer.host_call(name)
        if self._traced:
            span = _tracer.start_span(f'call {name}', context=self._span_context)
            if span.is_recording():
                span.set_attributes({'function': name, 'args': bounded_repr(args, limit=1000), 'kwargs': bounded_repr(kwargs, limit=1000)})
            token = otel_context.attach(trace.set_span_in_context(span, self._span_context))
        else:  # the call still runs in the feed's context (a remote parent span, baggage)
            span = trace.INVALID_SPAN
            token = otel_context.attach(self._span_context or otel_context.Context())
        call = (call_id, name, args, kwargs, sync)
        try:
            try:
                result = function(*args, **kwargs)
            except (Exception, SystemExit, KeyboardInterrupt) as error:  # a host function's exit is the script's error
                self._call_failed(span, call, error)
                return
            if inspect.isawaitable(result):
                self._running.add(call_id)
                if isinstance(result, RemoteAnswer):  # answered by another process (`corral serve`'s client): taken as it settles
                    result.take_with(functools.partial(self._call_settled, call, span))
                    self._call_tasks.add(result)
                    return
                if isinstance(result, asyncio.Future):  # answered elsewhere: no task waits for it
                    waiter: asyncio.Future[Any] = result
                    result.add_done_callback(functools.partial(self._call_settled, call, span))
                else:
                    waiter = asyncio.get_running_loop().create_task(self._await_call(call, span, result), context=contextvars.copy_context())
                self._call_tasks.add(waiter)
                waiter.add_done_callback(self._call_tasks.discard)
                return
        finally:
            otel_context.detach(token)
        span.end()
        self._reply(call_id, name, True, result, sync)

    def _system_function(self, name: str) -> Callable[..., Any]:
        """A system call (files, environment, clock, seed): answered from the session's OsAccess."""
        system, operation = self._system, name[len(SYSTEM_PREFIX):]
        if system.os_access.threaded:  # its answers wait on this loop: the call waits in a thread

            async def threaded_call(*args: Any) -> Any:
                return await self._settled(await asyncio.get_running_loop().run_in_executor(None, system.call, operation, list(args)))

            return threaded_call

        def system_call(*args: Any) -> Any:
            reply = system.call(operation, list(args))
            return self._settled(reply) if reply[0] and inspect.isawaitable(reply[1]) else reply

        return system_call

    async def _settled(self, reply: list[Any]) -> list[Any]:
        """A system call's reply whose value an OsAccess gave as an awaitable (a sleep), awaited, but
        not past the feed's wall_time: a sleep cut there (`_SLEEP_MARGIN` later, when the worker's
        own timer has gone off) answers None, and the worker stops the script at the call (a wait in
        the host cannot be stopped in the worker)."""
        if not (reply[0] and inspect.isawaitable(reply[1])):
            return reply
        task = asyncio.ensure_future(reply[1])
        timeout = None if self._deadline is None else max(0.0, self._deadline + _SLEEP_MARGIN - asyncio.get_running_loop().time())
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if not done:
            task.cancel()
            return [True, None]
        return [True, task.result()]

    async def _await_call(self, call: tuple[int, str, list[Any], dict[str, Any], bool], span: trace.Span, awaitable: Any) -> None:
        try:
            result = await awaitable
        except (Exception, SystemExit, KeyboardInterrupt) as error:
            self._running.discard(call[0])
            if call[4] and type(error) is RuntimeError and isinstance(error.__cause__, StopIteration) and str(error) == 'coroutine raised StopIteration':
                error = error.__cause__  # a sync call the host answers by awaiting: PEP 479's wrapping is the host's, not the call's
            self._call_failed(span, call, error)
        else:
            self._running.discard(call[0])
            span.end()
            self._reply(call[0], call[1], True, result, call[4])

    def _call_settled(self, call: tuple[int, str, list[Any], dict[str, Any], bool], span: trace.Span, future: asyncio.Future[Any]) -> None:
        """A call whose function returned a future, settled: as `_await_call` ends (a cancelled one, as its task does)."""
        self._call_tasks.discard(future)
        if future.cancelled():
            return
        self._running.discard(call[0])
        error = future.exception()
        if error is not None:
            self._call_failed(span, call, error)
            return
        span.end()
        self._reply(call[0], call[1], True, future.result(), call[4])

    def _call_failed(self, span: trace.Span, call: tuple[int, str, list[Any], dict[str, Any], bool], error: BaseException) -> None:
        call_id, name, args, kwargs, sync = call
        if isinstance(error, Deferred):
            span.set_attribute('deferred', True)
            span.end()
            self._deferred[call_id] = PendingCall(call_id, name, args, kwargs, error.payload)
            self._check_pause()
            return
        span.record_exception(error)
        span.set_status(trace.Status(trace.StatusCode.ERROR, type(error).__name__))
        span.end()
        if isinstance(error, StopFeed):  # the feed ends at the call, with the host's error
            if self._stopping and not sync:  # a stop went to the worker already: the feed is ending
                return
            self._stopping = True
            head = [REPLY, call_id] if sync else [WAKE, 0.0, call_id]
            self._send_answer(call_id, pack([*head, False, [STOP, ['stopped', error.exc_type, error.message]]], side='host'), sync)
            return
        self._reply(call_id, name, False, exception_payload(error), sync)

    def _answer(
        self, call_id: int, name: str, ok: bool, value: Any, *, sync: bool, items: int | None = None, size: int | None = None
    ) -> bytes:
        """The payload answering call `call_id`: a REPLY (sync), or a WAKE whose seconds `_offer` fills in.

        A result (`ok`) is measured first (`values.measure`) against `items` and `size`; past the
        session's `value_items` or `value_size` it is answered with an `OverflowError`, a result
        that cannot cross with a `TypeError`. Raises `_LargeResult` when the result is larger
        than `items` or `size` but those are not the session's limits.
        """
        head = [REPLY, call_id] if sync else [WAKE, 0.0, call_id]
        try:
            if ok and fits(value, items, size):  # a small plain value: nothing to convert, no callable to give
                payload = pack([*head, True, value], side='host')
            else:
                with giving_callables(self._callables):  # a callable in the result: the script's to call
                    if ok:
                        measure(value, items=items, size=size, subject=f'the value {self._returned_by(name)}() returned', crossing='enter the sandbox', convert=host_default)
                    payload = pack([*head, ok, value], side='host')
            if len(payload) > MAX_FRAME:
                frame(payload)  # too large: its ProtocolError
        except ValueLimitError as error:
            if error.value != getattr(self.limits, error.limit):
                raise _LargeResult from None
            return self._answer(call_id, name, False, exception_payload(OverflowError(str(error))), sync=sync)
        except (TypeError, ValueError, RecursionError, ProtocolError) as error:
            if ok:
                error = TypeError(f'{self._returned_by(name)}() returned a value of type {describe_type(value)!r} that cannot enter the sandbox: {error}')
                return self._answer(call_id, name, False, exception_payload(error), sync=sync)
            payload = pack([*head, False, [value[0], [str(item) for item in value[1]]]], side='host')
        return payload

    def _returned_by(self, name: str) -> str:
        """How the host function of a call named `name` reads in an error about its result: a host
        object's member as `Counter.add`, else its last dotted part."""
        return self._callables.shown(name) or name.rpartition('.')[2]

    def _reply(self, call_id: int, name: str, ok: bool, value: Any, sync: bool) -> None:
        """Answer call `call_id` with a host function's result (`ok`) or error payload.

        A result of up to `_INLINE_ITEMS` items (and `_INLINE_FRAME` bytes) is measured and packed
        here, on the event loop; a larger one in the decoding thread (`_reply_large`), so that
        neither blocks the loop for long.
        """
        if not ok:
            self._send_answer(call_id, self._answer(call_id, name, False, value, sync=sync), sync)
            return
        limits = self.limits
        items, size = limits.value_items, limits.value_size
        if items is None or items > _INLINE_ITEMS:
            items = _INLINE_ITEMS
        if size is None or size > _INLINE_FRAME:
            size = _INLINE_FRAME
        try:
            payload = self._answer(call_id, name, True, value, sync=sync, items=items, size=size)
        except _LargeResult:
            self._running.add(call_id)  # in flight until it is packed: the feed does not pause meanwhile
            task = asyncio.get_running_loop().create_task(self._reply_large(call_id, name, value, sync))
            self._call_tasks.add(task)
            task.add_done_callback(self._call_tasks.discard)
            return
        self._send_answer(call_id, payload, sync)

    async def _reply_large(self, call_id: int, name: str, result: Any, sync: bool) -> None:
        limits = self.limits
        try:
            payload = await asyncio.get_running_loop().run_in_executor(
                _decoding_thread(), functools.partial(self._answer, call_id, name, True, result, sync=sync, items=limits.value_items, size=limits.value_size)
            )
        except Exception as error:  # a conversion of the host's (a model's `model_dump`) failed
            payload = self._answer(call_id, name, False, exception_payload(error), sync=sync)
        finally:
            self._running.discard(call_id)
        self._send_answer(call_id, payload, sync)

    def _send_answer(self, call_id: int, payload: bytes, sync: bool) -> None:
        """A sync call's REPLY goes to the worker now; an async call's answer waits for its WAIT."""
        if sync:
            if self._transport is not None and not self._transport.is_closing():
                self._deliver(call_id, payload)
            return
        self._answers.append((call_id, payload))
        self._offer()
        self._check_pause()

    # ----- what the worker takes in: answers to its CALLs and WAITs, journaled --------------------

    def _deliver(self, call_id: int, payload: bytes) -> None:
        """Send the worker the answer to its request (a REPLY to sync call `call_id`, or a WAKE
        when `call_id` is -1) and journal it."""
        record = self._record
        assert record is not None
        if self._quota is not None and self._over(input_size(payload), self._input_room):  # a stored session's state would pass its quota: stop the feed here
            payload = self._stop_payload(call_id)
        record.inputs.append([call_id, payload])
        self._journal_bytes += input_size(payload)
        if call_id >= 0:
            self._blocked = None
        else:
            self._waiting = None
            if self._tick is not None:
                self._tick.cancel()
                self._tick = None
        if self._transport is not None and not self._transport.is_closing():
            self._write(payload)

    def _on_wait(self, timeout: float | None) -> None:
        if self._replay is not None and (self._replay or not self._replay_final):
            self._serve_replay(-1)
            return
        self._waiting = (perf_counter(), timeout)
        if self.on_worker_waiting is not None:
            self.on_worker_waiting()
        if self._answers:
            self._offer()
            return
        self._check_pause()
        self._arm_tick()

    def _arm_tick(self) -> None:
        """Answer the worker's WAIT with its timer when no reply comes before it."""
        if self._waiting is not None and self._waiting[1] is not None and self._tick is None and not self._paused:
            since, timeout = self._waiting
            self._tick = asyncio.get_running_loop().call_later(max(0.0, since + timeout - perf_counter()), self._on_tick)

    def _offer(self) -> None:
        """Hand the waiting worker the first async answer, with the seconds its clock moves on."""
        if self._waiting is None or not self._answers or self._paused:
            return
        since, timeout = self._waiting
        seconds = perf_counter() - since
        if timeout is not None:
            seconds = min(seconds, timeout)
        _, payload = self._answers.popleft()
        self._deliver(-1, payload[:3] + _SECONDS.pack(seconds) + payload[11:])

    def _on_tick(self) -> None:
        """The worker's next timer is due and no answer came first."""
        self._tick = None
        if self._waiting is not None and not self._paused:
            self._deliver(-1, pack([WAKE, self._waiting[1], None, True, None], side='host'))

    def _check_pause(self) -> None:
        """Pause the feed when the worker waits on deferred calls only, and no other call is in flight."""
        if not self._deferred or self._running or self._paused or self._done is None or self._done.done() or self._stopping:
            return
        if self._blocked is not None:
            if self._blocked not in self._deferred:
                return
        elif self._waiting is None or self._answers:
            return
        if self._over(self._pause_bytes(), self._input_room):  # a stored session could not store the pause: stop the feed instead
            self._deliver(-1 if self._blocked is None else self._blocked, self._stop_payload(-1 if self._blocked is None else self._blocked))
            return
        self._paused = True
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        if self._transport is not None and not self._transport.is_closing():
            self._write(_PAUSE)
        self._done.set_exception(SandboxPaused([self._deferred[call_id] for call_id in sorted(self._deferred)]))

    # ----- dump and load -------------------------------------------------------------------------

    async def dump(self) -> bytes:
        """The session's state as signed bytes (awaited, as pydantic-monty's `dump` is), to load with `load_session` in any process that
        has a pool with the same state key and host functions (see the README, "Stored sessions").

        The state holds the journal of the session's feeds (their code and every value that came in
        from outside), the overlay writes of its mounts, its working folder, its random seed, and a paused feed's
        pending calls. Raises `RuntimeError` while a feed runs, `SandboxStateError` when the
        state is over the pool's `max_state_bytes`, or when a feed of this session was stopped by
        a time limit (wall_time, cpu_time) at a point no replay could reproduce.
        """
        return self._dump()

    def _dump(self) -> bytes:
        if self._done is not None:
            raise RuntimeError('cannot dump a session while a feed runs; await it first')
        if self._unreplayable is not None:
            raise SandboxStateError(f'this session cannot be dumped: {self._unreplayable}, so its state would not replay exactly')
        state = self._state()
        data = seal(state, self._pool._state_key(), quota=self._pool.max_state_bytes)
        if self._pool._checkpoints is not None:
            self._dumped = state_digest(state)  # closed as it is now, its worker is kept for a load of this state
            self._dumped_bytes = bytes_digest(data)
        return data

    def _state(self) -> SessionState:
        pending = []
        for call in (self._deferred[call_id] for call_id in sorted(self._deferred)):
            try:
                pending.append([call.call_id, call.function, pack(call.args, side='host'), pack(call.kwargs, side='host'), pack(call.payload, side='host')])
            except (TypeError, ValueError) as error:
                raise SandboxStateError(f'the payload of the Deferred raised by {_shown(call.function)}() cannot be stored: {error}') from None
        return SessionState(
            fingerprint=self._fingerprint(),
            seed=self._system.seed,
            script_name=self.script_name,
            feeds=list(self._journal),
            mounts=self._system.mounts(),
            overlay=self._system.overlay(),
            pending=pending,
            answers=[[call_id, payload] for call_id, payload in self._answers] if self._paused else [],
            blocked=self._blocked if self._paused and self._blocked is not None else -1,
            packages=list(self._pool.packages),
            answered=list(self._answered[0]),
            cwd=self._system.cwd,
            modules={name: [module.stubs, list(module.functions)] for name, module in self._modules.items()},
            type_check=self._type_check,
            door=self.door_state,
        )

    def _fingerprint(self) -> bytes:
        return fingerprint(self._stubs, {name: (module.stubs, list(module.functions)) for name, module in self._modules.items()})

    async def load_session(self, state: bytes, *, modules: OfferModules | None = None) -> None:
        """Load a state that `dump()` made into this freshly checked-out session.

        The session's feeds are replayed in its worker, their host calls answered from the state,
        so every variable, function, class and import comes back and no host function runs again.
        Give the new checkout the same `type_check_stubs`, `external_modules` and mounts (the
        overlay writes come from the state; read-only and read-write mounts must be given again).
        The session then type-checks its feeds as the dumped one did (`checkout(type_check=)`),
        shows its script name, and has its `door_state`.
        `modules`, for a caller that offers modules as scripts ask for them: awaited with the
        external modules the state was made with (`{name: (stubs, function names)}`, parents
        before their submodules), before the state is checked against this session's modules; it
        offers those this session lacks (`add_external_module`).
        A state of a paused session comes back paused: answer it with `resume()`. A state that a
        session of this pool gave out with `dump()` and closed right after, of the same tenant,
        starts from that session's worker instead (a live checkpoint: see `CheckpointLimits`).

        Raises `SandboxStateError` for a state that is oversized, not a state, truncated, altered
        or signed with another key, of another format version, made for other host functions or
        in a pool with a package this one lacks (`Pool(packages=...)`), missing a mount, or that
        does not replay as it ran; `RuntimeError` when this session has run feeds already.
        """
        self._check_usable()
        if self._journal or self._paused:
            raise RuntimeError('load_session needs a freshly checked-out session; this one has run feeds')
        checkpoints, kept = self._pool._checkpoints, None
        if checkpoints is not None and isinstance(state, (bytes, bytearray, memoryview)):  # the very bytes a dump of this pool gave out: its state, as sealed then
            kept = checkpoints.peek(self.tenant, None, bytes_digest(state))
        if modules is not None:
            await modules(state_modules(kept.state) if kept is not None else dumped_modules(state, self._pool._state_key(), quota=self._pool.max_state_bytes))  # type: ignore[arg-type]
        if kept is not None:
            opened = kept.held_state()
            check_fingerprint(opened, self._fingerprint())
            check_packages(opened, self._pool.packages)
        else:
            opened = open_state(state, self._pool._state_key(), quota=self._pool.max_state_bytes, expected=self._fingerprint(), packages=self._pool.packages)
        checkpoint = None
        if checkpoints is not None:
            checkpoint = checkpoints.take(self.tenant, None, kept.digest if kept is not None else state_digest(opened), (self.limits.memory, self.limits.cpu_time))
        await self._restore(opened, checkpoint)
        self._full_due = True
        await self._store_state()

    def _checkpoint(self) -> Checkpoint | None:
        """This closing session's worker as a live checkpoint, with a channel of its own (the
        transport closes this one), on a pool that keeps checkpoints: for a stored session between
        feeds whose state the store has whole, or one whose state `dump()` gave out; else None."""
        checkpoints, worker, lease = self._pool._checkpoints, self._worker, self._lease
        if (
            checkpoints is None
            or worker is None
            or not self._opened  # entered whole: a checkout that failed part way has no state to keep
            or self._pool._closed
            or self._dead is not None
            or self._done is not None
            or self._call_tasks
            or self._running
            or self._replaying is not None
            or (lease is None and self._dumped is None)
            or (lease is not None and (lease.lost is not None or self._stored != len(self._journal) or self._stored_open != self._paused))
            or not worker.idle()
        ):
            return None
        try:
            state = self._state()
        except SandboxStateError:
            return None
        digest = state_digest(state)
        if lease is None and digest != self._dumped:  # it ran feeds after its dump
            return None
        stored = None  # the digest of bytes that hold exactly this state, no feed open (see `_keep_stored`)
        if lease is None and not self._paused:  # the bytes of the dump, whose state this is: see above
            stored = self._dumped_bytes
        elif lease is not None and self._stored_bytes is not None and self._stored_state is not None and self._chain is not None and not self._stored_open:
            if state_digest(self._stored_state) == digest:
                stored = self._stored_bytes.digest(self._chain.generation)
        if stored is not None:  # a load takes the state as the bytes hold it: door_state as it reads back (a tuple a list), a copy
            try:
                state = dataclasses.replace(state, door=read_back(state.door))
            except (ValueError, TypeError):  # it does not read back (a map keyed by an int): a load checks the bytes, as without checkpoints
                stored = None
        sock = socket.socket(fileno=os.dup(worker.sock.fileno()))
        sock.setblocking(False)
        parked = WorkerProcess(worker.pidfd, sock)
        worker.pidfd = -1  # the checkpoint's now: killing the session's handle closes only its channel
        return Checkpoint(
            self.tenant,
            self.session_id if lease is not None else None,
            digest,
            (self.limits.memory, self.limits.cpu_time),
            parked,
            list(self._journal),
            list(self._context),
            self._next_call,
            self._journal_bytes,
            dict(self._asyncs),
            *((self._trace.copy(), self._calls, self._blocked, None if self._waiting is None else (self._waiting[1],)) if self._paused else ()),
            stored=stored,
            state=state if stored is not None else None,
            chain=dataclasses.replace(self._chain) if stored is not None and self._chain is not None else None,
        )

    async def _resume_checkpoint(self, checkpoint: Checkpoint, state: SessionState) -> None:
        """Run this session in the checkpoint's worker (a fresh worker it has goes), and take the
        host side of the checkpoint's session: what replaying `state` would rebuild."""
        if checkpoint.trace is not None:
            try:
                self._restore_pause(state)
            except (ValueError, TypeError) as error:
                checkpoint.worker.kill()
                raise SandboxStateError(f'the session state is malformed ({error})') from None
        transport, worker = self._transport, self._worker
        self._transport = self._worker = None  # the fresh worker's channel closing is no news of this session
        if transport is not None:
            transport.abort()
        if worker is not None:
            worker.kill()
        await self._start_worker(checkpoint.worker)
        self._journal, self._context = list(checkpoint.journal), list(checkpoint.context)
        self._next_call, self._journal_bytes, self._asyncs = checkpoint.next_call, checkpoint.journal_bytes, dict(checkpoint.asyncs)
        if checkpoint.trace is None:
            return
        open_feed = self._journal[-1]  # its own copy: this session's feed goes on
        self._record = self._journal[-1] = dataclasses.replace(open_feed, inputs=list(open_feed.inputs), calls=list(open_feed.calls))
        self._trace, self._calls, self._blocked = checkpoint.trace.copy(), checkpoint.calls, checkpoint.blocked
        self._waiting = None if checkpoint.waiting is None else (perf_counter(), checkpoint.waiting[0])
        self._paused = True

    async def _restore(self, state: SessionState, checkpoint: Checkpoint | None = None) -> None:
        """Make this fresh session the one `state` holds: its mounts checked, its overlay, seed and
        feeds (replayed, or taken from `checkpoint`, whose worker holds exactly this state: killed
        when the state does not fit this session)."""
        try:
            have = {path: mode for path, mode in self._system.mounts()}
            for path, mode in state.mounts:
                if have.get(path) != mode:
                    raise SandboxStateError(
                        f'the session state uses the {mode} mount at {path}, which this checkout does not have: '
                        f'pass checkout(mounts=Mount(<host folder>, {path!r}, mode={mode!r}))'
                    )
            try:
                self._system.restore_overlay(state.overlay)
                self._overlay = self._system.overlay()
                if state.cwd:
                    self._system.chdir(state.cwd)
                    self._cwd = self._system.cwd
            except (ValueError, TypeError) as error:
                raise SandboxStateError(f'the session state is malformed ({error})') from None
        except BaseException:
            if checkpoint is not None:
                checkpoint.worker.kill()
            raise
        self._system.seed = state.seed
        self.script_name = state.script_name
        if state.type_check is not None:
            self._type_check = state.type_check
        self.door_state = state.door
        self._answered = (list(state.answered), 'the feed that took them went on and did not end (a limit or a dead worker stopped it, or its host stopped)')
        if checkpoint is not None:
            await self._resume_checkpoint(checkpoint, state)
        else:
            await self._replay_state(state)

    async def _replay_state(self, state: SessionState) -> None:
        """Replay each feed of `state` in this session's worker, answering from its record.

        The worker gets each feed's messages (the host's compiled code of its script, if any, its
        FEED and the recorded answers) ahead of its turn, up to `_AHEAD_BYTES` bytes of feeds not
        yet checked, so it runs feed after feed without waiting for the host; a turn of the host's
        event loop compiles feeds ahead for `_AHEAD_SECONDS` at most. The host checks what
        each feed sends in its turn (`_Protocol` holds what the next feeds sent meanwhile). A feed
        whose answers all go with it (all but a paused one) is batched: the worker sends what it
        has to say once, when the feed ends.
        """
        feeds = []
        for recorded in state.feeds:
            try:
                message = unpack(recorded.feed)
                _, code, _, functions, modules, limits = message
                if not isinstance(limits, dict):
                    raise TypeError('the limits of a feed are not a mapping')
            except (ValueError, TypeError) as error:
                raise SandboxStateError(f'the session state is malformed ({error})') from None
            feeds.append((recorded, message, code, functions, modules))
        guarded = 'language' not in self._pool.skip_layers
        sent = sent_bytes = 0  # feeds whose messages went to the worker, and their bytes
        checked: deque[int] = deque()  # the bytes of each feed sent and not yet checked
        try:
            for index, (recorded, _, code, functions, modules) in enumerate(feeds):
                final = recorded.outcome == OPEN
                if final:
                    try:
                        self._restore_pause(state)
                    except (ValueError, TypeError) as error:
                        raise SandboxStateError(f'the session state is malformed ({error})') from None
                started = perf_counter()
                while sent < len(feeds) and (sent == index or (sent_bytes < _AHEAD_BYTES and perf_counter() - started < _AHEAD_SECONDS)):
                    ahead, ahead_message, ahead_code = feeds[sent][:3]
                    # no wall_time while it replays: the machine may be slower, and the feed did not
                    # run past it (a feed that did is not in a journal: see `_close_record`)
                    limits = {**ahead_message[5], 'replay': True, **({} if ahead.outcome == OPEN else {'batched': True})}
                    compiled = COMPILED_FEEDS.message(ahead_code, guarded=guarded, scope=self.tenant)
                    payloads = [*(() if compiled is None else (compiled,)), pack([*ahead_message[:5], limits], side='host'), *(payload for _, payload in ahead.inputs)]
                    assert self._transport is not None
                    self._transport.write(b''.join(map(frame, payloads)))  # the worker starts on it while the next compiles
                    checked.append(sum(map(len, payloads)))
                    sent_bytes += checked[-1]
                    sent += 1
                self._ahead = sent - index - 1
                self._replay, self._replaying, self._replay_final = deque(recorded.inputs), recorded, final
                self._print = _discard_output
                record = FeedRecord(recorded.feed, code, self._next_call)
                try:
                    await self._settle(self._run_feed(record, functions, modules, replay=True))
                    outcome = FEED_DONE
                except SandboxPaused:
                    outcome = OPEN
                except (SandboxRuntimeError, SandboxSyntaxError, SandboxLimitError) as error:
                    outcome = FAILED if record.outcome == FAILED else type(error).__name__
                except SandboxWorkerError as error:
                    self._kill(str(error))
                    raise SandboxStateError(f'the session state could not be replayed: feed {index + 1} did not run as recorded ({error})') from None
                finally:
                    self._replay = self._replaying = None
                sent_bytes -= checked.popleft()
                why = None
                if outcome != recorded.outcome:
                    why = f'it ended {outcome!r} where the record has {recorded.outcome!r}'
                elif outcome != OPEN and (record.trace != recorded.trace or record.calls != recorded.calls):
                    why = 'its host calls, waits, output or value differ from the record'
                if why is not None:
                    self._kill(why)
                    raise SandboxStateError(f'the session state could not be replayed: feed {index + 1} went another way than the recorded run: {why}')
        except BaseException:
            if self._ahead:  # the worker has feeds of a replay that stopped here: it is no use
                self._kill('its replay stopped with feeds sent ahead')
            raise
        finally:
            self._ahead = 0
        # what a paused feed prints after its resume goes where a feed's output goes by default
        # (or to resume's print_callback); the replay's output was printed when the feed first ran
        self._print = print_to_host

    def _restore_pause(self, state: SessionState) -> None:
        for call_id, function, args, kwargs, payload in state.pending:
            self._deferred[call_id] = PendingCall(call_id, function, unpack(args), unpack(kwargs), unpack(payload))
        self._answers = deque((call_id, payload) for call_id, payload in state.answers)
        if state.blocked >= 0 and state.blocked not in self._deferred:
            raise ValueError('the blocked call is not pending')

    def _serve_replay(self, call_id: int) -> None:
        """Check the worker's request (sync call `call_id`, or a WAIT when -1) against the record,
        whose answer went to the worker with the feed's FEED, and journal it."""
        if not self._replay:
            self._diverged(f'it asked for {"a reply to call " + str(call_id) if call_id >= 0 else "its next reply or timer"} past the end of the record')
            return
        recorded_id, payload = self._replay.popleft()
        if recorded_id != call_id:
            self._diverged(f'it asked for {"a reply to call " + str(call_id) if call_id >= 0 else "its next reply or timer"} where the record answers {"call " + str(recorded_id) if recorded_id >= 0 else "a wait"}')
            return
        record = self._record
        assert record is not None
        record.inputs.append([recorded_id, payload])  # sent with the FEED (see `_run_feed`)
        self._journal_bytes += input_size(payload)
        if call_id >= 0:
            self._blocked = None

    def _take_held(self) -> None:
        """Start a replayed feed, whose messages the worker has: take in what it sent meanwhile."""
        if self._transport is not None:
            protocol = self._transport.get_protocol()
            if isinstance(protocol, _Protocol):
                protocol.release()

    def _holding(self) -> bool:
        """Whether what the worker sends waits for the next replayed feed's turn: it has that
        feed's messages, and the host is between feeds."""
        return self._ahead > 0 and (self._done is None or self._done.done())

    def _diverged(self, why: str) -> None:
        self._kill(f'its replay went another way than the recorded run: {why}')
        self._fail(SandboxStateError(f'the session state could not be replayed: feed {len(self._journal)} went another way than the recorded run: {why}'))

    async def _store_state(self, state: SessionState | None = None) -> None:
        """Write a stored session's state (or `state`) to the pool's store (nothing for an ephemeral session):
        a record of what changed since the last write, appended (its cost is the feed's), or the
        full state when there is none yet, the session loaded another, or the records appended
        since the last full state outgrow it (`_COMPACT_BYTES`, `_COMPACT_RECORDS`): so a write
        costs the feed's size, and the full state's now and then (amortized, twice the feed's)."""
        lease = self._lease
        if lease is None or self.session_id is None or self._replaying is not None:
            return
        if lease.lost is not None:
            raise SandboxStateError(f'the session {self.session_id} was not stored: its lease was lost ({lease.lost})')
        if self._done is not None:
            raise RuntimeError('cannot store a session while a feed runs')
        state = self._state() if state is None else state
        chain, key = self._chain, self._pool._state_key()
        generation = 1 if chain is None else chain.generation + 1
        binding = Binding(self.tenant, self.session_id, generation)
        if chain is not None and not self._full_due:
            start = self._stored - 1 if self._stored_open else self._stored
            changed = state.fingerprint != self._stored_fingerprint  # a module offered since (add_external_module)
            record = StateRecord(
                start, state.feeds[start:], overlay_changes(self._stored_overlay, state.overlay), state.pending, state.answers, state.blocked, state.packages,
                state.answered, state.cwd, state.door, state.modules if changed else None, state.fingerprint if changed else None,
            )
            data = seal_record(record, key, binding=binding, previous=chain.mac)
            compact_at = max(chain.state_bytes, min(_COMPACT_BYTES, self._pool.max_state_bytes // 2))  # records never pass the quota
            if chain.records < _COMPACT_RECORDS and chain.record_bytes + len(data) <= compact_at:
                await lease.store.append(self.session_id, data, holder=lease.holder, generation=generation, tenant=self.tenant)
                chain.generation, chain.mac = generation, mac_of(data)
                if self._stored_bytes is not None:
                    self._stored_bytes.append(data)
                chain.record_bytes += len(data)
                chain.records += 1
                self._stored_done(state, record)
                return
        data = seal(state, key, quota=self._pool.max_state_bytes, binding=binding)
        await lease.put(data, generation=generation)
        self._chain = Chain(generation, mac_of(data), len(data))
        if self._pool._checkpoints is not None:
            self._stored_bytes = StoredBytes(data)
        self._full_due = False
        self._stored_done(state)

    def _stored_done(self, state: SessionState, record: StateRecord | None = None) -> None:
        self._stored, self._stored_open, self._stored_overlay = len(state.feeds), bool(state.feeds) and state.feeds[-1].outcome == OPEN, state.overlay
        self._stored_fingerprint = state.fingerprint
        self._keep_stored(state, record)

    def _keep_stored(self, state: SessionState, record: StateRecord | None = None) -> None:
        """On a pool that keeps checkpoints, keep what the store now holds, to tell at close
        whether the session still has exactly that state (`_checkpoint`): `state`, written whole, or
        `record` appended to the state kept before, as a reader of the rows gets it (a record does not
        carry the mounts, seed, script name or type check: a checkout given another mount holds one
        the rows do not). Its `door` is copied: it is `door_state`'s own map, which may change in
        place; the rest of a state is not changed after it is made, but for an open feed's record
        (then no closing state is taken as the store's)."""
        if self._pool._checkpoints is None:
            return
        if record is not None:
            if self._stored_state is None:
                return
            state = dataclasses.replace(self._stored_state, feeds=list(self._stored_state.feeds))
            try:
                record.apply(state)
            except ValueError:  # in memory, a shape the rows would not have: no state is taken as theirs
                self._stored_state = None
                return
        self._stored_state = dataclasses.replace(state, door=copy.deepcopy(state.door))

    async def _store_answered(self, call_ids: list[int]) -> None:
        """Before the answers to `call_ids` reach a paused stored session's worker: store its state
        without the paused feed, naming every call of the feed answered so far (`SessionState.answered`).

        From here the store holds the session either as it was before the feed (with these calls
        answered for good: a stop, or a host that stops, leaves it there) or, once the feed
        pauses again or ends, with the whole feed: never paused on a call already answered.
        Raises what the store raises; nothing reached the worker then.
        """
        if self._lease is None or self._replaying is not None or not call_ids:  # no answer: the feed pauses again as it is
            return
        state = self._state()
        state.feeds.pop()  # the paused feed, and its files (as `_roll_back` leaves them)
        state.overlay, state.pending, state.answers, state.blocked, state.answered = self._overlay, [], [], -1, [*self._resumed, *call_ids]
        state.cwd = self._cwd
        await self._store_state(state)
        self._resumed = state.answered

    # ----- a stored session's size ---------------------------------------------------------------

    def _over(self, growth: int, room: int) -> bool:
        """Whether `growth` more bytes would take a stored session's state past `room` (its quota
        less what is kept for later: `_room`, `_input_room`); always False for an ephemeral session.

        A new script may use the room up to `_room`; what comes in while a script runs, up to
        `_input_room`, so that after a stop short scripts still run (reading what the stopped one
        left); the overlay, up to `_OVERLAY_MARGIN` less, so that its ENOSPC error can come in."""
        return self._quota is not None and self._fixed_bytes + self._journal_bytes + self._system.overlay_bytes + growth > room

    def _overlay_room(self) -> tuple[int, str]:
        """What a stored session's overlay may hold: `SystemCalls.room`."""
        room = self._input_room - min(_OVERLAY_MARGIN, self._quota // 64) - self._fixed_bytes - self._journal_bytes  # type: ignore[operator]
        if room >= OVERLAY_LIMIT:
            return OVERLAY_LIMIT, f"the session's files hold at most {OVERLAY_LIMIT} bytes"
        return room, f"the session's stored state would grow past the max_state_bytes limit of {self._quota} bytes (Pool(max_state_bytes=...))"

    def _pause_bytes(self) -> int:
        """Bytes at most a pause adds to the stored state: its deferred calls and the answers not yet taken in."""
        if self._quota is None:
            return 0
        size = sum(input_size(payload) for _, payload in self._answers)
        for call in self._deferred.values():
            try:
                size += len(call.function) + sum(len(pack(part, side='host')) for part in (call.args, call.kwargs, call.payload)) + 64
            except (TypeError, ValueError):
                pass  # refused when the state is written, naming the call
        return size

    def _stop_payload(self, call_id: int) -> bytes:
        """The answer to the worker's request (a sync call `call_id`, or a WAIT when -1) that stops
        the feed for the max_state_bytes limit."""
        self._stopping = True
        if call_id >= 0:
            return pack([REPLY, call_id, False, _STOP_VALUE], side='host')
        return pack([WAKE, 0.0, None, False, _STOP_VALUE], side='host')


#: A stored session's state keeps this many bytes (or a quarter of its quota, if less) for what
#: comes in after a stop for max_state_bytes: the stop itself, and the calls the worker made
#: before it took the stop in (at most `Limits.host_calls`, each its name's bytes).
_RESERVE = 256 * 1024
#: ... and this many (or a sixteenth of its quota) for short scripts after a stop.
_HEADROOM = 64 * 1024
#: ... and its overlay this many less (or a 64th of its quota), for the ENOSPC errors of writes past it.
_OVERLAY_MARGIN = 4 * 1024
_STOP_VALUE = [STOP, ['max_state_bytes']]
#: A stored session writes its full state again when the records appended since the last one hold
#: more bytes than it (and than this, or half its quota if less), or there are this many of them.
_COMPACT_BYTES = 256 * 1024
_COMPACT_RECORDS = 256


#: Limits that stop a script at a point no replay reproduces (time, not the script's own steps).
_TIMED = frozenset({'wall_time', 'cpu_time'})
#: How long after the feed's wall_time a sleep in the host is cut short (seconds).
_SLEEP_MARGIN = 0.1
_SECONDS = struct.Struct('>d')  # the seconds of a WAKE, at bytes 3-10 of its payload (after 0x95 0x09 0xcb)
_PAUSE = pack([PAUSE], side='host')
_ADDRESS = re.compile(rb'0x[0-9a-fA-F]+')
_EMPTY_WAKE = pack([WAKE, 0.0, None, True, None], side='host')


def _discard_output(stream: str, text: str) -> None:
    """A replay's prints: the user saw them when the feed first ran."""


def _shown(name: str) -> str:
    return name.replace(SYSTEM_PREFIX, '')


def _checked_lookup(external_lookup: Mapping[str, Callable[..., Any]] | None) -> dict[str, Callable[..., Any]]:
    lookup = dict(external_lookup or {})
    for name, function in lookup.items():
        if not callable(function):
            raise TypeError(f'external_lookup[{name!r}] is not callable: {type(function).__name__}')
    return lookup


class _LargeResult(Exception):
    """A host function's result is too large to measure and pack on the event loop."""


#: The first character of a system call's name (`corral.language.hostio.PREFIX`).
SYSTEM_PREFIX = '\x00'
#: The one system call the worker awaits (the others block it): `asyncio.sleep`'s.
_ASYNC_SLEEP = SYSTEM_PREFIX + 'clock.async_sleep'


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


def _is_detail(detail: Any) -> bool:
    """Whether a FAIL's `detail` is None or `[module, fields]`: a str, and None or a dict of str
    to str, bytes or int (see `SandboxRuntimeError`)."""
    if detail is None:
        return True
    if not (isinstance(detail, list) and len(detail) == 2 and isinstance(detail[0], str)):
        return False
    fields = detail[1]
    return fields is None or (
        isinstance(fields, dict) and all(isinstance(k, str) and type(v) in (str, bytes, int) for k, v in fields.items())
    )


def _shape(message: list[Any], length: int) -> list[Any]:
    if len(message) != length:
        raise ProtocolError(f'message of kind {message[0]!r} has {len(message)} items, expected {length}')
    return message


class _Protocol(asyncio.Protocol):
    """Reads frames from a worker's channel and hands decoded messages to its session, in order.

    Each message is decoded against the session's `value_items` and `value_size` limits (with
    room for the message's own fields; the size with a factor of 2, as a worker's objects may
    take less room than the host's copies). A frame of up to `_INLINE_FRAME` bytes is decoded as
    it arrives. A larger one is decoded in the decoding thread, a step at a time, while the event
    loop goes on: reading from the worker pauses until it is done, and frames that arrived with it
    wait their turn. In a replay, what the worker sends for a feed whose messages went ahead of its
    turn waits, reading paused, until that feed's turn (`release`).

    Once the session has moved on to another worker (a stored session rolled back after a stop),
    the old channel's last events, and messages of it still being decoded, are ignored.
    """

    def __init__(self, session: Session) -> None:
        self._session = session
        self._reader = FrameReader()
        self._transport: asyncio.Transport | None = None
        self._backlog: deque[bytes] | None = None  # frames behind one being decoded in the thread
        self._lost = False  # the channel closed while frames waited
        self._decoding: asyncio.Task[None] | None = None
        self._held = False  # frames wait in the backlog for the next replayed feed's turn, reading paused

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def _current(self) -> bool:
        """Whether this channel is still the session's (not one it left behind in a rollback)."""
        return self._session._transport is self._transport

    def data_received(self, data: bytes) -> None:
        if self._session._transport is not self._transport:  # `_current`, inline: per frame
            return
        self._session._heard = perf_counter()
        try:
            payloads = self._reader.feed(data)
        except ProtocolError as error:
            self._broken(error)
            return
        if self._backlog is not None:
            self._backlog.extend(payloads)
            return
        self._backlog = deque(payloads)
        self._drain()

    def _drain(self) -> None:
        """Handle the waiting frames until one must be decoded in the thread, or none is left."""
        backlog = self._backlog
        assert backlog is not None
        session = self._session
        while backlog:
            if session._ahead and session._holding():  # the next replayed feed's, before its turn: see `release`
                assert self._transport is not None
                self._transport.pause_reading()  # no more than what was read comes in meanwhile
                self._held = True
                return
            payload = backlog.popleft()
            if len(payload) > _INLINE_FRAME:
                assert self._transport is not None
                self._transport.pause_reading()
                self._decoding = asyncio.get_running_loop().create_task(self._decode_in_thread(payload))
                return
            try:
                items, size = self._bounds(len(payload))
                message = unpack(payload, items=items, size=size, callables=self._session._callables)
            except Exception as error:
                self._broken(error)
                return
            if not self._deliver(message):
                return
        self._backlog = None
        if self._lost and self._session._dead is None and self._current():
            self._session._on_broken('the worker process exited')

    def release(self) -> None:
        """Take in the frames a replay held back (see `Session._holding`), now the feed they belong to runs."""
        if not self._held or not self._current():
            return
        self._held = False
        assert self._transport is not None
        if not self._transport.is_closing():
            self._transport.resume_reading()
        if self._backlog is not None and self._decoding is None:
            self._drain()

    async def _decode_in_thread(self, payload: bytes) -> None:
        items, size = self._bounds(len(payload))
        decoder = Decoder(items=items, size=size, callables=self._session._callables)
        try:
            message = await asyncio.get_running_loop().run_in_executor(_decoding_thread(), decoder.decode_in_steps, payload)
        except Exception as error:
            self._broken(error)
            return
        finally:
            self._decoding = None
        if not self._deliver(message):
            return
        if self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()
        self._drain()

    def _bounds(self, length: int) -> tuple[int | None, int | None]:
        """The items and the bytes a frame of `length` bytes may decode to (see `values.Decoder`)."""
        limits = self._session.limits
        items = None if limits.value_items is None else limits.value_items + _ENVELOPE_ITEMS
        size = None if limits.value_size is None else 2 * limits.value_size + length
        return items, size

    def _deliver(self, message: Any) -> bool:
        """Hand a message to the session; False when it broke the channel's rules, or when the
        session was killed or moved on to another worker while the message was decoded."""
        session = self._session
        if session._dead is not None or session._transport is not self._transport:  # killed, or not `_current`
            self._backlog = None
            return False
        try:
            self._session._on_message(message)
        except Exception as error:
            self._broken(error)
            return False
        return True

    def _broken(self, error: Exception) -> None:
        """Anything a worker sends is untrusted: a bad frame ends it."""
        self._backlog = None
        if self._current():
            self._session._on_broken(f'it sent a malformed message ({type(error).__name__}: {error})')

    def connection_lost(self, exc: Exception | None) -> None:
        if self._backlog is not None:  # the frames before the end come first
            self._lost = True
        elif self._session._dead is None and self._current():
            self._session._on_broken('the worker process exited')


_decoder_executor: concurrent.futures.ThreadPoolExecutor | None = None


def _decoding_thread() -> concurrent.futures.ThreadPoolExecutor:
    """The one thread that decodes large frames of every session (made when first needed).

    One thread, so that the event loop's thread shares the GIL with at most one other: the
    decoding steps (`values.Decoder.decode_in_steps`) hand it back at Python's switch interval.
    """
    global _decoder_executor
    if _decoder_executor is None:
        _decoder_executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix='corral-decode')
    return _decoder_executor
