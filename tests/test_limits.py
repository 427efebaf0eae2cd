"""Resource attacks end with a clear error naming the limit, within seconds, and the host is unharmed."""

import asyncio
import dataclasses
import sys

import pytest

import corral
from cpython_carets import carets
from typecheck.scripts import branches

FAST = corral.Limits(wall_time=1.0, grace=0.5, memory=512 * 1024**2, output=10_000, host_calls=1_000, recursion=200)


@pytest.fixture
async def limited(pool):
    async with pool.checkout(limits=FAST) as session:
        yield session


@pytest.fixture
async def patient(pool):
    """FAST, with time after a stop for the tasks a feed left to be ended (up to half a second)
    even on a busy machine."""
    async with pool.checkout(limits=dataclasses.replace(FAST, grace=3.0)) as session:
        yield session


async def stopped(session, code, **options):
    with pytest.raises(corral.SandboxLimitError) as info:
        await session.feed_run(code, **options)
    return info.value


async def test_an_endless_loop_is_stopped_and_the_session_goes_on(limited):
    error = await stopped(limited, 'x = 1\nwhile True:\n    x += 1\n')
    assert (error.limit, error.value) == ('wall_time', 1.0)
    assert error.display() in (
        'Traceback (most recent call last):\n'
        '  File "main.py", line 2, in <module>\n'
        '    while True:\n'
        + ('          ^^^^\n' if sys.version_info >= (3, 12) else '')  # 3.12 draws carets under `True`
        + 'TimeoutError: the script ran past the wall_time limit of 1 second',
        'Traceback (most recent call last):\n'
        '  File "main.py", line 3, in <module>\n'
        '    x += 1\n'
        'TimeoutError: the script ran past the wall_time limit of 1 second',
    )
    assert await limited.feed_run('x > 0') is True


@pytest.mark.parametrize(
    'code',
    [
        'while True:\n    try:\n        pass\n    except Exception:\n        pass\n',
        'while True:\n    try:\n        while True:\n            pass\n    except:\n        pass\n',
        'while True:\n    try:\n        while True:\n            pass\n    except BaseException as e:\n        pass\n',
        'try:\n    pass\nfinally:\n    while True:\n        pass\n',
        'import asyncio\nasync def spin():\n    while True:\n        pass\nawait asyncio.gather(spin(), return_exceptions=True)\n',
        'class Quiet:\n    def __enter__(self):\n        return self\n    def __exit__(self, *exc):\n        return True\nwhile True:\n    with Quiet():\n        while True:\n            pass\n',
    ],
    ids=['except Exception', 'bare except', 'except BaseException', 'looping finally', 'gather return_exceptions', 'suppress'],
)
async def test_a_script_cannot_swallow_its_stop(limited, code):
    error = await stopped(limited, code)
    assert error.limit == 'wall_time'
    assert error.display().endswith('TimeoutError: the script ran past the wall_time limit of 1 second')


async def test_catastrophic_regex_backtracking_is_stopped(limited):
    error = await stopped(limited, "import re\nre.match('(a+)+$', 'a' * 64 + 'b')")
    line = "re.match('(a+)+$', 'a' * 64 + 'b')"
    assert error.display().endswith(f'    {line}\n{carets(line, "re.match")}TimeoutError: the script ran past the wall_time limit of 1 second')
    assert await limited.feed_run('1') == 1


@pytest.mark.parametrize('code', ['sum(range(10**18))', 'max(range(10**18))'])
async def test_work_inside_c_code_is_killed_by_the_host(pool, code):
    async with pool.checkout(limits=FAST) as session:
        error = await stopped(session, code)
        assert (error.limit, error.display()) == ('wall_time', 'TimeoutError: the script ran past the wall_time limit of 1 second and was killed')
        with pytest.raises(corral.SandboxWorkerError):
            await session.feed_run('1')
    async with pool.checkout() as session:
        assert await session.feed_run('1 + 1') == 2


