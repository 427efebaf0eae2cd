"""The guards' own defences, in process: lying strings, lying metaclasses, registration, match proxies."""

from __future__ import annotations

import textwrap

import pytest

from corral.language import compile_script
from corral.language.guards import MARK_NAME, guarded_getattr, is_script_class

from .attacks import _LYING_KEY, _STEAL_MARK
from .local import namespace, run_local


def local(code: str):
    return run_local(textwrap.dedent(code).strip() + '\n')


def test_str_subclass_cannot_lie_about_the_name():
    class Liar(str):
        def startswith(self, *args):
            return False

        def endswith(self, *args):
            return False

        def __eq__(self, other):
            return False

        __hash__ = str.__hash__

    with pytest.raises(AttributeError, match="'__bases__' cannot be read"):
        guarded_getattr((), Liar('__bases__'))


def test_script_classes_are_registered_and_unmarked():
    scope = namespace()
    code = textwrap.dedent('''
        import enum, typing, dataclasses, asyncio
        class Plain: pass
        class Color(enum.Enum):
            RED = 1
        class Row(typing.NamedTuple):
            a: int
        class Movie(typing.TypedDict):
            title: str
        class Proto(typing.Protocol):
            def close(self) -> None: ...
        @dataclasses.dataclass(slots=True)
        class Slotted:
            x: int
        class Meta(type): pass
        class WithMeta(metaclass=Meta): pass
        class Foreign(metaclass=lambda name, bases, ns: asyncio.Queue): pass
    ''')
    script = compile_script(code, '<script 1>')
    script.start(scope)
    for name in ('Plain', 'Color', 'Row', 'Movie', 'Proto', 'Slotted', 'Meta', 'WithMeta'):
        cls = scope[name]
        assert is_script_class(cls), name
        assert MARK_NAME not in vars(cls), name
    assert not is_script_class(scope['Foreign'])  # asyncio.Queue itself
    assert not is_script_class(int)


def test_a_protocol_does_not_require_the_mark():
    assert local('''
        import typing
        @typing.runtime_checkable
        class Closer(typing.Protocol):
            def close(self) -> None: ...
        class Other:
            def close(self):
                pass
        isinstance(Other(), Closer)
    ''') is True


def test_a_metaclass_with_lying_hash_and_eq_does_not_share_a_cache_entry():
    with pytest.raises(AttributeError, match="'_getters' is private"):
        local('''
            import asyncio
            class Liar(type):
                def __hash__(cls):
                    return hash(asyncio.Queue)
                def __eq__(cls, other):
                    return True
            class Mine(metaclass=Liar):
                def __init__(self):
                    self._getters = 'mine'
            Mine()._getters
            q = asyncio.Queue()
            q._getters
        ''')


# A script can no longer make the lying classes below (see `namespace_refusal`); they are made
# here, outside the script, to test the guards that stood before that rule on their own.

def test_a_faked_class_does_not_pass_a_private_class_pattern():
    # a foreign object whose class says it is C: the pattern must not read its private attribute
    import asyncio

    holder: list[type] = []
    fake = type('Q', (asyncio.Queue,), {'__class__': property(lambda self: holder[0])})
    assert run_local(textwrap.dedent('''
        class C:
            __match_args__ = ('_getters',)
            def __init__(self):
                self._getters = 'mine'
        holder.append(C)
        def f(v):
            match v:
                case C(getters):
                    return getters
                case _:
                    return 'no match'
        (f(C()), f(Q()))
    '''), Q=fake, holder=holder) == ('mine', 'no match')


def test_a_lying_instancecheck_still_reads_public_attributes_only():
    always = type('M', (type,), {'__instancecheck__': lambda cls, other: True})
    assert run_local(textwrap.dedent('''
        class Other:
            x = 5
            _secret = 'private'
        P2 = M('P2', (), {'__match_args__': ('x',)})
        P3 = M('P3', (), {'__match_args__': ('_secret',)})
        match Other():
            case P2(x):
                found = x
        match Other():
            case P3(s):
                leaked = s
            case _:
                leaked = None
        (found, leaked)
    '''), M=always) == (5, None)


