"""Stubs for the functions a script can call: from Python signatures, and from JSON schemas."""

import dataclasses
import datetime
import decimal
import enum
import pathlib
import uuid
from typing import Literal, NotRequired, TypedDict

import pytest

from corral.integrations.stubs import SchemaFunction, StubWriter, python_name, stubs_from_functions


class Order(TypedDict):
    """An order."""

    id: str
    status: Literal['shipped', 'pending']
    note: NotRequired[str | None]


@dataclasses.dataclass
class Point:
    x: float
    y: float


class Color(enum.Enum):
    RED = 'red'
    BLUE = 'blue'


async def get_order(order_id: str) -> dict:
    """Return one order, with its `status` and number of `items`."""


async def find(q: str, *, limit: int = 10, color: Color = Color.RED, since: datetime.date | None = None) -> list[Order]:
    """Find orders.

    Args:
        q: words to look for
    """


def move(p: Point, /, by: tuple[int, ...] = (1, 1)) -> Point: ...


def untyped(a, b=2):
    pass


def test_stubs_from_python_functions():
    stubs = stubs_from_functions({'get_order': get_order, 'find': find, 'move': move, 'untyped': untyped})
    assert stubs == '''import datetime
from typing import Any, Literal, NotRequired, TypedDict


class Order(TypedDict):
    """An order."""
    id: str
    status: Literal['shipped', 'pending']
    note: NotRequired[str | None]


class Point(TypedDict):
    x: float
    y: float


async def get_order(order_id: str) -> dict:
    """Return one order, with its `status` and number of `items`."""


async def find(q: str, *, limit: int = 10, color: Literal['red', 'blue'] = 'red', since: datetime.date | None = None) -> list[Order]:
    """Find orders.

    Args:
        q: words to look for
    """


def move(p: Point, /, by: tuple[int, ...] = (1, 1)) -> Point:
    ...


def untyped(a: Any, b: Any = 2) -> Any:
    ...
'''


class Size(enum.Enum):
    SMALL = 1.5
    PAIR = (2, 'x')


def price(item: uuid.UUID, report: pathlib.Path, size: Size) -> decimal.Decimal: ...


def report_path(folder: pathlib.PurePath) -> pathlib.PurePosixPath: ...


def test_a_path_taken_is_text_and_one_returned_the_sandboxs_path():
    assert stubs_from_functions({'report_path': report_path}) == '''import pathlib


def report_path(folder: str) -> pathlib.Path:
    ...
'''


def test_values_are_stubbed_as_they_cross_the_boundary():
    # Decimal and UUID as themselves, a path taken as its text, an enum member as its value
    assert stubs_from_functions({'price': price}) == '''import decimal
import uuid


def price(item: uuid.UUID, report: str, size: float | tuple) -> decimal.Decimal:
    ...
'''


@pytest.mark.asyncio
async def test_values_arrive_as_their_stubs_say(pool):
    async def lookup(item, report, size):
        return [decimal.Decimal('9.99'), item, pathlib.Path(report) / 'q1.csv', Size.PAIR]

    code = """
import decimal, uuid
price, item, path, size = await lookup(uuid.UUID(int=1), '/srv', 1.5)
(price + decimal.Decimal('0.01'), item.version, type(path).__name__, path.name.upper(), size)
"""
    async with pool.checkout() as session:
        assert await session.feed_run(code, external_lookup={'lookup': lookup}) == (decimal.Decimal('10.00'), None, 'PosixPath', 'Q1.CSV', (2, 'x'))


def test_seed_000_stub_is_reproduced():
    assert stubs_from_functions({'get_order': get_order}) == (
        'async def get_order(order_id: str) -> dict:\n'
        '    """Return one order, with its `status` and number of `items`."""\n'
    )


def test_names_become_identifiers():
    assert python_name('get-weather') == 'get_weather'
    assert python_name('api.call') == 'api_call'
    assert python_name('2fa') == '_2fa'
    assert python_name('class') == 'class_'
    assert python_name('match') == 'match'


