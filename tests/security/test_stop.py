"""A SandboxStop (the worker stopping a script) cannot be swallowed by the script.

The worker raises it inside the script on a timeout or a limit; here `stop()` stands in for that.
"""

from __future__ import annotations

import textwrap

import pytest

from corral.language import SandboxStop, find_stop, is_stop

from .local import run_local


def stop():
    raise SandboxStop('limit')


SWALLOWERS = [
    pytest.param('''
        try:
            stop()
        except:
            pass
    ''', id='bare-except'),
    pytest.param('''
        try:
            stop()
        except BaseException:
            pass
    ''', id='except-baseexception'),
    pytest.param('''
        try:
            stop()
        except SystemExit:
            pass
    ''', id='except-systemexit'),
    pytest.param('''
        Base = BaseException
        try:
            stop()
        except (ValueError, Base) as e:
            caught = e
    ''', id='except-aliased-tuple'),
    pytest.param('''
        while True:
            try:
                stop()
            except BaseException:
                continue
    ''', id='retry-loop'),
    pytest.param('''
        try:
            stop()
        except* BaseException:
            pass
    ''', id='except-star'),
    pytest.param('''
        try:
            raise BaseExceptionGroup('g', [ValueError(1)])
        except BaseExceptionGroup:
            stop()
    ''', id='stop-inside-handler'),
    pytest.param('''
        class Suppress:
            def __enter__(self):
                return self
            def __exit__(self, *exc):
                return True
        with Suppress():
            stop()
    ''', id='with-exit-returns-true'),
    pytest.param('''
        class Suppress:
            async def __aenter__(self):
                return self
            async def __aexit__(self, *exc):
                return True
        async with Suppress():
            stop()
    ''', id='async-with-exit-returns-true'),
    pytest.param('''
        def gen():
            while True:
                try:
                    yield stop()
                except BaseException:
                    yield 'swallowed'
        list(gen())
    ''', id='generator-handler'),
    pytest.param('''
        import asyncio
        async def child():
            stop()
        await asyncio.gather(child(), return_exceptions=True)
    ''', id='gather-return-exceptions'),
    pytest.param('''
        import asyncio
        async def child():
            stop()
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(child())
        except BaseException:
            pass
    ''', id='taskgroup'),
    pytest.param('''
        import asyncio
        async def child():
            stop()
        task = asyncio.create_task(child())
        try:
            await asyncio.wait([task])
            task.exception()
        except BaseException:
            pass
    ''', id='task-exception'),
]


@pytest.mark.parametrize('code', SWALLOWERS)
def test_a_stop_cannot_be_swallowed(code):
    with pytest.raises(BaseException) as info:
        run_local(textwrap.dedent(code).strip() + '\n', stop=stop)
    assert is_stop(info.value), repr(info.value)


def test_ordinary_handlers_still_work():
    code = '''
log = []
try:
    raise ValueError('x')
except BaseException as e:
    log.append(type(e).__name__)
try:
    raise ExceptionGroup('g', [KeyError(1)])
except* KeyError:
    log.append('star')
log
'''
    assert run_local(code) == ['ValueError', 'star']


def test_find_stop_looks_inside_groups():
    inner = SandboxStop('x')
    group = BaseExceptionGroup('outer', [ValueError(1), BaseExceptionGroup('inner', [inner])])
    assert find_stop(group) is inner
    assert find_stop(ValueError()) is None
    assert not is_stop(None)
    assert issubclass(SandboxStop, BaseException) and not issubclass(SandboxStop, Exception)
