"""Values of kinds beyond plain data through Monty's client and `corral-monty subprocess`: named
time zones and `fold`, exceptions, named tuples, and a script's class instances and dataclasses,
as inputs, results and host-call arguments."""

from __future__ import annotations

import datetime
import pathlib
import zoneinfo
from typing import NamedTuple

import pytest

from corral import ExceptionValue, FileValue, InstanceValue, NamedTupleValue
from corral.monty import monty_v1_pb2 as pb
from corral.monty.codec import ArenaError, decode, encode

from .test_client import binary, monty  # noqa: F401  (fixtures)

pydantic_monty = pytest.importorskip('pydantic_monty')


def test_named_zones_and_fold_cross_both_ways(monty: pydantic_monty.Monty) -> None:  # noqa: F811
    plus2 = datetime.timezone(datetime.timedelta(hours=2), 'PLUS2')
    inputs = {
        'a': datetime.time(1, 2, tzinfo=plus2),
        'b': datetime.time(1, 2, fold=1),
        'c': plus2,
        'd': datetime.datetime(2024, 1, 15, 12, tzinfo=zoneinfo.ZoneInfo('America/New_York')),
    }
    with monty.checkout() as session:
        result = session.feed_run('(a, b, c, d, d.tzname(), b.fold)', inputs=inputs)
    assert repr(result) == (
        "(datetime.time(1, 2, tzinfo=datetime.timezone(datetime.timedelta(seconds=7200), 'PLUS2')), "
        'datetime.time(1, 2, fold=1), '
        "datetime.timezone(datetime.timedelta(seconds=7200), 'PLUS2'), "
        "datetime.datetime(2024, 1, 15, 12, 0, tzinfo=datetime.timezone(datetime.timedelta(days=-1, seconds=68400), 'EST')), "
        "'EST', 1)"
    )


def test_exceptions_cross_both_ways_as_their_classes(monty: pydantic_monty.Monty) -> None:  # noqa: F811
    class MyError(KeyError):
        pass

    code = 'import json\n[(type(e).__name__, e.args) for e in given] + [ValueError("made"), TypeError(), json.JSONDecodeError("Expecting value", "", 0)]'
    with monty.checkout() as session:
        result = session.feed_run(code, inputs={'given': [ValueError('in'), MyError('mine'), RuntimeError()]})
    assert [(type(item), str(item)) if isinstance(item, BaseException) else item for item in result] == [
        ('ValueError', ('in',)),
        ('KeyError', ('mine',)),  # the client sends a class of its own as its nearest built-in base
        ('RuntimeError', ('',)),  # the client sends str() of it: no args and one empty one are alike
        (ValueError, 'made'),
        (TypeError, ''),
        (ValueError, 'Expecting value: line 1 column 1 (char 0)'),  # named json.JSONDecodeError; its fields do not fit the node
    ]


def test_named_tuples_cross_with_their_fields(monty: pydantic_monty.Monty) -> None:  # noqa: F811
    class Item(NamedTuple):
        name: str
        price: float

    with monty.checkout() as session:
        assert session.feed_run('(item.name, item[1], len(item), repr(item), type(item).__module__)', inputs={'item': Item('widget', 9.99)}) == (
            'widget', 9.99, 2, "Item(name='widget', price=9.99)", __name__,  # CPython's repr: the class's name, not its module's
        )
        with pytest.raises(pydantic_monty.MontyRuntimeError) as info:
            session.feed_run('item.nonexistent', inputs={'item': Item('widget', 9.99)})
        assert str(info.value) == "AttributeError: 'Item' object has no attribute 'nonexistent'"
        back = session.feed_run('import collections\nP = collections.namedtuple("P", "first second")\n[P(1, 2), item]', inputs={'item': Item('w', 1.0)})
    assert [(tuple(pair), pair.first if i == 0 else pair.name) for i, pair in enumerate(back)] == [((1, 2), 1), (('w', 1.0), 'w')]


def test_a_scripts_instances_and_dataclasses_arrive_as_read_only_proxies(monty: pydantic_monty.Monty) -> None:  # noqa: F811
    code = '''
import dataclasses
@dataclasses.dataclass
class Order:
    id: int
    tags: list
class Plain:
    def __init__(self):
        self.a, self.order = 1, Order(2, [])
[Order(7, ['a']), Plain(), Order(8, [])]
'''
    with monty.checkout() as session:
        orders = session.feed_run(code)
        assert [(type(o).__name__, o.name, o.is_dataclass, o.attributes) for o in orders[::2]] == [
            ('MontyClassProxy', 'Order', True, {'id': 7, 'tags': ['a']}),
            ('MontyClassProxy', 'Order', True, {'id': 8, 'tags': []}),
        ]
        plain = orders[1]
        assert (plain.name, plain.is_dataclass, plain.attributes['a'], plain.attributes['order'].attributes) == ('Plain', False, 1, {'id': 2, 'tags': []})
        assert len({o.id for o in orders}) == 3  # each instance its own id
        with pytest.raises(pydantic_monty.MontyRuntimeError) as info:  # it names no object the sandbox can find again
            session.feed_run('x', inputs={'x': orders[0]})
        assert str(info.value).startswith('ValueError: the inputs cannot enter the sandbox: node ')


# ----- the codec on its own: forged and odd nodes --------------------------------------------------


def _arena(*nodes: pb.MontyNode) -> pb.Arena:
    return pb.Arena(node_count=len(nodes), nodes=nodes)