@pytest.mark.parametrize(
    'code',
    ["'a' * 10**10", '[0] * 10**10', 'x = []\nwhile True:\n    x.append(bytearray(10**7))', '1 << (8 * 2**30)'],
    ids=['str repeat', 'list repeat', 'list growth', 'huge int'],
)
async def test_memory_exhaustion_is_a_memory_limit_error(pool, code):
    # Filling 512 MiB page by page takes a fraction of a second, or more on a busy virtual
    # machine: the wall-time limit stays out of the way so the memory limit is what stops it.
    async with pool.checkout(limits=dataclasses.replace(FAST, wall_time=30.0)) as session:
        error = await stopped(session, code)
        assert (error.limit, error.value) == ('memory', 512 * 1024**2)
        assert error.display().endswith('MemoryError: the script went past the memory limit of 536870912 bytes')
        assert await session.feed_run('x = 2\nx * 21') == 42


async def test_deep_recursion_names_the_recursion_limit(limited):
    error = await stopped(limited, 'def down(n):\n    return down(n + 1)\ndown(0)')
    assert (error.limit, error.value) == ('recursion', 200)
    lines = error.display().splitlines()
    assert lines[-2:] == [
        'RecursionError: maximum recursion depth exceeded',
        "the sandbox's recursion limit is 200 calls (Limits.recursion); write deep recursion as a loop",
    ]
    assert lines[-3].startswith('  [Previous line repeated ')
    assert await limited.feed_run('def depth(n):\n    return 0 if n == 0 else 1 + depth(n - 1)\ndepth(150)') == 150


async def test_a_script_sets_its_recursion_limit_within_the_sessions(limited):
    code = '''
import sys
def down(n):
    return down(n + 1)
sys.setrecursionlimit(5000)
high = sys.getrecursionlimit()
sys.setrecursionlimit(50)
try:
    down(0)
except RecursionError as error:
    message = str(error)
(high, sys.getrecursionlimit(), message)
'''
    assert await limited.feed_run(code) == (200, 50, 'maximum recursion depth exceeded')
    assert await limited.feed_run('import sys\nsys.getrecursionlimit()') == 50  # kept, as in a REPL
    error = await stopped(limited, 'def down(n):\n    return down(n + 1)\ndown(0)')
    assert (error.limit, error.value) == ('recursion', 200)


async def test_a_memoised_recursion_400_deep_runs_under_the_default_limit(pool):
    async with pool.checkout() as session:
        code = 'import functools\n@functools.cache\ndef f(n):\n    return 0 if n == 0 else f(n - 1) + 1\nf(400)'
        assert await session.feed_run(code) == 400


_DEPTH = """
reached = 0
def down(n):
    global reached
    reached = n
    down(n + 1)
try:
    down(1)
except RecursionError:
    pass
reached
"""


@pytest.mark.parametrize('start', ['', 'import asyncio\n', 'import asyncio\nawait asyncio.sleep(0)\n'], ids=['plain', 'on the loop', 'top-level await'])
@pytest.mark.parametrize('recursion', [50, 200])
async def test_the_recursion_limit_counts_the_script_frames_exactly(pool, start, recursion):
    # the top level is one frame: a function it calls goes recursion - 1 deep, however the script runs
    async with pool.checkout(limits=dataclasses.replace(FAST, recursion=recursion)) as session:
        assert await session.feed_run(start + _DEPTH) == recursion - 1
        # a builtin that calls back into the script counts as the interpreter counts it: on 3.11
        # sorted's call, and its call of the key; 3.12 counts calls through C code apart
        through_c = 2 if sys.version_info < (3, 12) else 0
        assert await session.feed_run(start + _DEPTH.replace('down(1)', 'sorted([1], key=down)')) == recursion - 1 - through_c


@pytest.mark.parametrize('start', ['', 'import asyncio\nawait asyncio.sleep(0)\n'], ids=['plain', 'top-level await'])
@pytest.mark.parametrize('recursion', [1, 5, 10])
async def test_a_small_recursion_limit_stops_the_script_not_the_worker(pool, start, recursion):
    # the worker reports the RecursionError with room of its own: a limit of 5 killed it
    async with pool.checkout(limits=dataclasses.replace(FAST, recursion=recursion)) as session:
        error = await stopped(session, start + 'def f(n):\n    return f(n + 1)\nf(0)')
        assert error.display().endswith(
            f"RecursionError: maximum recursion depth exceeded\nthe sandbox's recursion limit is {recursion} call{'s' if recursion > 1 else ''}"
            ' (Limits.recursion); write deep recursion as a loop'
        )
        if recursion == 10:  # (an import takes more than 5: the import machinery's frames count)
            assert await session.feed_run(start + _DEPTH) == recursion - 1
        assert session.alive


