"""`corral.RemotePool` against a real `corral serve`: the API of `Pool`, host functions run here."""

from __future__ import annotations

import asyncio
import datetime
import socket

import pytest

import corral
from corral.server import protocol
from corral import Deferred, ExternalModule, Limits, Mount, OsAccess, RemotePool, SandboxPaused

STUBS = """
async def get_order(order_id: str) -> dict: ...
def add(a: int, b: int) -> int: ...
"""


async def get_order(order_id: str) -> dict:
    return {'id': order_id, 'status': 'shipped', 'items': 3}


def add(a: int, b: int) -> int:
    return a + b


def fail(kind: str) -> None:
    raise {'value': ValueError('bad value'), 'key': KeyError('k'), 'exit': SystemExit(3)}[kind]


class HostOnly(Exception):
    """An exception class the script cannot know: it arrives as its nearest built-in base."""


def host_only() -> None:
    raise HostOnly('from the host')


def unsendable() -> object:
    return object()


TOOLS = {'get_order': get_order, 'add': add, 'fail': fail, 'host_only': host_only, 'unsendable': unsendable}

#: Scripts whose outcome (value, or error class and text) must be the same locally and remotely.
SCRIPTS = [
    "import asyncio\nx = await asyncio.gather(get_order('a'), get_order('b'))\n[o['status'] for o in x], add(1, 2)",
    '1/0',
    'x = (1,',
    "add('x', 1)",
    "fail('value')",
    "fail('key')",
    "fail('exit')",
    'host_only()',
    "try:\n    fail('value')\nexcept ValueError as e:\n    r = repr(e)\nr",
    'unsendable()',
    'nothing_here()',
    'import os\nos.system("ls")',
    'while True:\n    pass',
    'print("x" * 100)\n[i for i in range(3)]',
    '{1, 2}, (1,), frozenset({3}), b"raw", 10**30',
]


async def outcome(session, code: str) -> tuple[str, object]:
    try:
        return 'value', await session.feed_run(code, external_lookup=TOOLS, print_callback=lambda stream, text: None)
    except corral.SandboxError as error:
        attributes = {name: getattr(error, name) for name in ('exc_type', 'message', 'limit', 'value') if hasattr(error, name)}
        return type(error).__name__, (str(error), attributes)


async def test_outcomes_and_error_texts_are_those_of_a_local_session(server):
    limits = Limits(wall_time=1.0, output=50)
    async with corral.Pool() as pool, pool.checkout(type_check=True, type_check_stubs=STUBS.replace('def add', 'def fail(kind: str) -> None: ...\ndef host_only() -> None: ...\ndef unsendable() -> object: ...\ndef add'), limits=limits) as session:
        local = [await outcome(session, code) for code in SCRIPTS]
    stubs = STUBS.replace('def add', 'def fail(kind: str) -> None: ...\ndef host_only() -> None: ...\ndef unsendable() -> object: ...\ndef add')
    async with RemotePool(server.url) as pool, pool.checkout(type_check=True, type_check_stubs=stubs, limits=limits) as session:
        remote = [await outcome(session, code) for code in SCRIPTS]
    assert remote == local
    assert local[0] == ('value', (['shipped', 'shipped'], 3))
    assert local[5][0] == 'SandboxRuntimeError' and local[5][1][1] == {'exc_type': 'KeyError', 'message': "'k'"}
    assert local[12][0] == 'SandboxLimitError' and local[12][1][1] == {'limit': 'wall_time', 'value': 1.0}
    assert local[14] == ('value', ({1, 2}, (1,), frozenset({3}), b'raw', 10**30))


async def test_prints_stream_in_order_with_host_calls(server):
    seen = []

    def note(text: str) -> str:
        seen.append(('call', text))
        return text.upper()

    code = "print('one')\nx = note('a')\nprint('two', x)\nimport sys\nprint('err', file=sys.stderr)\nnote('b')"
    async with RemotePool(server.url) as pool, pool.checkout() as session:
        value = await session.feed_run(code, external_lookup={'note': note}, print_callback=lambda stream, text: seen.append((stream, text)))
    assert value == 'B'
    assert seen == [('stdout', 'one\n'), ('call', 'a'), ('stdout', 'two A\n'), ('stderr', 'err\n'), ('call', 'b')]