def test_exception_and_named_tuple_nodes_decode_to_descriptions() -> None:
    arena = _arena(
        pb.MontyNode(exception=pb.Exception(exc_type='json.JSONDecodeError', arg='m')),
        pb.MontyNode(exception=pb.Exception(exc_type='os.system')),  # no class the sandbox has: an Exception
        pb.MontyNode(exception=pb.Exception(exc_type='print', arg='x')),  # a builtin that is no exception
        pb.MontyNode(int=1),
        pb.MontyNode(named_tuple=pb.NamedTupleNode(type_name='Point', field_names=['x'], values=[3])),
        pb.MontyNode(named_tuple=pb.NamedTupleNode(type_name='a.b.Point', field_names=['x'], values=[3])),
    )
    assert decode(arena, [0, 1, 2, 4, 5]) == [
        ExceptionValue('JSONDecodeError', 'json.decoder', ('m',), 'ValueError'),
        ExceptionValue('os.system', 'builtins', (), 'Exception'),
        ExceptionValue('print', 'builtins', ('x',), 'Exception'),
        (1,),
        (1,),
    ]
    points = decode(arena, [4, 5])
    assert [(p._type_name, p._module, p.x) for p in points] == [('Point', '__main__', 1), ('Point', 'a.b', 1)]
    forged = _arena(pb.MontyNode(int=1), pb.MontyNode(named_tuple=pb.NamedTupleNode(type_name='P', field_names=['x', 'y'], values=[0])))
    with pytest.raises(ArenaError, match='^node 1: a named tuple of 2 names and 1 values$'):
        decode(forged, [1])
    ahead = _arena(pb.MontyNode(named_tuple=pb.NamedTupleNode(type_name='P', field_names=['x'], values=[0])))
    with pytest.raises(ArenaError, match='^node 0 refers to node 0, which does not come before it$'):
        decode(ahead, [0])


def test_descriptions_encode_as_the_nodes_of_their_kinds() -> None:
    arena = pb.Arena()
    values = [
        ExceptionValue('MyError', '__main__', ('mine',), 'KeyError'),  # a class of the script's: its built-in base
        ExceptionValue('JSONDecodeError', 'json.decoder', ('m: line 1 column 1 (char 0)',), 'ValueError'),
        ExceptionValue('ValueError', 'builtins', (10**5000,), 'ValueError'),  # past str()'s digits: a bounded text
        ExceptionValue('UnicodeDecodeError', 'builtins', ('one',), 'UnicodeDecodeError'),  # args its class refuses
        ExceptionValue('TypeError', 'builtins', (), 'TypeError'),
        NamedTupleValue((1,), 'version_info', 'sys', ('major',)),
        InstanceValue('Order', '__main__', {'id': 7}, True),
    ]
    roots = encode(values, arena)
    nodes = [arena.nodes[root] for root in roots]
    assert [(n.exception.exc_type, n.exception.arg if n.exception.HasField('arg') else None) for n in nodes[:5]] == [
        ('KeyError', "'mine'"),
        ('json.JSONDecodeError', 'm: line 1 column 1 (char 0)'),
        ('ValueError', '<int of 16610 bits>'),
        ('UnicodeDecodeError', 'one'),
        ('TypeError', None),
    ]
    assert (nodes[5].named_tuple.type_name, list(nodes[5].named_tuple.field_names)) == ('sys.version_info', ['major'])
    instance = nodes[6].class_instance
    cls = arena.nodes[instance.class_type].type
    assert (cls.name, cls.origin, cls.is_dataclass, len(cls.id.data), len(instance.instance_id.data)) == ('Order', pb.TYPE_ORIGIN_SANDBOX, True, 16, 16)
    assert [(arena.nodes[p.key].str, arena.nodes[p.value].int) for p in instance.attrs.pairs] == [('id', 7)]


def test_path_nodes_decode_to_pure_posix_paths_and_encode_back() -> None:
    arena = _arena(pb.MontyNode(path='/usr//local/bin'), pb.MontyNode(path='rel/x'))
    assert [(type(v), v) for v in decode(arena, [0, 1])] == [
        (pathlib.PurePosixPath, pathlib.PurePosixPath('/usr/local/bin')), (pathlib.PurePosixPath, pathlib.PurePosixPath('rel/x'))
    ]
    out = pb.Arena()
    roots = encode([pathlib.PurePosixPath('/a/b'), pathlib.PureWindowsPath('c:/w')], out)
    assert [out.nodes[root].path for root in roots] == ['/a/b', 'c:/w']


def test_a_path_input_is_the_sandboxs_path_and_returns_as_a_pure_path(monty: pydantic_monty.Monty) -> None:  # noqa: F811
    with monty.checkout() as session:
        result = session.feed_run('(x, type(x).__name__, repr(x / "y"))', inputs={'x': pathlib.PosixPath('/tmp')})
    assert result == (pathlib.PurePosixPath('/tmp'), 'PosixPath', "PosixPath('/tmp/y')")
    assert type(result[0]) is pathlib.PurePosixPath


def test_a_file_description_is_a_file_handle_node_both_ways() -> None:
    out = pb.Arena()
    (root,) = encode([FileValue('/data/a.bin', 'wb', 3)], out)
    assert out.nodes[root].file_handle == pb.FileHandle(path='/data/a.bin', mode='wb', position=3)
    assert decode(out, [root]) == [FileValue('/data/a.bin', 'wb', 3)]
