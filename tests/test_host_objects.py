"""Host objects: a host function's result (or a module's value) may hold a `HostObject` or a
`HostClass`; the script holds an object of a class of its own whose listed methods and attributes
are host calls to the real object, and it comes back out as itself. Nothing of the host is reached
but the listed members: a member not listed, a dunder, a forged name, another session's name, one
from before a load, a class not made constructible, all reach nothing, each with its error."""

from __future__ import annotations

import msgpack
import pytest

import corral
from corral import HostClass, HostObject
from corral.hostobjects import HostObjects, call_name
from corral.integrations.stubs import stubs_from_functions
from corral.values import Decoder, HostCallables, HostFunction, giving_callables, pack, unnamed


class Counter:
    """A host object with state, a method the script may call and one it may not."""

    LIMIT = 10

    def __init__(self, start: int = 0) -> None:
        self.count = start
        self.token = 'host secret'

    def add(self, n: int) -> int:
        self.count += n
        return self.count

    async def fetch(self, n: int) -> list[int]:
        return [self.count] * n

    def reset(self) -> None:
        self.count = 0

    @classmethod
    def starting_at(cls, start: int) -> HostObject:
        return HostObject(cls(start), methods=['add'])


async def double(n: int) -> int:
    return n * 2


def given(counter: Counter) -> HostObject:
    return HostObject(counter, methods=['add', 'fetch'], attributes=['count'])


async def test_a_host_object_is_used_through_its_listed_members_on_the_host(session):
    counter = Counter()
    wrapped = given(counter)
    code = 'c = get()\n[c.add(2), c.add(3), c.count, await c.fetch(2), type(c).__name__, repr(c), c is get(), isinstance(c, type(get()))]'
    value = await session.feed_run(code, external_lookup={'get': lambda: wrapped})
    assert value == [2, 5, 5, [5, 5], 'Counter', '<Counter object of the host>', True, True]
    assert counter.count == 5  # the host's object changed, none other
    assert await session.feed_run('c.add(1), c.count') == (6, 6)  # kept in a variable, used in a later feed
    back = await session.feed_run('c')
    assert back is wrapped  # back out: the HostObject it went in as
    seen: list[object] = []
    await session.feed_run('show(c, [c])', external_lookup={'show': lambda *args: seen.extend(args)})
    assert seen[0] is wrapped and seen[1][0] is wrapped


async def test_members_not_listed_and_dunders_are_refused(session):
    await session.feed_run('c = get()', external_lookup={'get': lambda: given(Counter())})
    refusals = {
        'c.reset()': ('AttributeError', "'Counter' object has no attribute 'reset'"),
        'c.token': ('AttributeError', "'Counter' object has no attribute 'token'"),
        'c.LIMIT': ('AttributeError', "'Counter' object has no attribute 'LIMIT'"),
        'c.count = 1': ('AttributeError', "'Counter' object has no attribute 'count'"),
        'getattr(c, "reset")': ('AttributeError', "'Counter' object has no attribute 'reset'"),
        'c.__dict__': (
            'AttributeError',
            'the __dict__ of Counter objects cannot be read in the sandbox: only objects and classes the script defines show theirs; read the attributes by name',
        ),
        'getattr(c, "__getattribute__")': (
            'AttributeError',
            "attribute '__getattribute__' cannot be read in the sandbox: names like __this__ are refused except a short list; use getattr(obj, name)",
        ),
        'type(c)(1)': ('TypeError', "cannot instantiate host class 'Counter'"),
        'class Sub(type(c)):\n    pass\nSub()': ('TypeError', "cannot instantiate host class 'Counter'"),
        'o = object.__new__(type(c))\no.add(1)': ('AttributeError', "'Counter' object has no attribute 'add'"),
        'import copy\ncopy.copy(c)': (
            'TypeError',
            "copy() in the sandbox cannot copy a 'Counter' object; it copies builtin containers and values, collections containers, dates and decimals, and objects of classes the script defines",
        ),
    }
    for code, expected in refusals.items():
        with pytest.raises(corral.SandboxRuntimeError) as error:
            await session.feed_run(code)
        assert (error.value.exc_type, error.value.message) == expected, code
    with pytest.raises(corral.SandboxSyntaxError) as syntax:
        await session.feed_run('c.__reduce__()')
    assert "attribute '__reduce__' cannot be read in the sandbox" in str(syntax.value)
    with pytest.raises(corral.SandboxRuntimeError) as error:  # an object the script made of the class does not leave
        await session.feed_run('object.__new__(type(c))')
    assert error.value.message.startswith("the value of the last expression cannot leave the sandbox: a value of type 'Counter' cannot cross")
    assert await session.feed_run('c.count') == 0  # nothing reached the object


