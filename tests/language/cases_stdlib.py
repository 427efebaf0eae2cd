"""Conformance cases: every name of every standard library module the docs list.

Values that cannot cross the sandbox boundary (a Decimal, a UUID) are compared by `repr`/`str`.
"""

from __future__ import annotations

import sys

from .runner import case

#: What the interpreter running the tests says where CPython releases differ.
_VERSION = sys.version_info[:2]

CASES = [
    # ----- abc -------------------------------------------------------------------------------------
    case('abc', '''
        import abc
        class Base(abc.ABC):
            @abc.abstractmethod
            def run(self): ...
            @abc.abstractclassmethod
            def make(cls): ...
            @abc.abstractstaticmethod
            def helper(): ...
            @abc.abstractproperty
            def size(self): ...
        class Meta(metaclass=abc.ABCMeta):
            pass
        class Later(Base):
            pass
        Later.run = lambda self: 1
        Later.make = classmethod(lambda cls: cls())
        Later.helper = staticmethod(lambda: 2)
        Later.size = property(lambda self: 3)
        abc.update_abstractmethods(Later)
        (Later().run(), Later.make().size, Later.helper(),
         isinstance(Meta(), Meta), type(abc.get_cache_token()).__name__)
    ''', (1, 3, 2, True, 'int')),
    case('asyncio-running-loop', '''
        import asyncio
        async def main():
            loop = asyncio.get_running_loop()
            future = loop.create_future()
            loop.call_later(0.001, future.set_result, 'later')
            soon = []
            loop.call_soon(soon.append, 'soon')
            at = loop.create_future()
            loop.call_at(loop.time(), at.set_result, 'at')
            task = loop.create_task(asyncio.sleep(0, 'task'))
            start = loop.time()
            return (await future, await at, await task, soon, loop.time() >= start, loop.is_running(), loop.is_closed(), loop.get_debug())
        asyncio.run(main())
    ''', ('later', 'at', 'task', ['soon'], True, True, False, False)),
    case('asyncio-tasks', '''
        import asyncio
        async def job(n):
            await asyncio.sleep(0.001 * n)
            return n
        t = asyncio.create_task(job(1))
        f = asyncio.ensure_future(job(2))
        current = asyncio.current_task()
        others = asyncio.all_tasks()
        done, pending = await asyncio.wait([t, f], return_when=asyncio.ALL_COMPLETED)
        first, _ = await asyncio.wait([asyncio.create_task(job(0))], return_when=asyncio.FIRST_COMPLETED)
        exc_first, _ = await asyncio.wait([asyncio.create_task(job(0))], return_when=asyncio.FIRST_EXCEPTION)
        shielded = await asyncio.shield(job(0))
        async with asyncio.timeout(1):
            in_time = await job(1)
        try:
            async with asyncio.timeout_at(0):
                await asyncio.sleep(1)
        except TimeoutError:
            expired = True
        gathered = await asyncio.gather(*(job(i) for i in range(3)))
        completed = sorted([await c for c in asyncio.as_completed([job(2), job(1)])])
        waited = await asyncio.wait_for(job(1), timeout=1)
        (sorted(x.result() for x in done), len(first), len(exc_first), shielded, in_time, expired, gathered,
         completed, waited, isinstance(t, asyncio.Task), isinstance(f, asyncio.Future), current in others,
         asyncio.iscoroutinefunction(job),
         asyncio.isfuture(f), isinstance(asyncio.timeout(1), asyncio.Timeout))
    ''', ([1, 2], 1, 1, 0, 1, True, [0, 1, 2], [1, 2], 1, True, True, True, True, True, True)),
    case('asyncio-iscoroutine', '''
        import asyncio
        async def f():
            return 1
        c = f()
        result = asyncio.iscoroutine(c)
        (result, await c)
    ''', (True, 1)),
    case('asyncio-sync-primitives', '''
        import asyncio
        lock = asyncio.Lock()
        event = asyncio.Event()
        condition = asyncio.Condition()
        semaphore = asyncio.BoundedSemaphore(1)
        barrier = asyncio.Barrier(2)
        log = []
        async def waiter():
            await event.wait()
            log.append('event')
            async with condition:
                await condition.wait_for(lambda: len(log) >= 2)
                log.append('condition')
        async def party(n):
            await barrier.wait()
            return n
        task = asyncio.create_task(waiter())
        async with lock:
            log.append('locked')
        event.set()
        await asyncio.sleep(0.01)
        async with condition:
            condition.notify_all()
        await task
        async with semaphore:
            pass
        try:
            semaphore.release()
        except ValueError as e:
            over = str(e)
        parties = await asyncio.gather(party(1), party(2))
        await barrier.reset()
        try:
            await barrier.abort()
            await barrier.wait()
        except asyncio.BrokenBarrierError:
            broken = True
        (log, over, parties, broken, lock.locked())
    ''', (['locked', 'event', 'condition'], 'BoundedSemaphore released too many times', [1, 2], True, False)),
    case('asyncio-queues', '''
        import asyncio
        q = asyncio.Queue(maxsize=2)
        lifo = asyncio.LifoQueue()
        prio = asyncio.PriorityQueue()
        for i in (1, 2):
            await q.put(i)
            lifo.put_nowait(i)
        for item in [(3, 'c'), (1, 'a'), (2, 'b')]:
            prio.put_nowait(item)
        try:
            q.put_nowait(3)
        except asyncio.QueueFull:
            full = True
        got = [await q.get(), q.get_nowait()]
        try:
            q.get_nowait()
        except asyncio.QueueEmpty:
            empty = True
        (got, [lifo.get_nowait(), lifo.get_nowait()], [prio.get_nowait()[1] for _ in range(3)], full, empty)
    ''', ([1, 2], [2, 1], ['a', 'b', 'c'], True, True)),
    case('asyncio-errors', '''
        import asyncio
        async def slow():
            await asyncio.sleep(10)
        t = asyncio.create_task(slow())
        await asyncio.sleep(0)
        t.cancel()
        try:
            await t
        except asyncio.CancelledError:
            cancelled = t.cancelled()
        f = asyncio.Future()
        try:
            f.result()
        except asyncio.InvalidStateError:
            invalid = True
        errors = [asyncio.TimeoutError is TimeoutError, issubclass(asyncio.IncompleteReadError, EOFError),
                  issubclass(asyncio.LimitOverrunError, Exception)]
        (cancelled, invalid, errors)
    ''', (True, True, [True, True, True])),
    # ----- base64 --------------------------------------------------------------------------------------
    case('base64', '''
        import base64, io
        data = b'corral sandbox?!'
        out = io.BytesIO()
        base64.encode(io.BytesIO(data), out)
        back = io.BytesIO()
        base64.decode(io.BytesIO(out.getvalue()), back)
        (base64.b64encode(data), base64.b64decode(base64.b64encode(data)), base64.urlsafe_b64encode(b'\\xfb\\xff'),
         base64.urlsafe_b64decode(b'-_8='), base64.standard_b64encode(b'x'), base64.standard_b64decode(b'eA=='),
         base64.b32encode(b'ab'), base64.b32decode(b'MFRA===='), base64.b32hexencode(b'ab'), base64.b32hexdecode(b'C5H0===='),
         base64.b16encode(b'\\x01\\xab'), base64.b16decode(b'01AB'), base64.a85encode(b'hello'), base64.a85decode(b'BOu!rDZ'),
         base64.b85encode(b'hello'), base64.b85decode(b'Xk~0{Zv'), base64.encodebytes(b'x'), base64.decodebytes(b'eA==\\n'),
         out.getvalue(), back.getvalue())
    ''', (b'Y29ycmFsIHNhbmRib3g/IQ==', b'corral sandbox?!', b'-_8=', b'\xfb\xff', b'eA==', b'x', b'MFRA====', b'ab', b'C5H0====', b'ab', b'01AB', b'\x01\xab', b'BOu!rDZ', b'hello', b'Xk~0{Zv', b'hello', b'eA==\n', b'x', b'Y29ycmFsIHNhbmRib3g/IQ==\n', b'corral sandbox?!')),
    # ----- bisect, heapq ---------------------------------------------------------------------------------
    case('bisect', '''
        import bisect
        a = [1, 3, 3, 5]
        bisect.insort(a, 4)
        bisect.insort_left(a, 3)
        bisect.insort_right(a, 0)
        (a, bisect.bisect(a, 3), bisect.bisect_left(a, 3), bisect.bisect_right(a, 3), bisect.bisect_left(a, 10, key=None))
    ''', ([0, 1, 3, 3, 3, 4, 5], 5, 2, 5, 7)),
    case('heapq', '''
        import heapq
        h = [5, 1, 4]
        heapq.heapify(h)
        heapq.heappush(h, 2)
        smallest = heapq.heappop(h)
        pushpop = heapq.heappushpop(h, 0)
        replaced = heapq.heapreplace(h, 9)
        (smallest, pushpop, replaced, sorted(h), heapq.nlargest(2, [1, 5, 3]), heapq.nsmallest(2, [1, 5, 3], key=lambda x: -x),
         list(heapq.merge([1, 4], [2, 3])))
    ''', (1, 0, 2, [4, 5, 9], [5, 3], [5, 3], [1, 2, 3, 4])),
    # ----- calendar --------------------------------------------------------------------------------------
    case('calendar', '''
        import calendar
        calendar.prmonth(2024, 2)
        text = calendar.TextCalendar(calendar.SUNDAY)
        text.prmonth(2024, 1)
        calendar.setfirstweekday(calendar.MONDAY)
        html = calendar.HTMLCalendar().formatmonth(2024, 1)
        try:
            calendar.monthrange(2024, 13)
        except calendar.IllegalMonthError as e:
            bad_month = str(e)
        try:
            raise calendar.IllegalWeekdayError(9)
        except calendar.IllegalWeekdayError as e:
            bad_day = str(e)
        (calendar.isleap(2024), calendar.leapdays(2000, 2025), calendar.weekday(2024, 1, 1), calendar.monthrange(2024, 2),
         calendar.monthcalendar(2024, 2)[0], calendar.firstweekday(), calendar.timegm((2024, 1, 1, 0, 0, 0)),
         list(calendar.month_name)[1], list(calendar.month_abbr)[2], list(calendar.day_name)[0], list(calendar.day_abbr)[6],
         calendar.weekheader(2), calendar.month(2024, 3).splitlines()[0], calendar.calendar(2024).splitlines()[0].strip(),
         [calendar.TUESDAY, calendar.WEDNESDAY, calendar.THURSDAY, calendar.FRIDAY, calendar.SATURDAY],
         html.count('<td'), bad_month, bad_day, list(calendar.Calendar().itermonthdays(2024, 2))[:3])
    ''', (True, 7, 0, (3, 29), [0, 0, 0, 1, 2, 3, 4], 0, 1704067200, 'January', 'Feb', 'Monday', 'Sun', 'Mo Tu We Th Fr Sa Su', '     March 2024', '2024', [1, 2, 3, 4, 5], 35, 'bad month number 13; must be 1-12', 'bad weekday number 9; must be 0 (Monday) to 6 (Sunday)', [0, 0, 0]), output='   February 2024\nMo Tu We Th Fr Sa Su\n          1  2  3  4\n 5  6  7  8  9 10 11\n12 13 14 15 16 17 18\n19 20 21 22 23 24 25\n26 27 28 29\n    January 2024\nSu Mo Tu We Th Fr Sa\n    1  2  3  4  5  6\n 7  8  9 10 11 12 13\n14 15 16 17 18 19 20\n21 22 23 24 25 26 27\n28 29 30 31\n'),
    case('calendar-prcal', '''
        import calendar
        calendar.prcal(2024)
        None
    ''', None, output='                                  2024\n\n      January                   February                   March\nMo Tu We Th Fr Sa Su      Mo Tu We Th Fr Sa Su      Mo Tu We Th Fr Sa Su\n 1  2  3  4  5  6  7                1  2  3  4                   1  2  3\n 8  9 10 11 12 13 14       5  6  7  8  9 10 11       4  5  6  7  8  9 10\n15 16 17 18 19 20 21      12 13 14 15 16 17 18      11 12 13 14 15 16 17\n22 23 24 25 26 27 28      19 20 21 22 23 24 25      18 19 20 21 22 23 24\n29 30 31                  26 27 28 29               25 26 27 28 29 30 31\n\n       April                      May                       June\nMo Tu We Th Fr Sa Su      Mo Tu We Th Fr Sa Su      Mo Tu We Th Fr Sa Su\n 1  2  3  4  5  6  7             1  2  3  4  5                      1  2\n 8  9 10 11 12 13 14       6  7  8  9 10 11 12       3  4  5  6  7  8  9\n15 16 17 18 19 20 21      13 14 15 16 17 18 19      10 11 12 13 14 15 16\n22 23 24 25 26 27 28      20 21 22 23 24 25 26      17 18 19 20 21 22 23\n29 30                     27 28 29 30 31            24 25 26 27 28 29 30\n\n        July                     August                  September\nMo Tu We Th Fr Sa Su      Mo Tu We Th Fr Sa Su      Mo Tu We Th Fr Sa Su\n 1  2  3  4  5  6  7                1  2  3  4                         1\n 8  9 10 11 12 13 14       5  6  7  8  9 10 11       2  3  4  5  6  7  8\n15 16 17 18 19 20 21      12 13 14 15 16 17 18       9 10 11 12 13 14 15\n22 23 24 25 26 27 28      19 20 21 22 23 24 25      16 17 18 19 20 21 22\n29 30 31                  26 27 28 29 30 31         23 24 25 26 27 28 29\n                                                    30\n\n      October                   November                  December\nMo Tu We Th Fr Sa Su      Mo Tu We Th Fr Sa Su      Mo Tu We Th Fr Sa Su\n    1  2  3  4  5  6                   1  2  3                         1\n 7  8  9 10 11 12 13       4  5  6  7  8  9 10       2  3  4  5  6  7  8\n14 15 16 17 18 19 20      11 12 13 14 15 16 17       9 10 11 12 13 14 15\n21 22 23 24 25 26 27      18 19 20 21 22 23 24      16 17 18 19 20 21 22\n28 29 30 31               25 26 27 28 29 30         23 24 25 26 27 28 29\n                                                    30 31\n'),
    # ----- collections, collections.abc -----------------------------------------------------------------
    case('collections', '''
        from collections import Counter, OrderedDict, defaultdict, deque, ChainMap, UserDict, UserList, UserString, namedtuple
        import collections
        c = Counter('abracadabra')
        od = OrderedDict(a=1, b=2)
        od.move_to_end('a')
        dd = defaultdict(list)
        dd['x'].append(1)
        dq = deque([1, 2, 3], maxlen=3)
        dq.append(4)
        dq.appendleft(0)
        cm = ChainMap({'a': 1}, {'a': 2, 'b': 3})
        class D(UserDict):
            def __setitem__(self, key, value):
                super().__setitem__(key.lower(), value)
        d = D()
        d['KEY'] = 1
        P = namedtuple('P', ['x', 'y'], defaults=[0])
        (c.most_common(2), dict(c), list(od), dict(dd), list(dq), cm['a'], cm['b'], dict(d), list(UserList([1, 2]) + [3]),
         str(UserString('ab').upper()), tuple(P(1)), P._fields, isinstance(collections.abc.Mapping, type),
         c['z'], (c - Counter('aaa'))['a'], sorted(c.elements())[:3])
    ''', ([('a', 5), ('b', 2)], {'a': 5, 'b': 2, 'r': 2, 'c': 1, 'd': 1}, ['b', 'a'], {'x': [1]}, [0, 2, 3], 1, 3, {'key': 1}, [1, 2, 3], 'AB', (1, 0), ('x', 'y'), True, 0, 2, ['a', 'a', 'a'])),
    case('collections-abc', '''
        import collections.abc as cabc
        from collections.abc import (AsyncGenerator, AsyncIterable, AsyncIterator, Awaitable, ByteString, Callable,
            Collection, Container, Coroutine, Generator, Hashable, ItemsView, Iterable, Iterator, KeysView, Mapping,
            MappingView, MutableMapping, MutableSequence, MutableSet, Reversible, Sequence, Set, Sized, ValuesView)
        class Registry(Mapping):
            def __init__(self, **items):
                self._items = dict(items)
            def __getitem__(self, key):
                return self._items[key]
            def __iter__(self):
                return iter(self._items)
            def __len__(self):
                return len(self._items)
        r = Registry(a=1, b=2)
        async def agen():
            yield 1
        def gen():
            yield 1
        async def coro():
            pass
        c = coro()
        checks = [
            isinstance(r, Mapping), isinstance(r.keys(), KeysView), isinstance(r.values(), ValuesView),
            isinstance(r.items(), ItemsView), isinstance(r.keys(), MappingView), isinstance({}, MutableMapping),
            isinstance([], MutableSequence), isinstance(set(), MutableSet), isinstance(frozenset(), Set),
            isinstance((), Sequence), isinstance([], Reversible), isinstance('', Sized), isinstance('', Container),
            isinstance('', Collection), isinstance([], Iterable), isinstance(iter([]), Iterator), isinstance(1, Hashable),
            isinstance(len, Callable), isinstance(gen(), Generator), isinstance(agen(), AsyncGenerator),
            isinstance(agen(), AsyncIterator), isinstance(agen(), AsyncIterable), isinstance(c, Coroutine),
            isinstance(c, Awaitable), isinstance(b'', ByteString), issubclass(cabc.Sequence, cabc.Iterable),
        ]
        await c
        (checks, r.get('a'), 'b' in r, dict(r.items()))
    ''', ([True, True, True, True, True, True, True, True, True, True, True, True, True, True, True, True, True, True, True, True, True, True, True, True, True, True], 1, True, {'a': 1, 'b': 2}),
         # CPython 3.12 deprecates ByteString, and shows a DeprecationWarning raised in __main__ (the script's stderr)
         output="main.py:30: DeprecationWarning: 'collections.abc.ByteString' is deprecated and slated for removal in Python 3.14\n"
                "  isinstance(c, Awaitable), isinstance(b'', ByteString), issubclass(cabc.Sequence, cabc.Iterable),\n"
                if _VERSION >= (3, 12) else ''),
    # ----- contextlib ---------------------------------------------------------------------------------
    case('contextlib', '''
        import contextlib
        log = []
        @contextlib.contextmanager
        def step(name):
            log.append(f'start {name}')
            yield name
            log.append(f'end {name}')
        @contextlib.asynccontextmanager
        async def astep(name):
            log.append(f'astart {name}')
            yield name
            log.append(f'aend {name}')
        class Thing:
            def close(self):
                log.append('closed')
            async def aclose(self):
                log.append('aclosed')
        with contextlib.ExitStack() as stack:
            stack.enter_context(step('a'))
            stack.callback(log.append, 'callback')
        async with contextlib.AsyncExitStack() as astack:
            await astack.enter_async_context(astep('b'))
        with contextlib.suppress(KeyError):
            {}['x']
        with contextlib.closing(Thing()):
            pass
        async with contextlib.aclosing(Thing()):
            pass
        with contextlib.nullcontext(5) as five:
            pass
        class Timer(contextlib.ContextDecorator):
            def __enter__(self):
                log.append('timer in')
                return self
            def __exit__(self, *exc):
                log.append('timer out')
        @Timer()
        def work():
            return 'worked'
        class ATimer(contextlib.AsyncContextDecorator):
            async def __aenter__(self):
                return self
            async def __aexit__(self, *exc):
                log.append('atimer out')
        @ATimer()
        async def awork():
            return 'aworked'
        class Res(contextlib.AbstractContextManager):
            def __exit__(self, *exc):
                return None
        class ARes(contextlib.AbstractAsyncContextManager):
            async def __aexit__(self, *exc):
                return None
        with Res() as res:
            pass
        async with ARes() as ares:
            pass
        (log, five, work(), await awork(), type(res).__name__, type(ares).__name__)
    ''', (['start a', 'callback', 'end a', 'astart b', 'aend b', 'closed', 'aclosed', 'timer in', 'timer out', 'atimer out'], 5, 'worked', 'aworked', 'Res', 'ARes')),
    # ----- copy ------------------------------------------------------------------------------------
    case('copy', '''
        import copy
        data = {'a': [1, 2], 'b': {'c': 3}}
        shallow = copy.copy(data)
        deep = copy.deepcopy(data)
        data['a'].append(3)
        class Node:
            def __init__(self, value):
                self.value = value
                self.children = []
        n = Node(1)
        n.children.append(Node(2))
        n2 = copy.deepcopy(n)
        (shallow['a'], deep['a'], n2.children[0].value, n2 is not n, issubclass(copy.Error, Exception))
    ''', ([1, 2, 3], [1, 2], 2, True, True)),
    # ----- csv, io ---------------------------------------------------------------------------------------
    case('csv', '''
        import csv, io
        text = 'name,score\\nann,10\\nbob,"1,5"\\n'
        rows = list(csv.reader(io.StringIO(text)))
        dicts = list(csv.DictReader(io.StringIO(text)))
        out = io.StringIO()
        w = csv.writer(out, quoting=csv.QUOTE_MINIMAL, lineterminator='\\n')
        w.writerow(['x', 'y, z'])
        w.writerows([[1, 2]])
        dout = io.StringIO()
        dw = csv.DictWriter(dout, fieldnames=['a', 'b'], lineterminator='\\n', quoting=csv.QUOTE_ALL)
        dw.writeheader()
        dw.writerow({'a': 1, 'b': 2})
        csv.register_dialect('pipes', delimiter='|')
        piped = list(csv.reader(['a|b'], dialect='pipes'))
        dialects = 'pipes' in csv.list_dialects()
        pipe_delim = csv.get_dialect('pipes').delimiter
        csv.unregister_dialect('pipes')
        sniffed = csv.Sniffer().sniff('a;b;c\\n1;2;3\\n').delimiter
        class Tabs(csv.Dialect):
            delimiter = '\\t'
            quotechar = '"'
            lineterminator = '\\n'
            quoting = csv.QUOTE_NONE
        nonnum = io.StringIO()
        csv.writer(nonnum, quoting=csv.QUOTE_NONNUMERIC, lineterminator='\\n').writerow(['a', 1.5])
        try:
            list(csv.reader(['"a'], strict=True))
        except csv.Error as e:
            error = type(e).__name__
        (rows, [dict(d) for d in dicts], out.getvalue(), dout.getvalue(), piped, dialects, pipe_delim, sniffed,
         list(csv.reader(['a\\tb'], dialect=Tabs)), nonnum.getvalue(), csv.excel.delimiter, csv.excel_tab.delimiter,
         csv.unix_dialect.lineterminator, csv.field_size_limit() > 0, error)
    ''', ([['name', 'score'], ['ann', '10'], ['bob', '1,5']], [{'name': 'ann', 'score': '10'}, {'name': 'bob', 'score': '1,5'}], 'x,"y, z"\n1,2\n', '"a","b"\n"1","2"\n', [['a', 'b']], True, '|', ';', [['a', 'b']], '"a",1.5\n', ',', '\t', '\n', True, 'Error')),
    case('io', '''
        import io
        s = io.StringIO('line 1\\nline 2\\n')
        lines = s.readlines()
        s.seek(0, io.SEEK_SET)
        first = s.readline()
        s.seek(0, io.SEEK_END)
        s.write('line 3\\n')
        b = io.BytesIO(b'abc')
        b.seek(1, io.SEEK_CUR)
        rest = b.read()
        t = io.TextIOWrapper(io.BytesIO('é\\n'.encode()), encoding='utf-8')
        try:
            io.StringIO().fileno()
        except io.UnsupportedOperation:
            unsupported = True
        checks = [isinstance(s, io.TextIOBase), isinstance(b, io.BufferedIOBase), isinstance(s, io.IOBase),
                  issubclass(io.RawIOBase, io.IOBase), io.DEFAULT_BUFFER_SIZE > 0, io.open is open]
        (lines, first, s.getvalue(), rest, t.read(), unsupported, checks)
    ''', (['line 1\n', 'line 2\n'], 'line 1\n', 'line 1\nline 2\nline 3\n', b'bc', 'é\n', True, [True, True, True, True, True, True])),
    # ----- dataclasses -----------------------------------------------------------------------------
    case('dataclasses', '''
        import dataclasses
        from dataclasses import dataclass, field, fields, asdict, astuple, replace, is_dataclass, make_dataclass, InitVar, KW_ONLY, MISSING, Field, FrozenInstanceError
        @dataclass
        class Config:
            name: str
            scale: InitVar[int] = 1
            _: KW_ONLY
            tags: list = field(default_factory=list, repr=False)
            size: int = 0
            def __post_init__(self, scale):
                self.size = self.size * scale
        c = Config('x', 3, size=2)
        Point = make_dataclass('Point', [('x', int), ('y', int, field(default=0))])
        @dataclass(frozen=True)
        class F:
            v: int
        try:
            F(1).v = 2
        except FrozenInstanceError:
            frozen = True
        f0 = fields(Config)[0]
        (repr(c), asdict(c), astuple(c), repr(replace(c, size=5, scale=1)), is_dataclass(c), [f.name for f in fields(c)],
         repr(Point(1)), frozen, isinstance(f0, Field), fields(Point)[0].default is MISSING, dataclasses.is_dataclass(Point))
    ''', ("Config(name='x', size=6)", {'name': 'x', 'tags': [], 'size': 6}, ('x', [], 6), "Config(name='x', size=5)", True, ['name', 'tags', 'size'], 'Point(x=1, y=0)', True, True, True, True)),
    # ----- datetime, zoneinfo -------------------------------------------------------------------------
    case('datetime', '''
        import datetime as dt
        from datetime import date, datetime, time, timedelta, timezone, tzinfo, MINYEAR, MAXYEAR, UTC
        d = date(2024, 2, 28) + timedelta(days=2)
        moment = datetime(2024, 3, 1, 14, 30, tzinfo=timezone.utc)
        local = moment.astimezone(timezone(timedelta(hours=-5), 'EST'))
        class Fixed(tzinfo):
            def utcoffset(self, when):
                return timedelta(hours=2)
            def dst(self, when):
                return timedelta(0)
            def tzname(self, when):
                return 'FIX'
        (d.isoformat(), d.weekday(), moment.isoformat(), local.isoformat(), local.tzname(), str(timedelta(days=1, seconds=3661)),
         datetime.fromisoformat('2024-05-06T07:08:09').strftime('%A %d %B %Y %H:%M'), datetime.strptime('2024-01-02', '%Y-%m-%d').date().isoformat(),
         time(9, 30).isoformat(), (moment - datetime(2024, 1, 1, tzinfo=UTC)).days, MINYEAR, MAXYEAR, UTC is timezone.utc,
         datetime(2024, 1, 1, tzinfo=Fixed()).isoformat(), dt.date.fromordinal(1).isoformat(), moment.timestamp(),
         datetime.fromtimestamp(0, tz=UTC).isoformat(), date(2024, 1, 1).isocalendar()[1], moment.replace(hour=0).hour)
    ''', ('2024-03-01', 4, '2024-03-01T14:30:00+00:00', '2024-03-01T09:30:00-05:00', 'EST', '1 day, 1:01:01', 'Monday 06 May 2024 07:08', '2024-01-02', '09:30:00', 60, 1, 9999, True, '2024-01-01T00:00:00+02:00', '0001-01-01', 1709303400.0, '1970-01-01T00:00:00+00:00', 1, 0)),
    case('zoneinfo', '''
        import zoneinfo
        from datetime import datetime
        paris = zoneinfo.ZoneInfo('Europe/Paris')
        winter = datetime(2024, 1, 15, 12, tzinfo=paris)
        summer = datetime(2024, 7, 15, 12, tzinfo=paris)
        try:
            zoneinfo.ZoneInfo('Mars/Olympus_Mons')
        except zoneinfo.ZoneInfoNotFoundError as e:
            missing = type(e).__name__
        zones = zoneinfo.available_timezones()
        (winter.isoformat(), summer.isoformat(), winter.tzname(), summer.tzname(), str(paris), missing,
         'America/New_York' in zones, 'UTC' in zones, winter.astimezone(zoneinfo.ZoneInfo('Asia/Tokyo')).isoformat())
    ''', ('2024-01-15T12:00:00+01:00', '2024-07-15T12:00:00+02:00', 'CET', 'CEST', 'Europe/Paris', 'ZoneInfoNotFoundError', True, True, '2024-01-15T20:00:00+09:00')),
    # ----- decimal, fractions ---------------------------------------------------------------------------
    case('decimal', '''
        import decimal
        from decimal import Decimal, getcontext, localcontext, setcontext, Context
        a = Decimal('1.10') + Decimal('2.20')
        with localcontext() as ctx:
            ctx.prec = 3
            third = Decimal(1) / Decimal(3)
        money = Decimal('2.675').quantize(Decimal('0.01'), rounding=decimal.ROUND_HALF_UP)
        roundings = [Decimal('2.5').quantize(Decimal('1'), rounding=r) for r in (decimal.ROUND_05UP, decimal.ROUND_CEILING,
                     decimal.ROUND_DOWN, decimal.ROUND_FLOOR, decimal.ROUND_HALF_DOWN, decimal.ROUND_HALF_EVEN, decimal.ROUND_UP)]
        strict = Context(traps=[decimal.DivisionByZero])
        try:
            strict.divide(Decimal(1), Decimal(0))
        except decimal.DivisionByZero as e:
            div = isinstance(e, decimal.DecimalException)
        saved = getcontext()
        setcontext(decimal.BasicContext)
        basic_prec = getcontext().prec
        setcontext(decimal.ExtendedContext)
        ext = str(Decimal(1) / Decimal(0))
        setcontext(decimal.DefaultContext)
        signals = [decimal.Clamped, decimal.ConversionSyntax, decimal.DivisionImpossible, decimal.DivisionUndefined,
                   decimal.FloatOperation, decimal.Inexact, decimal.InvalidContext, decimal.InvalidOperation,
                   decimal.Overflow, decimal.Rounded, decimal.Subnormal, decimal.Underflow]
        (str(a), str(third), str(money), [str(r) for r in roundings], div, basic_prec, ext, a.as_tuple() == decimal.DecimalTuple(0, (3, 3, 0), -2),
         all(issubclass(s, decimal.DecimalException) for s in signals), decimal.MAX_PREC > 0, decimal.MAX_EMAX > 0,
         decimal.MIN_EMIN < 0, decimal.MIN_ETINY < 0, decimal.HAVE_THREADS, decimal.HAVE_CONTEXTVAR, str(Decimal('1e3').normalize()))
    ''', ('3.30', '0.333', '2.68', ['2', '3', '2', '2', '2', '2', '3'], True, 9, 'Infinity', True, True, True, True, True, True, True, True, '1E+3')),
    case('fractions', '''
        from fractions import Fraction
        f = Fraction(3, 4) + Fraction(1, 6)
        (str(f), str(Fraction('0.125')), str(Fraction(1.5)), f.numerator, f.denominator, float(Fraction(1, 8)),
         str(Fraction(355, 113).limit_denominator(10)), Fraction(1, 3) < Fraction(1, 2))
    ''', ('11/12', '1/8', '3/2', 11, 12, 0.125, '22/7', True)),
    # ----- difflib -------------------------------------------------------------------------------------
    case('difflib', '''
        import difflib
        a = ['one\\n', 'two\\n', 'three\\n']
        b = ['one\\n', 'too\\n', 'three\\n', 'four\\n']
        sm = difflib.SequenceMatcher(None, 'abcd', 'bcde')
        match = sm.find_longest_match(0, 4, 0, 4)
        nd = list(difflib.ndiff(a, b))
        (''.join(difflib.unified_diff(a, b, 'a', 'b')), ''.join(difflib.context_diff(a, b))[:20], round(sm.ratio(), 3),
         sm.get_opcodes(), isinstance(match, difflib.Match), match.size, difflib.get_close_matches('appel', ['ape', 'apple', 'peach']),
         nd, ''.join(difflib.restore(nd, 2)), list(difflib.Differ().compare(['a'], ['b'])), difflib.IS_CHARACTER_JUNK(' '),
         difflib.IS_LINE_JUNK('  \\n'), b''.join(difflib.diff_bytes(difflib.unified_diff, [b'x\\n'], [b'y\\n']))[:10],
         '<table' in difflib.HtmlDiff().make_table(['a'], ['b']))
    ''', ('--- a\n+++ b\n@@ -1,3 +1,4 @@\n one\n-two\n+too\n three\n+four\n', '*** \n--- \n**********', 0.75, [('delete', 0, 1, 0, 0), ('equal', 1, 4, 0, 3), ('insert', 4, 4, 3, 4)], True, 3, ['apple', 'ape'], ['  one\n', '- two\n', '?  ^\n', '+ too\n', '?  ^\n', '  three\n', '+ four\n'], 'one\ntoo\nthree\nfour\n', ['- a', '+ b'], True, True, b'--- \n+++ \n', True)),
    # ----- enum --------------------------------------------------------------------------------------------
    case('enum', '''
        import enum
        from enum import Enum, IntEnum, StrEnum, Flag, IntFlag, auto, unique, verify, member, nonmember, EnumCheck, FlagBoundary
        @unique
        class Color(Enum):
            RED = auto()
            GREEN = auto()
            helper = nonmember(5)
            @member
            def BLUE():
                return 3
            @enum.property
            def lower(self):
                return self.name.lower()
        class Size(StrEnum):
            S = auto()
        class Perm(IntFlag, boundary=enum.KEEP):
            R = 4
            W = 2
        class Strict(Flag, boundary=enum.STRICT):
            A = 1
        class Conform(Flag, boundary=enum.CONFORM):
            A = 1
        class Eject(Flag, boundary=enum.EJECT):
            A = 1
        @verify(enum.CONTINUOUS, enum.NAMED_FLAGS)
        class Range(IntEnum):
            ONE = 1
            TWO = 2
        @verify(EnumCheck.UNIQUE)
        class Plain(int, enum.ReprEnum):
            X = 1
        try:
            @verify(enum.UNIQUE)
            class Dup(Enum):
                A = 1
                B = 1
        except ValueError as e:
            dup = 'duplicate' in str(e)
        (Color.RED.value, Color.GREEN.lower, Color.helper, [c.name for c in Color], str(Size.S), int(Perm.R | Perm.W),
         Perm(8).value, isinstance(Color, enum.EnumMeta), isinstance(Color, enum.EnumType), Range(2) > Range.ONE,
         dup, FlagBoundary.STRICT.name, Conform(3).value, Eject(3), Plain.X.value, Strict.A.name)
    ''', (1, 'green', 5, ['RED', 'GREEN', 'BLUE'], 's', 6, 8, True, True, True, False, 'STRICT', 1, 3, 1, 'A')),
    case('fnmatch', '''
        import fnmatch
        (fnmatch.fnmatch('report.CSV', '*.csv'), fnmatch.fnmatchcase('report.CSV', '*.csv'),
         fnmatch.filter(['a.py', 'b.txt', 'c.py'], '*.py'), fnmatch.translate('*.txt'))
    ''', (False, False, ['a.py', 'c.py'], '(?s:.*\\.txt)\\Z')),
    case('glob', '''
        import glob
        (glob.glob('*.txt'), sorted(glob.glob('data/*')), sorted(glob.glob('**/*.md', recursive=True)), sorted(glob.glob('data/*', include_hidden=True)),
         list(glob.iglob('data/*.csv')), glob.escape('a[1]*.txt'), glob.glob('missing/*'), sorted(glob.glob('**', recursive=True)),
         glob.glob('*.txt', root_dir='.'), glob.glob('data/'))
    ''', (['notes.txt'], ['data/config.json', 'data/raw', 'data/sales.csv'], ['data/raw/readme.md'], ['data/.hidden', 'data/config.json', 'data/raw', 'data/sales.csv'], ['data/sales.csv'], 'a[[]1][*].txt', [], ['bytes.bin', 'data', 'data/config.json', 'data/raw', 'data/raw/readme.md', 'data/sales.csv', 'notes.txt'], ['notes.txt'], ['data/']), files=True),
    # ----- functools -------------------------------------------------------------------------------------
    case('functools', '''
        import functools
        from functools import partial, partialmethod, reduce, lru_cache, cache, cached_property, cmp_to_key, singledispatch, total_ordering, wraps, update_wrapper
        calls = []
        @lru_cache(maxsize=None)
        def slow(n):
            calls.append(n)
            return n * 2
        @cache
        def fact(n):
            return 1 if n < 2 else n * fact(n - 1)
        class Circle:
            def __init__(self, r):
                self.r = r
            @cached_property
            def area(self):
                calls.append('area')
                return round(3.14159 * self.r ** 2, 2)
            def scale(self, factor):
                return self.r * factor
            double = partialmethod(scale, 2)
        @singledispatch
        def show(x):
            return 'object'
        @show.register
        def _(x: int):
            return 'int'
        @show.register(list)
        def _(x):
            return 'list'
        def inner():
            """doc"""
        def outer():
            pass
        update_wrapper(outer, inner)
        c = Circle(2)
        (slow(3), slow(3), fact(10), c.area, c.area, c.double(), calls, reduce(lambda a, b: a * b, range(1, 6)),
         partial(int, base=2)('101'), sorted(['b', 'A', 'c'], key=cmp_to_key(lambda x, y: (x.lower() > y.lower()) - (x.lower() < y.lower()))),
         show(1), show([]), show('s'), outer.__doc__, functools.WRAPPER_ASSIGNMENTS, functools.WRAPPER_UPDATES,
         slow.cache_info().hits, callable(total_ordering), callable(wraps))
    ''', (6, 6, 3628800, 12.57, 12.57, 4, [3, 'area'], 120, 5, ['A', 'b', 'c'], 'int', 'list', 'object', 'doc', ('__module__', '__name__', '__qualname__', '__doc__', '__annotations__', *(('__type_params__',) if _VERSION >= (3, 12) else ())), ('__dict__',), 1, True, True)),
    # ----- hashlib ------------------------------------------------------------------------------------------
    case('hashlib', '''
        import hashlib, io
        data = b'corral'
        (hashlib.md5(data).hexdigest(), hashlib.sha1(data).hexdigest()[:16], hashlib.sha224(data).hexdigest()[:16],
         hashlib.sha256(data).hexdigest(), hashlib.sha384(data).hexdigest()[:16], hashlib.sha512(data).hexdigest()[:16],
         hashlib.sha3_224(data).hexdigest()[:16], hashlib.sha3_256(data).hexdigest()[:16], hashlib.sha3_384(data).hexdigest()[:16],
         hashlib.sha3_512(data).hexdigest()[:16], hashlib.shake_128(data).hexdigest(8), hashlib.shake_256(data).hexdigest(8),
         hashlib.blake2b(data, digest_size=8).hexdigest(), hashlib.blake2s(data, digest_size=8).hexdigest(),
         hashlib.new('sha256', data).hexdigest()[:16], hashlib.pbkdf2_hmac('sha256', b'pw', b'salt', 10).hex()[:16],
         hashlib.file_digest(io.BytesIO(data), 'sha256').hexdigest()[:16], 'sha256' in hashlib.algorithms_guaranteed,
         'sha256' in hashlib.algorithms_available)
    ''', ('c3761f853c220267fae7acb6cc653f74', '19c45d4b84137d49', 'da6d498f3a67f242', '78e330ba9450c8a9ce58ad1852029649d3cba73b508ee2bd949d1959582d7e17', 'b6aae848fc353e7b', '6790409bd8f0c0ae', 'e50d49132b063968', '44cfc19bebfe170c', '393f512e2854da2d', '2f6e909d85f26fc1', 'f76baa09543aeb17', '29ed7cab7ce629fe', '68e72c54c1bfc3ae', 'a51e8f9f955d3ac1', '78e330ba9450c8a9', '72aecd14244887c3', '78e330ba9450c8a9', True, True)),
    # ----- itertools -------------------------------------------------------------------------------------------
    case('itertools', '''
        import itertools as it
        (list(it.accumulate([1, 2, 3])), list(it.chain('ab', 'cd')), list(it.chain.from_iterable([[1], [2]])),
         list(it.combinations('abc', 2)), list(it.combinations_with_replacement('ab', 2)), list(it.compress('abcd', [1, 0, 1, 0])),
         list(it.islice(it.count(10, 5), 3)), list(it.islice(it.cycle('ab'), 5)), list(it.dropwhile(lambda x: x < 3, [1, 4, 1])),
         list(it.filterfalse(None, [0, 1, 2])), [(k, list(g)) for k, g in it.groupby('aabbc')], list(it.pairwise('abcd')),
         list(it.permutations('abc', 2))[:3], list(it.product('ab', repeat=2)), list(it.repeat('x', 3)),
         list(it.starmap(pow, [(2, 3), (3, 2)])), list(it.takewhile(lambda x: x < 3, [1, 2, 5, 1])),
         [list(t) for t in it.tee('ab', 2)], list(it.zip_longest('ab', 'c', fillvalue='-')))
    ''', ([1, 3, 6], ['a', 'b', 'c', 'd'], [1, 2], [('a', 'b'), ('a', 'c'), ('b', 'c')], [('a', 'a'), ('a', 'b'), ('b', 'b')], ['a', 'c'], [10, 15, 20], ['a', 'b', 'a', 'b', 'a'], [4, 1], [0], [('a', ['a', 'a']), ('b', ['b', 'b']), ('c', ['c'])], [('a', 'b'), ('b', 'c'), ('c', 'd')], [('a', 'b'), ('a', 'c'), ('b', 'a')], [('a', 'a'), ('a', 'b'), ('b', 'a'), ('b', 'b')], ['x', 'x', 'x'], [8, 9], [1, 2], [['a', 'b'], ['a', 'b']], [('a', 'c'), ('b', '-')])),
    # ----- json -------------------------------------------------------------------------------------------------
    case('json', '''
        import json, io
        from decimal import Decimal
        class Encoder(json.JSONEncoder):
            def default(self, o):
                if isinstance(o, Decimal):
                    return str(o)
                return super().default(o)
        buffer = io.StringIO()
        json.dump({'a': [1, 2]}, buffer)
        buffer.seek(0)
        try:
            json.loads('{bad json}')
        except json.JSONDecodeError as e:
            error = (e.msg, e.lineno, e.colno)
        (json.dumps({'b': 1, 'a': [True, None, 1.5]}, sort_keys=True), json.dumps({'x': 'é'}, ensure_ascii=False, indent=2),
         json.loads('{"a": [1, 2.5, null, false]}'), json.load(buffer), json.dumps(Decimal('1.5'), cls=Encoder), error,
         json.JSONDecoder().decode('[1]'), json.loads('1.1', parse_float=Decimal) == Decimal('1.1'))
    ''', ('{"a": [true, null, 1.5], "b": 1}', '{\n  "x": "é"\n}', {'a': [1, 2.5, None, False]}, {'a': [1, 2]}, '"1.5"', ('Expecting property name enclosed in double quotes', 1, 2), [1], True)),
    # ----- math ---------------------------------------------------------------------------------------------------
    case('math', '''
        import math
        r = lambda x: round(x, 10)
        (r(math.acos(0.5)), r(math.acosh(2)), r(math.asin(0.5)), r(math.asinh(1)), r(math.atan(1)), r(math.atan2(1, 1)),
         r(math.atanh(0.5)), r(math.cbrt(27)), math.ceil(1.2), math.comb(5, 2), math.copysign(1, -0.0), r(math.cos(0)),
         r(math.cosh(0)), math.degrees(math.pi), math.dist((0, 0), (3, 4)), r(math.e), r(math.erf(1)), r(math.erfc(1)),
         r(math.exp(1)), math.exp2(3), r(math.expm1(1e-5)), math.fabs(-2), math.factorial(6), math.floor(-1.5),
         math.fmod(7, 3), math.frexp(8), math.fsum([0.1] * 10), math.gamma(5), math.gcd(12, 18), math.hypot(3, 4),
         math.inf > 1e308, math.isclose(1.0, 1.0 + 1e-10), math.isfinite(1), math.isinf(math.inf), math.isnan(math.nan),
         math.isqrt(17), math.lcm(4, 6), math.ldexp(1, 3), r(math.lgamma(5)), r(math.log(math.e)), math.log10(1000),
         r(math.log1p(0)), math.log2(8), math.modf(2.5), math.nextafter(1, 2) > 1, math.perm(5, 2), r(math.pi),
         math.pow(2, 10), math.prod([1, 2, 3, 4]), r(math.radians(180)), math.remainder(10, 3), r(math.sin(0)),
         r(math.sinh(0)), math.sqrt(16), r(math.tan(0)), r(math.tanh(0)), r(math.tau), math.trunc(-2.7), math.ulp(1.0) > 0)
    ''', (1.0471975512, 1.3169578969, 0.5235987756, 0.881373587, 0.7853981634, 0.7853981634, 0.5493061443, 3.0, 2, 10, -1.0, 1.0, 1.0, 180.0, 5.0, 2.7182818285, 0.8427007929, 0.1572992071, 2.7182818285, 8.0, 1.00001e-05, 2.0, 720, -2, 1.0, (0.5, 4), 1.0, 24.0, 6, 5.0, True, True, True, True, True, 4, 12, 8.0, 3.1780538303, 1.0, 3.0, 0.0, 3.0, (0.5, 2.0), True, 20, 3.1415926536, 1024.0, 24, 3.1415926536, 1.0, 0.0, 0.0, 4.0, 0.0, 0.0, 6.2831853072, -2, True)),
    # ----- operator ---------------------------------------------------------------------------------------------
    case('operator', '''
        import operator as op
        class Box:
            def __init__(self):
                self.items = [1]
                self.name = 'box'
            def size(self, extra=0):
                return len(self.items) + extra
        b = Box()
        x = [1, 2]
        op.setitem(x, 0, 10)
        op.delitem(x, 1)
        m = 5
        m = op.iadd(m, 1); m = op.isub(m, 2); m = op.imul(m, 3); m = op.ifloordiv(m, 2); m = op.imod(m, 4)
        m = op.ipow(m, 3); m = op.ilshift(m, 1); m = op.irshift(m, 2); m = op.iand(m, 6); m = op.ior(m, 1)
        m = op.ixor(m, 2); m = op.itruediv(m, 2)
        class Mat:
            def __matmul__(self, other):
                return 'matmul'
            def __imatmul__(self, other):
                return 'imatmul'
        (op.abs(-1), op.add(1, 2), op.and_(6, 3), op.attrgetter('name')(b), op.call(len, [1]), op.concat([1], [2]),
         op.contains([1], 1), op.countOf([1, 1, 2], 1), op.eq(1, 1), op.floordiv(7, 2), op.ge(2, 1), op.getitem('ab', 1),
         op.gt(1, 2), op.iconcat([1], [2]), op.index(5), op.indexOf('abc', 'c'), op.inv(0), op.invert(1), op.is_(None, None),
         op.is_not(1, None), op.itemgetter(0, 2)('abc'), op.le(1, 1), op.length_hint(iter([1, 2])), op.lshift(1, 3),
         op.lt(1, 2), op.matmul(Mat(), Mat()), op.imatmul(Mat(), Mat()), op.methodcaller('size', 2)(b), op.mod(7, 3),
         op.mul(3, 4), op.ne(1, 2), op.neg(3), op.not_(0), op.or_(4, 1), op.pos(-2), op.pow(2, 5), op.rshift(8, 2),
         op.sub(5, 3), op.truediv(7, 2), op.truth([]), op.xor(6, 3), x, m)
    ''', (1, 3, 2, 'box', 1, [1, 2], True, 2, True, 3, True, 'b', False, [1, 2], 5, 2, -1, -2, True, True, ('a', 'c'), True, 2, 8, True, 'matmul', 'imatmul', 3, 1, 12, True, -3, True, 5, -2, 32, 2, 2, 3.5, False, 5, [10], 3.5)),
    # ----- os, os.path, pathlib, open (with files) -----------------------------------------------------------
    case('os-files', '''
        import os
        os.makedirs('out/deep', exist_ok=True)
        os.mkdir('out/other')
        with open('out/deep/a.txt', 'w') as f:
            f.write('hello')
        os.rename('out/deep/a.txt', 'out/deep/b.txt')
        os.replace('out/deep/b.txt', 'out/c.txt')
        listing = sorted(os.listdir('out'))
        walked = [(top, sorted(dirs), sorted(files)) for top, dirs, files in os.walk('data')]
        entries = sorted((e.name, e.is_dir(), e.is_file(), e.is_symlink()) for e in os.scandir('data'))
        with os.scandir('.') as it:
            top_entries = sorted(e.name for e in it)
        st = os.stat('notes.txt')
        lst = os.lstat('notes.txt')
        os.remove('out/c.txt')
        os.rmdir('out/other')
        os.unlink('bytes.bin')
        os.removedirs('out/deep')
        try:
            os.stat('missing.txt')
        except FileNotFoundError as e:
            missing = (e.errno, e.strerror, e.filename)
        (listing, walked, entries, top_entries, st.st_size, lst.st_size, isinstance(st, os.stat_result), missing,
         os.path.exists('out'), sorted(os.listdir()), issubclass(os.error, Exception), os.strerror(2),
         isinstance(os.scandir('data').__next__(), os.DirEntry))
    ''', (['c.txt', 'deep', 'other'], [('data', ['raw'], ['.hidden', 'config.json', 'sales.csv']), ('data/raw', [], ['readme.md'])], [('.hidden', False, True, False), ('config.json', False, True, False), ('raw', True, False, False), ('sales.csv', False, True, False)], ['bytes.bin', 'data', 'notes.txt', 'out'], 34, 34, True, (2, 'No such file or directory', 'missing.txt'), False, ['data', 'notes.txt'], True, 'No such file or directory', True), files=True),
    case('os-chdir', '''
        import os
        from pathlib import Path
        start = os.getcwd()
        os.chdir('data')
        inside = (sorted(os.listdir()), open('config.json').read() == open(start + '/data/config.json').read(),
                  os.getcwd() == start + '/data', Path.cwd() == Path(start, 'data'), os.path.abspath('x') == start + '/data/x')
        os.chdir('raw/..//./')
        normalized = os.getcwd() == start + '/data'
        errors = []
        for target in ('sales.csv', 'missing', 'missing/..', 'sales.csv/..', 'raw/../missing/../raw'):
            try:
                os.chdir(target)
            except OSError as e:
                errors.append((type(e).__name__, e.errno, e.filename))
        unmoved = os.getcwd() == start + '/data'
        os.chdir(Path('..'))
        for path in ('nope/../../notes.txt', 'sales.csv/../sales.csv'):
            try:
                open('data/' + path)
            except OSError as e:
                errors.append((type(e).__name__, e.errno, e.filename))
        (inside, normalized, errors, unmoved, os.getcwd() == start, open('data/raw/../../notes.txt').read().split()[0])
    ''', ((['.hidden', 'config.json', 'raw', 'sales.csv'], True, True, True, True), True, [('NotADirectoryError', 20, 'sales.csv'), ('FileNotFoundError', 2, 'missing'), ('FileNotFoundError', 2, 'missing/..'), ('NotADirectoryError', 20, 'sales.csv/..'), ('FileNotFoundError', 2, 'raw/../missing/../raw'), ('FileNotFoundError', 2, 'data/nope/../../notes.txt'), ('NotADirectoryError', 20, 'data/sales.csv/../sales.csv')], True, True, 'first'), files=True),
    case('os-constants-and-env', '''
        import os
        class P(os.PathLike):
            def __fspath__(self):
                return 'p'
        (os.sep, os.altsep, os.extsep, os.pathsep, os.linesep, os.curdir, os.pardir, os.defpath, os.devnull, os.name,
         os.SEEK_SET, os.SEEK_CUR, os.SEEK_END, os.F_OK, os.R_OK, os.W_OK, os.X_OK, os.fspath(P()), os.fsencode('é'),
         os.fsdecode(b'x'), callable(os.getenv), callable(os.getcwd), hasattr(os.environ, 'get'))
    ''', ('/', None, '.', ':', '\n', '.', '..', '/bin:/usr/bin', '/dev/null', 'posix', 0, 1, 2, 0, 4, 2, 1, 'p', b'\xc3\xa9', 'x', True, True, True)),
    case('os-urandom', '''
        import os
        a, b = os.urandom(16), os.urandom(0)
        (type(a).__name__, len(a), b)
    ''', ('bytes', 16, b'')),
    case('os-path', '''
        import os.path
        from os import path
        p = 'data/sales.csv'
        (os.path.join('a', 'b', 'c.txt'), os.path.basename(p), os.path.dirname(p), os.path.split(p), os.path.splitext(p),
         os.path.splitdrive(p), os.path.normpath('a/./b/../c'), os.path.normcase('A/B'), os.path.isabs('/x'),
         os.path.commonprefix(['abc', 'abd']), os.path.commonpath(['/a/b', '/a/c']), os.path.exists(p), os.path.lexists(p),
         os.path.isfile(p), os.path.isdir('data'), os.path.islink(p), os.path.getsize(p), os.path.getmtime(p) > 0,
         os.path.getatime(p) > 0, os.path.getctime(p) > 0, os.path.abspath(p) == os.path.join(os.getcwd(), p),
         os.path.realpath(p) == os.path.abspath(p), os.path.relpath('data/raw', 'data'), os.path.samefile(p, './' + p),
         path.sep, path.altsep, path.curdir, path.pardir, path.pathsep, path.extsep, path.defpath, path.devnull,
         path.supports_unicode_filenames, os.path.exists('nope'))
    ''', ('a/b/c.txt', 'sales.csv', 'data', ('data', 'sales.csv'), ('data/sales', '.csv'), ('', 'data/sales.csv'), 'a/c', 'A/B', True, 'ab', '/a', True, True, True, True, False, 40, True, True, True, True, True, 'raw', True, '/', None, '.', '..', ':', '.', '/bin:/usr/bin', '/dev/null', False, False), files=True),
    case('pathlib', '''
        from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath, PosixPath
        root = Path('.')
        notes = root / 'notes.txt'
        out = Path('out')
        out.mkdir()
        (out / 'sub').mkdir(parents=True, exist_ok=True)
        written = (out / 'a.txt').write_text('alpha\\n')
        (out / 'b.bin').write_bytes(b'\\x01\\x02')
        (out / 'c.txt').touch()
        (out / 'a.txt').rename(out / 'renamed.txt')
        (out / 'c.txt').replace(out / 'd.txt')
        with (out / 'renamed.txt').open('a') as f:
            f.write('beta\\n')
        (out / 'd.txt').unlink()
        (out / 'missing').unlink(missing_ok=True)
        (out / 'sub').rmdir()
        pure = PurePosixPath('/a/b/c.tar.gz')
        (notes.read_text().splitlines()[0], notes.exists(), notes.is_file(), Path('data').is_dir(), notes.is_symlink(),
         sorted(p.name for p in Path('data').iterdir()), sorted(str(p) for p in Path('data').glob('*.csv')),
         sorted(str(p) for p in root.rglob('*.md')), written, (out / 'renamed.txt').read_text(), (out / 'b.bin').read_bytes(),
         sorted(p.name for p in out.iterdir()), notes.stat().st_size, notes.lstat().st_size, notes.resolve() == notes.absolute(),
         Path.cwd() == root.absolute(), notes.samefile('notes.txt'), pure.name, pure.suffix, pure.suffixes, pure.stem,
         str(pure.parent), pure.parts, str(pure.with_suffix('.zip')), str(pure.relative_to('/a')), pure.is_absolute(),
         str(PureWindowsPath('c:/x/y')), isinstance(Path('x'), PurePath), type(Path('x')).__name__, PosixPath is type(Path('x')),
         repr(Path('a') / 'b'), pure.match('*.gz'), str(PurePath('x', 'y')))
    ''', ('first line', True, True, True, False, ['.hidden', 'config.json', 'raw', 'sales.csv'], ['data/sales.csv'], ['data/raw/readme.md'], 6, 'alpha\nbeta\n', b'\x01\x02', ['b.bin', 'renamed.txt'], 34, 34, True, True, True, 'c.tar.gz', '.gz', ['.tar', '.gz'], 'c.tar', '/a/b', ('/', 'a', 'b', 'c.tar.gz'), '/a/b/c.tar.zip', 'b/c.tar.gz', True, 'c:\\x\\y', True, 'PosixPath', True, "PosixPath('a/b')", True, 'x/y'), files=True),
    case('open-modes', '''
        with open('notes.txt') as f:
            first = f.readline()
            rest = f.read()
        with open('notes.txt', encoding='utf-8') as f:
            lines = [line.rstrip('\\n') for line in f]
        with open('bytes.bin', 'rb') as f:
            raw = f.read()
        with open('new.txt', 'w') as f:
            f.write('one\\n')
            f.writelines(['two\\n', 'three\\n'])
        with open('new.txt', 'a') as f:
            print('four', file=f)
        with open('new.txt', 'r+') as f:
            f.seek(0)
            f.write('ONE')
        with open('bin.dat', 'wb') as f:
            f.write(b'\\x00\\xff')
        with open('bin.dat', 'ab') as f:
            f.write(b'!')
        with open('exclusive.txt', 'x') as f:
            f.write('x')
        try:
            open('exclusive.txt', 'x')
        except FileExistsError as e:
            exists = e.errno
        try:
            open('nope.txt')
        except FileNotFoundError as e:
            missing = str(e)
        try:
            open('data')
        except IsADirectoryError as e:
            is_dir = str(e)
        try:
            with open('new.txt') as f:
                f.write('x')
        except Exception as e:
            not_writable = f'{type(e).__name__}: {e}'
        try:
            open('new.txt', 'rw')
        except ValueError as e:
            bad_mode = str(e)
        open('dropped.txt', 'w').write('written without close')
        with open('w+.txt', 'w+') as f:
            f.write('abc')
            f.seek(0)
            wplus = f.read()
        (first, rest, lines, raw, open('new.txt').read(), open('bin.dat', 'rb').read(), exists, missing, is_dir,
         not_writable, bad_mode, open('dropped.txt').read(), wplus, open('notes.txt').name, open('notes.txt').mode)
    ''', ('first line\n', 'second line\nthird line\n', ['first line', 'second line', 'third line'], b'\x00\x01\x02\xff', 'ONE\ntwo\nthree\nfour\n', b'\x00\xff!', 17, "[Errno 2] No such file or directory: 'nope.txt'", "[Errno 21] Is a directory: 'data'", 'UnsupportedOperation: not writable', 'must have exactly one of create/read/write/append mode', 'written without close', 'abc', 'notes.txt', 'r'), files=True),
    case('os-error-words', '''
        import os
        from pathlib import Path
        words = []
        attempts = [
            lambda: os.listdir('notes.txt/a'), lambda: os.stat('notes.txt/a/b'), lambda: open('notes.txt/a'),
            lambda: open('notes.txt/a', 'w'), lambda: os.mkdir('notes.txt/a'), lambda: os.remove('notes.txt/a'),
            lambda: os.rmdir('notes.txt/a'), lambda: os.listdir('missing/x'), lambda: os.rename('missing.txt', 'other.txt'),
            lambda: os.rename('notes.txt/a', 'b'), lambda: os.replace('notes.txt', 'data'), lambda: os.rename('data', 'notes.txt'),
        ]
        for attempt in attempts:
            try:
                attempt()
            except OSError as error:
                words.append((type(error).__name__, str(error), error.filename, error.filename2))
        words, Path('notes.txt/a').exists(), Path('notes.txt/a').is_file()
    ''', ([('NotADirectoryError', "[Errno 20] Not a directory: 'notes.txt/a'", 'notes.txt/a', None), ('NotADirectoryError', "[Errno 20] Not a directory: 'notes.txt/a/b'", 'notes.txt/a/b', None), ('NotADirectoryError', "[Errno 20] Not a directory: 'notes.txt/a'", 'notes.txt/a', None), ('NotADirectoryError', "[Errno 20] Not a directory: 'notes.txt/a'", 'notes.txt/a', None), ('NotADirectoryError', "[Errno 20] Not a directory: 'notes.txt/a'", 'notes.txt/a', None), ('NotADirectoryError', "[Errno 20] Not a directory: 'notes.txt/a'", 'notes.txt/a', None), ('NotADirectoryError', "[Errno 20] Not a directory: 'notes.txt/a'", 'notes.txt/a', None), ('FileNotFoundError', "[Errno 2] No such file or directory: 'missing/x'", 'missing/x', None), ('FileNotFoundError', "[Errno 2] No such file or directory: 'missing.txt' -> 'other.txt'", 'missing.txt', 'other.txt'), ('NotADirectoryError', "[Errno 20] Not a directory: 'notes.txt/a' -> 'b'", 'notes.txt/a', 'b'), ('IsADirectoryError', "[Errno 21] Is a directory: 'notes.txt' -> 'data'", 'notes.txt', 'data'), ('NotADirectoryError', "[Errno 20] Not a directory: 'data' -> 'notes.txt'", 'data', 'notes.txt')], False, False), files=True),
    # ----- pprint -------------------------------------------------------------------------------------------------
    case('pprint', '''
        import pprint
        data = {'b': list(range(12)), 'a': {'nested': ('x' * 30, 'y' * 30)}}
        pprint.pprint(data, width=40)
        pprint.pp({'z': 1, 'a': 2})
        printer = pprint.PrettyPrinter(indent=2, width=30)
        printer.pprint([1, 2, 3])
        (pprint.pformat(data, width=60, compact=True), pprint.saferepr({'a': 1}), pprint.isreadable([1]),
         pprint.isrecursive([1]), printer.pformat({'k': 'v'}))
    ''', ("{'a': {'nested': ('xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx',\n                  'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyy')},\n 'b': [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]}", "{'a': 1}", True, False, "{'k': 'v'}"), output="{'a': {'nested': ('xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx',\n                  'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyy')},\n 'b': [0,\n       1,\n       2,\n       3,\n       4,\n       5,\n       6,\n       7,\n       8,\n       9,\n       10,\n       11]}\n{'z': 1, 'a': 2}\n[1, 2, 3]\n"),
    # ----- random ----------------------------------------------------------------------------------------------------
    case('random', '''
        import random
        random.seed(42)
        values = [random.random(), random.randint(1, 6), random.randrange(0, 10, 2), random.choice('abc'),
                  random.choices('abc', k=3), random.sample(range(10), 3), random.uniform(1, 2), random.triangular(),
                  random.getrandbits(8), random.randbytes(2), random.gauss(), random.normalvariate(), random.lognormvariate(0, 1),
                  random.expovariate(1), random.vonmisesvariate(0, 1), random.gammavariate(2, 1), random.betavariate(2, 3),
                  random.paretovariate(2), random.weibullvariate(1, 2)]
        deck = list(range(5))
        random.shuffle(deck)
        state = random.getstate()
        a = random.random()
        random.setstate(state)
        b = random.random()
        r = random.Random(7)
        ([round(v, 6) if isinstance(v, float) else v for v in values], deck, a == b, r.randint(1, 100), isinstance(r, random.Random))
    ''', ([0.639427, 1, 4, 'a', ['a', 'c', 'c'], [8, 1, 6], 1.031783, 0.216443, 59, b'^\x81', -1.028801, 1.240772, 0.77828, 0.325994, 6.035514, 0.94793, 0.197705, 1.166044, 0.210767], [2, 4, 1, 0, 3], True, 42, True)),
    # ----- re ---------------------------------------------------------------------------------------------------------
    case('re', '''
        import re
        text = 'Order 66: 3 apples, 12 pears'
        pattern = re.compile(r'(?P<count>\\d+) (?P<fruit>\\w+)')
        m = pattern.search(text)
        verbose = re.compile(r"""
            \\d+  # digits
        """, re.VERBOSE)
        try:
            re.compile('(')
        except re.error as e:
            error = type(e).__name__
        (re.findall(r'\\d+', text), [x.group('fruit') for x in re.finditer(pattern, text)], m.groupdict(), m.span(),
         re.sub(r'\\d+', '#', text), re.subn('a', 'A', 'banana'), re.split(r'[,:]\\s*', text), bool(re.match('Order', text)),
         bool(re.fullmatch(r'\\w+', 'abc')), re.escape('a.b*c'), re.search('APPLES', text, re.I).group(),
         re.findall('^x', 'x\\nx', re.M), re.findall('a.b', 'a\\nb', re.S), bool(re.match(r'\\w', 'é', re.A)), verbose.findall(text),
         isinstance(m, re.Match), isinstance(pattern, re.Pattern), error, re.IGNORECASE == re.I, re.MULTILINE == re.M,
         re.DOTALL == re.S, re.ASCII == re.A, re.UNICODE == re.U, re.LOCALE == re.L, re.VERBOSE == re.X, re.NOFLAG == 0,
         isinstance(re.I, re.RegexFlag), re.purge())
    ''', (['66', '3', '12'], ['apples', 'pears'], {'count': '3', 'fruit': 'apples'}, (10, 18), 'Order #: # apples, # pears', ('bAnAnA', 3), ['Order 66', '3 apples', '12 pears'], True, True, 'a\\.b\\*c', 'apples', ['x', 'x'], ['a\nb'], False, ['66', '3', '12'], True, True, 'PatternError' if _VERSION >= (3, 13) else 'error', True, True, True, True, True, True, True, True, True, None)),
    *([case('re-template', '''
        import re
        re.template('ab').match('ab') is not None
    ''', True)] if _VERSION < (3, 13) else []),  # removed in 3.13
    # ----- statistics ---------------------------------------------------------------------------------------------
    case('statistics', '''
        import statistics as st
        data = [2, 4, 4, 4, 5, 5, 7, 9]
        nd = st.NormalDist(100, 15)
        try:
            st.mean([])
        except st.StatisticsError as e:
            empty = str(e)
        r = lambda x: round(x, 6)
        (st.mean(data), r(st.fmean(data)), r(st.geometric_mean([1, 4])), r(st.harmonic_mean([1, 4])), st.median(data),
         st.median_low(data), st.median_high(data), st.median_grouped(data), st.mode(data), st.multimode('aabbc'),
         r(st.pstdev(data)), st.pvariance(data), r(st.stdev(data)), r(st.variance(data)), st.quantiles(data, n=4),
         r(st.correlation([1, 2, 3], [2, 4, 7])), st.covariance([1, 2, 3], [1, 2, 3]), tuple(st.linear_regression([1, 2, 3], [2, 4, 6])),
         r(nd.cdf(115)), round(nd.inv_cdf(0.5), 6), empty)
    ''', (5, 5.0, 2.0, 1.6, 4.5, 4, 5, 4.5, 4, ['a', 'b'], 2.0, 4, 2.13809, 4.571429, [4.0, 4.5, 6.5], 0.993399, 1.0, (2.0, 0.0), 0.841345, 100.0, 'mean requires at least one data point')),
    # ----- string, textwrap -------------------------------------------------------------------------------------------
    case('string', '''
        import string
        t = string.Template('$who likes ${what}')
        (t.substitute(who='ann', what='tea'), t.safe_substitute(who='bob'), string.capwords('hello  world'),
         string.ascii_letters[:5], string.ascii_lowercase[-3:], string.ascii_uppercase[:3], string.digits,
         string.hexdigits, string.octdigits, string.punctuation[:5], len(string.printable), repr(string.whitespace))
    ''', ('ann likes tea', 'bob likes ${what}', 'Hello World', 'abcde', 'xyz', 'ABC', '0123456789', '0123456789abcdefABCDEF', '01234567', '!"#$%', 100, "' \\t\\n\\r\\x0b\\x0c'")),
    case('textwrap', '''
        import textwrap
        text = 'The quick brown fox jumps over the lazy dog'
        w = textwrap.TextWrapper(width=15, initial_indent='* ')
        (textwrap.wrap(text, 20), textwrap.fill(text, 25), textwrap.shorten(text, 20), textwrap.dedent('  a\\n    b'),
         textwrap.indent('a\\nb', '> '), w.wrap(text))
    ''', (['The quick brown fox', 'jumps over the lazy', 'dog'], 'The quick brown fox jumps\nover the lazy dog', 'The quick [...]', 'a\n  b', '> a\n> b', ['* The quick', 'brown fox jumps', 'over the lazy', 'dog'])),
    # ----- sys, time --------------------------------------------------------------------------------------------------
    case('sys', '''
        import sys
        sys.stdout.write('out\\n')
        sys.stderr.write('err\\n')
        limit = sys.get_int_max_str_digits()
        sys.set_int_max_str_digits(5000)
        big = len(str(10 ** 4500))
        sys.set_int_max_str_digits(limit)
        try:
            sys.exit(3)
        except SystemExit as e:
            code = e.code
        (sys.version_info[:2], sys.version.split()[0] == '.'.join(map(str, sys.version_info[:3])), sys.platform,
         sys.byteorder, sys.maxsize, sys.maxunicode, sys.float_info.max > 1e308, sys.int_info.bits_per_digit,
         sys.hash_info.width, sys.float_repr_style, sys.getsizeof(0) > 0, sys.intern('x'), sys.getdefaultencoding(),
         sys.hexversion >> 24, big, code)
    ''', (_VERSION, True, 'linux', 'little', 9223372036854775807, 1114111, True, 30, 64, 'short', True, 'x', 'utf-8', 3, 4501, 3), output='out\nerr\n'),
    case('sys-exit-uncaught', '''
        import sys
        sys.exit('stopping here')
    ''', raises='SystemExit: stopping here'),
    case('time', '''
        import time
        start, start_ns = time.perf_counter(), time.perf_counter_ns()
        mono, mono_ns = time.monotonic(), time.monotonic_ns()
        cpu, cpu_ns = time.process_time(), time.process_time_ns()
        time.sleep(0.01)
        elapsed = time.perf_counter() - start
        parsed = time.strptime('2024-03-01 12:30', '%Y-%m-%d %H:%M')
        epoch = time.gmtime(0)
        (elapsed >= 0.009, time.perf_counter_ns() > start_ns, time.monotonic() >= mono, time.monotonic_ns() >= mono_ns,
         time.process_time() >= cpu, time.process_time_ns() >= cpu_ns, tuple(parsed)[:5], time.strftime('%Y-%m-%d %H:%M', epoch),
         isinstance(epoch, time.struct_time), epoch.tm_year)
    ''', (True, True, True, True, True, True, (2024, 3, 1, 12, 30), '1970-01-01 00:00', True, 1970)),
    # ----- typing ---------------------------------------------------------------------------------------------------
    case('typing-names', '''
        import typing as t
        T = t.TypeVar('T')
        P = t.ParamSpec('P')
        Ts = t.TypeVarTuple('Ts')
        UserId = t.NewType('UserId', int)
        class Box(t.Generic[T]):
            def __init__(self, item: T) -> None:
                self.item = item
        @t.runtime_checkable
        class Closable(t.Protocol):
            def close(self) -> None: ...
        class File:
            def close(self) -> None:
                pass
        class Movie(t.TypedDict, total=False):
            title: t.Required[str]
            year: t.NotRequired[int]
        @t.overload
        def f(x: int) -> int: ...
        @t.overload
        def f(x: str) -> str: ...
        def f(x):
            return x
        @t.final
        class Leaf:
            pass
        @t.dataclass_transform()
        def model(cls):
            return cls
        def never() -> t.NoReturn:
            raise RuntimeError
        def check(x: int | str) -> str:
            if isinstance(x, int):
                return 'int'
            elif isinstance(x, str):
                return 'str'
            else:
                t.assert_never(x)
        def apply(fn: t.Callable[t.Concatenate[int, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
            return fn(1, *args, **kwargs)
        def is_str(x: object) -> t.TypeGuard[str]:
            return isinstance(x, str)
        Alias: t.TypeAlias = t.List[t.Dict[str, t.Tuple[int, ...]]]
        annotations = [t.Any, t.AnyStr, t.Annotated[int, 'meta'], t.ClassVar[int], t.Final[int], t.Literal['a'],
            t.LiteralString, t.Never, t.Optional[int], t.Union[int, str], t.Self, t.Type[int], t.Text, t.Unpack[Ts],
            t.AbstractSet[int], t.AsyncContextManager[int], t.AsyncGenerator[int, None], t.AsyncIterable[int],
            t.AsyncIterator[int], t.Awaitable[int], t.BinaryIO, t.ByteString, t.ChainMap[str, int], t.Collection[int],
            t.Container[int], t.ContextManager[int], t.Coroutine[None, None, int], t.Counter[str], t.DefaultDict[str, int],
            t.Deque[int], t.FrozenSet[int], t.Generator[int, None, None], t.Hashable, t.IO[str], t.ItemsView[str, int],
            t.Iterable[int], t.Iterator[int], t.KeysView[str], t.Mapping[str, int], t.MappingView, t.Match[str],
            t.MutableMapping[str, int], t.MutableSequence[int], t.MutableSet[int], t.OrderedDict[str, int], t.Pattern[str],
            t.Reversible[int], t.Sequence[int], t.Set[int], t.Sized, t.SupportsAbs[int], t.SupportsBytes, t.SupportsComplex,
            t.SupportsFloat, t.SupportsIndex, t.SupportsInt, t.SupportsRound[int], t.TextIO, t.ValuesView[int],
            t.ParamSpecArgs, t.ParamSpecKwargs, t.ForwardRef('int')]
        t.clear_overloads()
        (Box(1).item, UserId(5), isinstance(File(), Closable), t.get_origin(t.List[int]) is list, [a.__name__ for a in t.get_args(t.Dict[str, int])],
         t.is_typeddict(Movie), t.cast(int, 'x'), t.assert_type(1, int), check(1), apply(lambda a, b: a + b, 2), is_str('x'),
         t.TYPE_CHECKING, len(annotations), f(2), t.get_overloads(f), Leaf.__name__, model(Leaf) is Leaf, t.reveal_type(5),
         t.NamedTuple('N', [('a', int)])(1).a, callable(never))
    ''', (1, 5, True, True, ['str', 'int'], True, 'x', 1, 'int', 3, True, False, 62, 2, [], 'Leaf', True, 5, 1, True), output="Runtime type is 'int'\n"),
    case('unicodedata', '''
        import unicodedata as ud
        (ud.name('é'), ud.lookup('LATIN SMALL LETTER A WITH GRAVE'), ud.category('A'), ud.bidirectional('A'), ud.combining('\\u0301'),
         ud.decimal('7'), ud.decomposition('é'), ud.digit('5'), ud.east_asian_width('Ａ'), ud.is_normalized('NFC', 'é'),
         ud.mirrored('('), ud.normalize('NFKD', 'ﬁ'), ud.numeric('½'), ud.unidata_version, ud.ucd_3_2_0.name('a'), isinstance(ud.ucd_3_2_0, ud.UCD))
    ''', ('LATIN SMALL LETTER E WITH ACUTE', 'à', 'Lu', 'L', 230, 7, '0065 0301', 5, 'F', True, 1, 'fi', 0.5, {(3, 11): '14.0.0', (3, 12): '15.0.0', (3, 13): '15.1.0'}[_VERSION], 'LATIN SMALL LETTER A', True)),
    case('uuid', '''
        import uuid
        u = uuid.UUID('12345678-1234-5678-1234-567812345678')
        (str(uuid.uuid3(uuid.NAMESPACE_DNS, 'example.com')), str(uuid.uuid5(uuid.NAMESPACE_URL, 'https://x')),
         str(uuid.NAMESPACE_OID), str(uuid.NAMESPACE_X500), u.hex, u.version, u.variant == uuid.RFC_4122,
         uuid.uuid4().version, len(str(uuid.uuid4())), uuid.RESERVED_NCS, uuid.RESERVED_MICROSOFT, uuid.RESERVED_FUTURE,
         uuid.SafeUUID.unknown.name, u.int % 1000)
    ''', ('9073926b-929f-31c2-abc9-fad77ae3e8eb', '48d34be5-10a3-5c30-96ef-9cf9a60110f2', '6ba7b812-9dad-11d1-80b4-00c04fd430c8', '6ba7b814-9dad-11d1-80b4-00c04fd430c8', '12345678123456781234567812345678', None, False, 4, 36, 'reserved for NCS compatibility', 'reserved for Microsoft compatibility', 'reserved for future definition', 'unknown', 104)),
    # ----- email.utils, graphlib, html, shlex, types, urllib.parse ---------------------------------
    case('email-utils', """
        import email.utils
        from email import utils
        when = email.utils.parsedate_to_datetime('Mon, 20 Nov 1995 19:12:08 -0500')
        parsed = email.utils.parsedate_tz('Mon, 20 Nov 1995 19:12:08 -0500')
        (email.utils.parseaddr('Ann Lee <ann@example.org>'), email.utils.formataddr(('Bo', 'bo@example.org')),
         email.utils.getaddresses(['a@x.org, Bo <b@y.org>']), email.utils.format_datetime(when),
         email.utils.formatdate(0, usegmt=True), email.utils.mktime_tz(parsed), email.utils.parsedate('Mon, 20 Nov 1995 19:12:08')[:6],
         email.utils.quote('say "hi"'), email.utils.unquote('"quoted"'), utils.encode_rfc2231('café', 'utf-8'),
         email.utils.decode_rfc2231("utf-8''caf%C3%A9"), email.utils.collapse_rfc2231_value(('utf-8', '', 'caf%C3%A9')),
         email.utils.decode_params([('text/plain', ''), ('name*', "utf-8''a%20b")]))
    """, (('Ann Lee', 'ann@example.org'), 'Bo <bo@example.org>', [('', 'a@x.org'), ('Bo', 'b@y.org')],
          'Mon, 20 Nov 1995 19:12:08 -0500', 'Thu, 01 Jan 1970 00:00:00 GMT', 816912728, (1995, 11, 20, 19, 12, 8),
          'say \\"hi\\"', 'quoted', "utf-8''caf%C3%A9", ['utf-8', '', 'caf%C3%A9'], 'caf%C3%A9',
          [('text/plain', ''), ('name', ('utf-8', '', '"a b"'))])),
    case('graphlib', """
        import graphlib
        ts = graphlib.TopologicalSorter({'deploy': {'build', 'test'}, 'test': {'build'}})
        order = list(ts.static_order())
        cyclic = graphlib.TopologicalSorter({'a': {'b'}, 'b': {'a'}})
        try:
            cyclic.prepare()
        except graphlib.CycleError as error:
            cycle = error.args[1]
        (order, sorted(cycle))
    """, (['build', 'test', 'deploy'], ['a', 'a', 'b'])),
    case('html', """
        import html
        (html.escape('<a href="x">Tom & Jerry</a>'), html.escape("'", quote=False), html.unescape('&lt;p&gt; &amp; &eacute; &#39;'))
    """, ('&lt;a href=&quot;x&quot;&gt;Tom &amp; Jerry&lt;/a&gt;', "'", "<p> & é '")),
    case('shlex', """
        import shlex
        parts = shlex.split('grep -r "two words" --include=*.py # comment', comments=True)
        (parts, shlex.quote("it's here"), shlex.join(['echo', 'a b', "c'd"]))
    """, (['grep', '-r', 'two words', '--include=*.py'], "'it'\"'\"'s here'", "echo 'a b' 'c'\"'\"'d'")),
    case('types', """
        import types
        async def agen():
            yield 1
        async def coro():
            pass
        def gen():
            yield 1
        class A:
            slot = None
            __slots__ = ('x',)
            def m(self):
                return 1
            @types.DynamicClassAttribute
            def dyn(self):
                return 'dyn'
        c = coro()
        c.close()
        ns = types.SimpleNamespace(a=1, b=2)
        proxy = types.MappingProxyType({'k': 1})
        Made = types.new_class('Made', (A,), {}, lambda namespace: namespace.update(n=5))
        meta, namespace, kwds = types.prepare_class('P', (object,))
        checks = [
            isinstance(lambda: 0, types.FunctionType), isinstance(gen, types.LambdaType), isinstance(gen(), types.GeneratorType),
            isinstance(c, types.CoroutineType), isinstance(agen(), types.AsyncGeneratorType), isinstance(len, types.BuiltinFunctionType),
            isinstance([].append, types.BuiltinMethodType), types.ClassMethodDescriptorType.__name__ == 'classmethod_descriptor',
            types.GetSetDescriptorType.__name__ == 'getset_descriptor', isinstance(A.__dict__['x'], types.MemberDescriptorType),
            isinstance(str.join, types.MethodDescriptorType), isinstance(A().m, types.MethodType), isinstance((1).__add__, types.MethodWrapperType),
            isinstance(object.__init__, types.WrapperDescriptorType), isinstance(types, types.ModuleType), isinstance(None, types.NoneType),
            isinstance(..., types.EllipsisType), isinstance(NotImplemented, types.NotImplementedType),
            isinstance(list[int], types.GenericAlias), isinstance(int | str, types.UnionType),
        ]
        (all(checks), repr(ns), proxy['k'], Made().m(), Made.n, meta.__name__, dict(namespace), kwds, types.resolve_bases((A,)) == (A,),
         A().dyn, types.MethodType(lambda self: self.a, ns)(), types.ModuleType('mod').__name__)
    """, (True, 'namespace(a=1, b=2)', 1, 1, 5, 'type', {}, {}, True, 'dyn', 1, 'mod')),
    case('urllib-parse', """
        import urllib.parse
        from urllib import parse
        u = urllib.parse.urlparse('https://user@example.com:8080/a/b;p?x=1&y=2#frag')
        s = urllib.parse.urlsplit('https://example.com/a?q=1#f')
        d = urllib.parse.urldefrag('https://example.com/a#part')
        b = urllib.parse.urlsplit(b'https://example.com/x')
        (u.hostname, u.port, u.path, u.params, u.query, u.fragment, urllib.parse.urlunparse(u), urllib.parse.urlunsplit(s),
         urllib.parse.urljoin('https://a/b/c', '../d'), d.url, d.fragment, urllib.parse.urlencode({'q': 'a b', 'n': [1, 2]}, doseq=True),
         urllib.parse.parse_qs('a=1&a=2&b=3'), urllib.parse.parse_qsl('a=1&b=2'), urllib.parse.quote('a b/c'), parse.quote_plus('a b&c'),
         urllib.parse.quote_from_bytes(b'\\xff '), urllib.parse.unquote('a%20b'), urllib.parse.unquote_plus('a+b%26c'),
         urllib.parse.unquote_to_bytes('%ff'), type(u) is urllib.parse.ParseResult, type(s) is urllib.parse.SplitResult,
         type(d) is urllib.parse.DefragResult, type(b) is urllib.parse.SplitResultBytes,
         type(urllib.parse.urlparse(b'x')) is urllib.parse.ParseResultBytes, type(urllib.parse.urldefrag(b'x#y')) is urllib.parse.DefragResultBytes)
    """, ('example.com', 8080, '/a/b', 'p', 'x=1&y=2', 'frag', 'https://user@example.com:8080/a/b;p?x=1&y=2#frag',
          'https://example.com/a?q=1#f', 'https://a/d', 'https://example.com/a', 'part', 'q=a+b&n=1&n=2', {'a': ['1', '2'], 'b': ['3']},
          [('a', '1'), ('b', '2')], 'a%20b/c', 'a+b%26c', '%FF%20', 'a b', 'a b&c', b'\xff', True, True, True, True, True, True)),
    case('string-formatter', """
        import string
        class Point:
            def __init__(self):
                self.x = 3
        class Upper(string.Formatter):
            def format_field(self, value, format_spec):
                return super().format_field(value, format_spec).upper()
        f = string.Formatter()
        (f.format('{0.x} {name!r} {0.x:>{width}}', Point(), name='n', width=3), f.vformat('{a}-{b}', (), {'a': 1, 'b': 2}),
         list(f.parse('a{b}c')), Upper().format('{} {}', 'ab', 'cd'), f.get_field('0.x', (Point(),), {})[0])
    """, ('3 \'n\'   3', '1-2', [('a', 'b', '', None), ('c', None, None, None)], 'AB CD', 3)),
    case('typing-get-type-hints', """
        import typing
        from typing import Annotated, Literal, Optional, get_type_hints
        class Node:
            value: int
            children: 'list[Node]'
            parent: Optional['Node'] = None
            tag: Literal['a', 'b'] = 'a'
            note: Annotated[str, 'meta'] = ''
        def f(x: int, y: 'str | None' = None) -> 'dict[str, Node]':
            return {}
        hints = get_type_hints(Node, localns={'Node': Node})
        (hints['value'] is int, hints['children'] == list[Node], hints['parent'] == Optional[Node], hints['tag'] == Literal['a', 'b'],
         hints['note'] is str, typing.get_type_hints(f) == {'x': int, 'y': str | None, 'return': dict[str, Node]},
         get_type_hints(Node, localns={'Node': Node}, include_extras=True)['note'] == Annotated[str, 'meta'])
    """, (True, True, True, True, True, True, True)),
    case('sys-recursion-limit', """
        import sys
        before = sys.getrecursionlimit()
        sys.setrecursionlimit(200)
        def down(n):
            return down(n + 1)
        try:
            down(0)
        except RecursionError as error:
            message = str(error)
        after = sys.getrecursionlimit()
        sys.setrecursionlimit(before)
        try:
            sys.setrecursionlimit(0)
        except ValueError as error:
            low = str(error)
        (before >= 1000, after, message, low)
    """, (True, 200, 'maximum recursion depth exceeded', 'recursion limit must be greater or equal than 1')),
    # ----- logging, warnings ---------------------------------------------------------------------
    case('logging', """
        import io
        import logging
        buffer = io.StringIO()
        handler = logging.StreamHandler(buffer)
        handler.setFormatter(logging.Formatter('%(levelname)s %(name)s %(message)s'))
        log = logging.getLogger('conformance.app')
        log.propagate = False
        log.setLevel(logging.DEBUG)
        log.addHandler(handler)
        class OnlyErrors(logging.Filter):
            def filter(self, record):
                return record.levelno >= logging.ERROR
        quiet = logging.getLogger('conformance.quiet')
        quiet.propagate = False
        quiet.addHandler(handler)
        quiet.addFilter(OnlyErrors())
        quiet.warning('hidden')
        quiet.error('shown')
        log.debug('d %d', 1)
        log.info('i')
        log.warning('w')
        log.error('e')
        log.critical('c')
        log.log(logging.INFO, 'via log')
        logging.LoggerAdapter(log, {'user': 'ann'}).info('adapted')
        brace = logging.StreamHandler(buffer)
        brace.setFormatter(logging.Formatter('{levelname}:{message}', style='{'))
        log.addHandler(brace)
        log.warning('both')
        log.removeHandler(brace)
        batch = logging.BufferingFormatter(logging.Formatter('[%(message)s]'))
        records = [logging.makeLogRecord({'msg': 'one'}), logging.LogRecord('n', logging.INFO, 'f.py', 1, 'two', None, None)]
        logging.addLevelName(25, 'NOTICE')
        logging.getLogger('conformance.null').addHandler(logging.NullHandler())
        class Plain(logging.Handler):
            def emit(self, record):
                buffer.write('plain ' + record.getMessage() + '\\n')
        log.addHandler(Plain())
        log.log(25, 'notice')
        (buffer.getvalue(), batch.format(records), logging.getLevelName(25), logging.getLevelName('NOTICE'),
         logging.getLevelNamesMapping()['WARN'], (logging.CRITICAL, logging.FATAL, logging.ERROR, logging.WARNING, logging.WARN,
         logging.INFO, logging.DEBUG, logging.NOTSET), logging.BASIC_FORMAT, logging.getLoggerClass() is logging.Logger,
         logging.getLogRecordFactory() is logging.LogRecord, logging.raiseExceptions, isinstance(log, logging.Logger))
    """, ('ERROR conformance.quiet shown\nDEBUG conformance.app d 1\nINFO conformance.app i\nWARNING conformance.app w\n'
          'ERROR conformance.app e\nCRITICAL conformance.app c\nINFO conformance.app via log\nINFO conformance.app adapted\n'
          'WARNING conformance.app both\nWARNING:both\nNOTICE conformance.app notice\nplain notice\n', '[one][two]', 'NOTICE', 25, 30,
          (50, 50, 40, 30, 30, 20, 10, 0), '%(levelname)s:%(name)s:%(message)s', True, True, True, True)),
    case('logging-root', """
        import logging
        logging.basicConfig(level=logging.INFO, format='%(levelname)s:%(name)s:%(lineno)d:%(message)s')
        logging.debug('not shown')
        logging.info('started')
        logging.warning('careful %s', 'now')
        logging.warn('old name')
        logging.error('bad')
        logging.critical('worse')
        logging.fatal('fatal')
        logging.log(logging.INFO, 'logged')
        try:
            {}['missing']
        except KeyError:
            logging.exception('lookup failed')
        logging.disable(logging.CRITICAL)
        logging.critical('disabled')
        logging.disable(logging.NOTSET)
        class Tagged(logging.Logger):
            pass
        logging.setLoggerClass(Tagged)
        tagged = type(logging.getLogger('tagged')).__name__
        logging.setLoggerClass(logging.Logger)
        make = logging.getLogRecordFactory()
        logging.setLogRecordFactory(lambda *args, **kwargs: make(*args, **kwargs))
        logging.info('factory')
        logging.root.handlers[0].setFormatter(logging.Formatter('%(name)s:%(message)s'))
        logging.captureWarnings(True)
        import io
        import warnings
        warnings.warn('captured')
        logging.captureWarnings(False)
        out = io.StringIO()
        warnings.showwarning('shown', UserWarning, 'main.py', 3, file=out, line='x = 1')
        logging.shutdown()
        (tagged, out.getvalue())
    """, ('Tagged', 'main.py:3: UserWarning: shown\n  x = 1\n'),
         output='INFO:root:4:started\nWARNING:root:5:careful now\nWARNING:root:6:old name\nERROR:root:7:bad\nCRITICAL:root:8:worse\n'
         'CRITICAL:root:9:fatal\nINFO:root:10:logged\nERROR:root:14:lookup failed\nTraceback (most recent call last):\n'
         '  File "main.py", line 12, in <module>\n    {}[\'missing\']\n    ~~^^^^^^^^^^^\nKeyError: \'missing\'\n'
         "INFO:root:25:factory\npy.warnings:main.py:30: UserWarning: captured\n  warnings.warn('captured')\n\n", sandbox_only=True),
    case('warnings', """
        import io
        import warnings
        def old():
            warnings.warn('old() is deprecated', DeprecationWarning, stacklevel=2)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            old()
            warnings.warn('plain')
            warnings.filterwarnings('ignore', message='skip')
            warnings.warn('skip me')
            warnings.resetwarnings()
            warnings.simplefilter('always')
            warnings.warn(RuntimeWarning('as instance'))
        with warnings.catch_warnings():
            warnings.simplefilter('error')
            try:
                warnings.warn('now an error')
            except UserWarning as error:
                raised = str(error)
        ([(type(w.message).__name__, str(w.message), w.lineno) for w in caught], raised,
         warnings.formatwarning('formatted', FutureWarning, 'main.py', 7, line='  y = 2  '))
    """, ([('DeprecationWarning', 'old() is deprecated', 7), ('UserWarning', 'plain', 8), ('RuntimeWarning', 'as instance', 13)],
          'now an error', 'main.py:7: FutureWarning: formatted\n  y = 2\n')),
    # ----- names new in 3.12 and 3.13 ----------------------------------------------------------------
    *([case('names-3.12', '''
        import calendar, collections.abc, csv, itertools, math, typing
        months = [calendar.JANUARY, calendar.FEBRUARY, calendar.MARCH, calendar.APRIL, calendar.MAY, calendar.JUNE, calendar.JULY,
                  calendar.AUGUST, calendar.SEPTEMBER, calendar.OCTOBER, calendar.NOVEMBER, calendar.DECEMBER]
        class Lines:
            def __init__(self):
                self.lines = []
            def write(self, line):
                self.lines.append(line)
        out = Lines()
        csv.writer(out, quoting=csv.QUOTE_STRINGS).writerow(['a', 1, None])
        csv.writer(out, quoting=csv.QUOTE_NOTNULL).writerow(['a', 1, None])
        class Base:
            def run(self) -> int:
                return 1
        class Child(Base):
            @typing.override
            def run(self) -> int:
                return 2
        Pair = typing.TypeAliasType('Pair', tuple[int, int])
        import logging
        logging.getLogger('named').addHandler(handler := logging.StreamHandler())
        handler.set_name('console')
        ([int(month) for month in months], calendar.Month(3).name, int(calendar.Day.MONDAY), isinstance(b'x', collections.abc.Buffer),
         out.lines, list(itertools.batched('abcde', 2)), math.sumprod([1, 2], [3, 4]), Child().run(), Pair.__name__,
         logging.getHandlerByName('console') is handler, 'console' in logging.getHandlerNames())
    ''', (list(range(1, 13)), 'MARCH', 0, True, ['"a",1,\r\n', '"a","1",\r\n'], [('a', 'b'), ('c', 'd'), ('e',)], 11, 2, 'Pair', True, True))]
      if _VERSION >= (3, 12) else []),
    *([case('names-3.13', '''
        import base64, copy, enum, math, re, statistics, typing
        class Closable(typing.Protocol):
            def close(self) -> None: ...
        class Point(typing.NamedTuple):
            x: int
            y: int
        class Movie(typing.TypedDict):
            title: typing.ReadOnly[str]
        def is_int(x: object) -> typing.TypeIs[int]:
            return isinstance(x, int)
        try:
            re.compile('(')
        except re.PatternError as e:
            error = type(e).__name__
        density = statistics.kde([1, 2, 3], h=1)
        draw = statistics.kde_random([1, 2, 3], h=1, seed=1)
        (base64.z85encode(b'hello!!!'), base64.z85decode(b'xK#0@zY<mx'), tuple(copy.replace(Point(1, 2), y=5)), issubclass(enum.EnumDict, dict),
         math.fma(2.0, 3.0, 1.0), error, round(density(2), 6), round(draw(), 6), sorted(typing.get_protocol_members(Closable)),
         typing.is_protocol(Closable), is_int(3), typing.NoDefault is not None, Movie(title='x')['title'])
    ''', (b'xK#0@zY{nE', b'hello wo', (1, 5), True, 7.0, 'PatternError', 0.294295, 1.174348, ['close'], True, True, True, 'x'))]
      if _VERSION >= (3, 13) else []),
    # ----- what the host grants: the clock and the environment (sandbox only) ------------------------
    case('clock-datetime', '''
        import datetime as dt
        from datetime import datetime, date, timezone
        class Stamp(datetime):
            pass
        (datetime.now().isoformat(), datetime.now(timezone.utc).isoformat(), datetime.utcnow().isoformat(),
         datetime.today().isoformat(), date.today().isoformat(), dt.date.today().isoformat(), type(Stamp.now()).__name__,
         getattr(datetime, 'now')().isoformat(), datetime(2020, 1, 1).now().isoformat())
    ''', ('2024-05-17T09:30:15.250000', '2024-05-17T07:30:15.250000+00:00', '2024-05-17T07:30:15.250000',
          '2024-05-17T09:30:15.250000', '2024-05-17', '2024-05-17', 'Stamp', '2024-05-17T09:30:15.250000',
          '2024-05-17T09:30:15.250000'), grants=True),
    case('clock-time', '''
        import time
        (time.time(), time.time_ns(), tuple(time.gmtime())[:6], time.strftime('%Y-%m-%d %H:%M'))
    ''', (1715931015.25, 1715931015250000000, (2024, 5, 17, 7, 30, 15), '2024-05-17 09:30'), grants=True),
    case('environ', '''
        import os
        os.environ['LOCAL'] = 'set in the script'
        del os.environ['DEBUG']
        (os.environ['REGION'], os.getenv('REGION'), os.getenv('MISSING', 'default'), os.environ.get('DEBUG'),
         sorted(os.environ), 'REGION' in os.environ, os.environ.copy()['LOCAL'])
    ''', ('eu-west', 'eu-west', 'default', None, ['LOCAL', 'REGION'], True, 'set in the script'), grants=True),
]
