"""A parent's modules through the Monty door, and the core's external modules they become:
submodules (`import pkg.sub`) as attributes of their parent, type-checked as a package."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import msgpack
import pytest
import pytest_asyncio

import corral

pydantic_monty = pytest.importorskip('pydantic_monty')

from .test_client import binary, monty  # noqa: E402, F401 - the fixtures: this checkout's corral-monty, and a pool of it

@pytest_asyncio.fixture(loop_scope='module')
async def binary_pool(binary: Path) -> AsyncIterator[pydantic_monty.AsyncMonty]:
    async with pydantic_monty.AsyncMonty(binary_path=binary) as pool:
        yield pool


def mul(a: int, b: int) -> int:
    return a * b


def runtime_error(session: pydantic_monty.MontySession, code: str) -> str:
    with pytest.raises(pydantic_monty.MontyRuntimeError) as error:
        session.feed_run(code)
    return str(error.value)


def test_a_parents_submodules_are_attributes_of_their_parent(monty: pydantic_monty.Monty) -> None:
    deeper = pydantic_monty.ExternalModule({'LEVEL': 3})
    sub = pydantic_monty.ExternalModule({'mul': mul, 'LEVEL': 2, 'deeper': deeper})
    pkg = pydantic_monty.ExternalModule({'LEVEL': 1, 'sub': sub})
    with monty.checkout(external_modules={'pkg': pkg}) as session:
        code = 'import pkg.sub.deeper\nimport pkg.sub as s\nfrom pkg.sub import mul\n[pkg.LEVEL, s.LEVEL, pkg.sub.deeper.LEVEL, mul(2, 3), s.mul(4, 5), repr(s), pkg.sub is s]'
        assert session.feed_run(code) == [1, 2, 3, 6, 20, "<module 'pkg.sub'>", True]
        assert runtime_error(session, 'import pkg.missing') == "ModuleNotFoundError: No module named 'pkg.missing'"
        assert runtime_error(session, 'import pkg.LEVEL') == "ModuleNotFoundError: No module named 'pkg.LEVEL'"
        assert runtime_error(session, 'from pkg.sub.deeper.more import x') == "ModuleNotFoundError: No module named 'pkg.sub.deeper.more'"
        assert runtime_error(session, 'import pkg\npkg.sub.mul(1)') == "TypeError: mul() missing 1 required positional argument: 'b'"


def test_a_forged_long_dotted_function_name_is_refused(monty: pydantic_monty.Monty) -> None:
    def probe() -> str:
        return 'hidden'

    probe.__name__ = 'pkg.sub.' * 3000 + 'mul'  # a value calling, by name, deep into submodules that do not exist
    sub = pydantic_monty.ExternalModule({'mul': mul})
    with monty.checkout(external_modules={'pkg': pydantic_monty.ExternalModule({'sub': sub})}) as session:
        with pytest.raises(pydantic_monty.MontyRuntimeError) as error:
            session.feed_run('import pkg.sub\nprobe()', inputs={'probe': probe})
        assert str(error.value) == f"NameError: name '{probe.__name__}' is not defined"
        assert session.feed_run('import pkg.sub\npkg.sub.mul(2, 4)') == 8


def test_submodule_stubs_are_a_package_for_the_type_check(monty: pydantic_monty.Monty) -> None:
    sub = pydantic_monty.ExternalModule({'mul': mul}, stubs='def mul(a: int, b: int) -> int: ...\n')
    pkg = pydantic_monty.ExternalModule({'LEVEL': 1, 'sub': sub}, stubs='LEVEL: int\n')
    with monty.checkout(type_check=True, external_modules={'pkg': pkg}) as session:
        assert session.feed_run('import pkg.sub\nfrom pkg import LEVEL\npkg.sub.mul(LEVEL, 7)') == 7
        with pytest.raises(pydantic_monty.MontyTypingError) as error:
            session.feed_run("from pkg.sub import mul\nmul('x', 2)")
        assert 'error[invalid-argument-type]: Argument to function `mul` is incorrect' in str(error.value)
        assert 'main.py:2:5' in str(error.value)


async def test_a_core_submodule_needs_its_parent_and_goes_with_it(pool: corral.Pool) -> None:
    sub = corral.ExternalModule({'mul': mul}, values={'LEVEL': 2})
    with pytest.raises(ValueError) as error:
        pool.checkout(external_modules={'pkg.sub': sub})
    assert str(error.value) == "external_modules key 'pkg.sub' is a submodule of 'pkg', which is not offered: offer 'pkg' too"
    with pytest.raises(ValueError) as error:
        pool.checkout(external_modules={'pkg': sub, 'pkg..sub': sub})
    assert str(error.value) == "external_modules key 'pkg..sub' is not a valid module name"
    async with pool.checkout(external_modules={'pkg.sub': sub, 'pkg': corral.ExternalModule({}, values={'LEVEL': 1})}) as session:
        assert await session.feed_run('import pkg.sub\nfrom pkg.sub import mul\n[pkg.LEVEL, pkg.sub.LEVEL, mul(2, 3)]') == [1, 2, 6]
        with pytest.raises(ValueError) as error:
            session.add_external_module('other.sub', sub)
        assert str(error.value) == "external module name 'other.sub' is a submodule of 'other', which is not offered: offer 'other' too"
        session.add_external_module('pkg', corral.ExternalModule({}, values={'LEVEL': 5}))  # a new pkg, without the old one's submodules
        with pytest.raises(corral.SandboxRuntimeError) as gone:
            await session.feed_run('import pkg.sub')
        assert gone.value.display().splitlines()[-2] == "ModuleNotFoundError: No module named 'pkg.sub'"
        assert gone.value.display().splitlines()[-1].endswith("urllib.parse, uuid, warnings, zoneinfo; and the host's modules: pkg")
        assert await session.feed_run('import pkg\npkg.LEVEL') == 5


async def test_a_restored_binding_calls_the_function_the_parent_offers_after_the_load(binary_pool: pydantic_monty.AsyncMonty) -> None:
    async def amul(a: int, b: int) -> int:
        return a * b

    async def later_pkg() -> pydantic_monty.ExternalModule:  # the loading parent's module: a factory, its mul async now
        return pydantic_monty.ExternalModule({'LEVEL': 1, 'sub': pydantic_monty.ExternalModule({'mul': amul})})

    pkg = pydantic_monty.ExternalModule({'LEVEL': 1, 'sub': pydantic_monty.ExternalModule({'mul': mul})})
    async with binary_pool.checkout(external_modules={'pkg': pkg}) as session:
        await session.feed_run('import pkg.sub')
        blob = await session.dump()
    async with binary_pool.checkout(external_modules={'pkg': later_pkg}) as session:
        await session.load_session(blob)
        assert await session.feed_run('[await pkg.sub.mul(2, 3), pkg.LEVEL]') == [6, 1]
    async with binary_pool.checkout() as session:  # a parent without the module: the script's name is not defined
        await session.load_session(blob)
        with pytest.raises(pydantic_monty.MontyRuntimeError) as error:
            await session.feed_run('pkg.sub.mul(2, 3)')
        assert str(error.value) == "NameError: name 'pkg.sub.mul' is not defined"


async def test_a_state_carries_its_modules_for_a_loader_that_offers_them(pool: corral.Pool) -> None:
    sub = corral.ExternalModule({'mul': mul}, stubs='def mul(a: int, b: int) -> int: ...\n')
    pkg = corral.ExternalModule({'twice': lambda x: 2 * x}, values={'LEVEL': 1})
    async with pool.checkout(external_modules={'pkg': pkg, 'pkg.sub': sub}) as session:
        await session.feed_run('import pkg.sub\nm = pkg.sub')
        state = await session.dump()
    async with pool.checkout() as session:
        with pytest.raises(corral.SandboxStateError) as refused:
            await session.load_session(state)
        assert str(refused.value).startswith('the session state was made for other host functions')
    asked: list[dict[str, tuple[str | None, list[str]]]] = []

    async def offer(modules: dict[str, tuple[str | None, list[str]]]) -> None:
        asked.append(modules)
        session.add_external_module('pkg', corral.ExternalModule({'twice': lambda x: 3 * x}, values={'LEVEL': 7}))
        session.add_external_module('pkg.sub', corral.ExternalModule({'mul': lambda a, b: a + b}, stubs=modules['pkg.sub'][0]))

    async with pool.checkout() as session:
        await session.load_session(state, modules=offer)
        assert asked == [{'pkg': (None, ['twice']), 'pkg.sub': ('def mul(a: int, b: int) -> int: ...\n', ['mul'])}]
        # the variable from before the dump holds the module the session offers now
        assert await session.feed_run('[m.mul(2, 3), pkg.twice(2), pkg.LEVEL, m is pkg.sub]') == [5, 6, 7, True]


def test_the_parent_is_asked_for_its_module_at_each_import(monty: pydantic_monty.Monty) -> None:
    pkg = pydantic_monty.ExternalModule({'LEVEL': 4, 'sub': pydantic_monty.ExternalModule({'mul': mul})})
    with monty.checkout(external_modules={'pkg': pkg}) as session:
        step = session.feed_start('import pkg\nimport json\nfrom pkg.sub import mul\nimport pkg.sub as s\nmul(2, pkg.LEVEL) + s.mul(1, 1)')
        asked: list[str] = []
        while not isinstance(step, pydantic_monty.MontyComplete):
            asked.append(repr(step))
            step = step.resume_auto()
        assert step.output == 9
        assert asked == [
            'FunctionSnapshot(function_name="import", is_os_function=true)',
            'FunctionSnapshot(function_name="import", is_os_function=true)',
            'FunctionSnapshot(function_name="import", is_os_function=true)',
            'FunctionSnapshot(function_name="pkg.sub.mul", is_os_function=false)',
            'FunctionSnapshot(function_name="pkg.sub.mul", is_os_function=false)',
        ]


def test_a_module_leaves_as_a_module_node_with_the_id_of_its_import(monty: pydantic_monty.Monty) -> None:
    sub = pydantic_monty.ExternalModule({'LEVEL': 3})
    tools = pydantic_monty.ExternalModule({'mul': mul, 'LEVEL': 2, 'sub': sub})
    with monty.checkout(external_modules={'tools': tools}) as session:
        value = session.feed_run('import tools.sub\ntools')
        assert isinstance(value, pydantic_monty.ExternalModule)
        assert (value.id, value.stubs, list(value.attrs)) == (tools.id, None, ['mul', 'LEVEL', 'sub'])
        assert value.attrs['mul'] == 'tools.mul' and value.attrs['LEVEL'] == 2  # a function as its dotted name
        assert (value.attrs['sub'].id, value.attrs['sub'].attrs) == (sub.id, {'LEVEL': 3})
        # every import of a name is one object, as in CPython (Monty's imports are one object each)
        assert session.feed_run('import tools\nimport tools as t\nfrom tools import sub\n[tools is t, t.sub is sub, repr(t)]') == [True, True, "<module 'tools'>"]
        both = session.feed_run('import tools.sub as s\n[s, tools]')
        assert [module.id for module in both] == [sub.id, tools.id]


def test_a_dump_carries_its_type_check_its_format_and_its_modules_ids(monty: pydantic_monty.Monty) -> None:
    tools = pydantic_monty.ExternalModule({'mul': mul}, stubs='def mul(a: int, b: int) -> int: ...\n')
    with monty.checkout(type_check=True, type_check_format='pylint', external_modules={'tools': tools}) as session:
        assert session.feed_run('import tools\ntools.mul(2, 3)') == 6
        blob = session.dump()
    later = pydantic_monty.ExternalModule({'mul': mul})  # the loading parent's module: another id, no stubs
    with monty.checkout(external_modules={'tools': later}) as session:
        session.load_session(blob)
        with pytest.raises(pydantic_monty.MontyTypingError) as error:
            session.feed_run("tools.mul('x', 2)")
        assert str(error.value) == 'main.py:1: [invalid-argument-type] Argument to function `mul` is incorrect: Expected `int`, found `Literal["x"]`\n'
        assert session.feed_run("tools.mul('x', 2)", skip_type_check=True) == 'xx'
        assert session.feed_run('tools').id == tools.id  # the binding's id is its import's, from before the dump
        blob = session.dump()  # and the next dump carries them again
    at = blob.index(msgpack.packb('type_check_format')) + len(msgpack.packb('type_check_format'))
    tampered = blob[:at] + msgpack.packb(0) + blob[at + 1 :]  # the format's setting, as any byte of the state, is signed
    with monty.checkout(external_modules={'tools': later}) as session:
        with pytest.raises(pydantic_monty.MontyRuntimeError) as refused:
            session.load_session(tampered)
        assert str(refused.value) == (
            "ValueError: the session state was altered, or signed with another key: its signature does not match this pool's state key"
        )
    with monty.checkout(external_modules={'tools': later}) as session:
        session.load_session(blob)
        assert session.feed_run('tools').id == tools.id
        with pytest.raises(pydantic_monty.MontyTypingError):
            session.feed_run("tools.mul('x', 2)")
    with monty.checkout(external_modules={'tools': later}) as session:  # unchecked, dumped: unchecked when loaded
        session.feed_run('import tools')
        blob = session.dump()
    with monty.checkout(type_check=True, external_modules={'tools': later}) as session:
        session.load_session(blob)
        assert session.feed_run("tools.mul('x', 2)") == 'xx'