@pytest.mark.parametrize(
    ('limit', 'value', 'text'),
    [
        ('wall_time', 1, '1 second'), ('wall_time', 1.0, '1 second'), ('wall_time', 0.5, '0.5 seconds'),
        ('cpu_time', 1, '1 second of CPU'), ('memory', 1, '1 byte'), ('output', 10_000, '10000 bytes'),
        ('host_calls', 1, '1 host call'), ('recursion', 1, '1 call'), ('recursion', 200, '200 calls'),
    ],
)
def test_a_limit_is_named_with_its_unit_singular_or_plural(limit, value, text):
    assert corral.limits.amount(limit, value) == text


async def test_a_one_second_limit_says_one_second(pool):
    async with pool.checkout(limits=dataclasses.replace(FAST, wall_time=1, host_calls=1)) as session:
        error = await stopped(session, 'while True:\n    pass')
        assert error.display().endswith('TimeoutError: the script ran past the wall_time limit of 1 second')
        error = await stopped(session, 'f()\nf()', external_lookup={'f': lambda: None})
        assert error.display().endswith('RuntimeError: the script made more than the host_calls limit of 1 host call')


async def test_printing_past_the_output_limit_cuts_the_output_and_the_script_runs_on(limited):
    seen = []
    code = "for i in range(1000):\n    print('é' * 500)\n'done'"
    assert await limited.feed_run(code, print_callback=lambda stream, text: seen.append((stream, text))) == 'done'
    assert sum(len(text.encode()) for _, text in seen[:-1]) == 9_999  # the last whole character that fits
    assert seen[-1] == ('stdout', '\n[991001 bytes of output left out: the script printed more than the output limit of 10000 bytes]\n')
    seen.clear()
    assert await limited.feed_run("print('again')\n1", print_callback=lambda stream, text: seen.append((stream, text))) == 1
    assert seen == [('stdout', 'again\n')]  # each feed has its own output limit


async def test_a_million_host_calls_stop_at_the_host_calls_limit(pool):
    calls = []
    code = 'while True:\n    try:\n        ping()\n    except Exception:\n        pass\n'
    # a wall_time that a thousand round trips cannot reach on a busy machine (1 s could: the test failed so)
    async with pool.checkout(limits=dataclasses.replace(FAST, wall_time=60.0)) as session:
        error = await stopped(session, code, external_lookup={'ping': lambda: calls.append(1)})
    assert (error.limit, error.value) == ('host_calls', 1_000)
    assert error.display().endswith('RuntimeError: the script made more than the host_calls limit of 1000 host calls')
    assert len(calls) == 1_000


async def test_huge_int_to_str_conversion_is_refused(limited):
    with pytest.raises(corral.SandboxRuntimeError) as info:
        await limited.feed_run('str(10 ** 100_000)')
    assert info.value.exc_type == 'ValueError'


@pytest.mark.parametrize('code', ['(' * 100_000 + '1' + ')' * 100_000, '-' * 1_000_000 + '1', '[' * 5000 + ']' * 5000, 'x' + '.a' * 200_000])
async def test_deeply_nested_source_is_a_syntax_error(pool, code):
    async with pool.checkout(limits=dataclasses.replace(FAST, code_size=None)) as session:  # up to 1 MB of source
        with pytest.raises(corral.SandboxSyntaxError) as info:
            await session.feed_run(code)
        assert info.value.display().splitlines()[-1].startswith('SyntaxError: ')
        assert await session.feed_run('1') == 1


