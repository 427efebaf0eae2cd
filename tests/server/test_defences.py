"""What `corral serve` refuses before a connection reaches a session, and what it keeps from its
tenants: web pages' WebSockets, half-open HTTP requests, frames a tenant may not send, keys
revoked while their connections are open, and the details of its store's failures. Each against
a real `corral serve` process."""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import time

import asyncpg
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

import corral
from corral import RemotePool
from corral.server import protocol

from store.postgres_server import drop_tables

from .conftest import free_port, running_server
from .test_replicas import key_file

REFUSAL = (
    'the API key was refused: it is unknown, revoked, or not a corral key (those look like '
    'corral_<16 hex digits>_<43 characters>); ask the server\'s operator for a key, made with '
    '`corral keys create --tenant NAME`'
)
STORE_FAILED = "the corral server's session store failed; try again later (the server's log has the details)"
KEY = re.compile(r'corral_([0-9a-f]{16})_([A-Za-z0-9_-]{43})')
OPEN = protocol.encode([protocol.OPEN, protocol.PROTOCOL_VERSION, {}])


async def exchange(url: str, *frames: bytes) -> tuple[list[list], int | None]:
    """Send `frames` on a new connection; what the server sent back, and its close code."""
    received = []
    async with connect(url + protocol.PATH, compression=None, max_size=None) as ws:
        for data in frames:
            await ws.send(data)
        with contextlib.suppress(ConnectionClosed):
            async for data in ws:
                received.append(protocol.decode(data))
        return received, ws.close_code


def errors(received: list[list]) -> list[tuple[str, str]]:
    return [(message[1], message[2]) for message in received if message[0] == protocol.ERROR]


async def opened(url: str, **headers: str) -> list:
    """Open a session on a new connection; the server's first answer."""
    async with connect(url + protocol.PATH, compression=None, additional_headers=headers) as ws:
        await ws.send(OPEN)
        return protocol.decode(await ws.recv())


# ----- 9: cross-site WebSocket hijacking ---------------------------------------------------------


async def test_a_web_page_cannot_open_a_session(tmp_path):
    """A page the developer visits opens a WebSocket to the loopback server with its origin: the
    upgrade is refused (403) before it reaches a session, pages on other loopback ports too; a
    client that sends no origin, and an origin the operator allows, open sessions."""
    with running_server(tmp_path, '--allow-origin', 'https://app.example.com') as server:
        for origin in ('https://evil.example', 'http://127.0.0.1:3000', 'http://localhost:8765', 'null'):
            with pytest.raises(InvalidStatus) as info:
                async with connect(server.url + protocol.PATH, origin=origin):
                    pass
            assert info.value.response.status_code == 403
        assert (await opened(server.url))[0] == protocol.OPENED
        async with connect(server.url + protocol.PATH, origin='https://app.example.com') as ws:
            await ws.send(OPEN)
            assert protocol.decode(await ws.recv())[0] == protocol.OPENED
        async with RemotePool(server.url) as pool, pool.checkout() as session:
            assert await session.feed_run('1 + 1') == 2


# ----- 7: half-open HTTP upgrades ----------------------------------------------------------------


def half_open(port: int, host: str = '127.0.0.1') -> socket.socket:
    """A connection that sends the start of an upgrade request and never its end."""
    sock = socket.create_connection(('127.0.0.1', port), source_address=(host, 0))
    sock.sendall(b'GET /session HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n')
    return sock


def answer(sock: socket.socket, seconds: float) -> bytes:
    """What the server sends on `sock` until it closes it (within `seconds`)."""
    sock.settimeout(seconds)
    data = b''
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(4096):
            data += chunk
    return data


