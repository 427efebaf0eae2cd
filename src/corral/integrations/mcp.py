"""An MCP server offering one tool, `run_code`, with the official `mcp` SDK.

    corral mcp --functions MODULE            # the module's public functions are host functions
    corral mcp --upstream 'COMMAND ARGS...'  # every tool of other MCP servers, behind one run_code
    corral mcp ... --transport http --port 8000   # streamable HTTP at http://127.0.0.1:8000/mcp

`--functions` and `--upstream` repeat and combine. Variables persist between the `run_code` calls of
one MCP session (the one client of a stdio server; each `Mcp-Session-Id` over HTTP, a number of
them per client address: see `_Sessions`); `restart: true` starts again. Needs the `mcp` extra
(`pip install -e '.[mcp]'` in corral's clone).
"""

from __future__ import annotations

import argparse
import base64
import collections
import contextlib
import importlib
import importlib.util
import inspect
import os
import shlex
import sys
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

try:
    import anyio
    import anyio.abc
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.shared.exceptions import MCPError
    from mcp.server.mcpserver import Context, MCPServer
    from mcp_types import INTERNAL_ERROR, CallToolResult, ImageContent, TextContent
    from pydantic import Field
except ImportError as _error:  # pragma: no cover - depends on the installed extras
    raise ImportError("corral.integrations.mcp needs the MCP SDK: install it with `pip install -e '.[mcp]'` in corral's clone") from _error

from ..errors import OperatorError, SandboxInsecureError
from ..host.pool import Pool
from ..limits import Limits
from ._common import add_packages, add_skip_layers, corral_version, is_loopback, tool_value, warn_skipped_layers
from .code_tool import CodeTool
from .stubs import SchemaFunction, StubWriter, python_name

__all__ = ['main', 'serve', 'build_server', 'connect_upstream', 'connect_upstreams', 'UpstreamTools', 'public_functions', 'load_module']


# ----- host functions from a module ------------------------------------------------------------


def load_module(spec: str) -> ModuleType:
    """Import MODULE given as a dotted name or as a path to a `.py` file."""
    if spec.endswith('.py') or '/' in spec:
        path = Path(spec)
        if not path.is_file():
            raise ValueError(f'no such file: {spec}')
        module_spec = importlib.util.spec_from_file_location(path.stem, path)
        if module_spec is None or module_spec.loader is None:  # pragma: no cover
            raise ValueError(f'cannot load {spec}')
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[path.stem] = module
        module_spec.loader.exec_module(module)
        return module
    return importlib.import_module(spec)


def public_functions(module: ModuleType) -> dict[str, Callable[..., Any]]:
    """The module's public functions: those in `__all__`, or else those defined in it without a leading `_`."""
    names = getattr(module, '__all__', None)
    if names is not None:
        return {name: getattr(module, name) for name in names if callable(getattr(module, name, None))}
    return {
        name: value
        for name, value in vars(module).items()
        if not name.startswith('_') and inspect.isfunction(value) and value.__module__ == module.__name__
    }


# ----- tools of upstream MCP servers -----------------------------------------------------------


class UpstreamTools:
    """The tools of connected MCP servers, as host functions with stubs from their schemas.

    A tool's name is made a Python identifier; when two servers have a tool of the same name, the
    later one is prefixed with its server's name (`weather_forecast`).
    """

    def __init__(self, writer: StubWriter | None = None) -> None:
        self._writer = writer if writer is not None else StubWriter()
        self.functions: dict[str, Callable[..., Awaitable[Any]]] = {}

    @property
    def stubs(self) -> str:
        return self._writer.render()

    async def add_server(self, client: Client) -> list[str]:
        """Add every tool of a connected server; returns the names the script calls them by."""
        server_name = python_name(client.server_info.name if client.server_info else 'upstream')
        tools = []
        cursor = None
        while True:
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        added = []
        for tool in tools:
            name = tool.name
            if python_name(name) in self._writer.function_names:
                name = f'{server_name}_{name}'
            output_schema = tool.output_schema
            unwrap = _wraps_result(output_schema)
            returns = output_schema['properties']['result'] if unwrap else output_schema
            function = self._writer.add_schema_function(
                name, parameters=tool.input_schema, returns=returns, description=tool.description
            )
            self.functions[function.name] = _forward(client, tool.name, function, unwrap=unwrap)
            added.append(function.name)
        return added


