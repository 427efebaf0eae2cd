"""The examples of pydantic-ai-harness's Code Mode document, copied as the document has them
(harness_docs/), run by the harness's own `CodeMode` on corral: through `MONTY_BIN=corral-monty`
and through `monty_sandbox=` a real `corral serve`'s `/monty-ws/`, with the claims of its Sandbox
Restrictions (no clock, environment or files without `os_access` or a `mount`; a mount's modes; a
tool that needs approval fails the snippet, with no capability to resolve it).
They print what Monty's own `monty` binary gives for the same runs, line for line.

pydantic-ai-harness 0.62.0 pins pydantic-ai-slim 2.62.0, where corral's `pydantic-ai` extra has
2.68 or later, so the examples run in a venv of their own, `.venv/harness`, which `./setup dev`
makes with the releases harness_docs/requirements.txt pins."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import running_server

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DOCS = Path(__file__).parent / 'harness_docs'
HARNESS_PYTHON = ROOT / '.venv' / 'harness' / 'bin' / 'python'

# What the runs give the model: the document's own result, then its claims on retries (a type error
# goes back to the model as the text it reads), REPL state (`oslo` carries over) and `restart`.
TYPE_ERROR = (
    'Type error in code:\n'
    'error[missing-argument]: No argument provided for required parameter `city` of function `get_weather`\n'
    ' --> main.py:1:7\n'
    '  |\n'
    "1 | await get_weather(town='Paris')\n"
    '  |       ^^^^^^^^^^^^^^^^^^^^^^^^^\n'
    'info: Parameter declared here\n'
    ' --> repl_type_stubs.pyi:4:26\n'
    '  |\n'
    '2 | from typing import Any, TypedDict, NotRequired, Literal\n'
    '3 |\n'
    '4 | async def get_weather(*, city: str) -> dict[str, Any]:\n'
    '  |                          ^^^^^^^^^\n'
    '5 |     raise NotImplementedError()\n'
    '  |\n'
    '\n'
    'error[unknown-argument]: Argument `town` does not match any known parameter of function `get_weather`\n'
    ' --> main.py:1:19\n'
    '  |\n'
    "1 | await get_weather(town='Paris')\n"
    '  |                   ^^^^^^^^^^^^\n'
    'info: Function signature here\n'
    ' --> repl_type_stubs.pyi:4:11\n'
    '  |\n'
    '2 | from typing import Any, TypedDict, NotRequired, Literal\n'
    '3 |\n'
    '4 | async def get_weather(*, city: str) -> dict[str, Any]:\n'
    '  |           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n'
    '5 |     raise NotImplementedError()\n'
    '  |\n'
    '\n'
)
UNDEFINED = 'Type error in code:\nerror[unresolved-reference]: Name `oslo` used when not defined\n --> main.py:1:1\n  |\n1 | oslo\n  | ^^^^\n\n'
EXPECTED = f"""\
# Basic Pattern, with the code the document shows the model generating
offered: ['run_code']
returned: {{'paris': 22.2, 'tokyo': 22.2}}
# Observability, on that run
tool calls: [('get_weather', {{'city': 'Paris'}}), ('get_weather', {{'city': 'Tokyo'}}), ('convert_temp', {{'fahrenheit': 72}}), ('convert_temp', {{'fahrenheit': 72}})]
tool returns: [('get_weather', {{'city': 'Paris', 'temp_f': 72, 'condition': 'sunny'}}), ('get_weather', {{'city': 'Tokyo', 'temp_f': 72, 'condition': 'sunny'}}), ('convert_temp', 22.2), ('convert_temp', 22.2)]
# Retries, REPL State and restart, on the same agent
offered: ['run_code']
returned: {TYPE_ERROR!r}
returned: {{}}
returned: 'sunny'
returned: {UNDEFINED!r}
# Choose Which Tools Are Sandboxed
ran
offered: ['run_code']
returned: ['the page at https://example.com/corral/1', 'the page at https://example.com/corral/2']
# Retries
ran
# Agent Specs
offered: ['run_code']
returned: 45
CodeMode: [(['search', 'fetch'], 5)]
# Sandbox Restrictions: no clock, environment or files without os_access or a mount, no approvals
offered: ['run_code']
returned: "RuntimeError: 'datetime.now' is not supported in this environment"
returned: "RuntimeError: 'os.getenv' is not supported in this environment"
returned: "PermissionError: Permission denied: '/overlay/data.csv'"
returned: "RuntimeError: Tool 'delete_file' raised ApprovalRequired inside code mode, but no `HandleDeferredToolCalls` capability resolved it. Add a handler capability on the agent so deferred and approval-required calls can be resolved inline."
# with os_access and a mount of each mode
offered: ['run_code']
returned: 'datetime'
returned: 'https://api.example.com'
returned: ['overlay\\n', 'read-only\\n', 'read-write\\n']
returned: 6
returned: "PermissionError: [Errno 30] Read-only file system: '/read-only/summary.md'"
returned: 6
returned: [False, False, True]
on the host: ['overlay', 'overlay/data.csv', 'read-only', 'read-only/data.csv', 'read-write', 'read-write/data.csv', 'read-write/summary.md']
"""

#: The agent runs of run_examples.py, each with a pool of its own (one `corral-monty` child each), and
#: their sessions (one connection each): the harness starts a new one after a type error and on `restart`.
RUNS = 6
SESSIONS = 8


@pytest.fixture(scope='module')
def harness_python() -> Path:
    if not HARNESS_PYTHON.exists():
        pytest.fail(
            f'{HARNESS_PYTHON.relative_to(ROOT)} is missing: the examples of pydantic-ai-harness run in a venv of their own, '
            'which `./setup dev` makes (or: python3 -m venv .venv/harness && '
            f'.venv/harness/bin/python -m pip install -r {(DOCS / "requirements.txt").relative_to(ROOT)})',
            pytrace=False,
        )
    return HARNESS_PYTHON


def run_examples(python: Path, **env: str) -> tuple[str, str, int]:
    """What run_examples.py prints, on stdout and stderr, and its exit status."""
    environment = {name: value for name, value in os.environ.items() if name not in ('PYTHONPATH', 'MONTY_BIN')}
    done = subprocess.run(
        [str(python), str(DOCS / 'run_examples.py')], env={**environment, **env}, capture_output=True, text=True, timeout=300, check=False
    )
    # pydantic_monty 1.4.0 aborts at interpreter exit now and then (SIGABRT, after all output), with its own
    # `monty` binary too: the examples' work is done by then
    return done.stdout, done.stderr, 0 if done.returncode == -signal.SIGABRT else done.returncode


def test_the_examples_run_on_corral_monty_as_their_monty_bin(harness_python: Path, tmp_path: Path) -> None:
    started = tmp_path / 'started'
    binary = tmp_path / 'corral-monty'
    binary.write_text(f'#!/bin/sh\necho "$@" >> {started}\nPYTHONPATH={ROOT / "src"} exec {sys.executable} -m corral.monty "$@"\n')
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    assert run_examples(harness_python, MONTY_BIN=str(binary)) == (EXPECTED, '', 0)
    assert started.read_text() == 'subprocess\n' * RUNS


def test_monty_gives_the_same_runs_what_corral_gives(harness_python: Path) -> None:
    """The expected text is Monty's: its `monty` binary (the harness venv's pydantic-monty-runtime) prints it."""
    assert run_examples(harness_python) == (EXPECTED, '', 0)


@pytest.mark.parametrize('keyed', [False, True], ids=['url', 'pool-with-a-key'])
def test_the_examples_run_on_corral_serve_as_their_monty_sandbox(harness_python: Path, tmp_path: Path, keyed: bool) -> None:
    """`CodeMode(monty_sandbox=URL)` connects without a key, which corral serve takes on loopback while it
    has none; `monty_sandbox=` a function returning an `AsyncMontyWebsocket` sends a tenant's key."""
    store = f'sqlite:///{tmp_path}/store.db'
    with running_server(tmp_path, store=store) as server:
        key = {}
        if keyed:
            made = subprocess.run(
                [sys.executable, '-m', 'corral', 'keys', 'create', '--tenant', 'acme', '--store', store],
                capture_output=True, text=True, timeout=120, check=True,
            )  # fmt: skip
            key = {'CODE_MODE_SANDBOX_KEY': made.stdout.strip()}
        # no local worker can stand in for the server's
        done = run_examples(harness_python, CODE_MODE_SANDBOX=f'{server.url}/monty-ws/', MONTY_BIN=str(tmp_path / 'no-monty'), **key)
        log = server.output()
    assert done == (EXPECTED, '', 0)
    assert log.count('"WebSocket /monty-ws/" [accepted]') == SESSIONS