async def test_computed_and_look_alike_names_reach_no_more_than_written_ones(session):
    """`getattr` with a name built at run time, or with letters that look like a listed name's (NFKC
    folds them in source, never in a string), reaches only the listed members, and a computed
    `__class__` only the script's own class of the object."""
    await session.feed_run('c = get()', external_lookup={'get': lambda: given(Counter())})
    assert await session.feed_run('[getattr(c, "_" + "_class__") is type(c), getattr(c, "ad" + "d")(2), ｃ.ａｄｄ(1)]') == [True, 2, 3]
    refusals = {
        'getattr(c, "ａdd")(1)': "'Counter' object has no attribute 'ａdd'",
        'getattr(c, "add\u200b")(1)': "'Counter' object has no attribute 'add\\u200b'",
        'getattr(c, "_" + "value")': (
            "attribute '_value' is private: the sandbox allows names starting with '_' only on objects of classes the script "
            'defines (Counter objects are not); use the public API'
        ),
        'getattr(c, "val" + "ue")': "'Counter' object has no attribute 'value'",
        'getattr(c, "tok" + "en")': "'Counter' object has no attribute 'token'",
    }
    for code, message in refusals.items():
        with pytest.raises(corral.SandboxRuntimeError) as error:
            await session.feed_run(code)
        assert (error.value.exc_type, error.value.message) == ('AttributeError', message), code
    assert await session.feed_run('c.count') == 3


async def test_a_member_whose_value_cannot_cross_is_the_scripts_type_error_naming_it(session):
    counter = Counter()
    counter.token = object()  # type: ignore[assignment]
    await session.feed_run('c = get()', external_lookup={'get': lambda: HostObject(counter, methods=['add'], attributes=['token'])})
    with pytest.raises(corral.SandboxRuntimeError) as error:
        await session.feed_run('c.token')
    assert (error.value.exc_type, error.value.message) == (
        'TypeError',
        "Counter.token() returned a value of type 'object' that cannot enter the sandbox: a value of type 'object' cannot cross "
        'the sandbox boundary; use None, bool, int, float, str, bytes, list, tuple, dict, set, frozenset, datetime, Decimal or UUID values',
    )
    assert await session.feed_run('c.add(1)') == 1  # the session goes on