def _wraps_result(schema: Mapping[str, Any] | None) -> bool:
    """Whether an output schema is the SDK's wrapper of a non-object result: `{"result": ...}`."""
    return bool(
        schema
        and set(schema.get('properties') or {}) == {'result'}
        and str(schema.get('title', '')).endswith('Output')
    )


def _forward(client: Client, tool_name: str, function: SchemaFunction, *, unwrap: bool) -> Callable[..., Awaitable[Any]]:
    async def call_upstream(*args: Any, **kwargs: Any) -> Any:
        result = await client.call_tool(tool_name, function.arguments(tool_value(args), tool_value(kwargs)))
        texts = [block.text for block in result.content if getattr(block, 'type', None) == 'text']
        if result.is_error:
            raise RuntimeError('\n'.join(texts) or f'{function.name}() failed')
        if result.structured_content is not None:
            value = result.structured_content
            return value.get('result') if unwrap and isinstance(value, dict) else value
        if len(texts) == 1 and len(result.content) == 1:
            return texts[0]
        return [_content_value(block) for block in result.content]

    call_upstream.__name__ = function.name
    return call_upstream


def _content_value(block: Any) -> Any:
    if getattr(block, 'type', None) == 'text':
        return block.text
    return block.model_dump(mode='json', exclude_none=True, by_alias=True)


def _upstream_parameters(command: str | Sequence[str]) -> StdioServerParameters:
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    if not argv:
        raise ValueError('an upstream command is empty')
    return StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))


async def connect_upstream(stack: contextlib.AsyncExitStack, command: str | Sequence[str]) -> Client:
    """Start an MCP server command (`'python server.py'` or its argv) and connect to it over stdio.

    The server gets this process's environment; it stops when `stack` closes.
    """
    return await stack.enter_async_context(Client(_upstream_parameters(command)))


async def connect_upstreams(group: anyio.abc.TaskGroup, commands: Sequence[str | Sequence[str]]) -> list[Client]:
    """Start several MCP server commands at once and connect to each over stdio (see
    `connect_upstream`); the clients, in the order of `commands`.

    Each connection lives in a task of `group` (an anyio task group: a client is entered and left
    in one task) and ends when the group's tasks are cancelled.
    """
    clients: list[Client | None] = [None] * len(commands)

    async def hold(parameters: StdioServerParameters, *, task_status: anyio.abc.TaskStatus[Client] = anyio.TASK_STATUS_IGNORED) -> None:
        async with Client(parameters) as client:
            task_status.started(client)
            await anyio.sleep_forever()

    async def start(index: int, parameters: StdioServerParameters) -> None:
        clients[index] = await group.start(hold, parameters)

    parameters = [_upstream_parameters(command) for command in commands]
    async with anyio.create_task_group() as starting:
        for index, one in enumerate(parameters):
            starting.start_soon(start, index, one)
    return [client for client in clients if client is not None]


# ----- the server ------------------------------------------------------------------------------

class _Sessions:
    """One `CodeTool` with a kept sandbox per MCP session, by its client and session id (see
    `_http_session`): at most `per_client` for one client, whose least recently used is closed
    for its next, and `limit` in all, past which the least recently used of the client holding
    the most is closed. So a client that opens many sessions closes its own sandboxes, not
    another's, and a client holding no more than its share (`limit` over the clients) loses none
    to the others."""

    def __init__(self, make: Callable[[], CodeTool], *, per_client: int = 32, limit: int = 64) -> None:
        self._make = make
        self._per_client = per_client
        self._limit = limit
        self._tools: collections.OrderedDict[tuple[str, str], CodeTool] = collections.OrderedDict()

    async def get(self, client: str, session: str) -> CodeTool:
        key = (client, session)
        tool = self._tools.get(key)
        if tool is not None:
            self._tools.move_to_end(key)
            return tool
        held = collections.Counter(holder for holder, _ in self._tools)
        closing = None
        if held[client] >= self._per_client:
            closing = self._tools.pop(next(other for other in self._tools if other[0] == client))
        elif len(self._tools) >= self._limit:
            most = max(held.values())
            closing = self._tools.pop(next(other for other in self._tools if held[other[0]] == most))
        tool = self._tools[key] = self._make()  # before the close: a call meanwhile finds it
        if closing is not None:
            await closing.aclose()
        return tool

    async def aclose(self) -> None:
        while self._tools:
            _, tool = self._tools.popitem()
            await tool.aclose()