def test_two_functions_with_one_sandbox_name_are_refused():
    with pytest.raises(ValueError, match="two functions are both named 'get_x'"):
        stubs_from_functions({'get-x': get_order, 'get_x': get_order})


WEATHER_PARAMETERS = {
    'type': 'object',
    'properties': {
        'city': {'type': 'string', 'description': 'The city'},
        'unit': {'enum': ['c', 'f'], 'default': 'f', 'type': 'string'},
        'options': {'$ref': '#/$defs/Options'},
        'from': {'type': 'integer'},
    },
    'required': ['city', 'from'],
    '$defs': {
        'Options': {
            'type': 'object',
            'title': 'Options',
            'description': 'How to report.',
            'properties': {'detailed': {'type': 'boolean'}, 'first-name': {'type': ['string', 'null']}},
            'required': ['detailed'],
        }
    },
}
WEATHER_RESULT = {
    'type': 'object',
    'properties': {
        'temp': {'type': 'number', 'description': 'degrees'},
        'tags': {'type': 'array', 'items': {'type': 'string'}},
        'kind': {'anyOf': [{'const': 'sun'}, {'const': 'rain'}, {'type': 'null'}]},
    },
    'required': ['temp'],
}


def test_stubs_from_json_schemas():
    writer = StubWriter()
    function = writer.add_schema_function(
        'get-weather', parameters=WEATHER_PARAMETERS, returns=WEATHER_RESULT, description='Get the weather.'
    )
    writer.add_schema_function('ping', parameters={'type': 'object', 'properties': {}}, returns=None, description=None)
    assert writer.render() == '''from typing import Any, Literal, NotRequired, TypedDict


Options = TypedDict('Options', {'detailed': bool, 'first-name': NotRequired[str | None]})


class GetWeatherResult(TypedDict):
    temp: float  # degrees
    tags: NotRequired[list[str]]
    kind: NotRequired[Literal['sun'] | Literal['rain'] | None]


async def get_weather(city: str, unit: Literal['c', 'f'] = 'f', options: Options = ..., *, from_: int) -> GetWeatherResult:
    """Get the weather.

    Args:
        city: The city
    """


async def ping() -> Any:
    ...
'''
    assert function == SchemaFunction(
        name='get_weather',
        params=(('city', 'city'), ('unit', 'unit'), ('options', 'options'), ('from_', 'from')),
        positional=3,
    )


def test_schema_function_maps_python_arguments_back_to_the_tool():
    function = StubWriter().add_schema_function('get-weather', parameters=WEATHER_PARAMETERS)
    assert function.arguments(('Paris',), {'from_': 3}) == {'city': 'Paris', 'from': 3}
    with pytest.raises(TypeError, match=r'get_weather\(\) takes 3 positional arguments but 4 were given'):
        function.arguments(('a', 'c', {}, 1), {})
    with pytest.raises(TypeError, match="unexpected keyword argument 'town'"):
        function.arguments((), {'town': 'x'})
    with pytest.raises(TypeError, match="multiple values for argument 'city'"):
        function.arguments(('a',), {'city': 'b'})


def test_recursive_and_shared_schemas_define_one_typeddict():
    node = {
        'type': 'object',
        'properties': {'tree': {'$ref': '#/$defs/Node'}, 'other': {'$ref': '#/$defs/Node'}},
        'required': ['tree', 'other'],
        '$defs': {
            'Node': {
                'type': 'object',
                'title': 'Node',
                'properties': {'value': {'type': 'integer'}, 'children': {'type': 'array', 'items': {'$ref': '#/$defs/Node'}}},
                'required': ['value', 'children'],
            }
        },
    }
    writer = StubWriter()
    writer.add_schema_function('walk', parameters=node, returns={'type': 'array', 'items': {'type': 'integer'}})
    assert writer.render() == '''from typing import TypedDict


class Node(TypedDict):
    value: int
    children: list[Node]


async def walk(tree: Node, other: Node) -> list[int]:
    ...
'''
