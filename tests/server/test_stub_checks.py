"""The check of a session's stubs as it opens, through real `corral serve` processes: bounded by
the session's type_check_time and type_check_memory and the server's ceilings, stopped when its
client leaves, its stubs bounded in size, and its CPU counted toward the tenant's quota."""

from __future__ import annotations

import asyncio
import os

import pytest

import corral
from corral import RemotePool
from corral.server.quotas import SETTINGS_TTL, Quotas

from .conftest import running_server
from .test_replicas import key_file

STUBS_SLOW = (
    'the type check of the stubs took longer than the type_check_time limit of {} seconds and was stopped; the session did not open '
    '(stubs this slow to check are very large, or have very large unions or overloads: simplify them)'
)


def union_stubs(classes: int) -> str:
    """Some 9 KB of stubs for 400 classes, whose union keeps ty busy for seconds."""
    lines = [f'class C{i}:\n    x: int' for i in range(classes)]
    return '\n'.join([*lines, 'U = ' + ' | '.join(f'C{i}' for i in range(classes)), 'def f(x: U) -> U: ...']) + '\n'


def ty_children(pid: int) -> list[int]:
    """The `ty` processes whose parent is `pid`."""
    found = []
    for entry in os.listdir('/proc'):
        try:
            with open(f'/proc/{entry}/stat') as file:
                stat = file.read()
        except OSError:
            continue
        if stat[stat.index('(') + 1 : stat.rindex(')')] == 'ty' and int(stat[stat.rindex(')') + 2 :].split()[1]) == pid:
            found.append(int(entry))
    return found


@pytest.mark.slow
async def test_the_stub_check_is_bounded_and_ends_with_its_client(tmp_path):
    """9 KB of stubs kept ty running 12 s and more with no bound, after its client had left."""
    with running_server(tmp_path) as server:
        async with RemotePool(server.url) as pool:
            async with pool.checkout(type_check=True, type_check_stubs='def g() -> int: ...\n') as session:
                assert await session.feed_run('g()', external_lookup={'g': lambda: 1}) == 1
            idle = set(ty_children(server.process.pid))  # the warm servers kept for the next checks
            loop = asyncio.get_running_loop()
            started = loop.time()
            with pytest.raises(corral.SandboxLimitError) as info:
                async with pool.checkout(type_check=True, type_check_stubs=union_stubs(400), limits=corral.Limits(type_check_time=1)):
                    pass
            assert loop.time() - started < 5
            assert info.value.display() == STUBS_SLOW.format(1)
            assert set(ty_children(server.process.pid)) == idle

            opening = asyncio.ensure_future(pool.checkout(type_check=True, type_check_stubs=union_stubs(401)).__aenter__())
            for _ in range(200):
                if set(ty_children(server.process.pid)) - idle:
                    break
                await asyncio.sleep(0.05)
            assert set(ty_children(server.process.pid)) - idle
            opening.cancel()  # the client leaves
            with pytest.raises(asyncio.CancelledError):
                await opening
        for _ in range(100):
            if set(ty_children(server.process.pid)) == idle:
                break
            await asyncio.sleep(0.05)
        assert set(ty_children(server.process.pid)) == idle

        async with RemotePool(server.url) as pool:
            with pytest.raises(ValueError) as error:
                async with pool.checkout(limits=corral.Limits(stub_size=None)):
                    pass
            assert str(error.value) == (
                "limits.stub_size=None is over this server's ceiling of 1048576: a session of corral serve may lower its stub_size, "
                'not raise or lift it'
            )
            stubs = 'def f() -> int: ...\n' + '# a comment of the stubs\n' * 50_000
            with pytest.raises(corral.SandboxLimitError) as info:
                async with pool.checkout(type_check=True, type_check_stubs=stubs):
                    pass
            assert info.value.display() == (
                f"the stubs are {len(stubs)} bytes (type_check_stubs and the external modules' stubs together), "
                'more than the stub_size limit of 1048576 bytes; the session did not open'
            )
            async with pool.checkout() as session:  # the server goes on
                assert await session.feed_run('1 + 1') == 2
    assert 'Traceback' not in server.output()


@pytest.mark.slow
async def test_the_type_checkers_cpu_counts_toward_the_cpu_quota(tmp_path):
    """A tenant's sessions whose stubs take seconds of ty's CPU to check: that CPU was never counted."""
    store = f'sqlite:///{tmp_path}/store.db'
    with running_server(tmp_path, '--state-key-file', key_file(tmp_path), store=store) as server:
        async with corral.KeyRing(store) as keys, Quotas(store) as quotas:
            acme = await keys.create('acme')
            async with RemotePool(server.url, api_key=acme) as pool:
                for classes in (400, 401):  # each a check of its own (a kept answer costs nothing)
                    with pytest.raises(corral.SandboxLimitError) as info:
                        async with pool.checkout(type_check=True, type_check_stubs=union_stubs(classes), limits=corral.Limits(type_check_time=2)):
                            pass
                    assert info.value.display() == STUBS_SLOW.format(2)
                used = 0.0
                for _ in range(50):
                    used = await quotas.cpu_used('acme')
                    if used >= 0.5:
                        break
                    await asyncio.sleep(0.1)
                assert used >= 0.5  # two checks of up to 2 s of ty each, on a busy machine
                await quotas.set('acme', cpu_seconds_per_hour=0.5)
                await asyncio.sleep(SETTINGS_TTL)  # counts once the server's reading of acme's settings lapses
                with pytest.raises(corral.SandboxQuotaError) as quota:
                    async with pool.checkout(type_check=True, type_check_stubs='def g() -> int: ...\n'):
                        pass
                assert quota.value.display() == (
                    f"tenant 'acme' used {quota.value.used:.1f} CPU seconds in the last hour; its quota is 0.5 (cpu_seconds_per_hour)"
                )
    assert 'Traceback' not in server.output()
