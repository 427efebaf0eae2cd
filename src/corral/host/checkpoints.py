"""Live checkpoints: a session's worker kept alive after the session closed, so that the next
load of its exact state on this pool starts from it instead of replaying the journal.

Two kinds of session leave one: a stored session (the store has its state whole), and a session
whose state `dump()` gave out and that ran nothing since; either between feeds, or paused on
deferred calls (its worker waits in the feed, and `resume()` goes on from there).

A checkpoint is the closed session's own worker, parked as it was: locked down as ever, its
channel idle, the tasks the session keeps between feeds still waiting in it where they waited
(with no host call unanswered: a feed takes in the answers to its tasks' calls before it ends),
just as a replay rebuilds them. A stored session's is taken only by a checkout of the same tenant and
session id (to go on with the session, or to fork it: `fork=True` starts the new session from
the source's worker, which then replays next time); a dumped session's only by a
`load_session()` of the same tenant given that state. Either way the state, read from the store
or the bytes given and verified as always, must have the exact digest the session had when it
closed (`state_digest`), and the worker rlimits (`Limits.memory`, `Limits.cpu_time`) must be
the same. A state that moved on elsewhere (another process fed the session), a missing
checkpoint (another host, a restart, evicted) or any mismatch replays the journal as without
checkpoints, to the same session: the journal stays the truth, and a checkpoint is a cache in
front of it, used once.

A checkpoint between feeds also knows the digest of the bytes that hold its state: a stored
session's rows as the store held them when it closed (`StoredBytes`: its full state and records,
as this process wrote or read them; only when its state is exactly the one they hold, taken as a
reader of them gets it: a record applied to the state before it, `door_state` as it reads back), or the
bytes a dumped session's `dump()` gave out (`bytes_digest`). A load of the very same bytes (their
digest is kept in this process's memory only, so no store or caller can forge it) takes the
checkpoint's state as it is, without checking and decoding the signed bytes again; any other
bytes, a record altered, replaced or added, are checked as without checkpoints and refused or
replayed as then.

No process is forked for it, so no lockdown layer changes: the worker's seccomp filter still
refuses every fork and clone.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import hashlib
import hmac
from collections import OrderedDict
from dataclasses import dataclass, field
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import msgpack

from ..store.base import StoredState
from .journal import Chain, FeedRecord, SessionState
from .workers import WorkerProcess

if TYPE_CHECKING:
    from .observer import PoolObserver

__all__ = ['CheckpointLimits', 'Checkpoint', 'Checkpoints', 'StoredBytes', 'bytes_digest', 'state_digest']


@dataclass(frozen=True)
class CheckpointLimits:
    """How many checkpoints a pool keeps, and how much memory they may hold (`Pool(checkpoints=...)`).

    - `count`, `memory`: at most this many checkpoints, holding at most this many bytes (the
      private memory of their workers, from `/proc/<pid>/smaps_rollup`; see `private_memory`), in the whole pool;
    - `tenant_count`, `tenant_memory`: the same, for the checkpoints of one tenant.

    Past a bound the least recently kept checkpoints go first (their workers are killed). A
    checkpoint larger than `tenant_memory` (or `memory`) is not kept. Raises `ValueError` for a bound that is
    not a positive int.
    """

    count: int = 16
    memory: int = 512 << 20
    tenant_count: int = 4
    tenant_memory: int = 128 << 20

    def __post_init__(self) -> None:
        for name in ('count', 'memory', 'tenant_count', 'tenant_memory'):
            value = getattr(self, name)
            if type(value) is not int or value <= 0:
                raise ValueError(f'CheckpointLimits.{name} must be a positive int, not {value!r}')


@dataclass
class Checkpoint:
    """A parked worker and what its session's host side knew of it (the journal replay would rebuild)."""

    tenant: str
    session_id: str | None  # None: a dumped session's, found by its digest
    digest: bytes
    rlimits: tuple[int | None, int | None]
    worker: WorkerProcess
    journal: list[FeedRecord]
    context: list[str]
    next_call: int
    journal_bytes: int
    asyncs: dict[str, bool]
    #: Of a paused session: the open feed's trace so far (a `hashlib.blake2b`), its host calls,
    #: the sync call its worker waits on, and `(timeout,)` of the WAIT it asked; else None.
    trace: Any = None
    calls: int = 0
    blocked: int | None = None
    waiting: tuple[float | None] | None = None
    memory: int = field(default=0)
    #: Of a session between feeds whose state is exactly what bytes outside it hold: the digest
    #: of those bytes (a stored session's rows, `StoredBytes.digest`; the bytes `dump()` gave
    #: out, `bytes_digest`), that state, and of a stored session the `Chain` its next write continues.
    stored: bytes | None = None
    state: SessionState | None = None
    chain: Chain | None = None

    def held_state(self) -> SessionState:
        """`state`, with a `door` of its own: a load that takes it (or replays it, when another
        load took the checkpoint meanwhile) may change its `door_state` in place."""
        assert self.state is not None
        return dataclasses.replace(self.state, door=copy.deepcopy(self.state.door))


