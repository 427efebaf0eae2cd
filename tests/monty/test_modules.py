"""A parent's modules through the Monty door, and the core's external modules they become:
submodules (`import pkg.sub`) as attributes of their parent, type-checked as a package."""

from __future__ import annotations

import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import corral

pydantic_monty = pytest.importorskip('pydantic_monty')

SOURCE = Path(__file__).resolve().parents[2] / 'src'


@pytest.fixture(scope='module')
def monty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pydantic_monty.Monty]:
    path = tmp_path_factory.mktemp('bin') / 'corral-monty'
    path.write_text(f'#!/bin/sh\nPYTHONPATH={SOURCE} exec {sys.executable} -m corral.monty "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    with pydantic_monty.Monty(binary_path=path) as pool:
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
