"""The app's hooks: `authenticate` decides the tenant or refuses with its own text; `ServerHooks`
are told of sessions and feeds and may refuse them; `routes` serve beside the sessions."""

from __future__ import annotations

import asyncio

import pytest
import uvicorn
from starlette.responses import PlainTextResponse
from starlette.routing import Route

import corral
from corral import RemotePool
from corral.server.app import ServerHooks, create_app

from .conftest import free_port


class Recorder(ServerHooks):
    def __init__(self) -> None:
        self.events: list[tuple] = []

    async def session_opening(self, tenant, options):
        if options.get('script_name') == 'refused.py':
            raise corral.SandboxError('tenant quota: 0 sessions left')
        if options.get('script_name') == 'bug.py':
            raise KeyError('a bug of the hook')
        self.events.append(('opening', tenant))

    async def session_opened(self, tenant, session):
        self.events.append(('opened', tenant, session.ephemeral))

    async def session_closed(self, tenant, session, seconds):
        self.events.append(('closed', tenant, session is not None, seconds >= 0))

    async def feed_starting(self, tenant, session):
        self.events.append(('feed', tenant))

    async def feed_ended(self, tenant, session, outcome, seconds, host_calls):
        self.events.append(('ended', tenant, outcome, host_calls))


async def authenticate(key):
    if key != 'k_good':
        raise corral.SandboxError('the API key is not valid')
    return 'acme'


@pytest.fixture
async def app_server(tmp_path):
    recorder = Recorder()
    routes = [Route('/healthz', lambda request: PlainTextResponse('ok'))]
    app = create_app(store=f'sqlite:///{tmp_path}/store.db', authenticate=authenticate, hooks=[recorder], routes=routes)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host='127.0.0.1', port=port, log_level='warning', lifespan='on'))
    serving = asyncio.ensure_future(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
    yield f'ws://127.0.0.1:{port}', recorder
    server.should_exit = True
    await serving


async def test_hooks_see_the_tenant_sessions_and_feeds(app_server):
    url, recorder = app_server
    async with RemotePool(url, api_key='k_good') as pool, pool.checkout() as session:
        assert await session.feed_run('f(1) + f(2)', external_lookup={'f': lambda n: n * 10}) == 30
        with pytest.raises(corral.SandboxRuntimeError):
            await session.feed_run('1/0')
    for _ in range(100):  # the server tells its hooks once the connection has ended
        if recorder.events[-1][0] == 'closed':
            break
        await asyncio.sleep(0.02)
    assert recorder.events == [
        ('opening', 'acme'),
        ('opened', 'acme', True),
        ('feed', 'acme'),
        ('ended', 'acme', 'ok', 2),
        ('feed', 'acme'),
        ('ended', 'acme', 'SandboxRuntimeError', 0),
        ('closed', 'acme', True, True),
    ]


async def test_a_refused_key_or_session_gets_the_hooks_text(app_server):
    url, _ = app_server
    for key in (None, 'k_bad'):
        with pytest.raises(corral.SandboxError) as error:
            async with RemotePool(url, api_key=key) as pool, pool.checkout():
                pass
        assert (type(error.value), str(error.value)) == (corral.SandboxError, 'the API key is not valid')
    with pytest.raises(corral.SandboxError) as error:
        async with RemotePool(url, api_key='k_good') as pool, pool.checkout(script_name='refused.py'):
            pass
    assert str(error.value) == 'tenant quota: 0 sessions left'
    with pytest.raises(corral.SandboxError) as error:
        async with RemotePool(url, api_key='k_good') as pool, pool.checkout(script_name='bug.py'):
            pass
    assert str(error.value) == "the corral server failed (KeyError); the server's log has the details"
    async with RemotePool(url, api_key='k_good') as pool, pool.checkout() as session:  # the server goes on
        assert await session.feed_run('2 + 2') == 4


async def test_routes_are_served_beside_the_sessions(app_server):
    url, _ = app_server
    import httpx

    async with httpx.AsyncClient() as client:
        response = await client.get(url.replace('ws://', 'http://') + '/healthz')
    assert (response.status_code, response.text) == (200, 'ok')
