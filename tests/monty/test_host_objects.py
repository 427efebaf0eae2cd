"""The parent's objects and classes through the Monty door (the client's `ClassInstance` and
`ClassType`): the core's host objects, each method call a `FunctionCall` with the object's id
that the parent's wrapper checks and runs, and back out the parent's own object. A script that
tries for more than the parent allowed gets the error the parent (or Python) gives, and nothing
of the parent's object but what it allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

pydantic_monty = pytest.importorskip('pydantic_monty')

from pydantic_monty import ClassInstance, ClassType, ExternalModule, MontyRuntimeError  # noqa: E402

from corral.monty import monty_v1_pb2 as pb  # noqa: E402

from .test_client import binary, monty  # noqa: E402, F401 - the fixtures: this checkout's corral-monty, and a pool of it
from .test_frames import Child, child, complete, error_text  # noqa: E402, F401 - the child fixture: corral-monty on two pipes


class Tools:
    KIND = 'adder'

    def __init__(self, scale: int = 1) -> None:
        self.scale = scale
        self.secret = 'host only'

    def add(self, a: int, b: int) -> int:
        return (a + b) * self.scale

    def wipe(self) -> None:
        self.scale = 0

    async def fetch(self, n: int) -> list[int]:
        return [self.scale] * n

    @classmethod
    def kinds(cls, n: int) -> list[str]:
        return [cls.KIND] * n


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
        seen: list[object] = []
        session.feed_run('show(t, [t])', external_lookup={'show': lambda *args: seen.extend(args)})
        assert seen[0] is tools and seen[1] == [tools]  # an argument of the parent's function: its own object
        assert runtime_error(session, 't.wipe()') == "AttributeError: 'Tools' object has no attribute 'wipe'"
        # an attribute not sent with the object is a method to the script: the parent refuses its call
        assert runtime_error(session, 't.secret()') == "AttributeError: 'Tools' object has no attribute 'secret'"
        with pytest.raises(pydantic_monty.MontySyntaxError) as syntax:
            session.feed_run('t.__reduce__()')
        assert str(syntax.value).startswith("attribute '__reduce__' cannot be read in the sandbox: names like __this__ are refused")
        assert runtime_error(session, 'type(t)(1)') == "TypeError: cannot instantiate host class 'Tools'"
        assert runtime_error(session, 'object.__new__(type(t)).add(1, 2)') == "AttributeError: 'Tools' object has no attribute 'add'"
    assert tools.scale == 2  # nothing but `add` ran


async def test_an_async_method_of_the_parents_object_is_awaited(binary: Path) -> None:
    wrapped = ClassInstance(Tools(3), allowed_methods={'fetch', 'add'})
    code = 'import asyncio\nt = x\n[await t.fetch(2), await asyncio.gather(t.fetch(1), t.fetch(0)), t.add(1, 0)]'
    async with pydantic_monty.AsyncMonty(binary_path=binary) as pool:
        async with pool.checkout() as session:
            assert await session.feed_run(code, inputs={'x': wrapped}) == [[3, 3], [[3], []], 3]


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


def test_a_parents_class_attributes_and_classmethods(monty: pydantic_monty.Monty) -> None:
    cls = ClassType(Tools, eager_attrs=['KIND'], allowed_methods={'kinds'}, lazy_attrs={'KIND'})
    with monty.checkout() as session:
        assert session.feed_run('T = x\n[T.KIND, T.kinds(2)]', inputs={'x': cls}) == ['adder', ['adder', 'adder']]
        assert runtime_error(session, 'T.wipe()') == "AttributeError: type object 'Tools' has no attribute 'wipe'"
    lazy = ClassType(Tools, lazy_attrs={'KIND'})
    with monty.checkout() as session:
        assert session.feed_run('x.KIND', inputs={'x': lazy}) == 'adder'


CLASS_ID, OBJECT_ID = b'c' * 16, b'o' * 16


def host_object(**attrs: int) -> pb.Arena:
    """An arena whose node 1 is an object of the parent's (`Tools`), sent with `attrs`."""
    nodes = [pb.MontyNode(type=pb.Type(name='Tools', id=pb.Uuid(data=CLASS_ID), origin=pb.TYPE_ORIGIN_HOST))]
    pairs = []
    for name, value in attrs.items():
        nodes += [pb.MontyNode(str=name), pb.MontyNode(int=value)]
        pairs.append(pb.NodePair(key=len(nodes) - 2, value=len(nodes) - 1))
    instance = pb.ClassInstanceNode(class_type=0, instance_id=pb.Uuid(data=OBJECT_ID), attrs=pb.NodePairs(pairs=pairs))
    return pb.Arena(nodes=[*nodes, pb.MontyNode(class_instance=instance)])