@pytest.mark.parametrize('count', [5, 200])
async def test_gathered_calls_travel_in_one_frame(server, monkeypatch, count):
    # The calls a worker makes before it waits reach the link in tasks: a frame sent as soon as the
    # worker waits held the first two of five and left the rest for another frame.
    frames = []
    original = corral.RemoteSession._on_message

    def record(self, message):
        if message[0] == protocol.EVENTS:  # the kinds of its events
            frames.append([event[0] for event in message[1]])
        return original(self, message)

    monkeypatch.setattr(corral.RemoteSession, '_on_message', record)
    async with RemotePool(server.url) as pool, pool.checkout() as session:
        for _ in range(5):
            frames.clear()
            value = await session.feed_run(
                f"import asyncio\nawait asyncio.gather(*[get_order(str(i)) for i in range({count})])", external_lookup={'get_order': get_order}
            )
            assert [order['id'] for order in value] == [str(i) for i in range(count)]
            assert frames == [[protocol.CALL] * count]  # all the calls, one frame


@pytest.mark.parametrize('ws', [None, 'websockets-sansio'])
async def test_calls_made_one_after_another_go_out_as_the_worker_waits(monkeypatch, ws):
    # A call reached the link before the worker's WAIT did, and went out at the server's next look
    # whether the worker waited: a millisecond later, on every call. With the looks (and the time a
    # call is held) made an hour long, the WAIT alone sends each call: through `corral serve`'s
    # direct link to the socket (None), and through uvicorn's own protocol, ASGI's send and receive.
    from corral.server import app as server_app, connection

    from .conftest import serving_app

    monkeypatch.setattr(connection, '_GATHER_POLL', 3600.0)
    monkeypatch.setattr(connection, 'GATHER_SECONDS', 3600.0)
    seen = []

    async def ping(i: int) -> int:
        seen.append(i)
        return i

    pool = corral.Pool()
    async with serving_app(server_app.create_app(pool=pool), pool, ws) as address:
        async with RemotePool(f'ws://{address}') as remote, remote.checkout() as session:
            for _ in range(3):
                seen.clear()
                code = 'total = 0\nfor i in range(50):\n    total += await ping(i)\ntotal'
                assert await asyncio.wait_for(session.feed_run(code, external_lookup={'ping': ping}), 60) == sum(range(50))
                assert seen == list(range(50))


async def test_external_modules_run_in_the_client(server):
    calls = []

    def list_invoices(customer_id: str) -> list:
        calls.append(customer_id)
        return [{'id': 'in_1', 'amount_cents': 5000}]

    billing = ExternalModule({'list_invoices': list_invoices}, stubs='def list_invoices(customer_id: str) -> list[dict]: ...')
    async with RemotePool(server.url) as pool, pool.checkout(type_check=True, external_modules={'billing': billing}) as session:
        value = await session.feed_run("from billing import list_invoices\nsum(i['amount_cents'] for i in list_invoices('cus_1')) / 100")
    assert (value, calls) == (50.0, ['cus_1'])


async def test_variables_persist_between_feeds_and_a_stored_session_resumes_by_id(server):
    async with RemotePool(server.url) as pool:
        async with pool.checkout(ephemeral=False) as session:
            await session.feed_run('x = 41')
            assert await session.feed_run('x + 1') == 42
            session_id = session.session_id
        assert isinstance(session_id, str) and len(session_id) == 32
        async with pool.checkout(session_id=session_id) as again:
            assert (again.session_id, await again.feed_run('x')) == (session_id, 41)
        async with pool.checkout(session_id=session_id, fork=True) as fork:
            assert fork.session_id != session_id
            await fork.feed_run('x = 0')
        async with pool.checkout(session_id=session_id) as again:
            assert await again.feed_run('x') == 41
        with pytest.raises(corral.SandboxStateError) as error:
            async with pool.checkout(session_id='0' * 32):
                pass
    assert str(error.value) == "no stored session with id '00000000000000000000000000000000'"


async def test_dump_and_load_session(server):
    async with RemotePool(server.url) as pool:
        async with pool.checkout() as session:
            await session.feed_run("y = add(2, 3)", external_lookup={'add': add})
            state = await session.dump()
        assert state.startswith(b'CORRAL\x00S')
        async with pool.checkout() as loaded:
            await loaded.load_session(state)
            assert await loaded.feed_run('y * 2') == 10
        async with pool.checkout() as loaded:
            with pytest.raises(corral.SandboxStateError) as error:
                await loaded.load_session(state[:-1] + bytes([state[-1] ^ 1]))
    assert str(error.value) == "the session state was altered, or signed with another key: its signature does not match this pool's state key"


async def test_a_deferred_call_pauses_and_resumes(server):
    def approve(action: str) -> str:
        raise Deferred({'ask': action})

    async with RemotePool(server.url) as pool, pool.checkout(ephemeral=False) as session:
        with pytest.raises(SandboxPaused) as paused:
            await session.feed_run("r = approve('delete')\nr + '!'", external_lookup={'approve': approve})
        assert [(c.call_id, c.function, c.args, c.payload) for c in paused.value.calls] == [(0, 'approve', ['delete'], {'ask': 'delete'})]
        assert session.paused and session.pending_calls == paused.value.calls
        with pytest.raises(KeyError) as unknown:
            await session.resume({7: 'x'})
        assert unknown.value.args == ('call id(s) [7] are not pending; the pending calls are [0]',)
        assert await session.resume({0: 'yes'}) == 'yes!'
        assert not session.paused
        with pytest.raises(RuntimeError) as error:
            await session.resume({0: 'again'})
    assert str(error.value) == 'this session is not paused: resume() answers the deferred calls of a paused feed'