async def test_a_host_class_constructs_on_the_host_when_it_may(session):
    made: list[Counter] = []

    class Made(Counter):
        def __init__(self, start: int = 0) -> None:
            super().__init__(start)
            made.append(self)

    cls = HostClass(Made, init=True, methods=['starting_at'], attributes=['LIMIT'], instance_methods=['add'], instance_attributes=['count'])
    code = 'M = get()\nm = M(4)\n[m.add(1), m.count, isinstance(m, M), type(m) is M, M.__name__, type(M.starting_at(7)).__name__, M.LIMIT]'
    assert await session.feed_run(code, external_lookup={'get': lambda: cls}) == [5, 5, True, True, 'Made', 'Made', 10]
    assert [item.count for item in made] == [5, 7]
    assert await session.feed_run('M') is cls
    with pytest.raises(corral.SandboxRuntimeError) as error:
        await session.feed_run('M.reset()')
    assert (error.value.exc_type, error.value.message) == ('AttributeError', "type object 'Made' has no attribute 'reset'")
    # a class the script makes of the class's own metaclass reads the same class attributes and no more
    assert await session.feed_run('X = type(M)("X", (), {})\nX.LIMIT') == 10
    with pytest.raises(corral.SandboxRuntimeError) as error:
        await session.feed_run('X.count')
    assert (error.value.exc_type, error.value.message) == ('AttributeError', "type object 'Made' has no attribute 'count'")
    with pytest.raises(corral.SandboxRuntimeError) as error:
        await session.feed_run('class Sub(M):\n    pass')
    assert (error.value.exc_type, error.value.message) == (
        'TypeError',
        'class Sub cannot be made in the sandbox: its metaclass MadeType was not made by a class statement; define the metaclass with a class statement',
    )
    with pytest.raises(corral.SandboxRuntimeError) as error:
        await session.feed_run('M.count')
    assert (error.value.exc_type, error.value.message) == ('AttributeError', "type object 'Made' has no attribute 'count'")
    with pytest.raises(corral.SandboxRuntimeError) as error:  # the instance lists: `fetch` is not one
        await session.feed_run('m.fetch(1)')
    assert (error.value.exc_type, error.value.message) == ('AttributeError', "'Made' object has no attribute 'fetch'")


def test_wrappers_refuse_names_that_are_not_public():
    for bad in ('__reduce__', '_private', 'not a name', 3):
        with pytest.raises(ValueError) as error:
            HostObject(Counter(), methods=['add', bad])  # type: ignore[list-item]
        assert str(error.value) == f'HostObject methods may only list public names (no leading underscore): {bad!r} is not one'
    with pytest.raises(ValueError, match=r"^HostClass instance_attributes may only list public names \(no leading underscore\): '__dict__' is not one$"):
        HostClass(Counter, instance_attributes=['__dict__'])
    with pytest.raises(TypeError, match="^HostObject attributes must be a collection of names, not a str: 'count'$"):
        HostObject(Counter(), attributes='count')  # type: ignore[arg-type]
    with pytest.raises(ValueError, match='^HostClass methods are called on the class: Counter.add is no classmethod or staticmethod$'):
        HostClass(Counter, methods=['add'])
    with pytest.raises(TypeError, match='^HostClass needs a class, not Counter$'):
        HostClass(Counter())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^HostObject cls is the HostClass of 'Counter', but the value is a 'int'$"):
        HostObject(5, cls=HostClass(Counter))


async def test_a_class_whose_name_is_no_identifier_is_refused_where_it_is_wrapped(session):
    """The script's class is named as the host's: a class made with `type()` under a name that is no
    identifier was the worker's `ValueError: malformed host object in a frame`, blaming a frame."""
    Odd = type('not a name', (), {'add': lambda self, n: n})
    with pytest.raises(ValueError, match=r"^HostObject needs a value of a class named by an identifier, as the script names it: 'not a name' is not one$"):
        HostObject(Odd(), methods=['add'])
    with pytest.raises(ValueError, match=r"^HostClass needs a class named by an identifier, as the script names it: 'not a name' is not one$"):
        HostClass(Odd)
    with pytest.raises(corral.SandboxRuntimeError) as error:
        await session.feed_run('get()', external_lookup={'get': lambda: HostObject(Odd(), methods=['add'])})
    assert (error.value.exc_type, error.value.message) == (
        'ValueError',
        "HostObject needs a value of a class named by an identifier, as the script names it: 'not a name' is not one",
    )
    assert HostObject(type('Ｃounter', (), {})()).cls is None  # an identifier of other letters is one


