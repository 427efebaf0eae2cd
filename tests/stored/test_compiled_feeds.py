"""A replay runs the code the host compiled for each feed's text (kept by a digest of the text and
the compiler), so it does not validate, rewrite and compile again; the code comes from the host's
own compiler only: a state carries text, a worker takes code only under its own compiler's tag,
and the cache is bounded."""

import marshal

import msgpack
import pytest

import corral
from corral.channel import CODE
from corral.host import compiled as compiled_module
from corral.host.compiled import COMPILED_FEEDS, CompiledFeeds
from corral.language import compile_script, compile_unguarded
from corral.language.compile import COMPILER, compiler_tag, dump_compiled, load_compiled
from corral.values import pack
from cpython_carets import carets

from .test_package_states import body, sealed

KEY = b'compiled-feeds-key-0123456789abc'


@pytest.fixture(autouse=True)
def empty_cache():
    COMPILED_FEEDS.clear()
    yield
    COMPILED_FEEDS.clear()


def key_of(code: str, guarded: bool = True, scope: str = '') -> bytes:
    """The entry `COMPILED_FEEDS` keeps for `code`, found by what it answers for it."""
    before = set(COMPILED_FEEDS._entries)
    COMPILED_FEEDS.message(code, guarded=guarded, scope=scope)
    (key,) = set(COMPILED_FEEDS._entries) - before
    return key


async def dumped(pool: corral.Pool, *codes: str) -> bytes:
    async with pool.checkout() as session:
        for code in codes:
            try:
                await session.feed_run(code)
            except corral.SandboxError:
                pass
        return await session.dump()


async def loaded(pool: corral.Pool, state: bytes, read: str) -> object:
    async with pool.checkout() as session:
        await session.load_session(state)
        return await session.feed_run(read)


async def test_a_replay_compiles_each_text_once_on_the_host_and_a_second_replay_compiles_none():
    async with corral.Pool(state_key=KEY, checkpoints=None) as pool:
        state = await dumped(pool, 'x = [1]', 'def f(n):\n    return n * 2\n', 'x.append(f(3))\nx', 'x = [1]')
        assert (COMPILED_FEEDS.hits, COMPILED_FEEDS.misses, len(COMPILED_FEEDS)) == (0, 0, 0)  # live feeds compile in their worker
        assert await loaded(pool, state, 'x') == [1]
        assert (COMPILED_FEEDS.hits, COMPILED_FEEDS.misses, len(COMPILED_FEEDS)) == (1, 3, 3)  # 'x = [1]' twice
        assert await loaded(pool, state, '[x, f(5)]') == [[1], 10]
        assert (COMPILED_FEEDS.hits, COMPILED_FEEDS.misses) == (5, 3)


async def test_the_worker_runs_the_code_the_host_sends_and_not_what_its_own_compile_would_give():
    """Shown by giving the host's entry for one text the code of another: what the replay
    rebuilds is what the host sent (the only place code may come from: see the tests below)."""
    async with corral.Pool(state_key=KEY, checkpoints=None) as pool:
        state = await dumped(pool, 'x = 1')
        COMPILED_FEEDS._entries[key_of('x = 1')] = pack(
            [CODE, 'x = 1', compiler_tag(True), dump_compiled(compile_script('x = 2', '<script>')), False], side='host'
        )
        assert await loaded(pool, state, 'x') == 2


