"""Values of kinds beyond plain data that cross the boundary: time zones with their names and a
time's `fold`, a script's exceptions, named tuples and class instances (as inert descriptions)."""

from __future__ import annotations

import datetime
import pathlib
import zoneinfo

import msgpack
import pytest

from corral.values import pack, unpack

PLUS2 = datetime.timezone(datetime.timedelta(hours=2), 'PLUS2')
NEW_YORK = zoneinfo.ZoneInfo('America/New_York')


@pytest.mark.parametrize(
    ('value', 'expected'),
    [
        (datetime.time(1, 2, fold=1), 'datetime.time(1, 2, fold=1)'),
        (datetime.time(1, 2, tzinfo=PLUS2), "datetime.time(1, 2, tzinfo=datetime.timezone(datetime.timedelta(seconds=7200), 'PLUS2'))"),
        (PLUS2, "datetime.timezone(datetime.timedelta(seconds=7200), 'PLUS2')"),
        (datetime.timezone.utc, 'datetime.timezone.utc'),
        (datetime.timezone(datetime.timedelta(hours=2)), 'datetime.timezone(datetime.timedelta(seconds=7200))'),
        (
            datetime.datetime(2024, 6, 15, 12, tzinfo=NEW_YORK),
            "datetime.datetime(2024, 6, 15, 12, 0, tzinfo=datetime.timezone(datetime.timedelta(days=-1, seconds=72000), 'EDT'))",
        ),
        (  # the second 01:30 of the night clocks go back: fold and the zone's name of that hour
            datetime.datetime(2024, 11, 3, 1, 30, fold=1, tzinfo=NEW_YORK),
            "datetime.datetime(2024, 11, 3, 1, 30, fold=1, tzinfo=datetime.timezone(datetime.timedelta(days=-1, seconds=68400), 'EST'))",
        ),
        (datetime.datetime(2024, 6, 15, 12, tzinfo=zoneinfo.ZoneInfo('UTC')), 'datetime.datetime(2024, 6, 15, 12, 0, tzinfo=datetime.timezone.utc)'),
        (datetime.datetime(2024, 6, 15, 12, fold=1), 'datetime.datetime(2024, 6, 15, 12, 0, fold=1)'),
        (datetime.time(1, 2, tzinfo=datetime.timezone(datetime.timedelta(hours=1), 'zoné\ud800\0')), "datetime.time(1, 2, tzinfo=datetime.timezone(datetime.timedelta(seconds=3600), 'zoné\\ud800\\x00'))"),
    ],
    ids=['time-fold', 'time-named-zone', 'named-zone', 'utc', 'fixed-zone', 'zoneinfo', 'zoneinfo-fold', 'zoneinfo-utc', 'naive-fold', 'odd-name'],
)
def test_zone_names_and_fold_cross_both_ways(value, expected):
    for side in ('host', 'sandbox'):
        assert repr(unpack(pack(value, side=side))) == expected


def test_a_datetime_subclass_crosses_with_its_zone_name_and_none_of_its_overrides():
    class Shifty(datetime.datetime):
        def isoformat(self, *args):
            raise AssertionError('called')

        def tzname(self):
            raise AssertionError('called')

    value = Shifty(2024, 1, 15, 12, tzinfo=NEW_YORK)
    decoded = unpack(pack(value, side='sandbox'))
    assert type(decoded) is datetime.datetime
    assert repr(decoded) == "datetime.datetime(2024, 1, 15, 12, 0, tzinfo=datetime.timezone(datetime.timedelta(days=-1, seconds=68400), 'EST'))"


@pytest.mark.parametrize(
    ('code', 'data', 'error'),
    [
        (7, b'01:02\x002', 'malformed datetime or time in a frame'),  # a fold that is neither 0 nor 1
        (7, b'01:02\x00', 'malformed datetime or time in a frame'),
        (5, b'2024-01-01T00:00:00+24:00\x000X', 'offset must be a timedelta strictly between'),
        (9, bytes(12) + b'\xff', "'utf-8' codec can't decode byte 0xff"),
        (8, bytes(12) + b'x', 'malformed timedelta or time zone in a frame'),  # a timedelta has no name
    ],
    ids=['fold-2', 'fold-missing', 'offset-a-day', 'zone-name-not-utf8', 'timedelta-with-name'],
)
def test_a_malformed_zone_or_fold_is_a_value_error(code, data, error):
    with pytest.raises(ValueError, match=error):
        unpack(msgpack.packb(msgpack.ExtType(code, data)))