@pytest.mark.slow
async def test_connections_that_never_finish_their_upgrade_are_bounded_and_timed_out(tmp_path):
    """Half-open upgrade requests from one address: past `--max-handshakes-per-address` the next
    is answered 503 at once, another address still opens sessions, and after
    `--handshake-timeout` seconds the server closes them, so the address opens sessions again."""
    options = ('--handshake-timeout', '4', '--max-handshakes-per-address', '8')
    with running_server(tmp_path, *options) as server:
        async with RemotePool(server.url) as pool, pool.checkout() as session:  # the server is warm: nothing holds its loop
            assert await session.feed_run('1') == 1
        held = [half_open(server.port) for _ in range(8)]
        started = time.monotonic()
        try:
            refused = half_open(server.port)
            text = b"too many connections from 127.0.0.1 wait to send their request (8, the server's limit per address); open fewer at once\n"
            assert answer(refused, 5) == (
                b'HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n'
                b'content-length: %d\r\n\r\n%s' % (len(text), text)
            )
            with pytest.raises(InvalidStatus) as info:
                await opened(server.url)
            assert info.value.response.status_code == 503
            async with connect(server.url + protocol.PATH, compression=None, local_addr=('127.0.0.2', 0)) as ws:
                await ws.send(OPEN)
                assert protocol.decode(await ws.recv())[0] == protocol.OPENED
            assert [answer(sock, 10) for sock in held] == [b''] * 8  # closed, with nothing said
            assert time.monotonic() - started >= 4
            async with RemotePool(server.url) as pool, pool.checkout() as session:
                assert await session.feed_run('1 + 1') == 2
        finally:
            for sock in held:
                sock.close()


def test_the_handshake_bounds_must_be_positive(tmp_path):
    from corral.server.listener import guarded_http

    for options in ({'handshake_timeout': 0}, {'max_per_address': 0}, {'handshake_timeout': float('nan')}):
        with pytest.raises(ValueError) as info:
            guarded_http(**options)
        assert str(info.value) == 'handshake_timeout and max_per_address must be above 0'


@contextlib.asynccontextmanager
async def _serving(app):
    """`app` served by uvicorn with corral's `WebSocketProtocol` on a free loopback port, until the
    block ends: yields the uvicorn server and the port."""
    import uvicorn

    from corral.server.listener import WebSocketProtocol

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host='127.0.0.1', port=port, ws=WebSocketProtocol, log_level='warning', lifespan='off'))
    task = asyncio.get_running_loop().create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        yield server, port
    finally:
        server.should_exit = True
        await task


async def test_the_direct_link_writes_at_once_and_takes_messages_as_they_are_parsed():
    """`WebSocketProtocol`'s `DirectLink`: a write goes out with no task between (and is refused,
    sending nothing, once the app has closed); `take` gets each binary message while none waits
    for `receive`, which gets those it leaves, in order, and text frames."""
    from corral.server.listener import DIRECT_LINK

    taken, received, written = [], [], []

    async def app(scope, receive, send):
        if scope['type'] != 'websocket':
            return
        link = scope['extensions'][DIRECT_LINK]
        await receive()
        await send({'type': 'websocket.accept'})
        written.append(link.write(b'at once'))
        link.take = lambda data: data.startswith(b'take') and not taken.append(data)
        while len(received) < 3:
            message = await receive()
            received.append(message.get('bytes') or message.get('text'))
        await send({'type': 'websocket.close', 'code': 1000})
        written.append(link.write(b'after the close'))

    async with _serving(app) as (_, port), connect(f'ws://127.0.0.1:{port}') as client:
        assert await asyncio.wait_for(client.recv(), 10) == b'at once'
        for data in (b'take 1', b'leave 1'):
            await client.send(data)
        for _ in range(200):  # what `take` left waits for `receive` no more
            if received:
                break
            await asyncio.sleep(0.005)
        for data in (b'take 2', 'take 3', b'leave 2'):
            await client.send(data)
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(client.recv(), 10)
    assert (taken, received, written) == ([b'take 1', b'take 2'], [b'leave 1', 'take 3', b'leave 2'], [True, False])