def state_digest(state: SessionState) -> bytes:
    """A digest of everything in `state` (32 bytes of BLAKE2b): the same for the state a session
    held when it closed and the same state read back from the store or the bytes. The overlay is
    the one map whose keys come from outside (paths): it is taken in key order."""
    plain = state.to_plain()
    plain['overlay'] = _canonical(plain['overlay'])
    return hashlib.blake2b(msgpack.packb(plain, use_bin_type=True), digest_size=32).digest()


def _canonical(value: Any) -> Any:
    if isinstance(value, dict):
        return [[key, _canonical(item)] for key, item in sorted(value.items())]
    if isinstance(value, (list, tuple)):
        return [_canonical(item) for item in value]
    return value


def bytes_digest(data: bytes) -> bytes:
    """The digest (BLAKE2b, 32 bytes) of the bytes `dump()` gave out."""
    return hashlib.blake2b(data, digest_size=32).digest()


class StoredBytes:
    """A running digest (BLAKE2b, 32 bytes) of what a store holds for one session: its full state,
    then each record appended to it, each after its length, and (`digest`) the generation. Two
    equal digests mean byte for byte the same stored session."""

    __slots__ = ('_hash',)

    def __init__(self, state: bytes) -> None:
        self._hash = hashlib.blake2b(digest_size=32)
        self.append(state)

    @classmethod
    def of(cls, stored: StoredState) -> StoredBytes:
        """The running digest of what a store's `get` returned."""
        running = cls(stored.state)
        for record in stored.records:
            running.append(record)
        return running

    def append(self, record: bytes) -> None:
        """Count a record appended to the stored state."""
        self._hash.update(len(record).to_bytes(8, 'big'))
        self._hash.update(record)

    def digest(self, generation: int) -> bytes:
        """The digest of the bytes counted so far, stored at `generation`."""
        final = self._hash.copy()
        final.update(generation.to_bytes(8, 'big'))
        return final.digest()


def private_memory(pid: int | None) -> int | None:
    """Bytes of memory process `pid` holds alone: Private_Clean + Private_Dirty of
    `/proc/<pid>/smaps_rollup`, or, where the kernel refuses that file (a host that is not root
    may not read it of a worker, which is not dumpable: proc(5), "ptrace access mode"), the
    `RssAnon` of `/proc/<pid>/status`, every anonymous page it maps, an upper bound of the
    same. None when neither can be read (the process is gone)."""
    try:
        with open(f'/proc/{pid}/smaps_rollup', 'rb') as rollup:
            text = rollup.read()
        fields: tuple[bytes, ...] = (b'Private_Clean:', b'Private_Dirty:')
    except PermissionError:
        try:
            with open(f'/proc/{pid}/status', 'rb') as status:
                text = status.read()
        except OSError:
            return None
        fields = (b'RssAnon:',)
    except OSError:
        return None
    total = 0
    for line in text.splitlines():
        if line.startswith(fields):
            total += int(line.split()[1]) * 1024
    return total


