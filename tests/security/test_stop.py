"""A SandboxStop (the worker stopping a script) cannot be swallowed by the script.

The worker raises it inside the script on a timeout or a limit; here `stop()` stands in for that.
"""

from __future__ import annotations

import textwrap

import pytest

import corral

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


# ----- end to end: the worker's stop at a limit -------------------------------------------------
# Each script swallows the stop some way and runs on. Once the worker has raised a stop it is
# due until the feed ends: no line of the script runs without raising it again, so each ends at
# the wall_time limit (long before the host's kill after `grace`), and the session goes on.

#: A generator whose `finally` computes for ever: closing it (or dropping it) runs that code.
_LOOPS_WHEN_CLOSED = '''
        def gen():
            try:
                yield
            finally:
                while True:
                    pass
'''

EVADERS = [
    pytest.param('''
        try:
            try:
                while True:
                    pass
            finally:
                raise ValueError('x') from KeyError('y')
        except ValueError:
            pass
        while True:
            pass
    ''', id='raise-from-in-finally'),
    pytest.param('''
        try:
            try:
                while True:
                    pass
            finally:
                raise GeneratorExit
        except GeneratorExit:
            pass
        while True:
            pass
    ''', id='generator-exit-in-finally'),
    pytest.param(_LOOPS_WHEN_CLOSED + '''
        g = gen()
        next(g)
        while True:
            try:
                g.close()
            except GeneratorExit:
                pass
    ''', id='generator-close-loop'),
    pytest.param('''
        def bury(depth):
            if depth == 0:
                while True:
                    pass
            try:
                bury(depth - 1)
            finally:
                raise ValueError(depth)
        try:
            bury(150)
        except ValueError:
            pass
        while True:
            pass
    ''', id='context-chain-150-deep'),
    pytest.param('''
        import contextlib
        def work():
            while True:
                pass
        while True:
            stack = contextlib.ExitStack()
            stack.push(lambda *exc: True)
            stack.callback(work)
            stack.__exit__(None, None, None)
    ''', id='exit-stack-by-hand'),
    pytest.param('''
        import asyncio, contextlib
        async def work():
            while True:
                await asyncio.sleep(0)
        async def yes(*exc):
            return True
        while True:
            stack = contextlib.AsyncExitStack()
            stack.push_async_exit(yes)
            stack.push_async_callback(work)
            await stack.__aexit__(None, None, None)
    ''', id='async-exit-stack-by-hand'),
    pytest.param('''
        import contextlib
        @contextlib.contextmanager
        def swallow():
            try:
                yield
            finally:
                return
        while True:
            with swallow():
                while True:
                    pass
    ''', id='contextmanager-finally-return'),
    pytest.param('''
        def f():
            try:
                while True:
                    pass
            finally:
                return 1
        while True:
            f()
    ''', id='finally-return'),
    pytest.param('''
        while True:
            try:
                while True:
                    pass
            finally:
                continue
    ''', id='finally-continue'),
    pytest.param('''
        n = 0
        while True:
            for i in range(3):
                try:
                    while True:
                        n += 1
                finally:
                    break
    ''', id='finally-break'),
    pytest.param('''
        def f():
            try:
                while True:
                    pass
            finally:
                return 1
        f()
        'the script ends after swallowing the stop'
    ''', id='finally-return-then-end'),
    pytest.param('''
        import asyncio
        async def child():
            while True:
                pass
        while True:
            try:
                await asyncio.gather(child(), return_exceptions=True)
            except BaseException:
                pass
    ''', id='gather-retry-loop'),
    pytest.param(_LOOPS_WHEN_CLOSED + '''
        while True:
            g = gen()
            next(g)
    ''', id='finalizer-swallows'),
]


@pytest.mark.asyncio(loop_scope='module')
@pytest.mark.parametrize('code', EVADERS)
async def test_a_stop_at_a_limit_cannot_be_swallowed(pool, code):
    async with pool.checkout(limits=corral.Limits(wall_time=0.5, grace=5)) as session:
        with pytest.raises(corral.SandboxLimitError) as info:
            await session.feed_run(textwrap.dedent(code).strip() + '\n')
        assert (info.value.limit, info.value.value) == ('wall_time', 0.5)
        assert info.value.display().splitlines()[-1] == 'TimeoutError: the script ran past the wall_time limit of 0.5 seconds'
        assert await session.feed_run('1 + 1') == 2


@pytest.mark.asyncio(loop_scope='module')
async def test_return_break_and_continue_in_finally_work_as_in_python(pool):
    code = textwrap.dedent('''
        def f():
            try:
                raise ValueError('x')
            finally:
                return 'returned'
        seen = []
        for i in range(4):
            try:
                if i == 1:
                    raise KeyError(i)
            finally:
                if i == 1:
                    continue
                if i == 2:
                    break
            seen.append(i)
        (f(), seen)
    ''')
    async with pool.checkout() as session:
        assert await session.feed_run(code) == ('returned', [0])


@pytest.mark.asyncio(loop_scope='module')
async def test_tasks_a_stop_ends_end_cancelled_and_run_no_line_of_their_handlers(pool):
    # 3.13 reports a line where an `await` ends with the exception thrown into it: that is no line
    # of the script, and the cancellation passes through it; a handler's line still meets the stop.
    code = textwrap.dedent('''
        import asyncio
        never = asyncio.Event()
        seen = []
        async def waits():
            await never.wait()
        async def handles():
            try:
                await never.wait()
            except BaseException:
                seen.append('handled')
        quiet, loud = asyncio.create_task(waits()), asyncio.create_task(handles())
        await asyncio.sleep(0)
    ''')
    async with pool.checkout(limits=corral.Limits(wall_time=0.5)) as session:
        await session.feed_run(code)
        with pytest.raises(corral.SandboxLimitError):
            await session.feed_run('while True:\n    pass')
        assert await session.feed_run('quiet.cancelled(), loud.done(), seen') == (True, True, [])
