"""The sandbox core: feeds, state, host functions, values, errors, workers."""

import asyncio
import dataclasses
import datetime
import decimal
import enum
import pathlib
import uuid
import os
import signal
import sys

import pydantic
import pytest

import corral


async def test_last_expression_is_the_result(session):
    assert await session.feed_run('1 + 1') == 2
    assert await session.feed_run('x = 1') is None
    assert await session.feed_run('') is None
    assert await session.feed_run('x = 3\nx * 2\n') == 6


async def test_state_persists_across_feeds_and_not_across_checkouts(pool):
    async with pool.checkout() as session:
        await session.feed_run('import math\ncount = 2\ndef double(n):\n    return n * count\nclass Box:\n    size = 4\n')
        assert await session.feed_run('double(math.floor(2.5)) + Box().size') == 8
    async with pool.checkout() as session:
        with pytest.raises(corral.SandboxRuntimeError) as info:
            await session.feed_run('count')
        assert info.value.display() == (
            'Traceback (most recent call last):\n'
            '  File "main.py", line 1, in <module>\n'
            '    count\n'
            "NameError: name 'count' is not defined"
            # 3.12 and later look among the sandbox's builtins for a name like it, as CPython does everywhere
            + (". Did you mean: 'round'?" if sys.version_info >= (3, 12) else '')
        )


async def test_sync_and_async_host_functions_with_keyword_arguments(session):
    def add(a, b=0, *, scale=1):
        return (a + b) * scale

    async def fetch(key, *, default=None):
        await asyncio.sleep(0)
        return {'key': key, 'default': default}

    code = 'r = add(1, b=2, scale=10)\nf = await fetch("k", default=[1])\n(r, f)'
    assert await session.feed_run(code, external_lookup={'add': add, 'fetch': fetch}) == (30, {'key': 'k', 'default': [1]})


async def test_dict_views_and_iterators_reach_host_functions_as_lists(session):
    received = []

    def save(*args, **kwargs):
        received.append((args, kwargs))
        return len(args)

    async def asave(*args, **kwargs):
        received.append((args, kwargs))
        return {'a': 1}.items()

    code = (
        "d = {'a': 1, 'b': 2}\n"
        "save(d.keys(), d.values(), d.items(), (x * 2 for x in range(3)), m=map(str, [1, 2]), z=zip('ab', d.values()))\n"
        "(await asave([d.items()], rows=enumerate('xy')), d.keys())"
    )
    assert await session.feed_run(code, external_lookup={'save': save, 'asave': asave}) == ([('a', 1)], ['a', 'b'])
    assert received == [
        ((['a', 'b'], [1, 2], [('a', 1), ('b', 2)], [0, 2, 4]), {'m': ['1', '2'], 'z': [('a', 1), ('b', 2)]}),
        (([[('a', 1), ('b', 2)]],), {'rows': [(0, 'x'), (1, 'y')]}),
    ]
    # a generator runs once, in the script's frames; what it yields crosses by the usual rules
    code = "def rows():\n    yield 1\n    yield save\nsave(rows())"
    with pytest.raises(corral.SandboxRuntimeError) as info:
        await session.feed_run(code, external_lookup={'save': save})
    assert info.value.display().splitlines()[-1] == (
        "TypeError: save() cannot be called with these arguments: a value of type 'function' cannot cross the sandbox "
        'boundary; use None, bool, int, float, str, bytes, list, tuple, dict, set, frozenset, datetime, Decimal or UUID values'
    )
    code = "d = {}\nd['self'] = d\nsave(d.values())"
    with pytest.raises(corral.SandboxRuntimeError) as info:
        await session.feed_run(code, external_lookup={'save': save})
    assert info.value.display().splitlines()[-1] == 'TypeError: save() cannot be called with these arguments: the value contains a reference to itself'
    assert len(received) == 2


async def test_gathered_host_calls_run_concurrently(session):
    active = 0
    peak = 0

    async def slow(n):
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.05)
        active -= 1
        return n * 2

    code = 'import asyncio\nawait asyncio.gather(slow(1), slow(2), slow(3))'
    assert await session.feed_run(code, external_lookup={'slow': slow}) == [2, 4, 6]
    assert peak == 3


async def test_host_exception_arrives_as_the_same_builtin_type(session):
    def lookup(key):
        raise KeyError(key)

    code = 'try:\n    lookup("missing")\nexcept KeyError as e:\n    caught = e.args\ncaught'
    assert await session.feed_run(code, external_lookup={'lookup': lookup}) == ('missing',)


async def test_uncaught_host_exception_points_at_the_calling_line(session):
    async def get_order(order_id):
        raise ValueError(f'no order {order_id}')

    code = 'x = 1\norder = await get_order("o9")\n'
    with pytest.raises(corral.SandboxRuntimeError) as info:
        await session.feed_run(code, external_lookup={'get_order': get_order})
    assert info.value.display() == (
        'Traceback (most recent call last):\n'
        '  File "main.py", line 2, in <module>\n'
        '    order = await get_order("o9")\n'
        '            ^^^^^^^^^^^^^^^^^^^^^\n'
        'ValueError: no order o9'
    )
    assert (info.value.exc_type, info.value.message) == ('ValueError', 'no order o9')


