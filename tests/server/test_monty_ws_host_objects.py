"""The parent's objects and classes (`ClassInstance`, `ClassType`) through /monty-ws/ on a real
`corral serve`: the same turn machine as the stdio child, each method call a frame to the client
and back, and the client's own object again when the script returns it."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import running_server

pydantic_monty = pytest.importorskip('pydantic_monty')

pytestmark = pytest.mark.slow


class Tools:
    def __init__(self, scale: int = 1) -> None:
        self.scale = scale

    def add(self, a: int, b: int) -> int:
        return (a + b) * self.scale


async def test_a_parents_object_and_class_over_the_websocket(tmp_path: Path) -> None:
    tools = Tools(2)
    inputs = {
        't': pydantic_monty.ClassInstance(tools, allowed_methods={'add'}, lazy_attrs={'scale'}),
        'T': pydantic_monty.ClassType(Tools, init=True, instance_allowed_methods={'add'}),
    }
    with running_server(tmp_path) as server:  # no keys: anonymous on loopback
        async with pydantic_monty.AsyncMontyWebsocket(f'{server.url}/monty-ws/') as pool:
            async with pool.checkout() as session:
                code = '[t.add(1, 2), t.scale, T(3).add(1, 1), isinstance(T(1), T)]'
                assert await session.feed_run(code, inputs=inputs) == [6, 2, 6, True]
                assert await session.feed_run('t') is tools
                with pytest.raises(pydantic_monty.MontyRuntimeError) as error:
                    await session.feed_run('t.wipe()')
                assert str(error.value) == "AttributeError: 'Tools' object has no attribute 'wipe'"