_SWALLOWS = 'import asyncio\nasync def h():\n    while True:\n        try:\n            await asyncio.sleep(10)\n        except BaseException:\n            pass\n'
#: A session keeps the tasks a feed leaves (up to 100): these lines leave more, so they all end with the feed.
_CROWD = 'crowd = [asyncio.create_task(asyncio.sleep(10)) for _ in range(100)]\n'
_CROWDED = 'RuntimeError: the script left 101 tasks running; a session keeps at most 100 between feeds, so they were cancelled'


@pytest.mark.parametrize(
    'code, outcome',
    [
        # the feed's own task swallows the CancelledError that follows its stop
        (_SWALLOWS + 'await h()', 'TimeoutError: the script ran past the wall_time limit of 1 second'),
        # tasks kept, then ended with the feed that leaves too many: one swallows its
        # cancellation, one computes in a `finally`
        (_SWALLOWS + 't = asyncio.create_task(h())\nawait asyncio.sleep(0)\n1', 1),
        (_SWALLOWS + 't = asyncio.create_task(h())\nawait asyncio.sleep(0)\n' + _CROWD + '1', _CROWDED),
        ('import asyncio\nasync def g():\n    try:\n        await asyncio.sleep(10)\n    finally:\n        while True:\n            pass\n'
         't = asyncio.create_task(g())\nawait asyncio.sleep(0)\n' + _CROWD + '3', _CROWDED),
        # one raises what asyncio passes on out of its loop
        ('import asyncio\nasync def k():\n    try:\n        await asyncio.sleep(10)\n    finally:\n        raise KeyboardInterrupt\n'
         't = asyncio.create_task(k())\nawait asyncio.sleep(0)\n' + _CROWD + '4', _CROWDED),
        # one computes without awaiting: it holds up the feed itself
        ('import asyncio\nasync def spin():\n    while True:\n        pass\nt = asyncio.create_task(spin())\nawait asyncio.sleep(0)\n2',
         'TimeoutError: the script ran past the wall_time limit of 1 second'),
    ],
)  # fmt: skip
async def test_a_task_that_will_not_end_does_not_outlive_its_feed(patient, code, outcome):
    try:
        result = await patient.feed_run(code)
    except (corral.SandboxLimitError, corral.SandboxRuntimeError) as error:
        result = error.display().splitlines()[-1]
    assert (result, await patient.feed_run('7')) == (outcome, 7)


async def test_tasks_whose_finally_blocks_await_again_end_at_the_first_stop(patient):
    # Each stop used to unwind one `finally` that awaits again, so ten of them outlasted the
    # attempts and ended the session. A stop is due until the tasks end: no line of theirs runs.
    code = (
        'import asyncio\nasync def deep(n):\n    try:\n        await asyncio.sleep(10)\n    finally:\n        if n:\n'
        '            await deep(n - 1)\nt = asyncio.create_task(deep(10))\nawait asyncio.sleep(0)\n' + _CROWD
    )
    with pytest.raises(corral.SandboxRuntimeError) as info:
        await patient.feed_run(code)
    assert (info.value.display().splitlines()[-1], await patient.feed_run('t.done()')) == (_CROWDED, True)


async def test_a_timer_a_feed_scheduled_ends_with_it(patient):
    # an asyncio.timeout entered and never left: its timer fired during the next feed
    first = 'import asyncio\nt = asyncio.timeout(0.05)\nawait t.__aenter__()\n1'
    assert await patient.feed_run(first) == 1
    assert await patient.feed_run('import asyncio\nawait asyncio.sleep(0.2)\nt.expired()') is False


async def test_a_finalizer_that_computes_for_ever_is_stopped_at_the_end_of_its_feed(patient):
    # a generator left in a reference cycle is finalized as the feed ends, outside the feed's
    # wall_time: its `finally` ran on until the host killed the worker
    code = (
        'def g():\n    try:\n        yield\n    finally:\n        while True:\n            pass\n'
        'it = g()\nnext(it)\nbox = [it]\nbox.append(box)\ndel it, box\n1'
    )
    assert (await patient.feed_run(code), await patient.feed_run('2')) == (1, 2)