# ----- a script's objects, described ------------------------------------------------------------

import collections  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402

import corral  # noqa: E402
from corral import ExceptionValue, FileValue, InstanceValue, ModuleValue, NamedTupleValue  # noqa: E402
from corral.language.rebuild import rebuild  # noqa: E402
from corral.values import MAX_DEPTH, Decoder, ValueLimitError, measure  # noqa: E402

Point = collections.namedtuple('Point', 'x y', module='geometry')


def test_exceptions_and_named_tuples_cross_as_descriptions_and_are_rebuilt_in_the_sandbox():
    class MyError(KeyError):
        pass

    value = [ValueError('bad', 3), MyError('k'), json.JSONDecodeError('Expecting value', 'x', 0), Point(1, [2]), sys.version_info[:2]]
    described = unpack(pack(value, side='host'))
    assert described == [
        ExceptionValue('ValueError', 'builtins', ('bad', 3), 'ValueError'),
        ExceptionValue('MyError', __name__, ('k',), 'KeyError'),
        ExceptionValue('JSONDecodeError', 'json.decoder', ('Expecting value: line 1 column 1 (char 0)',), 'ValueError'),
        (1, [2]),
        sys.version_info[:2],
    ]
    point = described[3]
    assert (type(point), repr(point), point.x, point._fields, point._type_name, point._module, point._asdict()) == (
        NamedTupleValue, 'Point(x=1, y=[2])', 1, ('x', 'y'), 'Point', 'geometry', {'x': 1, 'y': [2]}
    )
    rebuilt = unpack(pack(value, side='host'), objects=rebuild)
    assert [(type(item).__name__, getattr(item, 'args', None)) for item in rebuilt[:3]] == [
        ('ValueError', ('bad', 3)), ('KeyError', ('k',)), ('JSONDecodeError', ('Expecting value: line 1 column 1 (char 0)',))
    ]
    assert type(rebuilt[2]) is json.JSONDecodeError  # its constructor wants three args: built with its args alone
    assert (repr(rebuilt[3]), type(rebuilt[3]).__module__, rebuilt[3].y) == ('Point(x=1, y=[2])', 'geometry', [2])


def test_a_named_tuple_description_is_read_only_and_names_its_class_in_errors():
    point = NamedTupleValue((1, 2), 'Point', 'geometry', ('x', 'y'))
    with pytest.raises(AttributeError, match="^'Point' object has no attribute 'z'$"):
        point.z
    with pytest.raises(AttributeError, match="^'Point' object is read-only$"):
        point.x = 3
    assert point == (1, 2) and hash(point) == hash((1, 2))
    with pytest.raises(ValueError, match='^a named tuple of 1 fields and 2 values$'):
        NamedTupleValue((1, 2), 'Point', 'geometry', ('x',))


@pytest.mark.parametrize(
    ('description', 'rebuilt'),
    [
        (ExceptionValue('system', 'os', ('rm -rf /',), 'eval'), "Exception('rm -rf /')"),  # no class but an exception's
        (ExceptionValue('ValueError', 'os', ('x',), 'KeyError'), "KeyError('x')"),  # a built-in's name in another module
        (ExceptionValue('UnicodeDecodeError', 'builtins', ('one',), 'UnicodeDecodeError'), "UnicodeDecodeError('one')"),
        (NamedTupleValue((1,), '__import__', 'os', ('system',)), "__import__(system=1)"),
        (NamedTupleValue((1,), 'not a name', 'os', ('x',)), '(1,)'),  # namedtuple refuses the name: a tuple
        (NamedTupleValue((1,), 'P', 'm', ('_x',)), '(1,)'),
    ],
    ids=['unknown-class', 'builtin-name-elsewhere', 'args-its-constructor-refuses', 'odd-names', 'bad-name', 'private-field'],
)
def test_forged_descriptions_build_only_exceptions_and_named_tuples(description, rebuilt):
    built = unpack(pack(description, side='host'), objects=rebuild)
    assert repr(built) == rebuilt
    assert type(built).__module__ in ('builtins', 'os')


