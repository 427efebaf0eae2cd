"""Type objects and builtin functions cross by name through `corral serve` as they do locally:
the client gets its own classes and `SandboxBuiltin`s, and gives them back."""

from __future__ import annotations

import datetime

import pytest

import corral
from corral import RemotePool, SandboxBuiltin


async def test_classes_and_builtins_cross_through_the_server(server):
    seen: list[object] = []
    code = 'import datetime\nshow(int, datetime.date, len, type(print))\n(given(), given() is open, list[int])'
    lookup = {'show': lambda *args: seen.extend(args), 'given': lambda: SandboxBuiltin('function', 'open')}
    async with RemotePool(server.url) as pool, pool.checkout() as session:
        value = await session.feed_run(code, external_lookup=lookup)
        assert value == (SandboxBuiltin('function', 'open'), True, 'list[int]')
        assert seen == [int, datetime.date, SandboxBuiltin('function', 'len'), SandboxBuiltin('type', 'builtin_function_or_method')]
        with pytest.raises(corral.SandboxRuntimeError) as error:
            await session.feed_run('given()', external_lookup={'given': lambda: SandboxBuiltin('function', 'system')})
        assert error.value.message == "given() returned a value of type 'SandboxBuiltin' that cannot enter the sandbox: the sandbox has no builtin function named 'system'"
        assert await session.feed_run('1 + 1') == 2


async def test_a_remote_host_function_cannot_give_a_callable(server):
    async with RemotePool(server.url) as pool, pool.checkout() as session:
        with pytest.raises(corral.SandboxRuntimeError) as error:
            await session.feed_run('given()', external_lookup={'given': lambda: len})
        assert (error.value.exc_type, error.value.message) == (
            'TypeError',
            "given() returned a value of type 'builtin_function_or_method' that cannot enter the sandbox: a value of type "
            "'builtin_function_or_method' cannot cross the sandbox boundary; use None, bool, int, float, str, bytes, list, tuple, "
            'dict, set, frozenset, datetime, Decimal or UUID values',
        )  # its host callables stay in the client, which gives none as a value (yet)
