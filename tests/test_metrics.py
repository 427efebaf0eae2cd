"""Prometheus metrics counted from a real pool's events, and the health and readiness probes."""

import asyncio
import ast
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette

import corral
from corral.server.metrics import Metrics, error_kind, ops_routes, pool_readiness

STUBS = 'async def get(x: int) -> int: ...\ndef approve(what: str) -> bool: ...\n'


async def get(x: int) -> int:
    return x * 10


def approve(what: str) -> bool:
    raise corral.Deferred({'approve': what})


async def scrape(app: Starlette, accept: str | None = None) -> tuple[httpx.Response, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    """GET /metrics through the ASGI app: the response, and each sample's value by (name, labels)."""
    headers = {'accept': accept} if accept else {}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url='http://corral') as client:
        response = await client.get('/metrics', headers=headers)
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
        if not sample.name.endswith('_created')
    }
    return response, samples


async def always_ready() -> bool:
    return True


async def test_metrics_count_the_feeds_calls_errors_and_workers_of_real_sessions():
    metrics = Metrics()
    app = Starlette(routes=ops_routes(metrics, ready=always_ready))
    lookup = {'get': get, 'approve': approve}
    async with corral.Pool(warm_workers=0, observer=metrics) as pool:
        with pytest.raises(corral.StubError):
            async with pool.checkout(type_check=True, type_check_stubs='def f() -> Order: ...\n'):
                pass
        async with pool.checkout(type_check=True, type_check_stubs=STUBS) as session:
            code = 'import asyncio\nsum(await asyncio.gather(get(1), get(2), get(3)))'
            assert await session.feed_run(code, external_lookup=lookup) == 60
            with pytest.raises(corral.SandboxTypingError):
                await session.feed_run('get("a")', external_lookup=lookup)
            with pytest.raises(corral.SandboxRuntimeError):
                await session.feed_run('raise ValueError("no")', external_lookup=lookup)
            _, during = await scrape(app)
            assert during[('corral_sessions_active', ())] == 1.0
        async with pool.checkout(limits=corral.Limits(host_calls=2)) as session:
            with pytest.raises(corral.SandboxPaused) as paused:
                await session.feed_run('approve("refund")', external_lookup=lookup)
            assert await session.resume({paused.value.calls[0].call_id: True}) is True
            with pytest.raises(corral.SandboxLimitError):
                await session.feed_run('for i in range(3):\n    await get(i)', external_lookup=lookup)

    response, samples = await scrape(app)
    assert response.status_code == 200
    assert response.headers['content-type'] == 'text/plain; version=0.0.4; charset=utf-8'
    histograms = {key: value for key, value in samples.items() if key[0].endswith(('_bucket', '_sum'))}
    assert {key: value for key, value in samples.items() if key not in histograms} == {
        ('corral_sessions_active', ()): 0.0,
        ('corral_feeds_total', (('outcome', 'ok'),)): 2.0,
        ('corral_feeds_total', (('outcome', 'paused'),)): 1.0,
        ('corral_feeds_total', (('outcome', 'error'),)): 3.0,
        ('corral_errors_total', (('kind', 'stub'),)): 1.0,
        ('corral_errors_total', (('kind', 'typing'),)): 1.0,
        ('corral_errors_total', (('kind', 'runtime'),)): 1.0,
        ('corral_errors_total', (('kind', 'limit'),)): 1.0,
        # 3 gathered, 1 deferred, 2 within the host_calls limit of the loop (its third is refused in the worker)
        ('corral_host_calls_total', ()): 6.0,
        ('corral_feed_seconds_count', ()): 6.0,
        ('corral_worker_starts_total', ()): 2.0,
        ('corral_type_check_seconds_count', ()): 3.0,
        ('corral_checkpoints', ()): 0.0,  # ephemeral sessions keep none
        ('corral_checkpoint_bytes', ()): 0.0,
        ('corral_sessions_expired_total', ()): 0.0,  # the pool has no retention
    }
    assert samples[('corral_feed_seconds_bucket', (('le', '+Inf'),))] == 6.0
    assert samples[('corral_type_check_seconds_bucket', (('le', '+Inf'),))] == 3.0
    assert samples[('corral_feed_seconds_sum', ())] > 0.0
    assert [key[1][0][1] for key in samples if key[0] == 'corral_feed_seconds_bucket'] == [
        '0.005', '0.01', '0.025', '0.05', '0.1', '0.25', '0.5', '1.0', '2.5', '5.0', '10.0', '30.0', '60.0', '300.0', '+Inf'
    ]


async def test_warm_workers_count_as_worker_starts():
    metrics = Metrics()
    async with corral.Pool(warm_workers=2, max_warm_workers=2, observer=metrics) as pool:
        async with pool.checkout() as session:
            assert await session.feed_run('1 + 1') == 2
            await pool._refill
    assert metrics.registry.get_sample_value('corral_worker_starts_total') == 3.0  # the checkout's worker, then two kept warm


async def test_metrics_speak_openmetrics_when_the_scraper_asks():
    metrics = Metrics()
    metrics.worker_started()
    app = Starlette(routes=ops_routes(metrics, ready=always_ready))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url='http://corral') as client:
        response = await client.get('/metrics', headers={'accept': 'application/openmetrics-text; version=1.0.0'})
    assert response.headers['content-type'].startswith('application/openmetrics-text; version=1.0.0')
    assert 'corral_worker_starts_total 1.0\n' in response.text
    assert response.text.endswith('# EOF\n')