def test_an_instance_description_does_not_go_back_into_the_sandbox():
    order = InstanceValue('Order', '__main__', {'id': 7}, True)
    assert unpack(pack(order, side='host')) == order  # the host keeps and stores it
    with pytest.raises(TypeError) as info:
        measure([order], items=None, size=None, subject='the value f() returned', crossing='enter the sandbox', convert=corral.values.host_default)
    assert str(info.value) == (
        "the value f() returned holds an InstanceValue (the script's Order), which cannot go back into the sandbox: its class is "
        "the script's code; send its attrs"
    )
    with pytest.raises(ValueError, match="^an instance of a script's class cannot come back into the sandbox$"):
        unpack(pack(order, side='host'), objects=rebuild)


@pytest.mark.parametrize(
    'parts',
    [
        [15, 'E', 'builtins'],  # no base
        [15, 1, 'builtins', 'E'],
        [16, 'P', 'm', ['x'], 1, 2],  # two values, one field
        [16, 'P', 'm', [1], 1],
        [16, 'P', 'm', 'x', 1],
        [17, 'C', 'm', True, {1: 2}],  # an attribute named by an int
        [17, 'C', 'm', 1, {}],
        [17, 'C', 'm', True, {}, 'extra'],
    ],
    ids=['exception-short', 'exception-name', 'tuple-count', 'tuple-field', 'tuple-fields', 'instance-key', 'instance-flag', 'instance-long'],
)
def test_a_malformed_description_is_a_value_error(parts):
    data = msgpack.packb([msgpack.ExtType(parts[0], b''), *parts[1:]], use_bin_type=True)
    with pytest.raises(ValueError, match='^malformed description of an object in a frame$'):
        unpack(data)


def test_descriptions_are_bounded_as_any_value():
    many = ValueError(*range(1000))
    with pytest.raises(ValueLimitError, match='^v has at least 1,003 items; at most 100 may go'):
        measure(many, items=100, size=None, subject='v', crossing='go')
    with pytest.raises(ValueLimitError, match='^a message has more than 100 items$'):
        Decoder(items=100).decode(pack([ValueError(*range(10))] * 10, side='host'))  # 10 + 10 * 13 items
    deep: object = 1
    for _ in range(MAX_DEPTH + 1):
        deep = ValueError(deep)
    with pytest.raises(ValueError, match=f'^v is nested more than {MAX_DEPTH} levels deep$'):
        measure(deep, items=None, size=None, subject='v', crossing='go')
    looped = ValueError()
    looped.args = (looped,)
    with pytest.raises(ValueError, match='^the value contains a reference to itself$'):
        measure(looped, items=None, size=None, subject='v', crossing='go')


async def test_a_scripts_objects_leave_as_descriptions_and_its_properties_do_not_run(session):
    code = '''
import collections, dataclasses, sys
@dataclasses.dataclass
class Order:
    id: int
    tags: list
    note: dataclasses.InitVar[str] = ''
class Plain:
    __slots__ = ('a', 'b', 'unset')
    def __init__(self):
        self.a, self.b = 1, Order(2, [])
class Tricky:
    def __init__(self):
        self.x = 1
    @property
    def y(self):
        raise RuntimeError('ran')
    def __getattr__(self, name):
        raise RuntimeError('ran')
class MyError(ValueError):
    def __str__(self):
        raise RuntimeError('ran')
Pair = collections.namedtuple('Pair', 'first second')
[Order(7, ['a']), Plain(), Tricky(), MyError('mine'), Pair(1, 2), sys.version_info[:1], KeyError('k')]
'''
    assert await session.feed_run(code) == [
        InstanceValue('Order', '__main__', {'id': 7, 'tags': ['a']}, True),
        InstanceValue('Plain', '__main__', {'a': 1, 'b': InstanceValue('Order', '__main__', {'id': 2, 'tags': []}, True)}, False),
        InstanceValue('Tricky', '__main__', {'x': 1}, False),
        ExceptionValue('MyError', '__main__', ('mine',), 'ValueError'),
        (1, 2),
        (3,),
        ExceptionValue('KeyError', 'builtins', ('k',), 'KeyError'),
    ]