async def test_a_client_that_sends_faster_than_the_app_takes_is_held_to_two_messages():
    """`WebSocketProtocol` reads on while the app keeps up (uvicorn paused and resumed the socket
    around every message); a client whose messages the app does not take is paused once two wait,
    and what it sends meanwhile stays in its socket until the app takes them, in order."""
    from corral.server.listener import WebSocketProtocol

    go, got = asyncio.Event(), []

    async def app(scope, receive, send):
        if scope['type'] != 'websocket':
            return
        await receive()
        await send({'type': 'websocket.accept'})
        await go.wait()
        while True:
            message = await receive()
            if message['type'] == 'websocket.disconnect':
                return
            got.append(message['bytes'])
            if len(got) == 6:
                await send({'type': 'websocket.send', 'bytes': b'took six'})

    async with _serving(app) as (server, port):
        try:
            async with connect(f'ws://127.0.0.1:{port}') as client:
                [protocol] = [c for c in server.server_state.connections if isinstance(c, WebSocketProtocol)]

                async def sent(data: bytes, queued: int) -> None:
                    await client.send(data)
                    for _ in range(200):
                        if protocol.queue.qsize() == queued:
                            return
                        await asyncio.sleep(0.005)

                await sent(b'1', 1)
                assert (protocol.queue.qsize(), protocol.transport.is_reading()) == (1, True)
                await sent(b'2', 2)
                assert (protocol.queue.qsize(), protocol.transport.is_reading()) == (2, False)
                for data in (b'3', b'4', b'5', b'6'):
                    await client.send(data)
                await asyncio.sleep(0.1)
                assert (protocol.queue.qsize(), protocol.transport.is_reading()) == (2, False)  # the rest wait in the socket
                go.set()
                assert await asyncio.wait_for(client.recv(), 10) == b'took six'
                assert got == [b'1', b'2', b'3', b'4', b'5', b'6']
                assert protocol.transport.is_reading()
        finally:
            go.set()


# ----- 10: revoked keys --------------------------------------------------------------------------


async def test_a_revoked_key_ends_the_connections_it_opened(tmp_path):
    """A key revoked while its sessions are open: their next request (after `KEY_RECHECK` seconds)
    is refused with the client's auth error and the connection ends; so is a connection opened
    without a key once the first key is made. A key still valid goes on."""
    store = f'sqlite:///{tmp_path}/store.db'
    with running_server(tmp_path) as server:
        async with RemotePool(server.url) as anonymous, anonymous.checkout() as keyless:
            assert await keyless.feed_run('1') == 1
            async with corral.KeyRing(store) as keys:
                acme, kept = await keys.create('acme'), await keys.create('acme')
                async with RemotePool(server.url, api_key=acme) as pool, RemotePool(server.url, api_key=kept) as other:
                    async with pool.checkout() as session, other.checkout() as still:
                        assert await session.feed_run('x = 1\nx') == 1
                        await keys.revoke(KEY.fullmatch(acme)[1])
                        await asyncio.sleep(1.2)
                        with pytest.raises(corral.SandboxAuthError) as info:
                            await session.feed_run('x')
                        assert info.value.display() == REFUSAL
                        with pytest.raises(corral.SandboxAuthError) as info:
                            await keyless.feed_run('2')
                        assert info.value.display() == REFUSAL
                        assert await still.feed_run('3') == 3
    assert 'Traceback' not in server.output()


async def test_a_quota_changed_while_sessions_are_open_counts_at_their_next_feed(tmp_path):
    """The server reads a tenant's settings once per `SETTINGS_TTL` (1 s), not before every feed: an
    operator's change made in another process still counts within that time."""
    store = f'sqlite:///{tmp_path}/store.db'
    with running_server(tmp_path) as server:
        async with RemotePool(server.url) as pool, pool.checkout() as session:
            assert await session.feed_run('x = 1\nx') == 1
            async with corral.Quotas(store) as quotas:
                await quotas.set('', cpu_seconds_per_hour=0)
                await asyncio.sleep(1.2)
                with pytest.raises(corral.SandboxQuotaError) as info:
                    await session.feed_run('x')
                assert re.fullmatch(
                    r"tenant '' used \d+\.\d CPU seconds in the last hour; its quota is 0 \(cpu_seconds_per_hour\)", info.value.display()
                ), info.value.display()
                await quotas.set('', cpu_seconds_per_hour=None)
                await asyncio.sleep(1.2)
                assert await session.feed_run('x + 1') == 2


# ----- 11: store failures ------------------------------------------------------------------------


@pytest.mark.slow
async def test_a_store_failure_does_not_show_tenants_the_database(tmp_path, postgres_server):
    """The store's own error names the database's user, host, port and name: a client gets a text
    naming none of them, and the server's log has the details. (A store unreachable as the server
    starts stops it before it listens: see test_operator.py.) Here the store fails as a feed's state
    is written."""
    url = postgres_server.url
    await drop_tables(url)
    with running_server(tmp_path, '--state-key-file', key_file(tmp_path), store=url) as server:
        async with RemotePool(server.url) as pool, pool.checkout(ephemeral=False) as session:
            assert await session.feed_run('x = 1\nx') == 1
            database = await asyncpg.connect(url)
            try:
                await database.execute('ALTER TABLE corral_records RENAME TO corral_records_away')
                with pytest.raises(corral.SandboxStoreError) as info:
                    await session.feed_run('x + 1')
                assert info.value.display() == STORE_FAILED
            finally:
                await database.execute('ALTER TABLE corral_records_away RENAME TO corral_records')
                await database.close()
        assert 'relation "corral_records" does not exist' in server.output()