@pytest.mark.parametrize(
    'tag, data',
    [
        (compiler_tag(False), None),  # the code of the unguarded compile: a guarded worker refuses it
        (b'\x00' * 16, None),  # another compiler's
        (compiler_tag(True), marshal.dumps(('x', 2))),  # no code object
        (compiler_tag(True), marshal.dumps(compile('x = 2', 'f', 'exec'))),  # code that is not a script's `<module>`
        (compiler_tag(True), b'\xff\x00garbage'),
    ],
    ids=['unguarded', 'other-compiler', 'not-code', 'not-a-script', 'garbage'],
)
async def test_a_worker_compiles_the_text_itself_when_the_code_is_not_its_own_compilers(tag, data):
    async with corral.Pool(state_key=KEY, checkpoints=None) as pool:
        state = await dumped(pool, 'x = 1')
        code = dump_compiled(compile_script('x = 2', '<script>')) if data is None else data
        COMPILED_FEEDS._entries[key_of('x = 1')] = pack([CODE, 'x = 1', tag, code, False], side='host')
        assert await loaded(pool, state, 'x') == 1


async def test_a_state_carries_text_only_and_a_forged_one_cannot_choose_bytecode():
    """A state signed with the key whose feed says another script runs that script compiled from
    its text, through the language layer: a refused construct is refused, not run; marshalled
    code where the text goes is not text, and the state is refused."""
    async with corral.Pool(state_key=KEY, checkpoints=None) as pool:
        state = await dumped(pool, 'x = 1')
        plain = body(state)
        feed = msgpack.unpackb(plain['feeds'][0][0])
        for code, error in (
            ('x = (lambda: 0).__code__', 'the session state could not be replayed: feed 1 went another way than the recorded run: '
             "it ended 'failed' where the record has 'done'"),
            (marshal.dumps(compile_script('x = 2', '<script>').code), "the session state is malformed (malformed feed record)"),
        ):
            forged = {**plain, 'feeds': [[msgpack.packb([feed[0], code, *feed[2:]], use_bin_type=True), code, *plain['feeds'][0][2:]]]}
            async with pool.checkout() as session:
                with pytest.raises(corral.SandboxStateError) as caught:
                    await session.load_session(sealed(forged, key=KEY))
                assert str(caught.value) == error
        assert COMPILED_FEEDS.message(b'x = 2', guarded=True) is None  # text only: bytes are never compiled here


async def test_a_feed_that_failed_to_compile_or_warned_replays_as_it_ran_its_worker_compiling_it():
    async with corral.Pool(state_key=KEY, checkpoints=None) as pool:
        async with pool.checkout() as session:
            with pytest.raises(corral.SandboxSyntaxError) as first:
                await session.feed_run('x = (')
            warned = await session.feed_run('x = 5\nx is 5')
            state = await session.dump()
        assert COMPILED_FEEDS.message('x = (', guarded=True) is None
        assert COMPILED_FEEDS.message('x = 5\nx is 5', guarded=True) is None
        async with pool.checkout() as session:
            await session.load_session(state)
            assert await session.feed_run('x') == 5
            with pytest.raises(corral.SandboxSyntaxError) as again:
                await session.feed_run('x = (')
            assert again.value.display() == first.value.display()
    assert warned is True


async def test_a_pool_without_the_language_layer_replays_its_own_compilation():
    async with corral.Pool(state_key=KEY, checkpoints=None, skip_layers={'language'}) as pool:
        state = await dumped(pool, 'x = (lambda: 0).__code__.co_name')
        assert await loaded(pool, state, 'x') == '<lambda>'
        assert COMPILED_FEEDS.message('x = (lambda: 0).__code__.co_name', guarded=True) is None  # refused by the layer
        assert COMPILED_FEEDS.misses == 2 and COMPILED_FEEDS.hits == 0


def test_entries_are_keyed_by_the_text_and_the_compilation_and_shared_only_for_both():
    message = COMPILED_FEEDS.message('x = 1', guarded=True)
    assert COMPILED_FEEDS.message('x = 1', guarded=True) is message
    assert len({key_of('x = 1 '), key_of('x = 1', guarded=False), key_of('x=1')}) == 3
    kind, text, tag, data, imports_asyncio = msgpack.unpackb(message)
    assert (kind, text, tag, imports_asyncio) == (CODE, 'x = 1', compiler_tag(True), False)
    assert load_compiled(data, False, '<script 7>').code.co_filename == '<script 7>'
    assert compiler_tag(True) != compiler_tag(False) and len(COMPILER) == 16


