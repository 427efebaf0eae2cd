"""Conformance cases: the constructs a script may use (docs/sandbox-language.md, "Syntax")."""

from __future__ import annotations

import sys

from .runner import case

CASES = [
    # ----- functions ---------------------------------------------------------------------------------
    case('function-defaults-args-kwargs', '''
        def f(a, b=2, *args, c, d=4, **kwargs):
            return (a, b, args, c, d, kwargs)
        (f(1, c=3), f(1, 2, 3, 4, c=5, e=6))
    ''', ((1, 2, (), 3, 4, {}), (1, 2, (3, 4), 5, 4, {'e': 6}))),
    case('function-positional-only', '''
        def f(a, b, /, c):
            return a + b + c
        try:
            f(a=1, b=2, c=3)
        except TypeError as e:
            message = str(e)
        (f(1, 2, c=3), message)
    ''', (6, "f() got some positional-only arguments passed as keyword arguments: 'a, b'")),
    case('function-closures-nonlocal', '''
        def counter():
            count = 0
            def step(by=1):
                nonlocal count
                count += by
                return count
            return step
        c = counter()
        [c(), c(), c(10)]
    ''', [1, 2, 12]),
    case('function-global', '''
        total = 0
        def add(x):
            global total
            total += x
        for i in range(5):
            add(i)
        total
    ''', 10),
    case('function-lambdas-sorted-key', '''
        people = [('ann', 31), ('bob', 25), ('cid', 31)]
        (sorted(people, key=lambda p: (-p[1], p[0])), list(map(lambda x: x * 2, [1, 2])), (lambda *a, **k: (a, k))(1, x=2))
    ''', ([('ann', 31), ('cid', 31), ('bob', 25)], [2, 4], ((1,), {'x': 2}))),
    case('function-decorators', '''
        import functools
        calls = []
        def logged(prefix):
            def decorate(func):
                @functools.wraps(func)
                def wrapper(*args, **kwargs):
                    calls.append(f'{prefix}{func.__name__}{args}')
                    return func(*args, **kwargs)
                return wrapper
            return decorate
        @logged('> ')
        def square(x):
            """Square a number."""
            return x * x
        (square(3), square.__name__, square.__doc__, calls)
    ''', (9, 'square', 'Square a number.', ['> square(3,)'])),
    case('function-recursion', '''
        def fib(n):
            return n if n < 2 else fib(n - 1) + fib(n - 2)
        def flatten(items):
            for item in items:
                if isinstance(item, list):
                    yield from flatten(item)
                else:
                    yield item
        (fib(20), list(flatten([1, [2, [3, [4]]], 5])))
    ''', (6765, [1, 2, 3, 4, 5])),
    case('function-annotations', '''
        from typing import Optional
        def greet(name: str, times: int = 1, *, sep: Optional[str] = None) -> str:
            return (sep or ' ').join([f'hello {name}'] * times)
        x: int = 5
        y: list[dict[str, int]] = [{'a': 1}]
        (greet('ann', 2), greet('bob', sep='-'), x, y)
    ''', ('hello ann hello ann', 'hello bob', 5, [{'a': 1}])),
    # ----- classes -----------------------------------------------------------------------------------
    case('class-methods-properties', '''
        class Account:
            interest = 0.05
            def __init__(self, owner, balance=0):
                self.owner = owner
                self._balance = balance
            @property
            def balance(self):
                return self._balance
            @balance.setter
            def balance(self, value):
                if value < 0:
                    raise ValueError('negative balance')
                self._balance = value
            @classmethod
            def empty(cls, owner):
                return cls(owner)
            @staticmethod
            def rate():
                return Account.interest
            def __repr__(self):
                return f'Account({self.owner!r}, {self._balance})'
        a = Account.empty('ann')
        a.balance = 10
        try:
            a.balance = -1
        except ValueError as e:
            error = str(e)
        (repr(a), a.balance, Account.rate(), error)
    ''', ("Account('ann', 10)", 10, 0.05, 'negative balance')),
    case('class-inheritance-super', '''
        class Shape:
            def __init__(self, name):
                self.name = name
            def area(self):
                raise NotImplementedError
            def describe(self):
                return f'{self.name} with area {self.area():.1f}'
        class Rect(Shape):
            def __init__(self, w, h):
                super().__init__('rect')
                self.w, self.h = w, h
            def area(self):
                return self.w * self.h
        class Square(Rect):
            def __init__(self, side):
                super().__init__(side, side)
                self.name = 'square'
        shapes = [Rect(2, 3), Square(2)]
        ([s.describe() for s in shapes], isinstance(shapes[1], Shape), issubclass(Square, Rect), [c.__name__ for c in Square.mro()])
    ''', (['rect with area 6.0', 'square with area 4.0'], True, True, ['Square', 'Rect', 'Shape', 'object'])),
    case('class-dunder-methods', '''
        from functools import total_ordering
        @total_ordering
        class Money:
            def __init__(self, cents):
                self.cents = cents
            def __add__(self, other):
                return Money(self.cents + other.cents)
            def __radd__(self, other):
                return self if other == 0 else self + other
            def __eq__(self, other):
                return isinstance(other, Money) and self.cents == other.cents
            def __lt__(self, other):
                return self.cents < other.cents
            def __hash__(self):
                return hash(self.cents)
            def __str__(self):
                return f'${self.cents / 100:.2f}'
            def __bool__(self):
                return self.cents != 0
            def __len__(self):
                return len(str(self))
        values = [Money(150), Money(25), Money(300)]
        (str(sum(values)), str(max(values)), Money(1) <= Money(2), bool(Money(0)), len(Money(1234)), len({Money(1), Money(1)}))
    ''', ('$4.75', '$3.00', True, False, 6, 1)),
    case('class-container-protocol', '''
        class Bag:
            def __init__(self, *items):
                self._items = list(items)
            def __len__(self):
                return len(self._items)
            def __getitem__(self, index):
                return self._items[index]
            def __setitem__(self, index, value):
                self._items[index] = value
            def __contains__(self, item):
                return item in self._items
            def __iter__(self):
                return iter(self._items)
            def __reversed__(self):
                return reversed(self._items)
        b = Bag(1, 2, 3)
        b[0] = 10
        (len(b), b[1:], 2 in b, list(b), list(reversed(b)))
    ''', (3, [2, 3], True, [10, 2, 3], [3, 2, 10])),
    case('class-iterator-protocol', '''
        class Countdown:
            def __init__(self, start):
                self.current = start
            def __iter__(self):
                return self
            def __next__(self):
                if self.current <= 0:
                    raise StopIteration
                self.current -= 1
                return self.current + 1
        list(Countdown(4))
    ''', [4, 3, 2, 1]),
    case('class-slots-and-class-attributes', '''
        class Point:
            __slots__ = ('x', 'y')
            dims = 2
            def __init__(self, x, y):
                self.x, self.y = x, y
        p = Point(1, 2)
        try:
            p.z = 3
        except AttributeError:
            refused = True
        (p.x, p.y, Point.dims, refused)
    ''', (1, 2, 2, True)),
    case('class-abc', '''
        from abc import ABC, abstractmethod
        class Base(ABC):
            def __init__(self):
                self._cache = {}
            @abstractmethod
            def run(self): ...
        class Impl(Base):
            def run(self):
                self._cache['x'] = 1
                return self._cache
        try:
            Base()
        except TypeError as e:
            error = str(e)
        (Impl().run(), error)
    ''', ({'x': 1}, "Can't instantiate abstract class Base without an implementation for abstract method 'run'" if sys.version_info >= (3, 12)
          else "Can't instantiate abstract class Base with abstract method run")),
    case('class-dataclasses', '''
        from dataclasses import dataclass, field, asdict
        @dataclass(order=True)
        class Item:
            name: str
            price: float = 0.0
            tags: list[str] = field(default_factory=list)
            def total(self, quantity: int) -> float:
                return self.price * quantity
        @dataclass(frozen=True)
        class Point:
            x: int
            y: int
        items = sorted([Item('b', 2.0), Item('a', 3.0, ['x'])])
        try:
            Point(1, 2).x = 5
        except Exception as e:
            frozen = type(e).__name__
        (repr(items[0]), asdict(items[1]), items[0].total(3), Point(1, 2) == Point(1, 2), frozen, hash(Point(1, 2)) == hash(Point(1, 2)))
    ''', ("Item(name='a', price=3.0, tags=['x'])", {'name': 'b', 'price': 2.0, 'tags': []}, 9.0, True, 'FrozenInstanceError', True)),
    case('class-enums', '''
        from enum import Enum, IntEnum, Flag, auto
        class Color(Enum):
            RED = 'r'
            GREEN = 'g'
        class Level(IntEnum):
            LOW = 1
            HIGH = 2
        class Perm(Flag):
            R = auto()
            W = auto()
        (Color('r').name, Color.GREEN.value, [c.name for c in Color], Level.HIGH > Level.LOW, Level(2) + 1, str(Perm.R | Perm.W), Color['RED'] is Color.RED)
    ''', ('RED', 'g', ['RED', 'GREEN'], True, 3, 'Perm.R|W', True)),
    case('class-namedtuple-typeddict-protocol', '''
        from typing import NamedTuple, TypedDict, Protocol
        from collections import namedtuple
        class P(NamedTuple):
            x: int
            y: int = 0
        Q = namedtuple('Q', 'a b')
        class Movie(TypedDict):
            title: str
            year: int
        class Greeter(Protocol):
            def greet(self) -> str: ...
        class En:
            def greet(self) -> str:
                return 'hi'
        def welcome(g: Greeter) -> str:
            return g.greet()
        m: Movie = {'title': 'x', 'year': 1999}
        (tuple(P(1)), P(1, 2)._asdict(), Q(1, 2).b, m, welcome(En()), tuple(P(3)._replace(y=4)), P(1, 2).x)
    ''', ((1, 0), {'x': 1, 'y': 2}, 2, {'title': 'x', 'year': 1999}, 'hi', (3, 4), 1)),
    # ----- generators and comprehensions -----------------------------------------------------------
    case('generators-yield-from-send', '''
        def gen():
            received = yield 1
            yield received * 2
            return 'done'
        def outer():
            result = yield from gen()
            yield result
        g = outer()
        (next(g), g.send(21), next(g), list(x * x for x in range(4)))
    ''', (1, 42, 'done', [0, 1, 4, 9])),
    case('comprehensions', '''
        matrix = [[1, 2, 3], [4, 5, 6]]
        (
            [x for row in matrix for x in row if x % 2],
            {x: x ** 2 for x in range(4)},
            {c for c in 'hello'},
            [[row[i] for row in matrix] for i in range(3)],
            sum(x for x in range(10)),
        )
    ''', ([1, 3, 5], {0: 0, 1: 1, 2: 4, 3: 9}, {'h', 'e', 'o', 'l'}, [[1, 4], [2, 5], [3, 6]], 45)),
    # ----- control flow ----------------------------------------------------------------------------
    case('try-except-else-finally', '''
        log = []
        def attempt(x):
            try:
                result = 10 / x
            except ZeroDivisionError as e:
                log.append(f'error: {e}')
                return None
            else:
                log.append('ok')
                return result
            finally:
                log.append('finally')
        (attempt(2), attempt(0), log)
    ''', (5.0, None, ['ok', 'finally', 'error: division by zero', 'finally'])),
    case('exceptions-custom-chained-groups', '''
        class AppError(Exception):
            def __init__(self, code, message):
                super().__init__(message)
                self.code = code
        try:
            try:
                {}['missing']
            except KeyError as e:
                raise AppError(404, 'not found') from e
        except AppError as e:
            chained = (e.code, str(e), type(e.__cause__).__name__)
        try:
            raise ExceptionGroup('many', [ValueError('a'), TypeError('b')])
        except* ValueError as group:
            values = [str(x) for x in group.exceptions]
        except* TypeError as group:
            types = [str(x) for x in group.exceptions]
        (chained, values, types)
    ''', ((404, 'not found', 'KeyError'), ['a'], ['b'])),
    case('raise-uncaught', '''
        def check(x):
            if x < 0:
                raise ValueError(f'x must be positive, got {x}')
        check(-5)
    ''', raises='ValueError: x must be positive, got -5'),
    case('assert-statement', '''
        assert 1 + 1 == 3, 'math is broken'
    ''', raises='AssertionError: math is broken'),
    case('with-statement', '''
        from contextlib import contextmanager
        events = []
        class Managed:
            def __enter__(self):
                events.append('enter')
                return self
            def __exit__(self, exc_type, exc, tb):
                events.append(f'exit {exc_type.__name__ if exc_type else None}')
                return exc_type is KeyError
        @contextmanager
        def tag(name):
            events.append(f'<{name}>')
            yield name.upper()
            events.append(f'</{name}>')
        with Managed() as m, tag('b') as t:
            events.append(t)
        with Managed():
            raise KeyError('swallowed')
        events
    ''', ['enter', '<b>', 'B', '</b>', 'exit None', 'enter', 'exit KeyError']),
    case('match-statement', '''
        from dataclasses import dataclass
        @dataclass
        class Point:
            x: int
            y: int
        def describe(value):
            match value:
                case 0 | 1:
                    return 'small int'
                case int(n) if n < 0:
                    return f'negative {n}'
                case [x, y, *rest]:
                    return f'list starting {x}, {y} (+{len(rest)})'
                case {'type': 'user', 'name': str(name)}:
                    return f'user {name}'
                case Point(x=0, y=y):
                    return f'on the y axis at {y}'
                case Point(x, y):
                    return f'point {x},{y}'
                case str() as s:
                    return f'string {s!r}'
                case _:
                    return 'other'
        [describe(v) for v in [1, -3, [1, 2, 3, 4], {'type': 'user', 'name': 'ann'}, Point(0, 5), Point(1, 2), 'x', 2.5]]
    ''', ['small int', 'negative -3', 'list starting 1, 2 (+2)', 'user ann', 'on the y axis at 5', 'point 1,2', "string 'x'", 'other']),
    case('loops-else-break-continue', '''
        found = []
        for n in range(2, 20):
            for d in range(2, n):
                if n % d == 0:
                    break
            else:
                found.append(n)
        i = 0
        odd = []
        while i < 10:
            i += 1
            if i % 2 == 0:
                continue
            odd.append(i)
        (found, odd)
    ''', ([2, 3, 5, 7, 11, 13, 17, 19], [1, 3, 5, 7, 9])),
    # ----- expressions -----------------------------------------------------------------------------
    case('f-strings', '''
        name, value, ratio = 'total', 1234567.891, 0.4567
        items = ['a', 'b']
        (
            f'{name}: {value:,.2f}',
            f'{ratio:.1%}',
            f'{name!r:>10}|',
            f'{value=:.1f}',
            f'{len(items)} items: {", ".join(items)}',
            f'{{literal}} {3 + 4}',
            f'{255:#x} {255:08b} {"x":*^5}',
        )
    ''', ('total: 1,234,567.89', '45.7%', "   'total'|", 'value=1234567.9', '2 items: a, b', '{literal} 7', '0xff 11111111 **x**')),
    case('walrus-and-star-unpacking', '''
        data = [1, 2, 3, 4, 5]
        if (n := len(data)) > 3:
            size = n
        first, *middle, last = data
        head, (a, b) = 'x', (1, 2)
        merged = {**{'a': 1}, **{'b': 2}}
        combined = [*data[:2], *'ab']
        def f(*args, **kwargs):
            return args, kwargs
        (size, first, middle, last, a, b, merged, combined, f(*[1, 2], **{'k': 3}), [y for x in data if (y := x * 2) > 6])
    ''', (5, 1, [2, 3, 4], 5, 1, 2, {'a': 1, 'b': 2}, [1, 2, 'a', 'b'], ((1, 2), {'k': 3}), [8, 10])),
    case('builtins-common', '''
        words = ['apple', 'Banana', 'cherry']
        (
            len(words), sorted(words, key=str.lower), list(reversed(words)), list(enumerate(words, 1)),
            list(zip(words, [1, 2, 3], strict=True)), dict(zip('ab', (1, 2))), any(w.startswith('c') for w in words),
            all(words), sum([1.5, 2.5]), min(3, 1, 2), max(words, key=len), abs(-3), round(2.675, 2), divmod(17, 5),
            pow(2, 10, 1000), list(filter(None, [0, 1, '', 'a'])), list(map(str.upper, words)), chr(65), ord('A'),
            hex(255), oct(8), bin(5), int('ff', 16), float('1e3'), str(b'x', 'ascii'), bytes([65, 66]), bytearray(b'ab'),
            repr('x'), ascii('é'), format(1234.5, ',.1f'), isinstance(1, (int, float)), issubclass(bool, int),
            callable(len), hash(1) == hash(1.0), type(1).__name__, list(range(10, 0, -3)), slice(1, 5, 2).indices(10),
            frozenset({1, 2}) | {3}, str(complex(1, 2) * 2), iter([1]).__next__(), next(iter([]), 'default'),
            [*map(lambda a, b: a + b, [1, 2], [10, 20])], getattr(words, 'count')('apple'), hasattr(words, 'nope'),
            id(words) == id(words),
        )
    ''', (3, ['apple', 'Banana', 'cherry'], ['cherry', 'Banana', 'apple'], [(1, 'apple'), (2, 'Banana'), (3, 'cherry')], [('apple', 1), ('Banana', 2), ('cherry', 3)], {'a': 1, 'b': 2}, True, True, 4.0, 1, 'Banana', 3, 2.67, (3, 2), 24, [1, 'a'], ['APPLE', 'BANANA', 'CHERRY'], 'A', 65, '0xff', '0o10', '0b101', 255, 1000.0, 'x', b'AB', b'ab', "'x'", "'\\xe9'", '1,234.5', True, True, True, True, 'int', [10, 7, 4, 1], (1, 5, 2), frozenset({1, 2, 3}), '(2+4j)', 1, 'default', [11, 22], 1, False, True)),
    case('builtins-reflection', '''
        class C:
            def __init__(self):
                self.a = 1
        c = C()
        setattr(c, 'b', 2)
        delattr(c, 'a')
        (getattr(c, 'b'), hasattr(c, 'a'), getattr(c, 'missing', 'default'), sorted(n for n in dir(c) if not n.startswith('_')), isinstance(c, C))
    ''', (2, False, 'default', ['b'], True)),
    case('exception-classes', '''
        names = [
            ArithmeticError, AssertionError, AttributeError, BlockingIOError, BrokenPipeError, BufferError,
            ChildProcessError, ConnectionAbortedError, ConnectionError, ConnectionRefusedError, ConnectionResetError,
            EOFError, EnvironmentError, FileExistsError, FileNotFoundError, FloatingPointError, GeneratorExit,
            IOError, ImportError, IndentationError, IndexError, InterruptedError, IsADirectoryError, KeyError,
            KeyboardInterrupt, LookupError, MemoryError, ModuleNotFoundError, NameError, NotADirectoryError,
            NotImplementedError, OSError, OverflowError, PermissionError, ProcessLookupError, RecursionError,
            ReferenceError, RuntimeError, StopAsyncIteration, StopIteration, SyntaxError, SystemError, SystemExit,
            TabError, TimeoutError, TypeError, UnboundLocalError, UnicodeDecodeError, UnicodeEncodeError,
            UnicodeError, UnicodeTranslateError, ValueError, ZeroDivisionError, BaseException, Exception,
            BaseExceptionGroup, ExceptionGroup, Warning, UserWarning, DeprecationWarning, PendingDeprecationWarning,
            SyntaxWarning, RuntimeWarning, FutureWarning, ImportWarning, UnicodeWarning, BytesWarning,
            ResourceWarning, EncodingWarning,
        ]
        caught = []
        for cls in [ValueError, KeyError, PermissionError, ZeroDivisionError, StopIteration]:
            try:
                raise cls('boom')
            except Exception as e:
                caught.append(type(e).__name__)
        (len(names), all(issubclass(n, BaseException) for n in names), caught, issubclass(PermissionError, OSError))
    ''', (69, True, ['ValueError', 'KeyError', 'PermissionError', 'ZeroDivisionError', 'StopIteration'], True)),
    case('strings-bytes-numbers', '''
        s = '  Hello, World  '
        (
            s.strip().lower(), s.split(','), '-'.join(['a', 'b']), 'abc'.replace('b', 'x'), 'a,b,,c'.split(','),
            'Title case words'.title(), 'abc'.center(7, '*'), 'x'.zfill(3), 'abc'[::-1], 'hello world'.count('o'),
            'ünïcode'.encode('utf-8'), b'\\xc3\\xa9'.decode(), 'ß'.casefold(), '{:>5}|{:<5}|'.format('a', 'b'),
            '%s=%d' % ('x', 5), 2 ** 100, 7 // 2, -7 // 2, 7 % 3, 0.1 + 0.2, round(0.1 + 0.2, 10), int(3.9),
            1_000_000, 0xff, 1e-3, float('inf') > 10**300, (3).bit_length(), (255).to_bytes(2, 'big'),
            int.from_bytes(b'\\x01\\x00', 'little'), 10 / 4, True + True, 'a' < 'b' < 'c', 1 < 2 > 1.5,
            'x' if 3 > 2 else 'y', [1, 2, 3][-1], [1, 2, 3, 4, 5][1:4:2],
        )
    ''', ('hello, world', ['  Hello', ' World  '], 'a-b', 'axc', ['a', 'b', '', 'c'], 'Title Case Words', '**abc**', '00x', 'cba', 2, b'\xc3\xbcn\xc3\xafcode', 'é', 'ss', '    a|b    |', 'x=5', 1267650600228229401496703205376, 3, -4, 1, 0.30000000000000004, 0.3, 3, 1000000, 255, 0.001, True, 2, b'\x00\xff', 1, 2.5, 2, True, True, 'x', 3, [2, 4])),
    case('collections-builtin-ops', '''
        d = {'b': 2, 'a': 1}
        d['c'] = 3
        d.update(z=26)
        del d['b']
        s = {1, 2, 3}
        s.add(4)
        s.discard(1)
        l = [3, 1, 2]
        l.sort()
        l.append(4)
        l.extend([5])
        l.insert(0, 0)
        popped = l.pop()
        (
            d, list(d.keys()), list(d.items())[0], d.get('x', 0), d.setdefault('y', []), sorted(s), s & {2, 9},
            s - {2}, l, popped, l.index(3), [1, 2] * 2, (1, 2) + (3,), {**d, 'a': 100}['a'], d | {'q': 1},
            list(dict.fromkeys('aab')),
        )
    ''', ({'a': 1, 'c': 3, 'z': 26, 'y': []}, ['a', 'c', 'z'], ('a', 1), 0, [], [2, 3, 4], {2}, {3, 4}, [0, 1, 2, 3, 4], 5, 3, [1, 2, 1, 2], (1, 2, 3), 100, {'a': 1, 'c': 3, 'z': 26, 'y': [], 'q': 1}, ['a', 'b'])),
    case('print-sep-end-file', '''
        import io, sys
        print('a', 'b', sep='-', end='!\\n')
        print(1, 2, 3)
        print()
        buffer = io.StringIO()
        print('into', 'buffer', file=buffer, sep='_')
        print('to stderr', file=sys.stderr)
        sys.stdout.write('written\\n')
        buffer.getvalue()
    ''', 'into_buffer\n', output='a-b!\n1 2 3\n\nto stderr\nwritten\n'),
    # ----- async ---------------------------------------------------------------------------------
    case('async-def-await-gather', '''
        import asyncio
        async def fetch(x, delay):
            await asyncio.sleep(delay)
            return x * 10
        async def fail():
            raise ValueError('bad')
        results = await asyncio.gather(fetch(1, 0.02), fetch(2, 0.01), fetch(3, 0))
        mixed = await asyncio.gather(fetch(4, 0), fail(), return_exceptions=True)
        (results, [type(r).__name__ for r in mixed])
    ''', ([10, 20, 30], ['int', 'ValueError'])),
    case('async-for-with-generators', '''
        import asyncio
        async def ticker(n):
            for i in range(n):
                await asyncio.sleep(0)
                yield i
        class Resource:
            def __init__(self):
                self.log = []
            async def __aenter__(self):
                self.log.append('open')
                return self
            async def __aexit__(self, *exc):
                self.log.append('close')
        r = Resource()
        async with r:
            values = [i async for i in ticker(3)]
            async for i in ticker(2):
                values.append(i * 10)
        (values, r.log)
    ''', ([0, 1, 2, 0, 10], ['open', 'close'])),
    case('async-tasks-taskgroup-semaphore', '''
        import asyncio
        order = []
        sem = asyncio.Semaphore(2)
        async def work(n):
            async with sem:
                await asyncio.sleep(0.01 * (3 - n))
                order.append(n)
                return n
        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(work(n)) for n in range(3)]
        task = asyncio.create_task(work(9))
        done = [await t for t in asyncio.as_completed([work(5), work(4)])]
        try:
            await asyncio.wait_for(asyncio.sleep(1), timeout=0.01)
        except TimeoutError:
            timed_out = True
        ([t.result() for t in tasks], await task, sorted(done), timed_out)
    ''', ([0, 1, 2], 9, [4, 5], True)),
    case('async-function-return-value', '''
        async def double(x):
            return x * 2
        async def main():
            return [await double(i) for i in range(3)]
        await main()
    ''', [0, 2, 4]),
    case('main-guard-and-name', '''
        result = []
        if __name__ == '__main__':
            result.append('main')
        result
    ''', ['main']),
    # ----- asyncio.run: the feed's loop awaits it where the top level calls it ------------------------
    case('asyncio-run-last-statement', '''
        import asyncio
        async def fetch(n):
            await asyncio.sleep(0)
            return n * 2
        async def main():
            return list(await asyncio.gather(fetch(1), fetch(2)))
        asyncio.run(main())
    ''', [2, 4]),
    case('asyncio-run-in-blocks-and-assignments', '''
        import asyncio
        from asyncio import run
        import asyncio as aio
        async def main(n=1):
            print('main', n)
            return n
        if __name__ == '__main__':
            asyncio.run(main())
        values = [run(main(2)), aio.run(main(3), debug=False)]
        for n in (4, 5):
            values.append(asyncio.run(main(n)))
        try:
            values.append(asyncio.run(main(6)) + 1)
        finally:
            pass
        values
    ''', [2, 3, 4, 5, 7], output='main 1\nmain 2\nmain 3\nmain 4\nmain 5\nmain 6\n'),
    case('asyncio-run-errors', '''
        import asyncio
        async def main():
            raise KeyError('inner')
        errors = []
        try:
            asyncio.run(5)
        except ValueError as e:
            errors.append(str(e))
        try:
            asyncio.run()
        except TypeError as e:
            errors.append(str(e))
        try:
            asyncio.run(main())
        except KeyError as e:
            errors.append(repr(e))
        errors
    ''', ['a coroutine was expected, got 5', "run() missing 1 required positional argument: 'main'", "KeyError('inner')"]),
    case('asyncio-run-in-a-function', '''
        import asyncio
        async def main():
            return 1
        def sync_entry():
            return asyncio.run(main())
        sync_entry()
    ''', raises=(
        'RuntimeError: asyncio.run() cannot be called from a running event loop: the script already runs in an event '
        'loop: call asyncio.run(main()) at the top level of the script, where the sandbox awaits it on that loop, or '
        'await the coroutine (await main())'
    ), sandbox_only=True),
    case('asyncio-run-other-functions-named-run', '''
        class Job:
            def run(self, x):
                return x * 2
        def run(x):
            return x + 1
        (Job().run(4), run(1))
    ''', (8, 2)),
    case('future-annotations', '''
        """A docstring may come first."""
        from __future__ import annotations
        import dataclasses
        @dataclasses.dataclass
        class Node:
            value: int
            children: list[Node] = dataclasses.field(default_factory=list)
            parent: Node | None = None
        def depth(node: Node) -> int:
            return 1 + max((depth(child) for child in node.children), default=0)
        tree = Node(1, [Node(2, [Node(3)]), Node(4)])
        (depth(tree), [f.type for f in dataclasses.fields(Node)])
    ''', (3, ['int', 'list[Node]', 'Node | None'])),
    # ----- reflection on the script's own objects --------------------------------------------------------
    case('class-and-qualname-of-objects', '''
        class Outer:
            class Inner:
                pass
        try:
            {}['missing']
        except Exception as e:
            caught = e.__class__.__name__
        (caught, type(Outer.Inner()).__qualname__, Outer.Inner().__class__.__qualname__, (1).__class__.__name__,
         Outer.__class__.__name__)
    ''', ('KeyError', 'Outer.Inner', 'Outer.Inner', 'int', 'type')),
    case('instance-dict-and-vars', '''
        import json
        class Config:
            def __init__(self, **options):
                self.__dict__.update(options)
                self._seen = True
        c = Config(name='report', limit=3)
        c.__dict__['extra'] = 1
        d = vars(c)
        d.setdefault('limit', 99)
        d.pop('extra')
        (c.name, c.limit, hasattr(c, 'extra'), json.dumps(vars(c), sort_keys=True), c.__dict__ == {'name': 'report', 'limit': 3, '_seen': True},
         isinstance(d, dict), sorted(k for k in vars(Config) if not k.startswith('__')))
    ''', ('report', 3, False, '{"_seen": true, "limit": 3, "name": "report"}', True, True, [])),
    case('class-dict-lists-what-it-defines', '''
        class Shape:
            sides = 0
            def area(self):
                return 0
        class Square(Shape):
            sides = 4
        (sorted(k for k in Square.__dict__ if not k.startswith('__')), 'area' in vars(Shape), Square.__dict__['sides'])
    ''', (['sides'], True, 4)),
    case('doc-in-class-body', '''
        class Documented:
            """What it is."""
            summary = __doc__.upper()
        class Plain:
            summary = __doc__
        (Documented.summary, Documented.__doc__, Plain.summary, Plain.__doc__)
    ''', ('WHAT IT IS.', 'What it is.', None, None)),
    case('builtins-look-as-in-cpython', '''
        import copy, os
        (repr(print), repr(getattr), repr(open), repr(os.listdir), print.__name__, type(print).__name__,
         copy.copy(print) is print, copy.deepcopy([open])[0] is open)
    ''', ('<built-in function print>', '<built-in function getattr>', '<built-in function open>', '<built-in function listdir>',
          'print', 'builtin_function_or_method', True, True)),
]
