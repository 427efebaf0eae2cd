"""`corral-monty subprocess` behind Monty's own client (`pydantic_monty`), which spawns it as each
worker of its pool: what an application written for Monty gets on corral, unchanged."""

from __future__ import annotations

import asyncio
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pydantic_monty = pytest.importorskip('pydantic_monty')

SOURCE = Path(__file__).resolve().parents[2] / 'src'


@pytest.fixture(scope='module')
def binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An executable that runs this checkout's `corral-monty` (what MONTY_BIN names)."""
    path = tmp_path_factory.mktemp('bin') / 'corral-monty'
    path.write_text(f'#!/bin/sh\nPYTHONPATH={SOURCE} exec {sys.executable} -m corral.monty "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture(scope='module')
def monty(binary: Path) -> Iterator[pydantic_monty.Monty]:
    with pydantic_monty.Monty(binary_path=binary) as pool:
        yield pool


def test_a_feed_calls_the_applications_function_and_prints(monty: pydantic_monty.Monty) -> None:
    printed: list[tuple[str, str]] = []
    with monty.checkout(type_check=True, type_check_stubs='def double(x: int) -> int: ...') as session:
        value = session.feed_run(
            'x = 20\nprint("x is", x)\ndouble(x) + 2',
            external_lookup={'double': lambda x: x * 2},
            print_callback=lambda stream, text: printed.append((stream, text)),
        )
        assert value == 42
        assert printed == [('stdout', 'x is 20\n')]
        assert session.feed_run('x + 1') == 21  # the session keeps its variables


def test_values_cross_both_ways(monty: pydantic_monty.Monty) -> None:
    with monty.checkout() as session:
        value = session.feed_run('[a, {1: (2.5, b"x")}, None, 2**80, -2**70]', inputs={'a': {'k': [1, 2]}})
        assert value == [{'k': [1, 2]}, {1: (2.5, b'x')}, None, 2**80, -(2**70)]


def test_a_name_read_is_looked_up_as_a_value_or_a_function(monty: pydantic_monty.Monty) -> None:
    with monty.checkout() as session:
        assert session.feed_run('f = add\nf(LIMIT, 1)', external_lookup={'add': lambda a, b: a + b, 'LIMIT': 10}) == 11


def test_errors_a_model_reads(monty: pydantic_monty.Monty) -> None:
    with monty.checkout(type_check=True) as session:
        with pytest.raises(pydantic_monty.MontyTypingError) as typing_error:
            session.feed_run('y: int = "s"')
        assert str(typing_error.value) == (
            'error[invalid-assignment]: Object of type `Literal["s"]` is not assignable to `int`\n'
            ' --> main.py:1:10\n'
            '  |\n'
            '1 | y: int = "s"\n'
            '  |    ---   ^^^ Incompatible value of type `Literal["s"]`\n'
            '  |    |\n'
            '  |    Declared type\n'
            '\n'
        )
        with pytest.raises(pydantic_monty.MontyRuntimeError) as runtime_error:
            session.feed_run('1 / 0')
        assert repr(runtime_error.value) == 'MontyRuntimeError(ZeroDivisionError: division by zero)'
        with pytest.raises(pydantic_monty.MontyRuntimeError) as name_error:
            session.feed_run('undefined_function(1)', skip_type_check=True)
        assert repr(name_error.value) == "MontyRuntimeError(NameError: name 'undefined_function' is not defined)"


def test_gathered_async_calls(binary: Path) -> None:
    async def add_one(x: int) -> int:
        await asyncio.sleep(0.01)
        return x + 1

    async def main() -> object:
        async with pydantic_monty.AsyncMonty(binary_path=binary) as pool:
            async with pool.checkout() as session:
                return await session.feed_run('import asyncio\nawait asyncio.gather(add_one(1), add_one(2))', external_lookup={'add_one': add_one})

    assert asyncio.run(main()) == [2, 3]


def test_environment_and_files_are_the_applications(monty: pydantic_monty.Monty, tmp_path: Path) -> None:
    (tmp_path / 'notes.txt').write_text('hello')
    with monty.checkout() as session:
        mount = pydantic_monty.MountDir(host_path=str(tmp_path), virtual_path='/data', mode='read-write')
        code = 'from pathlib import Path\nPath("/data/out.txt").write_text(Path("/data/notes.txt").read_text().upper())\nsorted(p.name for p in Path("/data").iterdir())'
        assert session.feed_run(code, mount=mount) == ['notes.txt', 'out.txt']
    assert (tmp_path / 'out.txt').read_text() == 'HELLO'


def test_a_host_functions_stop_iteration_reaches_the_script_as_itself(monty: pydantic_monty.Monty) -> None:
    """The parent answers a sync call while the event loop goes on (an awaitable the session awaits):
    a StopIteration it raises stays a StopIteration, not PEP 479's RuntimeError."""

    def exhausted() -> None:
        raise StopIteration('no more')

    with monty.checkout() as session:
        code = 'try:\n    exhausted()\nexcept StopIteration as e:\n    caught = repr(e)\ncaught'
        assert session.feed_run(code, external_lookup={'exhausted': exhausted}) == "StopIteration('no more')"