async def test_exceptions_and_named_tuples_enter_the_sandbox_as_themselves(session):
    given = [ValueError('in', 2), Point(1, 2), json.JSONDecodeError('Expecting value', 'x', 0)]
    code = 'v = given()\n[(type(x).__name__, type(x).__module__, repr(x)) for x in v] + [v[1].x + v[1].y, isinstance(v[0], ValueError), isinstance(v[2], json.JSONDecodeError)]'
    assert await session.feed_run('import json\n' + code, external_lookup={'given': lambda: given}) == [
        ('ValueError', 'builtins', "ValueError('in', 2)"),
        ('Point', 'geometry', 'Point(x=1, y=2)'),
        ('JSONDecodeError', 'json.decoder', "JSONDecodeError('Expecting value: line 1 column 1 (char 0)')"),
        3, True, True,
    ]


async def test_an_instance_sent_back_is_the_scripts_clear_error(session):
    with pytest.raises(corral.SandboxRuntimeError) as info:
        await session.feed_run('class C:\n    pass\nf(C())', external_lookup={'f': lambda v: [v]})
    assert info.value.display().splitlines()[-1] == (
        "TypeError: f() returned a value of type 'list' that cannot enter the sandbox: the value f() returned holds an "
        "InstanceValue (the script's C), which cannot go back into the sandbox: its class is the script's code; send its attrs"
    )


async def test_a_value_that_holds_itself_or_a_function_through_an_instance_is_refused(session):
    with pytest.raises(corral.SandboxRuntimeError) as info:
        await session.feed_run('class N:\n    pass\nn = N()\nn.me = [n]\nn')
    assert info.value.display() == 'TypeError: the value of the last expression cannot leave the sandbox: the value contains a reference to itself'
    with pytest.raises(corral.SandboxRuntimeError) as info:
        await session.feed_run('class N:\n    pass\nn = N()\nn.callback = lambda: 0\nn')  # a builtin (print) crosses by name
    assert info.value.display().startswith(
        "TypeError: the value of the last expression cannot leave the sandbox: a value of type 'function' cannot cross"
    )


async def test_a_loaded_session_rebuilds_the_objects_that_came_in(pool):
    given = lambda: [ValueError('in'), Point(1, 2)]  # noqa: E731
    async with pool.checkout() as session:
        await session.feed_run('e, p = given()', external_lookup={'given': given})
        state = await session.dump()
    async with pool.checkout() as session:
        await session.load_session(state)
        assert await session.feed_run('(type(e).__name__, e.args, p.y, repr(p))') == ('ValueError', ('in',), 2, 'Point(x=1, y=2)')


def test_bounded_repr_shows_a_sandbox_builtin_as_cpython_shows_the_object():
    from corral import SandboxBuiltin
    from corral.values import bounded_repr

    builtins = [SandboxBuiltin('function', 'len'), SandboxBuiltin('type', 'functools.partial'), SandboxBuiltin('function', 'json.dumps')]
    assert bounded_repr(builtins) == "[<built-in function len>, <class 'functools.partial'>, <built-in function dumps>]"


def test_bounded_repr_shows_a_scripts_objects_as_cpython_does():
    from corral.values import bounded_repr

    value = [
        ExceptionValue('ValueError', 'builtins', ('bad', 10**5000), 'ValueError'),
        NamedTupleValue((1, 'a'), 'Point', '__main__', ('x', 'y')),
        InstanceValue('Order', '__main__', {'id': 7, 'tags': ['a']}, True),
        InstanceValue('Plain', '__main__', {'a': 1}, False),
        InstanceValue('Empty', 'm', {}, False),
        ExceptionValue('KeyError', 'builtins', (), 'KeyError'),
    ]
    assert bounded_repr(value) == (
        "[ValueError('bad', <int of 16610 bits>), Point(x=1, y='a'), Order(id=7, tags=['a']), <__main__.Plain object: a=1>, "
        '<m.Empty object>, KeyError()]'
    )
    assert bounded_repr(NamedTupleValue(('x' * 50,), 'P', 'm', ('f',)), limit=10) == "P(f='xxxxx... (cut at 10 characters)"
    deep: object = 1
    for _ in range(150):
        deep = ExceptionValue('E', 'm', (deep,), 'Exception')
    assert bounded_repr(deep) == 'E(' * 100 + 'E(...)' + ')' * 100