@pytest.mark.slow
def test_on_the_wire_a_method_is_a_lookup_then_calls_with_the_objects_id_and_a_load_keeps_none(child: Child) -> None:
    child.configure()
    arena = host_object(scale=2)
    event = child.feed('t = x\n[t.scale, t.add(1, 2)]', inputs=[pb.NamedRef(name='x', value=len(arena.nodes) - 1)], values=arena)
    assert (event.name_lookup.name, event.name_lookup.object_id.data) == ('add', OBJECT_ID)  # `scale` came with it
    refused = pb.ResumeNameLookup(error=pb.RaisedException(exc_type='AttributeError', message="'Tools' object has no attribute 'add'"))
    call = child.ask(pb.ParentRequest(resume_name_lookup=refused)).function_call
    assert (call.function_name, call.object_id.data, [call.values.nodes[i].int for i in call.args]) == ('add', OBJECT_ID, [1, 2])
    answer = pb.ResumeCall(call_id=call.call_id, result=pb.ExtFunctionResult(return_value=0), values=pb.Arena(nodes=[pb.MontyNode(int=3)]))
    done = child.ask(pb.ParentRequest(resume_call=answer))
    assert [done.complete.values.nodes[i].int for i in complete(done).list.items] == [2, 3]
    call = child.feed('t.add(3, 4)').function_call  # a name found to be a method is one without asking again
    assert (call.function_name, call.object_id.data, [call.values.nodes[i].int for i in call.args]) == ('add', OBJECT_ID, [3, 4])
    answer = pb.ResumeCall(call_id=call.call_id, result=pb.ExtFunctionResult(return_value=0), values=pb.Arena(nodes=[pb.MontyNode(int=7)]))
    assert complete(child.ask(pb.ParentRequest(resume_call=answer))).int == 7
    back = child.feed('t')  # out again: the node it came as
    instance = complete(back).class_instance
    assert instance.instance_id.data == OBJECT_ID and back.complete.values.nodes[instance.class_type].type.id.data == CLASS_ID
    state = child.ask(pb.ParentRequest(dump=pb.Dump())).dump_result.state
    assert child.ask(pb.ParentRequest(reset=pb.Reset())).WhichOneof('kind') == 'ok'
    assert child.ask(pb.ParentRequest(load=pb.Load(state=state))).WhichOneof('kind') == 'ok'  # replayed: nothing asked of the parent
    assert error_text(child.feed('t.add(1, 1)')) == (  # the object was the other session's (`add` read first: any name may be read)
        'NameError', 'the Tools object whose add this reads is not one this session gave (one given before the session was stored and loaded is gone)'
    )


@pytest.mark.slow
def test_malformed_host_objects_are_refused_naming_the_node_and_the_session_goes_on(child: Child) -> None:
    child.configure()
    host_type = pb.MontyNode(type=pb.Type(name='Tools', id=pb.Uuid(data=CLASS_ID), origin=pb.TYPE_ORIGIN_HOST))
    sandbox_type = pb.MontyNode(type=pb.Type(name='Tools', id=pb.Uuid(data=CLASS_ID), origin=pb.TYPE_ORIGIN_SANDBOX))
    dunder = [pb.MontyNode(str='__class__'), pb.MontyNode(int=1)]
    cases = [
        ([pb.MontyNode(int=1), pb.MontyNode(class_instance=pb.ClassInstanceNode(class_type=0, instance_id=pb.Uuid(data=OBJECT_ID)))],
         "node 1: an instance of a class that is not the parent's cannot be a value sent into the sandbox"),
        ([host_type, pb.MontyNode(class_instance=pb.ClassInstanceNode(class_type=0, instance_id=pb.Uuid(data=b'short')))],
         'node 1: a host object needs a 16-byte id and public attribute names'),
        ([host_type, *dunder, pb.MontyNode(class_instance=pb.ClassInstanceNode(class_type=0, instance_id=pb.Uuid(data=OBJECT_ID), attrs=pb.NodePairs(pairs=[pb.NodePair(key=1, value=2)])))],
         'node 3: a host object needs a 16-byte id and public attribute names'),
        ([*dunder, pb.MontyNode(type=pb.Type(name='Tools', id=pb.Uuid(data=CLASS_ID), origin=pb.TYPE_ORIGIN_HOST, attrs=pb.NodePairs(pairs=[pb.NodePair(key=0, value=1)])))],
         'node 2: a host class needs a name, a 16-byte id and public attribute names'),
        ([pb.MontyNode(type=pb.Type(name='not a name', id=pb.Uuid(data=CLASS_ID), origin=pb.TYPE_ORIGIN_HOST))],
         'node 0: a host class needs a name, a 16-byte id and public attribute names'),
        ([sandbox_type, pb.MontyNode(class_instance=pb.ClassInstanceNode(class_type=0, instance_id=pb.Uuid(data=OBJECT_ID)))],
         "node 0: a class of the parent's ('Tools') cannot be a value sent into the sandbox"),
    ]
    for nodes, message in cases:
        event = child.feed('x', inputs=[pb.NamedRef(name='x', value=len(nodes) - 1)], values=pb.Arena(nodes=nodes))
        assert error_text(event) == ('ValueError', f'the inputs cannot enter the sandbox: {message}')
    assert complete(child.feed('5')).int == 5