async def test_a_call_the_worker_cannot_send_names_the_member_as_the_script_knows_it(pool):
    """A call whose arguments cannot leave named the method by its wire name (`<object 9f...>.add()`),
    and a script's own recursion that reached a host object's method at the recursion limit was
    `TypeError: ... cannot be called with these arguments: maximum recursion depth exceeded`."""
    cls = HostClass(Counter, init=True, methods=['starting_at'])
    async with pool.checkout(limits=corral.Limits(value_size=1000)) as session:
        await session.feed_run('c = get()\nC = cls()', external_lookup={'get': lambda: given(Counter()), 'cls': lambda: cls})
        refusals = {
            'c.add(object())': (
                'TypeError',
                "Counter.add() cannot be called with these arguments: a value of type 'object' cannot cross the sandbox boundary; "
                'use None, bool, int, float, str, bytes, list, tuple, dict, set, frozenset, datetime, Decimal or UUID values',
            ),
            'await c.fetch([object()])': (
                'TypeError',
                "Counter.fetch() cannot be called with these arguments: a value of type 'object' cannot cross the sandbox boundary; "
                'use None, bool, int, float, str, bytes, list, tuple, dict, set, frozenset, datetime, Decimal or UUID values',
            ),
            'C(start=object())': (
                'TypeError',
                "Counter() cannot be called with these arguments: a value of type 'object' cannot cross the sandbox boundary; "
                'use None, bool, int, float, str, bytes, list, tuple, dict, set, frozenset, datetime, Decimal or UUID values',
            ),
            'C.starting_at("x" * 2000)': (
                'OverflowError',
                'the call to Counter.starting_at() takes at least 2,121 bytes; at most 1,000 may leave the sandbox (the value_size limit)',
            ),
        }
        for code, expected in refusals.items():
            with pytest.raises(corral.SandboxRuntimeError) as error:
                await session.feed_run(code)
            assert (error.value.exc_type, error.value.message) == expected, code
        with pytest.raises(corral.SandboxLimitError) as limit:
            await session.feed_run('def down(n):\n    return c.add(1) + down(n - 1) if n else 0\ndown(5000)')
        assert str(limit.value).splitlines()[-2:] == [
            'RecursionError: maximum recursion depth exceeded',
            "the sandbox's recursion limit is 1000 calls (Limits.recursion); write deep recursion as a loop",
        ]
        assert await session.feed_run('c.add(1) - c.add(-1)') == 1  # the session goes on


async def test_async_classmethods_staticmethods_and_functions_an_object_holds_are_awaited(session):
    """An async classmethod or staticmethod listed as an object's method was taken for a sync one:
    `await c.cm(1)` was `TypeError: object int can't be used in 'await' expression`."""

    class Jobs:
        @classmethod
        async def cm(cls, n: int) -> int:
            return n + 1

        @staticmethod
        async def sm(n: int) -> int:
            return n + 2

        def sync(self, n: int) -> int:
            return n + 4

    jobs = Jobs()
    jobs.own = double  # type: ignore[attr-defined]  # an async function the object holds itself
    wrapped = HostObject(jobs, methods=['cm', 'sm', 'own', 'sync'])
    assert [(name, wrapped.is_async(name)) for name in wrapped.methods] == [('cm', True), ('sm', True), ('own', True), ('sync', False)]
    code = 'j = get()\n[await j.cm(1), await j.sm(1), await j.own(1), j.sync(1)]'
    assert await session.feed_run(code, external_lookup={'get': lambda: wrapped}) == [2, 3, 2, 5]


