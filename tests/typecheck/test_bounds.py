"""A type check is bounded in time and memory, and one slow check holds up no other."""

from __future__ import annotations

import asyncio
import os
import signal

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


def _union_stubs(classes: int) -> str:
    """Stubs of `classes` small classes and one function over their union: some 9 KB for 400, which
    keep ty busy for seconds (quadratic in the union's size)."""
    lines = [f'class C{i}:\n    x: int' for i in range(classes)]
    return '\n'.join([*lines, 'U = ' + ' | '.join(f'C{i}' for i in range(classes)), 'def f(x: U) -> U: ...']) + '\n'


STUBS_SLOW = (
    'the type check of the stubs took longer than the type_check_time limit of 1 seconds and was stopped; the session did not open '
    '(stubs this slow to check are very large, or have very large unions or overloads: simplify them)'
)
STUBS_LARGE = (
    'the type check of the stubs needed more than the type_check_memory limit of 134217728 bytes and was stopped; the session did not open '
    '(stubs this costly to check are very large, or have very large unions or overloads: simplify them)'
)


@pytest.mark.slow
async def test_the_stub_check_is_bounded_in_time_and_its_cpu_counted(checker: TypeChecker) -> None:
    """400 classes in a union kept ty busy for 12 s and more, without a bound; now within the time
    limit, its process killed, and the CPU it used reported."""
    assert await checker.check_stubs('def f() -> int: ...\n', time_limit=30) is None  # the checker's setup is not the stubs' time
    used: list[float] = []
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(SandboxLimitError) as error:
        await checker.check_stubs(_union_stubs(400), time_limit=1, on_cpu=used.append)
    assert loop.time() - started < 3
    assert (str(error.value), error.value.limit, error.value.value) == (STUBS_SLOW, 'type_check_time', 1)
    assert len(used) == 1 and 0.05 < used[0] < 3  # on a busy machine ty gets part of the second
    assert _ty_processes() == {}
    assert (len(checker._stub_results), checker._stub_checks) == (1, {})  # a stopped check is not kept: the first stubs' answer only


@pytest.mark.slow
async def test_the_stub_check_is_bounded_in_memory(checker: TypeChecker) -> None:
    """6 MB of plain stubs took 0.6 GB of ty's heap."""
    stubs = ''.join(f'def function_{i}(argument: int, other: str = "") -> list[int]: ...\n' for i in range(90_000))
    assert len(stubs) > 6_000_000
    with pytest.raises(SandboxLimitError) as error:
        await checker.check_stubs(stubs, memory=128 * 1024**2)
    assert (str(error.value), error.value.limit, error.value.value) == (STUBS_LARGE, 'type_check_memory', 128 * 1024**2)


async def test_a_stub_check_nobody_waits_for_is_stopped_and_a_shared_one_goes_on(checker: TypeChecker) -> None:
    """The check was shielded: a checkout that left kept ty running for as long as it took. Now it
    stops when the last checkout waiting for it gives up, and goes on while one still waits."""
    assert await checker.check_stubs('def f() -> int: ...\n') is None
    alone = asyncio.ensure_future(checker.check_stubs(_union_stubs(400)))
    await asyncio.sleep(0.5)
    assert len(_ty_processes()) == 1
    alone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await alone
    for _ in range(50):
        if not _ty_processes():
            break
        await asyncio.sleep(0.02)
    assert _ty_processes() == {}
    assert checker._stub_checks == {}

    stubs = _union_stubs(60) + 'def g() -> Litteral[1]: ...\n'
    first = asyncio.ensure_future(checker.check_stubs(stubs))
    second = asyncio.ensure_future(checker.check_stubs(stubs))
    for _ in range(500):  # ty is held stopped while one of the two gives up, however fast it would check
        if running := _ty_processes():
            break
        await asyncio.sleep(0.01)
    [pid] = running
    os.kill(pid, signal.SIGSTOP)
    try:
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        assert len(checker._stub_checks) == 1
    finally:
        os.kill(pid, signal.SIGCONT)
    diagnostics = await second
    assert diagnostics is not None and diagnostics.startswith('error[unresolved-reference]: Name `Litteral` used when not defined')


async def test_checked_stubs_are_kept_by_a_hash_of_their_text(checker: TypeChecker) -> None:
    """The answers were kept with the stubs' whole text as their key (64 MiB each, 64 of them)."""
    used: list[float] = []
    stubs = 'def f() -> int: ...\n' + '# padding\n' * 10_000
    assert await checker.check_stubs(stubs, {'m': 'def g() -> str: ...\n'}, on_cpu=used.append) is None
    assert await checker.check_stubs(stubs, {'m': 'def g() -> str: ...\n'}, on_cpu=used.append) is None  # kept: ty does not run
    assert len(used) == 1 and used[0] > 0
    assert [len(key) for key in checker._stub_results] == [32]
    assert await checker.check_stubs(stubs, {'m': 'def g() -> int: ...\n'}) is None
    assert await checker.check_stubs(None, {'m': stubs}) is None
    assert len(checker._stub_results) == 3


async def test_a_scripts_check_reports_the_cpu_of_its_ty_processes(checker: TypeChecker) -> None:
    """`ty check` (a script with an error) and the warm server (a clean one) both count."""
    used: list[float] = []
    assert await checker.check('x: int = "a"', on_cpu=used.append) is not None
    await asyncio.sleep(1)  # the slot's server has started and warmed up
    for i in range(30):  # clean: the warm server answers (/proc counts its CPU in ticks of 10 ms)
        assert await checker.check(f'y{i}: int = {i}\n' + 'z = [str(x) for x in range(10)]\n' * 200, on_cpu=used.append) is None
    assert len(used) == 31 and used[0] > 0 and sum(used[1:]) > 0  # the server's start and warm-up too
