"""tests/forking.py: a test that forks the test process never does so beside another thread."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

CONFTEST = 'from forking import pytest_configure, pytest_pyfunc_call, pytest_runtest_call, pytest_runtest_logreport, pytest_sessionfinish  # noqa: F401\n'

SUITE = '''
import os
import threading

import pytest

gate = threading.Event()


def fork_and_wait():
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.mark.forks
def test_alone_before_any_thread():
    assert (threading.active_count(), fork_and_wait()) == (1, 7)


def test_a_thread_is_left_running():
    threading.Thread(target=gate.wait, name='left-running', daemon=True).start()


@pytest.mark.forks
def test_alone_in_a_fresh_process_beside_it():
    assert (threading.active_count(), fork_and_wait(), 'CORRAL_TESTS_FORK_ALONE' in os.environ) == (1, 7, True)


@pytest.mark.forks
def test_skipped_alone():
    pytest.skip('nothing to fork here')


@pytest.mark.forks
def test_failing_alone():
    assert fork_and_wait() == 8


def test_an_unmarked_fork_beside_it():
    assert fork_and_wait() == 7
'''


@pytest.mark.slow
def test_a_forking_test_runs_alone_and_a_fork_beside_a_thread_fails(tmp_path: Path) -> None:
    (tmp_path / 'conftest.py').write_text(CONFTEST)
    (tmp_path / 'test_suite.py').write_text(SUITE)
    path = os.pathsep.join(filter(None, [str(TESTS), os.environ.get('PYTHONPATH')]))
    env = {**os.environ, 'PYTHONPATH': path}
    env.pop('CORRAL_TESTS_FORK_ALONE', None)
    command = [sys.executable, '-m', 'pytest', '-q', '-rfs', '-p', 'no:cacheprovider', 'test_suite.py']
    run = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    lines = run.stdout.splitlines()
    assert 'the test process forked while other threads ran (a child may hang on a lock one held): left-running; mark the test `forks`' in lines, run.stdout
    assert [line.partition(': ')[2] for line in lines if line.startswith('SKIPPED')] == [
        'run in a fresh test process (these threads ran in this one: left-running): Skipped: nothing to fork here'
    ], run.stdout
    assert 'run in a fresh test process (these threads ran in this one: left-running), it failed:' in lines, run.stdout
    assert 'E       assert 7 == 8' in lines, run.stdout  # its failure as it was there
    assert lines[-1].startswith('2 failed, 3 passed, 1 skipped'), run.stdout