def test_each_tenant_has_its_own_entries_so_a_feed_s_speed_tells_none_whether_another_fed_a_text():
    """A text compiled for one tenant is compiled again for another (and a text seen once live by
    one is a first sighting for the next), so no tenant can time whether another ran it; a scope
    and text that run together differently are different keys."""
    keys = {key_of('x = 1', scope='acme'), key_of('x = 1', scope='globex'), key_of('x = 1'), key_of('1\nx = 1', scope='acme'), key_of('x = 1', scope='acme1\n')}
    assert len(keys) == 5 and COMPILED_FEEDS.misses == 5
    assert COMPILED_FEEDS.message('x = 1', guarded=True, scope='acme') is not None and COMPILED_FEEDS.hits == 1
    assert COMPILED_FEEDS.live('y = 2', guarded=True, scope='acme') is None
    assert COMPILED_FEEDS.live('y = 2', guarded=True, scope='globex') is None  # globex's first sighting: not compiled for it
    assert COMPILED_FEEDS.live('y = 2', guarded=True, scope='globex') is not None and COMPILED_FEEDS.misses == 6


def test_code_loaded_for_a_script_is_named_as_the_worker_numbers_it_all_the_way_down():
    script = load_compiled(dump_compiled(compile_script('class A:\n    def f(self):\n        return [x for x in (1,)]\n', '<script>')), True, '<script 3>')
    names, pending = set(), [script.code]
    while pending:
        code = pending.pop()
        names.add(code.co_filename)
        pending.extend(const for const in code.co_consts if type(const) is type(code))
    assert names == {'<script 3>'} and script.imports_asyncio is True
    with pytest.raises(ValueError, match='^not the code of a compiled script$'):
        load_compiled(marshal.dumps(compile('1', 'f', 'eval')), False, 'f')


def test_the_cache_is_bounded_in_entries_and_bytes_least_recently_used_first():
    feeds = CompiledFeeds(max_bytes=1 << 20, max_entries=3)
    for text in ('a = 1', 'b = 2', 'c = 3'):
        feeds.message(text, guarded=True)
    feeds.message('a = 1', guarded=True)  # used: 'b = 2' is now the oldest
    feeds.message('d = 4', guarded=True)
    assert [msgpack.unpackb(feeds._entries[key])[1] for key in feeds._scopes[''].keys] == ['c = 3', 'a = 1', 'd = 4']
    assert feeds.size == sum(map(len, feeds._entries.values()))
    one = len(feeds.message('e = 5', guarded=True))
    small = CompiledFeeds(max_bytes=2 * one + 10, max_entries=100)
    for text in ('e = 5', 'f = 6', 'g = 7'):
        small.message(text, guarded=True)
    assert (len(small), small.size) == (2, 2 * one)
    small.message('x = (', guarded=True)  # kept as a text the worker compiles: a small fixed cost
    assert (len(small), small.size) == (2, one + compiled_module._REFUSED_COST)
    huge = 'x = [' + ', '.join(map(str, range(5000))) + ']'
    assert small.message(huge, guarded=True) is None  # its code is larger than the whole cache: its worker compiles it
    assert small.message(huge, guarded=True) is None  # and the host does not compile it again
    assert (len(small), small.size, small.hits, small.misses) == (3, one + 2 * compiled_module._REFUSED_COST, 1, 5)
    assert CompiledFeeds(max_entries=0).message('a = 1', guarded=True) is not None  # compiled, kept nowhere
    long = CompiledFeeds(max_text=10)
    assert long.message('x = 1234567', guarded=True) is None and long.message('x = 123456', guarded=True) is not None
    assert (len(long), long.misses) == (1, 1)  # the long text is neither compiled nor kept


