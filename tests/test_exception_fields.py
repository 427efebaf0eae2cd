"""Exceptions of the standard library cross the sandbox's boundary as themselves, both ways.

A script's uncaught exception reaches the host with its class's module and, for the standard
decoding errors, its constructor's fields as plain data (`SandboxRuntimeError.module`, `.fields`);
nothing of the script's own runs to read them, and what cannot cross is left out. A host
function's `json.JSONDecodeError`, `io.UnsupportedOperation`, `re.error`, ... reaches the script as
that class, over the worker's channel and over the network alike."""

from __future__ import annotations

import decimal
import io
import json
import re

import pytest

import corral
from corral.host.external import exception_payload
from corral.server.protocol import builtin_exception


async def raised(session: corral.Session, code: str) -> corral.SandboxRuntimeError:
    with pytest.raises(corral.SandboxRuntimeError) as info:
        await session.feed_run(code)
    return info.value


async def test_a_unicode_error_carries_its_fields(session):
    error = await raised(session, "'café'.encode('ascii')")
    assert (error.exc_type, error.message) == ('UnicodeEncodeError', "'ascii' codec can't encode character '\\xe9' in position 3: ordinal not in range(128)")
    assert error.module == 'builtins'
    assert error.fields == {'encoding': 'ascii', 'object': 'café', 'start': 3, 'end': 4, 'reason': 'ordinal not in range(128)'}
    error = await raised(session, "b'ab\\xe9'.decode('utf-8')")
    assert error.fields == {'encoding': 'utf-8', 'object': b'ab\xe9', 'start': 2, 'end': 3, 'reason': 'unexpected end of data'}


async def test_a_json_error_carries_its_fields_and_a_large_document_is_left_out(session):
    error = await raised(session, "import json\njson.loads('[1,\\n2,]')")
    with pytest.raises(json.JSONDecodeError) as local:  # the script runs on this CPython, whose json words the error
        json.loads('[1,\n2,]')
    assert (error.exc_type, error.module) == ('JSONDecodeError', 'json.decoder')
    assert error.message == str(local.value)  # 3.11, 3.12: 'Expecting value: line 2 column 3 (char 6)'
    assert error.fields == {'msg': local.value.msg, 'pos': local.value.pos, 'lineno': 2, 'colno': local.value.colno, 'doc': '[1,\n2,]'}
    error = await raised(session, "json.loads('[' + '1,\\n' * 30000 + 'x')")
    assert error.message == 'Expecting value: line 30001 column 1 (char 90001)'
    assert error.fields == {'msg': 'Expecting value', 'pos': 90001, 'lineno': 30001, 'colno': 1}


async def test_other_exceptions_carry_their_module_alone(session):
    error = await raised(session, 'import csv\nlist(csv.reader([1]))')
    assert (error.exc_type, error.module, error.fields) == ('Error', '_csv', None)
    error = await raised(session, '1 / 0')
    assert (error.exc_type, error.module, error.fields) == ('ZeroDivisionError', 'builtins', None)
    error = await raised(session, 'class Refused(Exception):\n    pass\nraise Refused("no")')
    assert (error.exc_type, error.message, error.fields) == ('Refused', 'no', None)


async def test_a_lone_surrogate_leaves_the_fields_out_and_the_session_goes_on(session):
    error = await raised(session, "'a\\ud800'.encode('utf-8')")
    assert error.message == "'utf-8' codec can't encode character '\\ud800' in position 1: surrogates not allowed"
    assert (error.module, error.fields) == ('builtins', None)
    error = await raised(session, "e = UnicodeDecodeError('ascii', b'x', 0, 1, 'bad \\udcff')\nraise e")
    assert (error.message, error.fields) == ("'ascii' codec can't decode byte 0x78 in position 0: bad \\udcff", None)
    error = await raised(session, "raise ValueError('a\\ud800b')")
    assert (error.exc_type, error.message) == ('ValueError', 'a\\ud800b')
    assert error.display().endswith("raise ValueError('a\\ud800b')\nValueError: a\\ud800b")
    assert await session.feed_run('1 + 1') == 2


async def test_fields_a_script_forged_are_not_read(session):
    """A field set to an object of the script's own, a subclass: no fields, and none of its code runs."""
    code = '''
import json
calls = []
class Sneaky:
    def __index__(self):
        calls.append('index')
        return 1
    def __int__(self):
        calls.append('int')
        return 1
    def __str__(self):
        calls.append('str')
        return 's'
'''
    await session.feed_run(code)
    error = await raised(session, "e = json.JSONDecodeError('m', 'doc', 1)\ne.pos = Sneaky()\nraise e")
    assert (error.exc_type, error.module, error.fields) == ('JSONDecodeError', 'json.decoder', None)
    error = await raised(session, "e = json.JSONDecodeError('m', 'doc', 1)\ne.doc = Sneaky()\nraise e")
    assert error.fields is None
    error = await raised(session, 'class Own(UnicodeEncodeError):\n    pass\nraise Own("ascii", "x", 0, 1, "r")')
    assert (error.exc_type, error.module, error.fields) == ('Own', '__main__', None)
    assert await session.feed_run('calls') == []


CATCH = """
import json, io, re, decimal
try:
    fail()
except (json.JSONDecodeError, io.UnsupportedOperation, re.error, decimal.DivisionByZero) as e:
    caught = (type(e).__name__, str(e), getattr(e, 'pos', None))
except ValueError as e:
    caught = ('ValueError', str(e), None)
caught
"""


class HostDecodeError(json.JSONDecodeError):
    pass


@pytest.mark.parametrize(
    'error,expected',
    [
        (json.JSONDecodeError('Expecting value', '[1,\n2,]', 6), ('JSONDecodeError', 'Expecting value: line 2 column 3 (char 6)', 6)),
        (HostDecodeError('Expecting value', '[', 1), ('JSONDecodeError', 'Expecting value: line 1 column 2 (char 1)', 1)),
        (io.UnsupportedOperation('not readable'), ('UnsupportedOperation', 'not readable', None)),
        (re.error('bad pattern'), (re.error.__name__, 'bad pattern', None)),  # 3.13 names it PatternError
        (decimal.DivisionByZero('by zero'), ('DivisionByZero', 'by zero', None)),
    ],
)
async def test_a_host_functions_stdlib_exception_reaches_the_script_as_its_class(session, error, expected):
    def fail():
        raise error

    assert await session.feed_run(CATCH, external_lookup={'fail': fail}) == expected


async def test_a_json_error_without_its_fields_reaches_the_script_as_a_value_error(session):
    def fail():
        error = json.JSONDecodeError('Expecting value', '[', 1)
        del error.pos
        raise error

    assert await session.feed_run(CATCH, external_lookup={'fail': fail}) == ('ValueError', 'Expecting value: line 1 column 2 (char 1)', None)


def test_the_network_carries_a_host_functions_stdlib_exception_as_the_channel_does():
    for error in (json.JSONDecodeError('m', 'ab\ncd', 4), io.UnsupportedOperation('x'), re.error('p')):
        payload = exception_payload(error)
        again = builtin_exception(*payload)
        assert (type(again), str(again), exception_payload(again)) == (type(error), str(error), payload)
    assert exception_payload(json.JSONDecodeError('m', 'ab\ncd', 4)) == ['json.JSONDecodeError', ['m', 'ab\ncd', 4]]
    forged = builtin_exception('json.JSONDecodeError', ['m', 5, 'x'])  # args that do not fit
    assert (type(forged), forged.args) == (Exception, ('m', 5, 'x'))
