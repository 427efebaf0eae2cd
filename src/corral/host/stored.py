"""A stored session's writes of its state to the pool's store, and the size of that state, counted
as it grows against `Pool(max_state_bytes)`."""

from __future__ import annotations

import copy
import dataclasses

from ..channel import REPLY, STOP, WAKE
from ..errors import SandboxStateError
from ..values import pack
from .checkpoints import StoredBytes
from .journal import OPEN, Binding, Chain, SessionState, StateRecord, input_size, mac_of, overlay_changes, seal, seal_record
from .os_access import OVERLAY_LIMIT

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


class StoredState:
    """The part of `Session` that keeps a stored session's store up to date and its state within
    its quota.

    It uses the stored session's lease and what the store has (`_lease`, `session_id`,
    `tenant`, `_chain`, `_full_due`, `_stored`, `_stored_open`, `_stored_overlay`,
    `_stored_fingerprint`, `_stored_bytes`, `_stored_state`), its size and quota (`_quota`,
    `_fixed_bytes`, `_journal_bytes`, `_input_room`, `_system`'s overlay), a paused feed's
    (`_deferred`, `_answers`, `_resumed`, `_overlay`, `_cwd`) and `_stopping`.
    """

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