async def test_a_paused_stored_session_resumes_through_another_connection(server):
    def approve(action: str) -> str:
        raise Deferred(action)

    async with RemotePool(server.url) as pool:
        async with pool.checkout(ephemeral=False) as session:
            with pytest.raises(SandboxPaused):
                await session.feed_run("approve('a') + approve('b')", external_lookup={'approve': approve})
            session_id = session.session_id
        async with pool.checkout(session_id=session_id) as again:
            assert [call.args for call in again.pending_calls] == [['a']]
            with pytest.raises(SandboxPaused):
                await again.resume({0: 'A'}, external_lookup={'approve': approve})
            assert await again.resume({1: 'B'}) == 'AB'


async def test_an_answer_whose_feed_is_stopped_is_refused_when_given_again(server):
    def approve(action: str) -> str:
        raise Deferred(action)

    answered = (
        'call id(s) [0] were answered already: {}, so the session went back to its state before that feed '
        'and the calls are not pending any more; a call is answered once'
    )
    async with RemotePool(server.url) as pool:
        async with pool.checkout(ephemeral=False, limits=Limits(wall_time=1)) as session:
            with pytest.raises(SandboxPaused):
                await session.feed_run("x = approve('send')\nwhile True:\n    pass", external_lookup={'approve': approve})
            with pytest.raises(corral.SandboxLimitError):
                await session.resume({0: 'yes'})
            with pytest.raises(RuntimeError) as again:
                await session.resume({0: 'yes'})
            assert str(again.value) == answered.format(
                'the feed went on with the answers and was stopped (feed 1 was stopped by the wall_time limit at a point no replay can reproduce)'
            )
            session_id = session.session_id
        async with pool.checkout(session_id=session_id) as later:
            assert later.pending_calls == []
            with pytest.raises(RuntimeError) as again:
                await later.resume({0: 'yes'})
    assert str(again.value) == answered.format(
        'the feed that took them went on and did not end (a limit or a dead worker stopped it, or its host stopped)'
    )


async def test_overlay_mount_and_environment_travel_to_the_server(server, tmp_path):
    (tmp_path / 'sub').mkdir()
    (tmp_path / 'sub' / 'data.txt').write_text('hello')
    code = (
        "import os\nfrom pathlib import Path\n"
        "Path('/data/new.txt').write_text('made')\n"
        "[Path('/data/sub/data.txt').read_text(), sorted(os.listdir('/data')), os.getenv('REGION')]"
    )
    access = OsAccess(environ={'REGION': 'eu'})
    async with RemotePool(server.url) as pool, pool.checkout(mounts=Mount(tmp_path, '/data'), os_access=access) as session:
        assert await session.feed_run(code) == ['hello', ['new.txt', 'sub'], 'eu']
    assert sorted(p.name for p in tmp_path.iterdir()) == ['sub']  # the overlay write stayed in the session


async def test_the_urandom_cap_travels_to_the_server(server):
    async with RemotePool(server.url) as pool, pool.checkout(os_access=OsAccess(max_urandom_bytes=4)) as session:
        assert await session.feed_run('import os\nlen(os.urandom(4))') == 4
        with pytest.raises(corral.SandboxRuntimeError) as error:
            await session.feed_run('os.urandom(5)')
        assert str(error.value).splitlines()[-1] == 'MemoryError: os.urandom() size exceeds max_urandom_bytes (4)'


async def test_the_clock_is_granted_in_the_clients_offset(server):
    code = 'import datetime\nnow = datetime.datetime.now().astimezone()\nnow.utcoffset(), now.year > 2000'
    async with RemotePool(server.url) as pool, pool.checkout(os_access=OsAccess(clock=True)) as session:
        remote = await session.feed_run(code)
    async with corral.Pool() as pool, pool.checkout(os_access=OsAccess(clock=True)) as session:
        local = await session.feed_run(code)
    assert remote == local == (datetime.datetime.now().astimezone().utcoffset(), True)