# ----- 5: large frames ---------------------------------------------------------------------------

#: An OPEN frame of 1.3 MB whose options hold 330,000 small maps (no option takes them).
BIG_OPEN = protocol.encode([protocol.OPEN, protocol.PROTOCOL_VERSION, {'os_access': [{'a': 1}] * 330_000}])


async def test_a_tenant_over_its_quota_is_refused_before_its_frame_is_decoded(tmp_path):
    """A tenant with no session left to open sends a large OPEN cut short: it gets its quota's
    refusal, not the malformed frame's, since the frame's options are never decoded."""
    store = f'sqlite:///{tmp_path}/store.db'
    with running_server(tmp_path) as server:
        async with corral.KeyRing(store) as keys, corral.Quotas(store) as quotas:
            acme = await keys.create('acme')
            await quotas.set('acme', concurrent_sessions=0)
        async with connect(server.url + protocol.PATH, compression=None, additional_headers={'authorization': f'Bearer {acme}'}) as ws:
            await ws.send(BIG_OPEN[:-100])
            assert protocol.decode(await ws.recv()) == [
                protocol.ERROR, 'SandboxQuotaError', "tenant 'acme' has 0 sessions open; its quota is 0 (concurrent_sessions)",
                {'tenant': 'acme', 'quota': 'concurrent_sessions', 'limit': 0, 'used': 0}, [],
            ]
            with pytest.raises(ConnectionClosed):
                await ws.recv()
            assert ws.close_code == protocol.CLOSE_ENDED


async def test_large_frames_are_decoded_without_holding_up_other_sessions(tmp_path):
    """Five connections each send an OPEN of 330,000 small maps (which decoded on the event loop
    held every other session's feeds for 3 s): another session's feeds are answered while they
    are decoded, and each big frame then gets its own error."""
    with running_server(tmp_path) as server:
        async with RemotePool(server.url) as pool, pool.checkout() as session:
            assert await session.feed_run('1 + 1') == 2
            async with contextlib.AsyncExitStack() as stack:
                big = [await stack.enter_async_context(connect(server.url + protocol.PATH, compression=None)) for _ in range(5)]
                for ws in big:
                    await ws.send(BIG_OPEN)
                answers = [asyncio.ensure_future(ws.recv()) for ws in big]
                for _ in range(3):
                    assert await session.feed_run('1 + 1') == 2
                assert not any(answer.done() for answer in answers)  # still being decoded meanwhile
                for answer in answers:
                    assert protocol.decode(await answer)[:3] == [
                        protocol.ERROR, 'SandboxError', "the OPEN frame is malformed (os_access is malformed)",
                    ]


# ----- 6: mount uploads --------------------------------------------------------------------------


def mounting(files: int, size: int = 0) -> bytes:
    """An OPEN frame with an overlay mount of `files` files of `size` bytes each."""
    mount = ['/data', 'overlay', [[f'f{index}', b'x' * size, 0.0] for index in range(files)], []]
    return protocol.encode([protocol.OPEN, protocol.PROTOCOL_VERSION, {'mounts': [mount]}])