async def test_host_exception_of_a_custom_class_maps_to_its_nearest_builtin(session):
    class NotFound(LookupError):
        pass

    def find():
        raise NotFound('gone')

    assert await session.feed_run('try:\n    find()\nexcept LookupError as e:\n    r = type(e).__name__, str(e)\nr', external_lookup={'find': find}) == ('LookupError', 'gone')


def _since_313(carets: str) -> str:
    """Carets 3.13 draws under a call that is its whole line (where 3.11 and 3.12 draw none)."""
    return carets if sys.version_info >= (3, 13) else ''


def _before_313(carets: str) -> str:
    """Carets 3.11 and 3.12 draw under the value of a `return` (where 3.13 draws none)."""
    return carets if sys.version_info < (3, 13) else ''


async def test_runtime_error_shows_only_the_scripts_frames(session):
    code = 'def inner(d):\n    return d["k"]\n\ndef outer():\n    return inner({})\n\nouter()\n'
    with pytest.raises(corral.SandboxRuntimeError) as info:
        await session.feed_run(code)
    assert info.value.display() == (
        'Traceback (most recent call last):\n'
        '  File "main.py", line 7, in <module>\n'
        '    outer()\n'
        + _since_313('    ~~~~~^^\n')
        + '  File "main.py", line 5, in outer\n'
        '    return inner({})\n'
        + _before_313('           ^^^^^^^^^\n')
        + '  File "main.py", line 2, in inner\n'
        '    return d["k"]\n'
        '           ~^^^^^\n'
        "KeyError: 'k'"
    )


@pytest.mark.parametrize('end', ['', '\n'], ids=['no trailing newline', 'trailing newline'])
async def test_carets_under_the_last_line_are_where_cpython_puts_them(session, end):
    # models send scripts without a trailing newline: the carets stay under the failing part
    with pytest.raises(corral.SandboxRuntimeError) as info:
        await session.feed_run('x = 0\nprint(1 / x)' + end)
    assert info.value.display() == (
        'Traceback (most recent call last):\n'
        '  File "main.py", line 2, in <module>\n'
        '    print(1 / x)\n'
        '          ~~^~~\n'
        'ZeroDivisionError: division by zero'
    )


async def test_functions_from_an_earlier_feed_show_their_own_lines(session):
    await session.feed_run('\n\ndef fail():\n    raise ValueError("deep")\n')
    with pytest.raises(corral.SandboxRuntimeError) as info:
        await session.feed_run('fail()')
    assert info.value.display() == (
        'Traceback (most recent call last):\n'
        '  File "main.py", line 1, in <module>\n'
        '    fail()\n'
        + _since_313('    ~~~~^^\n')
        + '  File "main.py", line 4, in fail\n'
        '    raise ValueError("deep")\n'
        'ValueError: deep'
    )


async def test_syntax_error_shows_the_line_and_a_caret(session):
    with pytest.raises(corral.SandboxSyntaxError) as info:
        await session.feed_run('x = 1\ny = (1,\n')
    assert info.value.display() == (
        '  File "main.py", line 2\n'
        '    y = (1,\n'
        '        ^\n'
        "SyntaxError: '(' was never closed"
    )


@pytest.mark.parametrize(
    ('code', 'display'),
    [
        ('x = "\ud800"', '  File "main.py", line 1\n    x = "\\ud800"\n         ^\n'),
        ('a = 1\n    é = "é\udcff" + 1', '  File "main.py", line 2\n    é = "é\\udcff" + 1\n          ^\n'),
        ('# \udfff', '  File "main.py", line 1\n    # \\udfff\n      ^\n'),
    ],
)
async def test_a_lone_surrogate_in_the_script_is_a_syntax_error_that_shows_its_escape(session, code, display):
    # A JSON string's "\ud800" escape decodes to a lone surrogate, which no UTF-8 source can hold.
    char = next(c for c in code if 0xD800 <= ord(c) <= 0xDFFF)
    with pytest.raises(corral.SandboxSyntaxError) as caught:
        await session.feed_run(code)
    assert caught.value.display() == display + (
        f"SyntaxError: the script holds a lone surrogate, U+{ord(char):04X}, which is not a character; "
        f"inside a string, write it as the escape '\\u{ord(char):04x}'"
    )
    assert await session.feed_run('1 + 1') == 2


async def test_script_name_names_the_file(pool):
    async with pool.checkout(script_name='agent.py') as session:
        with pytest.raises(corral.SandboxRuntimeError) as info:
            await session.feed_run('1 / 0')
    assert info.value.display().splitlines()[1] == '  File "agent.py", line 1, in <module>'


