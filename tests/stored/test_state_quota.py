"""Whatever a script does, a stored session stays saveable: its state never grows past the pool's
max_state_bytes. Overlay writes past it get ENOSPC; a feed whose journal would pass it is stopped
there with a SandboxLimitError naming the limit, and that stopped feed is what is stored."""

from __future__ import annotations

import pytest

import corral

KEY = b'test-state-key-0123456789abcdef!'
MiB = 1 << 20


def stop_text(quota: int) -> str:
    return f"OverflowError: the session's stored state would grow past the max_state_bytes limit of {quota} bytes (Pool(max_state_bytes=...))"


async def reopened(url: str, session_id: str, code: str, **options):
    """`code`'s value in the stored session, checked out by a new pool (as another process would)."""
    async with corral.Pool(state_key=KEY, store=url, warm_workers=0, **options) as pool:
        async with pool.checkout(session_id=session_id) as session:
            return await session.feed_run(code)


@pytest.mark.slow
async def test_two_32_mib_overlay_files_leave_the_session_saveable(tmp_path):
    """The red team's input: the overlay's own limit equals the state quota, so two 32 MiB files
    made a state over the quota, and every feed after raised once its host calls had run."""
    (tmp_path / 'data').mkdir()
    url = f'sqlite:///{tmp_path}/store.db'
    code = (
        'try:\n'
        '    for name in ("a", "b"):\n'
        '        with open(f"/data/{name}.bin", "wb") as f:\n'
        '            f.write(b"x" * (32 * 1024 * 1024))\n'
        '    outcome = "both written"\n'
        'except OSError as error:\n'
        '    outcome = str(error)\n'
        'outcome'
    )
    async with corral.Pool(state_key=KEY, store=url, warm_workers=0) as pool:
        async with pool.checkout(ephemeral=False, mounts=corral.Mount(tmp_path / 'data', '/data')) as session:
            outcome = await session.feed_run(code)
            assert outcome == (
                "[Errno 28] No space left on device (the session's stored state would grow past the max_state_bytes limit "
                "of 67108864 bytes (Pool(max_state_bytes=...))): '/data/b.bin'"
            )
            # b.bin was made, empty, by open(); its 32 MiB did not fit. And the session goes on.
            assert await session.feed_run('import os\n[os.path.getsize(f"/data/{n}") for n in sorted(os.listdir("/data"))]') == [32 * MiB, 0]
            session_id = session.session_id
    async with corral.Pool(state_key=KEY, store=url, warm_workers=0) as pool:
        async with pool.checkout(session_id=session_id, mounts=corral.Mount(tmp_path / 'data', '/data')) as session:
            # (a read of a.bin would journal its 32 MiB again: the session has no room for that, and says so)
            assert await session.feed_run('import os\n(outcome[:9], os.path.getsize("/data/a.bin"))') == ('[Errno 28', 32 * MiB)


async def test_a_journal_growing_past_the_quota_stops_the_feed_there_and_the_stopped_feed_is_stored(tmp_path):
    url = f'sqlite:///{tmp_path}/store.db'
    quota = 4 * MiB
    calls = []

    def fetch(i):
        calls.append(i)
        return str(i) * MiB  # each answer is journaled: a stored session replays from it

    code = 'kept = []\ntry:\n    for i in range(10):\n        kept.append(fetch(i))\nexcept BaseException:\n    kept.append("caught")\nlen(kept)'
    async with corral.Pool(state_key=KEY, store=url, warm_workers=0, max_state_bytes=quota) as pool:
        async with pool.checkout(ephemeral=False) as session:
            await session.feed_run('before = 1')
            with pytest.raises(corral.SandboxLimitError) as info:
                await session.feed_run(code, external_lookup={'fetch': fetch})
            assert (info.value.limit, info.value.value) == ('max_state_bytes', quota)
            assert info.value.display() == (
                'Traceback (most recent call last):\n'
                '  File "main.py", line 5, in <module>\n'  # where the script tried to catch it, as for any stop
                '    except BaseException:\n'
                '           ^^^^^^^^^^^^^\n' + stop_text(quota)
            )
            assert calls == [0, 1, 2, 3]  # the call whose answer would not fit ran; its answer was not taken in
            # The stopped feed's state is what is stored, and the session goes on.
            assert await session.feed_run('(before, len(kept))') == (1, 3)
            session_id = session.session_id
    assert await reopened(url, session_id, '(before, len(kept), kept[2][:3])', max_state_bytes=quota) == (1, 3, '222')
    assert calls == [0, 1, 2, 3]  # a replay answers from the record


