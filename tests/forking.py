"""A pytest plugin for tests that fork the test process (`tests/conftest.py` loads it).

A fork beside another thread may leave the child waiting forever on a lock that thread held (a
malloc arena, the import lock, a logging handler's), and 3.12 only warns of it. So:

- a test marked `forks` (it calls `os.fork()` in the test process) runs here only when no other
  thread does (after a collection, which ends the idle threads of executors no one holds, and a
  second for threads already ending); else it and the other `forks` tests of its module run
  together in a fresh test process, where no other thread may run either, and each reports the
  outcome it had there;
- any test (marked or not) during which the test process forks while another thread runs fails,
  naming the threads: checked before every fork (`os.register_at_fork`), on every Python release.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Generator
from typing import Any

import pytest

#: Set for a fresh test process that runs `forks` tests: the file it writes their outcomes to.
ALONE = 'CORRAL_TESTS_FORK_ALONE'
#: The threads that ran at each fork of this process since the running test began.
_FORKED_BESIDE: list[list[str]] = []
#: In a fresh test process: each test's outcome and its text, by node id.
_OUTCOMES: dict[str, list[str]] = {}
#: In the test process: the outcomes of each module whose `forks` tests ran in a fresh one, and its output.
_RUNS: dict[str, tuple[dict[str, list[str]], str]] = {}


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
    """A `forks` test runs here if no other thread does, else with its module's in a fresh test process."""
    if pyfuncitem.get_closest_marker('forks') is None:
        return None
    threads = threads_after_a_wait()
    if not threads:
        return None
    if os.environ.get(ALONE):
        pytest.fail(f'this test forks the test process, which must have no other thread, but these run: {", ".join(threads)}', pytrace=False)
    outcomes, output = _run_alone(pyfuncitem)
    outcome, text = outcomes.get(pyfuncitem.nodeid, ('missing', ''))
    where = f'run in a fresh test process (these threads ran in this one: {", ".join(threads)})'
    if outcome == 'skipped':
        pytest.skip(f'{where}: {text}')
    if outcome != 'passed':
        pytest.fail(f'{where}, it {"failed" if outcome == "failed" else "did not run"}:\n{text or output}', pytrace=False)
    return True


def _run_alone(item: pytest.Function) -> tuple[dict[str, list[str]], str]:
    """The outcomes of the `forks` tests of `item`'s module, run together in a fresh test process once."""
    module = item.nodeid.partition('::')[0]
    if module not in _RUNS:
        nodeids = [other.nodeid for other in item.session.items if other.nodeid.partition('::')[0] == module and other.get_closest_marker('forks')]
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, 'outcomes.json')
            command = [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', *nodeids]
            run = subprocess.run(command, cwd=item.config.rootpath, env={**os.environ, ALONE: path}, capture_output=True, text=True, timeout=1800)
            outcomes = json.loads(open(path).read()) if os.path.exists(path) else {}
        _RUNS[module] = (outcomes, run.stdout + run.stderr)
    return _RUNS[module]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """In a fresh test process: keep each test's outcome (its call's, or a setup's or teardown's that did not pass)."""
    if os.environ.get(ALONE) and (report.when == 'call' or report.outcome != 'passed'):
        text = report.longrepr[2] if report.skipped and isinstance(report.longrepr, tuple) else report.longreprtext
        _OUTCOMES[report.nodeid] = [report.outcome, text]


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = os.environ.get(ALONE)
    if path:
        with open(path, 'w') as file:
            json.dump(_OUTCOMES, file)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    """Fail a test during which the test process forked beside another thread."""
    _FORKED_BESIDE.clear()
    result = yield
    if _FORKED_BESIDE:
        pytest.fail(f'the test process forked while other threads ran (a child may hang on a lock one held): {", ".join(_FORKED_BESIDE[0])}; mark the test `forks`', pytrace=False)
    return result
