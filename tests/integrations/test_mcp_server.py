"""`corral mcp`: a real MCP client session against the server, over stdio and streamable HTTP, and
an upstream MCP server whose tools the server puts behind `run_code`."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip('mcp')

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.server.mcpserver import MCPServer

from corral.integrations.mcp import UpstreamTools, build_server, load_module, main, public_functions

HERE = Path(__file__).parent
FUNCTIONS = str(HERE / 'mcp_functions.py')
UPSTREAM = f'{sys.executable} {HERE / "upstream_server.py"}'

WEATHER = (
    'import asyncio\n'
    "paris, tokyo = await asyncio.gather(get_weather(city='Paris'), get_weather(city='Tokyo'))\n"
    "{'paris': await convert_temp(fahrenheit=paris['temp_f']), 'tokyo': await convert_temp(fahrenheit=tokyo['temp_f'])}"
)


def corral_mcp(*args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=['-m', 'corral.integrations.mcp', *args], env=dict(os.environ))


async def run_code(client: Client, code: str, **extra: object) -> tuple[bool, str]:
    result = await client.call_tool('run_code', {'code': code, **extra})
    assert len(result.content) == 1
    return bool(result.is_error), result.content[0].text


async def test_stdio_server_with_module_functions():
    async with Client(corral_mcp('--functions', FUNCTIONS)) as client:
        (tool,) = (await client.list_tools()).tools
        assert tool.name == 'run_code'
        assert tool.input_schema['required'] == ['code']
        assert set(tool.input_schema['properties']) == {'code', 'restart'}
        assert (
            '```python\n'
            'async def get_order(order_id: str) -> dict:\n'
            '    """Return one order, with its `status` and number of `items`."""\n\n\n'
            'def add(a: int, b: int = 2) -> int:\n'
            '    """Add two numbers."""\n'
            '```'
        ) in tool.description
        assert '_private' not in tool.description

        assert await run_code(client, "import asyncio\norders = await asyncio.gather(get_order('o1'), get_order('o2'))\n[o['status'] for o in orders]") == (False, "['shipped', 'shipped']")
        assert await run_code(client, 'total = add(1) + add(1, b=5)') == (
            False,
            '9\n\n(The script ended with an assignment; the value returned is that of `total`.)',
        )
        assert await run_code(client, 'total * 2') == (False, '18')
        error, text = await run_code(client, 'total', restart=True)
        assert error
        assert text.startswith('The script did not run, because it has type errors:\nerror[unresolved-reference]: Name `total` used when not defined')
        assert await run_code(client, 'await get_order(42)') == (
            True,
            'The script did not run, because it has type errors:\n'
            'error[invalid-argument-type]: Argument to function `get_order` is incorrect\n'
            ' --> main.py:1:17\n'
            '  |\n'
            '1 | await get_order(42)\n'
            '  |                 ^^ Expected `str`, found `Literal[42]`\n'
            'info: Function defined here\n'
            ' --> repl_type_stubs.pyi:1:11\n'
            '  |\n'
            '1 | async def get_order(order_id: str) -> dict:\n'
            '  |           ^^^^^^^^^ ------------- Parameter declared here\n'
            '2 |     """Return one order, with its `status` and number of `items`."""\n'
            '  |',
        )


@pytest.mark.slow
async def test_upstream_servers_behind_one_run_code():
    async with Client(corral_mcp('--upstream', UPSTREAM, '--functions', FUNCTIONS)) as client:
        (tool,) = (await client.list_tools()).tools
        assert (
            'class Weather(TypedDict):\n'
            '    city: str\n'
            '    temp_f: float\n'
        ) in tool.description
        assert (
            'async def get_weather(city: str) -> Weather:\n'
            '    """Current weather of a city."""\n\n\n'
            'async def convert_temp(fahrenheit: float) -> float:\n'
            '    """Fahrenheit to Celsius, rounded to one decimal."""\n\n\n'
            'async def motd() -> Any:\n'
            '    """Message of the day."""\n'
        ) in tool.description
        assert await run_code(client, WEATHER) == (False, "{'paris': 22.2, 'tokyo': 22.2}")
        assert await run_code(client, "[await motd(), add(2), (await get_order('o9'))['id']]") == (False, "['hello', 4, 'o9']")
        assert await run_code(client, "await get_weather(city='Atlantis')") == (
            True,
            'The script failed: Traceback (most recent call last):\n'
            '  File "main.py", line 1, in <module>\n'
            "    await get_weather(city='Atlantis')\n"
            'RuntimeError: Error executing tool get-weather: no weather station in Atlantis\n\n'
            'Before the failure, the script made 1 function call; whatever it did has happened:\n'
            "- get_weather(city='Atlantis') raised RuntimeError: Error executing tool get-weather: no weather station in Atlantis\n"
            'Do not repeat a call that changed something.',
        )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


async def test_streamable_http_server():
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, '-m', 'corral.integrations.mcp', '--functions', FUNCTIONS, '--transport', 'http', '--port', str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(1200):  # a minute at the most
            try:
                with socket.create_connection(('127.0.0.1', port), timeout=0.1):
                    break
            except OSError:
                assert process.poll() is None, 'the server exited'
                await asyncio.sleep(0.05)
        async with Client(f'http://127.0.0.1:{port}/mcp') as client:
            (tool,) = (await client.list_tools()).tools
            assert tool.name == 'run_code'
            assert await run_code(client, "(await get_order('h1'))['id'] + str(add(40))") == (False, "'h142'")
    finally:
        process.terminate()
        process.wait(timeout=10)


async def test_in_process_server_and_its_session(pool):
    async def lookup(key: str) -> str:
        """Look a key up."""
        return key.upper()

    server, close = build_server(functions={'lookup': lookup}, pool=pool)
    try:
        async with Client(server) as client:
            assert await run_code(client, "v = await lookup('a')") == (
                False,
                "'A'\n\n(The script ended with an assignment; the value returned is that of `v`.)",
            )
            assert await run_code(client, 'v + v') == (False, "'AA'")
            assert await run_code(client, 'class A: ...\nA') == (False, "<class '__main__.A'>")
    finally:
        await close()

    server, close = build_server(functions={'lookup': lookup}, pool=pool, keep_session=False)
    try:
        async with Client(server) as client:
            (tool,) = (await client.list_tools()).tools
            assert 'Each script starts with no variables from earlier calls.' in tool.description
            await run_code(client, 'v = 1')
            error, text = await run_code(client, 'v')
            assert error and 'Name `v` used when not defined' in text
    finally:
        await close()


async def test_upstream_tools_in_process():
    upstream = MCPServer('shop')

    @upstream.tool(name='list-items')
    def list_items(limit: int = 2) -> list[str]:
        """Items for sale."""
        return ['a', 'b', 'c'][:limit]

    other = MCPServer('other')

    @other.tool(name='list-items')
    def other_items() -> str:
        return 'other'

    tools = UpstreamTools()
    async with Client(upstream) as first, Client(other) as second:
        assert await tools.add_server(first) == ['list_items']
        assert await tools.add_server(second) == ['other_list_items']
        assert tools.stubs == (
            'async def list_items(limit: int = 2) -> list[str]:\n'
            '    """Items for sale."""\n\n\n'
            'async def other_list_items() -> str:\n'
            '    ...\n'
        )
        assert await tools.functions['list_items'](3) == ['a', 'b', 'c']
        assert await tools.functions['other_list_items']() == 'other'


def test_public_functions_of_a_module():
    module = load_module(FUNCTIONS)
    assert sorted(public_functions(module)) == ['add', 'get_order']


def test_usage_errors(capsys):
    assert main([]) == 2
    assert 'give --functions MODULE or --upstream COMMAND' in capsys.readouterr().err
    assert main(['--functions', 'no/such/file.py']) == 2
    assert 'corral mcp: --functions no/such/file.py: no such file: no/such/file.py' in capsys.readouterr().err


@pytest.mark.slow
async def test_upstream_servers_start_at_the_same_time_and_the_server_reports_its_version(tmp_path):
    import importlib.metadata

    rendezvous = HERE / 'rendezvous_server.py'
    upstreams = [f'{sys.executable} {rendezvous} {name} {tmp_path} {other}' for name, other in (('east', 'west'), ('west', 'east'))]
    async with Client(corral_mcp('--upstream', upstreams[0], '--upstream', upstreams[1])) as client:
        assert client.server_info.version == importlib.metadata.version('corral')
        assert await run_code(client, 'import asyncio\nawait asyncio.gather(east_name(), west_name())') == (False, "['east', 'west']")


async def test_http_sandboxes_are_kept_per_client_and_bounded_per_client(pool):
    """The HTTP server kept 32 sandboxes for all its clients together: a client opening sessions,
    or making calls without one, closed the others' sandboxes, least recently used first. Now a
    client's new sessions close its own, past the limit in all those of the client holding the
    most, and a call without a session has a sandbox for itself alone."""
    import httpx2
    import uvicorn
    from mcp.client.streamable_http import streamable_http_client

    server, close = build_server(pool=pool, transport='http', per_client=2, limit=3)
    port = _free_port()
    http = uvicorn.Server(uvicorn.Config(server.streamable_http_app(), host='127.0.0.1', port=port, log_level='warning', lifespan='on'))
    serving = asyncio.ensure_future(http.serve())

    def client(address: str, mode: str = 'legacy') -> Client:
        """A client from `address`; 'legacy': with an MCP session (`Mcp-Session-Id`), 'auto': the
        2026 protocol's, which has none."""
        connection = httpx2.AsyncClient(timeout=60, transport=httpx2.AsyncHTTPTransport(local_address=address))
        return Client(streamable_http_client(f'http://127.0.0.1:{port}/mcp', http_client=connection), mode=mode)

    gone = (True, 'The script did not run, because it has type errors:\nerror[unresolved-reference]: Name `v` used when not defined\n --> main.py:1:1\n  |\n1 | v\n  | ^')
    try:
        while not http.started:
            await asyncio.sleep(0.02)
        async with client('127.0.0.1') as a, client('127.0.0.2') as b1, client('127.0.0.2') as b2, client('127.0.0.2') as b3:
            for name, session in (('a', a), ('b1', b1), ('b2', b2), ('b3', b3)):  # b3 is b's third: b1's sandbox closes
                await run_code(session, f'v = {name!r}')
            assert await run_code(a, 'v') == (False, "'a'")
            assert await run_code(b2, 'v') == (False, "'b2'")
            assert await run_code(b3, 'v') == (False, "'b3'")
            assert await run_code(b1, 'v') == gone  # b1's session starts again: b2's sandbox closes
            assert await run_code(b3, 'v') == (False, "'b3'")
            async with client('127.0.0.3') as c:  # the fourth in all: the client holding the most (b) gives one up
                await run_code(c, 'v = "c"')
                assert await run_code(c, 'v') == (False, "'c'")
                assert await run_code(a, 'v') == (False, "'a'")
                assert await run_code(b3, 'v') == (False, "'b3'")  # b1's closed: b's least recently used
            async with client('127.0.0.4', mode='auto') as modern:  # no session: a sandbox for each call, kept by none
                for _ in range(4):  # they each took a kept sandbox (and closed another's)
                    assert await run_code(modern, 'v = 1\nv') == (False, '1')
                assert await run_code(modern, 'v') == gone
            assert await run_code(a, 'v') == (False, "'a'")
            assert await run_code(b3, 'v') == (False, "'b3'")
    finally:
        http.should_exit = True
        await serving
        await close()