def test_error_kinds_are_the_exception_names_in_snake_case():
    assert [
        error_kind(error)
        for error in (
            corral.SandboxTypingError('x'),
            corral.SandboxSessionBusyError('x'),
            corral.SandboxLimitError('x', limit='wall_time', value=1),
            corral.StubError('x'),
            asyncio.CancelledError(),
            OSError('the zygote process exited'),
        )
    ] == ['typing', 'session_busy', 'limit', 'stub', 'cancelled', 'host']


async def probe(ready, path: str) -> tuple[int, str]:
    app = Starlette(routes=ops_routes(Metrics(), ready=ready))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url='http://corral') as client:
        response = await client.get(path)
    return response.status_code, response.text


async def test_readyz_says_what_the_readiness_check_says():
    draining = False

    async def ready() -> bool:
        return not draining

    assert await probe(ready, '/readyz') == (200, 'ready')
    draining = True
    assert await probe(ready, '/readyz') == (503, 'not ready')
    assert await probe(ready, '/healthz') == (200, 'ok')

    async def reasoned() -> bool | str:
        return 'the server is draining'

    assert await probe(reasoned, '/readyz') == (503, 'not ready: the server is draining')


async def test_a_readiness_check_that_fails_or_hangs_is_not_ready():
    async def broken() -> bool:
        raise ConnectionRefusedError('the store is unreachable')

    async def hanging() -> bool:
        await asyncio.Event().wait()
        return True

    assert await probe(broken, '/readyz') == (503, 'not ready: the readiness check failed (ConnectionRefusedError: the store is unreachable)')
    assert await probe(hanging, '/readyz') == (503, 'not ready: the readiness check took longer than 0.8 seconds')


def test_the_host_layer_imports_no_metrics_library():
    host = Path(corral.__file__).parent / 'host'
    imported = set()
    for path in host.glob('*.py'):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                imported.add('.' * node.level + (node.module or ''))
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
    assert not {name for name in imported if name.startswith(('..server', 'corral.server', 'prometheus_client', 'starlette'))}
    code = "import sys, corral\npool = corral.Pool()\nprint(sorted(m for m in ('prometheus_client', 'corral.server.metrics', 'starlette') if m in sys.modules))"
    ran = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
    assert ran.stdout == '[]\n'


async def test_a_pool_is_ready_when_its_zygote_runs_its_store_answers_and_it_does_not_drain(tmp_path):
    draining = False
    async with corral.Pool(store=f'sqlite:///{tmp_path}/sessions.db') as pool:
        ready = pool_readiness(pool, lambda: draining)
        assert await ready() == 'the sandbox workers are starting'  # not started: the check starts it
        await pool.start()
        assert (pool.started, await ready()) == (True, True)
        os.kill(pool._zygote._process.pid, signal.SIGKILL)
        pool._zygote._process.wait()
        assert (pool.started, await ready()) == (False, 'the sandbox workers are starting')  # the zygote died: started again
        await pool.start()
        assert await ready() is True
        draining = True
        assert await ready() == 'the server is draining'
        draining = False
    assert await ready() == 'the sandbox workers are starting'  # closed: the start it tries fails
    await asyncio.sleep(0)
    assert await ready() == 'the sandbox workers cannot start: the pool is closed'


async def test_a_pool_whose_store_is_unreachable_is_not_ready():
    store = corral.PostgresStore('postgresql://corral@127.0.0.1:9/corral', connect_timeout=0.5)
    async with corral.Pool(store=store, state_key=b'k' * 32) as pool:
        await pool.start()
        ready = pool_readiness(pool, lambda: False)
        unreachable = 'the store does not answer: cannot reach the PostgreSQL session store at postgresql://corral@127.0.0.1:9/corral: connection refused'
        assert await ready() == unreachable
        assert await probe(ready, '/readyz') == (503, f'not ready: {unreachable}')


async def test_metrics_count_the_live_checkpoints_and_where_stored_sessions_were_loaded_from(tmp_path):
    metrics = Metrics()
    app = Starlette(routes=ops_routes(metrics, ready=always_ready))
    async with corral.Pool(warm_workers=0, observer=metrics, store=f'sqlite:///{tmp_path}/store.db') as pool:
        async with pool.checkout(ephemeral=False) as session:
            await session.feed_run('x = 1')
            session_id = session.session_id
        _, samples = await scrape(app)
        assert samples[('corral_checkpoints', ())] == 1
        assert samples[('corral_checkpoint_bytes', ())] == pool._checkpoints.memory > 0
        async with pool.checkout(session_id=session_id) as session:
            assert await session.feed_run('x') == 1
        _, samples = await scrape(app)
        assert samples[('corral_loads_total', (('source', 'checkpoint'),))] == 1
        assert samples[('corral_checkpoints', ())] == 1  # kept again as it closed
        await pool.aclose()
        _, samples = await scrape(app)
        assert samples[('corral_checkpoints', ())] == 0 and samples[('corral_checkpoint_bytes', ())] == 0
