"""Property: a session loaded from a dump goes on exactly as the session that was dumped.

Generated scripts mix what makes a journal hard: host calls gathered with replies arriving in a
random order, sleeps racing them, `wait_for` timeouts close to their call's delay, classes,
closures, generators, random numbers, feeds that fail part way, and values of object identity
(sets and dict keys of the script's objects, `object()` sentinels, functions, lambdas, classes and
bound methods, `id()`, default reprs, sorting by id). The feeds before the dump put
the order things happened in into variables; after the load, both sessions run the same feeds
(whose results do not depend on timing) and must give the same values, variables included.
"""

import asyncio
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import corral
from corral.host import replay
from corral.host.compiled import COMPILED_FEEDS, CompiledFeeds

KEY = b'property-state-key-0123456789abc'
DELAYS = st.sampled_from([0.0, 0.001, 0.003, 0.006, 0.01])


async def delay(n, seconds):
    await asyncio.sleep(seconds)
    return n


@st.composite
def before_dump(draw, i):
    """A feed whose values record the order of replies and timers; and the expression that reads them."""
    kind = draw(st.sampled_from(['order', 'race', 'wait_for', 'objects', 'random', 'failure', 'identity']))
    if kind == 'order':
        pairs = draw(st.lists(st.tuples(st.integers(0, 9), DELAYS), min_size=2, max_size=4))
        code = f'o{i} = []\nasync def w{i}(n, d):\n    o{i}.append(await delay(n, d))\nawait asyncio.gather(*(w{i}(n, d) for n, d in {pairs!r}))'
        return code, f'o{i}'
    if kind == 'race':
        d1, d2, d3 = draw(DELAYS), draw(DELAYS), draw(DELAYS)
        code = (
            f'm{i} = []\nasync def hs{i}(n, d):\n    m{i}.append(("host", await delay(n, d)))\n'
            f'async def sl{i}(n, d):\n    await asyncio.sleep(d)\n    m{i}.append(("sleep", n))\n'
            f'await asyncio.gather(hs{i}(1, {d1}), sl{i}(2, {d2}), hs{i}(3, {d3}))'
        )
        return code, f'm{i}'
    if kind == 'wait_for':
        d, t = draw(DELAYS), draw(st.sampled_from([0.001, 0.004, 0.008]))
        code = f'try:\n    t{i} = await asyncio.wait_for(delay({i}, {d}), timeout={t})\nexcept TimeoutError:\n    t{i} = "timeout"'
        return code, f't{i}'
    n = draw(st.integers(1, 5))
    if kind == 'objects':
        code = (
            f'class C{i}:\n    def __init__(self, v):\n        self.v = v\n    def get(self):\n        return self.v * 2\n'
            f'def mk{i}(k):\n    def f(x):\n        return x + k\n    return f\n'
            f'def gen{i}():\n    for j in range(50):\n        yield j * {n}\n'
            f'c{i} = C{i}({n})\nf{i} = mk{i}({n})\ng{i} = gen{i}()\nfirst{i} = next(g{i})'
        )
        return code, f'[c{i}.get(), f{i}(1), next(g{i}), first{i}]'
    if kind == 'random':
        return f'r{i} = [random.random() for _ in range({n})] + [uuid.uuid4().hex]', f'r{i}'
    if kind == 'identity':
        return identity(draw, i, n)
    return f'fl{i} = {n}\nraise ValueError("boom {i}")\nfl{i} = 0', f'fl{i}'