async def test_a_stopped_tasks_callbacks_run_in_its_own_feed_not_the_next(patient):
    # The task's `finally` awaits again, so only a stop ends it; the callbacks queued as it ends
    # (the script's own, asyncio's) run in the feed that left it, and the next feeds run whole.
    first = (
        'import asyncio\nasync def t():\n    try:\n        await asyncio.sleep(100)\n    finally:\n        await asyncio.sleep(100)\n'
        'task = asyncio.ensure_future(t())\ntask.add_done_callback(lambda f: print("first feed\'s callback"))\nawait asyncio.sleep(0)\n'
        + _CROWD + '1'
    )
    printed = []
    results = []
    for code in (first, 'import asyncio\nawait asyncio.sleep(0.05)\n2', '3', 'import asyncio\nprint("fourth")\nawait asyncio.sleep(0.05)\n4'):
        try:
            results.append(await patient.feed_run(code, print_callback=lambda stream, text: printed.append((len(results), text))))
        except corral.SandboxRuntimeError as error:
            results.append(error.display().splitlines()[-1])
    assert (results, printed) == ([_CROWDED, 2, 3, 4], [(0, "first feed's callback\n"), (3, 'fourth\n')])


@pytest.mark.parametrize(
    'first',
    [
        "import asyncio\nasync def g():\n    try:\n        yield 1\n    finally:\n        print('the first feed finalizes it')\n"
        "it = g()\nawait it.__anext__()\nbox = [it]\nbox.append(box)\ndel it, box\n'first'",
        "def g():\n    try:\n        yield 1\n    finally:\n        print('the first feed finalizes it')\n"
        "it = g()\nnext(it)\nbox = [it]\nbox.append(box)\ndel it, box\n'first'",
    ],
)
async def test_a_generator_dropped_in_a_cycle_is_finalized_in_its_own_feed(patient, first):
    # Dropped unreachable, it would be finalized whenever a later feed's allocations start a
    # collection, its `finally` running (and, awaiting, failing) in that feed.
    printed = []
    results = []
    for code in (first, 'x = [[i] for i in range(200000)]\nlen(x)'):
        results.append(await patient.feed_run(code, print_callback=lambda stream, text: printed.append((len(results), text))))
    assert (results, printed) == (['first', 200000], [(0, 'the first feed finalizes it\n')])


@pytest.mark.parametrize(
    'code, last_line',
    [
        ("raise type(w.exception())('memory')", 'corral.language.stop.SandboxStop: memory'),
        ("raise type(w.exception())('cpu_time')", 'corral.language.stop.SandboxStop: cpu_time'),
        ("raise type(w.exception())('no such limit')", 'corral.language.stop.SandboxStop: no such limit'),
        ('raise type(w.exception())()', 'corral.language.stop.SandboxStop'),
        ('raise w.exception()', 'corral.language.stop.SandboxStop: wall_time'),  # the very stop, from an earlier feed
    ],
)
async def test_a_stop_the_script_gets_hold_of_is_its_own_error_not_a_limit(patient, code, last_line):
    # A task that swallows its cancellation is ended with a stop, which it keeps: the script can
    # read it and raise it (or its class) again, but that fakes no limit and breaks no worker.
    swallow = 'import asyncio\nasync def h():\n    try:\n        await asyncio.sleep(10)\n    except asyncio.CancelledError:\n        await asyncio.sleep(10)\n'
    with pytest.raises(corral.SandboxRuntimeError):  # more tasks than a session keeps: they end with the feed
        await patient.feed_run(swallow + 'w = asyncio.create_task(h())\nawait asyncio.sleep(0)\n' + _CROWD)
    assert await patient.feed_run('repr(w.exception())') == "SandboxStop('wall_time')"
    with pytest.raises(corral.SandboxRuntimeError) as info:
        await patient.feed_run(code)
    assert (info.value.display().splitlines()[-1], await patient.feed_run('1 + 1')) == (last_line, 2)


# ----- the type check's limits ------------------------------------------------------------------