async def test_a_description_reaches_nothing_but_plain_data(session):
    """No live object, no code, no way back into the worker: everything a description holds (and
    the classes it names) is plain data, or corral's own description classes."""
    import gc

    code = '''
import dataclasses
@dataclasses.dataclass
class Order:
    id: int
    def total(self):
        return 1
class Err(Exception):
    pass
o = Order(7)
o.method = o.total.__name__
[o, Err(o.id, "x"), collections.namedtuple("P", "a")(b"x"), {"k": (1.5, None, {2})}]
'''
    result = await session.feed_run('import collections\n' + code)
    plain = (type(None), bool, int, float, str, bytes, list, tuple, dict, set, frozenset)
    described = (ExceptionValue, NamedTupleValue, InstanceValue)
    seen, todo = set(), [result]
    while todo:
        item = todo.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, type):
            assert item in plain + described + (object,), item
            continue
        assert type(item) in plain + described, type(item)
        todo.extend(gc.get_referents(item))
    assert result == [  # a dataclass crosses with its fields alone
        InstanceValue('Order', '__main__', {'id': 7}, True),
        ExceptionValue('Err', '__main__', (7, 'x'), 'Exception'),
        (b'x',),
        {'k': (1.5, None, {2})},
    ]


def test_a_zone_whose_tzname_is_no_str_crosses_without_a_name():
    class Odd(datetime.tzinfo):
        def utcoffset(self, dt):
            return datetime.timedelta(hours=1)

        def tzname(self, dt):
            return 42

        def dst(self, dt):
            return None

    value = datetime.datetime(2024, 1, 1, tzinfo=Odd())
    assert repr(unpack(pack(value, side='sandbox'))) == 'datetime.datetime(2024, 1, 1, 0, 0, tzinfo=datetime.timezone(datetime.timedelta(seconds=3600)))'


def test_posix_paths_cross_as_pure_paths_and_windows_paths_as_text():
    class Lying(pathlib.PurePosixPath):
        def __str__(self):  # never called: the path's own text crosses
            return '/etc/shadow'

    given = [pathlib.PurePosixPath('/a//b/./c'), pathlib.PosixPath('rel'), Lying('/x'), pathlib.PureWindowsPath('c:/w'), pathlib.PurePosixPath('/n\udcff')]
    back = unpack(pack(given, side='host'))
    assert back == [pathlib.PurePosixPath('/a/b/c'), pathlib.PurePosixPath('rel'), pathlib.PurePosixPath('/x'), 'c:\\w', pathlib.PurePosixPath('/n\udcff')]
    assert [type(value) for value in back] == [pathlib.PurePosixPath] * 3 + [str, pathlib.PurePosixPath]
    with pytest.raises(ValueError):  # not UTF-8
        unpack(msgpack.packb(msgpack.ExtType(42, b'/\xff')))
    # the path's text counts toward the decoded size
    with pytest.raises(ValueLimitError) as info:
        unpack(pack(pathlib.PurePosixPath('/' + 'a' * 10_000), side='host'), size=5_000)
    assert str(info.value) == 'a message takes more than 5,000 bytes decoded'


async def test_a_file_the_script_opened_crosses_as_its_description(tmp_path):
    (tmp_path / 'hello.txt').write_text('hello')
    async with corral.Pool() as pool, pool.checkout(mounts=corral.Mount(tmp_path, '/data', mode='read-write')) as session:
        code = "f = open('/data/hello.txt')\nf.read(2)\ng = open('/data/hello.txt', 'rb')\ng.read(3)\n[f, g, open('out.bin', 'wb'), open('/data/hello.txt', 'a+')]"
        files = await session.feed_run(code)
        assert files == [
            FileValue('/data/hello.txt', 'r', 5), FileValue('/data/hello.txt', 'rb', 3), FileValue('out.bin', 'wb', 0), FileValue('/data/hello.txt', 'a+', 5),
        ]  # a text file's position is its buffer's: the whole of a short file is read at once
        assert [(f.binary, f.readable, f.writable) for f in files] == [(False, True, False), (True, True, False), (True, False, True), (False, True, True)]
        assert await session.feed_run('g.close()\ng') == FileValue('/data/hello.txt', 'rb', 0)
        assert await session.feed_run('f.mode = 5\nf') == FileValue('/data/hello.txt', 'r', 5)  # a mode the script set that is no str: the file's own
    given = FileValue('/data/x', 'r', 0)
    assert unpack(pack(given, side='host')) == given
    with pytest.raises(TypeError) as error:
        measure([given], items=None, size=None, subject='the value f() returned', crossing='enter the sandbox', convert=corral.values.host_default)
    assert str(error.value) == (
        "the value f() returned holds a FileValue ('/data/x'), which cannot go back into the sandbox: it is a description, not an open file; send its path"
    )
    with pytest.raises(ValueError, match='^a file the script opened cannot come back into the sandbox$'):
        unpack(pack(given, side='host'), objects=rebuild)
    for parts in (['/x', 'r', -1], ['/x', 'r'], ['/x', 'r', 1.0]):
        with pytest.raises(ValueError, match='^malformed description of an object in a frame$'):
            unpack(msgpack.packb([msgpack.ExtType(18, b''), *parts]))


