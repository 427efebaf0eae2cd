"""The documents' examples, run as users run them, print exactly what the documents show."""

import subprocess
import sys

import pytest

CODE_TOOL_OUTPUT = """\
['shipped', 'shipped']
The script did not run, because it has type errors:
error[invalid-argument-type]: Argument to function `get_order` is incorrect
 --> main.py:1:17
  |
1 | await get_order(42)
  |                 ^^ Expected `str`, found `Literal[42]`
info: Function defined here
 --> repl_type_stubs.pyi:2:11
  |
2 | async def get_order(order_id: str) -> dict:
  |           ^^^^^^^^^ ------------- Parameter declared here
3 |     '''Return one order, with its `status` and number of `items`.'''
  |
"""

BILLING_OUTPUT = """\
error[invalid-argument-type]: Argument to function `list_invoices` is incorrect
 --> main.py:4:33
  |
2 | from billing import list_invoices
3 |
4 | unpaid = list_invoices('cus_1', status='unpaid')
  |                                 ^^^^^^^^^^^^^^^ Expected `Literal["paid", "open", "void"] | None`, found `Literal["unpaid"]`
5 | sum(i['amount'] for i in unpaid)
  |
info: Function defined here
  --> billing.pyi:10:5
   |
 8 |     status: Literal['paid', 'open', 'void']
 9 |
10 | def list_invoices(customer_id: str, status: Literal['paid', 'open', 'void'] | None = None) -> list[Invoice]: ...
   |     ^^^^^^^^^^^^^                   ----------------------------------------------------- Parameter declared here

error[invalid-key]: Unknown key "amount" for TypedDict `Invoice`
 --> main.py:5:7
  |
4 | unpaid = list_invoices('cus_1', status='unpaid')
5 | sum(i['amount'] for i in unpaid)
  |     - ^^^^^^^^ Unknown key "amount"
  |     |
  |     TypedDict `Invoice`
50.0
"""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize(
    ('module', 'expected'),
    [('corral.examples.code_tool_main', CODE_TOOL_OUTPUT), ('corral.examples.billing_main', BILLING_OUTPUT)],
)
def test_document_example_prints_what_the_document_shows(module, expected):
    done = _run('-m', module)
    assert (done.stdout, done.stderr, done.returncode) == (expected, '', 0)


def test_demo_command_is_the_code_tool_example():
    done = _run('-m', 'corral', 'demo')
    assert (done.stdout, done.returncode) == (CODE_TOOL_OUTPUT, 0)