def test_one_tenants_many_feeds_never_drop_another_tenants_entries():
    """Past a bound the tenant holding the most loses its oldest: a tenant flooding the cache drops
    its own entries, never those of one holding fewer, whose feeds stay hits (and texts seen once)."""
    one = len(CompiledFeeds().message('a = 0', guarded=True))
    feeds = CompiledFeeds(max_bytes=1 << 20, max_entries=8)
    for text in ('a = 0', 'b = 0', 'c = 0'):
        feeds.message(text, guarded=True, scope='globex')
    assert feeds.live('d = 0', guarded=True, scope='globex') is None  # seen once: compiled its second time
    for n in range(100):
        feeds.message(f'x = {n}', guarded=True, scope='acme')
        assert feeds.live(f'y = {n}', guarded=True, scope='acme') is None
    assert (len(feeds), feeds._seen, len(feeds._scopes['acme'].keys), len(feeds._scopes['acme'].seen)) == (8, 8, 5, 7)
    misses = feeds.misses
    assert all(feeds.message(text, guarded=True, scope='globex') is not None for text in ('a = 0', 'b = 0', 'c = 0'))
    assert feeds.live('d = 0', guarded=True, scope='globex') is not None and feeds.misses == misses + 1  # its second sighting
    # globex's fourth entry went past max_entries: acme, holding the most, lost its oldest
    assert [msgpack.unpackb(feeds._entries[key])[1] for key in feeds._scopes['acme'].keys] == [f'x = {n}' for n in range(96, 100)]
    by_bytes = CompiledFeeds(max_bytes=6 * one, max_entries=1000)  # the bound in bytes: the same
    for text in ('a = 0', 'b = 0'):
        by_bytes.message(text, guarded=True, scope='globex')
    for n in range(100):
        by_bytes.message(f'x = {n % 10}', guarded=True, scope='acme')
    assert all(by_bytes.message(text, guarded=True, scope='globex') is not None for text in ('a = 0', 'b = 0'))
    assert (len(by_bytes._scopes['globex'].keys), len(by_bytes._scopes['acme'].keys), by_bytes.size) == (2, 4, 6 * one)
    by_bytes.message('a = 0', guarded=True, scope='initech')  # a third tenant: globex and acme each keep more than it
    assert [len(by_bytes._scopes[name].keys) for name in ('globex', 'acme', 'initech')] == [2, 3, 1]
    by_bytes.clear()
    assert (len(by_bytes), by_bytes.size, by_bytes._scopes, by_bytes._seen) == (0, 0, {}, 0)


async def test_a_traceback_through_a_replayed_feeds_function_shows_its_lines_as_when_it_ran():
    async with corral.Pool(state_key=KEY, checkpoints=None) as pool:
        async with pool.checkout() as session:
            await session.feed_run('def f(n):\n    return n / 0\n')
            with pytest.raises(corral.SandboxRuntimeError) as ran:
                await session.feed_run('f(1)')
            state = await session.dump()
        for _ in range(2):  # compiled on the host, then kept
            async with pool.checkout() as session:
                await session.load_session(state)
                with pytest.raises(corral.SandboxRuntimeError) as replayed:
                    await session.feed_run('f(2)')
            assert replayed.value.display() == ran.value.display().replace('f(1)', 'f(2)') == (
                'Traceback (most recent call last):\n'
                '  File "main.py", line 1, in <module>\n'
                '    f(2)\n'
                + carets('f(2)', 'f')
                + '  File "main.py", line 2, in f\n'
                '    return n / 0\n'
                '           ~~^~~\n'
                'ZeroDivisionError: division by zero'
            )
    assert (COMPILED_FEEDS.misses, COMPILED_FEEDS.hits) == (3, 2)  # and 'f(2)', fed live a second time


