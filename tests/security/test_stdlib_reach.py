"""The standard library modules that write or time things (logging, warnings) show nothing of the worker's.

A logged record carries no process or thread number and the host's clock as `time.time()` reads
it; a warning or a logged traceback shows no frame, path or source line but the script's; a
handler that fails reports on the script's stderr.
"""

from __future__ import annotations

import datetime
import textwrap

import pytest

import corral

pytestmark = pytest.mark.asyncio(loop_scope='module')

CLOCK = datetime.datetime(2024, 5, 17, 7, 30, 15, 250000, tzinfo=datetime.timezone.utc)


async def run(pool: corral.Pool, code: str, **checkout) -> tuple[object, str]:
    printed: list[str] = []
    async with pool.checkout(**checkout) as session:
        value = await session.feed_run(textwrap.dedent(code), print_callback=lambda stream, text: printed.append(text))
    return value, ''.join(printed)


async def test_a_warning_shows_no_line_of_a_file_outside_the_script(pool):
    value, printed = await run(pool, """
        import warnings
        warnings.warn('deep', stacklevel=99)
        warnings.formatwarning('x', UserWarning, '/etc/passwd', 1)
    """)
    assert value == '/etc/passwd:1: UserWarning: x\n'
    assert printed == 'sys:1: UserWarning: deep\n'


async def test_a_log_record_has_no_number_of_the_workers_and_the_hosts_time(pool):
    code = """
        import logging
        made = logging.LogRecord('n', logging.INFO, 'f.py', 1, 'm', None, None)
        (made.process, made.thread, made.processName, made.threadName, made.created, made.msecs, made.relativeCreated)
    """
    assert (await run(pool, code))[0] == (None, None, None, None, 0.0, 0.0, 0.0)
    clock = corral.OsAccess(clock=lambda: CLOCK)
    assert (await run(pool, code, os_access=clock))[0] == (None, None, None, None, CLOCK.timestamp(), 250.0, 0.0)


async def test_a_logged_stack_shows_the_scripts_frames_only(pool):
    _, printed = await run(pool, """
        import logging
        logging.basicConfig(format='%(message)s')
        def inner():
            logging.warning('here', stack_info=True)
        inner()
    """)
    assert printed == (
        'here\nStack (most recent call last):\n  File "main.py", line 6, in <module>\n    inner()\n'
        '  File "main.py", line 5, in inner\n    logging.warning(\'here\', stack_info=True)\n'
    )


async def test_a_failing_handler_reports_on_the_scripts_stderr(pool):
    _, printed = await run(pool, """
        import logging
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter('{msg.__init__.__globals__}', style='{'))
        log = logging.getLogger('h')
        log.addHandler(handler)
        log.warning('x')
    """)
    assert printed == (
        '--- Logging error ---\n'
        "AttributeError: str.format() field {msg.__init__.__globals__}: attribute '__globals__' cannot be read in the "
        'sandbox: names like __this__ are refused except a short list; function internals are not available in the sandbox\n'
        "Message: 'x'\nArguments: ()\n"
    )


async def test_a_scripts_warning_filters_stay_in_its_session_and_the_worker_runs_on(pool):
    async with pool.checkout() as session:
        await session.feed_run("import warnings\nwarnings.simplefilter('error')\nwarnings.filterwarnings('error', category=DeprecationWarning)")
        code = """
import asyncio, logging, warnings
async def job(n):
    await asyncio.sleep(0)
    return n
logging.getLogger('x').warning('logged')
try:
    warnings.warn('now an error')
except UserWarning as error:
    caught = str(error)
(await asyncio.gather(job(1), job(2)), caught)
"""
        assert await session.feed_run(code, print_callback=lambda stream, text: None) == ([1, 2], 'now an error')
    async with pool.checkout() as other:
        printed: list[str] = []
        await other.feed_run("import warnings\nwarnings.warn('shown')", print_callback=lambda stream, text: printed.append(text))
        assert printed == ["main.py:2: UserWarning: shown\n  warnings.warn('shown')\n"]
