"""A type check is bounded in time and memory, and one slow check holds up no other."""

from __future__ import annotations

import asyncio
import os

import pytest

from corral import SandboxLimitError
from corral.typecheck import TypeChecker

from .scripts import branches

SLOW = (
    'the type check of the script took longer than the type_check_time limit of 0.5 seconds and was stopped; '
    'the script did not run (a script this slow to check is very long or very branched: split it into smaller scripts)'
)
LARGE = (
    'the type check of the script needed more than the type_check_memory limit of 268435456 bytes and was stopped; '
    'the script did not run (a script this costly to check is very long or very branched: split it into smaller scripts)'
)


@pytest.fixture
async def checker():
    tc = TypeChecker()
    yield tc
    await tc.aclose()


def _ty_processes() -> dict[int, list[int]]:
    """The nice value of every thread of each `ty` child process of this process, by pid."""
    found = {}
    for pid in os.listdir('/proc'):
        try:
            with open(f'/proc/{pid}/stat') as file:
                stat = file.read()
            fields = stat[stat.rindex(')') + 2 :].split()
            if stat[stat.index('(') + 1 : stat.rindex(')')] != 'ty' or int(fields[1]) != os.getpid():
                continue
            nices = []
            for tid in os.listdir(f'/proc/{pid}/task'):
                with open(f'/proc/{pid}/task/{tid}/stat') as file:
                    task = file.read()
                nices.append(int(task[task.rindex(')') + 2 :].split()[16]))
            found[int(pid)] = nices
        except (OSError, ValueError):
            continue
    return found


async def test_a_check_past_its_time_limit_is_stopped_and_its_processes_killed(checker: TypeChecker) -> None:
    assert await checker.check('x = 1', time_limit=0.5) is None  # the slot's server starts
    await asyncio.sleep(0.5)
    with pytest.raises(SandboxLimitError) as error:
        await checker.check(branches(1500), time_limit=0.5)
    assert (str(error.value), error.value.limit, error.value.value) == (SLOW, 'type_check_time', 0.5)
    await asyncio.sleep(0.2)  # the killed processes are reaped in the background
    assert len(_ty_processes()) <= 1  # at most the idle slot's server: none of the stopped check's
    assert await checker.check('y: int = 1') is None
    assert await checker.check('y: int = "a"', time_limit=30) is not None


@pytest.mark.slow
async def test_a_check_past_its_memory_bound_is_stopped(checker: TypeChecker) -> None:
    with pytest.raises(SandboxLimitError) as error:
        await checker.check(branches(3500), memory=256 * 1024**2)
    assert (str(error.value), error.value.limit, error.value.value) == (LARGE, 'type_check_memory', 256 * 1024**2)
    assert await checker.check('x = 1', memory=256 * 1024**2) is None


async def test_the_memory_bound_is_set_on_every_ty_process(checker: TypeChecker) -> None:
    assert await checker.check('x = 1', memory=300 * 1024**2) is None
    await asyncio.sleep(0.5)
    assert await checker.check('x: int = "a"', memory=300 * 1024**2) is not None  # `ty check` runs too
    servers = [slot.server for slot in checker._slots if slot.server is not None]
    assert servers, 'the slot has a warm server'
    for server in servers:
        with open(f'/proc/{server._proc.pid}/limits') as file:
            line = next(line for line in file if line.startswith('Max data size'))
        assert line.split()[3:5] == ['314572800', '314572800']


async def test_a_slow_check_holds_up_no_other(checker: TypeChecker) -> None:
    """While one check runs on (and gets the lowest CPU priority), another check starts and ends."""
    checker.demote_after = 0.2
    assert await checker.check('x = 1') is None
    await asyncio.sleep(0.5)  # the slot's server is warm
    heavy = asyncio.ensure_future(checker.check(branches(3000), time_limit=60))
    try:
        for _ in range(100):  # the host parses the script first
            await asyncio.sleep(0.1)
            processes = _ty_processes()
            if processes and all(nice == 19 for nices in processes.values() for nice in nices):
                break
        assert list(processes.values())[0][0] == 19 and all(nice == 19 for nices in processes.values() for nice in nices)
        assert not heavy.done()
        assert await checker.check('x: int = 1', time_limit=60) is None
        assert await checker.check('x: int = "a"', time_limit=60) == (
            'error[invalid-assignment]: Object of type `Literal["a"]` is not assignable to `int`\n'
            ' --> main.py:1:10\n'
            '  |\n'
            '1 | x: int = "a"\n'
            '  |    ---   ^^^ Incompatible value of type `Literal["a"]`\n'
            '  |    |\n'
            '  |    Declared type'
        )
        assert not heavy.done()
    finally:
        heavy.cancel()
        await asyncio.gather(heavy, return_exceptions=True)