async def test_mounts_are_bounded_per_session_and_per_tenant(tmp_path):
    """A session's mounts hold at most `--max-mount-files` files and folders; the mounts of a
    tenant's open sessions together at most `--max-tenant-mount-files` and `--max-tenant-mount-bytes`,
    counted again as its sessions close. Past a bound the OPEN is refused, naming it."""
    options = ('--max-mount-files', '10', '--max-tenant-mount-files', '15', '--max-tenant-mount-bytes', '1000')
    with running_server(tmp_path, *options) as server:
        received, code = await exchange(server.url, mounting(11))
        assert (errors(received), code) == (
            [('ValueError', 'the mounts hold 11 files and folders; a session of this server may upload 10 (corral serve --max-mount-files)')],
            protocol.CLOSE_ENDED,
        )
        async with connect(server.url + protocol.PATH, compression=None) as first:
            await first.send(mounting(8, 100))
            assert protocol.decode(await first.recv())[0] == protocol.OPENED
            received, code = await exchange(server.url, mounting(8))
            assert (errors(received), code) == (
                [('SandboxQuotaError', "the open sessions of tenant '' on this server hold 8 files and folders of mounts, and these mounts' 8 would bring that to 16; its limit is 15 (corral serve --max-tenant-mount-files)")],
                protocol.CLOSE_ENDED,
            )
            received, code = await exchange(server.url, mounting(1, 201))
            assert (errors(received), code) == (
                [('SandboxQuotaError', "the open sessions of tenant '' on this server hold 800 bytes of mounts, and these mounts' 201 would bring that to 1,001; its limit is 1,000 (corral serve --max-tenant-mount-bytes)")],
                protocol.CLOSE_ENDED,
            )
            async with connect(server.url + protocol.PATH, compression=None) as second:  # up to the bounds
                await second.send(mounting(7, 28))
                assert protocol.decode(await second.recv())[0] == protocol.OPENED
                await second.send(protocol.encode([protocol.FEED, "open('/data/f6').read()", {}, {}, []]))
                assert protocol.decode(await second.recv()) == [protocol.RESULT, 'x' * 28, None, []]
        for _ in range(100):  # the first has closed: its files count no more
            received, _ = await exchange(server.url, mounting(8, 100), protocol.encode([protocol.CLOSE]))
            if received[0][0] == protocol.OPENED:
                break
            await asyncio.sleep(0.05)
        assert received[0][0] == protocol.OPENED


@pytest.mark.slow
async def test_an_open_without_mounts_never_waits_for_uploads(tmp_path):
    """Six OPENs with mounts of 30,000 empty files each (which held every thread that prepares a
    session's options, and so every other OPEN): another session, opened once they are under
    way, runs before any upload is done, and an upload arrives whole (one tenant's go one at a time;
    the others end with their connections)."""
    with running_server(tmp_path) as server:
        async with contextlib.AsyncExitStack() as stack:
            big = [await stack.enter_async_context(connect(server.url + protocol.PATH, compression=None, max_size=None)) for _ in range(6)]
            frame = mounting(30_000)
            for ws in big:
                await ws.send(frame)
            answers = [asyncio.ensure_future(ws.recv()) for ws in big]
            await asyncio.sleep(0.5)  # the frames are decoded, and their uploads begin (one takes 2-20 s)
            async with RemotePool(server.url) as pool, pool.checkout() as session:
                assert await session.feed_run('6 * 7') == 42
            assert not any(answer.done() for answer in answers)  # uploads still being written meanwhile
            first = (await asyncio.wait(answers, return_when=asyncio.FIRST_COMPLETED))[0].pop()
            ws = big[answers.index(first)]
            assert protocol.decode(first.result())[0] == protocol.OPENED
            await ws.send(protocol.encode([protocol.FEED, "(open('/data/f0').read(), open('/data/f29999').read())", {}, {}, []]))
            assert protocol.decode(await ws.recv()) == [protocol.RESULT, ('', ''), None, []]
            for answer in answers:
                answer.cancel()


async def test_each_tenant_takes_its_turns_one_at_a_time():
    """`TenantTurns`: a tenant's second turn waits for its first, another tenant's does not, and a
    tenant with no turn held or awaited leaves nothing behind."""
    from corral.server.app import TenantTurns

    turns, order = TenantTurns(), []

    async def take(tenant: str, name: str, hold: asyncio.Event) -> None:
        async with turns.turn(tenant):
            order.append(name)
            await hold.wait()

    first, second, other = asyncio.Event(), asyncio.Event(), asyncio.Event()
    tasks = [asyncio.create_task(take('acme', 'acme 1', first)), asyncio.create_task(take('acme', 'acme 2', second))]
    tasks.append(asyncio.create_task(take('beta', 'beta 1', other)))
    await asyncio.sleep(0.01)
    assert order == ['acme 1', 'beta 1']
    first.set()
    await asyncio.sleep(0.01)
    assert order == ['acme 1', 'beta 1', 'acme 2']
    second.set()
    other.set()
    await asyncio.gather(*tasks)
    assert turns._locks == {}
