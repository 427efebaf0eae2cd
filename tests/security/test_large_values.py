"""Values that would make the host build more than it can afford, or that it cannot show.

A value crosses the boundary as a copy: `[[]] * 40_000_000` is one list in the worker and forty
million in the host. The sender measures what the receiver will build (`Limits.value_items`,
`Limits.value_size`), nesting is counted across every container kind, and a value that contains
itself is refused as such. The host counts again while it decodes, so a worker that skips its own
check (here: the test, writing frames itself) cannot make it build more. Every repr the host makes
of a sandbox value is bounded and cannot raise.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

import msgpack
import pytest

import corral
from corral.channel import DONE, OUTPUT, frame
from corral.values import REPR_LIMIT, pack

from .helpers import fake_worker_session, last_line, run

pytestmark = pytest.mark.asyncio(loop_scope='module')

DEEP_TUPLES = 't = []\nfor i in range(500):\n    t = [t]\nfor i in range(60):\n    t = (t,)\nt'
UNPACKABLE = 'TypeError: the value of the last expression cannot leave the sandbox: '


async def limit_error(pool: corral.Pool, code: str, **checkout) -> corral.SandboxLimitError:
    with pytest.raises(corral.SandboxLimitError) as info:
        await run(pool, code, **checkout)
    return info.value


async def runtime_error(pool: corral.Pool, code: str, lookup=None, **checkout) -> str:
    with pytest.raises(corral.SandboxRuntimeError) as info:
        await run(pool, code, lookup, **checkout)
    return last_line(info.value)


# ----- the result ---------------------------------------------------------------------------------


async def test_forty_million_references_to_one_empty_list_are_refused_in_the_worker(pool):
    async with pool.checkout() as session:
        with pytest.raises(corral.SandboxLimitError) as info:
            await session.feed_run('[[]] * 40_000_000')
        assert info.value.display() == (
            'OverflowError: the result has at least 40,000,000 items; at most 1,000,000 may leave the sandbox '
            '(the value_items limit)'
        )
        assert (info.value.limit, info.value.value) == ('value_items', 1_000_000)
        assert await session.feed_run('1 + 1') == 2


@pytest.mark.parametrize(
    ('code', 'shown'),
    [
        pytest.param('dict.fromkeys(range(5000), [])', 'at least 5,000', id='dict-of-one-list'),
        pytest.param('[{}] * 1001', 'at least 1,001', id='list-of-one-dict'),
        pytest.param('[0] * 1001', 'at least 1,001', id='flat'),
        pytest.param('x = [0] * 40\n[x] * 40', 'at least 1,640', id='shared-twice'),
        pytest.param('((),) * 1001', 'at least 1,001', id='tuples'),
        pytest.param('frozenset(range(1001))', 'at least 1,001', id='frozenset'),
        pytest.param('[[0] * 600, [0] * 600]', 'at least 1,202', id='two-parts'),
    ],
)
async def test_a_result_with_too_many_items_is_a_limit_error_and_the_session_goes_on(pool, code, shown):
    async with pool.checkout(limits=corral.Limits(value_items=1000)) as session:
        with pytest.raises(corral.SandboxLimitError) as info:
            await session.feed_run(code)
        assert info.value.display() == (
            f'OverflowError: the result has {shown} items; at most 1,000 may leave the sandbox (the value_items limit)'
        )
        assert await session.feed_run('[[]] * 1000') == [[]] * 1000


async def test_the_largest_result_the_limits_allow_arrives_whole(pool):
    async with pool.checkout(limits=corral.Limits(wall_time=300)) as session:
        assert await session.feed_run('[[]] * 1_000_000') == [[]] * 1_000_000


async def test_a_result_too_large_decoded_is_a_limit_error(pool):
    error = await limit_error(pool, "'x' * (65 * 1024**2)")
    assert error.display() == (
        f'OverflowError: the result takes {sys.getsizeof("") + 65 * 1024**2:,} bytes; at most 67,108,864 may leave the sandbox (the value_size limit)'
    )
    error = await limit_error(pool, "['x' * 100] * 1000", limits=corral.Limits(value_size=10_000))
    assert error.display() == (
        f'OverflowError: the result takes at least {sys.getsizeof("x" * 100) * 1000 + sys.getsizeof([None] * 1000):,} bytes; at most 10,000 may '
        'leave the sandbox (the value_size limit)'
    )


@pytest.mark.parametrize(
    'code',
    [
        pytest.param('x = []\nx.append(x)\nx', id='list'),
        pytest.param('d = {}\nd["d"] = d\nd', id='dict'),
        pytest.param('x = []\nt = (x,)\nx.append(t)\nt', id='through-a-tuple'),
        pytest.param('x = []\nx.append({1: [x]})\n[1, x]', id='deeper'),
        pytest.param('class L(list):\n    pass\nx = L()\nx.append(x)\nx', id='list-subclass'),
    ],
)
async def test_a_value_that_contains_itself_is_named_so(pool, code):
    assert await runtime_error(pool, code) == UNPACKABLE + 'the value contains a reference to itself'


@pytest.mark.parametrize(
    'code',
    [
        pytest.param(DEEP_TUPLES, id='60-tuples-around-500-lists'),
        pytest.param('t = ()\nfor i in range(20):\n    t = (t,)\nfor i in range(90):\n    t = [t]\nt', id='lists-around-tuples'),
        pytest.param('s = frozenset()\nfor i in range(101):\n    s = frozenset([s])\ns', id='frozensets'),
        pytest.param('d = {}\nfor i in range(60):\n    d = {"k": (d,)}\nd', id='dicts-and-tuples'),
        pytest.param('s = frozenset()\nfor i in range(50):\n    s = {(s,)}\n    s = frozenset(s)\n[s]', id='sets-and-tuples'),
    ],
)
async def test_nesting_is_counted_across_every_container_kind(pool, code):
    assert await runtime_error(pool, code) == UNPACKABLE + 'the result is nested more than 100 levels deep'


async def test_a_hundred_levels_of_mixed_containers_cross(pool):
    code = 'v = frozenset([0])\nfor i in range(33):\n    v = [{"k": (v,)}]\nv'
    expected = frozenset([0])
    for _ in range(33):
        expected = [{'k': (expected,)}]
    assert await run(pool, code) == expected
    assert await runtime_error(pool, code + '\n[v]') == UNPACKABLE + 'the result is nested more than 100 levels deep'


# ----- host calls, both ways ------------------------------------------------------------------------


async def test_host_call_arguments_are_measured_before_they_leave(pool):
    lookup = {'f': len}
    assert await runtime_error(pool, 'f([0] * 2_000_000)', lookup) == (
        'OverflowError: the call to f() has at least 2,000,000 items; at most 1,000,000 may leave the sandbox (the value_items limit)'
    )
    assert await runtime_error(pool, 'x = []\nx.append(x)\nf(x)', lookup) == (
        'TypeError: f() cannot be called with these arguments: the value contains a reference to itself'
    )
    assert await runtime_error(pool, DEEP_TUPLES + '\nf(t)', lookup) == (
        'TypeError: f() cannot be called with these arguments: the call to f() is nested more than 100 levels deep'
    )
    code = 'try:\n    f(x=[[]] * 2000)\nexcept OverflowError as e:\n    caught = str(e)\n(caught, f([1, 2]))'
    assert await run(pool, code, lookup, limits=corral.Limits(value_items=1000)) == (
        'the call to f() has at least 2,000 items; at most 1,000 may leave the sandbox (the value_items limit)',
        2,
    )


async def test_host_function_results_are_measured_before_they_enter(pool):
    def itself():
        x = []
        x.append(x)
        return x

    async def many():
        return [[]] * 2_000_000

    lookup = {'many': many, 'itself': itself, 'big': lambda: 'x' * (70 * 1024**2), 'rows': lambda: [[1, 'a']] * 50_000}
    async with pool.checkout() as session:
        with pytest.raises(corral.SandboxRuntimeError) as info:
            await session.feed_run('await many()', external_lookup=lookup)
        assert last_line(info.value) == (
            'OverflowError: the value many() returned has at least 2,000,000 items; at most 1,000,000 may enter the '
            'sandbox (the value_items limit)'
        )
        with pytest.raises(corral.SandboxRuntimeError) as info:
            await session.feed_run('itself()', external_lookup=lookup)
        assert last_line(info.value) == (
            "TypeError: itself() returned a value of type 'list' that cannot enter the sandbox: the value contains a "
            'reference to itself'
        )
        with pytest.raises(corral.SandboxRuntimeError) as info:
            await session.feed_run('big()', external_lookup=lookup)
        assert last_line(info.value) == (
            f'OverflowError: the value big() returned takes {sys.getsizeof("") + 70 * 1024**2:,} bytes; at most 67,108,864 may enter the sandbox '
            '(the value_size limit)'
        )
        code = 'try:\n    await many()\nexcept OverflowError:\n    caught = True\nrows = rows()\n(caught, len(rows), rows[-1])'
        assert await session.feed_run(code, external_lookup=lookup) == (True, 50_000, [1, 'a'])


# ----- a worker that skips its own checks ------------------------------------------------------------


async def _send(worker, data):
    worker.setblocking(False)  # the event loop writes while the host, on the same loop, reads
    await asyncio.get_running_loop().sock_sendall(worker, data)


def _frame(*items):
    return frame(msgpack.packb(list(items)))


CRAFTED = {
    'two million empty lists': (
        _frame(DONE, [[]] * 2_000_000),
        'ValueError: 2000000 exceeds max_array_len(1000064)',
    ),
    'a thousand lists of a thousand': (
        _frame(DONE, [[[]] * 1000] * 1001),
        'ValueLimitError: a message has more than 1,000,064 items',
    ),
    'a tuple marker out of place': (
        frame(msgpack.packb([DONE, {'a': msgpack.ExtType(1, b'')}])),
        'ValueError: a tuple or set marker out of place in a frame',
    ),
    'a marker with data': (
        frame(msgpack.packb([DONE, [msgpack.ExtType(2, b'x'), 1]])),
        'ValueError: a tuple or set marker with data in a frame',
    ),
    'a set whose items share one hash': (
        frame(pack([DONE, {i * (2**61 - 1) for i in range(1, 100)}], side='sandbox')),
        'ValueError: more than 32 items of a set of the message share one hash',
    ),
    'a dict whose keys repeat': (
        frame(b'\x92\x05\xde\x00\x64' + b'\x01\xc0' * 100),
        'ValueError: more than 32 items of a dict of the message share one hash',
    ),
    'a large frame of too many items': (
        _frame(DONE, [list(range(1000))] * 1001),
        'ValueLimitError: a message has more than 1,000,064 items',
    ),
}


@pytest.mark.parametrize('data, reason', CRAFTED.values(), ids=CRAFTED.keys())
async def test_the_host_counts_again_while_it_decodes(pool, data, reason):
    async with fake_worker_session(pool, wall_time=30) as (session, worker):
        feed = asyncio.ensure_future(session.feed_run('1'))
        await asyncio.sleep(0.01)
        await _send(worker, data)
        with pytest.raises(corral.SandboxWorkerError) as info:
            await asyncio.wait_for(feed, 30)
        assert info.value.display() == f'the sandbox worker stopped: it sent a malformed message ({reason}); check out a new session'


async def test_the_host_bounds_the_decoded_size_of_a_message(pool):
    data = _frame(DONE, ['x' * 100] * 1000)
    async with fake_worker_session(pool, wall_time=30) as (session, worker):
        session.limits = corral.Limits(wall_time=30, value_size=1000)
        feed = asyncio.ensure_future(session.feed_run('1'))
        await asyncio.sleep(0.01)
        await _send(worker, data)
        with pytest.raises(corral.SandboxWorkerError) as info:
            await asyncio.wait_for(feed, 30)
    bound = 2 * 1000 + len(data) - 4  # twice the limit, and the frame's own bytes
    assert info.value.display() == (
        f'the sandbox worker stopped: it sent a malformed message (ValueLimitError: a message takes more than {bound:,} '
        'bytes decoded); check out a new session'
    )


async def test_large_frames_are_decoded_in_order_with_the_small_ones_behind_them(pool):
    async with fake_worker_session(pool, wall_time=30) as (session, worker):
        printed = []
        feed = asyncio.ensure_future(session.feed_run('1', print_callback=lambda stream, text: printed.append(len(text))))
        await asyncio.sleep(0.01)
        data = _frame(OUTPUT, 'stdout', 'x' * 200_000) + _frame(OUTPUT, 'stdout', 'y') + frame(pack([DONE, [(1, 2)] * 100_000, None], side='sandbox'))
        await _send(worker, data)
        assert await asyncio.wait_for(feed, 30) == [(1, 2)] * 100_000
        assert printed == [200_000, 1]


# ----- what a model reads -------------------------------------------------------------------------


async def test_a_code_tool_shows_a_long_result_cut(pool):
    tool = corral.CodeTool({}, type_check=False, pool=pool)
    text = await tool.run('list(range(100_000))')
    assert text.startswith('[0, 1, 2, ') and text.endswith('... (cut at 100,000 characters)')
    assert len(text) == REPR_LIMIT + len('... (cut at 100,000 characters)')
    assert await tool.run('[[]] * 40_000_000') == (
        'The script failed: OverflowError: the result has at least 40,000,000 items; at most 1,000,000 may leave the '
        'sandbox (the value_items limit)'
    )


def _corral_run(tmp_path, code):
    (tmp_path / 'script.py').write_text(code)
    done = subprocess.run([sys.executable, '-m', 'corral', 'run', 'script.py'], capture_output=True, text=True, cwd=tmp_path, timeout=300, check=False)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.slow
async def test_corral_run_shows_every_refusal_and_cuts_a_long_repr(tmp_path):
    deep = _corral_run(tmp_path, 't = []\nfor i in range(1100):\n    t = [t]\nfor i in range(20):\n    t = (t,)\nt\n')
    if sys.version_info >= (3, 12):  # repr counts its depth against the C stack's limit, not the script's: it has one
        assert deep == (0, '(' * 20 + '[' * 1101 + ']' * 1101 + ',)' * 20 + '\n', '')
    else:
        assert deep == (1, '', UNPACKABLE + 'the result is nested more than 100 levels deep\n')
    # a value that cannot leave but has a repr in the sandbox is shown as that repr, as the integrations show it
    assert _corral_run(tmp_path, 'x = []\nx.append(x)\nx\n') == (0, '[[...]]\n', '')
    code, out, err = _corral_run(tmp_path, 'list(range(100_000))\n')
    note = '... (cut at 100,000 characters)\n'
    assert (code, out[-len(note):], len(out), err) == (0, note, REPR_LIMIT + len(note), '')


async def test_flat_call_arguments_just_within_and_past_the_limits(pool):
    """Arguments the worker packs before it measures them (`values.flat`) meet the limits at the
    same counts as any: 2 items for the arguments' list and dict, one for each argument, and
    their bytes; refused with the same texts."""
    lookup = {'f': lambda *args, **kwargs: len(args) + len(kwargs)}
    assert await run(pool, 'f(*range(10))', lookup, limits=corral.Limits(value_items=12)) == 10
    assert await runtime_error(pool, 'f(*range(10))', lookup, limits=corral.Limits(value_items=11)) == (
        'OverflowError: the call to f() has at least 12 items; at most 11 may leave the sandbox (the value_items limit)'
    )
    assert await run(pool, 'f(1, k=None)', lookup, limits=corral.Limits(value_items=4)) == 2
    assert await runtime_error(pool, 'f(1, k=None)', lookup, limits=corral.Limits(value_items=3)) == (
        'OverflowError: the call to f() has at least 4 items; at most 3 may leave the sandbox (the value_items limit)'
    )
    size = 2 * sys.getsizeof(list(('x',))) + sys.getsizeof({}) + sys.getsizeof('x' * 4000)  # [list(args), kwargs]: two lists of 72 bytes (list() of a tuple of 1 allocates 2)
    assert await run(pool, 'f("x" * 4000)', lookup, limits=corral.Limits(value_size=size)) == 1
    assert await runtime_error(pool, 'f("x" * 4000)', lookup, limits=corral.Limits(value_size=size - 1)) == (
        f'OverflowError: the call to f() takes at least {size:,} bytes; at most {size - 1:,} may leave the sandbox (the value_size limit)'
    )
    assert await runtime_error(pool, 'f("\\ud800")', lookup) == (
        "TypeError: f() cannot be called with these arguments: 'utf-8' codec can't encode character '\\ud800' in position 0: surrogates not allowed"
    )
