"""The pool: lazy start, warm workers, and refusing to run without a lockdown layer."""

import asyncio
import os
import re

import pytest

import corral
from corral.host.workers import Zygote


async def test_creating_a_pool_starts_nothing():
    pool = corral.Pool()
    assert pool._zygote._process is None
    async with pool:
        assert pool._zygote._process is None
        async with pool.checkout() as session:
            assert await session.feed_run('1') == 1
        assert pool._zygote._process is not None
    assert pool._zygote._process is None


async def test_warm_workers_wait_for_the_next_checkout():
    async with corral.Pool(warm_workers=3) as pool:
        async with pool.checkout():
            await pool._refill
            assert len(pool._idle) == 3
            assert all(worker.alive() for worker in pool._idle)


async def test_a_dead_idle_worker_is_replaced():
    async with corral.Pool(warm_workers=1) as pool:
        async with pool.checkout():
            await pool._refill
        (idle,) = pool._idle
        idle.kill()
        async with pool.checkout() as session:
            assert await session.feed_run('2 + 2') == 4


_read_report = Zygote._read_report


async def _missing_netns(control):
    """The zygote's real report, as on a machine without network namespaces."""
    return {**await _read_report(control), 'netns': 'cannot enter a new network namespace'}


async def test_a_missing_lockdown_layer_refuses_to_start(monkeypatch):
    monkeypatch.setattr(Zygote, '_read_report', staticmethod(_missing_netns))
    async with corral.Pool() as pool:
        with pytest.raises(corral.SandboxInsecureError) as info:
            async with pool.checkout():
                pass
    assert info.value.display() == (
        'refusing to run scripts: these lockdown layers are not available on this machine:\n'
        '- netns: cannot enter a new network namespace\n'
        'To enable them:\n'
        '- the network, mount, PID, UTS and IPC namespaces are made inside the user namespace (layer userns); without it, '
        'only root with CAP_SYS_ADMIN can make them (in Docker, `--cap-add SYS_ADMIN`)\n'
        "Or run without them, knowing scripts are then less contained: Pool(skip_layers=['netns']), "
        'or on the command line --skip-layers netns.'
    )


async def test_skip_layers_runs_without_the_named_layer(monkeypatch):
    monkeypatch.setattr(Zygote, '_read_report', staticmethod(_missing_netns))
    async with corral.Pool(skip_layers={'netns'}) as pool:
        async with pool.checkout() as session:
            assert await session.feed_run('1 + 1') == 2


def test_unknown_layer_names_are_refused():
    with pytest.raises(ValueError, match=r"unknown lockdown layer\(s\) \['selinux'\]; the layers are \['language', 'seccomp', 'userns', 'netns', 'mntns', 'pidns', 'utsns', 'ipcns', 'uid', 'rlimits', 'no_new_privs'\]"):
        corral.Pool(skip_layers={'selinux'})


async def test_session_limits_other_than_the_defaults_get_a_worker_of_their_own():
    async with corral.Pool() as pool:
        async with pool.checkout(limits=corral.Limits(memory=256 * 1024**2)) as session:
            assert await session.feed_run('len(bytearray(10 * 1024**2))') == 10 * 1024**2
            with pytest.raises(corral.SandboxLimitError) as info:
                await session.feed_run('x = bytearray(512 * 1024**2)')
            assert (info.value.limit, info.value.value) == ('memory', 256 * 1024**2)


def _open_fds(pid: int) -> dict[int, str]:
    """`{fd: what it names}` for a process, as /proc shows it."""
    folder = f'/proc/{pid}/fd'
    return {int(fd): os.readlink(f'{folder}/{fd}') for fd in os.listdir(folder)}


def _epoll_targets(pid: int, fd: int) -> set[int]:
    """The inodes of the files registered with the epoll instance that `fd` of `pid` names."""
    with open(f'/proc/{pid}/fdinfo/{fd}') as info:
        return {int(inode, 16) for inode in re.findall(r'^tfd:.*\bino:([0-9a-f]+)', info.read(), re.MULTILINE)}