async def test_code_nested_deeply_crosses_whole_and_replays():
    nested = 'f = ' + 'lambda: ' * 150 + '7\ng = f'
    read = 'g' + '()' * 150
    async with corral.Pool(state_key=KEY, checkpoints=None) as pool:
        state = await dumped(pool, nested)
        assert await loaded(pool, state, read) == 7
        assert COMPILED_FEEDS.misses == 1 and COMPILED_FEEDS.message(nested, guarded=True) is not None


async def fed(pool: corral.Pool, code: str, **checkout: object) -> object:
    """What one feed of `code` in a new session gives: its value, or its error's display."""
    async with pool.checkout(**checkout) as session:
        try:
            return await session.feed_run(code)
        except corral.SandboxError as error:
            return error.display()


async def test_a_live_text_is_compiled_on_the_host_when_fed_again_and_sent_as_code_once_per_worker():
    async with corral.Pool(checkpoints=None) as pool:
        async with pool.checkout() as session:
            assert [await session.feed_run('x = 1\nx') for _ in range(3)] == [1, 1, 1]
        assert (COMPILED_FEEDS.hits, COMPILED_FEEDS.misses, len(COMPILED_FEEDS)) == (0, 0, 0)  # fed once in the process: its worker compiles it
        async with pool.checkout() as session:
            assert [await session.feed_run('x = 1\nx') for _ in range(3)] == [1, 1, 1]
        assert (COMPILED_FEEDS.hits, COMPILED_FEEDS.misses, len(COMPILED_FEEDS)) == (0, 1, 1)  # fed again: compiled here, sent to this worker once
        assert await fed(pool, 'x = 1\nx') == 1
        assert (COMPILED_FEEDS.hits, COMPILED_FEEDS.misses) == (1, 1)


async def test_a_live_feed_runs_the_code_the_host_sends_for_a_text_fed_before():
    async with corral.Pool(checkpoints=None) as pool:
        assert await fed(pool, 'x = 1\nx') == 1
        COMPILED_FEEDS._entries[key_of('x = 1\nx')] = pack(
            [CODE, 'x = 1\nx', compiler_tag(True), dump_compiled(compile_script('x = 2\nx', '<script>')), False], side='host'
        )
        assert await fed(pool, 'x = 1\nx') == 2


@pytest.mark.parametrize('skip', [set(), {'language'}], ids=['guarded', 'unguarded'])
async def test_a_live_feed_never_runs_code_of_the_other_compilation(skip):
    """Code the host compiled with the language layer on never runs in a worker with it off, nor
    the reverse: each worker takes code under its own compiler's tag only, and compiles the text
    itself otherwise."""
    guarded = not skip
    async with corral.Pool(checkpoints=None, skip_layers=skip) as pool:
        assert await fed(pool, 'x = 1\nx') == 1
        other = (compile_unguarded if guarded else compile_script)('x = 2\nx', '<script>')
        COMPILED_FEEDS._entries[key_of('x = 1\nx', guarded)] = pack([CODE, 'x = 1\nx', compiler_tag(not guarded), dump_compiled(other), False], side='host')
        assert await fed(pool, 'x = 1\nx') == 1


async def test_a_live_feed_that_does_not_compile_or_warns_says_so_every_time_as_its_worker_compiles_it():
    async with corral.Pool(checkpoints=None) as pool:
        assert [await fed(pool, 'x = (') for _ in range(3)] == ["  File \"main.py\", line 1\n    x = (\n        ^\nSyntaxError: '(' was never closed"] * 3
        printed = []
        for _ in range(3):
            async with pool.checkout() as session:
                assert await session.feed_run('x = 5\nx is 5', print_callback=lambda stream, text: printed.append((stream, text))) is True
        assert printed == [('stderr', 'main.py:2: SyntaxWarning: "is" with a literal. Did you mean "=="?\n')] * 3
        assert COMPILED_FEEDS.message('x = (', guarded=True) is None and COMPILED_FEEDS.message('x = 5\nx is 5', guarded=True) is None