async def test_external_module_imported_both_ways(pool):
    def list_invoices(customer_id, status=None):
        return [{'id': 'in_1', 'customer_id': customer_id, 'status': status}]

    billing = corral.ExternalModule({'list_invoices': list_invoices, '_private': print})
    async with pool.checkout(external_modules={'billing': billing}) as session:
        assert await session.feed_run('from billing import list_invoices\nlist_invoices("c1")[0]["customer_id"]') == 'c1'
        assert await session.feed_run('import billing\nbilling.list_invoices("c2", status="open")[0]["status"]') == 'open'
        with pytest.raises(corral.SandboxRuntimeError) as info:
            await session.feed_run('from billing import _private')
        assert info.value.display().splitlines()[-1] == "ImportError: cannot import name '_private' from 'billing' (unknown location)"


async def test_external_module_values_and_a_module_added_between_feeds(pool):
    billing = corral.ExternalModule({'total': lambda xs: sum(xs)}, values={'CURRENCY': 'EUR', 'RATES': {'vat': 0.2}, '_secret': 1})
    async with pool.checkout() as session:
        with pytest.raises(corral.SandboxRuntimeError):
            await session.feed_run('import billing')
        session.add_external_module('billing', billing)
        assert await session.feed_run('import billing\nbilling.RATES["vat"] = 0.5\n[billing.CURRENCY, billing.total([1, 2])]') == ['EUR', 3]
        assert await session.feed_run('from billing import RATES\nRATES') == {'vat': 0.2}  # a fresh copy at each feed
        session.add_external_module('billing', corral.ExternalModule({}, values={'CURRENCY': 'USD'}))
        assert await session.feed_run('import billing\nbilling.CURRENCY') == 'USD'
    with pytest.raises(ValueError) as both:
        corral.ExternalModule({'f': print}, values={'f': 1})
    assert str(both.value) == "ExternalModule names ['f'] are both functions and values"


async def test_complex_numbers_and_ellipsis_cross_both_ways(session):
    class Complex(complex):
        pass

    code = 'c, sub, e = given()\n[c * 2, type(sub).__name__, sub, complex(-0.0, float("inf")), e is ..., ...]'
    value = await session.feed_run(code, external_lookup={'given': lambda: [1 + 2j, Complex(3, 4), ...]})
    assert value == [2 + 4j, 'complex', 3 + 4j, complex(-0.0, float('inf')), True, ...]
    assert str(value[3].real) == '-0.0'


async def test_unknown_import_is_a_clear_error(session):
    with pytest.raises(corral.SandboxRuntimeError) as info:
        await session.feed_run('from payments import charge')
    assert info.value.display() == (
        'Traceback (most recent call last):\n'
        '  File "main.py", line 1, in <module>\n'
        '    from payments import charge\n'
        "ModuleNotFoundError: No module named 'payments'\n"  # CPython's words, and the sandbox's in a note below them
        'A script may import: abc, asyncio, base64, bisect, calendar, '
        'collections, collections.abc, contextlib, copy, csv, dataclasses, datetime, decimal, difflib, email, email.utils, '
        'enum, fnmatch, fractions, functools, glob, graphlib, hashlib, heapq, html, io, itertools, json, logging, math, '
        'operator, os, os.path, pathlib, pprint, random, re, shlex, statistics, string, sys, textwrap, time, types, typing, '
        'unicodedata, urllib, urllib.parse, uuid, warnings, zoneinfo'
    )



async def test_an_import_error_a_script_catches_has_cpythons_words(session):
    # the sandbox's words are in a note, not the message a script's own code reads and matches on
    code = (
        'caught = []\n'
        'try:\n    import payments\nexcept ImportError as error:\n    caught.append((type(error).__name__, str(error), error.name))\n'
        'try:\n    from os import system\nexcept ImportError as error:\n    caught.append((type(error).__name__, str(error), error.name))\n'
        'try:\n    import json.decoder\nexcept ImportError as error:\n    caught.append((type(error).__name__, str(error), error.name))\n'
        'caught'
    )
    assert await session.feed_run(code) == [
        ('ModuleNotFoundError', "No module named 'payments'", 'payments'),
        ('ImportError', "cannot import name 'system' from 'os' (unknown location)", 'os'),
        ('ModuleNotFoundError', "No module named 'json.decoder'", 'json.decoder'),
    ]

VALUES = [
    None, True, False, 0, -7, 2**64, -(2**100), 1.5, float('inf'), 'text', 'ünï', b'\x00\xff',
    [1, [2]], (1, (2, 3)), {'a': 1, 2: 'b', (1, 2): None}, {1, 2}, frozenset({'x'}),
    datetime.datetime(2026, 1, 2, 3, 4, 5, 6), datetime.datetime(2026, 1, 2, tzinfo=datetime.timezone.utc),
    datetime.date(2026, 11, 29), datetime.time(12, 30), datetime.timedelta(days=1, seconds=2, microseconds=3),
    datetime.timezone(datetime.timedelta(hours=-5)),
    decimal.Decimal('1.10'), decimal.Decimal('-Infinity'), decimal.Decimal('-0E+3'), uuid.UUID('12345678-1234-5678-1234-567812345678'),
]


@pytest.mark.parametrize('value', VALUES, ids=repr)
async def test_values_cross_both_ways_unchanged(session, value):
    received = []

    def echo(v):
        received.append(v)
        return v

    result = await session.feed_run('v = echo(given())\n(v, type(v).__name__)', external_lookup={'echo': echo, 'given': lambda: value})
    assert result == (value, type(value).__name__)
    assert type(received[0]) is type(value) and received[0] == value