async def test_many_small_answers_and_gathered_calls_stop_at_the_quota_too(tmp_path):
    url = f'sqlite:///{tmp_path}/store.db'
    quota = 256 * 1024
    code = (
        'import asyncio\n'
        'n = 0\n'
        'async def step():\n'
        '    global n\n'
        '    answer = await tick()\n'
        '    n += answer\n'
        'while True:\n'
        '    await asyncio.gather(*[step() for _ in range(50)])'
    )

    async def tick():
        return 1

    async with corral.Pool(state_key=KEY, store=url, warm_workers=0, max_state_bytes=quota) as pool:
        limits = corral.Limits(host_calls=None)
        async with pool.checkout(ephemeral=False, limits=limits) as session:
            with pytest.raises(corral.SandboxLimitError) as info:
                await session.feed_run(code, external_lookup={'tick': tick})
            assert info.value.limit == 'max_state_bytes' and info.value.display().endswith(stop_text(quota))
            n = await session.feed_run('n')  # a short script still runs after the stop
            assert n > 1000
            # A feed that would grow the journal again is stopped at its first answer, and none breaks the state.
            with pytest.raises(corral.SandboxLimitError):
                await session.feed_run('n += await tick()', external_lookup={'tick': tick})
            assert await session.feed_run('n') == n
            session_id = session.session_id
    assert await reopened(url, session_id, 'n', max_state_bytes=quota) == n


async def test_a_script_too_large_for_the_room_left_is_not_run(tmp_path):
    url = f'sqlite:///{tmp_path}/store.db'
    quota = 300 * 1024
    async with corral.Pool(state_key=KEY, store=url, warm_workers=0, max_state_bytes=quota) as pool:
        async with pool.checkout(ephemeral=False) as session:
            await session.feed_run(f'a = "{"a" * 100_000}"')
            with pytest.raises(corral.SandboxLimitError) as info:
                await session.feed_run(f'b = "{"b" * 100_000}"')
            assert info.value.display() == (
                f"OverflowError: the session's stored state would grow past the max_state_bytes limit of {quota} bytes "
                '(Pool(max_state_bytes=...)) with this script; it was not run'
            )
            assert await session.feed_run('len(a)') == 100_000
            with pytest.raises(corral.SandboxRuntimeError, match="name 'b' is not defined"):
                await session.feed_run('b')


async def test_a_pause_that_would_not_fit_stops_the_feed_instead(tmp_path):
    url = f'sqlite:///{tmp_path}/store.db'
    quota = 2 * MiB

    def approve(text):
        raise corral.Deferred()

    async with corral.Pool(state_key=KEY, store=url, warm_workers=0, max_state_bytes=quota) as pool:
        async with pool.checkout(ephemeral=False) as session:
            with pytest.raises(corral.SandboxLimitError) as info:
                await session.feed_run('asked = approve("x" * 3_000_000)', external_lookup={'approve': approve})
            assert info.value.limit == 'max_state_bytes' and info.value.display().endswith(stop_text(quota))
            assert not session.paused
            with pytest.raises(corral.SandboxPaused):  # a pause that fits pauses
                await session.feed_run('asked = approve("small")', external_lookup={'approve': approve})
            session_id = session.session_id
    async with corral.Pool(state_key=KEY, store=url, warm_workers=0, max_state_bytes=quota) as pool:
        async with pool.checkout(session_id=session_id) as session:
            (call,) = session.pending_calls
            assert call.args == ['small']
            await session.resume({call.call_id: 'yes'})
            assert await session.feed_run('asked') == 'yes'


