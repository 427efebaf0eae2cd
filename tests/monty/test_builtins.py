"""Type objects and builtin functions through the Monty door: `type` nodes of builtin types and
`builtin_function` nodes both ways (corral's `SandboxBuiltin`), refused where they name nothing
the sandbox offers or a class of the parent's; and a function the parent answered a name with
stays the parent's in later feeds."""

from __future__ import annotations

import datetime
import itertools
import pathlib
import re

import pytest

from corral.monty import monty_v1_pb2 as pb

from .test_client import binary, monty  # noqa: F401 - the fixtures: this checkout's corral-monty, and a pool of it
from .test_frames import Child, child, complete, error_text  # noqa: F401 - child: the fixture

pydantic_monty = pytest.importorskip('pydantic_monty')


def builtin_type(name: str) -> pb.MontyNode:
    return pb.MontyNode(type=pb.Type(name=name, origin=pb.TYPE_ORIGIN_BUILTIN))


def test_type_and_builtin_function_nodes_leave_and_enter(child: Child) -> None:
    child.configure()
    event = child.feed('from pathlib import Path\n[int, type(Path("/x")), type(print), open, ValueError]')
    nodes = [event.complete.values.nodes[i] for i in complete(event).list.items]
    assert [(n.WhichOneof('kind'), n.type.name if n.HasField('type') else n.builtin_function) for n in nodes] == [
        ('type', 'int'), ('type', 'PosixPath'), ('type', 'builtin_function_or_method'), ('builtin_function', 'open'), ('type', 'ValueError'),
    ]
    assert {n.type.origin for n in nodes if n.HasField('type')} == {pb.TYPE_ORIGIN_BUILTIN}
    values = pb.Arena(nodes=[builtin_type('int'), builtin_type('typing.Union'), pb.MontyNode(builtin_function='open'), builtin_type('namedtuple')])
    inputs = [pb.NamedRef(name=name, value=i) for i, name in enumerate('abcd')]
    event = child.feed('import sys, types\n(a is int, b is types.UnionType, c is open, d is type(sys.version_info))', inputs=inputs, values=values)
    assert [event.complete.values.nodes[i].boolean for i in complete(event).tuple.items] == [True] * 4


@pytest.mark.parametrize(
    ('node', 'message'),
    [
        (builtin_type('os._wrap_close'), "node 0: the sandbox has no builtin type named 'os._wrap_close'"),
        (builtin_type('open'), "node 0: the sandbox has no builtin type named 'open'"),
        (pb.MontyNode(builtin_function='__import__'), "node 0: the sandbox has no builtin function named '__import__'"),
        (pb.MontyNode(builtin_function='int'), "node 0: the sandbox has no builtin function named 'int'"),
        (pb.MontyNode(type=pb.Type(name='Foo', origin=pb.TYPE_ORIGIN_HOST, id=pb.Uuid(data=b'x' * 15))), 'node 0: a host class needs a name, a 16-byte id and public attribute names'),
        (pb.MontyNode(type=pb.Type(name='int', origin=pb.TYPE_ORIGIN_SANDBOX, id=pb.Uuid(data=b'x' * 16))), "node 0: a class of the parent's ('int') cannot be a value sent into the sandbox"),
        (pb.MontyNode(type=pb.Type(name='int', origin=pb.TYPE_ORIGIN_BUILTIN, id=pb.Uuid(data=b'x' * 16))), "node 0: a class of the parent's ('int') cannot be a value sent into the sandbox"),
        (pb.MontyNode(type=pb.Type(name='int')), "node 0: a class of the parent's ('int') cannot be a value sent into the sandbox"),
    ],
    ids=['unknown-type', 'function-as-type', 'import-hook', 'type-as-function', 'host-class', 'sandbox-class', 'builtin-with-id', 'no-origin'],
)
def test_forged_names_are_refused_and_the_session_goes_on(child: Child, node: pb.MontyNode, message: str) -> None:
    child.configure()
    event = child.feed('x', inputs=[pb.NamedRef(name='x', value=0)], values=pb.Arena(nodes=[node]))
    assert error_text(event) == ('ValueError', f'the inputs cannot enter the sandbox: {message}')
    assert complete(child.feed('5')).int == 5


def test_the_client_gets_its_classes_and_proxies(monty: pydantic_monty.Monty) -> None:
    with monty.checkout() as session:
        code = 'import datetime, functools, re\nfrom pathlib import Path\n[datetime.date, Path, re.Match, functools.partial, len, list[int], int | None]'
        value = session.feed_run(code)
        assert value[:3] == [datetime.date, pathlib.PurePosixPath, re.Match]
        assert [(proxy.kind, proxy.name) for proxy in value[3:5]] == [('type', 'functools.partial'), ('function', 'len')]
        assert value[5:] == ['list[int]', 'int | None']
        assert session.feed_run('import functools\n(p is functools.partial, f is len, f([1, 2]))', inputs={'p': value[3], 'f': value[4]}) == (True, True, 2)
        seen: list[object] = []
        session.feed_run('import itertools\nshow(int, type(itertools.chain()), abs)', external_lookup={'show': lambda *args: seen.extend(args)})
        assert seen[0] is int
        assert [(proxy.kind, proxy.name) for proxy in seen[1:]] == [('type', 'itertools.chain'), ('function', 'abs')]
    assert itertools.chain is not seen[1]


def test_a_function_kept_from_an_earlier_feed_still_calls_the_parent(monty: pydantic_monty.Monty) -> None:
    with monty.checkout() as session:
        session.feed_run('f = double', external_lookup={'double': lambda x: x * 2})
        assert session.feed_run('f(21)', external_lookup={'double': lambda x: x * 2}) == 42
        with pytest.raises(pydantic_monty.MontyRuntimeError) as error:
            session.feed_run('f(2)', external_lookup={'double': 5})
        assert (type(error.value.exception()), str(error.value.exception())) == (TypeError, "'int' object is not callable")


def test_a_parents_function_given_as_a_value_is_called_through_the_parent(monty: pydantic_monty.Monty) -> None:
    with monty.checkout() as session:
        # the client's call of a function it gave dispatches by its name, against the feed's external_lookup
        code = '(x([1, 2, 3]), type(x).__name__, x.__name__, x)'
        assert session.feed_run(code, inputs={'x': len}, external_lookup={'len': len}) == (3, 'function', 'len', 'len')
        assert session.feed_run('f = get()\nf(4)', external_lookup={'get': lambda: abs, 'abs': lambda n: n + 1}) == 5
        seen: list[object] = []
        assert session.feed_run('show(f, x)', external_lookup={'show': lambda *args: seen.extend(args)}) is None
        assert seen == ['abs', 'len']  # a function crosses to the parent as its name
        with pytest.raises(pydantic_monty.MontyRuntimeError) as error:
            session.feed_run('f(1)')
        assert str(error.value.exception()) == "name 'abs' is not defined"


def test_a_parents_module_of_functions_and_values_is_imported(monty: pydantic_monty.Monty) -> None:
    module = pydantic_monty.ExternalModule({'add': lambda a, b: a + b, 'LIMIT': 10})
    with monty.checkout(external_modules={'tools': module}) as session:  # its functions arrive as Function nodes
        assert session.feed_run('import tools\ntools.add(tools.LIMIT, 2)', external_lookup={'add': lambda a, b: a + b}) == 12