async def test_enum_members_cross_as_their_values_and_paths_as_paths(session):
    class Status(enum.Enum):
        SHIPPED = 'shipped'
        HELD = (1, 'held')

    received = []
    lookup = {
        'status': lambda: [Status.SHIPPED, Status.HELD, {Status.SHIPPED: pathlib.PurePosixPath('/srv/a.csv')}],
        'report': lambda: pathlib.Path('/srv/reports'),
        'windows': lambda: pathlib.PureWindowsPath('c:/x'),
        'send': received.append,
    }
    code = """
import enum, pathlib
class Level(enum.IntEnum):
    LOW = 1
class Kind(enum.Enum):
    A = 'a'
send([Level.LOW, Kind.A, pathlib.Path('/data/x.txt'), pathlib.PurePath('rel'), pathlib.PureWindowsPath('c:/y')])
r = report()
(status(), r, type(r).__name__, repr(r / 'q1.csv'), isinstance(r, pathlib.Path), windows())
"""
    assert await session.feed_run(code, external_lookup=lookup) == (
        ['shipped', (1, 'held'), {'shipped': pathlib.PurePosixPath('/srv/a.csv')}],
        pathlib.PurePosixPath('/srv/reports'), 'PosixPath', "PosixPath('/srv/reports/q1.csv')", True, 'c:\\x',
    )
    assert received == [[1, 'a', pathlib.PurePosixPath('/data/x.txt'), pathlib.PurePosixPath('rel'), 'c:\\y']]
    assert [type(v) for v in received[0]] == [int, str, pathlib.PurePosixPath, pathlib.PurePosixPath, str]
    # a path the host gives opens nothing by itself: file access is the mounts' (here none)
    with pytest.raises(corral.SandboxRuntimeError) as info:
        await session.feed_run("report().read_text()", external_lookup=lookup)
    assert str(info.value).splitlines()[-1] == (
        "PermissionError: [Errno 13] Permission denied (the host has not granted file access; "
        "the host grants it with checkout(mounts=[Mount(host_dir, sandbox_path)])): '/srv/reports'"
    )


async def test_dataclass_and_pydantic_results_arrive_as_dicts(session):
    @dataclasses.dataclass
    class Point:
        x: int
        y: int

    class User(pydantic.BaseModel):
        name: str
        tags: list[str]

    lookup = {'point': lambda: Point(1, 2), 'user': lambda: User(name='ann', tags=['a'])}
    assert await session.feed_run('(point(), user())', external_lookup=lookup) == ({'x': 1, 'y': 2}, {'name': 'ann', 'tags': ['a']})


async def test_a_host_result_that_cannot_cross_is_a_clear_error(session):
    class Connection:
        pass

    with pytest.raises(corral.SandboxRuntimeError) as info:
        await session.feed_run('conn = connect()', external_lookup={'connect': Connection})
    assert info.value.display().splitlines()[-1] == (
        "TypeError: connect() returned a value of type 'Connection' that cannot enter the sandbox: a value of type "
        "'Connection' cannot cross the sandbox boundary; use None, bool, int, float, str, bytes, list, tuple, dict, "
        'set, frozenset, datetime, Decimal or UUID values'
    )


async def test_a_host_callable_never_crosses(session):
    with pytest.raises(corral.SandboxRuntimeError) as info:
        await session.feed_run('f = leak()', external_lookup={'leak': lambda: print})
    assert "a value of type 'builtin_function_or_method' cannot cross" in info.value.display().splitlines()[-1]


async def test_a_script_argument_that_cannot_cross_is_a_clear_error(session):
    code = 'import re\nsend(re.compile("x"))\n'
    with pytest.raises(corral.SandboxRuntimeError) as info:
        await session.feed_run(code, external_lookup={'send': lambda v: None})
    assert info.value.display() == (
        'Traceback (most recent call last):\n'
        '  File "main.py", line 2, in <module>\n'
        '    send(re.compile("x"))\n'
        + _since_313('    ~~~~^^^^^^^^^^^^^^^^^\n')
        + "TypeError: send() cannot be called with these arguments: a value of type 'Pattern' cannot cross the sandbox "
        'boundary; use None, bool, int, float, str, bytes, list, tuple, dict, set, frozenset, datetime, Decimal or UUID values'
    )


async def test_a_result_that_cannot_leave_is_a_clear_error(session):
    with pytest.raises(corral.SandboxRuntimeError) as info:
        await session.feed_run('def f():\n    pass\nf')
    assert info.value.display() == (
        "TypeError: the value of the last expression cannot leave the sandbox: a value of type 'function' cannot "
        'cross the sandbox boundary; use None, bool, int, float, str, bytes, list, tuple, dict, set, frozenset, '
        'datetime, Decimal or UUID values'
    )


