"""A session's state given out and taken up: `dump`, `load_session`, the live checkpoint a closing
session leaves, a checkpoint resumed, and the replay of a journal in a fresh worker."""

from __future__ import annotations

import dataclasses
import os
import socket
from collections import deque
from time import perf_counter
from typing import TYPE_CHECKING

from ..channel import frame
from ..errors import SandboxLimitError, SandboxRuntimeError, SandboxStateError, SandboxSyntaxError, SandboxWorkerError
from ..values import pack, unpack
from .channel import _Protocol, print_to_host
from .checkpoints import Checkpoint, bytes_digest, state_digest
from .compiled import COMPILED_FEEDS
from .deferred import PendingCall, SandboxPaused
from .host_calls import _shown
from .journal import DONE as FEED_DONE
from .journal import (
    FAILED,
    OPEN,
    FeedRecord,
    SessionState,
    check_fingerprint,
    check_packages,
    dumped_modules,
    fingerprint,
    input_size,
    open_state,
    read_back,
    seal,
    state_modules,
)
from .workers import WorkerProcess

if TYPE_CHECKING:
    from .session import OfferModules

#: Bytes of a replay's feeds its worker may have ahead of the one the host checks, and seconds the
#: host's event loop spends compiling feeds ahead in one turn (see `Session._replay_state`).
_AHEAD_BYTES = 1 << 20
_AHEAD_SECONDS = 0.01


class DumpAndReplay:
    """The part of `Session` that makes its state (`_state`) and takes one up (`_restore`).

    It uses the whole of the session's state: its journal (`_journal`, `_context`,
    `_next_call`, `_journal_bytes`, `_asyncs`, `_trace`, `_calls`), its paused feed's
    (`_deferred`, `_answers`, `_blocked`, `_waiting`, `_paused`, `_answered`), `_system`,
    `_modules`, `_stubs`, `script_name`, `door_state`, `tenant`, the stored session's
    (`_lease`, `_chain`, `_stored*`), its worker and channel, and a replay's own (`_replay`,
    `_replaying`, `_replay_final`, `_ahead`).
    """

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
                writing: list[bytes] = []  # frames of feeds whose code the host had compiled, to go in one write
                while sent < len(feeds) and (sent == index or (sent_bytes < _AHEAD_BYTES and perf_counter() - started < _AHEAD_SECONDS)):
                    ahead, ahead_message, ahead_code = feeds[sent][:3]
                    # no wall_time while it replays: the machine may be slower, and the feed did not
                    # run past it (a feed that did is not in a journal: see `_close_record`)
                    limits = {**ahead_message[5], 'replay': True, **({} if ahead.outcome == OPEN else {'batched': True})}
                    misses = COMPILED_FEEDS.misses
                    compiled = COMPILED_FEEDS.message(ahead_code, guarded=guarded, scope=self.tenant)
                    payloads = [*(() if compiled is None else (compiled,)), pack([*ahead_message[:5], limits], side='host'), *(payload for _, payload in ahead.inputs)]
                    writing.extend(map(frame, payloads))
                    if COMPILED_FEEDS.misses != misses:  # it compiled: the worker starts on what it has while the next compiles
                        self._write_all(writing)
                    checked.append(sum(map(len, payloads)))
                    sent_bytes += checked[-1]
                    sent += 1
                self._write_all(writing)
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

    def _write_all(self, frames: list[bytes]) -> None:
        """Write `frames` to the worker in one write, and empty the list."""
        if frames:
            assert self._transport is not None
            self._transport.write(b''.join(frames))
            frames.clear()

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


def _discard_output(stream: str, text: str) -> None:
    """A replay's prints: the user saw them when the feed first ran."""