def identity(draw, i, n):
    """A feed whose values depend on object identity; and the expression that reads them."""
    size = draw(st.integers(2, 40))
    garbage = draw(st.integers(0, 3000))  # objects made and dropped first: other addresses, the same ids
    code = (
        f'junk{i} = [[j] for j in range({garbage})]\ndel junk{i}\n'
        f'class K{i}:\n    def __init__(self, v):\n        self.v = v\n    def m(self):\n        return self.v\n'
        f'def named{i}():\n    return "named"\n'
        f'ks{i} = [K{i}(v) for v in range({size})]\n'
        f'set{i} = set(ks{i})\n'
        f'sentinels{i} = {{object(): v for v in range({n})}}\n'
        f'callables{i} = {{named{i}: "f", K{i}: "class", K{i}.m: "unbound", (lambda: 0): "lambda", ks{i}[0].m: "bound"}}\n'
        f'bound{i} = {{k.m for k in ks{i}}}\n'
        f'by_id{i} = [k.v for k in sorted(ks{i}, key=id, reverse=True)]\n'
        f'ids{i} = [id(k) - id(ks{i}[0]) for k in set{i}]\n'
        f'print(ks{i}[0], named{i})\nshown{i} = [repr(k) for k in list(set{i})[:3]] + [repr(named{i})]'
    )
    read = (
        f'[[k.v for k in set{i}], list(sentinels{i}.values()), list(callables{i}.values()), [m() for m in bound{i}], '
        f'by_id{i}, ids{i}, shown{i}, [hash(k) == id(k) >> 4 for k in set{i}], [k.v for k in {{K{i}(v) for v in range({size})}}]]'
    )
    return code, read


@st.composite
def after_dump(draw, i):
    """A feed whose value does not depend on timing."""
    kind = draw(st.sampled_from(['gather', 'random', 'failure', 'class', 'identity']))
    n = draw(st.integers(1, 5))
    if kind == 'identity':  # the script's objects made after the load are numbered alike too
        code, read = identity(draw, 100 + i, n)
        return f'{code}\n{read}'
    if kind == 'gather':
        delays = draw(st.lists(DELAYS, min_size=1, max_size=3))
        return f'await asyncio.gather(*(delay(k, d) for k, d in enumerate({delays!r})))'
    if kind == 'random':
        return f'[random.randint(0, 1000) for _ in range({n})]'
    if kind == 'failure':
        return f'late{i} = {n}\n1 / 0'
    return f'class D{i}:\n    k = {n}\n[D{i}.k, D{i}().k]'


@st.composite
def runs(draw):
    feeds = [draw(before_dump(i)) for i in range(draw(st.integers(1, 5)))]
    later = [draw(after_dump(i)) for i in range(draw(st.integers(0, 3)))]
    return feeds, later, draw(st.integers(0, len(later)))


async def outcome(session, code):
    try:
        return ('value', await session.feed_run(code, external_lookup={'delay': delay}))
    except corral.SandboxError as error:
        return ('error', error.display())


class WorkerCompiles(CompiledFeeds):
    """No code from the host: each replayed feed's worker compiles its text, as before the host kept any."""

    def message(self, code, *, guarded, scope=''):
        return None


async def check(feeds, later, second_dump):
    """`original` runs the generated feeds and is dumped into `loaded` and into `compiling`;
    after `second_dump` of the later feeds, `loaded` is dumped into `reloaded`; every feed after
    a load gives the same outcome in each session that has it, and so does reading every
    variable at the end. `loaded` replays the code the host compiled for it (none kept before),
    `reloaded` the code kept since, `compiling` the code its own worker compiled, and
    `stepwise` gets each feed's messages in its turn (no feed ahead)."""
    COMPILED_FEEDS.clear()
    async with corral.Pool(state_key=KEY, warm_workers=1) as pool:
        async with pool.checkout() as original, pool.checkout() as loaded, pool.checkout() as reloaded, pool.checkout() as compiling, pool.checkout() as stepwise:
            await original.feed_run('import asyncio, random, uuid')
            for code, _ in feeds:
                await outcome(original, code)
            state = await original.dump()
            await loaded.load_session(state)
            assert COMPILED_FEEDS.misses == len({code for code, _ in feeds} | {'import asyncio, random, uuid'})
            with patch.object(replay, 'COMPILED_FEEDS', WorkerCompiles()):
                await compiling.load_session(state)
            with patch.object(replay, '_AHEAD_BYTES', 0):
                await stepwise.load_session(state)
            sessions = [original, loaded, compiling, stepwise]
            reads = '[' + ', '.join(read for _, read in feeds) + ']'
            for index, code in enumerate([*later, reads]):
                if index == second_dump:
                    await reloaded.load_session(await loaded.dump())
                    sessions.append(reloaded)
                results = [await outcome(session, code) for session in sessions]
                assert results == [results[0]] * len(sessions), code


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs())
@pytest.mark.slow
def test_a_loaded_session_goes_on_exactly_as_the_one_dumped(run):
    asyncio.run(check(*run))