async def test_a_host_module_crosses_out_as_its_description():
    def add(a: int, b: int) -> int:
        return a + b

    def give(value):
        return value

    modules = {
        'tools': corral.ExternalModule({'add': add}, values={'VERSION': 3, 'tags': ['a']}),
        'pkg': corral.ExternalModule({}, values={'N': 1}),
        'pkg.sub': corral.ExternalModule({'add': add}),
    }
    async with corral.Pool() as pool, pool.checkout(external_modules=modules) as session:
        tools = ModuleValue('tools', {'add': 'tools.add', 'VERSION': 3, 'tags': ['a']})
        assert await session.feed_run('import tools\ntools') == tools
        # one object for every import of a name, as CPython's sys.modules gives
        assert await session.feed_run('import tools as t\nfrom tools import add\n[tools is t, t.add is add, t.add(1, 2)]') == [True, True, 3]
        assert await session.feed_run('[t, {"m": tools}]') == [tools, {'m': tools}]
        assert await session.feed_run('import pkg.sub\npkg') == ModuleValue('pkg', {'N': 1, 'sub': ModuleValue('pkg.sub', {'add': 'pkg.sub.add'})})
        assert await session.feed_run('import pkg.sub as s\ns') == ModuleValue('pkg.sub', {'add': 'pkg.sub.add'})
        # what the script set on it is its value; a module holding itself is refused as any such value
        assert await session.feed_run('tools.add = 5\ntools') == ModuleValue('tools', {'add': 5, 'VERSION': 3, 'tags': ['a']})
        assert await session.feed_run('tools') == tools  # each feed has the module the host offers now
        with pytest.raises(corral.SandboxRuntimeError) as error:
            await session.feed_run('tools.me = tools\ntools')
        assert error.value.message == 'the value of the last expression cannot leave the sandbox: the value contains a reference to itself'
        # the standard library's modules are the sandbox's own facades: no value of theirs leaves
        with pytest.raises(corral.SandboxRuntimeError) as error:
            await session.feed_run('import json\njson')
        assert str(error.value).endswith("a value of type 'module' cannot cross the sandbox boundary; use None, bool, int, float, str, bytes, list, tuple, dict, set, frozenset, datetime, Decimal or UUID values")
        # going back in, as a host function's argument or answer, it is refused
        with pytest.raises(corral.SandboxRuntimeError) as error:
            await session.feed_run('give(tools)', external_lookup={'give': give})
        assert error.value.message == (
            "give() returned a value of type 'ModuleValue' that cannot enter the sandbox: the value give() returned holds a "
            "ModuleValue ('tools'), which cannot go back into the sandbox: a script imports its modules; send its name"
        )
    assert corral.values.bounded_repr([tools]) == "[<module 'tools'>]"
    assert unpack(pack(tools, side='sandbox')) == tools
    with pytest.raises(ValueError, match='^a host module cannot come back into the sandbox as a value$'):
        unpack(pack(tools, side='sandbox'), objects=rebuild)
    for parts in (['tools'], ['tools', {'a': 1}, 2], [1, {}], ['tools', [1]], ['tools', {1: 2}]):
        with pytest.raises(ValueError, match='^malformed description of an object in a frame$'):
            unpack(msgpack.packb([msgpack.ExtType(44, b''), *parts]))
