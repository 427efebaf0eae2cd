"""Builtins and `os` functions the sandbox replaces fail as CPython's do, in type and in words.

Each expression runs in the sandbox and in this CPython, side by side: the repr of its value, or
`ExceptionType: message`, must be the exact text given, in both. (Paths do not exist in either: a
wrong argument is reported before any file is touched.)
"""

from __future__ import annotations

import os
import sys

import pytest


def _unknown_keyword(name: str, function: str) -> str:
    """CPython's words for a keyword a C function does not take (3.13 reworded them)."""
    if sys.version_info >= (3, 13):
        return f"TypeError: {function}() got an unexpected keyword argument '{name}'"
    return f"TypeError: '{name}' is an invalid keyword argument for {function}()"


#: expression -> what this CPython shows for it
CASES = [
    ('getattr()', 'TypeError: getattr expected at least 2 arguments, got 0'),
    ("getattr(1, 'real', default=3)", 'TypeError: getattr() takes no keyword arguments'),
    ('getattr(1)', 'TypeError: getattr expected at least 2 arguments, got 1'),
    ('getattr(1,2,3,4)', 'TypeError: getattr expected at most 3 arguments, got 4'),
    ('getattr(1, 2)', "TypeError: attribute name must be string, not 'int'"),
    ("getattr(1, 'nope', 5)", '5'),
    ("getattr(1, 'real')", '1'),
    ('hasattr(1,2,3)', 'TypeError: hasattr expected 2 arguments, got 3'),
    ('hasattr(1)', 'TypeError: hasattr expected 2 arguments, got 1'),
    ("hasattr(1, 'a', x=1)", 'TypeError: hasattr() takes no keyword arguments'),
    ('setattr()', 'TypeError: setattr expected 3 arguments, got 0'),
    ('setattr(1,2)', 'TypeError: setattr expected 3 arguments, got 2'),
    ('delattr(1)', 'TypeError: delattr expected 2 arguments, got 1'),
    ("delattr(1, 'a', x=1)", 'TypeError: delattr() takes no keyword arguments'),
    ("print('x', **{'foo': 1})", _unknown_keyword('foo', 'print')),
    ('print(sep=1)', 'TypeError: sep must be None or a string, not int'),
    ('print(end=1)', 'TypeError: end must be None or a string, not int'),
    ('print(file=1)', "AttributeError: 'int' object has no attribute 'write'"),
    ("print('x', file=1)", "AttributeError: 'int' object has no attribute 'write'"),
    ('repr(print)', "'<built-in function print>'"),
    ('repr(getattr)', "'<built-in function getattr>'"),
    ('repr(open)', "'<built-in function open>'"),
    ('type(print).__name__', "'builtin_function_or_method'"),
    ('print.__name__', "'print'"),
    ('print.__qualname__', "'print'"),
    ('open.__name__', "'open'"),
    ('os.listdir(1.5)', 'TypeError: listdir: path should be string, bytes, os.PathLike, integer or None, not float'),
    ('os.scandir(1.5)', 'TypeError: scandir: path should be string, bytes, os.PathLike, integer or None, not float'),
    ('os.stat(1.5)', 'TypeError: stat: path should be string, bytes, os.PathLike or integer, not float'),
    ('os.lstat(1.5)', 'TypeError: lstat: path should be string, bytes or os.PathLike, not float'),
    ('os.mkdir(1.5)', 'TypeError: mkdir: path should be string, bytes or os.PathLike, not float'),
    ('os.remove(1.5)', 'TypeError: remove: path should be string, bytes or os.PathLike, not float'),
    ('os.unlink(1.5)', 'TypeError: unlink: path should be string, bytes or os.PathLike, not float'),
    ('os.rmdir(1.5)', 'TypeError: rmdir: path should be string, bytes or os.PathLike, not float'),
    ("os.rename(1.5, 'a')", 'TypeError: rename: src should be string, bytes or os.PathLike, not float'),
    ("os.rename('a', 1.5)", 'TypeError: rename: dst should be string, bytes or os.PathLike, not float'),
    ("os.replace(1.5,'a')", 'TypeError: replace: src should be string, bytes or os.PathLike, not float'),
    ('os.makedirs(1.5)', 'TypeError: expected str, bytes or os.PathLike object, not float'),
    ('os.path.exists(1.5)', 'TypeError: stat: path should be string, bytes, os.PathLike or integer, not float'),
    ('os.path.isfile(1.5)', 'TypeError: stat: path should be string, bytes, os.PathLike or integer, not float'),
    ('os.path.getsize(1.5)', 'TypeError: stat: path should be string, bytes, os.PathLike or integer, not float'),
    ('open(1.5)', 'TypeError: expected str, bytes or os.PathLike object, not float'),
    ('open()', "TypeError: open() missing required argument 'file' (pos 1)"),
    ("open('x', 'r', -1, None, None, None, True, None, 9)", 'TypeError: open() takes at most 8 arguments (9 given)'),
    ("open('x', foo=1)", _unknown_keyword('foo', 'open')),
    ("open('x', None)", "TypeError: open() argument 'mode' must be str, not None"),
    ("open('x', mode=None)", "TypeError: open() argument 'mode' must be str, not None"),
    ("open('x', encoding=1)", "TypeError: open() argument 'encoding' must be str or None, not int"),
    ("open('x', 'r', None)", "TypeError: 'NoneType' object cannot be interpreted as an integer"),
    ("open('x', newline=1)", "TypeError: open() argument 'newline' must be str or None, not int"),
    ("open('x', file='y')", "TypeError: argument for open() given by name ('file') and position (1)"),
    ('os.listdir(path=1.5)', 'TypeError: listdir: path should be string, bytes, os.PathLike, integer or None, not float'),
    ("os.listdir('a', 'b')", 'TypeError: listdir() takes at most 1 argument (2 given)'),
    ('os.listdir(x=1)', _unknown_keyword('x', 'listdir')),
    ('os.getcwd(1)', 'TypeError: posix.getcwd() takes no arguments (1 given)'),
    ('os.stat()', "TypeError: stat() missing required argument 'path' (pos 1)"),
    ('os.path.exists()', "TypeError: exists() missing 1 required positional argument: 'path'"),
    ("os.mkdir('a', 'b')", "TypeError: 'str' object cannot be interpreted as an integer"),
    ('repr(os.listdir)', "'<built-in function listdir>'"),
    ('type(print)(len, len)', "TypeError: cannot create 'builtin_function_or_method' instances"),
    ("type(**{'a': 1})", 'TypeError: type() takes 1 or 3 arguments'),
    ('type(1, 2)', 'TypeError: type() takes 1 or 3 arguments'),
    ('type(*[1])', "<class 'int'>"),
]

