"""Host callables as values: a host function's result may hold a `HostFunction` (a function, a
class or a bound method wrapped); the script holds it as a function of its own whose calls are
host calls to it, and it comes back out as itself. Nothing of the host is reached but the call, a
callable not wrapped is refused, and one of another session, or of before a load, reaches nothing."""

from __future__ import annotations

import functools

import msgpack
import pytest

import corral
from corral import HostFunction
from corral.values import Decoder, HostCallables, giving_callables, pack


def add(a: int, b: int) -> int:
    return a + b


async def double(x: int) -> int:
    return x * 2


async def test_a_callable_given_as_a_value_is_called_on_the_host(session):
    calls: list[tuple[int, int]] = []

    def note(a: int, b: int) -> int:
        calls.append((a, b))
        return a - b

    given = [HostFunction(note), HostFunction(double), HostFunction(functools.partial(add, 1), name='increment')]
    code = 'f, g, h = tools()\n(f(5, 3), type(f).__name__, f.__name__, await g(4), g.__name__, h(10), h.__name__, callable(f))'
    value = await session.feed_run(code, external_lookup={'tools': lambda: given})
    assert value == (2, 'function', 'note', 8, 'double', 11, 'increment', True)
    assert calls == [(5, 3)]
    value = await session.feed_run('f(1, 1), f')  # kept in a variable, called in a later feed, and given back
    assert value[0] == 0 and value[1] is given[0]
    seen: list[object] = []
    await session.feed_run('show(f, [g])', external_lookup={'show': lambda *args: seen.extend(args)})
    assert seen[0] is given[0] and seen[1][0] is given[1]
    with pytest.raises(corral.SandboxRuntimeError) as error:  # not wrapped: refused, as ever
        await session.feed_run('tools()', external_lookup={'tools': lambda: note})
    assert error.value.message.startswith("tools() returned a value of type 'function' that cannot enter the sandbox")
    with pytest.raises(TypeError, match='^HostFunction needs a callable, not int$'):
        HostFunction(5)  # type: ignore[arg-type]


async def test_its_errors_are_the_scripts_and_its_results_cross_as_any_value(session):
    def boom() -> None:
        raise KeyError('k')

    class Opaque:
        pass

    with pytest.raises(corral.SandboxRuntimeError) as error:
        await session.feed_run('f, c = tools()\nf()', external_lookup={'tools': lambda: [HostFunction(boom), HostFunction(Opaque)]})
    assert (error.value.exc_type, error.value.message) == ('KeyError', "'k'")
    with pytest.raises(corral.SandboxRuntimeError) as error:
        await session.feed_run('c()')
    assert error.value.message == (
        "Opaque() returned a value of type 'Opaque' that cannot enter the sandbox: a value of type 'Opaque' cannot cross "
        'the sandbox boundary; use None, bool, int, float, str, bytes, list, tuple, dict, set, frozenset, datetime, Decimal or UUID values'
    )


async def test_a_call_that_cannot_be_sent_names_the_callable_as_the_script_knows_it(session):
    """It named the callable by its wire name (`<value 1b...>()`)."""
    with pytest.raises(corral.SandboxRuntimeError) as error:
        await session.feed_run('h = get()\nh(object())', external_lookup={'get': lambda: HostFunction(add)})
    assert (error.value.exc_type, error.value.message) == (
        'TypeError',
        "add() cannot be called with these arguments: a value of type 'object' cannot cross the sandbox boundary; "
        'use None, bool, int, float, str, bytes, list, tuple, dict, set, frozenset, datetime, Decimal or UUID values',
    )


async def test_a_held_callable_gives_no_reach_into_the_host(session):
    await session.feed_run('f = tools()', external_lookup={'tools': lambda: HostFunction(add)})
    for attribute in ('__globals__', '__closure__', '__code__', '__defaults__', '__wrapped__', '__self__', '__dict__'):
        with pytest.raises((corral.SandboxSyntaxError, corral.SandboxRuntimeError)) as error:
            await session.feed_run(f'f.{attribute}')
        assert isinstance(error.value, corral.SandboxSyntaxError) or error.value.exc_type == 'AttributeError', attribute
    assert await session.feed_run('f.x = 1\nf.__name__ = "other"\nf(2, 3), f.x') == (5, 1)  # the script's function changes, the host's not
    assert not hasattr(add, 'x') and add.__name__ == 'add'


def test_a_name_of_another_session_reaches_nothing():
    mine, theirs = HostCallables(), HostCallables()
    given = HostFunction(add)
    with giving_callables(mine):
        data = pack([given], side='host')
    assert Decoder(callables=mine).decode(data)[0] is given
    stale = Decoder(callables=theirs).decode(data)[0]
    assert not callable(stale) and type(stale).__name__ == '_CallableRef'
    assert stale.name.startswith('<value ') and stale.shown == 'add' and stale.is_async is False
    name = mine.ref(given).name
    other = name[:-2] + ('1' if name[-2] == '0' else '0') + '>'  # one hex digit changed (a fixed '0' was the name itself 1 time in 16)
    forged = msgpack.packb(msgpack.ExtType(41, msgpack.packb([other, 'add', False])))
    assert type(Decoder(callables=mine).decode(forged)).__name__ == '_CallableRef'
    for bad in (b'\x01', msgpack.packb([1, 'add', False]), msgpack.packb(['n', 'add'])):
        with pytest.raises(ValueError, match='^malformed host callable in a frame$'):
            Decoder(callables=mine).decode(msgpack.packb(msgpack.ExtType(41, bad)))


def test_outside_a_sessions_packing_a_callable_is_refused():
    with pytest.raises(TypeError, match="^a value of type 'function' cannot cross the sandbox boundary"):
        pack(add, side='host')
    with pytest.raises(TypeError, match="^a value of type 'HostFunction' cannot cross the sandbox boundary"):
        pack(HostFunction(add), side='host')


async def test_a_stored_session_replays_its_calls_and_a_held_callable_is_gone_after_a_load():
    async with corral.Pool(checkpoints=None) as pool:
        async with pool.checkout() as session:
            await session.feed_run('f = tools()\nkept = f(2, 3)', external_lookup={'tools': lambda: HostFunction(add)})
            state = await session.dump()
        async with pool.checkout() as loaded:
            await loaded.load_session(state)  # replayed: the call is answered from the journal
            assert await loaded.feed_run('kept, f.__name__') == (5, 'add')
            with pytest.raises(corral.SandboxRuntimeError) as error:
                await loaded.feed_run('f(1, 1)')
            assert (error.value.exc_type, error.value.message) == (
                'NameError', 'the host function add this calls is not one this session gave (one given before the session was stored and loaded is gone)'
            )


async def test_a_host_modules_value_may_hold_one(pool):
    module = corral.ExternalModule({}, values={'ops': {'add': HostFunction(add)}, 'LIMIT': 3})
    async with pool.checkout(external_modules={'tools': module}) as session:
        assert await session.feed_run('import tools\ntools.ops["add"](tools.LIMIT, 4)') == 7
    async with pool.checkout(external_modules={'tools': corral.ExternalModule({}, values={'op': add})}) as session:
        with pytest.raises(TypeError, match="^a value of type 'function' cannot cross the sandbox boundary"):  # not wrapped: refused
            await session.feed_run('import tools')
