"""The earlier snippets a new one depends on: what the warm server's quick check puts in front."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.typecheck import TypeChecker
from corral.typecheck import _context, _syntax
from corral.typecheck._context import relevant_context

CONTEXT = ['a = 1', 'b = 2', 'def f():\n    return a', 'print(b)', 'import math as m', 'class K:\n    size = b']


@pytest.mark.parametrize(
    'code, kept',
    [
        ('c = 3', []),
        ('f()', ['a = 1', 'def f():\n    return a']),  # and what f itself needs
        ('m.pi + a', ['a = 1', 'def f():\n    return a', 'import math as m']),  # every snippet reading `a`
        ('K().size', ['b = 2', 'print(b)', 'class K:\n    size = b']),  # `print` ties nothing: no snippet binds it
        ('a = "now a str"', ['a = 1', 'def f():\n    return a']),  # a name the new code binds counts too
        ('def g(b):\n    return b', ['b = 2', 'print(b)', 'class K:\n    size = b']),  # over-approximated: a parameter
    ],
)
def test_the_snippets_a_script_depends_on_in_their_order(code, kept):
    assert relevant_context(CONTEXT, code) == kept


@pytest.mark.parametrize(
    'snippet, code',
    [
        ('global_name = 1\ndef h():\n    global shared\n    shared = 2', 'shared'),
        ('try:\n    pass\nexcept Exception as caught:\n    pass', 'caught'),
        ('match 1:\n    case [first, *rest]:\n        pass', 'rest'),
        ('match {}:\n    case {"k": 1, **others}:\n        pass', 'others'),
        ('for i in range(3):\n    pass', 'i'),
        ('total = sum(v for v in range(3)) + (w := 4)', 'w'),
        ('with open("f") as handle:\n    pass', 'handle'),
        ('import os.path', 'os'),
        ('r = await get(1)', 'r'),  # top-level await parses
    ],
)
def test_every_way_of_binding_a_name_counts(snippet, code):
    assert relevant_context(['unrelated = 0', snippet], code) == [snippet]


@pytest.mark.parametrize(
    'snippet, code',
    [
        ('int = str', 'def g(a: "int") -> None:\n    print(type(a))\ng(1)'),  # a string annotation
        ('str = int\n', 'def g(a: "list[str]") -> None: ...\ng(["a"])'),
        ('T = int', 'x = cast("list[\'T\']", 1)'),  # a string inside a string
    ],
)
def test_names_written_as_text_count(snippet, code):
    assert relevant_context(['unrelated = 0', snippet], code) == [snippet]


@pytest.fixture
async def warm():
    """A checker whose `ty server` is up: its clean checks take the quick path."""
    checker = TypeChecker()
    try:
        assert await checker.check('1') is None
        for slot in checker._slots:
            if slot.starting is not None:
                await slot.starting
        assert any(slot.server is not None and slot.server.alive for slot in checker._slots)
        yield checker
    finally:
        await checker.aclose()


async def test_files_changed_while_the_warm_server_starts_are_told_to_it():
    # The first check starts the slot's `ty server` in the background; the second, without stubs,
    # removes the stubs (and their `__builtins__.pyi`) from the folder while it starts, and may be
    # missed by its read of the folder. The server, once up, must not see `f` of the stubs gone.
    checker = TypeChecker()
    try:
        assert await checker.check('f(1)', stubs='def f(x: int) -> int: ...\n') is None
        assert (await checker.check('f')).startswith('error[unresolved-reference]: Name `f` used when not defined\n')
        for slot in checker._slots:
            if slot.starting is not None:
                await slot.starting
        assert any(slot.server is not None and slot.server.alive for slot in checker._slots)
        for _ in range(3):
            assert (await checker.check('f')).startswith('error[unresolved-reference]: Name `f` used when not defined\n')
    finally:
        await checker.aclose()


async def test_a_builtin_rebound_earlier_is_seen_through_a_string_annotation(warm):
    result = await warm.check('def g(a: "int") -> None:\n    print(type(a))\ng(1)', context=['int = str', 'other = 1'])
    assert result is not None and result.startswith('error[invalid-argument-type]: Argument to function `g` is incorrect\n')


@pytest.mark.parametrize(
    'snippet, code',
    [
        ('a.v = None\n', 'a.v + 1'),  # stores through a name narrow what it holds
        ('d["k"] = None\n', 'd["k"] + 1'),
        ('l[0] = None\n', 'l[0] + 1'),
        ('a.b[0].c = None\n', 'a.b[0].c + 1'),
        ('del a.v\n', 'a.v'),
    ],
)
def test_stores_into_a_name_bind_it(snippet, code):
    assert relevant_context(['unrelated = 0', snippet], code) == [snippet]


async def test_a_narrowing_store_in_an_earlier_snippet_is_seen(warm):
    context = ['class A:\n    v: int | None = None\na = A()\na.v = 1\n', 'a.v = None\n']
    result = await warm.check('a.v + 1', context=context)
    assert result is not None and result.startswith('error[unsupported-operator]: Unsupported `+` operation\n')


@pytest.mark.parametrize('annotation', ['"Literal[-1] | int"', '"int' + ' ' * 200 + '"'])
def test_any_string_that_parses_counts(annotation):
    assert relevant_context(['class int: pass\n', 'z = 1'], f'from typing import Literal\nx: {annotation} = 5') == ['class int: pass\n']


NARROWED = ['def g() -> int | None: return 1', 'from typing import TypeVar\nT = TypeVar("T")\ndef wrap(v: T) -> list[T]:\n    return [v]', 'x = g()']


@pytest.mark.parametrize(
    'narrowing',
    ['assert x is not None', 'if x is None:\n    raise SystemExit', 'assert isinstance(x, int)', 'assert x', 'assert type(x) is int'],
)
def test_a_snippet_that_only_narrows_a_name_is_kept(narrowing):
    # a narrower type can make an error as well as remove one (list[T] is invariant)
    assert relevant_context([*NARROWED, 'unrelated = 0', narrowing], 'l = wrap(x)\nm: list[int | None] = l\n') == [*NARROWED, narrowing]


async def test_an_error_a_narrowing_makes_is_reported(warm):
    result = await warm.check('l = wrap(x)\nm: list[int | None] = l\n', context=[*NARROWED, 'assert x is not None'])
    assert result is not None and result.startswith('error[invalid-assignment]: Object of type `list[int]` is not assignable to `list[int | None]`\n')


def test_star_imports_and_unparseable_snippets_keep_everything_they_might_need():
    assert relevant_context(['from math import *', 'x = 1'], 'pi') == ['from math import *']
    assert relevant_context(['x = (((', 'y = 1'], 'z') == ['x = (((', 'y = 1']
    assert relevant_context(['y = 1'], 'z = (((') == ['y = 1']
    assert relevant_context(['y = 1'], 'z = "' + 'a' * 20_000 + '"') == ['y = 1']  # too long a string to read


SESSION = ['a = 1', 'b = a + 1', 'print(b)', 'x = (((', 'from math import *', 'def f():\n    return b', 'c = f()']


@pytest.mark.parametrize('feeds', range(len(SESSION) + 1))
def test_a_session_growing_feed_by_feed_gets_what_a_fresh_look_gets(feeds):
    """The index of a session's snippets is extended by one snippet per feed; it must say what
    one built from nothing says, before and after an unparseable snippet and a * import."""
    grown = [relevant_context(SESSION[:n], 'c + b') for n in range(feeds + 1)][-1]
    _context._INDEXES.clear()
    assert relevant_context(SESSION[:feeds], 'c + b') == grown
    expected = {
        0: [],
        1: [],
        2: ['a = 1', 'b = a + 1'],
        3: ['a = 1', 'b = a + 1', 'print(b)'],
    }.get(feeds, SESSION[:feeds])  # from the unparseable snippet on: all of them
    assert grown == expected


_NAME = st.sampled_from(['a', 'b', 'c', 'd', 'print'])
_SNIPPET = st.one_of(
    st.builds('{} = {}'.format, _NAME, _NAME),
    st.builds('{}.v = 1'.format, _NAME),
    st.builds('def {}():\n    return {}'.format, _NAME, _NAME),
    st.builds('x: "{}" = 1'.format, _NAME),
    st.builds('{}({})'.format, _NAME, _NAME),
    st.just('from math import *'),
    st.just('x = ((('),
)


def _closure(context, code):
    """What `relevant_context` must keep, found the slow way: add every snippet that mentions a
    name already needed (and bound by some snippet) until nothing changes."""
    infos = [_context._names(snippet) for snippet in context]
    new = _context._names(code)
    if new is None or None in infos:
        return list(context)
    bound = set().union(*(info[0] for info in infos))
    kept = {i for i, info in enumerate(infos) if info[2]}
    needed = (new[1] & bound).union(*(infos[i][1] & bound for i in kept))
    while grown := {i for i, info in enumerate(infos) if i not in kept and info[1] & needed}:
        kept |= grown
        needed = needed.union(*(infos[i][1] & bound for i in grown))
    return [context[i] for i in sorted(kept)]


@settings(max_examples=300, deadline=None)
@given(session=st.lists(_SNIPPET, max_size=12), code=_SNIPPET)
@pytest.mark.slow
def test_an_index_grown_feed_by_feed_or_built_at_once_keeps_the_closure(session, code):
    _context._INDEXES.clear()
    for n in range(len(session) + 1):
        assert relevant_context(session[:n], code) == _closure(session[:n], code)
    _context._INDEXES.clear()  # and built at once
    assert relevant_context(session, code) == _closure(session, code)


_UNSUPPORTED_B_PLUS_NONE = (
    'error[unsupported-operator]: Unsupported `+` operation\n --> main.py:1:1\n  |\n1 | b + None\n'
    '  | -^^^----\n  | |   |\n  | |   Has type `None`\n  | Has type `Literal[1]`'
)


@pytest.mark.parametrize(
    'context, code, expected',
    [
        # the new code's first line would be the quick file's: a whole-file suppression there
        (
            ['a = 1'],
            '# type: ignore\n1 + None',
            'warning[unused-type-ignore-comment]: Unused blanket `type: ignore` directive\n --> main.py:1:1\n  |\n'
            '1 | # type: ignore\n  | ^^^^^^^^^^^^^^\n2 | 1 + None\n  |\nhelp: Remove the unused suppression comment\n\n'
            'error[unsupported-operator]: Unsupported `+` operation\n --> main.py:2:1\n  |\n1 | # type: ignore\n'
            '2 | 1 + None\n  | -^^^----\n  | |   |\n  | |   Has type `None`\n  | Has type `Literal[1]`',
        ),
        # a kept snippet would come first, its suppression comment then silencing the whole file
        (['a = 1', '# type: ignore\nb = 1'], 'b + None', _UNSUPPORTED_B_PLUS_NONE),
        (['a = 1', '# ty: ignore[unsupported-operator]\nb = 1'], 'b + None', _UNSUPPORTED_B_PLUS_NONE),
        # a comment on a line of its own silences the next line: it would be the new code's
        (['b = 1\n# ty: ignore', 'z = 2'], 'b + None', _UNSUPPORTED_B_PLUS_NONE),
        # a __future__ import binds no name the code uses, and changes how `Later` is read
        (
            ['from __future__ import annotations', 'def f(c: Later) -> None: ...\nclass Later: ...'],
            'f(1)',
            'error[invalid-argument-type]: Argument to function `f` is incorrect\n --> main.py:1:3\n  |\n1 | f(1)\n'
            '  |   ^ Expected `Later`, found `Literal[1]`',
        ),
        # what a dropped snippet silences elsewhere makes the code's own comment unused
        (
            ['# ty: ignore[unresolved-reference]\nz = 1'],
            'print(c)  # type: ignore',
            'warning[unused-type-ignore-comment]: Unused blanket `type: ignore` directive\n --> main.py:1:11\n  |\n'
            '1 | print(c)  # type: ignore\n  |           ^^^^^^^^^^^^^^\nhelp: Remove the unused suppression comment',
        ),
        (
            ['from __future__ import annotations'],
            'def g(v: Later) -> None: ...  # type: ignore\nclass Later: ...',
            'warning[unused-type-ignore-comment]: Unused blanket `type: ignore` directive\n --> main.py:1:31\n  |\n'
            '1 | def g(v: Later) -> None: ...  # type: ignore\n  |                               ^^^^^^^^^^^^^^\n'
            '2 | class Later: ...\n  |\nhelp: Remove the unused suppression comment',
        ),
    ],
)
async def test_what_acts_by_its_place_in_the_file_gets_the_whole_file(warm, context, code, expected):
    """Suppression comments and __future__ imports act by where they stand, not by names: the
    quick check let each of these through (found by a differential fuzz against the full check)."""
    assert relevant_context(context, code) == context
    assert await warm.check(code, context=context) == expected


def test_what_the_caches_keep_of_long_scripts_is_bounded(monkeypatch):
    """Names of snippets, readings of strings and indexes of contexts are remembered across
    checks; a long script's are not, so past sessions' large scripts do not stay in memory."""
    monkeypatch.setattr(_context, '_KEPT_CHARACTERS', 20)
    _context._INDEXES.clear()
    short, long = 'kept = 1', 'not_kept = kept  # ' + 'x' * 1000
    remembered = len(_context._NAMES)
    assert relevant_context([short, long], 'not_kept') == [short, long]
    assert len(_context._NAMES) == remembered + 2  # `short` and the new code, not `long`
    assert list(_context._INDEXES) == []  # the context is over 50 x 20 characters
    relevant_context([short], 'not_kept')
    assert list(_context._INDEXES) == [(short,)]
    string = "'" + 'y' * 10_001 + "'"
    strings = _syntax._expression_names.cache_info().currsize
    assert relevant_context([short], f'kept = {string}') == [short]  # a string too long to read as a type
    assert _syntax._expression_names.cache_info().currsize == strings


async def test_what_the_quick_check_leaves_out_cannot_hide_an_error(warm):
    # Code after a call that never returns is unreachable, and ty reports nothing there. The
    # quick check leaves the call out (the new code does not depend on it) and finds the error;
    # the full check, with every earlier snippet, decides.
    stubs = 'from typing import NoReturn\ndef stop() -> NoReturn: ...\n'
    assert await warm.check('1 + "a"', context=['stop()'], stubs=stubs) is None
    assert (await warm.check('1 + "a"', context=['go = 1'], stubs=stubs)).startswith(
        'error[unsupported-operator]: Unsupported `+` operation\n --> main.py:1:1\n'
    )