async def test_subclasses_leave_as_exact_builtin_types(session):
    received = []
    code = (
        'class Loud(str):\n'
        '    def __str__(self):\n'
        '        return "changed"\n'
        '    def __hash__(self):\n'
        '        return 1\n'
        'class D(dict):\n'
        '    def items(self):\n'
        '        return []\n'
        'send(Loud("plain"), D(a=1))\n'
        'Loud("result")'
    )
    result = await session.feed_run(code, external_lookup={'send': lambda *a: received.extend(a)})
    assert received == ['plain', {'a': 1}] and [type(v) for v in received] == [str, dict]
    assert result == 'result' and type(result) is str


async def test_printed_output_goes_to_the_callback_in_order(session):
    seen = []
    code = 'print("a", 1)\nnote("x")\nprint("b", end="")\n'
    await session.feed_run(code, external_lookup={'note': lambda s: seen.append(('call', s))}, print_callback=lambda stream, text: seen.append((stream, text)))
    assert seen == [('stdout', 'a 1\n'), ('call', 'x'), ('stdout', 'b')]


async def test_writes_to_sys_stderr_reach_the_callback_as_stderr(session):
    seen = []
    code = (
        'import sys, pprint\nprint("e", 1, file=sys.stderr)\nsys.stderr.write("w")\nsys.stderr.writelines(["x", "y"])\n'
        'print("o", file=sys.stdout)\nsys.stdout.write("s")\npprint.pprint([1])\nprint("p")'
    )
    await session.feed_run(code, print_callback=lambda stream, text: seen.append((stream, text)))
    assert seen == [
        ('stderr', 'e 1\n'), ('stderr', 'w'), ('stderr', 'x'), ('stderr', 'y'),
        ('stdout', 'o\n'), ('stdout', 's'), ('stdout', '[1]'), ('stdout', '\n'), ('stdout', 'p\n'),
    ]


async def test_by_default_stderr_writes_go_to_the_hosts_stderr(session, capsys):
    await session.feed_run('import sys\nprint("out")\nprint("err", file=sys.stderr)')
    assert capsys.readouterr() == ('out\n', 'err\n')


async def test_a_worker_killed_mid_feed_ends_its_session_not_the_host(pool):
    async with pool.checkout() as session:
        def kill_me():
            os.kill(session._worker.pid, signal.SIGKILL)

        with pytest.raises(corral.SandboxWorkerError) as info:
            await session.feed_run('kill_me()\nwhile True:\n    pass', external_lookup={'kill_me': kill_me})
        assert info.value.display() == 'the sandbox worker stopped: the worker process exited; check out a new session'
        with pytest.raises(corral.SandboxWorkerError):
            await session.feed_run('1')
    async with pool.checkout() as session:
        assert await session.feed_run('40 + 2') == 42


@pytest.mark.slow
async def test_fifty_concurrent_sessions_each_gathering_host_calls(pool):
    async def double(n):
        await asyncio.sleep(0.01)
        return n * 2

    async def one(i):
        async with pool.checkout() as session:
            code = f'import asyncio\nsum(await asyncio.gather(*[double(n) for n in range({i})]))'
            return await session.feed_run(code, external_lookup={'double': double})

    results = await asyncio.gather(*(one(i) for i in range(50)))
    assert results == [i * (i - 1) for i in range(50)]


async def test_each_session_has_its_own_worker_process(pool):
    async with pool.checkout() as a, pool.checkout() as b:
        assert a._worker.pid != b._worker.pid
        first = a._worker.pid
    async with pool.checkout() as c:
        assert c._worker.pid != first


async def test_feed_run_refuses_bad_arguments(session):
    with pytest.raises(TypeError, match="external_lookup\\['x'\\] is not callable: int"):
        await session.feed_run('1', external_lookup={'x': 1})
    with pytest.raises(TypeError, match='code must be a str, not bytes'):
        await session.feed_run(b'1')


def test_sync_pool():
    with corral.SyncPool() as pool:
        with pool.checkout() as session:
            session.feed_run('total = 0')
            assert session.feed_run('total += add(2, 3)\ntotal', external_lookup={'add': lambda a, b: a + b}) == 5


async def test_with_type_checking_a_syntax_error_still_reads_as_python_shows_it(pool):
    async with pool.checkout(type_check=True, type_check_stubs='def f(x: int) -> int: ...\n') as session:
        with pytest.raises(corral.SandboxSyntaxError) as info:
            await session.feed_run('f(1\n')
        assert info.value.display() == (
            '  File "main.py", line 1\n'
            '    f(1\n'
            '     ^\n'
            "SyntaxError: '(' was never closed"
        )
        with pytest.raises(corral.SandboxTypingError):
            await session.feed_run('f("1")')
        assert await session.feed_run('f(1)', external_lookup={'f': lambda x: x + 1}) == 2


async def test_a_later_feed_type_checks_against_an_earlier_ones_variables(pool):
    async with pool.checkout(type_check=True) as session:
        await session.feed_run('count = 3\nnames = ["a", "b"]')
        assert await session.feed_run('count + len(names)') == 5
        with pytest.raises(corral.SandboxTypingError) as info:
            await session.feed_run('count + names')
        assert info.value.display() == (
            'error[unsupported-operator]: Unsupported `+` operation\n'
            ' --> main.py:1:1\n'
            '  |\n'
            '1 | count + names\n'
            '  | -----^^^-----\n'
            '  | |       |\n'
            '  | |       Has type `list[str]`\n'
            '  | Has type `Literal[3]`'
        )