def test_a_lying_match_args_key_is_read_from_the_checked_snapshot():
    # the red team's lying key (attacks._LYING_KEY), made outside the script
    scope: dict[str, object] = {}
    exec(textwrap.dedent(_LYING_KEY) + textwrap.dedent('''
        import asyncio
        S = T('S', (int,), {K('__match_args__'): ('_getters', '_loop')})
        Q = T('Q', (asyncio.Queue,), {'__class__': property(arm)})
    '''), scope)
    with pytest.raises(TypeError, match=r'^S\(\) accepts 1 positional sub-pattern \(2 given\)$'):
        run_local('match Q(7):\n    case S(getters, loop):\n        loop\n', S=scope['S'], Q=scope['Q'])


def test_a_class_statement_checks_the_class_its_metaclass_returns():
    # the metaclass (not the script's code) makes a class with hidden bases and the live mark
    import asyncio

    class Hide(type):
        def mro(cls):
            return [cls, object]

    class Meta(type):
        def __new__(mcs, name, bases, ns):
            return Hide('G', (asyncio.TaskGroup,), {MARK_NAME: ns[MARK_NAME]})

    with pytest.raises(TypeError, match='^class G cannot be made in the sandbox: the metaclass of G changes its method resolution order$'):
        run_local('class C(metaclass=Meta):\n    pass\n', Meta=Meta)


def test_the_mark_of_a_finished_class_statement_marks_nothing():
    import asyncio

    scope = namespace()
    compile_script(textwrap.dedent(_STEAL_MARK).strip() + '\n', '<script steal>').start(scope)
    stash = scope['stash']
    made = type('G', (asyncio.TaskGroup,), {MARK_NAME: stash[0]})
    assert not is_script_class(made)


def test_a_metaclass_made_by_calling_type_cannot_make_script_classes():
    made = type('Made', (type,), {})
    with pytest.raises(TypeError, match='^class C cannot be made in the sandbox: its metaclass Made was not made by a class statement; define the metaclass with a class statement$'):
        run_local('class C(metaclass=Made):\n    pass\n', Made=made)


def test_class_patterns_resolve_names_in_every_scope():
    assert local('''
        from dataclasses import dataclass
        def outer():
            @dataclass
            class Local:
                v: int
            def inner(x):
                match x:
                    case Local(v):
                        return v
            return inner(Local(3))
        class Holder:
            @dataclass
            class Nested:
                w: int
        def g(x):
            match x:
                case Holder.Nested(w):
                    return w
        (outer(), g(Holder.Nested(4)))
    ''') == (3, 4)


def test_match_class_is_looked_up_when_the_case_runs():
    assert local('''
        from dataclasses import dataclass
        @dataclass
        class A:
            v: int
        def f(x):
            match x:
                case int():
                    return 'int'
                case Undefined(v):
                    return v
        f(1)
    ''') == 'int'


def test_definition_error_points_at_the_name():
    with pytest.raises(SyntaxError) as info:
        compile_script('class A:\n    def __del__(self):\n        pass\n', 'main.py')
    error = info.value
    assert (error.lineno, error.offset, error.end_offset) == (2, 9, 16)


def test_class_pattern_in_a_class_body_sees_enclosing_functions():
    assert local('''
        from dataclasses import dataclass
        def outer():
            @dataclass
            class L:
                v: int
            class Holder:
                match L(1):
                    case L(v):
                        got = v
            return Holder.got
        outer()
    ''') == 1


def test_nested_match_statements():
    assert local('''
        from dataclasses import dataclass
        @dataclass
        class A:
            v: object
        def f(x):
            match x:
                case A(inner):
                    match inner:
                        case A(v):
                            return ('nested', v)
                        case _:
                            return ('flat', inner)
        (f(A(A(1))), f(A(2)))
    ''') == (('nested', 1), ('flat', 2))


def test_a_script_metaclass_does_not_open_its_classes():
    with pytest.raises(AttributeError, match="'_loop' is private: Y derives from Queue"):
        local('''
            import asyncio
            class M(type):
                def peek(cls):
                    return super()._private_of_meta if False else None
                def warm(cls):
                    s = super(M, cls)
                    try:
                        s._nothing
                    except AttributeError:
                        pass
            class Mine(metaclass=M):
                pass
            Mine.warm()
            class Y(asyncio.Queue, metaclass=M):
                pass
            Y._loop
        ''')
