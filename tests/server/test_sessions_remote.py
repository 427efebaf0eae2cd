"""A tenant's stored sessions on a real `corral serve`: listed and deleted through `RemotePool` and
`corral sessions`, freeing the tenant's `stored_bytes`; `--retention` deletes those untouched, counted
in /metrics."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

import corral

from .conftest import running_server
from .test_operator import corral_command

pytestmark = pytest.mark.slow

#: A script whose stored journal holds some 12,000 bytes: its own code.
BIG = f"x = '{'a' * 12000}'"


async def stored(pool: corral.RemotePool, code: str) -> str:
    async with pool.checkout(ephemeral=False) as session:
        await session.feed_run(code)
        return session.session_id


def test_a_tenant_lists_and_deletes_its_sessions_and_frees_its_stored_bytes(tmp_path):
    store = f'sqlite:///{tmp_path}/store.db'
    acme, other = (corral_command('keys', 'create', '--tenant', tenant, '--store', store)[1].strip() for tenant in ('acme', 'other'))
    assert corral_command('tenants', 'set', 'acme', '--stored-bytes', '40000', '--store', store)[0] == 0
    with running_server(tmp_path, store=store) as server:

        async def scenario() -> list[str]:
            pool = corral.RemotePool(server.url, api_key=acme)
            mine = [await stored(pool, BIG)]  # some 25,000 bytes stored: the state and its record
            with pytest.raises(corral.SandboxQuotaError) as info:
                await stored(pool, BIG)
            assert info.value.quota == 'stored_bytes'
            listed = await pool.list_sessions()
            assert set(mine) <= set(listed)
            assert await corral.RemotePool(server.url, api_key=other).list_sessions() == []
            with pytest.raises(corral.SandboxStateError) as refused:
                await corral.RemotePool(server.url, api_key=other).delete_session(mine[0])
            assert str(refused.value) == f'no stored session with id {mine[0]!r}'
            for session_id in listed:
                await pool.delete_session(session_id)
            assert await pool.list_sessions() == []
            with pytest.raises(corral.SandboxStateError) as missing:
                await pool.delete_session(mine[0])
            assert str(missing.value) == f'no stored session with id {mine[0]!r}'
            with pytest.raises(ValueError, match='^session_id must be 1 to 128 characters'):
                await pool.delete_session('a b')
            with pytest.raises(corral.SandboxAuthError):
                await corral.RemotePool(server.url, api_key='corral_x').list_sessions()
            return [await stored(pool, BIG), await stored(pool, 'y = 1')]  # the bytes were freed

        again = asyncio.run(scenario())
        remote = ('--server', server.url, '--api-key', acme)
        assert corral_command('sessions', 'list', *remote) == (0, ''.join(f'{i}\n' for i in sorted(again)), '')
        assert corral_command('sessions', 'list', '--store', store, '--tenant', 'acme') == (0, ''.join(f'{i}\n' for i in sorted(again)), '')
        assert corral_command('sessions', 'delete', again[0], *remote) == (0, f'deleted the stored session {again[0]!r}\n', '')
        assert corral_command('sessions', 'delete', again[0], *remote) == (1, '', f"corral: error: no stored session with id {again[0]!r}\n")
        assert corral_command('sessions', 'delete', again[1], '--store', store, '--tenant', 'acme') == (0, f'deleted the stored session {again[1]!r}\n', '')
        assert corral_command('sessions', 'list', *remote) == (0, '(no stored sessions)\n', '')
        assert corral_command('sessions', 'expire', '--retention', '1h', '--store', store) == (0, '', 'deleted 0 stored sessions untouched for 3600 seconds\n')
        assert corral_command('sessions', 'expire', '--retention', '0', '--store', store)[0] == 2


def test_retention_deletes_untouched_sessions_and_counts_them(tmp_path):
    with running_server(tmp_path, '--retention', '1') as server:
        asyncio.run(stored(corral.RemotePool(server.url), 'x = 1'))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and 'corral_sessions_expired_total 1.0' not in httpx.get(f'http://127.0.0.1:{server.port}/metrics').text:
            time.sleep(0.1)
        assert 'corral_sessions_expired_total 1.0' in httpx.get(f'http://127.0.0.1:{server.port}/metrics').text
        assert asyncio.run(corral.RemotePool(server.url).list_sessions()) == []
        assert ', sessions stored in sqlite:///' in server.output() and ' (kept 1 seconds untouched), 0 API keys' in server.output()
        assert 'INFO: corral serve: deleted 1 stored session untouched for 1 seconds\n' in server.output()


def test_malformed_list_and_delete_frames_are_refused_saying_what_is_wrong(tmp_path):
    from websockets.sync.client import connect

    from corral.server import protocol

    def answer(message: list) -> tuple[list, int | None]:
        with connect(server.url + protocol.PATH, compression=None) as ws:
            ws.send(protocol.encode(message))
            reply = protocol.decode(ws.recv(timeout=30))
            try:
                ws.recv(timeout=30)
            except Exception:
                pass
            return reply, ws.close_code

    with running_server(tmp_path) as server:
        version = protocol.PROTOCOL_VERSION
        assert answer([protocol.LIST]) == ([protocol.ERROR, 'SandboxError', 'the LIST frame is malformed', {}, []], protocol.CLOSE_PROTOCOL)
        assert answer([protocol.DELETE, version, 5]) == ([protocol.ERROR, 'SandboxError', 'the DELETE frame is malformed', {}, []], protocol.CLOSE_PROTOCOL)
        assert answer([protocol.LIST, 99]) == (
            [protocol.ERROR, 'SandboxError', f'this corral server speaks protocol version {version}, the client version 99: '
             'use a corral client of the same version as the server', {}, []],
            protocol.CLOSE_PROTOCOL,
        )
        assert answer([protocol.DELETE, version, 'nobody-has-it']) == (
            [protocol.ERROR, 'SandboxStateError', "no stored session with id 'nobody-has-it'", {}, []], protocol.CLOSE_ENDED
        )
        assert answer([protocol.LIST, version]) == ([protocol.SESSIONS, [], []], 1000)