async def test_named_tuples_cross_with_their_names(session):
    code = 'import collections\nPoint = collections.namedtuple("Point", "x y")\np = Point(1, (2, 3))\nback = echo(p)\n(p, back, type(back).__name__, back.y)'
    received = []
    result = await session.feed_run(code, external_lookup={'echo': lambda value: received.append(value) or value})
    assert repr(result) == "(Point(x=1, y=(2, 3)), Point(x=1, y=(2, 3)), 'Point', (2, 3))"
    assert result[0] == (1, (2, 3)) and type(received[0]) is corral.NamedTupleValue and received[0].y == (2, 3)


async def test_a_host_function_that_exits_is_the_scripts_error_not_the_hosts(pool):
    def leave():
        raise SystemExit(3)

    async with pool.checkout() as session:
        with pytest.raises(corral.SandboxRuntimeError) as info:
            await session.feed_run('leave()', external_lookup={'leave': leave})
        assert info.value.display().splitlines()[-1] == 'RuntimeError: the host function exited (SystemExit: 3)'
        assert await session.feed_run('1 + 1') == 2


async def test_a_host_result_nested_too_deep_or_too_large_is_the_scripts_type_error(session):
    def deep():
        value = ()
        for _ in range(5000):
            value = (value,)
        return value

    with pytest.raises(corral.SandboxRuntimeError) as info:
        await session.feed_run('deep()', external_lookup={'deep': deep})
    assert info.value.display().splitlines()[-1] == (
        "TypeError: deep() returned a value of type 'tuple' that cannot enter the sandbox: the value deep() returned is "
        'nested more than 100 levels deep'
    )
    with pytest.raises(corral.SandboxRuntimeError) as info:
        await session.feed_run('huge()', external_lookup={'huge': lambda: 'x' * (65 * 1024**2)})
    assert info.value.display().splitlines()[-1] == (
        f'OverflowError: the value huge() returned takes {sys.getsizeof("") + 65 * 1024**2:,} bytes; at most 67,108,864 may enter the sandbox '
        '(the value_size limit)'
    )
    assert await session.feed_run('1') == 1


async def test_a_result_larger_than_a_frame_is_the_scripts_type_error(pool):
    async with pool.checkout(limits=corral.Limits(value_size=None)) as session:
        with pytest.raises(corral.SandboxRuntimeError) as info:
            await session.feed_run("'x' * (65 * 1024**2)")
        assert info.value.display() == (
            'TypeError: the value of the last expression cannot leave the sandbox: message of 68157448 bytes is larger '
            'than the limit of 67108864 bytes'
        )
        assert await session.feed_run('2') == 2


@pytest.mark.slow
async def test_sets_whose_hashes_collide_cannot_stall_the_host(pool):
    async with pool.checkout() as session:
        await session.feed_run('P = 2**61 - 1\nS = set()\nfor i in range(1, 10001):\n    S.add(i * P)')
        with pytest.raises(corral.SandboxWorkerError) as info:
            await session.feed_run('[S] * 20')
        assert info.value.display() == (
            'the sandbox worker stopped: it sent a malformed message (ValueError: more than 32 items of a set of the '
            'message share one hash); check out a new session'
        )
    async with pool.checkout() as session:
        assert await session.feed_run('{i: {i} for i in range(3)}') == {0: {0}, 1: {1}, 2: {2}}


async def test_the_task_running_a_feed_shows_no_host_paths(session):
    code = 'import asyncio\ncurrent = asyncio.current_task()\n(repr(current), current in asyncio.all_tasks(), [str(t) for t in asyncio.all_tasks()])'
    shown, listed, tasks = await session.feed_run(code)
    assert shown.startswith("<Task pending name='Task-") and shown.endswith("' coro=<<module>()>>")
    assert listed is True and tasks == [shown]


async def test_host_functions_run_in_the_feeds_context_when_nothing_traces(session):
    # Without a tracer provider no span is made, but a host function still sees the context the
    # feed was started in (baggage, a remote parent span), sync or async.
    from opentelemetry import baggage, context

    seen = []

    def tenant():
        seen.append(baggage.get_baggage('tenant'))
        return 1

    async def tenant_async():
        seen.append(baggage.get_baggage('tenant'))
        return 2

    token = context.attach(baggage.set_baggage('tenant', 'acme'))
    try:
        value = await session.feed_run('tenant() + await tenant_async()', external_lookup={'tenant': tenant, 'tenant_async': tenant_async})
    finally:
        context.detach(token)
    assert (value, seen) == (3, ['acme', 'acme'])