def _one_session(ctx: Context) -> tuple[str, str] | None:
    """Over stdio the server has one client: one sandbox for the whole connection."""
    return ('', '')


def _http_session(ctx: Context) -> tuple[str, str] | None:
    """Over HTTP, the client's address and its `Mcp-Session-Id`; None without one (a sandbox for
    the call alone). Behind a proxy every client has the proxy's address."""
    session = (ctx.headers or {}).get('mcp-session-id')
    if session is None:
        return None
    address = getattr(ctx.request_context.request, 'client', None)
    return (address.host if address is not None else '', session)


def build_server(
    *,
    functions: Mapping[str, Callable[..., Any]] | None = None,
    stubs: str | None = None,
    pool: Pool,
    type_check: bool = True,
    limits: Limits | None = None,
    keep_session: bool = True,
    transport: str = 'stdio',
    name: str = 'corral',
    per_client: int = 32,
    limit: int = 64,
) -> tuple[MCPServer, Callable[[], Awaitable[None]]]:
    """An `MCPServer` with a `run_code` tool over `functions`, and the coroutine function that closes it.

    `stubs`, when given, is the stub text of `functions` (for functions known only by schemas).
    With `keep_session`, variables persist across calls: for the whole connection over `'stdio'`,
    per `Mcp-Session-Id` over `'http'`, where `per_client` sandboxes are kept for one client
    address and `limit` in all (see `_Sessions`: a client's new sessions close its own least
    recently used sandbox, never another client's while that one holds no more than its share).
    """
    session_key = _one_session if transport == 'stdio' else _http_session
    functions = dict(functions or {})

    def make() -> CodeTool:
        return CodeTool(functions, stubs=stubs, type_check=type_check, limits=limits, pool=pool, keep_session=keep_session)

    template = make()
    sessions = _Sessions(make, per_client=per_client, limit=limit)
    server = MCPServer(name, version=corral_version(), instructions='Run Python scripts with the run_code tool; its description lists the functions a script can call.')

    async def run_code(
        code: Annotated[str, Field(description='The Python script to run.')],
        ctx: Context,
        restart: Annotated[bool, Field(description='Start from a fresh sandbox, without the variables of earlier calls.')] = False,
    ) -> CallToolResult:
        key = session_key(ctx) if keep_session else ('', '')
        try:
            if key is None:  # a sandbox of its own, closed after the call
                tool = make()
                try:
                    text, ok, images = await tool._execute(code, restart=restart)
                finally:
                    await tool.aclose()
            else:
                text, ok, images = await (await sessions.get(*key))._execute(code, restart=restart)
        except OperatorError as error:  # the client application's (its user's) to act on: a protocol error, no tool result
            raise MCPError(INTERNAL_ERROR, f'corral: {error.display()}') from None
        # Returned as is, so the model reads exactly corral's text (a raised ToolError gets a prefix);
        # a figure the script made follows as an image
        pictures = [ImageContent(type='image', data=base64.b64encode(image.data).decode('ascii'), mime_type=image.mime_type) for image in images]
        return CallToolResult(content=[TextContent(type='text', text=text), *pictures], is_error=not ok)

    server.add_tool(run_code, name=template.name, description=template.description, structured_output=False)
    return server, sessions.aclose


