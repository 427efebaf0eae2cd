"""``SyntaxReader``: the `Syntax` of scripts, read without holding the host's event loop.

CPython's parser holds the GIL for its whole run (a script of 120 KB: some 180 ms, and its walk
80 ms more), so a thread does not help: every other session on the host would wait that long. A
few texts short enough are read on the event loop; longer ones are read in a child process,
``python -I -S _syntax.py`` (only the standard library: it starts in some 20 ms), which answers
length-prefixed messages over its pipes (the texts in UTF-8, their `Syntax` in JSON messages of a few hundred items each, so that no decode holds the event loop long). Children are started when first needed and reused; one
whose read is cancelled, takes longer than ``time_limit``, or dies is killed, and the read raises
RuntimeError (never a hang); a crash of a child loses no other read.

The child is a process of its own rather than a ``ProcessPoolExecutor`` worker: a read can be
stopped (the pool's cannot, and would hold up the reads queued behind it), its messages are plain
data, and the host's ``__main__`` module is not imported again in it (``spawn`` and
``forkserver`` do that, and a script that uses corral at its top level would run again there).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable, Sequence

from . import _syntax
from ._server import kill_child, process_cpu
from ._syntax import FRAME, Syntax

__all__ = ['SyntaxReader']


class _Child:
    """One child process reading texts."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls) -> _Child:
        if not sys.executable:
            raise RuntimeError('no Python executable to start the reader of scripts in (sys.executable is empty)')
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, '-I', '-S', _syntax.__file__,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
            )  # fmt: skip
        except OSError as exc:
            raise RuntimeError(f'could not start the reader of scripts ({sys.executable}): {exc}') from exc
        return cls(proc)

    async def read(self, texts: list[str]) -> list[Syntax | None]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(_syntax.request(texts))
            await self.proc.stdin.drain()
            syntaxes: list[Syntax | None] = []
            for _ in texts:
                decoder, done = _syntax.Decoder(), False
                while not done:  # a message at a time, each a few hundred items: other tasks run between them
                    size = FRAME.unpack(await self.proc.stdout.readexactly(FRAME.size))[0]
                    done, syntax = decoder.add(json.loads(await self.proc.stdout.readexactly(size)))
                    await asyncio.sleep(0)
                syntaxes.append(syntax)
        except (OSError, asyncio.IncompleteReadError):
            self.kill()  # one that ended keeps its exit code (see `kill_child`)
            code = await self.proc.wait()
            raise RuntimeError(f'the reader of scripts stopped (exit code {code})') from None
        return syntaxes

    def kill(self) -> None:
        kill_child(self.proc)

    async def close(self) -> None:
        """End the child (its stdin closed: it exits) and reap it."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 1.0)
        except TimeoutError:
            self.kill()
            await self.proc.wait()


class SyntaxReader:
    """Reads the `Syntax` of texts (`_syntax.read`): short ones on the event loop, long ones in a
    child process. Bound to the event loop it is first used on; `aclose` ends its children."""

    #: Characters read on the event loop at once: a read (parse and walk) of 4,096 characters of
    #: code takes some 2 ms (5 ms on a busy 2-core VM), as long as a round trip to a child.
    inline_characters: int = 4096
    #: Seconds one read in a child may take before the child is killed (RuntimeError).
    time_limit: float = 30.0
    #: Children kept waiting for the next long read.
    max_idle: int = 2
    #: Long texts whose `Syntax` is kept for the next read of the same text (a check reads its
    #: script once; a script that fails at run time is read again for the part of it that ran).
    kept: int = 4

    def __init__(self) -> None:
        self._idle: list[_Child] = []
        self._running: set[_Child] = set()
        self._reaping: set[asyncio.Task[None]] = set()
        self._kept: dict[str, Syntax | None] = {}
        self._closed = False
        self._children = asyncio.Semaphore(os.cpu_count() or 1)

    async def read(self, texts: Sequence[str], on_cpu: Callable[[float], None] | None = None) -> list[Syntax | None]:
        """The `Syntax` of each of `texts` (None for one that does not parse), in their order.
        `on_cpu`, when given, is called with the CPU seconds a child used for them (`/proc`), if
        one read them.

        Raises RuntimeError when a child cannot be started, dies or takes longer than
        `time_limit` seconds (it is then killed)."""
        found: dict[str, Syntax | None] = {}
        for text in texts:
            if text in self._kept:
                found[text] = self._kept[text] = self._kept.pop(text)  # the most recently used
        unread = [text for text in dict.fromkeys(texts) if text not in found]
        if sum(map(len, unread)) <= self.inline_characters:
            found.update((text, _syntax.read(text)) for text in unread)
        elif unread:
            found.update(zip(unread, await self._read_in_child(unread, on_cpu)))
            for text in unread:
                if len(text) > self.inline_characters:
                    self._kept[text] = found[text]
            while len(self._kept) > self.kept:
                del self._kept[next(iter(self._kept))]
        return [found[text] for text in texts]

    async def _read_in_child(self, texts: list[str], on_cpu: Callable[[float], None] | None) -> list[Syntax | None]:
        if self._closed:
            raise RuntimeError('the reader of scripts is closed')
        async with self._children:
            while self._idle and self._idle[-1].proc.returncode is not None:  # ended while it waited
                await self._idle.pop().close()
            child = self._idle.pop() if self._idle else await _Child.start()
            self._running.add(child)
            done = False
            before = process_cpu(child.proc.pid)
            try:
                async with asyncio.timeout(self.time_limit) as deadline:
                    syntaxes = await child.read(texts)
                done = True
                return syntaxes
            except TimeoutError:
                if not deadline.expired():
                    raise
                raise RuntimeError(f'the reader of scripts took longer than {self.time_limit} seconds and was stopped') from None
            finally:
                after = process_cpu(child.proc.pid) if child.proc.returncode is None else None
                if on_cpu is not None and before is not None and after is not None:
                    on_cpu(after - before)
                self._running.discard(child)
                if done and not self._closed and len(self._idle) < self.max_idle:
                    self._idle.append(child)
                else:  # cancelled, stopped, dead or not needed: nothing waits for its answer any more
                    child.kill()
                    reaping = asyncio.get_running_loop().create_task(child.close())
                    self._reaping.add(reaping)
                    reaping.add_done_callback(self._reaping.discard)

    async def aclose(self) -> None:
        """End the reader's children. Reads after this raise RuntimeError."""
        self._closed = True
        idle, self._idle = self._idle, []
        for child in self._running:
            child.kill()
        for child in idle:
            await child.close()
        await asyncio.gather(*self._reaping, return_exceptions=True)
        self._kept.clear()