@pytest.mark.parametrize(
    'script, shows, ended',
    [
        ('import asyncio\nt = asyncio.create_task(slow())\n1', 1, 'returned'),
        ('import asyncio\ntry:\n    await asyncio.wait_for(slow(), 0.01)\nexcept TimeoutError:\n    r = "timed out"\nr', 'timed out', 'cancelled'),
        ('import asyncio\nasync def m():\n    t = asyncio.create_task(slow())\n    await asyncio.sleep(0)\n    return 2\nawait m()', 2, 'returned'),
    ],
)
async def test_a_host_call_a_task_leaves_running_is_answered_in_its_feed(session, script, shows, ended):
    # A task the feed did not await stays for the next feeds, and the host calls it made are
    # answered before the feed ends: each feed's journal holds the answers to its own calls. A
    # call the script gave up on (wait_for) is cancelled on the host as the feed ends, and a reply
    # that was already on its way is dropped, not taken for a protocol breach.
    events = []

    async def slow():
        try:
            await asyncio.sleep(0.3)  # well past wait_for's 0.01 seconds, on a busy machine too
        except asyncio.CancelledError:
            events.append('cancelled')
            raise
        events.append('returned')
        return 5

    async def fast():
        return 5

    assert await session.feed_run(script, external_lookup={'slow': slow}) == shows
    await asyncio.sleep(0.1)
    assert (events, await session.feed_run('2 + 2')) == ([ended], 4)
    assert await session.feed_run('import asyncio\nt = asyncio.create_task(fast())\n3', external_lookup={'fast': fast}) == 3
    assert await session.feed_run('t.done(), t.result()') == (True, 5)
    assert await session.feed_run('2 + 3') == 5


async def test_a_task_a_feed_leaves_waits_for_the_next_feeds_on_their_clock(session):
    # As in CPython's asyncio REPL, a task outlives the feed that started it; here it goes on
    # only while a feed runs the event loop, its timers on the clock of those feeds.
    first = (
        'import asyncio\nlog = []\nready = asyncio.Event()\n'
        'async def sleeper():\n    await asyncio.sleep(0.2)\n    log.append("slept")\n    return "woke"\n'
        'async def waiter():\n    await ready.wait()\n    log.append("ready")\n'
        's = asyncio.create_task(sleeper())\nw = asyncio.create_task(waiter())\nlen(asyncio.all_tasks())'
    )
    assert await session.feed_run(first) == 3  # with the feed's own
    await asyncio.sleep(0.3)  # between feeds the clock stands still
    assert await session.feed_run('s.done(), w.done(), log') == (False, False, [])
    assert await session.feed_run('ready.set()\nawait asyncio.sleep(0)\nw.done(), log') == (True, ['ready'])
    assert await session.feed_run('await asyncio.sleep(0.25)\ns.result(), log') == ('woke', ['ready', 'slept'])
    assert await session.feed_run('len(asyncio.all_tasks())') == 1  # the feed's own


async def test_a_feed_that_leaves_more_tasks_than_a_session_keeps_fails_and_they_end(session):
    code = 'import asyncio\ncrowd = [asyncio.create_task(asyncio.sleep(10)) for _ in range(101)]\n1'
    with pytest.raises(corral.SandboxRuntimeError) as info:
        await session.feed_run(code)
    assert info.value.display().splitlines()[-1] == (
        'RuntimeError: the script left 101 tasks running; a session keeps at most 100 between feeds, so they were cancelled'
    )
    assert await session.feed_run('sum(t.cancelled() for t in crowd)') == 101
    with pytest.raises(corral.SandboxRuntimeError) as info:  # the script's own error stands, with a note
        await session.feed_run('crowd = [asyncio.create_task(asyncio.sleep(10)) for _ in range(101)]\n1 / 0')
    assert info.value.display().splitlines()[-2:] == [
        'ZeroDivisionError: division by zero',
        'the script left 101 tasks running; a session keeps at most 100 between feeds, so they were cancelled',
    ]
    assert await session.feed_run('kept = [asyncio.create_task(asyncio.sleep(10)) for _ in range(100)]\nlen(kept)') == 100
    assert await session.feed_run('sum(t.done() for t in kept)') == 0


async def test_a_deferred_call_of_a_task_a_feed_leaves_pauses_that_feed(session):
    # the script's value is ready, but its task's call is not answered: the feed waits for it
    async def approve(amount):
        raise corral.Deferred({'amount': amount})

    with pytest.raises(corral.SandboxPaused) as info:
        await session.feed_run("import asyncio\nt = asyncio.create_task(approve(30))\n'value'", external_lookup={'approve': approve})
    assert [(call.call_id, call.function, call.args) for call in info.value.calls] == [(0, 'approve', [30])]
    assert await session.resume({0: 'approved'}) == 'value'
    assert await session.feed_run('t.result()') == 'approved'


