"""The server's /metrics, /healthz and /readyz beside its sessions: RemotePool feeds counted on the server."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

import corral
from corral.server.app import create_app
from corral.server.metrics import Metrics, ops_routes, pool_readiness

from .conftest import serving_app

pytest.importorskip('uvicorn')


@contextlib.asynccontextmanager
async def serving(metrics: Metrics, store: str) -> AsyncIterator[tuple[str, corral.Pool]]:
    """The server app with the operations routes mounted, on uvicorn on a loopback port."""
    pool = corral.Pool(store=store, observer=metrics, warm_workers=0)
    app = None

    def draining() -> bool:
        return app.state.corral.draining

    app = create_app(pool=pool, routes=ops_routes(metrics, ready=pool_readiness(pool, draining)))
    async with serving_app(app, pool) as address:
        yield address, pool


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.name.endswith(('_created', '_bucket', '_sum'))
    }


async def test_remote_feeds_and_the_host_calls_sent_to_the_client_are_counted_on_the_server(tmp_path):
    calls = []

    async def lookup_price(item: str) -> int:
        calls.append(item)
        return len(item)

    metrics = Metrics()
    async with serving(metrics, f'sqlite:///{tmp_path}/store.db') as (address, pool):
        async with httpx.AsyncClient(base_url=f'http://{address}') as http:
            assert ((await http.get('/healthz')).status_code, (await http.get('/readyz')).text) == (200, 'ready')
            async with corral.RemotePool(f'ws://{address}') as remote:
                async with remote.checkout() as session:
                    code = 'import asyncio\nsum(await asyncio.gather(*(lookup_price(i) for i in ["a", "bb", "ccc"])))'
                    assert await session.feed_run(code, external_lookup={'lookup_price': lookup_price}) == 6
                    with pytest.raises(corral.SandboxRuntimeError):
                        await session.feed_run('lookup_price(1) + "x"', external_lookup={'lookup_price': lookup_price})
                    during = samples((await http.get('/metrics')).text)
            for _ in range(500):  # the server ends the session once it sees the connection close
                if metrics.registry.get_sample_value('corral_sessions_active') == 0.0:
                    break
                await asyncio.sleep(0.01)
            after = samples((await http.get('/metrics')).text)
    assert sorted(calls) == ['a', 'bb', 'ccc']  # run in the client, once each
    assert during[('corral_sessions_active', ())] == 1.0
    assert after == {
        ('corral_sessions_active', ()): 0.0,
        ('corral_feeds_total', (('outcome', 'ok'),)): 1.0,
        ('corral_feeds_total', (('outcome', 'error'),)): 1.0,
        ('corral_errors_total', (('kind', 'runtime'),)): 1.0,
        ('corral_host_calls_total', ()): 3.0,  # the second feed's call is never awaited, so never made
        ('corral_worker_starts_total', ()): 1.0,
        ('corral_feed_seconds_count', ()): 2.0,
        ('corral_type_check_seconds_count', ()): 0.0,
        ('corral_sessions_expired_total', ()): 0.0,  # the pool has no retention
        ('corral_checkpoints', ()): 0.0,  # an ephemeral session keeps none
        ('corral_checkpoint_bytes', ()): 0.0,
    }


def test_corral_serve_answers_the_operations_routes_and_counts_its_feeds(tmp_path):
    """`corral serve` itself mounts /metrics, /healthz and /readyz, with no key asked."""
    from .conftest import running_server

    async def run(server) -> tuple[int, str, int, dict]:
        async with corral.RemotePool(server.url) as pool:
            async with pool.checkout() as session:
                assert await session.feed_run('1 + 1') == 2
        async with httpx.AsyncClient(base_url=f'http://127.0.0.1:{server.port}') as http:
            health, ready, metrics = [await http.get(path) for path in ('/healthz', '/readyz', '/metrics')]
        return health.status_code, health.text, ready.status_code, samples(metrics.text)

    with running_server(tmp_path) as server:
        health, text, ready, counted = asyncio.run(run(server))
    assert (health, text, ready) == (200, 'ok', 200)
    assert counted[('corral_feeds_total', (('outcome', 'ok'),))] == 1.0
    assert counted[('corral_sessions_active', ())] == 0.0


@pytest.mark.parametrize(
    ('variable', 'value', 'error'),
    [
        ('CORRAL_STATE_KEY', 'REPLACE-ME-WITH-64-HEX-DIGITS', 'CORRAL_STATE_KEY must be 32 or more hex digits (16 bytes or more; 64 digits from secrets.token_hex(32) are best)'),
        ('CORRAL_STATE_KEY', 'abcd', 'CORRAL_STATE_KEY must be 32 or more hex digits (16 bytes or more; 64 digits from secrets.token_hex(32) are best)'),
        (
            'CORRAL_STORE',
            'ftp://x',
            "--store: unknown store URL 'ftp://x': the accepted store URLs are 'sqlite:///absolute/path.db', "
            "'sqlite:relative/path.db', and 'postgresql://user:password@host:port/database' (or 'postgres://...')",
        ),
    ],
)
def test_corral_serve_reads_the_store_and_the_state_key_from_the_environment(variable, value, error):
    """As deploy/'s Deployment gives them from its Secret; a placeholder key is refused before the server listens."""
    environment = {**os.environ, variable: value}
    done = subprocess.run([sys.executable, '-m', 'corral', 'serve', '--port', '1'], capture_output=True, text=True, timeout=60, check=False, env=environment)
    assert (done.returncode, done.stdout, done.stderr) == (2, '', f'corral serve: error: {error}\n')
