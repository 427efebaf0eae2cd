"""Errors only the application or the server's operator can act on (`OperatorError`) are not
`SandboxError`s: a `run_code` handler does not send them to the model, and CodeMode, CodeTool and
the MCP server raise them to the application. A `RemotePool` aimed at a port nothing listens on
gives one for real (`SandboxConnectionError`)."""

from __future__ import annotations

import re
import socket

import pytest

import corral
from corral import CodeTool, OperatorError, RemotePool, SandboxConnectionError, SandboxError

from .scripted_model import Script


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]  # closed again: connections to it are refused


def unreachable() -> tuple[RemotePool, str]:
    port = closed_port()
    return RemotePool(f'ws://127.0.0.1:{port}'), f"cannot connect to the corral server at ws://127.0.0.1:{port}/session: [Errno 111] Connect call failed ('127.0.0.1', {port})"


def test_the_two_branches():
    operator = {corral.SandboxAuthError, corral.SandboxQuotaError, corral.SandboxStoreError, corral.SandboxInsecureError, SandboxConnectionError}
    model = {
        corral.SandboxSyntaxError, corral.SandboxTypingError, corral.SandboxRuntimeError, corral.SandboxLimitError,
        corral.SandboxWorkerError, corral.SandboxCheckerError, corral.SandboxStateError, corral.SandboxSessionBusyError,
    }
    assert all(issubclass(cls, OperatorError) and not issubclass(cls, SandboxError) for cls in operator)
    assert all(issubclass(cls, SandboxError) and not issubclass(cls, OperatorError) for cls in model)
    assert all(issubclass(cls, corral.CorralError) for cls in operator | model)
    assert corral.SandboxStoreError('disk full').display() == 'disk full'


async def test_a_run_code_handler_lets_an_unreachable_server_through():
    pool, text = unreachable()

    async def run_code(code: str) -> str:  # the README's pattern
        try:
            async with pool.checkout() as session:
                return repr(await session.feed_run(code))
        except SandboxError as error:
            return f'The script failed: {error}'

    with pytest.raises(SandboxConnectionError) as caught:
        await run_code('1 + 1')
    assert str(caught.value) == text


async def test_code_tool_raises_it_to_the_application():
    pool, text = unreachable()
    tool = CodeTool({}, pool=pool)  # type: ignore[arg-type]
    with pytest.raises(SandboxConnectionError, match=f'^{re.escape(text)}$'):
        await tool.call({'code': '1 + 1'})
    await tool.aclose()


async def test_code_mode_raises_it_out_of_the_agent_run():
    pytest.importorskip('pydantic_ai')
    from pydantic_ai import Agent

    from corral.pydantic_ai import CodeMode

    pool, text = unreachable()
    script = Script('1 + 1')
    agent = Agent(script.model, capabilities=[CodeMode(pool=pool)])
    with pytest.raises(SandboxConnectionError, match=f'^{re.escape(text)}$'):
        await agent.run('x')


async def test_the_mcp_server_answers_it_as_a_protocol_error():
    pytest.importorskip('mcp')
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    from corral.integrations.mcp import build_server

    pool, text = unreachable()
    server, close = build_server(functions={}, pool=pool)  # type: ignore[arg-type]
    try:
        async with Client(server) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool('run_code', {'code': '1 + 1'})
    finally:
        await close()
    assert caught.value.code == -32603
    assert caught.value.message == f'corral: {text}'
