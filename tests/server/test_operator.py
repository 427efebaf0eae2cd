"""What `corral serve` tells its operator: its start, a store it cannot use, a server open beyond
loopback with no key, every refusal; and that `corral keys` reads `$CORRAL_STORE` as it does."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time

import httpx
import pytest

import corral
from corral.worker.zygote import LAYERS

from .conftest import free_port, running_server

pytestmark = pytest.mark.slow

ALL_LAYERS = ', '.join(LAYERS)


def corral_command(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, '-m', 'corral', *args], capture_output=True, text=True, timeout=120, check=False, env={**os.environ, **(env or {})}
    )
    return done.returncode, done.stdout, done.stderr


def wait_for(server, text: str) -> str:
    deadline = time.monotonic() + 10
    while text not in server.output() and time.monotonic() < deadline:
        time.sleep(0.05)
    return server.output()


def test_a_store_that_cannot_be_used_stops_the_server_before_it_listens(tmp_path):
    started = time.monotonic()
    code, out, err = corral_command('serve', '--port', str(free_port()), '--store', f'sqlite:///{tmp_path}/missing/folder/s.db')
    assert (code, out, err) == (
        1, '', f'corral serve: error: the store cannot be used: cannot create the session store {tmp_path}/missing/folder/s.db: No such file or directory\n'
    )
    postgres = ('serve', '--port', str(free_port()), '--store', 'postgresql://corral@127.0.0.1:9/corral')
    code, out, err = corral_command(*postgres, env={'CORRAL_STATE_KEY': 'ab' * 32})
    assert (code, out, err) == (
        1, '', 'corral serve: error: the store cannot be used: cannot reach the PostgreSQL session store at postgresql://corral@127.0.0.1:9/corral: connection refused\n'
    )
    assert time.monotonic() - started < 60


def test_a_postgresql_store_without_a_state_key_stops_the_server(postgres_server):
    code, out, err = corral_command('serve', '--port', str(free_port()), '--store', postgres_server.url)  # every checkout would be refused
    assert (code, out, err) == (
        2, '', 'corral serve: error: a PostgreSQL session store keeps no state key: pass Pool(state_key=...), 32 random bytes '
        '(e.g. from secrets.token_bytes(32)) kept outside the database, the same on every machine that shares the store '
        '(--state-key-file, or $CORRAL_STATE_KEY in hex digits)\n'
    )


def test_the_start_is_logged_and_every_refused_key_too(tmp_path):
    store = f'sqlite:///{tmp_path}/store.db'
    code, key, _ = corral_command('keys', 'create', '--tenant', 'acme', env={'CORRAL_STORE': store})
    assert code == 0
    key_id = key.strip().split('_')[1]
    with running_server(tmp_path, store=store) as server:
        wait_for(server, 'Uvicorn running')
        assert (
            f'INFO: corral serve: serving on ws://127.0.0.1:{server.port}, sessions stored in {store}, 1 API key, lockdown layers: {ALL_LAYERS}\n'
        ) in server.output()
        assert 'WARNING' not in server.output()

        async def refused(api_key: str | None) -> None:
            async with corral.RemotePool(server.url, api_key=api_key) as pool:
                with pytest.raises(corral.SandboxAuthError):
                    async with pool.checkout():
                        pass

        for api_key in (None, 'corral_x', f'corral_{key_id}_{"A" * 43}', f'corral_{"0" * 16}_{"A" * 43}'):
            asyncio.run(refused(api_key))
        wait_for(server, f'no key has the id {"0" * 16}')
        lines = [line for line in server.output().splitlines() if 'refused' in line]
        assert lines == [
            'INFO: corral serve: refused (API key): no API key was given; this server needs one',
            'INFO: corral serve: refused (API key): the API key is not shaped like a corral key',
            f"INFO: corral serve: refused (API key): the key {key_id} of tenant 'acme' came with a wrong secret",
            f'INFO: corral serve: refused (API key): no key has the id {"0" * 16}',
        ]
        assert f'"{key.strip().split("_")[2]}' not in server.output()  # the secret is never logged


def test_a_quota_refusal_is_logged(tmp_path):
    store = f'sqlite:///{tmp_path}/store.db'
    _, key, _ = corral_command('keys', 'create', '--tenant', 'acme', '--store', store)
    assert corral_command('tenants', 'set', 'acme', '--concurrent-sessions', '0', env={'CORRAL_STORE': store})[0] == 0
    with running_server(tmp_path, store=store) as server:

        async def refused() -> None:
            async with corral.RemotePool(server.url, api_key=key.strip()) as pool:
                with pytest.raises(corral.SandboxQuotaError):
                    async with pool.checkout():
                        pass

        asyncio.run(refused())
        output = wait_for(server, 'refused (quota)')
        assert "INFO: corral serve: refused (quota): tenant 'acme' has 0 sessions open; its quota is 0 (concurrent_sessions)" in output


def test_beyond_loopback_with_no_key_and_skipped_layers_it_warns(tmp_path):
    with running_server(tmp_path, '--host', '0.0.0.0', '--skip-layers', 'uid') as server:
        output = wait_for(server, 'Uvicorn running')
        layers = ', '.join(layer for layer in LAYERS if layer != 'uid')
        assert re.search(
            rf'INFO: corral serve: serving on ws://0\.0\.0\.0:{server.port}, sessions stored in sqlite:///\S+, 0 API keys, '
            rf'lockdown layers: {layers} \(skipped: uid\)\n'
            r'WARNING: corral serve: scripts run without the lockdown layers uid, so they are less contained \(--skip-layers\)\n'
            r'WARNING: corral serve: listening on 0\.0\.0\.0, beyond loopback, and the store has no API key: every caller is refused '
            r'until one is made \(corral keys create --tenant NAME, with this store: --store or \$CORRAL_STORE\)\n',
            output,
        ), output
        ready = httpx.get(f'http://127.0.0.1:{server.port}/readyz')
        assert (ready.status_code, ready.text) == (200, 'ready')


def test_keys_and_tenants_read_corral_store(tmp_path):
    store = f'sqlite:///{tmp_path}/store.db'
    assert corral_command('keys', 'create', '--tenant', 'acme', env={'CORRAL_STORE': store})[0] == 0
    code, listing, _ = corral_command('keys', 'list', '--store', store)
    assert code == 0 and listing.splitlines()[1].split()[1] == 'acme'
    assert corral_command('tenants', 'set', 'acme', '--stored-bytes', '1KiB', env={'CORRAL_STORE': store})[0] == 0
    assert corral_command('tenants', 'list', '--store', store) == (
        0, 'TENANT  CONCURRENT_SESSIONS  STORED_BYTES  CPU_SECONDS_PER_HOUR\nacme    default              1024          default\n', ''
    )


def test_a_negative_count_of_checkpoints_is_refused_before_the_server_starts(tmp_path):
    code, out, err = corral_command('serve', '--port', str(free_port()), '--checkpoints', '-1', '--store', f'sqlite:///{tmp_path}/s.db')
    assert (code, out, err.splitlines()[-1]) == (2, '', 'corral serve: error: --checkpoints must be 0 or more, not -1')
