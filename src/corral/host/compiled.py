"""Compiled feeds, kept by the host so that a replay does not validate, rewrite and compile again.

Replaying a journal (`load_session`, a checkout by id without a live checkpoint) runs every feed's
script again; compiling it was most of a replayed feed's CPU (2-3 ms of a 12-line script, where
running it took well under one). The host compiles a replayed feed's text itself, with corral's
own compiler (`language.compile_script`), keeps the marshalled code, and sends it to the worker
in a CODE message before the feed's FEED; the worker runs it as it would have run what it
compiled itself (`runtime.Worker._take_code`).

Why this is safe:

- Code comes from one place: this process's compiler, given a feed's text. A stored state holds
  text only, so a tampered or forged state (or a client, which sends text) never chooses
  bytecode; a worker never sends code anywhere, and the host never runs what it keeps.
- An entry is keyed by a digest of the text and of everything that decides what the text compiles
  to (`language.compile.compiler_tag`: CPython's version and bytecode, its optimization level, the
  language layer's source, and whether the layer is on). The compiler is a function of these, so
  an entry is exactly what any session's compile of that text would give: sharing one across
  sessions hands nobody anything their own compile would not. Entries are kept apart by tenant
  (the key holds it), so how soon a feed starts tells no tenant whether another fed the same
  text. A worker takes code only
  under its own tag; with another (a zygote started from other files) it compiles the text.
- What the compile would tell the script (a syntax error, a warning it prints) is not kept: such a
  text is sent without code, and the worker compiles it and says so, as when the feed ran.
- The cache is bounded (`CompiledFeeds.max_bytes`, `max_entries`), and each tenant's entries are
  dropped least recently used first; past a bound the tenant holding the most loses its oldest, so
  a tenant's feeds drop its own entries before any other's and never those of a tenant holding
  as much or less: how busy other tenants are decides how long a tenant's entries stay only while
  it holds the most (whether the others together hold enough to pass the bound), never which of
  another's texts are kept. A
  text longer than `max_text` characters (a pool may allow such scripts: `Limits.code_size`), or
  whose code would not fit in the cache, is sent without code: the host's event loop does not
  compile it, and its worker does, as when the feed ran.

Live feeds use it too (`CompiledFeeds.live`): a text fed before, in any session of the process,
goes to its worker as code in the same write as its FEED, and the worker does not compile it
(a fresh worker's first compile of even `1 + 1` takes 0.25-0.4 ms). A text is compiled here the
second time it is fed, not the first: most scripts an agent writes run once.
"""

from __future__ import annotations

import hashlib
import warnings
from collections import OrderedDict
from collections.abc import Callable

from ..channel import CODE
from ..language import compile_script, compile_unguarded
from ..language.compile import compiler_tag, dump_compiled
from ..values import pack

__all__ = ['CompiledFeeds', 'COMPILED_FEEDS']

#: What an entry of a text the worker must compile itself costs, in bytes (its key and slot).
_REFUSED_COST = 64


class _Scope:
    """One tenant's share of a `CompiledFeeds`: its entries' keys and its texts seen once live,
    each least recently used first, and the bytes its entries hold."""

    __slots__ = ('name', 'keys', 'seen', 'bytes')

    def __init__(self, name: str) -> None:
        self.name = name
        self.keys: OrderedDict[bytes, None] = OrderedDict()
        self.seen: OrderedDict[bytes, None] = OrderedDict()
        self.bytes = 0


