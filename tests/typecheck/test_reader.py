"""Reading scripts' syntax off the event loop: a long script is read in a child process, and its
check says exactly what it says when the script is read on the event loop."""

import asyncio
import contextlib
import re
import signal

import pytest

from corral import SandboxCheckerError
from corral.typecheck import TypeChecker
from corral.typecheck import _context, _syntax
from corral.typecheck._reader import SyntaxReader

STUBS = 'async def fetch(n: int) -> int: ...\n'

#: Nesting too deep for the parser, a NUL byte, a lone surrogate: no syntax tree.
UNPARSABLE = ['f' + '(1)' * 200_000, '(' * 300 + ')' * 300, 'x = 1\0', 'x = "\udc80"']

LONG = ''.join(f'total_{i} = await fetch({i}) + {i}\n' for i in range(300))  # some 9,000 characters

SCRIPTS = [
    'await fetch(1)',
    'def f():\n    return await fetch(1)\nawait fetch(2)',  # an await in a def is an error, at the top level not
    'import subprocess\nfrom json import decoder\nfrom os import system\nsubprocess.run(["ls"])',
    'x: "Undefined" = 1\nfetch("a")',
    'x = (1,\nawait fetch(1)\n',
    LONG + 'total_299 + "a"\nimport subprocess\ndef g():\n    await fetch(3)\n',
    LONG + '@decorator\nclass K:\n    async def m(self):\n        return [await fetch(i) async for i in self]\n',
    *UNPARSABLE,
]


@pytest.fixture
async def checkers():
    """Two checkers: one reads every script on the event loop, the other every script in a child."""
    inline, child = TypeChecker(), TypeChecker()
    inline._reader.inline_characters = 10**9
    child._reader.inline_characters = 0
    try:
        yield inline, child
    finally:
        await inline.aclose()
        await child.aclose()


async def _outcome(checker, code, context):
    try:
        return await checker.check(code, stubs=STUBS, context=context)
    except Exception as error:  # ty overflows its stack on some: the thread's number differs
        return type(error), re.sub(r"thread '<unknown>' \(\d+\)", 'thread', str(error))


@pytest.mark.parametrize('code', SCRIPTS, ids=range(len(SCRIPTS)))
async def test_a_script_read_in_a_child_gets_the_diagnostics_it_gets_read_inline(checkers, code):
    inline, child = checkers
    context = ['import math', 'value = math.pi', LONG]
    _context._INDEXES.clear()  # the context is read again by each checker
    expected = await _outcome(inline, code, context)
    _context._INDEXES.clear()
    assert await _outcome(child, code, context) == expected
    assert len(child._reader._idle) == 1 and not inline._reader._idle  # the child read it, not the event loop


async def test_the_syntax_read_in_a_child_is_the_syntax_read_inline():
    texts = [
        *UNPARSABLE,
        LONG,
        'import numpy as np, os.path\nfrom pandas import read_csv as rc\nnp.load("f"); rc.x; other.y',
        'héllo = "wörld: List[Ünïcode]"\ncast("list[\'T\']", héllo)',
        'x = "' + 'y' * 10_001 + '"',  # a string too long to read as a type: no names
        '@d\n@e\ndef f(a, *b, **c):\n    global g\n    lambda q: q\nx = 1; y = 2\nmatch x:\n    case {"k": 1, **rest}: pass',
        '',
    ]
    reader = SyntaxReader()
    reader.inline_characters = 0
    try:
        assert await reader.read(texts) == [_syntax.read(text) for text in texts]
        assert [syntax is None for syntax in await reader.read(UNPARSABLE)] == [True] * 4
    finally:
        await reader.aclose()


async def test_the_part_of_a_failed_script_that_ran_is_the_same_read_in_a_child(checkers):
    code = LONG + 'for i in range(3):\n    y = i\n    1 / 0\nz = 2; 1 / z\n@d\ndef f(): pass\n'
    inline, child = checkers
    ran = {
        301: LONG + 'for i in range(3):\n    y = i\n    1 / 0\n',  # a compound statement: what ran of it too
        304: LONG + 'for i in range(3):\n    y = i\n    1 / 0\n',  # `z = 2` is the first statement of its line
        306: code[: -len('@d\ndef f(): pass\n')],  # from its decorator
        None: '',
        9999: '',
    }
    for line, expected in ran.items():
        assert await inline.ran_part(code, line) == expected
        assert await child.ran_part(code, line) == expected
    assert await child.ran_part(UNPARSABLE[0], 1) == ''


async def _running_child(reader: SyntaxReader, task: asyncio.Task):
    while not reader._running:
        assert not task.done()
        await asyncio.sleep(0.001)
    return next(iter(reader._running))


async def test_a_child_that_dies_fails_its_read_with_a_clear_error_and_the_next_read_works():
    reader = SyntaxReader()
    reader.inline_characters = 0
    try:
        read = asyncio.create_task(reader.read([LONG * 50]))
        (await _running_child(reader, read)).proc.send_signal(signal.SIGKILL)
        with pytest.raises(RuntimeError) as error:
            await read
        assert str(error.value) == 'the reader of scripts stopped (exit code -9)'
        assert await reader.read(['x = 1']) == [_syntax.read('x = 1')]
    finally:
        await reader.aclose()