async def test_the_next_check_knows_what_a_failed_script_bound_before_it_failed(pool):
    async with pool.checkout(type_check=True) as session:
        with pytest.raises(corral.SandboxRuntimeError):
            await session.feed_run('a = 1; b = "x"\nfor i in range(3):\n    c = [i]\n    i / 0\nd = 2')
        with pytest.raises(corral.SandboxRuntimeError):
            await session.feed_run('e = 3\nf = 1 / 0')
        with pytest.raises(corral.SandboxRuntimeError):
            await session.feed_run('def boom(function):\n    return 1 // 0\nh = 1\n@boom\ndef k(): ...')
        assert await session.feed_run('(a, b, i, c, e, h)') == (1, 'x', 0, [0], 3, 1)
        with pytest.raises(corral.SandboxTypingError) as info:
            await session.feed_run('b + a')
        assert info.value.display().splitlines()[-2:] == ['  | |   Has type `Literal[1]`', '  | Has type `Literal["x"]`']
        with pytest.raises(corral.SandboxRuntimeError):  # a message that looks like a frame is not one
            await session.feed_run('m = 1\nn = 2\nraise ValueError(\'\\n  File "main.py", line 1, in <module>\')')
        assert await session.feed_run('m + n') == 3
        for name in ('d', 'f', 'k'):  # never bound: the statement that binds them did not run, or raised
            with pytest.raises(corral.SandboxTypingError) as info:
                await session.feed_run(name)
            assert info.value.display().splitlines()[0] == f'error[unresolved-reference]: Name `{name}` used when not defined'


async def test_a_script_whose_value_cannot_leave_ran_whole_and_the_next_check_knows_it(pool):
    async with pool.checkout(type_check=True) as session:
        with pytest.raises(corral.SandboxRuntimeError) as info:
            await session.feed_run('class A:\n    size = 2\nA')
        assert info.value.message.startswith('the value of the last expression cannot leave the sandbox')
        assert await session.feed_run('A.size') == 2


async def test_stubs_with_errors_are_refused_at_checkout_with_tys_diagnostics(pool):
    stubs = 'from typing import Litteral\n\ndef f(x: Litteral["a"]) -> Order: ...\n'
    with pytest.raises(corral.StubError) as info:
        async with pool.checkout(type_check=True, type_check_stubs=stubs):
            pass
    assert info.value.diagnostics == (
        'error[import-not-found]: Module `typing` has no member `Litteral`\n'
        ' --> repl_type_stubs.pyi:1:20\n'
        '  |\n'
        '1 | from typing import Litteral\n'
        '  |                    ^^^^^^^^\n'
        '\n'
        'error[unresolved-reference]: Name `Order` used when not defined\n'
        ' --> repl_type_stubs.pyi:3:28\n'
        '  |\n'
        '3 | def f(x: Litteral["a"]) -> Order: ...\n'
        '  |                            ^^^^^'
    )
    assert str(info.value) == 'ty finds errors in the stubs, which would leave their functions unchecked:\n' + info.value.diagnostics
    assert isinstance(info.value, ValueError) and not isinstance(info.value, corral.SandboxError)
    module = corral.ExternalModule({'g': lambda: 1}, stubs='def g( -> int: ...\n')
    with pytest.raises(corral.StubError) as info:
        async with pool.checkout(type_check=True, external_modules={'billing': module}):
            pass
    assert info.value.diagnostics.splitlines()[:2] == ['error[invalid-syntax]: Expected `)`, found `->`', ' --> billing.pyi:1:8']
    async with pool.checkout(type_check=False, type_check_stubs=stubs) as session:  # stubs unused: not checked
        assert await session.feed_run('1') == 1


async def test_a_stub_of_a_function_the_host_does_not_provide_is_refused(pool):
    stubs = 'def f(x: int) -> int: ...\nasync def g() -> None: ...\nclass Order: ...\n'
    async with pool.checkout(type_check=True, type_check_stubs=stubs) as session:
        with pytest.raises(corral.SandboxTypingError):  # a script that fails the check runs nothing
            await session.feed_run('f("x")')
        with pytest.raises(corral.StubError) as info:
            await session.feed_run('f(1)', external_lookup={'f': lambda x: x})
        assert str(info.value) == 'the stubs declare `g`, which the external_lookup of the first feed does not provide: add it, or remove its stub'
        assert info.value.diagnostics is None

        async def g() -> None:
            pass

        assert await session.feed_run('f(1)', external_lookup={'f': lambda x: x, 'g': g}) == 1
        assert await session.feed_run('2') == 2  # only the first feed that runs is compared
    module = corral.ExternalModule({'g': lambda: 1}, stubs='def g() -> int: ...\ndef h() -> int: ...\ndef k() -> int: ...\n')
    with pytest.raises(corral.StubError) as info:
        async with pool.checkout(type_check=True, external_modules={'billing': module}):
            pass
    assert str(info.value) == "the stubs declare `h`, `k`, which external module 'billing' does not provide: add them, or remove their stub"


async def test_alive_says_whether_the_session_can_run_another_feed(pool):
    session = pool.checkout(limits=corral.Limits(wall_time=0.5))
    assert session.alive is False  # not entered
    async with session:
        assert session.alive is True
        with pytest.raises(corral.SandboxLimitError):
            await session.feed_run('while True: pass')  # stopped at wall_time: the worker lives on
        assert session.alive is True
    assert session.alive is False
    async with pool.checkout(limits=corral.Limits(wall_time=10, cpu_time=1)) as session:
        with pytest.raises(corral.SandboxLimitError):
            await session.feed_run('while True: pass')  # the kernel kills the worker
        assert session.alive is False
