"""The documents' examples, run as users run them, print exactly what the documents show."""

import subprocess
import sys
from pathlib import Path

import pytest
from typecheck.test_ty import BILLING_EXPECTED, ORDER_EXPECTED

# The type errors are those the documents show; tests/typecheck checks them diagnostic by diagnostic.
CODE_TOOL_OUTPUT = "['shipped', 'shipped']\nThe script did not run, because it has type errors:\n" + ORDER_EXPECTED + '\n'
BILLING_OUTPUT = BILLING_EXPECTED + '\n50.0\n'


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize(
    ('module', 'expected'),
    [('corral.examples.code_tool_main', CODE_TOOL_OUTPUT), ('corral.examples.billing_main', BILLING_OUTPUT)],
)
@pytest.mark.slow
def test_document_example_prints_what_the_document_shows(module, expected):
    done = _run('-m', module)
    assert (done.stdout, done.stderr, done.returncode) == (expected, '', 0)


@pytest.mark.slow
def test_demo_command_is_the_code_tool_example():
    done = _run('-m', 'corral', 'demo')
    assert (done.stdout, done.returncode) == (CODE_TOOL_OUTPUT, 0)


@pytest.mark.slow
def test_the_readmes_use_example_runs_as_copied():
    readme = (Path(__file__).parent.parent / 'README.md').read_text()
    section = readme[readme.index('\n## Use\n'):]
    example = section[section.index('```python\n') + len('```python\n'):section.index('\n```\n')]
    done = _run('-c', example)
    orders = "[{'id': 'a', 'status': 'shipped', 'items': 3}, {'id': 'b', 'status': 'shipped', 'items': 3}]"
    type_error = 'The script did not run, because it has type errors:\n' + ORDER_EXPECTED.replace("'''", '"""')
    assert (done.stdout, done.stderr, done.returncode) == (f'{orders}\n{type_error}\n', '', 0)
