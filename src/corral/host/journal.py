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

    b'CORRAL\\x00S'   8 bytes, the magic
    version        u16, `FORMAT_VERSION`
    length         u32, bytes of the body
    body           msgpack (plain maps, lists, str, int, bytes; never a pickle)
    mac            32 bytes, HMAC-SHA256 (RFC 2104) over everything before it, keyed with the pool's state key

Each check has its own `SandboxStateError` text: oversized (over the quota, before anything is
read), not a state, truncated, altered (the MAC), another format version, another pool's
functions (the fingerprint of the host functions' names and stubs).
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

__all__ = ['FORMAT_VERSION', 'MAX_STATE_BYTES', 'FeedRecord', 'SessionState', 'fingerprint', 'seal', 'open_state']

#: The format of the state this corral writes and reads. Bump it whenever the journal's meaning
#: changes (a message kind, what the worker does with one): an old state would replay wrongly.
FORMAT_VERSION = 1

#: Default largest state, in bytes, a pool dumps or loads (`Pool(max_state_bytes=...)`).
MAX_STATE_BYTES = 64 * 1024 * 1024

_MAGIC = b'CORRAL\x00S'
_HEADER = struct.Struct('>8sHI')
_MAC = 32

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
        )
        if not (isinstance(state.fingerprint, bytes) and isinstance(state.seed, int) and isinstance(state.script_name, str)):
            raise ValueError('malformed header fields')
        if not all(isinstance(m, list) and len(m) == 2 and all(isinstance(x, str) for x in m) for m in state.mounts):
            raise ValueError('malformed mounts')
        if not isinstance(state.overlay, dict) or not isinstance(state.blocked, int):
            raise ValueError('malformed overlay')
        for item in state.pending:
            if not (isinstance(item, list) and len(item) == 5 and isinstance(item[0], int) and isinstance(item[1], str)):
                raise ValueError('malformed pending call')
            if not all(isinstance(part, bytes) for part in item[2:]):
                raise ValueError('malformed pending call')
        for item in state.answers:
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], int) and isinstance(item[1], bytes)):
                raise ValueError('malformed answer')
        return state


def fingerprint(stubs: str | None, modules: Mapping[str, tuple[str | None, list[str]]]) -> bytes:
    """SHA-256 of what a session's scripts may call and type-check against: the stub text of its
    `external_lookup` functions, and each external module's name, stubs and function names.

    A state made for other host functions would replay against answers that no longer fit them.
    """
    digest = hashlib.sha256()
    plain = [stubs, sorted([name, module_stubs, sorted(functions)] for name, (module_stubs, functions) in modules.items())]
    digest.update(msgpack.packb(plain))
    return digest.digest()


def seal(state: SessionState, key: bytes, *, quota: int) -> bytes:
    """The signed envelope of `state`. Raises `SandboxStateError` when it is larger than `quota` bytes."""
    body = msgpack.packb(state.to_plain(), use_bin_type=True)
    head = _HEADER.pack(_MAGIC, FORMAT_VERSION, len(body))
    size = len(head) + len(body) + _MAC
    if size > quota:
        raise SandboxStateError(f'the session state is {size} bytes, over the quota of {quota} bytes (Pool(max_state_bytes=...)); it was not dumped')
    return head + body + hmac.new(key, head + body, hashlib.sha256).digest()


def open_state(data: bytes, key: bytes, *, quota: int, expected: bytes) -> SessionState:
    """Check and decode an envelope made by `seal`, for a pool whose fingerprint is `expected`.

    Raises `SandboxStateError` naming what is wrong: oversized, not a state, truncated, altered
    (or signed with another key), another format version, or made for other host functions.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f'a session state must be bytes, not {type(data).__name__}')
    data = bytes(data)
    if len(data) > quota:
        raise SandboxStateError(f'the session state is {len(data)} bytes, over the quota of {quota} bytes (Pool(max_state_bytes=...)); it was not loaded')
    if not data.startswith(_MAGIC[: len(data)]) or not data:
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
        state = SessionState.from_plain(msgpack.unpackb(data[_HEADER.size : -_MAC], raw=False, strict_map_key=True, use_list=True))
    except (ValueError, KeyError, TypeError, msgpack.ExtraData) as error:  # signed by this key, yet malformed: refuse all the same
        raise SandboxStateError(f'the session state is malformed ({error})') from None
    if state.fingerprint != expected:
        raise SandboxStateError(
            "the session state was made for other host functions: the names and stubs of this pool's "
            'external functions and modules (type_check_stubs, external_modules) differ from those it was dumped with'
        )
    return state