class CompiledFeeds:
    """The host's compiled code of replayed feeds (and of live feeds fed before: `live`), by a
    digest of their text, compiler and tenant (`scope`): at most `max_entries` entries of at most
    `max_bytes` bytes of CODE messages in all, of texts of at most `max_text` characters. Past a
    bound, the tenant whose entries hold the most bytes (or, past `max_entries`, are the most)
    loses its least recently used entry (the tenant adding, when it holds as much): one tenant's
    feeds never drop the entries of a tenant holding as many or fewer, whatever their number (texts seen once live, at most `max_entries`, likewise).
    `hits` and `misses` count `message` and `live` calls answered from it and compiled."""

    def __init__(self, max_bytes: int = 32 << 20, max_entries: int = 4096, max_text: int = 128 << 10) -> None:
        self.max_bytes, self.max_entries, self.max_text = max_bytes, max_entries, max_text
        self._entries: dict[bytes, bytes | None] = {}
        self._scopes: dict[str, _Scope] = {}
        self._seen = 0  # texts fed once live, not compiled here, of every scope
        self._bytes = 0
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size(self) -> int:
        """Bytes the entries hold (their CODE messages; `_REFUSED_COST` for a text kept without code)."""
        return self._bytes

    def message(self, code: str, *, guarded: bool, scope: str = '') -> bytes | None:
        """The packed CODE message of `code` for a worker whose language layer is on (`guarded`)
        or skipped, or None when the worker must compile it itself (it does not compile,
        compiling it warns, or it is longer than `max_text` or its code larger than `max_bytes`).
        Compiles `code` on the first call for it in `scope` (a session's tenant: entries are kept
        apart by it, so how soon a feed starts tells no tenant whether another fed the same text);
        never raises."""
        return self._message(code, guarded, scope, live=False)

    def live(self, code: str, *, guarded: bool, scope: str = '') -> bytes | None:
        """For a live feed of `code`: its CODE message as `message` gives it, when the cache
        holds it or `code` was asked for here once before (this second time compiles it); None
        the first time (remembered among at most `max_entries` texts, least recently seen first
        out), and when `message` gives None. Never raises."""
        return self._message(code, guarded, scope, live=True)

    @staticmethod
    def key(code: str, *, guarded: bool, scope: str = '') -> bytes:
        """The 32-byte digest an entry of `code` is filed under: of the compiler's tag
        (`compiler_tag(guarded)`), the scope (its length first, so no scope and text run together
        as another's) and the text."""
        scoped = scope.encode('utf-8', 'surrogatepass')
        return hashlib.blake2b(compiler_tag(guarded) + len(scoped).to_bytes(4, 'big') + scoped + code.encode('utf-8', 'surrogatepass'), digest_size=32).digest()

    def _message(self, code: str, guarded: bool, scope: str, live: bool) -> bytes | None:
        if type(code) is not str or len(code) > self.max_text:  # a malformed state's, or a long script: its worker compiles it
            return None
        key = self.key(code, guarded=guarded, scope=scope)
        own = self._scopes.get(scope)
        if own is None:
            own = self._scopes[scope] = _Scope(scope)
        if key in self._entries:
            self.hits += 1
            own.keys.move_to_end(key)
            return self._entries[key]
        if live and key not in own.seen:
            own.seen[key] = None
            self._seen += 1
            while self._seen > self.max_entries:
                most = self._most(own, _seen_count)
                most.seen.popitem(last=False)
                self._seen -= 1
                self._drop_empty(most)
            return None
        if key in own.seen:
            del own.seen[key]
            self._seen -= 1
        self.misses += 1
        message = _compiled(code, compiler_tag(guarded), guarded)
        if message is not None and len(message) > self.max_bytes:
            message = None
        self._add(own, key, message)
        self._drop_empty(own)
        return message

    def clear(self) -> None:
        """Drop every entry, and count hits and misses from zero."""
        self._entries.clear()
        self._scopes.clear()
        self._seen = self._bytes = self.hits = self.misses = 0

    def _add(self, own: _Scope, key: bytes, message: bytes | None) -> None:
        cost = _cost(message)
        if cost > self.max_bytes or not self.max_entries:  # kept nowhere: compiled again next time
            return
        self._entries[key] = message
        own.keys[key] = None
        own.bytes += cost
        self._bytes += cost
        while self._bytes > self.max_bytes or len(self._entries) > self.max_entries:
            largest = self._most(own, _scope_bytes if self._bytes > self.max_bytes else _entry_count)
            dropped, _ = largest.keys.popitem(last=False)
            cost = _cost(self._entries.pop(dropped))
            largest.bytes -= cost
            self._bytes -= cost
            self._drop_empty(largest)

    def _most(self, own: _Scope, measure: Callable[[_Scope], int]) -> _Scope:
        """The scope holding the most by `measure`: `own` (the one adding) when it holds as much as
        any, so a tenant's feeds drop another's entries only where that tenant holds more."""
        most = max(self._scopes.values(), key=measure)
        return own if measure(own) == measure(most) else most

    def _drop_empty(self, scope: _Scope) -> None:
        if not scope.keys and not scope.seen:
            self._scopes.pop(scope.name, None)


def _cost(message: bytes | None) -> int:
    """What an entry costs: its CODE message's bytes, or `_REFUSED_COST` for a text kept without code."""
    return _REFUSED_COST if message is None else len(message)


def _scope_bytes(scope: _Scope) -> int:
    return scope.bytes


def _entry_count(scope: _Scope) -> int:
    return len(scope.keys)


def _seen_count(scope: _Scope) -> int:
    return len(scope.seen)


def _compiled(code: str, tag: bytes, guarded: bool) -> bytes | None:
    """The CODE message of `code`, compiled here; None when the worker must compile it (it does
    not compile, or the compiler warns: the worker shows that warning to the script)."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            script = (compile_script if guarded else compile_unguarded)(code, '<script>')
        if caught:
            return None
        return pack([CODE, code, tag, dump_compiled(script), script.imports_asyncio], side='host')
    except Exception:  # noqa: BLE001 - a syntax error, code nested too deeply to compile or marshal: the worker compiles it and reports it
        return None


#: The process's compiled feeds: what it holds is a function of its keys alone, so every pool shares it.
COMPILED_FEEDS = CompiledFeeds()