async def test_overlay_folders_and_deletions_count_too(tmp_path):
    (tmp_path / 'data').mkdir()
    url = f'sqlite:///{tmp_path}/store.db'
    quota = 256 * 1024
    code = (
        'import os\n'
        'made = 0\n'
        'try:\n'
        '    while True:\n'
        '        os.mkdir(f"/data/{made:0200d}")\n'
        '        made += 1\n'
        'except OSError as error:\n'
        '    refused = error.strerror\n'
        'made'
    )
    async with corral.Pool(state_key=KEY, store=url, warm_workers=0, max_state_bytes=quota) as pool:
        async with pool.checkout(ephemeral=False, mounts=corral.Mount(tmp_path / 'data', '/data'), limits=corral.Limits(host_calls=None)) as session:
            made = await session.feed_run(code)
            assert 100 < made < 1000
            assert await session.feed_run('refused') == (
                f"No space left on device (the session's stored state would grow past the max_state_bytes limit of {quota} bytes (Pool(max_state_bytes=...)))"
            )
            session_id = session.session_id
    async with corral.Pool(state_key=KEY, store=url, warm_workers=0, max_state_bytes=quota) as pool:
        async with pool.checkout(session_id=session_id, mounts=corral.Mount(tmp_path / 'data', '/data')) as session:
            assert await session.feed_run('made') == made


async def test_an_ephemeral_session_is_not_stopped(tmp_path):
    async with corral.Pool(state_key=KEY, store=f'sqlite:///{tmp_path}/store.db', warm_workers=0, max_state_bytes=MiB) as pool:
        async with pool.checkout() as session:
            assert await session.feed_run('len(fetch())', external_lookup={'fetch': lambda: 'x' * (2 * MiB)}) == 2 * MiB
            with pytest.raises(corral.SandboxStateError, match=r'over the quota of 1048576 bytes .*it was not dumped$'):
                await session.dump()


async def test_the_size_a_stored_session_counts_bounds_its_sealed_state(tmp_path):
    """The quota holds because the size counted as the state grows is never below the size of
    the state sealed: checked on a session with a bit of everything."""
    (tmp_path / 'data').mkdir()
    url = f'sqlite:///{tmp_path}/store.db'

    async def fetch(n):
        return {'n': n, 'text': 'é' * n, 'items': list(range(n))}

    def approve(what):
        raise corral.Deferred({'what': what})

    tools = {'fetch': fetch, 'approve': approve}
    feeds = [
        'import asyncio, random, time\nrows = await asyncio.gather(*[fetch(i) for i in range(20)])',
        'import os\nos.mkdir("/data/d")\nopen("/data/d/f.txt", "w").write("x" * 5000)\nos.remove("/data/d/f.txt")',
        'await asyncio.sleep(0.01)\nstamp = time.monotonic()\nr = random.random()',
        'try:\n    fetch_all = [await fetch(i) for i in range(3)]\n    raise ValueError("half")\nexcept ValueError:\n    pass',
        'asked = approve("x" * 1000)',
    ]
    async with corral.Pool(state_key=KEY, store=url, warm_workers=0) as pool:
        async with pool.checkout(ephemeral=False, mounts=corral.Mount(tmp_path / 'data', '/data')) as session:
            for code in feeds:
                try:
                    await session.feed_run(code, external_lookup=tools)
                except corral.SandboxPaused:
                    pass
                counted = session._fixed_bytes + session._journal_bytes + session._system.overlay_bytes + session._pause_bytes()
                assert len(await session.dump()) <= counted