@pytest.mark.parametrize('type_check', [False, True], ids=['unchecked', 'checked'])
async def test_a_script_over_the_code_size_limit_is_refused_and_the_session_goes_on(pool, type_check):
    async with pool.checkout(type_check=type_check, limits=corral.Limits(code_size=100)) as session:
        code = "s = '" + 'é' * 60 + "'"  # 66 characters, 126 bytes
        error = await stopped(session, code)
        assert (error.display(), error.limit, error.value) == (
            'the script is 126 bytes, more than the code_size limit of 100 bytes; it was not checked or run',
            'code_size',
            100,
        )
        assert await session.feed_run("s = '" + 'é' * 40 + "'\nlen(s)") == 40  # 86 bytes


@pytest.mark.parametrize('type_check', [False, True], ids=['unchecked', 'checked'])
async def test_stubs_over_the_stub_size_limit_are_refused_as_the_session_opens(pool, type_check):
    """A session's stubs and its modules' together: 6 MB of stubs took ty 0.6 GB, checked by every script's check."""
    stubs = 'def f() -> str: ...\n# é\n'  # 25 bytes
    module = corral.ExternalModule({'g': lambda: 1}, stubs='def g() -> int: ...\n')  # 20 bytes
    for limit in (44, 0):
        with pytest.raises(corral.SandboxLimitError) as info:
            async with pool.checkout(type_check=type_check, type_check_stubs=stubs, external_modules={'m': module}, limits=corral.Limits(stub_size=limit)):
                pass
        assert (info.value.display(), info.value.limit, info.value.value) == (
            f"the stubs are 45 bytes (type_check_stubs and the external modules' stubs together), more than the stub_size limit of {limit} bytes; "
            'the session did not open',
            'stub_size',
            limit,
        )
    async with pool.checkout(type_check=type_check, type_check_stubs=stubs, external_modules={'m': module}, limits=corral.Limits(stub_size=45)) as session:
        assert await session.feed_run('import m\nm.g()', external_lookup={'f': lambda: ''}) == 1


async def test_a_sessions_cpu_seconds_count_its_type_checks(pool):
    """ty's processes (the stubs' check, each script's) were not counted in `Session.cpu_seconds`, which a server's CPU quota counts."""
    async with pool.checkout(type_check=True, type_check_stubs='def f(x: int) -> int: ...\n# a new stub\n') as session:
        opened = session.cpu_seconds
        assert opened > 0 and session._checker_cpu == opened - session._cpu_seconds > 0  # the stubs' check
        with pytest.raises(corral.SandboxTypingError):
            await session.feed_run('f("a")', external_lookup={'f': lambda x: x})  # `ty check` runs for its diagnostics
        assert session._checker_cpu > opened - session._cpu_seconds
        assert session.cpu_seconds == session._cpu_seconds + session._checker_cpu


async def test_the_issue_script_is_refused_by_the_default_code_size(pool):
    # 16,000 branches, some 500 KB: it made ty take 3 GB and 27 s, and blocked the host while parsing.
    async with pool.checkout(type_check=True) as session:
        error = await stopped(session, branches(16_000))
        assert (error.display(), error.limit) == (
            'the script is 505801 bytes, more than the code_size limit of 131072 bytes; it was not checked or run',
            'code_size',
        )
        assert await session.feed_run('1 + 1') == 2


async def test_a_check_past_the_type_check_time_limit_is_stopped_and_the_session_goes_on(pool):
    limits = corral.Limits(type_check_time=0.5, wall_time=1.0, grace=30.0)  # the worker's compile is not what stops
    async with pool.checkout(type_check=True, limits=limits) as session:
        await session.feed_run('x = 5')
        error = await stopped(session, branches(1500))
        assert (error.display(), error.limit, error.value) == (
            'the type check of the script took longer than the type_check_time limit of 0.5 seconds and was stopped; '
            'the script did not run (a script this slow to check is very long or very branched: split it into smaller scripts)',
            'type_check_time',
            0.5,
        )
        assert await session.feed_run('x') == 5  # it did not run: it sets x to 3


@pytest.mark.slow
async def test_a_check_past_the_type_check_memory_limit_is_stopped_and_the_session_goes_on(pool):
    limits = corral.Limits(type_check_memory=256 * 1024**2, type_check_time=None, grace=30.0)
    async with pool.checkout(type_check=True, limits=limits) as session:
        error = await stopped(session, branches(3500))
        assert (error.display(), error.limit, error.value) == (
            'the type check of the script needed more than the type_check_memory limit of 268435456 bytes and was stopped; '
            'the script did not run (a script this costly to check is very long or very branched: split it into smaller scripts)',
            'type_check_memory',
            256 * 1024**2,
        )
        assert await session.feed_run('1 + 1') == 2