def test_the_host_resolves_only_names_it_gave_and_members_it_listed():
    objects, others = HostObjects(), HostObjects()
    counter = Counter()
    wrapped = given(counter)
    ref = objects.ref(wrapped)
    cls = objects.ref(HostClass(Counter, methods=['starting_at'], attributes=['LIMIT']))
    assert ref.token.startswith('<object ') and ref.class_name == 'Counter' and ref.methods == (('add', False), ('fetch', True))
    assert objects.resolve(f'{ref.token}.add')(3) == 3 and counter.count == 3
    assert objects.resolve(f'{ref.token}:count')() == 3

    def refused(objects: HostObjects, name: str) -> tuple[str, str]:
        with pytest.raises(Exception) as error:
            objects.resolve(name)()
        return type(error.value).__name__, str(error.value)

    gone = 'the host object or function this call reaches is not one this session gave (one given before the session was stored and loaded is gone)'
    assert refused(others, f'{ref.token}.add') == ('NameError', gone)  # another session's name: in no text the host gives
    forged = ref.token[:-2] + ('1' if ref.token[-2] != '1' else '2') + '>'
    assert refused(objects, f'{forged}.add')[0] == 'NameError'
    for name in (f'{ref.token}.reset', f'{ref.token}.__reduce__', f'{ref.token}.__class__', f'{ref.token}:token', f'{ref.token}:__dict__', f'<async {ref.token[1:]}.add', f'{ref.token}.fetch'):
        assert refused(objects, name)[0] == 'AttributeError', name
    assert refused(objects, f'{ref.token}.reset') == ('AttributeError', "'Counter' object has no attribute 'reset'")
    assert refused(objects, f'{ref.token}.__call__') == ('AttributeError', "'Counter' object has no attribute '__call__'")
    assert refused(objects, f'{cls.token}.__call__') == ('TypeError', "cannot instantiate host class 'Counter'")
    assert refused(objects, f'{cls.token}.add') == ('AttributeError', "type object 'Counter' has no attribute 'add'")
    assert refused(objects, f'{cls.token}:token') == ('AttributeError', "type object 'Counter' has no attribute 'token'")
    assert refused(objects, f'{cls.token}:__dict__') == ('AttributeError', "type object 'Counter' has no attribute '__dict__'")
    assert objects.resolve(f'{cls.token}:LIMIT')() == 10
    assert type(objects.resolve(f'{cls.token}.starting_at')(2)) is HostObject
    assert counter.count == 3


def test_a_message_that_cannot_know_what_a_call_reaches_shows_it_without_the_sessions_name_for_it():
    """A replay's divergence or a Deferred's payload names the call from its name alone: a host
    object's, a class's or a callable value's random name is never shown."""
    callables = HostCallables()
    ref = callables.objects.ref(given(Counter()))
    cls = callables.objects.ref(HostClass(Counter, init=True, methods=['starting_at']))
    value = callables.ref(HostFunction(double))
    names = [call_name(ref.token, 'add'), call_name(ref.token, 'count', read=True), call_name(ref.token, 'fetch', awaited=True),
             call_name(cls.token, '__call__'), call_name(cls.token, 'starting_at'), value.name, 'lookup']
    assert [unnamed(name) for name in names] == [
        '<host object>.add', '<host object>.count', '<host object>.fetch', '<host class>', '<host class>.starting_at', '<host function>', 'lookup',
    ]


def test_a_name_of_another_session_or_a_forged_one_decodes_to_no_object():
    mine, theirs = HostCallables(), HostCallables()
    wrapped = given(Counter())
    with giving_callables(mine):
        data = pack([wrapped], side='host')
    assert Decoder(callables=mine).decode(data)[0] is wrapped
    stale = Decoder(callables=theirs).decode(data)[0]
    assert type(stale).__name__ == 'ObjectRef' and stale.class_name == 'Counter' and not hasattr(stale, 'value')
    for bad in (b'\x01', msgpack.packb([1, 2]), msgpack.packb(['<object 1>', '<class 2>', 'Counter', [], [], [['__reduce__', False]], []]), msgpack.packb(['<nope>', '<class 2>', 'C', [], [], [], None]), msgpack.packb(['<object 1>', '<class 2>', 'C', [], ['__class__'], [], None])):
        with pytest.raises(ValueError, match='^malformed host object in a frame$'):
            Decoder(callables=mine).decode(msgpack.packb(msgpack.ExtType(43, bad)))


def test_outside_a_sessions_packing_a_host_object_is_refused():
    with pytest.raises(TypeError, match="^a value of type 'HostObject' cannot cross the sandbox boundary"):
        pack(given(Counter()), side='host')
    with pytest.raises(TypeError, match="^a value of type 'HostClass' cannot cross the sandbox boundary"):
        pack(HostClass(Counter), side='host')