class Checkpoints:
    """The checkpoints of one pool, least recently kept first, bounded by `CheckpointLimits`.

    At most one per tenant and stored session (keeping a newer one kills the older), or per tenant
    and state of a dumped session. `observer` hears of each change
    (`PoolObserver.checkpoints_changed`, `checkpoint_taken`).
    """

    def __init__(self, limits: CheckpointLimits, observer: PoolObserver) -> None:
        self.limits = limits
        self._observer = observer
        self._kept: OrderedDict[tuple[str, str | bytes], Checkpoint] = OrderedDict()
        self.memory = 0
        self._closed = False

    def __len__(self) -> int:
        return len(self._kept)

    async def keep(self, checkpoint: Checkpoint) -> bool:
        """Keep `checkpoint`, evicting the least recently kept past the bounds; False (its worker
        killed) when it alone is over a tenant's memory, its memory cannot be read, or the pool
        closed meanwhile. The memory is read in a thread: the kernel takes a millisecond or more
        to sum a process's pages."""
        try:
            memory = await asyncio.get_running_loop().run_in_executor(None, private_memory, checkpoint.worker.pid)
        except BaseException:
            checkpoint.worker.kill()
            raise
        key = _key(checkpoint.tenant, checkpoint.session_id, checkpoint.digest)
        self._drop(key)
        if self._closed or memory is None or memory > min(self.limits.tenant_memory, self.limits.memory):
            checkpoint.worker.kill()
            self._changed()
            return False
        checkpoint.memory = memory
        self._kept[key] = checkpoint
        self.memory += memory
        limits = self.limits
        while True:  # the new checkpoint is the tenant's last and fits alone: it stays
            tenant = [key for key in self._kept if key[0] == checkpoint.tenant]
            if len(tenant) <= limits.tenant_count and sum(self._kept[key].memory for key in tenant) <= limits.tenant_memory:
                break
            self._drop(tenant[0])
        while len(self._kept) > limits.count or self.memory > limits.memory:
            self._drop(next(iter(self._kept)))
        self._changed()
        return True

    def take(self, tenant: str, session_id: str | None, digest: bytes, rlimits: tuple[int | None, int | None]) -> Checkpoint | None:
        """The checkpoint of this stored session (`session_id`), or of this dumped state (None),
        removed from the pool, when it holds exactly the state of `digest` under the same rlimits
        and its worker is alive and idle; else None (a checkpoint of the session that does not
        match is killed: its state is not the session's any more)."""
        checkpoint = self._kept.pop(_key(tenant, session_id, digest), None)
        if checkpoint is None:
            self._observer.checkpoint_taken(False)
            return None
        self.memory -= checkpoint.memory
        usable = checkpoint.digest == digest and checkpoint.rlimits == rlimits and checkpoint.worker.idle()
        if not usable:
            checkpoint.worker.kill()
            checkpoint = None
        self._changed()
        self._observer.checkpoint_taken(checkpoint is not None)
        return checkpoint

    def peek(self, tenant: str, session_id: str | None, stored: bytes) -> Checkpoint | None:
        """The checkpoint of this stored session (`session_id`), or of a dumped state (None), left
        in place, when it was kept with its state as the bytes of digest `stored` hold it (a
        `StoredBytes.digest` of the store's rows; a `bytes_digest` of what `dump()` gave out);
        else None. `take` it once its state is found to fit the load."""
        if session_id is not None:
            found = [self._kept.get((tenant, session_id))]
        else:  # kept by their state's digest: a few to look through
            found = [checkpoint for checkpoint in self._kept.values() if checkpoint.session_id is None and checkpoint.tenant == tenant]
        for checkpoint in found:
            if checkpoint is not None and checkpoint.stored is not None and hmac.compare_digest(checkpoint.stored, stored):
                return checkpoint
        return None

    def discard(self, sessions: Iterable[tuple[str, str]]) -> None:
        """Kill the checkpoints of these `(tenant, session_id)` stored sessions (deleted: their
        state is gone from the store, and goes from this host too)."""
        for tenant, session_id in sessions:
            self._drop((tenant, session_id))
        self._changed()

    def close(self) -> None:
        """Kill every checkpoint's worker, and keep none from now on."""
        self._closed = True
        for key in list(self._kept):
            self._drop(key)
        self._changed()

    def _drop(self, key: tuple[str, str | bytes]) -> None:
        checkpoint = self._kept.pop(key, None)
        if checkpoint is not None:
            self.memory -= checkpoint.memory
            checkpoint.worker.kill()

    def _changed(self) -> None:
        self._observer.checkpoints_changed(len(self._kept), self.memory)


def _key(tenant: str, session_id: str | None, digest: bytes) -> tuple[str, str | bytes]:
    return (tenant, digest if session_id is None else session_id)