@pytest.mark.slow
async def test_the_wall_time_limit_counts_the_run_not_the_check_or_the_compile(pool):
    # 12,000 assignments: ty and the worker's compile take a second or more together; the run, microseconds.
    code = ''.join(f'a{i}=1\n' for i in range(12_000)) + 'a1 + a11999'
    limits = corral.Limits(wall_time=0.1, grace=0.1, type_check_time=None)
    async with pool.checkout(type_check=True, limits=limits) as session:
        assert await session.feed_run(code) == 2


async def test_a_compile_past_the_type_check_time_limit_ends_the_session(pool):
    code = ''.join(f'a{i}=1\n' for i in range(12_000)) + 'a1'
    limits = corral.Limits(type_check_time=0.01, grace=0.05)
    async with pool.checkout(type_check=True, limits=limits) as session:
        error = await stopped(session, code)
        assert (error.display(), error.limit, error.value) == (
            'compiling the script took longer than the type_check_time limit of 0.01 seconds; the script did not run and the sandbox was stopped',
            'type_check_time',
            0.01,
        )
        with pytest.raises(corral.SandboxWorkerError) as info:
            await session.feed_run('1')
        assert info.value.display() == (
            'this session cannot run scripts: the worker took longer than the type_check_time limit of 0.01 seconds to compile a script; '
            'check out a new session'
        )


async def test_a_slow_check_in_one_session_holds_up_no_other_sessions_check(pool):
    async with pool.checkout(type_check=True) as heavy, pool.checkout(type_check=True) as light:
        assert await light.feed_run('1 + 1') == 2
        slow = asyncio.ensure_future(heavy.feed_run(branches(3000)))
        try:
            await asyncio.sleep(0.5)
            results = [await light.feed_run(f'{i} + 1') for i in range(3)]
            with pytest.raises(corral.SandboxTypingError):
                await light.feed_run('x: int = "a"')
            assert (results, slow.done()) == ([1, 2, 3], False)
        finally:
            slow.cancel()
            await asyncio.gather(slow, return_exceptions=True)


@pytest.mark.parametrize(
    ('limits', 'error'),
    [
        ({'wall_time': float('nan')}, "ValueError: Limits.wall_time must be from 0 to 9223372036854775807, not nan"),
        ({'cpu_time': float('inf')}, 'TypeError: Limits.cpu_time must be a whole number or None, not inf'),
        ({'memory': -1}, 'ValueError: Limits.memory must be from 0 to 9223372036854775807, not -1'),
        ({'memory': 2**70}, 'ValueError: Limits.memory must be from 0 to 9223372036854775807, not 1180591620717411303424'),
        ({'memory': 1.5}, 'TypeError: Limits.memory must be a whole number or None, not 1.5'),
        ({'recursion': 0}, 'ValueError: Limits.recursion must be from 1 to 9223372036854775807, not 0'),
        ({'recursion': None}, 'TypeError: Limits.recursion must be a whole number, not None'),
        ({'grace': None}, 'TypeError: Limits.grace must be a number, not None'),
        ({'wall_time': True}, 'TypeError: Limits.wall_time must be a number or None, not True'),
        ({'output': '1000'}, "TypeError: Limits.output must be a whole number or None, not '1000'"),
    ],
)
def test_a_limit_that_is_no_number_of_its_kind_is_refused(limits, error):
    """NaN passed every comparison with a server's ceiling; a negative memory, or one past an
    rlimit's range, failed in the server as it set the rlimit; recursion=None in the worker."""
    with pytest.raises((TypeError, ValueError)) as info:
        corral.Limits(**limits)
    assert f'{type(info.value).__name__}: {info.value}' == error
    assert corral.Limits(wall_time=2, memory=None, recursion=1, grace=0) == corral.Limits(wall_time=2, memory=None, recursion=1, grace=0.0)
