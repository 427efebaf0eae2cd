"""Type objects and builtin functions cross the boundary by name (`SandboxBuiltin`): a data type
arrives as the receiver's own class, any other type or builtin function as its name, and a name
the sandbox does not offer is refused on both sides."""

from __future__ import annotations

import collections
import datetime
import json
import pathlib
import re
import types

import msgpack
import pytest

import corral
from corral import SandboxBuiltin
from corral.language.named import DATA_TYPES, FUNCTIONS, OTHER_TYPES
from corral.values import named_object, pack, unpack


def test_the_host_decodes_data_types_to_its_classes_and_the_rest_to_names():
    assert unpack(pack([int, datetime.timezone, json.JSONDecodeError, pathlib.PosixPath], side='host')) == [
        int, datetime.timezone, json.JSONDecodeError, pathlib.PurePosixPath,
    ]
    assert unpack(pack(SandboxBuiltin('function', 'len'), side='host')) == SandboxBuiltin('function', 'len')
    assert named_object(SandboxBuiltin('type', 'itertools.chain')) == SandboxBuiltin('type', 'itertools.chain')


def test_a_type_alias_crosses_as_its_repr():
    assert unpack(pack([list[int], int | None], side='host')) == ['list[int]', 'int | None']


def test_names_the_sandbox_does_not_offer_are_refused():
    with pytest.raises(ValueError, match="^the sandbox has no builtin function named 'eval2'$"):
        pack(SandboxBuiltin('function', 'eval2'), side='host')
    with pytest.raises(ValueError, match="^the sandbox has no builtin type named 'open'$"):
        pack(SandboxBuiltin('type', 'open'), side='host')
    forged = msgpack.packb(msgpack.ExtType(40, b'type:os.system'))
    with pytest.raises(ValueError, match="^the sandbox has no builtin type named 'os.system'$"):
        unpack(forged)
    with pytest.raises(ValueError, match="^SandboxBuiltin kind must be 'type' or 'function'"):
        SandboxBuiltin('module', 'os')


def test_a_class_that_takes_a_builtins_name_is_not_it():
    fake = type('int', (), {'__module__': 'builtins'})
    with pytest.raises(TypeError, match="^a value of type 'type' cannot cross the sandbox boundary"):
        pack(fake, side='host')


async def test_type_objects_and_builtins_leave_the_sandbox_by_name(session):
    code = """
import datetime, functools, itertools, re, sys
from collections import deque
from pathlib import Path
[int, type(None), type(...), datetime.datetime, type(Path('/x')), Path, type(re.compile('a')), type(deque()),
 ValueError, type(print), type(lambda: 0), functools.partial, type(itertools.chain([1])), type(sys.version_info),
 open, len, exec, object.__setattr__, list[int], tuple[int, str, ...].__args__, (int | None).__args__]
"""
    assert await session.feed_run(code) == [
        int, type(None), type(...), datetime.datetime, pathlib.PurePosixPath, pathlib.PurePosixPath, re.Pattern,
        collections.deque, ValueError, SandboxBuiltin('type', 'builtin_function_or_method'), SandboxBuiltin('type', 'function'),
        SandboxBuiltin('type', 'functools.partial'), SandboxBuiltin('type', 'itertools.chain'),
        SandboxBuiltin('type', 'sys.version_info'), SandboxBuiltin('function', 'open'), SandboxBuiltin('function', 'len'),
        SandboxBuiltin('function', 'exec'), SandboxBuiltin('function', 'object.__setattr__'), 'list[int]', (int, str, ...), (int, type(None)),
    ]  # fmt: skip


async def test_they_come_back_in_as_the_sandboxs_own(session):
    given = [int, json.JSONDecodeError, types.UnionType, pathlib.PosixPath, SandboxBuiltin('function', 'open'),
             SandboxBuiltin('type', 'builtin_function_or_method'), SandboxBuiltin('type', 'functools.partial'),
             SandboxBuiltin('function', 'object.__setattr__')]  # fmt: skip
    code = """
import functools, json, pathlib, types
a, b, c, d, e, f, g, h = given()
(isinstance(5, a), a is int, b is json.JSONDecodeError, c is types.UnionType, d is pathlib.PurePosixPath, e is open,
 f is type(print), g is functools.partial, h is object.__setattr__)
"""
    assert await session.feed_run(code, external_lookup={'given': lambda: given}) == (True,) * 9
    seen = await session.feed_run('import re\nshow(str, type(re.match("a", "a")), print)', external_lookup={'show': lambda *args: args})
    assert seen == (str, re.Match, SandboxBuiltin('function', 'print'))


async def test_a_forged_or_spoofed_name_is_refused_where_it_enters(session):
    for value, text in [
        (SandboxBuiltin('function', '__import__'), "the sandbox has no builtin function named '__import__'"),
        (SandboxBuiltin('type', 'os._wrap_close'), "the sandbox has no builtin type named 'os._wrap_close'"),
    ]:
        with pytest.raises(corral.SandboxRuntimeError) as error:
            await session.feed_run('given()', external_lookup={'given': lambda value=value: value})
        assert error.value.message == f"given() returned a value of type 'SandboxBuiltin' that cannot enter the sandbox: {text}"
    fake = type('int', (), {'__module__': 'builtins', '__qualname__': 'int'})  # a host class, not the sandbox's int
    with pytest.raises(corral.SandboxRuntimeError) as error:
        await session.feed_run('given()', external_lookup={'given': lambda: fake})
    assert error.value.message.startswith("given() returned a value of type 'type' that cannot enter the sandbox: a value of type 'type' cannot cross")
    given = corral.HostFunction(fake)  # given as a function: a function, calling the host's class
    assert await session.feed_run('x = given()\n(x is int, type(x).__name__, x.__name__)', external_lookup={'given': lambda: given}) == (False, 'function', 'int')


def test_every_name_of_the_table_is_one_the_sandbox_reaches():
    from corral.language import make_builtins
    from corral.language.named import sandbox_pairs

    pairs = dict(sandbox_pairs(make_builtins(print=print, import_=__import__)))
    assert {named.name for named in pairs if named.kind == 'type'} == DATA_TYPES.keys() | OTHER_TYPES.keys()
    assert {named.name for named in pairs if named.kind == 'function'} == FUNCTIONS
    assert all(obj is not None for obj in pairs.values())


async def test_a_stored_session_replays_what_crossed_by_name():
    async with corral.Pool(checkpoints=None) as pool:  # no live checkpoint: the load replays the journal
        async with pool.checkout() as session:
            given = (int, SandboxBuiltin('function', 'len'), [re.Match])
            await session.feed_run('a, b, c = given()\nkept = (a, b is len, c)', external_lookup={'given': lambda: given})
            state = await session.dump()
        async with pool.checkout() as loaded:
            await loaded.load_session(state)
            assert await loaded.feed_run('(kept, isinstance(3, a), b([1]))') == ((int, True, [re.Match]), True, 1)