@pytest.mark.skipif(os.geteuid() != 0, reason="a worker is not dumpable: only root may read its /proc/PID/fd")
async def test_each_worker_has_an_event_loop_of_its_own():
    # Workers inherit the zygote's event loop; one sharing its epoll instance or self-pipe with the
    # zygote or another worker would be a channel between sessions.
    async with corral.Pool() as pool:
        async with pool.checkout() as first, pool.checkout() as second:
            for session in (first, second):
                assert await session.feed_run('import asyncio\nawait asyncio.sleep(0)\n1') == 1
            sockets = []
            for pid in (pool._zygote.pid, first._worker.pid, second._worker.pid):
                fds = _open_fds(pid)
                own = {int(link[len('socket:['):-1]) for link in fds.values() if link.startswith('socket:[')}
                (epoll,) = [fd for fd, link in fds.items() if link == 'anon_inode:[eventpoll]']
                assert _epoll_targets(pid, epoll) <= own
                sockets.append(own)
            zygote, one, other = sockets
            assert not zygote & one and not zygote & other and not one & other
            # a worker holds its channel and its epoll instance, nothing else (no self-pipe)
            for session in (first, second):
                kinds = sorted('socket' if link.startswith('socket:[') else link for link in _open_fds(session._worker.pid).values())
                assert kinds == ['anon_inode:[eventpoll]', 'socket']


async def test_the_zygote_loads_none_of_the_hosts_modules():
    # The zygote starts without running the corral package's __init__ (ZYGOTE_PROGRAM), which
    # imports the host's API: a worker inherits the sandbox's modules alone.
    async with corral.Pool(warm_workers=0, skip_layers={'language'}) as pool:
        async with pool.checkout() as session:
            loaded = await session.feed_run("import sys\nsorted({name.split('.')[1] for name in sys.modules if name.startswith('corral.')})")
    assert loaded == ['channel', 'described', 'hostobjects', 'language', 'limits', 'values', 'worker']


async def test_the_zygote_imports_nothing_from_its_working_folder():
    # `python -c` puts '' (the working folder, '/') first on sys.path: a module there would shadow
    # the standard library's in every worker. The zygote starts with -P, which leaves it out.
    async with corral.Pool(warm_workers=0, skip_layers={'language'}) as pool:
        async with pool.checkout() as session:
            assert await session.feed_run("import sys\n[entry for entry in sys.path if entry in ('', '.', '/')]") == []


async def _address_space_limit(pid: int) -> int:
    """The worker's RLIMIT_AS, once it has locked itself down."""
    for _ in range(500):
        with open(f'/proc/{pid}/limits') as limits:
            (line,) = [line for line in limits if line.startswith('Max address space')]
        if line.split()[3] != 'unlimited':
            return int(line.split()[3])
        await asyncio.sleep(0.01)
    raise AssertionError('the worker did not lock down within 5 s')


async def test_a_spawn_given_up_does_not_hand_its_worker_to_the_next():
    # A checkout cancelled while its worker is being forked: that worker is killed when it
    # arrives, and the next spawn gets the worker forked for it, with its own limits.
    zygote = Zygote()
    try:
        (await zygote.spawn(memory=None, cpu_time=None)).kill()  # the zygote is up
        given_up = asyncio.ensure_future(zygote.spawn(memory=1024**3, cpu_time=600))
        await asyncio.sleep(0)
        given_up.cancel()
        worker = await zygote.spawn(memory=512 * 1024**2, cpu_time=60)
        try:
            assert (await _address_space_limit(worker.pid), given_up.cancelled()) == (512 * 1024**2, True)
        finally:
            worker.kill()
    finally:
        zygote.close()


async def test_closing_the_pool_ends_its_sessions_and_checkouts_still_waiting():
    pool = corral.Pool(warm_workers=0)
    open_session = pool.checkout()
    await open_session.__aenter__()
    assert await open_session.feed_run('1') == 1
    waiting = [asyncio.ensure_future(pool.checkout().__aenter__()) for _ in range(3)]
    await asyncio.sleep(0)
    await pool.aclose()
    outcomes = await asyncio.gather(*waiting, return_exceptions=True)
    assert [repr(outcome) for outcome in outcomes] == ["RuntimeError('the pool is closed')"] * 3
    with pytest.raises(corral.SandboxWorkerError) as info:
        for _ in range(50):  # the worker dies with the zygote, a moment after it
            await open_session.feed_run('2')
            await asyncio.sleep(0.01)
    assert info.value.display().endswith('the worker process exited; check out a new session')
    await open_session.aclose()