async def test_a_child_that_ended_while_it_waited_is_not_given_a_read():
    reader = SyntaxReader()
    reader.inline_characters = 0
    try:
        await reader.read(['x = 1'])
        [idle] = reader._idle
        idle.proc.send_signal(signal.SIGKILL)
        assert await idle.proc.wait() == -9
        assert await reader.read(['y = 2']) == [_syntax.read('y = 2')]
        assert reader._idle != [idle] and len(reader._idle) == 1
    finally:
        await reader.aclose()


async def test_a_check_whose_reader_dies_is_a_checker_error(checkers):
    _, child = checkers
    check = asyncio.create_task(child.check(LONG * 50, stubs=STUBS))
    (await _running_child(child._reader, check)).proc.send_signal(signal.SIGKILL)
    with pytest.raises(SandboxCheckerError) as error:
        await check
    assert str(error.value) == 'the type checker could not check the script, so it did not run: the reader of scripts stopped (exit code -9)'
    assert await child.check('await fetch(1)', stubs=STUBS) is None


async def test_a_cancelled_read_stops_its_child():
    reader = SyntaxReader()
    reader.inline_characters = 0
    try:
        read = asyncio.create_task(reader.read([LONG * 50]))
        running = await _running_child(reader, read)
        read.cancel()
        with pytest.raises(asyncio.CancelledError):
            await read
        assert await running.proc.wait() == -9
        assert reader._idle == []  # not kept: a new child reads the next text
        assert await reader.read([LONG]) == [_syntax.read(LONG)]
        assert reader._idle[0] is not running
    finally:
        await reader.aclose()


async def test_a_read_past_its_time_limit_is_stopped():
    reader = SyntaxReader()
    reader.inline_characters, reader.time_limit = 0, 0
    try:
        with pytest.raises(RuntimeError) as error:
            await reader.read([LONG])
        assert str(error.value) == 'the reader of scripts took longer than 0 seconds and was stopped'
        assert reader._idle == []
    finally:
        await reader.aclose()


async def test_closing_the_reader_ends_its_children():
    reader = SyntaxReader()
    reader.inline_characters = 0
    await reader.read([LONG])
    [child] = reader._idle
    await reader.aclose()
    assert child.proc.returncode == 0  # it exited at the end of its input
    with pytest.raises(RuntimeError) as error:
        await reader.read([LONG + '\n'])
    assert str(error.value) == 'the reader of scripts is closed'


async def test_what_the_reader_keeps_is_the_syntax_of_its_last_long_texts():
    reader = SyntaxReader()
    try:
        texts = [LONG + f'last = {n}\n' for n in range(6)]
        for text in texts:
            await reader.read([text, 'short = 1'])
        assert list(reader._kept) == texts[-SyntaxReader.kept :]
        assert reader._kept[texts[-1]] == _syntax.read(texts[-1])
    finally:
        await reader.aclose()


async def test_a_long_scripts_syntax_comes_from_the_child_in_messages_of_a_few_hundred_items():
    """The child's answer for a script of 1,200 statements, names, members and an import of 700
    names was one JSON, decoded in one go on the event loop (some 80 ms for 12,000 statements);
    each message now holds at most `CHUNK` items, and they add up to the `Syntax` read inline."""
    texts = [
        'from m import (' + ', '.join(f'a{i} as b{i}' for i in range(700)) + ')\nimport os, sys\nfrom k import ' + ', '.join(f'c{i}' for i in range(300)),
        '\n'.join(f'n{i} = m{i}' for i in range(1200)),
        'import os\n' + '\n'.join(f'os.a{i}' for i in range(1400)),
        "x: 'A' = 1\nfrom q import *\n" + 'def f():\n    lambda: 1\n' * 300,
        'x = (',
    ]
    messages = [_syntax.encode(_syntax.read(text)) for text in texts]
    assert [len(each) for each in messages] == [10, 16, 15, 9, 1]
    assert max(len(items) if part != 5 else len(items[1]) for each in messages for part, items in each[:-1]) == _syntax.CHUNK == 256
    async with contextlib.aclosing(SyntaxReader()) as reader:
        reader.inline_characters = 0
        assert await reader.read(texts) == [_syntax.read(text) for text in texts]
        assert (await reader.read(texts[-1:]), len(reader._idle)) == ([None], 1)


async def test_a_read_in_a_child_reports_the_cpu_it_took():
    """A long script's syntax is read in a child process, whose CPU counts toward the session's checks."""
    reader = SyntaxReader()
    try:
        long = ''.join(f'value_{i} = [str(x) for x in range({i})]\n' for i in range(3000))
        used: list[float] = []
        assert len(await reader.read(['x = 1'], used.append)) == 1 and used == []  # read inline: no child
        [syntax] = await reader.read([long], used.append)
        assert syntax is not None and len(used) == 1 and used[0] > 0
    finally:
        await reader.aclose()
