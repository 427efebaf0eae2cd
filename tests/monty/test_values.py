"""Values of kinds beyond plain data through Monty's client and `corral-monty subprocess`: named
time zones and `fold`, exceptions, named tuples, and a script's class instances and dataclasses,
as inputs, results and host-call arguments."""

from __future__ import annotations

import datetime
import zoneinfo
from typing import NamedTuple

import pytest

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
