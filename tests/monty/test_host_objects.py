"""The parent's objects and classes through the Monty door (the client's `ClassInstance` and
`ClassType`): the core's host objects, each method call a `FunctionCall` with the object's id
that the parent's wrapper checks and runs, and back out the parent's own object. A script that
tries for more than the parent allowed gets the error the parent (or Python) gives, and nothing
of the parent's object but what it allowed."""

from __future__ import annotations

import pytest

pydantic_monty = pytest.importorskip('pydantic_monty')

from pydantic_monty import ClassInstance, ClassType, ExternalModule, MontyRuntimeError  # noqa: E402

from .test_client import binary, monty  # noqa: E402, F401 - the fixtures: this checkout's corral-monty, and a pool of it


class Tools:
    def __init__(self, scale: int = 1) -> None:
        self.scale = scale
        self.secret = 'host only'

    def add(self, a: int, b: int) -> int:
        return (a + b) * self.scale

    def wipe(self) -> None:
        self.scale = 0


def runtime_error(session: pydantic_monty.MontySession, code: str, **kwargs: object) -> str:
    with pytest.raises(MontyRuntimeError) as error:
        session.feed_run(code, **kwargs)
    return str(error.value)


def test_an_object_of_the_parents_is_used_through_what_its_wrapper_allows(monty: pydantic_monty.Monty) -> None:
    tools = Tools(2)
    wrapped = ClassInstance(tools, allowed_methods={'add'}, eager_attrs=['scale'])
    with monty.checkout() as session:
        code = 't = x\n[t.add(1, 2), t.scale, type(t).__name__, t is x]'
        assert session.feed_run(code, inputs={'x': wrapped}) == [6, 2, 'Tools', True]
        assert session.feed_run('t') is tools  # back out: the parent's own object
        assert session.feed_run('[t, t.add(0, 1)]')[0] is tools  # kept across feeds
        assert runtime_error(session, 't.wipe()') == "AttributeError: 'Tools' object has no attribute 'wipe'"
        # an attribute not sent with the object is a method to the script: the parent refuses its call
        assert runtime_error(session, 't.secret()') == "AttributeError: 'Tools' object has no attribute 'secret'"
        with pytest.raises(pydantic_monty.MontySyntaxError) as syntax:
            session.feed_run('t.__reduce__()')
        assert str(syntax.value).startswith("attribute '__reduce__' cannot be read in the sandbox: names like __this__ are refused")
        assert runtime_error(session, 'type(t)(1)') == "TypeError: cannot instantiate host class 'Tools'"
        assert runtime_error(session, 'object.__new__(type(t)).add(1, 2)') == "AttributeError: 'Tools' object has no attribute 'add'"
    assert tools.scale == 2  # nothing but `add` ran


def test_a_class_of_the_parents_constructs_there_when_its_wrapper_allows(monty: pydantic_monty.Monty) -> None:
    cls = ClassType(Tools, init=True, instance_allowed_methods={'add'}, instance_eager_attrs=['scale'])
    with monty.checkout() as session:
        code = 'T = x\nt = T(3)\n[t.add(1, 1), t.scale, isinstance(t, T), type(t) is T, T.__name__]'
        assert session.feed_run(code, inputs={'x': cls}) == [6, 3, True, True, 'Tools']
        made = session.feed_run('t')
        assert type(made) is Tools and made.scale == 3
        assert session.feed_run('T') is Tools
        assert runtime_error(session, 'x(1)', inputs={'x': ClassType(Tools)}) == "TypeError: cannot instantiate host class 'Tools'"


def test_objects_in_a_parents_module(monty: pydantic_monty.Monty) -> None:
    tools = ClassInstance(Tools(), allowed_methods={'add'})
    modules = {'pkg': ExternalModule({'tools': tools, 'Tools': ClassType(Tools, init=True, instance_allowed_methods={'add'})})}
    with monty.checkout(external_modules=modules) as session:
        assert session.feed_run('from pkg import tools, Tools\n[tools.add(2, 3), Tools(10).add(1, 0)]') == [5, 10]


def test_a_lazy_attribute_is_asked_of_the_parent_at_each_read(monty: pydantic_monty.Monty) -> None:
    tools = Tools(2)
    wrapped = ClassInstance(tools, allowed_methods={'add', 'wipe'}, lazy_attrs={'scale'})
    with monty.checkout() as session:
        assert session.feed_run('t = x\n[t.scale, t.wipe(), t.scale, t.add(1, 1)]', inputs={'x': wrapped}) == [2, None, 0, 0]
        # a name the parent has no attribute of is a method to the script, whose call the parent refuses
        assert runtime_error(session, 'f = t.secret\nf()') == "AttributeError: 'Tools' object has no attribute 'secret'"
        assert repr(session.feed_run('t.secret')) == '"<method \'secret\' of the parent\'s object>"'