async def test_code_kept_from_one_session_gives_another_what_its_own_compile_would():
    """An entry is a function of the text and the compiler alone: a session of another script name
    that runs it shows its own name and lines, exactly as when its worker compiles."""
    code = 'def f(n):\n    return n / 0\nf(1)'
    async with corral.Pool(checkpoints=None) as pool:
        compiling = await fed(pool, code, script_name='b.py')
        assert COMPILED_FEEDS.misses == 0
        assert await fed(pool, code, script_name='a.py') == compiling.replace('b.py', 'a.py')
        assert COMPILED_FEEDS.misses == 1
        assert await fed(pool, code, script_name='b.py') == compiling
        assert COMPILED_FEEDS.hits == 1
    assert compiling == (
        'Traceback (most recent call last):\n'
        '  File "b.py", line 3, in <module>\n'
        '    f(1)\n'
        + carets('f(1)', 'f')
        + '  File "b.py", line 2, in f\n'
        '    return n / 0\n'
        '           ~~^~~\n'
        'ZeroDivisionError: division by zero'
    )


def test_a_live_text_is_compiled_the_second_time_it_is_asked_for_and_the_texts_seen_once_are_bounded():
    feeds = CompiledFeeds(max_entries=2)
    assert feeds.live('a = 1', guarded=True) is None  # seen once: its worker compiles it
    assert (len(feeds), feeds.hits, feeds.misses) == (0, 0, 0)
    message = feeds.live('a = 1', guarded=True)
    assert msgpack.unpackb(message)[:3] == [CODE, 'a = 1', compiler_tag(True)]
    assert feeds.live('a = 1', guarded=True) is message and feeds.message('a = 1', guarded=True) is message
    assert (len(feeds), feeds.hits, feeds.misses) == (1, 2, 1)
    assert feeds.live('a = 1', guarded=False) is None  # another compilation: seen once
    for text in ('b = 2', 'c = 3', 'd = 4'):
        assert feeds.live(text, guarded=True) is None
    assert list(feeds._scopes[''].seen) == [key_of_in(feeds, text) for text in ('c = 3', 'd = 4')]  # the oldest seen went first
    assert feeds.live('b = 2', guarded=True) is None and feeds.live('d = 4', guarded=True) is not None
    assert feeds.live('x = (', guarded=True) is None and feeds.live('x = (', guarded=True) is None  # compiled, refused, kept as such
    assert feeds.live('x = (', guarded=True) is None and feeds.misses == 3


def key_of_in(feeds: CompiledFeeds, code: str, guarded: bool = True) -> bytes:
    """The key `feeds` files `code` under (a digest of the compiler's tag, no scope, and the text)."""
    return feeds.key(code, guarded=guarded)


#: Texts whose compile depends on more than their lines, each with what a feed of it gives.
TRICKY_TEXTS = {
    'crlf': ('x = 1\r\ny = [x,\r\n  2]\r\ny', [1, 2]),
    'lone cr': ('x = 1\ry = x + 1\ry', 2),
    'form feed': ('\x0cx = 5\n\x0cx', 5),
    'coding line': ('# -*- coding: latin-1 -*-\ns = "é"\ns', 'é'),
    'continuation': ('x = 1 + \\\n  2\nx', 3),
    'future import': ('from __future__ import annotations\ndef f(a: Undefined) -> Nope:\n    return 1\nf.__annotations__', {'a': 'Undefined', 'return': 'Nope'}),
    'top-level await': ('import asyncio\nawait asyncio.sleep(0)\n7', 7),
    'bom': ('\ufeffx = 3\nx', '  File "main.py", line 1\n    \ufeffx = 3\n    ^\nSyntaxError: invalid non-printable character U+FEFF'),
    'tabs': ('if True:\n\tx = 1\n        y = 2\nx', '  File "main.py", line 3\n    y = 2\nTabError: inconsistent use of tabs and spaces in indentation'),
    'surrogate': (
        's = "\ud800"\nlen(s)',
        '  File "main.py", line 1\n    s = "\\ud800"\n         ^\nSyntaxError: the script holds a lone surrogate, U+D800, which is not a '
        "character; inside a string, write it as the escape '\\ud800'",
    ),
    'braces': ('from __future__ import braces', '  File "main.py", line 1\n    from __future__ import braces\n    ^\nSyntaxError: not a chance'),
    'late future': (
        'x = 1\nfrom __future__ import annotations\nx',
        '  File "main.py", line 2\n    from __future__ import annotations\n    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n'
        'SyntaxError: from __future__ imports must occur at the beginning of the file',
    ),
    'nul': ('x = 1\x00\nx', 'SyntaxError: source code string cannot contain null bytes (main.py)'),
}


