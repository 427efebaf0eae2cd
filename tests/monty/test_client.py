"""`corral-monty subprocess` behind Monty's own client (`pydantic_monty`), which spawns it as each
worker of its pool: what an application written for Monty gets on corral, unchanged."""

from __future__ import annotations

import asyncio
import inspect
import json
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pydantic_monty = pytest.importorskip('pydantic_monty')

SOURCE = Path(__file__).resolve().parents[2] / 'src'


@pytest.fixture(scope='module')
def binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An executable that runs this checkout's `corral-monty` (what MONTY_BIN names)."""
    path = tmp_path_factory.mktemp('bin') / 'corral-monty'
    path.write_text(f'#!/bin/sh\nPYTHONPATH={SOURCE} exec {sys.executable} -m corral.monty "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture(scope='module')
def monty(binary: Path) -> Iterator[pydantic_monty.Monty]:
    with pydantic_monty.Monty(binary_path=binary) as pool:
        yield pool


def test_a_feed_calls_the_applications_function_and_prints(monty: pydantic_monty.Monty) -> None:
    printed: list[tuple[str, str]] = []
    with monty.checkout(type_check=True, type_check_stubs='def double(x: int) -> int: ...') as session:
        value = session.feed_run(
            'x = 20\nprint("x is", x)\ndouble(x) + 2',
            external_lookup={'double': lambda x: x * 2},
            print_callback=lambda stream, text: printed.append((stream, text)),
        )
        assert value == 42
        assert printed == [('stdout', 'x is 20\n')]
        assert session.feed_run('x + 1') == 21  # the session keeps its variables


def test_values_cross_both_ways(monty: pydantic_monty.Monty) -> None:
    with monty.checkout() as session:
        value = session.feed_run('[a, {1: (2.5, b"x")}, None, 2**80, -2**70]', inputs={'a': {'k': [1, 2]}})
        assert value == [{'k': [1, 2]}, {1: (2.5, b'x')}, None, 2**80, -(2**70)]


def test_a_name_read_is_looked_up_as_a_value_or_a_function(monty: pydantic_monty.Monty) -> None:
    with monty.checkout() as session:
        assert session.feed_run('f = add\nf(LIMIT, 1)', external_lookup={'add': lambda a, b: a + b, 'LIMIT': 10}) == 11


def test_errors_a_model_reads(monty: pydantic_monty.Monty) -> None:
    with monty.checkout(type_check=True) as session:
        with pytest.raises(pydantic_monty.MontyTypingError) as typing_error:
            session.feed_run('y: int = "s"')
        assert str(typing_error.value) == (
            'error[invalid-assignment]: Object of type `Literal["s"]` is not assignable to `int`\n'
            ' --> main.py:1:10\n'
            '  |\n'
            '1 | y: int = "s"\n'
            '  |    ---   ^^^ Incompatible value of type `Literal["s"]`\n'
            '  |    |\n'
            '  |    Declared type\n'
            '\n'
        )
        with pytest.raises(pydantic_monty.MontyRuntimeError) as runtime_error:
            session.feed_run('1 / 0')
        assert repr(runtime_error.value) == 'MontyRuntimeError(ZeroDivisionError: division by zero)'
        with pytest.raises(pydantic_monty.MontyRuntimeError) as name_error:
            session.feed_run('undefined_function(1)', skip_type_check=True)
        assert repr(name_error.value) == "MontyRuntimeError(NameError: name 'undefined_function' is not defined)"


def test_a_traceback_marks_the_part_of_each_line_that_failed(monty: pydantic_monty.Monty) -> None:
    """The call, subscript or token CPython marks, as Monty's worker marks it, not the whole line."""

    def fail() -> None:
        raise ValueError('no')

    with monty.checkout() as session:
        with pytest.raises(pydantic_monty.MontyRuntimeError) as called:
            session.feed_run('def g():\n    return f() + 1\n\ng() is not None', external_lookup={'f': fail})
        with pytest.raises(pydantic_monty.MontyRuntimeError) as subscript:
            session.feed_run('d = {}\nd["k"] + 1')
        with pytest.raises(pydantic_monty.MontySyntaxError) as syntax:
            session.feed_run('def')
    assert called.value.display() == (
        'Traceback (most recent call last):\n'
        '  File "main.py", line 4, in <module>\n'
        '    g() is not None\n'
        '    ~~~\n'
        '  File "main.py", line 2, in g\n'
        '    return f() + 1\n'
        '           ~~~\n'
        'ValueError: no'
    )
    assert [(frame.line, frame.column, frame.end_column, frame.source_line) for frame in called.value.traceback()] == [
        (4, 1, 4, 'g() is not None'),
        (2, 8, 11, 'return f() + 1'),
    ]
    assert subscript.value.display().splitlines()[-3:] == ['    d["k"] + 1', '    ~~~~~~', "KeyError: 'k'"]
    assert syntax.value.display().splitlines()[-3:] == ['    def', '       ~', 'SyntaxError: invalid syntax']


def test_a_limit_reads_in_the_clients_words_then_corrals(monty: pydantic_monty.Monty) -> None:
    """Monty's clients tell a limit by its words (pydantic-ai-harness's Code Mode then lists the tool
    calls a snippet had started, so the model does not run them twice). The session outlives both."""
    with monty.checkout(limits={'max_feed_duration_secs': 1, 'max_memory': 256 * 1024 * 1024}) as session:
        session.feed_run('kept = 5')
        with pytest.raises(pydantic_monty.MontyRuntimeError) as big:
            session.feed_run('x = "a" * 10**10')
        with pytest.raises(pydantic_monty.MontyRuntimeError) as slow:
            session.feed_run('while True:\n    pass')
        assert session.feed_run('kept') == 5
    assert big.value.display('type-msg') == 'MemoryError: memory limit exceeded: the script went past the memory limit of 268435456 bytes'
    assert slow.value.display('type-msg') == 'TimeoutError: feed time limit exceeded: the script ran past the wall_time limit of 1 second'


def test_a_builtins_loop_past_its_budget_is_killed_before_the_client_kills_the_child(monty: pydantic_monty.Monty) -> None:
    """A loop inside one builtin ignores the stop; its worker is killed `grace` after the budget,
    0.5 s in a door's session: before pydantic_monty's parent kills the child, 1 s past it."""
    for code in ('sum(range(10**18))', 'min(range(10**18))'):
        with monty.checkout(limits={'max_feed_duration_secs': 0.1}) as session:
            with pytest.raises(pydantic_monty.MontyRuntimeError) as slow:
                session.feed_run(code)
        assert slow.value.display('type-msg') == (
            'TimeoutError: feed time limit exceeded: the script ran past the wall_time limit of 0.1 seconds and was killed'
        )


TWO_ERRORS = 'x: int = "a"\ny: str = 1'


@pytest.mark.parametrize(
    'fmt,expected',
    [
        (
            'concise',
            'main.py:1:10: error[invalid-assignment] Object of type `Literal["a"]` is not assignable to `int`\n'
            'main.py:2:10: error[invalid-assignment] Object of type `Literal[1]` is not assignable to `str`\n',
        ),
        (
            'pylint',
            'main.py:1: [invalid-assignment] Object of type `Literal["a"]` is not assignable to `int`\n'
            'main.py:2: [invalid-assignment] Object of type `Literal[1]` is not assignable to `str`\n',
        ),
        (
            'github',
            '::error title=ty (invalid-assignment),file=main.py,line=1,col=10::main.py:1:10: invalid-assignment: '
            'Object of type `Literal["a"]` is not assignable to `int`\n'
            '::error title=ty (invalid-assignment),file=main.py,line=2,col=10::main.py:2:10: invalid-assignment: '
            'Object of type `Literal[1]` is not assignable to `str`\n',
        ),
        (
            'azure',
            '##vso[task.logissue type=error;sourcepath=main.py;linenumber=1;columnnumber=10;code=invalid-assignment;]'
            'Object of type `Literal["a"]` is not assignable to `int`\n'
            '##vso[task.logissue type=error;sourcepath=main.py;linenumber=2;columnnumber=10;code=invalid-assignment;]'
            'Object of type `Literal[1]` is not assignable to `str`\n',
        ),
    ],
)
def test_type_errors_in_the_format_the_checkout_names(monty: pydantic_monty.Monty, fmt: str, expected: str) -> None:
    with monty.checkout(type_check=True, type_check_format=fmt) as session:
        with pytest.raises(pydantic_monty.MontyTypingError) as typing_error:
            session.feed_run(TWO_ERRORS)
        assert str(typing_error.value) == expected
        assert session.feed_run('1 + 1') == 2  # the session goes on


def test_type_errors_in_tys_own_one_line_wording(monty: pydantic_monty.Monty) -> None:
    code = 'def f(x: str) -> int:\n    return 1\n"hello" + 1\nf(2)'
    operator = 'Operator `+` is not supported between objects of type `Literal["hello"]` and `Literal[1]`'
    argument = 'Argument to function `f` is incorrect: Expected `str`, found `Literal[2]`'
    with monty.checkout(type_check=True, type_check_format='concise') as session:
        with pytest.raises(pydantic_monty.MontyTypingError) as typing_error:
            session.feed_run(code)
        assert str(typing_error.value) == (
            f'main.py:3:1: error[unsupported-operator] {operator}\nmain.py:4:3: error[invalid-argument-type] {argument}\n'
        )
    with monty.checkout(type_check=True, type_check_format='pylint') as session:
        with pytest.raises(pydantic_monty.MontyTypingError) as typing_error:
            session.feed_run(code)
        assert str(typing_error.value) == f'main.py:3: [unsupported-operator] {operator}\nmain.py:4: [invalid-argument-type] {argument}\n'


def test_type_errors_as_records(monty: pydantic_monty.Monty) -> None:
    first = {
        'code': 'invalid-assignment',
        'name': 'invalid-assignment',
        'severity': 'error',
        'message': 'Object of type `Literal["a"]` is not assignable to `int`',
        'filename': 'main.py',
        'location': {'column': 10, 'row': 1},
    }
    second = {**first, 'message': 'Object of type `Literal[1]` is not assignable to `str`', 'location': {'column': 10, 'row': 2}}
    with monty.checkout(type_check=True, type_check_format='json') as session:
        with pytest.raises(pydantic_monty.MontyTypingError) as typing_error:
            session.feed_run(TWO_ERRORS)
        assert json.loads(str(typing_error.value)) == [first, second]
    with monty.checkout(type_check=True, type_check_format='jsonlines') as session:
        with pytest.raises(pydantic_monty.MontyTypingError) as typing_error:
            session.feed_run(TWO_ERRORS)
        assert [json.loads(line) for line in str(typing_error.value).splitlines()] == [first, second]
    with monty.checkout(type_check=True, type_check_format='gitlab') as session:
        with pytest.raises(pydantic_monty.MontyTypingError) as typing_error:
            session.feed_run('x: int = "a"')
        assert json.loads(str(typing_error.value)) == [
            {
                'check_name': 'invalid-assignment',
                'description': 'invalid-assignment: Object of type `Literal["a"]` is not assignable to `int`',
                'severity': 'major',
                'location': {'path': 'main.py', 'positions': {'begin': {'line': 1, 'column': 10}}},
            }
        ]
    with monty.checkout(type_check=True, type_check_format='rdjson') as session:
        with pytest.raises(pydantic_monty.MontyTypingError) as typing_error:
            session.feed_run('x: int = "a"')
        assert json.loads(str(typing_error.value)) == {
            'source': {'name': 'ty', 'url': 'https://docs.astral.sh/ty'},
            'severity': 'ERROR',
            'diagnostics': [
                {
                    'message': 'Object of type `Literal["a"]` is not assignable to `int`',
                    'severity': 'ERROR',
                    'code': {'value': 'invalid-assignment'},
                    'location': {'path': 'main.py', 'range': {'start': {'line': 1, 'column': 10}}},
                }
            ],
        }


def test_type_errors_in_colour(monty: pydantic_monty.Monty) -> None:
    with monty.checkout(type_check=True, type_check_format='concise', type_check_color=True) as session:
        with pytest.raises(pydantic_monty.MontyTypingError) as typing_error:
            session.feed_run('x: int = "a"')
        assert str(typing_error.value) == (
            '\x1b[1mmain.py\x1b[0m\x1b[36m:\x1b[0m1\x1b[36m:\x1b[0m10\x1b[36m:\x1b[0m '
            '\x1b[1m\x1b[31merror\x1b[0m[\x1b[1minvalid-assignment\x1b[0m] '
            'Object of type `Literal["a"]` is not assignable to `int`\n'
        )
    with monty.checkout(type_check=True, type_check_color=True) as session:
        with pytest.raises(pydantic_monty.MontyTypingError) as typing_error:
            session.feed_run('x: int = "a"')
        assert str(typing_error.value).splitlines()[:2] == [
            '\x1b[1m\x1b[31merror[invalid-assignment]\x1b[0m\x1b[1m: Object of type `Literal["a"]` is not assignable to `int`\x1b[0m',
            ' --> main.py:1:10',
        ]


def test_a_scripts_exception_arrives_as_its_own_class_with_its_fields(monty: pydantic_monty.Monty) -> None:
    import binascii
    import csv
    import decimal
    import io

    with monty.checkout() as session:
        with pytest.raises(pydantic_monty.MontyRuntimeError) as info:
            session.feed_run("'café'.encode('ascii')")
        inner = info.value.exception()
        assert type(inner) is UnicodeEncodeError
        assert (inner.encoding, inner.object, inner.start, inner.end, inner.reason) == ('ascii', 'café', 3, 4, 'ordinal not in range(128)')
        with pytest.raises(pydantic_monty.MontyRuntimeError) as info:
            session.feed_run("import json\njson.loads('[1,\\n2,]')")
        inner = info.value.exception()
        with pytest.raises(json.JSONDecodeError) as local:  # the script runs on this CPython, whose json words the error
            json.loads('[1,\n2,]')
        assert type(inner) is json.JSONDecodeError
        assert (str(inner), inner.doc, inner.pos, inner.lineno, inner.colno) == (str(local.value), '[1,\n2,]', local.value.pos, 2, local.value.colno)
        with pytest.raises(pydantic_monty.MontyRuntimeError) as info:
            session.feed_run("json.loads('[' + '1,\\n' * 30000 + 'x')")
        inner = info.value.exception()
        assert type(inner) is json.JSONDecodeError
        assert (inner.doc, inner.pos, inner.lineno, inner.colno) == ('', 90001, 30001, 1)  # too large to carry
        for code, cls, message in [
            ("import base64\nbase64.b64decode(b'YWJ')", binascii.Error, 'Incorrect padding'),
            ('import csv\nlist(csv.reader([1]))', csv.Error, 'iterator should return strings, not int (the file should be opened in text mode)'),
            ('import io\nio.StringIO().fileno()', io.UnsupportedOperation, 'fileno'),
            ('import decimal\ndecimal.Decimal(1) / 0', decimal.DivisionByZero, "[<class 'decimal.DivisionByZero'>]"),
        ]:
            with pytest.raises(pydantic_monty.MontyRuntimeError) as info:
                session.feed_run(code)
            inner = info.value.exception()
            assert (type(inner), str(inner)) == (cls, message)
        with pytest.raises(pydantic_monty.MontyRuntimeError) as info:
            session.feed_run("'a\\ud800'.encode('utf-8')")  # a lone surrogate crosses as its escape, the fields stay behind
        assert repr(info.value.exception()) == 'ValueError("\'utf-8\' codec can\'t encode character \'\\\\ud800\' in position 1: surrogates not allowed")'
        assert session.feed_run('1 + 1') == 2


def test_a_parents_stdlib_exception_reaches_the_script_as_its_class(monty: pydantic_monty.Monty) -> None:
    import io

    def unsupported() -> None:
        raise io.UnsupportedOperation('not readable')

    def decode() -> None:
        raise json.JSONDecodeError('Expecting value', '[1,\n2,]', 6)

    with monty.checkout() as session:
        code = 'import io\ntry:\n    fail()\nexcept io.UnsupportedOperation as e:\n    r = (isinstance(e, OSError), isinstance(e, ValueError), str(e))\nr'
        assert session.feed_run(code, external_lookup={'fail': unsupported}) == (True, True, 'not readable')
        with pytest.raises(pydantic_monty.MontyRuntimeError) as info:
            session.feed_run('import json\ntry:\n    fail()\nexcept json.JSONDecodeError as e:\n    raise e', external_lookup={'fail': decode})
        inner = info.value.exception()
        assert type(inner) is json.JSONDecodeError
        assert (str(inner), inner.doc, inner.pos) == ('Expecting value: line 2 column 3 (char 6)', '[1,\n2,]', 6)


def test_a_lone_surrogate_the_parent_cannot_send_is_a_value_error_the_script_catches(monty: pydantic_monty.Monty) -> None:
    code = 'try:\n    get_str()\n    result = "no error"\nexcept ValueError as e:\n    result = (type(e).__name__, str(e))\nresult'
    with monty.checkout() as session:
        assert session.feed_run(code, external_lookup={'get_str': lambda: '\ud83d'}) == (
            'ValueError',
            "'utf-8' codec can't encode character '\\ud83d' in position 0: surrogates not allowed",
        )


def test_a_parents_module_that_fails_to_load_fails_the_import_and_the_child_goes_on(monty: pydantic_monty.Monty) -> None:
    def broken() -> pydantic_monty.ExternalModule:
        return {}['missing']

    def wrong() -> int:
        return 3

    with monty.checkout(external_modules={'tools': broken, 'other': wrong}) as session:
        with pytest.raises(pydantic_monty.MontyRuntimeError) as info:
            session.feed_run('import tools')
        assert str(info.value) == "KeyError: 'missing'"
        with pytest.raises(pydantic_monty.MontyRuntimeError) as info:
            session.feed_run('import other')
        assert str(info.value) == "TypeError: external_modules['other']() returned int, not an ExternalModule"
        assert session.feed_run('1 + 1') == 2


def test_a_parents_module_is_asked_for_at_each_feed_that_imports_it(monty: pydantic_monty.Monty) -> None:
    modules = {'tools': pydantic_monty.ExternalModule({'VERSION': 1})}
    with monty.checkout(external_modules=modules) as session:
        assert session.feed_run('import tools\ntools.VERSION') == 1
        modules['tools'] = pydantic_monty.ExternalModule({'VERSION': 2})
        assert session.feed_run('import tools\ntools.VERSION') == 2
        assert session.feed_run('tools.VERSION') == 2


def test_a_parents_error_making_stubs_fails_the_feed_and_the_child_goes_on(binary: Path) -> None:
    """The stubs of every module a feed imports are asked at once, in the order the code names
    them; the parent's error making one is the feed's error (the child survived no such answer)."""
    made: list[object] = []

    async def make_tools() -> pydantic_monty.ExternalModule:
        return pydantic_monty.ExternalModule({'VERSION': 1}, stubs='VERSION: int\n')

    def tools() -> object:
        made.append(make_tools())
        return made[-1]

    def other() -> object:
        raise ValueError('no other')

    async def main() -> object:
        async with pydantic_monty.AsyncMonty(binary_path=binary) as pool:
            async with pool.checkout(type_check=True, external_modules={'tools': tools, 'other': other}) as session:
                with pytest.raises(pydantic_monty.MontyRuntimeError) as info:
                    await session.feed_run('import tools, other')
                assert str(info.value) == 'ValueError: no other'
                return await session.feed_run('1 + 1')

    assert asyncio.run(main()) == 2
    assert [inspect.getcoroutinestate(coroutine) for coroutine in made] == ['CORO_CLOSED']


def test_a_parents_module_functions_the_script_awaits_run_concurrently(binary: Path) -> None:
    async def main() -> object:
        ready = asyncio.Event()

        async def first() -> int:
            await ready.wait()
            return 1

        async def second() -> int:
            ready.set()
            return 2

        modules = {'tools': pydantic_monty.ExternalModule({'first': first, 'second': second})}
        code = 'import asyncio\nimport tools\nfrom tools import second\nawait asyncio.gather(tools.first(), second())'
        async with pydantic_monty.AsyncMonty(binary_path=binary) as pool:
            async with pool.checkout(external_modules=modules) as session:
                return await asyncio.wait_for(session.feed_run(code), 10)

    assert asyncio.run(main()) == [1, 2]


@pytest.mark.parametrize(
    ('name', 'expected'),
    [
        ('tools._secret', "NameError: name 'tools._secret' is not defined"),  # not exposed by the module
        ('a.' * 5000 + 'f', f"NameError: name '{'a.' * 5000}f' is not defined"),
        ('1tools.f', 'ValueError: module name "1tools" is not a valid identifier'),
        ('json.f', 'ValueError: module "json" is provided by the sandbox or its type checker and cannot be replaced'),
    ],
)
def test_a_function_given_as_a_value_is_called_by_its_own_name(monty: pydantic_monty.Monty, name: str, expected: str) -> None:
    """A forged dotted name reaches the parent as it is, which matches it against its modules."""

    def probe() -> str:
        return 'hidden'

    probe.__name__ = name
    top = name.partition('.')[0]
    modules = {'tools': pydantic_monty.ExternalModule({'_secret': lambda: 'hidden'}), top: pydantic_monty.ExternalModule({})}
    with monty.checkout(external_modules=modules) as session:
        with pytest.raises(pydantic_monty.MontyRuntimeError) as info:
            session.feed_run('import tools\nprobe()' if top == 'tools' else 'probe()', inputs={'probe': probe})
        assert str(info.value) == expected

    def double(x: int) -> int:
        return 2 * x

    with monty.checkout() as session:  # the parent answers a call of its function by that function's name
        assert session.feed_run('[f(3), f(x=4)]', inputs={'f': double}, external_lookup={'double': double}) == [6, 8]
        with pytest.raises(pydantic_monty.MontyRuntimeError) as info:
            session.feed_run('f(1)', inputs={'f': double})
        assert str(info.value) == "NameError: name 'double' is not defined"


def test_sleeps_are_the_parents_to_wait_count_and_cap(monty: pydantic_monty.Monty) -> None:
    """System sleeps are waited by the parent, which counts them toward `max_total_sleep_secs` and
    ends the feed past it, where the script cannot catch it; `call_host` sleeps are its handler's."""
    code = 'import time\ntry:\n    time.sleep(0.125)\n    time.sleep(0.5)\nexcept BaseException:\n    pass'
    with monty.checkout(limits={'max_total_sleep_secs': 0.25}) as session:
        with pytest.raises(pydantic_monty.MontyRuntimeError) as info:
            session.feed_run(code)
        assert str(info.value) == 'TimeoutError: sleep limit exceeded: 625ms > 250ms'
    waited: list[float] = []

    class Recording(pydantic_monty.OSAccess):
        def sleep(self, seconds: float) -> None:
            waited.append(seconds)
            super().sleep(seconds)

    start = time.monotonic()
    with monty.checkout(os_policy={'sleep': 'call_host'}) as session:
        assert session.feed_run('import time\ntime.sleep(3600) is None', os=Recording(max_sleep=0.001)) is True
    assert waited == [3600.0]
    assert time.monotonic() - start < 5


def test_a_function_an_earlier_feed_defined_calls_the_applications_function(monty: pydantic_monty.Monty) -> None:
    fetched: list[str] = []

    def fetch(url: str) -> str:
        fetched.append(url)
        if len(fetched) < 2:
            raise ValueError('temporary failure')
        return f'content of {url}'

    helper = 'def fetch_with_retry(url):\n    for _ in range(3):\n        try:\n            return fetch(url)\n        except ValueError:\n            pass\n'
    with monty.checkout() as session:
        assert session.feed_run(helper, external_lookup={'fetch': fetch}) is None
        assert session.feed_run("fetch_with_retry('a.com')", external_lookup={'fetch': fetch}) == 'content of a.com'
        assert fetched == ['a.com', 'a.com']
        # a name the script defines itself later is its own, not the application's
        assert session.feed_run('def fetch(url):\n    return "own"\nfetch_with_retry("b.com")', external_lookup={'fetch': fetch}) == 'own'
        assert fetched == ['a.com', 'a.com']


def test_gathered_async_calls(binary: Path) -> None:
    async def add_one(x: int) -> int:
        await asyncio.sleep(0.01)
        return x + 1

    async def main() -> object:
        async with pydantic_monty.AsyncMonty(binary_path=binary) as pool:
            async with pool.checkout() as session:
                return await session.feed_run('import asyncio\nawait asyncio.gather(add_one(1), add_one(2))', external_lookup={'add_one': add_one})

    assert asyncio.run(main()) == [2, 3]


def test_a_call_awaited_right_there_is_one_suspension(binary: Path) -> None:
    """The parent may await an eager call and answer it at once (ResumeFutures for its id), so two
    awaited calls fit a budget of two suspensions; gathered calls stay concurrent."""

    async def fetch() -> list[int]:
        return [21]

    async def main() -> object:
        async with pydantic_monty.AsyncMonty(binary_path=binary) as pool:
            async with pool.checkout(limits={'max_suspensions': 2}) as session:
                return await session.feed_run('a = await fetch()\nb = await fetch()\na[0] + b[0]', external_lookup={'fetch': fetch})

    assert asyncio.run(main()) == 42


def test_environment_and_files_are_the_applications(monty: pydantic_monty.Monty, tmp_path: Path) -> None:
    (tmp_path / 'notes.txt').write_text('hello')
    with monty.checkout() as session:
        mount = pydantic_monty.MountDir(host_path=str(tmp_path), virtual_path='/data', mode='read-write')
        code = 'from pathlib import Path\nPath("/data/out.txt").write_text(Path("/data/notes.txt").read_text().upper())\nsorted(p.name for p in Path("/data").iterdir())'
        assert session.feed_run(code, mount=mount) == ['notes.txt', 'out.txt']
    assert (tmp_path / 'out.txt').read_text() == 'HELLO'


def test_a_host_functions_stop_iteration_reaches_the_script_as_itself(monty: pydantic_monty.Monty) -> None:
    """The parent answers a sync call while the event loop goes on (an awaitable the session awaits):
    a StopIteration it raises stays a StopIteration, not PEP 479's RuntimeError."""

    def exhausted() -> None:
        raise StopIteration('no more')

    with monty.checkout() as session:
        code = 'try:\n    exhausted()\nexcept StopIteration as e:\n    caught = repr(e)\ncaught'
        assert session.feed_run(code, external_lookup={'exhausted': exhausted}) == "StopIteration('no more')"