_SCRIPT = """import os
try:
    r = repr({})
except Exception as e:
    r = type(e).__name__ + ': ' + str(e)
r
"""


def _cpython(expression: str) -> str:
    try:
        return repr(eval(expression, {'os': os}))  # noqa: S307 - the test's own constant expressions
    except Exception as error:  # noqa: BLE001
        return f'{type(error).__name__}: {error}'


@pytest.mark.parametrize(('expression', 'expected'), CASES, ids=[expression for expression, _ in CASES])
def test_cpython_says(expression: str, expected: str) -> None:
    assert _cpython(expression) == expected


@pytest.mark.asyncio(loop_scope='module')
@pytest.mark.parametrize(('expression', 'expected'), CASES, ids=[expression for expression, _ in CASES])
async def test_the_sandbox_says_the_same(pool, expression: str, expected: str) -> None:
    async with pool.checkout() as session:
        assert await session.feed_run(_SCRIPT.format(expression), print_callback=lambda stream, text: None) == expected


def test_a_stand_in_must_take_the_parameters_of_its_c_function() -> None:
    from corral.language.native import builtin_function

    def listdir(path):  # required, where os.listdir's is optional: a call could bind to one only
        return path

    with pytest.raises(ValueError, match='does not take the parameters of listdir'):
        builtin_function(listdir, os.listdir)


@pytest.mark.asyncio(loop_scope='module')
async def test_a_stand_in_holds_nothing_a_script_can_reach(pool) -> None:
    code = """
found = []
for name in ('_function', '_real', '_name', '__self__', '__func__', '__wrapped__', '__closure__'):
    try:
        getattr(print, name)
        found.append(name)
    except AttributeError:
        pass
call = print.__call__
for name in ('__self__', '__func__'):
    try:
        getattr(call, name)
        found.append('__call__.' + name)
    except AttributeError:
        pass
found
"""
    async with pool.checkout() as session:
        assert await session.feed_run(code) == []
