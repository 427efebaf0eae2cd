"""A pytest plugin for tests that fork the test process (`tests/conftest.py` loads it).

A fork beside another thread may leave the child waiting forever on a lock that thread held (a
malloc arena, the import lock, a logging handler's), and 3.12 only warns of it. So:

- a test marked `forks` (it calls `os.fork()` in the test process) runs here only when no other
  thread does (after a collection, which ends the idle threads of executors no one holds, and a
  second for threads already ending); else alone, in a fresh test process, where no other thread
  may run either;
- any test (marked or not) during which the test process forks while another thread runs fails,
  naming the threads: checked before every fork (`os.register_at_fork`), on every Python release.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import time
from collections.abc import Generator
from typing import Any

import pytest

#: Set for the fresh test process a `forks` test runs alone in.
ALONE = 'CORRAL_TESTS_FORK_ALONE'
#: The threads that ran at each fork of this process since the running test began.
_FORKED_BESIDE: list[list[str]] = []


def other_threads() -> list[str]:
    """The threads of this process besides the main one: Python threads by name, then native ones
    (counted in /proc) as one entry."""
    python = sorted(thread.name for thread in threading.enumerate() if thread is not threading.main_thread())
    try:
        native = len(os.listdir('/proc/self/task')) - 1 - len(python)
    except OSError:
        native = 0
    return python + ([f'{native} native thread(s)'] if native > 0 else [])


def threads_after_a_wait(seconds: float = 1.0) -> list[str]:
    """`other_threads()` at once if there are none, else once they are gone or `seconds` have
    passed after a collection."""
    threads = other_threads()
    if threads:
        gc.collect()
        deadline = time.monotonic() + seconds
        while (threads := other_threads()) and time.monotonic() < deadline:
            time.sleep(0.01)
    return threads


def _before_fork() -> None:
    threads = other_threads()
    if threads:
        _FORKED_BESIDE.append(threads)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line('markers', 'forks: calls os.fork() in the test process, so runs only where no other thread does (tests/forking.py)')
    os.register_at_fork(before=_before_fork)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """A `forks` test runs here if no other thread does, else in a fresh test process of its own."""
    if pyfuncitem.get_closest_marker('forks') is None:
        return None
    threads = threads_after_a_wait()
    if not threads:
        return None
    if os.environ.get(ALONE):
        pytest.fail(f'this test forks the test process, which must have no other thread, but these run: {", ".join(threads)}', pytrace=False)
    command = [sys.executable, '-m', 'pytest', '-q', '-rs', '-p', 'no:cacheprovider', pyfuncitem.nodeid]
    run = subprocess.run(command, cwd=pyfuncitem.config.rootpath, env={**os.environ, ALONE: '1'}, capture_output=True, text=True, timeout=900)
    lines = run.stdout.strip().splitlines()
    summary = lines[-1] if lines else ''
    if run.returncode != 0 or not (' passed' in summary or ' skipped' in summary):
        pytest.fail(f'run alone in a fresh test process (these threads ran in this one: {", ".join(threads)}), it failed:\n{run.stdout}{run.stderr}', pytrace=False)
    if ' passed' not in summary:
        pytest.skip(next((line for line in lines if line.startswith('SKIPPED')), summary))
    return True


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    """Fail a test during which the test process forked beside another thread."""
    _FORKED_BESIDE.clear()
    result = yield
    if _FORKED_BESIDE:
        pytest.fail(f'the test process forked while other threads ran (a child may hang on a lock one held): {", ".join(_FORKED_BESIDE[0])}; mark the test `forks`', pytrace=False)
    return result