async def test_what_cannot_be_served_remotely_is_refused(server, tmp_path):
    pool = RemotePool(server.url)
    with pytest.raises(ValueError) as error:
        pool.checkout(mounts=Mount(tmp_path, '/data', mode='read-write'))
    assert str(error.value) == (
        "the read-write mount at /data cannot be served by the corral server (it cannot write your files); use mode='overlay' or 'read-only'"
    )

    class Files(OsAccess):
        def read_file(self, path: str) -> bytes:
            return b''

    with pytest.raises(ValueError) as error:
        pool.checkout(os_access=Files())
    assert str(error.value) == (
        'this OsAccess overrides read_file, which runs in your process and cannot be served by the corral server: '
        'a RemotePool sends OsAccess(environ=..., clock=True, mounts=..., cwd=..., max_urandom_bytes=...) only'
    )

    class Entropy(OsAccess):
        def urandom(self, size: int) -> bytes:
            return b'\x07' * size

    with pytest.raises(ValueError) as error:
        pool.checkout(os_access=Entropy())
    assert str(error.value).startswith('this OsAccess overrides urandom, which runs in your process')


async def test_stub_errors_and_concurrent_feeds_are_refused_as_locally(server):
    async with RemotePool(server.url) as pool:
        with pytest.raises(corral.StubError) as error:
            async with pool.checkout(type_check=True, type_check_stubs='from typing import Litteral\ndef f() -> Litteral[1]: ...'):
                pass
        assert str(error.value).startswith('ty finds errors in the stubs, which would leave their functions unchecked:\n')
        async with pool.checkout() as session:
            first = asyncio.ensure_future(session.feed_run('sum(range(10**6))'))
            await asyncio.sleep(0)
            with pytest.raises(RuntimeError) as busy:
                await session.feed_run('1')
            assert await first == sum(range(10**6))
    assert str(busy.value) == 'feed_run is already running on this session; await it before the next one'


@pytest.mark.slow
def test_a_server_with_packages_sends_a_frame_as_its_plain_form_and_its_own_repr(tmp_path):
    pytest.importorskip('pandas')
    from corral.integrations import CodeTool

    from .conftest import running_server

    code = "import pandas as pd\npd.DataFrame({'x': [1, 2], 'y': ['a', 'b']})"

    async def run(url):
        async with RemotePool(url) as pool:
            async with pool.checkout() as session:
                value = await session.feed_run(code)
                shown = session.value_repr
                assert await session.feed_run('1 + 1') == 2
                after = session.value_repr
            tool = CodeTool({}, pool=pool)
            return value, shown, after, await tool.run(code)

    with running_server(tmp_path, '--packages', 'pandas') as server:
        value, shown, after, text = asyncio.run(run(server.url))
    assert value == {'columns': ['x', 'y'], 'index': [0, 1], 'data': [[1, 'a'], [2, 'b']]}
    assert shown == '   x  y\n0  1  a\n1  2  b'
    assert after is None
    assert text == '   x  y\n0  1  a\n1  2  b'


async def test_the_proxy_the_environment_names_is_looked_up_at_the_pools_first_connection(server, monkeypatch):
    for name in ('ws_proxy', 'http_proxy', 'https_proxy', 'all_proxy', 'no_proxy', 'WS_PROXY', 'HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY', 'NO_PROXY'):
        monkeypatch.delenv(name, raising=False)
    pool = RemotePool(server.url)
    async with pool.checkout() as session:
        assert await session.feed_run('1 + 1') == 2
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(('127.0.0.1', 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv('ws_proxy', f'http://127.0.0.1:{port}')
    async with pool.checkout() as session:  # connects directly, as it did at first
        assert await session.feed_run('2 + 2') == 4
    other = RemotePool(server.url)
    with pytest.raises(corral.SandboxConnectionError) as raised:
        async with other.checkout():
            pass
    assert str(raised.value) == f"cannot connect to the corral server at {other.url}: [Errno 111] Connect call failed ('127.0.0.1', {port})"


async def test_a_client_whose_polls_find_nothing_polls_less_often(server, monkeypatch):
    """After answers are sent, a session polls its socket briefly for the server's next frame; polls
    that keep missing (a busy machine) make it skip the next 1, 3, 7 ... 63, and its feeds go on."""
    from corral.server import client

    polled: list[bool] = []

    def counted(fileno: int) -> bool:
        polled.append(found := poll_readable(fileno))
        return found

    poll_readable = client.poll_readable
    monkeypatch.setattr(client, 'poll_readable', counted)
    async with RemotePool(server.url).checkout() as session:
        assert await session.feed_run('1 + 1') == 2
        await asyncio.sleep(0.05)  # the loop idle, nothing coming
        turns = []
        for _ in range(16):
            before = len(polled)
            session._wait_briefly()
            turns.append(len(polled) - before)
        assert turns == [1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0]
        assert polled[-4:] == [False] * 4
        assert await session.feed_run('total = 0\nfor i in range(20):\n    total += add(i, 1)\ntotal', external_lookup={'add': add}) == 210