async def test_a_stored_session_replays_host_object_calls_and_the_object_is_gone_after_a_load():
    counter = Counter()
    gets: list[int] = []

    def get() -> HostObject:
        gets.append(1)
        return given(counter)

    gone = 'is not one this session gave (one given before the session was stored and loaded is gone)'
    made = {'Made': lambda: HostClass(Counter, init=True, methods=['starting_at'], instance_methods=['add'])}
    async with corral.Pool(checkpoints=None) as pool:
        async with pool.checkout() as session:
            await session.feed_run('c = get()\nkept = [c.add(2), c.count]\nC = Made()', external_lookup={'get': get, **made})
            state = await session.dump()
        async with pool.checkout() as loaded:
            await loaded.load_session(state)  # replayed: each call answered from the journal, none run again
            assert (gets, counter.count) == ([1], 2)
            assert await loaded.feed_run('kept, type(c).__name__') == ([2, 2], 'Counter')
            for code, subject in [
                ('c.add(1)', 'the Counter object whose add this calls'),
                ('c.count', 'the Counter object whose count this reads'),
                ('await c.fetch(1)', 'the Counter object whose fetch this calls'),
                ('C(1)', 'the class Counter this makes an object of'),
                ('C.starting_at(1)', 'the class Counter whose starting_at this calls'),
            ]:
                with pytest.raises(corral.SandboxRuntimeError) as error:
                    await loaded.feed_run(code)
                assert (error.value.exc_type, error.value.message) == ('NameError', f'{subject} {gone}'), code
            assert counter.count == 2
            code = 'try:\n    c.add(1)\nexcept NameError as error:\n    caught = str(error)\ncaught'
            assert await loaded.feed_run(code) == f'the Counter object whose add this calls {gone}'
            state = await loaded.dump()
        async with pool.checkout() as again:  # the refusal the journal keeps replays to the same text
            await again.load_session(state)
            assert await again.feed_run('caught') == f'the Counter object whose add this calls {gone}'


async def test_a_fork_or_a_second_checkout_reaches_none_of_the_objects_its_original_holds(tmp_path):
    """A fork starts from the original's worker (a checkpoint) with its proxies and their names: the
    names are the original's, so the fork's calls reach nothing; the original's still reach its object."""
    counter = Counter()
    async with corral.Pool(store=f'sqlite:///{tmp_path}/store.db') as pool:
        async with pool.checkout(ephemeral=False) as original:
            await original.feed_run('c = get()\nc.add(1)', external_lookup={'get': lambda: given(counter)})
            async with pool.checkout(session_id=original.session_id, fork=True) as fork:
                for code, subject in [('c.add(10)', 'whose add this calls'), ('c.count', 'whose count this reads'), ('await c.fetch(1)', 'whose fetch this calls')]:
                    with pytest.raises(corral.SandboxRuntimeError) as error:
                        await fork.feed_run(code)
                    assert (error.value.exc_type, error.value.message) == (
                        'NameError', f'the Counter object {subject} is not one this session gave (one given before the session was stored and loaded is gone)'
                    ), code
                back = await fork.feed_run('c')
                assert type(back).__name__ == 'ObjectRef' and not hasattr(back, 'value')  # its name alone, no object
            assert (await original.feed_run('c.add(100)'), counter.count) == (101, 101)


async def test_a_host_modules_value_may_hold_them(pool):
    counter = Counter()
    module = corral.ExternalModule({}, values={'counter': given(counter), 'Counter': HostClass(Counter, init=True, instance_methods=['add'])})
    async with pool.checkout(external_modules={'tools': module}) as session:
        assert await session.feed_run('from tools import counter, Counter\n[counter.add(4), Counter(1).add(1)]') == [4, 2]
    assert counter.count == 4


