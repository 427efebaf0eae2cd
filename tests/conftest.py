"""Fixtures shared by the whole suite: the real parts that take seconds to start are started once
and shared as widely as the tests allow.

- `pool`: a plain `corral.Pool`, one per test module. Every checkout is a fresh worker of its own,
  so the tests of a module share nothing but the zygote; a test that needs a pool of other
  options, or one it may break, makes its own.
- `packages_pool`: a pool with pandas and matplotlib loaded (its zygote takes some 13 seconds to
  start), one per test module. Not one per test run: its type checker's `ty` servers are children
  of the test process, and tests/typecheck counts those of its own.
- `postgres_server`: one real PostgreSQL server per test run (see store/postgres_server.py); each
  test that uses it drops the tables it needs empty.

A test that needs a lockdown layer this machine does not give (the pool refuses to start, with
`SandboxInsecureError`, saying which layer is missing and how to enable it) is skipped with that
text, not failed; CI, which must run every test, sets CORRAL_TESTS_NEED_LOCKDOWN=1 to fail them.

Async tests and fixtures run in one event loop per module (pyproject's `asyncio_default_*_loop_scope`),
so that a fixture of any scope and the test using it share a loop.

A test that forks the test process is marked `forks`; tests/forking.py (its hooks are this file's)
runs it only where no other thread runs, and fails any test during which the process forked
beside another thread.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from typing import Any

import pytest
import pytest_asyncio

import corral

from forking import pytest_configure, pytest_pyfunc_call, pytest_runtest_call, pytest_runtest_logreport, pytest_sessionfinish  # noqa: F401  (the hooks)
from store.postgres_server import PostgresServer


@pytest_asyncio.fixture(scope='module', loop_scope='module')
async def pool():
    async with corral.Pool() as pool:
        yield pool


@pytest.fixture
async def session(pool):
    async with pool.checkout() as session:
        yield session


@pytest_asyncio.fixture(scope='module', loop_scope='module')
async def packages_pool():
    async with corral.Pool(packages=['pandas', 'matplotlib'], warm_workers=1) as pool:
        yield pool


@pytest.fixture(scope='session')
def postgres_server() -> Iterator[PostgresServer]:
    """A real PostgreSQL server; without PostgreSQL's binaries its tests fail, saying what to install."""
    try:
        server = PostgresServer()
    except RuntimeError as error:
        pytest.fail(str(error), pytrace=False)
    try:
        server.start()
        yield server
    finally:
        server.remove()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    excinfo = call.excinfo
    if report.failed and excinfo is not None and excinfo.errisinstance(corral.SandboxInsecureError) and not os.environ.get('CORRAL_TESTS_NEED_LOCKDOWN'):
        path, line, _ = item.location
        report.outcome = 'skipped'
        report.longrepr = (path, (line or 0) + 1, f'Skipped: this machine does not give what the sandbox needs: {excinfo.value}')
    return report
