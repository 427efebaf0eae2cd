"""Idiomatic scripts still work under the language guard: the guard costs only where a name is risky."""

from __future__ import annotations

import textwrap

import pytest

from .helpers import run

pytestmark = pytest.mark.asyncio(loop_scope='module')

IDIOMS = [
    pytest.param('''
        from dataclasses import dataclass, field, asdict, astuple, replace
        @dataclass(order=True)
        class Item:
            name: str
            price: float = 0.0
            tags: list = field(default_factory=list)
        a = Item('a', 2.0, ['x'])
        b = replace(a, price=1.0)
        (asdict(a), astuple(b), sorted([a, b])[0].price, a == Item('a', 2.0, ['x']))
    ''', ({'name': 'a', 'price': 2.0, 'tags': ['x']}, ('a', 1.0, ['x']), 1.0, True), id='dataclasses'),
    pytest.param('''
        from dataclasses import dataclass
        @dataclass(frozen=True, slots=True)
        class P:
            x: int
            _hidden: int = 0
            def total(self):
                return self.x + self._hidden
        p = P(1, 2)
        try:
            p.x = 3
            frozen = False
        except Exception as e:
            frozen = type(e).__name__
        (p.total(), frozen)
    ''', (3, 'FrozenInstanceError'), id='dataclass-frozen-slots-private-field'),
    pytest.param('''
        class Cache:
            def __init__(self):
                self._cache = {}
                self.__secret = 41
            def get(self, key):
                if key not in self._cache:
                    self._cache[key] = self.__secret + 1
                return self._cache[key]
        c = Cache()
        c._cache['pre'] = 1
        c._cache = dict(c._cache)
        (c.get('a'), c._cache, c._Cache__secret)
    ''', (42, {'pre': 1, 'a': 42}, 41), id='private-attributes-and-mangling'),
    pytest.param('''
        class Base:
            def __init__(self, name):
                self.name = name
        class Child(Base):
            def __init__(self, name, age):
                super().__init__(name)
                self.age = age
            def __repr__(self):
                return f'Child({self.name!r}, {self.age})'
            def __eq__(self, other):
                return isinstance(other, Child) and (self.name, self.age) == (other.name, other.age)
            def __hash__(self):
                return hash((self.name, self.age))
            def __lt__(self, other):
                return self.age < other.age
        kids = [Child('b', 9), Child('a', 3)]
        (repr(min(kids)), Child('a', 3) == Child('a', 3), len({Child('a', 3), Child('a', 3)}), type(kids[0]).__name__)
    ''', ("Child('a', 3)", True, 1, 'Child'), id='super-init-repr-eq-hash-lt'),
    pytest.param('''
        class Temperature:
            def __init__(self):
                self._celsius = 0.0
            @property
            def celsius(self):
                return self._celsius
            @celsius.setter
            def celsius(self, value):
                if value < -273.15:
                    raise ValueError('too cold')
                self._celsius = value
            @property
            def fahrenheit(self):
                return self._celsius * 9 / 5 + 32
        t = Temperature()
        t.celsius = 100
        t.fahrenheit
    ''', 212.0, id='properties'),
    pytest.param('''
        name = 'corral'
        (
            '{:>5}|{:<4}|{:^6}'.format(1, 2, 'x'),
            '{name}!'.format(name='hi'),
            '{0[key]} {1.real}'.format({'key': 'v'}, 3),
            f'{name!r:>10}|{3.14159:.2f}|{1000000:,}',
            '{a}-{b}'.format_map({'a': 1, 'b': 2}),
            str.format('{}+{}', 1, 2),
            '%s=%d' % ('x', 5),
            format(255, '#x'),
        )
    ''', ('    1|2   |  x   ', 'hi!', 'v 3', "  'corral'|3.14|1,000,000", '1-2', '1+2', 'x=5', '0xff'), id='format-strings'),
    pytest.param('''
        from dataclasses import dataclass
        @dataclass
        class Point:
            x: int
            y: int
        @dataclass
        class Circle:
            center: Point
            r: float
        def describe(shape):
            match shape:
                case Point(0, 0):
                    return 'origin'
                case Point(x=0, y=y):
                    return f'on the y axis at {y}'
                case Circle(Point(x, y), r) if r > 1:
                    return f'big circle at {x},{y}'
                case Circle():
                    return 'small circle'
                case [Point() as p, *rest]:
                    return f'{len(rest) + 1} points from {p.x}'
                case {'kind': kind}:
                    return kind
                case int(n) | float(n):
                    return f'number {n}'
                case str() as s:
                    return s.upper()
                case _:
                    return 'unknown'
        [describe(s) for s in [Point(0, 0), Point(0, 5), Circle(Point(1, 2), 3), Circle(Point(1, 2), 1),
                               [Point(7, 1), Point(2, 2)], {'kind': 'map'}, 4, 'x', None]]
    ''', ['origin', 'on the y axis at 5', 'big circle at 1,2', 'small circle', '2 points from 7', 'map', 'number 4', 'X', 'unknown'], id='match-class-patterns'),
    pytest.param('''
        from dataclasses import dataclass
        @dataclass
        class Secret:
            _token: str
        class Pair:
            __match_args__ = ('left', 'right')
            def __init__(self, left, right):
                self.left, self.right = left, right
        def f(v):
            match v:
                case Secret(token):
                    return token
                case Pair(l, r):
                    return l + r
        (f(Secret('t')), f(Pair(1, 2)))
    ''', ('t', 3), id='match-private-field-of-script-class'),
    pytest.param('''
        class User:
            def __init__(self):
                self.name = 'ann'
        u = User()
        setattr(u, 'age', 3)
        (getattr(u, 'name', None), getattr(u, 'missing', None), hasattr(u, 'age'), getattr(u, 'age'))
    ''', ('ann', None, True, 3), id='getattr-setattr-hasattr'),
    pytest.param('''
        import enum
        class Color(enum.Enum):
            RED = 1
            GREEN = 2
            @classmethod
            def _missing_(cls, value):
                return cls.RED
        class Perm(enum.IntFlag):
            R = 4
            W = 2
        (Color(2).name, Color(99).value, Color.RED._value_, list(Color.__members__), int(Perm.R | Perm.W), Color['GREEN'].value)
    ''', ('GREEN', 1, 1, ['RED', 'GREEN'], 6, 2), id='enums'),
    pytest.param('''
        class Suppress:
            def __enter__(self):
                return 'entered'
            def __exit__(self, exc_type, exc, tb):
                return exc_type is ValueError
        with Suppress() as value:
            raise ValueError('hidden')
        log = []
        try:
            with Suppress():
                raise KeyError('shown')
        except KeyError as e:
            log.append(e.args[0])
        finally:
            log.append('finally')
        (value, log)
    ''', ('entered', ['shown', 'finally']), id='with-and-exceptions'),
    pytest.param('''
        import asyncio
        async def work(n):
            await asyncio.sleep(0)
            return n * 2
        async def producer(q):
            for i in range(3):
                await q.put(i)
            await q.put(None)
        async def consumer(q):
            seen = []
            while (item := await q.get()) is not None:
                seen.append(item)
            return seen
        q = asyncio.Queue()
        results = await asyncio.gather(*(work(i) for i in range(3)))
        async with asyncio.TaskGroup() as tg:
            tg.create_task(producer(q))
            c = tg.create_task(consumer(q))
        async with asyncio.timeout(5):
            lock = asyncio.Lock()
            async with lock:
                inside = lock.locked()
        (results, c.result(), inside)
    ''', ([0, 2, 4], [0, 1, 2], True), id='asyncio'),
    pytest.param('''
        import copy
        from dataclasses import dataclass
        @dataclass
        class Node:
            value: int
            children: list
        class Plain:
            def __init__(self):
                self._items = [1, [2]]
        tree = Node(1, [Node(2, [])])
        deep = copy.deepcopy(tree)
        deep.children[0].value = 9
        p = copy.deepcopy(Plain())
        shallow = copy.copy({'a': [1]})
        cyclic = [1]
        cyclic.append(cyclic)
        c2 = copy.deepcopy(cyclic)
        (tree.children[0].value, deep.children[0].value, p._items, shallow, c2[1] is c2)
    ''', (2, 9, [1, [2]], {'a': [1]}, True), id='copy'),
    pytest.param('''
        import functools
        def logged(f):
            @functools.wraps(f)
            def wrapper(*a, **k):
                return f(*a, **k)
            return wrapper
        @logged
        def add(a, b):
            """Adds."""
            return a + b
        @functools.lru_cache(maxsize=None)
        def fib(n):
            return n if n < 2 else fib(n - 1) + fib(n - 2)
        class Circle:
            def __init__(self, r):
                self.r = r
            @functools.cached_property
            def area(self):
                return 3 * self.r * self.r
        @functools.singledispatch
        def kind(x):
            return 'thing'
        @kind.register
        def _(x: int):
            return 'int'
        @kind.register(str)
        def _(x):
            return 'str'
        c = Circle(2)
        (add.__name__, add.__doc__, add(1, 2), fib(30), c.area, c.area, kind(1), kind('a'), kind(1.0),
         functools.reduce(lambda a, b: a * b, [1, 2, 3, 4]), functools.partial(add, 1)(2))
    ''', ('add', 'Adds.', 3, 832040, 12, 12, 'int', 'str', 'thing', 24, 3), id='functools'),
    pytest.param('''
        import operator
        from collections import namedtuple, Counter, defaultdict, deque
        Pt = namedtuple('Pt', 'x y')
        p = Pt(1, 2)
        d = defaultdict(list)
        d['a'].append(1)
        rows = [{'n': 2}, {'n': 1}]
        (p._asdict(), tuple(p._replace(x=5)), Pt._fields, Counter('aab').most_common(1), dict(d), deque([1, 2], maxlen=1)[0],
         sorted(rows, key=operator.itemgetter('n'))[0], operator.attrgetter('x')(p), operator.methodcaller('upper')('a'))
    ''', ({'x': 1, 'y': 2}, (5, 2), ('x', 'y'), [('a', 2)], {'a': [1]}, 2, {'n': 1}, 1, 'A'), id='operator-and-collections'),
    pytest.param('''
        from typing import NamedTuple, TypedDict, Protocol, Generic, TypeVar, runtime_checkable, Optional
        T = TypeVar('T')
        class Emp(NamedTuple):
            name: str
            id: int = 3
        class Movie(TypedDict):
            title: str
        @runtime_checkable
        class Closer(Protocol):
            def close(self) -> None: ...
        class Box(Generic[T]):
            def __init__(self, item: T) -> None:
                self._item = item
            def get(self) -> T:
                return self._item
        class F:
            def close(self):
                pass
        def first(x: Optional[int] = None) -> int:
            return x or 0
        (Emp('a')._asdict(), Movie(title='t'), isinstance(F(), Closer), Box[int](5).get(), first())
    ''', ({'name': 'a', 'id': 3}, {'title': 't'}, True, 5, 0), id='typing'),
    pytest.param('''
        class Registry:
            _registry = {}
            def __init_subclass__(cls, **kwargs):
                super().__init_subclass__(**kwargs)
                Registry._registry[cls.__name__] = cls
                cls._registered = True
        class A(Registry):
            pass
        class Proxy:
            def __init__(self, inner):
                self._inner = inner
            def __getattr__(self, name):
                return getattr(self._inner, name)
        class Counter:
            _count = 0
            def __init__(self):
                Counter._count += 1
        Counter(); Counter()
        (sorted(Registry._registry), A._registered, Proxy([3, 1]).count(1), Counter._count)
    ''', (['A'], True, 1, 2), id='class-patterns-registry-proxy-counter'),
    pytest.param('''
        class Singleton(type):
            _instances = {}
            def __call__(cls, *args, **kwargs):
                if cls not in Singleton._instances:
                    Singleton._instances[cls] = super().__call__(*args, **kwargs)
                return Singleton._instances[cls]
        class Config(metaclass=Singleton):
            pass
        class Celsius(float):
            def __new__(cls, value):
                return super().__new__(cls, round(value, 1))
        class Field:
            def __set_name__(self, owner, name):
                self.name = '_' + name
            def __get__(self, obj, owner=None):
                return getattr(obj, self.name, 'unset')
            def __set__(self, obj, value):
                setattr(obj, self.name, value * 2)
        class Model:
            size = Field()
        m = Model()
        before = m.size
        m.size = 4
        (Config() is Config(), isinstance(Config, type), type(int) is type, Celsius(1.26), before, m.size, m._size)
    ''', (True, True, True, 1.3, 'unset', 8, 8), id='metaclass-new-descriptors'),
    pytest.param('''
        class AppError(Exception):
            def __init__(self, message, code):
                super().__init__(message)
                self._code = code
            @property
            def code(self):
                return self._code
        try:
            try:
                {}['x']
            except KeyError as e:
                raise AppError('missing', 404) from e
        except AppError as e:
            result = (e.code, str(e), type(e.__cause__).__name__, e.__context__ is e.__cause__)
        result
    ''', (404, 'missing', 'KeyError', True), id='exceptions-and-chaining'),
    pytest.param('''
        import json, re, math, datetime, decimal, fractions, statistics, itertools, heapq, bisect, random, string, textwrap, hashlib, base64, uuid, calendar, difflib, unicodedata
        random.seed(1)
        (json.loads(json.dumps({'a': [1, 2]})), re.findall(r'\\d+', 'a1b22'), math.isqrt(17),
         datetime.date(2024, 1, 31).isoformat(), str(decimal.Decimal('1.10') + decimal.Decimal('2.20')),
         str(fractions.Fraction(1, 3) * 3), statistics.mean([1, 2, 3]), list(itertools.accumulate([1, 2, 3])),
         heapq.nsmallest(2, [5, 1, 3]), bisect.bisect([1, 3, 5], 4), string.Template('$x!').substitute(x='hi'),
         textwrap.shorten('hello world again', 11), hashlib.sha256(b'x').hexdigest()[:8], base64.b64encode(b'hi'),
         len(str(uuid.uuid4())), calendar.isleap(2024), difflib.get_close_matches('appel', ['apple', 'peach'])[0],
         unicodedata.name('a'), type(random.random()).__name__)
    ''', ({'a': [1, 2]}, ['1', '22'], 4, '2024-01-31', '3.30', '1', 2, [1, 3, 6], [1, 3], 2, 'hi!', 'hello [...]',
          '2d711642', b'aGk=', 36, True, 'apple', 'LATIN SMALL LETTER A', 'float'), id='stdlib-modules'),
    pytest.param('''
        result = []
        if __name__ == '__main__':
            result.append('main')
        class S:
            __slots__ = ('a', '_b')
            def __init__(self):
                self.a = 1
                self._b = 2
        s = S()
        s._b += 1
        del s._b
        result.append(hasattr(s, '_b'))
        result.append('append' in dir([]))
        result
    ''', ['main', False, True], id='main-slots-dir'),
    # ----- the dunders a model reads and sets of its own objects ----------------------------------
    pytest.param('''
        from dataclasses import dataclass, field
        @dataclass(frozen=True)
        class Box:
            width: float
            height: float
            area: float = field(init=False)
            def __post_init__(self):
                object.__setattr__(self, 'area', self.width * self.height)
        b = Box(2.0, 3.5)
        try:
            b.area = 1
            frozen = False
        except Exception as e:
            frozen = type(e).__name__
        (b.area, repr(b), frozen)
    ''', (7.0, 'Box(width=2.0, height=3.5, area=7.0)', 'FrozenInstanceError'), id='frozen-dataclass-post-init-setattr'),
    pytest.param('''
        class Record:
            def __init__(self):
                super().__setattr__('x', 1)
                self.__setattr__('y', 2)
                object.__setattr__(self, '_z', 3)
            def drop(self):
                object.__delattr__(self, 'y')
                self.__delattr__('_z')
        r = Record()
        before = (r.x, r.y, r._z)
        r.drop()
        (before, sorted(vars(r)), hasattr(r, '__setattr__'))
    ''', ((1, 2, 3), ['x'], True), id='setattr-delattr-own-objects'),
    pytest.param('''
        from dataclasses import dataclass
        from typing import NamedTuple, TypedDict
        class C:
            a: int
            b: str = 'x'
        def f(x: int, y: 'str') -> bool:
            return True
        @dataclass
        class Point:
            x: int
            y: int = 0
        class V(NamedTuple):
            a: int
            b: float
        class T(TypedDict, total=False):
            a: int
        class U(T, total=True):
            b: str
        vi = V(1, 2.0)
        (C.__annotations__ == {'a': int, 'b': str}, f.__annotations__['y'], list(Point.__dataclass_fields__),
         Point(1).__dataclass_fields__['y'].default, vi.__getnewargs__(), sorted(U.__optional_keys__),
         sorted(U.__required_keys__), T.__total__, Point.__dataclass_params__.frozen)
    ''', (True, 'str', ['x', 'y'], 0, (1, 2.0), ['a'], ['b'], False, False), id='annotations-fields-keys-of-own-classes'),
    pytest.param('''
        import functools
        def logged(func):
            @functools.wraps(func)
            def wrapper(*args):
                return func(*args) * 10
            return wrapper
        @logged
        def double(x):
            return 2 * x
        @functools.cache
        def fib(n):
            return n if n < 2 else fib(n - 1) + fib(n - 2)
        @functools.singledispatch
        def show(x):
            return 'any'
        (double(1), double.__wrapped__(1), double.__name__, fib(20), fib.__wrapped__(5), show.__wrapped__(1))
    ''', (20, 2, 'double', 6765, 5, 'any'), id='wrapped-functions-of-the-script'),
    pytest.param('''
        class Named:
            __name__ = 'custom'
            __qualname__ = 'Outer.Named'
        A = type('A', (), {'x': 1, 'double': lambda self: self.x * 2, '__repr__': lambda self: 'A!'})
        B = type('B', (A,), {})
        (Named().__name__, Named.__qualname__, A.x, A().double(), repr(B()), B.__name__, [c.__name__ for c in B.mro()])
    ''', ('custom', 'Outer.Named', 1, 2, 'A!', 'B', ['B', 'A', 'object']), id='class-body-name-and-type-three-args'),
    pytest.param('''
        def with_init(*names):
            def decorate(cls):
                def __init__(self, *values):
                    for name, value in zip(names, values):
                        setattr(self, name, value)
                def __repr__(self):
                    return f'{type(self).__name__}({", ".join(repr(getattr(self, n)) for n in names)})'
                cls.__init__ = __init__
                setattr(cls, '__repr__', __repr__)
                cls.__eq__ = lambda self, other: vars(self) == vars(other)
                return cls
            return decorate
        @with_init('x', 'y')
        class P:
            pass
        class Q:
            pass
        Q.__getattr__ = lambda self, name: name.upper()
        (repr(P(1, 2)), P(1, 2) == P(1, 2), Q().hello, hasattr(Q(), '__array_interface__'))
    ''', ('P(1, 2)', True, 'HELLO', False), id='class-decorator-sets-methods'),
]


@pytest.mark.parametrize('code, expected', IDIOMS)
async def test_idiomatic_code_runs(pool, code, expected):
    assert await run(pool, textwrap.dedent(code).strip() + '\n') == expected