class Account:
    """An account on the host."""

    RATE: float = 0.5
    balance: int

    def __init__(self, balance: int = 0) -> None:
        self.balance = balance

    def deposit(self, amount: int) -> 'Account':
        """Add `amount`; the account again."""
        self.balance += amount
        return self

    async def history(self, n: int) -> list[int]:
        return [self.balance] * n

    @classmethod
    def opened(cls, balance: int) -> HostObject:
        return HostObject(cls(balance))


ACCOUNT = HostClass(Account, init=True, methods=['opened'], attributes=['RATE'], instance_methods=['deposit', 'history'], instance_attributes=['balance'])


@pytest.mark.slow
async def test_a_host_class_has_a_stub_class_of_what_the_script_may_use(pool):
    def open_account() -> Account:
        """The account of the user."""
        return Account()

    stubs = stubs_from_functions({'Account': ACCOUNT, 'open_account': open_account})
    assert stubs == (
        'from typing import Any\n\n\n'
        'class Account:\n'
        '    """An account on the host."""\n\n'
        '    RATE: float\n'
        '    balance: int\n'
        '    def __init__(self, balance: int = 0) -> None:\n'
        '        ...\n'
        '    def deposit(self, amount: int) -> Account:\n'
        '        """Add `amount`; the account again."""\n'
        '    async def history(self, n: int) -> list[int]:\n'
        '        ...\n'
        '    @classmethod\n'
        '    def opened(cls, balance: int) -> Any:\n'
        '        ...\n\n\n'
        'def open_account() -> Account:\n'
        '    """The account of the user."""\n'
    )
    async with pool.checkout(type_check=True, type_check_stubs=stubs) as session:
        await session.check('a = open_account()\nx: int = a.deposit(1).balance\ny: list[int] = await a.history(2)\nz: float = Account.RATE')
        with pytest.raises(corral.SandboxTypingError) as error:
            await session.check('a = open_account()\na.withdraw(1)')
        assert 'error[unresolved-attribute]: Object of type `Account` has no attribute `withdraw`' in str(error.value)


def test_a_stub_class_of_a_class_with_no_members_of_its_own():
    class Plain:
        pass

    assert stubs_from_functions({'Plain': HostClass(Plain, init=True, instance_methods=['run'])}) == (
        'from typing import Any\n\n\n'
        'class Plain:\n'
        '    def __init__(self, /, *args: Any, **kwargs: Any) -> None:\n'
        '        ...\n'
        '    def run(self, *args: Any, **kwargs: Any) -> Any:\n'
        '        ...\n'
    )
    assert stubs_from_functions({'Plain': HostClass(Plain)}) == 'class Plain:\n    ...\n'


async def test_after_a_load_a_module_offers_its_objects_again_and_one_held_from_before_is_gone():
    counter = Counter()

    def tools() -> corral.ExternalModule:
        return corral.ExternalModule({}, values={'counter': given(counter)})

    async with corral.Pool(checkpoints=None) as pool:
        async with pool.checkout(external_modules={'tools': tools()}) as session:
            assert await session.feed_run('import tools\nheld = tools.counter\nheld.add(1)') == 1
            state = await session.dump()
        async with pool.checkout(external_modules={'tools': tools()}) as loaded:
            await loaded.load_session(state)
            assert counter.count == 1  # the replay called nothing
            assert await loaded.feed_run('import tools\ntools.counter.add(1)') == 2  # the module's object as offered now
            with pytest.raises(corral.SandboxRuntimeError) as error:
                await loaded.feed_run('held.add(1)')
            assert error.value.exc_type == 'NameError'
    assert counter.count == 2


