"""A session's journal, and the signed envelope a dumped session travels in.

A session is rebuilt, not copied: its journal holds each feed's FEED message and every message
the host sent the worker during that feed (host call replies and errors, the WAKE messages that
said when a reply or a timer came in, the clock, the seed, file contents), in the order the worker
took them in (see `corral.channel`: a worker takes in nothing it did not ask for). A fresh worker
given the same messages in the same order runs the same code the same way, so replaying the
journal rebuilds every variable, function, class and import, and answers every host call from the
record: no host function runs twice. What a replay cannot rebuild from messages travels beside the
journal: the overlay files of the session's mounts, its random seed, and a paused feed's pending
calls and the answers that came in before the pause.

The envelope (all integers big-endian):

    b'CORRAL\\x00S'   8 bytes, the magic (b'CORRAL\\x00R' for a record, below)
    version        u16, `FORMAT_VERSION`
    length         u32, bytes of the body
    body           msgpack (plain maps, lists, str, int, bytes; never a pickle)
    mac            32 bytes, HMAC-SHA256 (RFC 2104) over everything before it, keyed with the pool's state key

Each check has its own `SandboxStateError` text: oversized (over the quota, before anything is
read), not a state, truncated, altered (the MAC), another format version, another pool's
functions (the fingerprint of the host functions' names and stubs).

A state in a store is bound to where it is stored: its body's `binding` is `[tenant, session_id,
generation]` (a dumped state's is None), and the store's generation of the session must be the
generation of its last part. So a state copied into another session's row (or another tenant's),
an older state put back, and a dumped state put in a row are each refused, by name (`open_stored`).
After a full state, a stored session appends one record per feed (`seal_record`): an envelope of
its own whose body holds the binding, the MAC of the part before it (so records cannot be
dropped, reordered, or taken from another session), the feeds it adds or replaces and the
changes to the overlay. A store's write is then the feed's size, not the session's.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgpack

from ..errors import SandboxStateError

__all__ = [
    'FORMAT_VERSION',
    'MAX_STATE_BYTES',
    'Binding',
    'Chain',
    'FeedRecord',
    'SessionState',
    'StateRecord',
    'fingerprint',
    'seal',
    'seal_record',
    'ENVELOPE_BYTES',
    'call_size',
    'check_fingerprint',
    'check_packages',
    'dumped_modules',
    'feed_size',
    'input_size',
    'mac_of',
    'open_state',
    'open_stored',
    'overlay_changes',
    'read_back',
    'state_modules',
]

#: The format of the state this corral writes and reads. Bump it whenever the journal's meaning
#: changes (a message kind, what the worker does with one): an old state would replay wrongly.
#: 2: states bound to their store row (`binding`), records appended to them. A state's and a
#: record's `packages` and `answered` came within version 2, as keys a reader takes as empty when absent.
FORMAT_VERSION = 2

#: Default largest state, in bytes, a pool dumps or loads (`Pool(max_state_bytes=...)`).
MAX_STATE_BYTES = 64 * 1024 * 1024

_MAGIC = b'CORRAL\x00S'
_RECORD_MAGIC = b'CORRAL\x00R'
_HEADER = struct.Struct('>8sHI')
_MAC = 32
#: Bytes of the envelope around a body: the header and the MAC.
ENVELOPE_BYTES = _HEADER.size + _MAC
#: Bytes a msgpack item may take around its content (a type byte and up to 4 bytes of length): what
#: `feed_size`, `input_size` and `call_size` count per item.
_ITEM = 5

#: A feed's outcome, as its record keeps it.
DONE, FAILED, STOPPED, OPEN = 'done', 'failed', 'stopped', 'open'


@dataclass
class FeedRecord:
    """One feed: the FEED message, the messages the worker took in, what it asked for, how it ended.

    `inputs` holds `[call_id, payload]` pairs: a REPLY to sync call `call_id`, or (`call_id` -1)
    a WAKE answering a WAIT. `calls` holds the names of the host calls the feed made, by call id
    from `first_call`. `trace` is a digest of the worker's requests (each CALL's name, each WAIT), a
    replay's check that it took the same path. `outcome`: 'done', 'failed' (the script raised, or a
    limit a replay reaches at the same point stopped it), 'stopped' (a time limit or a dead worker
    cut it at a point no replay reproduces), or 'open' (running, or paused).
    """

    feed: bytes
    code: str
    first_call: int
    inputs: list[list[Any]] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    trace: bytes = b''
    outcome: str = OPEN
    why: str = ''

    def to_plain(self) -> list[Any]:
        return [self.feed, self.code, self.first_call, self.inputs, self.calls, self.trace, self.outcome]

    @classmethod
    def from_plain(cls, item: Any) -> FeedRecord:
        feed, code, first_call, inputs, calls, trace, outcome = item
        if not (isinstance(feed, bytes) and isinstance(code, str) and isinstance(first_call, int) and isinstance(trace, bytes)):
            raise ValueError('malformed feed record')
        if outcome not in (DONE, FAILED, OPEN) or not all(isinstance(name, str) for name in calls):
            raise ValueError('malformed feed record')
        for pair in inputs:
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], int) and isinstance(pair[1], bytes)):
                raise ValueError('malformed feed input')
        return cls(feed, code, first_call, inputs, calls, trace, outcome)


@dataclass
class SessionState:
    """What `Session.dump()` writes: the journal, and what replaying it cannot rebuild.

    - `feeds`: the journal, one `FeedRecord` per feed (the last one 'open' when the session is paused).
    - `seed`: the session's random seed. `script_name`: the file name its tracebacks show.
    - `mounts`: `[sandbox_path, mode]` of each mount the session had; a loading session must have them too.
    - `overlay`: `{sandbox_path: [files, dirs, deleted]}`, the overlay writes of each overlay mount.
    - `pending`: a paused feed's deferred calls, `[call_id, function, args, kwargs, payload]` each
      (args and kwargs as the worker sent them, packed); `answers`: `[call_id, payload]` of calls
      that answered before the pause and were not yet taken in; `blocked`: the sync call the
      worker waits on, or -1 when it waits in its event loop.
    - `packages`: the packages the pool that ran the feeds loaded (`Pool(packages=...)`, with
      what they need); a loading pool must load them too (`check_packages`). A state written
      before states carried them has none: a pool without packages wrote it, or its replay
      imports a package the loading pool lacks and is refused as a replay that went another way.
    - `answered`: the call ids of a paused feed that `Session.resume` answered, when the feed
      that took the answers did not reach the store as it went on (it was stopped, or its host
      stopped): the state is the one before that feed, and a second answer to one of these calls
      is refused (see `Session.resume`). Written before the answers reach the worker; a state
      written before states carried it has none.
    - `cwd`: the working folder the next feed starts at (`os.chdir`, `Session.chdir`); `''` for
      the default (the first mount's, else `/`), as a state written before states carried it has.
    - `modules`: `{name: [stubs, function names]}` of each external module the session offered, so
      a loading session that offers modules as scripts ask for them can offer them again
      (`Session.load_session(modules=...)`); a state written before states carried it has none.
    - `type_check`: whether the session type-checked its feeds (a load makes the loading session
      check as this one did); None in a state written before states carried it (a load keeps the
      loading checkout's setting).
    - `door`: what a front door keeps with the session (`Session.door_state`: plain data, a
      map of str keys), signed with the rest; `{}` in a state written before states carried it.
    """

    fingerprint: bytes
    seed: int
    script_name: str
    feeds: list[FeedRecord]
    mounts: list[list[str]]
    overlay: dict[str, list[Any]]
    pending: list[list[Any]] = field(default_factory=list)
    answers: list[list[Any]] = field(default_factory=list)
    blocked: int = -1
    packages: list[str] = field(default_factory=list)
    answered: list[int] = field(default_factory=list)
    cwd: str = ''
    modules: dict[str, list[Any]] = field(default_factory=dict)
    type_check: bool | None = None
    door: dict[str, Any] = field(default_factory=dict)

    def to_plain(self) -> dict[str, Any]:
        return {
            'fingerprint': self.fingerprint,
            'seed': self.seed,
            'script_name': self.script_name,
            'feeds': [record.to_plain() for record in self.feeds],
            'mounts': self.mounts,
            'overlay': self.overlay,
            'pending': self.pending,
            'answers': self.answers,
            'blocked': self.blocked,
            'packages': self.packages,
            'answered': self.answered,
            'cwd': self.cwd,
            'modules': self.modules,
            'type_check': self.type_check,
            'door': self.door,
        }

    @classmethod
    def from_plain(cls, body: Any) -> SessionState:
        if not isinstance(body, dict):
            raise ValueError('the body is not a map')
        state = cls(
            fingerprint=body['fingerprint'],
            seed=body['seed'],
            script_name=body['script_name'],
            feeds=[FeedRecord.from_plain(item) for item in body['feeds']],
            mounts=body['mounts'],
            overlay=body['overlay'],
            pending=body['pending'],
            answers=body['answers'],
            blocked=body['blocked'],
            packages=body.get('packages', []),
            answered=body.get('answered', []),
            cwd=body.get('cwd', ''),
            modules=body.get('modules', {}),
            type_check=body.get('type_check'),
            door=body.get('door', {}),
        )
        state.check()
        return state

    def check(self) -> None:
        """Raise `ValueError` when a field does not have its shape (the state came from outside)."""
        if not (isinstance(self.fingerprint, bytes) and isinstance(self.seed, int) and isinstance(self.script_name, str)):
            raise ValueError('malformed header fields')
        if not all(isinstance(m, list) and len(m) == 2 and all(isinstance(x, str) for x in m) for m in self.mounts):
            raise ValueError('malformed mounts')
        if not isinstance(self.overlay, dict) or not isinstance(self.blocked, int):
            raise ValueError('malformed overlay')
        if not (isinstance(self.packages, list) and all(isinstance(name, str) for name in self.packages)):
            raise ValueError('malformed packages')
        if not (isinstance(self.answered, list) and all(type(call_id) is int for call_id in self.answered)):
            raise ValueError('malformed answered calls')
        if not (isinstance(self.cwd, str) and (self.cwd == '' or self.cwd.startswith('/')) and '\x00' not in self.cwd):
            raise ValueError('malformed working folder')
        if not _modules_shaped(self.modules):
            raise ValueError('malformed modules')
        if self.type_check not in (None, True, False):
            raise ValueError('malformed type_check setting')
        if not (isinstance(self.door, dict) and all(isinstance(name, str) for name in self.door)):
            raise ValueError("malformed front door's data")
        for item in self.pending:
            if not (isinstance(item, list) and len(item) == 5 and isinstance(item[0], int) and isinstance(item[1], str)):
                raise ValueError('malformed pending call')
            if not all(isinstance(part, bytes) for part in item[2:]):
                raise ValueError('malformed pending call')
        for item in self.answers:
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], int) and isinstance(item[1], bytes)):
                raise ValueError('malformed answer')


def fingerprint(stubs: str | None, modules: Mapping[str, tuple[str | None, list[str]]]) -> bytes:
    """SHA-256 of what a session's scripts may call and type-check against: the stub text of its
    `external_lookup` functions, and each external module's name, stubs and function names.

    A state made for other host functions would replay against answers that no longer fit them.
    """
    digest = hashlib.sha256()
    plain = [stubs, sorted([name, module_stubs, sorted(functions)] for name, (module_stubs, functions) in modules.items())]
    digest.update(msgpack.packb(plain))
    return digest.digest()


@dataclass(frozen=True)
class Binding:
    """Where a state is stored: the tenant (`''` for a single-tenant store), the session id, and
    the store's generation of the part (full state or record) it signs."""

    tenant: str
    session_id: str
    generation: int

    def to_plain(self) -> list[Any]:
        return [self.tenant, self.session_id, self.generation]


@dataclass
class StateRecord:
    """What one stored feed appends to a stored state (`seal_record`): the feeds from index `start`
    of the journal on (the feed that ran; `start` one lower when it replaces the journal's last,
    open feed: a paused feed that went on; no feeds from there when its answers were given, see
    `SessionState.answered`), `overlay`, the changes to the overlay since the part before
    (`overlay_changes`), the pause of a paused session and its answered calls as `SessionState`
    has them, the packages of the pool that ran the feed (a session stored by one pool goes
    on in another), the working folder after it and the front door's data (`SessionState.door`)
    after it (each None in a record written before records carried it: as before), and the
    session's external modules and fingerprint (`SessionState.modules`, `fingerprint`) when
    they changed since the part before (`Session.add_external_module`; None when they did not,
    and in a record written before records carried them)."""

    start: int
    feeds: list[FeedRecord]
    overlay: dict[str, list[Any]]
    pending: list[list[Any]] = field(default_factory=list)
    answers: list[list[Any]] = field(default_factory=list)
    blocked: int = -1
    packages: list[str] = field(default_factory=list)
    answered: list[int] = field(default_factory=list)
    cwd: str | None = None
    door: dict[str, Any] | None = None
    modules: dict[str, list[Any]] | None = None
    fingerprint: bytes | None = None

    def to_plain(self) -> dict[str, Any]:
        names = ('start', 'overlay', 'pending', 'answers', 'blocked', 'packages', 'answered', 'cwd', 'door', 'modules', 'fingerprint')
        plain = {name: getattr(self, name) for name in names}
        return {**plain, 'feeds': [record.to_plain() for record in self.feeds]}

    def apply(self, state: SessionState) -> None:
        """Add this record to `state`. Raises `ValueError` when it does not fit there."""
        open_last = bool(state.feeds) and state.feeds[-1].outcome == OPEN
        if not isinstance(self.start, int) or self.start not in (len(state.feeds), len(state.feeds) - 1 if open_last else -1):
            raise ValueError('a record does not continue the journal')
        state.feeds[self.start :] = self.feeds
        state.overlay = _apply_overlay_changes(state.overlay, self.overlay)
        state.pending, state.answers, state.blocked, state.answered = self.pending, self.answers, self.blocked, self.answered
        if not isinstance(self.packages, list):
            raise ValueError('malformed packages')
        state.packages = [*state.packages, *(name for name in self.packages if name not in state.packages)]
        if self.cwd is not None:
            state.cwd = self.cwd
        if self.door is not None:
            state.door = self.door
        if (self.modules is None) != (self.fingerprint is None):
            raise ValueError('a record names its modules without their fingerprint, or the other way')
        if self.modules is not None:
            state.modules, state.fingerprint = self.modules, self.fingerprint  # type: ignore[assignment]
        state.check()


@dataclass
class Chain:
    """Where a stored session's next write goes: the generation and MAC of its last part, and the
    bytes of its last full state and of the records appended since (when to write a full state
    again: `Session` compacts when the records outgrow the full state)."""

    generation: int = 0
    mac: bytes = b''
    state_bytes: int = 0
    record_bytes: int = 0
    records: int = 0


def read_back(value: Any) -> Any:
    """`value` as a state holding it reads back: packed as `seal` packs it and unpacked as
    `open_state` unpacks it (a tuple comes back a list). Raises `ValueError` where reading the
    state would refuse it (a map keyed by other than str or bytes), `TypeError` for what no state holds."""
    return msgpack.unpackb(msgpack.packb(value, use_bin_type=True), **_UNPACKING)


#: How a state's body is unpacked.
_UNPACKING: dict[str, Any] = {'raw': False, 'strict_map_key': True, 'use_list': True}


def _pack_body(kind: bytes, body: dict[str, Any], key: bytes) -> bytes:
    packed = msgpack.packb(body, use_bin_type=True)
    head = _HEADER.pack(kind, FORMAT_VERSION, len(packed))
    return head + packed + hmac.new(key, head + packed, hashlib.sha256).digest()


def seal(state: SessionState, key: bytes, *, quota: int, binding: Binding | None = None) -> bytes:
    """The signed envelope of `state`, bound to `binding` (a stored state) or to nothing (a dump).
    Raises `SandboxStateError` when it is larger than `quota` bytes."""
    data = _pack_body(_MAGIC, {**state.to_plain(), 'binding': None if binding is None else binding.to_plain()}, key)
    if len(data) > quota:
        raise SandboxStateError(f'the session state is {len(data)} bytes, over the quota of {quota} bytes (Pool(max_state_bytes=...)); it was not dumped')
    return data


def seal_record(record: StateRecord, key: bytes, *, binding: Binding, previous: bytes) -> bytes:
    """The signed envelope of `record`, bound to `binding` and chained to the MAC of the part
    stored before it (`previous`)."""
    return _pack_body(_RECORD_MAGIC, {**record.to_plain(), 'binding': binding.to_plain(), 'previous': previous}, key)


def mac_of(data: bytes) -> bytes:
    """The MAC that ends an envelope: what the next record chains to."""
    return data[-_MAC:]


def _open_envelope(data: Any, key: bytes, *, quota: int, magic: bytes = _MAGIC) -> dict[str, Any]:
    """The checked body of an envelope, or `SandboxStateError` naming what is wrong with it."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f'a session state must be bytes, not {type(data).__name__}')
    data = bytes(data)
    if len(data) > quota:
        raise SandboxStateError(f'the session state is {len(data)} bytes, over the quota of {quota} bytes (Pool(max_state_bytes=...)); it was not loaded')
    if not data.startswith(magic[: len(data)]) or not data:
        raise SandboxStateError('these bytes are not a corral session state (they do not start with its magic bytes)')
    if len(data) < _HEADER.size:
        raise SandboxStateError(f'the session state is truncated: {len(data)} bytes, shorter than its header')
    _, version, length = _HEADER.unpack_from(data)
    expected_size = _HEADER.size + length + _MAC
    if len(data) < expected_size:
        raise SandboxStateError(f'the session state is truncated: {len(data)} of its {expected_size} bytes')
    if len(data) > expected_size:
        raise SandboxStateError(f'the session state was altered: {len(data) - expected_size} bytes follow its signature')
    signed, mac = data[:-_MAC], data[-_MAC:]
    if not hmac.compare_digest(mac, hmac.new(key, signed, hashlib.sha256).digest()):
        raise SandboxStateError("the session state was altered, or signed with another key: its signature does not match this pool's state key")
    if version != FORMAT_VERSION:
        raise SandboxStateError(f'the session state has format version {version}; this corral reads version {FORMAT_VERSION} only')
    try:
        body = msgpack.unpackb(data[_HEADER.size : -_MAC], **_UNPACKING)
    except (ValueError, msgpack.ExtraData) as error:  # signed by this key, yet malformed: refuse all the same
        raise SandboxStateError(f'the session state is malformed ({error})') from None
    if not isinstance(body, dict):
        raise SandboxStateError('the session state is malformed (the body is not a map)')
    return body


def _decode_state(body: dict[str, Any], expected: bytes | None) -> SessionState:
    try:
        state = SessionState.from_plain(body)
    except (ValueError, KeyError, TypeError) as error:  # signed by this key, yet malformed: refuse all the same
        raise SandboxStateError(f'the session state is malformed ({error})') from None
    if expected is not None:
        check_fingerprint(state, expected)
    return state


def check_fingerprint(state: SessionState, expected: bytes) -> None:
    """Raise `SandboxStateError` when `state` was made for other host functions than those whose
    fingerprint is `expected` (see `fingerprint`)."""
    if state.fingerprint != expected:
        raise SandboxStateError(
            "the session state was made for other host functions: the names and stubs of this pool's "
            'external functions and modules (type_check_stubs, external_modules) differ from those it was dumped with'
        )


def check_packages(state: SessionState, packages: tuple[str, ...]) -> None:
    """Raise `SandboxStateError` when the pool loading `state` lacks a package of the pool that
    made it (`packages`: the loading pool's). A pool with more packages may load it: a replay
    imports only what the journal's scripts imported, so a package none of them imported is
    never touched. (A script that caught the `ImportError` of a package its pool lacked takes the
    other branch where the import succeeds; the replay refuses the state when the feed's outcome,
    output, value or host calls then differ from the record.)"""
    missing = [name for name in state.packages if name not in packages]
    if missing:
        raise SandboxStateError(
            f"the session state was made in a pool that loads {', '.join(state.packages)}, and this pool does not load "
            f"{', '.join(missing)}: check the session out from a pool made with packages={state.packages!r}"
        )


def open_state(data: bytes, key: bytes, *, quota: int, expected: bytes, packages: tuple[str, ...] = ()) -> SessionState:
    """Check and decode a dumped state (`Session.dump()`), for a pool whose fingerprint is
    `expected` and which loads `packages`.

    Raises `SandboxStateError` naming what is wrong: oversized, not a state, truncated, altered
    (or signed with another key), another format version, made for other host functions, or
    a stored session's state (bound to its store row: `checkout(session_id=...)` loads it), or
    made in a pool with a package this one lacks (`check_packages`).
    """
    body = _open_envelope(data, key, quota=quota)
    if body.get('binding') is not None:
        raise SandboxStateError(
            "these bytes are a stored session's state, bound to its place in the store, not a dumped one: "
            'check the session out with pool.checkout(session_id=...), or load what session.dump() returns'
        )
    session_state = _decode_state(body, expected)
    check_packages(session_state, packages)
    return session_state


def dumped_modules(data: bytes, key: bytes, *, quota: int) -> dict[str, tuple[str | None, list[str]]]:
    """`{name: (stubs, function names)}` of each external module a dumped state (`Session.dump()`)
    was made with, parents before their submodules; raises `SandboxStateError` as `open_state` does for bytes
    that are not such a state."""
    body = _open_envelope(data, key, quota=quota)
    modules = body.get('modules', {})
    if not _modules_shaped(modules):
        raise SandboxStateError('the session state is malformed (malformed modules)')
    return _parents_first(modules)


def state_modules(state: SessionState) -> dict[str, tuple[str | None, list[str]]]:
    """`{name: (stubs, function names)}` of each external module `state` was made with, parents
    before their submodules (what `dumped_modules` gives of a dumped state)."""
    return _parents_first(state.modules)


def _parents_first(modules: dict[str, list[Any]]) -> dict[str, tuple[str | None, list[str]]]:
    return {name: (modules[name][0], modules[name][1]) for name in sorted(modules, key=lambda name: name.count('.'))}


def _modules_shaped(modules: Any) -> bool:
    return isinstance(modules, dict) and all(
        isinstance(name, str)
        and isinstance(module, list)
        and len(module) == 2
        and (module[0] is None or isinstance(module[0], str))
        and isinstance(module[1], list)
        and all(isinstance(function, str) for function in module[1])
        for name, module in modules.items()
    )


def open_stored(
    state: bytes, records: list[bytes], generation: int, key: bytes, *, quota: int, expected: bytes | None, tenant: str, session_id: str,
    packages: tuple[str, ...] = (),
) -> tuple[SessionState, Chain]:
    """Check and decode what a store holds for `(tenant, session_id)` at the store's `generation`:
    a full state and the records appended to it. Returns the state, and the `Chain` the
    session's next write continues. The state's fingerprint, the last part's that names one, is
    checked against `expected` (None: the caller checks it, `check_fingerprint`, once it has
    offered the modules the state names).

    Raises `SandboxStateError` naming what is wrong: each part as `open_state` checks it, then a
    part that belongs to another tenant or another session (copied into this row), a dumped
    state put in the row, a state older or newer than the store's generation (an older state
    put back: rolled back), a record that does not follow the part before it (dropped,
    reordered or replayed), records over the quota in all, or a package the pool that ran a
    feed loaded and this one (`packages`) lacks.
    """
    where = f'the stored state of session {session_id!r}'
    body = _open_envelope(state, key, quota=quota)
    first = _binding(body, where, tenant, session_id, 'state')
    session_state = _decode_state(body, None)
    chain = Chain(first, mac_of(state), len(state), 0, 0)
    for data in records:
        chain.record_bytes += len(data)
        if chain.record_bytes > quota:
            raise SandboxStateError(
                f'{where} is over the quota of {quota} bytes (Pool(max_state_bytes=...)) in the records appended to it; it was not loaded'
            )
        part = _open_envelope(data, key, quota=quota, magic=_RECORD_MAGIC)
        number = _binding(part, where, tenant, session_id, 'record')
        if number != chain.generation + 1 or not isinstance(part.get('previous'), bytes) or not hmac.compare_digest(part['previous'], chain.mac):
            raise SandboxStateError(
                f'{where} was altered: its record of generation {number} does not follow the part before it '
                f'(generation {chain.generation}): a record was dropped, reordered, or put back from an older state'
            )
        try:
            record = StateRecord(
                part['start'], [FeedRecord.from_plain(item) for item in part['feeds']], part['overlay'], part['pending'], part['answers'], part['blocked'],
                part.get('packages', []), part.get('answered', []), part.get('cwd'), part.get('door'), part.get('modules'), part.get('fingerprint'),
            )
            record.apply(session_state)
        except (ValueError, KeyError, TypeError) as error:
            raise SandboxStateError(f'the session state is malformed ({error})') from None
        chain.generation, chain.mac = number, mac_of(data)
        chain.records += 1
    if chain.generation != generation:
        raise SandboxStateError(
            f'{where} is of generation {chain.generation} where the store is at generation {generation}: '
            + ('an older state of the session was put back (rolled back)' if chain.generation < generation else "the store's generation was altered")
            + ', so it is refused'
        )
    if expected is not None:
        check_fingerprint(session_state, expected)
    check_packages(session_state, packages)
    return session_state, chain


def _binding(body: dict[str, Any], where: str, tenant: str, session_id: str, part: str) -> int:
    """The generation of a stored part whose binding is `(tenant, session_id)`, or the error that
    says whose it is. Another tenant's is named as such, and never tells whether that tenant has
    a session with this id."""
    binding = body.get('binding')
    if binding is None:
        raise SandboxStateError(f'{where} is a dumped state, not one stored for this session: it was copied into the store, so it is refused')
    if not (isinstance(binding, list) and len(binding) == 3 and isinstance(binding[0], str) and isinstance(binding[1], str) and isinstance(binding[2], int)):
        raise SandboxStateError('the session state is malformed (its binding)')
    if binding[0] != tenant:
        raise SandboxStateError(f"{where} holds a {part} of another tenant's session: it was copied into this row, so it is refused")
    if binding[1] != session_id:
        raise SandboxStateError(f'{where} holds a {part} of another session: it was copied into this row, so it is refused')
    return binding[2]


def overlay_changes(before: dict[str, list[Any]], after: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """What changed from overlay `before` to `after` (both as `SystemCalls.overlay()` gives them):
    `{sandbox_path: [files, gone_files, dirs, gone_dirs, deleted, undeleted]}`, with `files` and
    `dirs` as in the overlay (added or changed), the others lists of paths. A file whose data and
    mtime are the objects it had costs nothing: unchanged files are found without reading them."""
    changes: dict[str, list[Any]] = {}
    for path, (files, dirs, deleted) in after.items():
        old_files, old_dirs, old_deleted = before.get(path, [[], [], []])
        old = {rel: (data, mtime) for rel, data, mtime in old_files}
        new_files = [[rel, data, mtime] for rel, data, mtime in files if (prior := old.get(rel)) is None or not (prior[0] is data or prior[0] == data) or prior[1] != mtime]
        gone_files = sorted(old.keys() - {rel for rel, _, _ in files})
        old_dir_map = {rel: mtime for rel, mtime in old_dirs}
        new_dirs = [[rel, mtime] for rel, mtime in dirs if old_dir_map.get(rel) != mtime]
        gone_dirs = sorted(old_dir_map.keys() - {rel for rel, _ in dirs})
        added, removed = sorted(set(deleted) - set(old_deleted)), sorted(set(old_deleted) - set(deleted))
        if new_files or gone_files or new_dirs or gone_dirs or added or removed:
            changes[path] = [new_files, gone_files, new_dirs, gone_dirs, added, removed]
    return changes


def _apply_overlay_changes(overlay: dict[str, list[Any]], changes: Any) -> dict[str, list[Any]]:
    """`overlay` with `changes` (from `overlay_changes`) made. Raises `ValueError` for malformed changes."""
    if not isinstance(changes, dict):
        raise ValueError('malformed overlay changes')
    result = dict(overlay)
    for path, change in changes.items():
        if not (isinstance(change, list) and len(change) == 6 and all(isinstance(part, list) for part in change)):
            raise ValueError('malformed overlay changes')
        new_files, gone_files, new_dirs, gone_dirs, added, removed = change
        files, dirs, deleted = result.get(path, [[], [], []])
        try:
            file_map = {rel: [rel, data, mtime] for rel, data, mtime in files}
            for rel in gone_files:
                file_map.pop(rel, None)
            file_map.update({item[0]: item for item in new_files})
            dir_map = {rel: [rel, mtime] for rel, mtime in dirs}
            for rel in gone_dirs:
                dir_map.pop(rel, None)
            dir_map.update({item[0]: item for item in new_dirs})
        except (ValueError, TypeError, IndexError) as error:
            raise ValueError(f'malformed overlay changes ({error})') from None
        result[path] = [[file_map[rel] for rel in sorted(file_map)], [dir_map[rel] for rel in sorted(dir_map)], sorted((set(deleted) | set(added)) - set(removed))]
    return result


def feed_size(record: FeedRecord) -> int:
    """Bytes at most a feed's record takes in a sealed state: a stored session counts its state's
    size as it grows with these three, bounding what `seal` makes of it."""
    return (
        len(record.feed) + len(record.code.encode('utf-8', 'surrogatepass')) + len(record.trace) + 8 * _ITEM + 9
        + sum(input_size(payload) for _, payload in record.inputs)
        + sum(call_size(name) for name in record.calls)
    )


def input_size(payload: bytes) -> int:
    """Bytes at most one journaled input (`[call_id, payload]`) takes in a sealed state."""
    return len(payload) + 2 * _ITEM + 9


def call_size(name: str) -> int:
    """Bytes at most one journaled host call's name takes in a sealed state."""
    return len(name.encode('utf-8', 'surrogatepass')) + _ITEM