@pytest.mark.parametrize('skip', [set(), {'language'}], ids=['guarded', 'unguarded'])
@pytest.mark.parametrize('name', list(TRICKY_TEXTS))
async def test_a_tricky_text_gives_the_same_whether_its_worker_or_the_host_compiled_it(name, skip):
    """Line endings, a BOM, a coding line, tabs, surrogates, future imports: the first feed of a
    text is compiled by its worker, the second by the host (sent as code), the third taken from
    the cache; all three give the same value or the same error."""
    code, expected = TRICKY_TEXTS[name]
    async with corral.Pool(checkpoints=None, skip_layers=skip) as pool:
        assert [await fed(pool, code, type_check=False) for _ in range(3)] == [expected] * 3
    assert (COMPILED_FEEDS.hits, COMPILED_FEEDS.misses) == ((0, 0) if name == 'surrogate' else (1, 1))  # a lone surrogate is refused before any compile


def test_a_tenant_that_comes_to_hold_as_much_as_another_drops_its_own_entry_not_the_others():
    """Past the bound, a tie between the tenant adding and another is the adding tenant's loss:
    acme's fourth text, bringing it level with globex's four, drops acme's oldest, not globex's;
    the same for texts seen once, and for the bound in bytes."""
    feeds = CompiledFeeds(max_bytes=1 << 20, max_entries=8)
    for scope, count in (('globex', 4), ('acme', 3), ('initech', 1)):
        for n in range(count):
            feeds.message(f'{scope[0]} = {n}', guarded=True, scope=scope)
            assert feeds.live(f'{scope[0]}{scope[0]} = {n}', guarded=True, scope=scope) is None
    feeds.message('a = 3', guarded=True, scope='acme')
    assert feeds.live('aa = 3', guarded=True, scope='acme') is None
    texts = {name: [msgpack.unpackb(feeds._entries[key])[1] for key in scope.keys] for name, scope in feeds._scopes.items()}
    assert texts == {'globex': ['g = 0', 'g = 1', 'g = 2', 'g = 3'], 'acme': ['a = 1', 'a = 2', 'a = 3'], 'initech': ['i = 0']}
    assert [len(feeds._scopes[name].seen) for name in ('globex', 'acme', 'initech')] == [4, 3, 1]
    assert feeds.live('aa = 0', guarded=True, scope='acme') is None  # acme's oldest seen went: a first sighting again
    one = len(CompiledFeeds().message('a = 0', guarded=True))
    by_bytes = CompiledFeeds(max_bytes=8 * one, max_entries=1000)
    for scope, count in (('globex', 4), ('acme', 3), ('initech', 1)):
        for n in range(count):
            by_bytes.message(f'{scope[0]} = {n}', guarded=True, scope=scope)
    by_bytes.message('a = 3', guarded=True, scope='acme')
    texts = {name: [msgpack.unpackb(by_bytes._entries[key])[1] for key in scope.keys] for name, scope in by_bytes._scopes.items()}
    assert texts == {'globex': ['g = 0', 'g = 1', 'g = 2', 'g = 3'], 'acme': ['a = 1', 'a = 2', 'a = 3'], 'initech': ['i = 0']}