async def test_a_script_that_catches_the_refusal_finds_no_name_the_session_gave_in_it():
    """A script that holds an object from before a load catches the refusal of its calls (a
    method called, awaited, an attribute read) and looks at all it may of the error and the
    object: its text, args, repr, cause and context, the object's repr and its class's mro. No
    random name of the object is in any of it, nor in what the host is told."""
    async with corral.Pool(checkpoints=None) as pool:
        async with pool.checkout() as session:
            await session.feed_run('c = get()\nc.add(1)', external_lookup={'get': lambda: given(Counter())})
            state = await session.dump()
        async with pool.checkout() as loaded:
            await loaded.load_session(state)
            code = (
                'seen = []\n'
                'for use in (lambda: c.add(1), lambda: c.count):\n'
                '    try:\n'
                '        use()\n'
                '    except NameError as error:\n'
                '        seen.append([str(error), error.args, repr(error), repr(error.__cause__), repr(error.__context__), error.__suppress_context__])\n'
                'async def fetch():\n'
                '    try:\n'
                '        await c.fetch(1)\n'
                '    except NameError as error:\n'
                '        seen.append([str(error), error.args, repr(error), repr(error.__cause__), repr(error.__context__), error.__suppress_context__])\n'
                'await fetch()\n'
                'seen, repr(c), str(type(c).mro())'
            )
            seen, shown, mro = await loaded.feed_run(code)
            gone = 'is not one this session gave (one given before the session was stored and loaded is gone)'
            refusal = f'the host object or function this call reaches {gone}'
            texts = [f'the Counter object whose add this calls {gone}', f'the Counter object whose count this reads {gone}', f'the Counter object whose fetch this calls {gone}']
            assert seen == [
                [texts[0], (texts[0],), f'NameError({texts[0]!r})', 'None', 'None', False],
                [texts[1], (texts[1],), f'NameError({texts[1]!r})', 'None', 'None', False],
                [texts[2], (texts[2],), f'NameError({texts[2]!r})', 'None', f'NameError({refusal!r})', True],  # the host's refusal, token-free
            ]
            assert (shown, mro) == ('<Counter object of the host>', "[<class 'host.Counter'>, <class 'object'>]")
            for code in ('c.__reduce__()', 'c.__getstate__()', 'object.__getattribute__(c, "token")', 'c.add.__defaults__', 'c.add.__closure__'):
                with pytest.raises(corral.SandboxSyntaxError) as error:
                    await loaded.feed_run(code)
                assert '<object ' not in str(error.value), code
            for code, message in [
                ('vars(c)', "vars(): the __dict__ of Counter objects cannot be read in the sandbox: only objects and classes the script defines show theirs; read the attributes by name"),
                ('import copy\ncopy.copy(c)', "copy() in the sandbox cannot copy a 'Counter' object; it copies builtin containers and values, collections containers, dates and decimals, and objects of classes the script defines"),
            ]:
                with pytest.raises(corral.SandboxRuntimeError) as error:
                    await loaded.feed_run(code)
                assert error.value.message == message, code


class _Calls(corral.PoolObserver):
    def __init__(self) -> None:
        self.names: list[str] = []

    def host_call(self, function: str) -> None:
        self.names.append(function)


async def test_an_observer_is_told_a_host_object_s_or_a_callable_value_s_call_without_the_sessions_name_for_it():
    """What the pool's observer is told of each host call (a metric's label, a log line) and the
    call's span name the callable as a message does (`values.unnamed`): a host object's member as
    `<host object>.add`, a class's construction as `<host class>`, a callable value as `<host
    function>`; never the session's random name, a new one in every session."""
    observer = _Calls()
    made = HostClass(Counter, init=True, methods=['starting_at'], instance_methods=['add'])
    lookup = {'get': lambda: given(Counter()), 'Made': lambda: made, 'twice': lambda: HostFunction(double)}
    code = 'c = get()\nC = Made()\nd = twice()\n[c.add(1), c.count, await c.fetch(1), C(2).add(1), C.starting_at(3).add(1), await d(4)]'
    async with corral.Pool(checkpoints=None, observer=observer) as pool:
        for _ in range(2):
            async with pool.checkout() as session:
                assert await session.feed_run(code, external_lookup=lookup) == [1, 1, [1], 3, 4, 8]
    assert observer.names == 2 * [
        'get', 'Made', 'twice', '<host object>.add', '<host object>.count', '<host object>.fetch', '<host class>', '<host object>.add',
        '<host class>.starting_at', '<host object>.add', '<host function>',
    ]