async def serve(
    *,
    functions: Mapping[str, Callable[..., Any]] | None = None,
    upstream: Sequence[str] = (),
    transport: str = 'stdio',
    host: str = '127.0.0.1',
    port: int = 8000,
    path: str = '/mcp',
    type_check: bool = True,
    keep_session: bool = True,
    skip_layers: Collection[str] = (),
    packages: Collection[str] = (),
) -> None:
    """Check the sandbox can be locked down (`SandboxInsecureError` if not: see
    `Pool(skip_layers=...)`), connect to the upstream servers (all at once), warm the sandbox and
    the type checker, then serve `run_code` until the transport closes."""
    async with contextlib.AsyncExitStack() as stack:
        pool = await stack.enter_async_context(Pool(skip_layers=skip_layers, packages=packages))
        await pool.start()
        background = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(background.cancel_scope.cancel)  # called first: the tasks end, then the group
        stubs_known = anyio.Event()
        stubs = ''

        async def warm() -> None:
            """Start what the first call needs while the upstreams and the client start: the zygote
            and its workers, the checker's standard library stubs; then check the host functions'
            stubs (a `StubError` ends the server) and run a script against them."""
            await CodeTool({}, type_check=type_check, pool=pool).run('None')
            await stubs_known.wait()
            await CodeTool(host_functions, stubs=stubs, type_check=type_check, pool=pool).run('None')

        background.start_soon(warm)
        writer = StubWriter()
        host_functions: dict[str, Callable[..., Any]] = {}
        for function_name, function in (functions or {}).items():
            host_functions[writer.add_python_function(function_name, function)] = function
        tools = UpstreamTools(writer)
        for client in await connect_upstreams(background, upstream):
            await tools.add_server(client)
        host_functions.update(tools.functions)
        stubs = writer.render()
        stubs_known.set()
        server, close = build_server(
            functions=host_functions,
            stubs=stubs,
            pool=pool,
            type_check=type_check,
            keep_session=keep_session,
            transport=transport,
        )
        stack.push_async_callback(close)
        if transport == 'stdio':
            await server.run_stdio_async()
        else:
            await server.run_streamable_http_async(host=host, port=port, streamable_http_path=path)


# ----- command line ----------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='corral mcp',
        description='Serve a run_code tool over MCP: scripts call the functions of a module, or the tools of other MCP servers.',
    )
    parser.add_argument('--functions', action='append', default=[], metavar='MODULE', help='a module (dotted name or .py path) whose public functions scripts can call; repeatable')
    parser.add_argument('--upstream', action='append', default=[], metavar='COMMAND', help="an MCP server to start and connect to over stdio, e.g. 'python server.py'; all its tools become functions; repeatable")
    parser.add_argument('--transport', choices=('stdio', 'http'), default='stdio', help='stdio (default), or streamable HTTP')
    parser.add_argument('--host', default='127.0.0.1', help='HTTP address to listen on (default 127.0.0.1)')
    parser.add_argument('--port', type=int, default=8000, help='HTTP port (default 8000)')
    parser.add_argument('--path', default='/mcp', help='HTTP path of the MCP endpoint (default /mcp)')
    parser.add_argument('--no-type-check', action='store_true', help='run scripts without checking them first')
    parser.add_argument('--fresh', action='store_true', help='start every run_code call with no variables (by default they persist per MCP session)')
    add_skip_layers(parser)
    add_packages(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """`corral mcp ...`: returns the exit status (2 for bad usage)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.functions and not args.upstream:
        parser.print_usage(sys.stderr)
        print('corral mcp: give --functions MODULE or --upstream COMMAND (or both)', file=sys.stderr)
        return 2
    warn_skipped_layers('corral mcp', args.skip_layers)
    if args.transport == 'http' and not is_loopback(args.host):
        print(
            f'corral mcp: warning: serving run_code over HTTP on {args.host}, beyond loopback, with no authentication: '
            'anyone who can reach it runs scripts that call your functions; put it behind a proxy that authenticates, '
            'or listen on 127.0.0.1',
            file=sys.stderr,
        )
    functions: dict[str, Callable[..., Any]] = {}
    for spec in args.functions:
        try:
            functions.update(public_functions(load_module(spec)))
        except Exception as error:
            print(f'corral mcp: --functions {spec}: {error}', file=sys.stderr)
            return 2
    try:
        anyio.run(
            lambda: serve(
                functions=functions,
                upstream=args.upstream,
                transport=args.transport,
                host=args.host,
                port=args.port,
                path=args.path,
                type_check=not args.no_type_check,
                keep_session=not args.fresh,
                skip_layers=args.skip_layers,
                packages=args.packages,
            )
        )
    except SandboxInsecureError as error:
        print(error.display(), file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
