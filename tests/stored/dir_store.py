"""A store in a folder (a file per state, a file per lease) with the `corral.store.Store`
protocol's leases and errors, for the tests of sessions, across processes too; the real stores
(SQLite, PostgreSQL) have their own tests."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from corral.errors import SandboxSessionBusyError, SandboxStateError


class DirStore:
    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.puts = 0

    def _file(self, session_id: str, tenant: str, suffix: str) -> Path:
        return self.folder / f'{tenant}~{session_id}.{suffix}'

    def _check(self, session_id: str, holder: str, tenant: str) -> None:
        lease = self._file(session_id, tenant, 'lease')
        if lease.exists():
            other, until = json.loads(lease.read_text())
            if other != holder and until > time.time():
                raise SandboxSessionBusyError(f'the session {session_id} is checked out by another holder')

    async def put(self, session_id: str, state: bytes, *, holder: str, tenant: str = '') -> None:
        self._check(session_id, holder, tenant)
        path = self._file(session_id, tenant, 'state')
        path.with_suffix('.tmp').write_bytes(state)
        path.with_suffix('.tmp').replace(path)
        self.puts += 1

    async def get(self, session_id: str, *, tenant: str = '') -> bytes:
        path = self._file(session_id, tenant, 'state')
        if not path.exists():
            raise SandboxStateError(f'no stored session with id {session_id!r}')
        return path.read_bytes()

    async def acquire(self, session_id: str, *, holder: str, ttl: float, tenant: str = '') -> None:
        self._check(session_id, holder, tenant)
        self._file(session_id, tenant, 'lease').write_text(json.dumps([holder, time.time() + ttl]))

    async def renew(self, session_id: str, *, holder: str, ttl: float, tenant: str = '') -> None:
        await self.acquire(session_id, holder=holder, ttl=ttl, tenant=tenant)

    async def release(self, session_id: str, *, holder: str, tenant: str = '') -> None:
        lease = self._file(session_id, tenant, 'lease')
        if lease.exists() and json.loads(lease.read_text())[0] == holder:
            lease.unlink()

    async def delete(self, session_id: str, *, tenant: str = '') -> None:
        self._file(session_id, tenant, 'state').unlink(missing_ok=True)

    async def list(self, *, tenant: str = '') -> list[str]:
        return sorted(p.stem.partition('~')[2] for p in self.folder.glob(f'{tenant}~*.state'))

    def default_state_key(self) -> bytes:
        return b'k' * 32

    async def close(self) -> None:
        pass
