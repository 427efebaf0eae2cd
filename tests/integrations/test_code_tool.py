"""`corral.integrations.CodeTool`: a `run_code` tool for any framework (seed 000, as a library object)."""

import json
import sys

import pytest

import corral
from corral.integrations import CodeTool
from corral.integrations._common import sandbox_limits_text
from cpython_carets import carets

#: The carets 3.12 and later draw under the `True` of a `while True:` a stopped script was in (3.11 draws none).
_WHILE_TRUE = '          ^^^^\n' if sys.version_info >= (3, 12) else ''


async def get_order(order_id: str) -> dict:
    """Return one order, with its `status` and number of `items`."""
    return {'id': order_id, 'status': 'shipped', 'items': 3}


def cancel(order_id: str) -> bool:
    """Cancel an order; refuses shipped ones."""
    raise ValueError(f'order {order_id} has shipped')


STUB = 'async def get_order(order_id: str) -> dict:\n    """Return one order, with its `status` and number of `items`."""\n'

TYPE_ERROR = '''The script did not run, because it has type errors:
error[invalid-argument-type]: Argument to function `get_order` is incorrect
 --> main.py:1:17
  |
1 | await get_order(42)
  |                 ^^ Expected `str`, found `Literal[42]`
info: Function defined here
 --> repl_type_stubs.pyi:1:11
  |
1 | async def get_order(order_id: str) -> dict:
  |           ^^^^^^^^^ ------------- Parameter declared here
2 |     """Return one order, with its `status` and number of `items`."""
  |'''


@pytest.fixture
async def tool(pool):
    yield CodeTool({'get_order': get_order, 'cancel': cancel}, pool=pool)


async def test_seed_000_main(pool):
    tool = CodeTool({'get_order': get_order}, pool=pool)
    script = "import asyncio\norders = await asyncio.gather(get_order('o1'), get_order('o2'))\n[o['status'] for o in orders]"
    assert await tool.run(script) == "['shipped', 'shipped']"
    assert await tool.run('await get_order(42)') == TYPE_ERROR


async def test_description_lists_the_stubs_and_the_limits(pool):
    tool = CodeTool({'get_order': get_order}, pool=pool)
    assert tool.stubs == STUB
    assert tool.description == (
        'Run a Python script and return the value of its last expression.\n\n'
        'The script can call these functions; `await` the `async` ones, and run several at once with '
        '`await asyncio.gather(...)`. They are already defined: do not import or redefine them.\n\n'
        f'```python\n{STUB}```\n\n'
        'End the script with the expression whose value you want back; there is no need to print it. '
        'When the script ends with an assignment, the assigned value is returned. Printed output is '
        'returned with the value. A value with no JSON form comes back as its repr.\n\n'
        'Each script starts with no variables from earlier calls.\n\n'
        'Limits of the sandbox:\n' + sandbox_limits_text(corral.Limits())
    )
    limits = sandbox_limits_text(corral.Limits())
    assert '- One script may run for at most 30 seconds, use at most 1 GiB of memory, make at most 10000 function calls and print at most 1 MiB.' in limits
    assert 'No third-party packages' in limits
    (missing,) = [line for line in limits.splitlines() if line.startswith('- These builtins are not available: ')]
    assert {'open', 'eval', 'exec'} <= set(missing.removeprefix('- These builtins are not available: ').rstrip('.').split(', '))


async def test_runtime_error_lists_the_calls_that_ran(tool):
    text = await tool.run("o = await get_order('o7')\nprint('status', o['status'])\ncancel(o['id'])")
    assert text == (
        'The script failed: Traceback (most recent call last):\n'
        '  File "main.py", line 3, in <module>\n'
        "    cancel(o['id'])\n"
        + carets("cancel(o['id'])", 'cancel')
        + 'ValueError: order o7 has shipped\n\n'
        'Before the failure, the script made 2 function calls; whatever they did has happened:\n'
        "- get_order('o7') returned {'id': 'o7', 'status': 'shipped', 'items': 3}\n"
        "- cancel('o7') raised ValueError: order o7 has shipped\n"
        'Do not repeat a call that changed something.\n\n'
        'Printed before the failure:\n'
        'status shipped'
    )


async def test_syntax_error_text(pool):
    tool = CodeTool({}, pool=pool, type_check=False)
    assert await tool.run('x = (1,') == (
        'The script failed:   File "main.py", line 1\n'
        '    x = (1,\n'
        '        ^\n'
        "SyntaxError: '(' was never closed"
    )


async def test_values_assignments_and_printing(tool):
    assert await tool.run('x = {1, 2}') == "{1, 2}\n\n(The script ended with an assignment; the value returned is that of `x`.)"
    assert await tool.run('a, b = 1, 2') == '(1, 2)\n\n(The script ended with an assignment; the value returned is that of `a`, `b`.)'
    assert await tool.run("print('hi')\n3") == '3\n\nPrinted:\nhi'
    assert await tool.run('len') == '<built-in function len>'
    assert await tool.run('for i in range(2):\n    print(i)') == (
        'None\n\n(The script did not end with an expression, so it has no value to return.)\n\nPrinted:\n0\n1'
    )


async def test_each_call_starts_fresh_by_default(tool):
    assert await tool.run('x = 1') == '1\n\n(The script ended with an assignment; the value returned is that of `x`.)'
    assert (await tool.run('x')).startswith('The script did not run, because it has type errors:\nerror[unresolved-reference]: Name `x` used when not defined')


async def test_kept_session_and_restart(pool):
    tool = CodeTool({'get_order': get_order}, pool=pool, keep_session=True)
    try:
        assert await tool.call({'code': "o = await get_order('o1')"}) == (
            "{'id': 'o1', 'status': 'shipped', 'items': 3}\n\n(The script ended with an assignment; the value returned is that of `o`.)"
        )
        assert await tool.call('{"code": "o[\'items\'] + 1"}') == '4'
        assert (await tool.call({'code': 'o', 'restart': True})).startswith(
            'The script did not run, because it has type errors:\nerror[unresolved-reference]: Name `o` used when not defined'
        )
        assert await tool.run('y = 2') == '2\n\n(The script ended with an assignment; the value returned is that of `y`.)'
        await tool.reset()
        assert (await tool.run('y')).startswith('The script did not run')
    finally:
        await tool.aclose()


async def test_bad_arguments_from_a_model(tool):
    assert await tool.call('{"code": ') == 'The arguments of run_code are not valid JSON: Expecting value: line 1 column 10 (char 9)'
    assert await tool.call({'script': '1'}) == 'run_code takes an object with a string `code`, the Python script to run.'


async def test_modules_are_imported_by_the_script(pool):
    def list_invoices(customer: str) -> list[int]:
        """Invoice numbers of a customer."""
        return [1, 2]

    tool = CodeTool(modules={'billing': {'list_invoices': list_invoices}}, pool=pool)
    assert '# billing.pyi\ndef list_invoices(customer: str) -> list[int]:\n    """Invoice numbers of a customer."""' in tool.description
    assert await tool.run("from billing import list_invoices\nsum(list_invoices('c1'))") == '3'


async def test_tool_formats(pool):
    tool = CodeTool({'get_order': get_order}, pool=pool)
    parameters = {
        'type': 'object',
        'properties': {'code': {'type': 'string', 'description': 'The Python script to run.'}},
        'required': ['code'],
        'additionalProperties': False,
    }
    assert tool.parameters == parameters
    assert tool.anthropic_tool() == {'name': 'run_code', 'description': tool.description, 'input_schema': parameters}
    assert tool.openai_chat_tool() == {
        'type': 'function',
        'function': {'name': 'run_code', 'description': tool.description, 'parameters': parameters},
    }
    assert tool.openai_responses_tool() == {
        'type': 'function',
        'name': 'run_code',
        'description': tool.description,
        'parameters': parameters,
        'strict': False,
    }
    assert tool.json_schema() == {'title': 'run_code', 'description': tool.description, **parameters}
    json.dumps([tool.anthropic_tool(), tool.openai_chat_tool(), tool.openai_responses_tool(), tool.json_schema()])


async def test_kept_session_tools_take_restart(pool):
    tool = CodeTool({}, pool=pool, keep_session=True, name='python')
    assert tool.anthropic_tool()['name'] == 'python'
    assert tool.parameters['properties']['restart'] == {
        'type': 'boolean',
        'description': 'Start from a fresh sandbox, without the variables of earlier calls.',
        'default': False,
    }
    assert 'Variables, functions and imports persist from one call to the next.' in tool.description
    await tool.aclose()


async def test_tool_without_a_pool_makes_and_closes_its_own():
    async with CodeTool({'get_order': get_order}) as tool:
        assert await tool.run("(await get_order('a'))['items']") == '3'
        assert tool._pool is not None
    assert tool._pool is None


async def test_results_that_cannot_enter_the_sandbox_are_converted(pool):
    import ipaddress
    import pathlib
    import uuid

    def ids() -> list:
        return [uuid.UUID(int=1), ipaddress.ip_address('10.0.0.1'), pathlib.Path('/srv/a')]

    # a UUID crosses as itself, a path as a path, anything else as its JSON form
    tool = CodeTool({'ids': ids}, pool=pool)
    assert 'def ids() -> list:' in tool.description
    assert await tool.run('ids()') == "[UUID('00000000-0000-0000-0000-000000000001'), '10.0.0.1', PurePosixPath('/srv/a')]"

    received = []

    def where(folder: pathlib.Path) -> pathlib.Path:
        received.append(folder)
        return pathlib.Path(folder) / 'q1.csv'

    # a path a tool returns is the sandbox's Path; one a script gives a tool arrives as its text
    tool = CodeTool({'where': where}, pool=pool)
    assert 'def where(folder: str) -> pathlib.Path:' in tool.description
    assert await tool.run("p = where('/srv')\n(type(p).__name__, p.name)") == "('PosixPath', 'q1.csv')"
    unchecked = CodeTool({'where': where}, pool=pool, type_check=False)
    assert await unchecked.run("import pathlib\nwhere([pathlib.Path('/a')][0]).name") == "'q1.csv'"
    assert received == ['/srv', '/a'] and [type(value) for value in received] == [str, str]


async def test_without_type_check(pool):
    tool = CodeTool({'get_order': get_order}, pool=pool, type_check=False)
    assert 'type-checked' not in tool.description
    assert (await tool.run('await get_order(42)')) == "{'id': 42, 'status': 'shipped', 'items': 3}"


def _conforms(typed_dict: object, value: dict) -> bool:
    """`value` validates as `typed_dict` and loses nothing (no key the API does not know)."""
    from pydantic import TypeAdapter

    return TypeAdapter(typed_dict).validate_python(value) == value


async def test_tool_formats_match_the_official_sdk_types(pool):
    anthropic_types = pytest.importorskip('anthropic.types')
    chat_types = pytest.importorskip('openai.types.chat')
    responses_types = pytest.importorskip('openai.types.responses')
    for keep_session in (False, True):
        tool = CodeTool({'get_order': get_order}, pool=pool, keep_session=keep_session)
        assert _conforms(anthropic_types.ToolParam, tool.anthropic_tool())
        assert _conforms(chat_types.ChatCompletionFunctionToolParam, tool.openai_chat_tool())
        assert _conforms(responses_types.FunctionToolParam, tool.openai_responses_tool())


def test_functions_given_as_a_list_are_refused_with_what_to_pass():
    async def get_order(order_id: str) -> dict:
        return {}

    with pytest.raises(TypeError) as info:
        CodeTool([get_order])
    assert str(info.value) == 'functions must map names to callables (a dict), not list: CodeTool({"get_order": get_order})'


async def test_a_class_or_function_the_script_defined_comes_back_as_its_repr(pool):
    tool = CodeTool({}, pool=pool)
    assert await tool.run('class A: ...\nA') == "<class '__main__.A'>"
    assert (await tool.run('def f():\n    return 1\nf')).startswith('<function f at 0x')
    kept = CodeTool({}, pool=pool, keep_session=True)
    try:
        assert await kept.run('class B: ...\nb = B') == "<class '__main__.B'>\n\n(The script ended with an assignment; the value returned is that of `b`.)"
        assert await kept.run('B.__name__') == "'B'"
    finally:
        await kept.aclose()


async def test_a_kept_session_knows_the_variables_a_failed_script_bound(pool):
    calls = []

    async def fetch(n: int) -> dict[str, int]:
        """One record."""
        calls.append(n)
        return {'n': n}

    tool = CodeTool({'fetch': fetch}, pool=pool, keep_session=True)
    try:
        text = await tool.run('records = [await fetch(i) for i in range(3)]\ntotal = sum(r["n"] for r in records)\ntotal / 0')
        assert text.endswith(
            'ZeroDivisionError: division by zero\n\n'
            'Before the failure, the script made 3 function calls; whatever they did has happened:\n'
            "- fetch(0) returned {'n': 0}\n- fetch(1) returned {'n': 1}\n- fetch(2) returned {'n': 2}\n"
            'Do not repeat a call that changed something.'
        )
        assert await tool.run('total + len(records)') == '6'
        assert await tool.run('records[0]["n"] + "x"') == (
            'The script did not run, because it has type errors:\n'
            'error[unsupported-operator]: Unsupported `+` operation\n'
            ' --> main.py:1:1\n'
            '  |\n'
            '1 | records[0]["n"] + "x"\n'
            '  | ---------------^^^---\n'
            '  | |                 |\n'
            '  | |                 Has type `Literal["x"]`\n'
            '  | Has type `int`'
        )
        assert calls == [0, 1, 2]
    finally:
        await tool.aclose()


def test_a_tool_never_closed_closes_its_pool_when_its_event_loop_ends():
    import subprocess
    import sys

    program = (
        'import asyncio, corral\n'
        'async def get_order(order_id: str) -> dict:\n'
        '    """One order."""\n'
        "    return {'id': order_id}\n"
        "tool = corral.CodeTool({'get_order': get_order})\n"
        'async def main(code):\n'
        '    print(await tool.run(code))\n'
        "asyncio.run(main(\"(await get_order('a'))['id']\"))\n"
        'print(tool._pool)\n'
        "asyncio.run(main('1 + 1'))\n"
    )
    done = subprocess.run([sys.executable, '-c', program], capture_output=True, text=True, timeout=120, check=False)
    assert (done.stdout, done.stderr, done.returncode) == ("'a'\nNone\n2\n", '', 0)


async def test_a_kept_session_keeps_its_variables_after_a_limit_the_script_was_stopped_at(pool):
    # wall_time and memory stop the script and leave the worker up; only a killed worker restarts.
    tool = CodeTool({}, pool=pool, keep_session=True, limits=corral.Limits(wall_time=0.5, memory=64 * 2**20))
    try:
        await tool.run('x = 5')
        assert await tool.run('while True: pass') == (
            'The script failed: Traceback (most recent call last):\n'
            '  File "main.py", line 1, in <module>\n'
            '    while True: pass\n'
            + _WHILE_TRUE
            + 'TimeoutError: the script ran past the wall_time limit of 0.5 seconds'
        )
        assert await tool.run('x') == '5'
        assert await tool.run('b = bytearray(200 * 2**20)') == (
            'The script failed: Traceback (most recent call last):\n'
            '  File "main.py", line 1, in <module>\n'
            '    b = bytearray(200 * 2**20)\n'
            + ('        ^^^^^^^^^^^^^^^^^^^^^^\n' if sys.version_info < (3, 13) else '')  # 3.13 draws none under a named call assigned
            + 'MemoryError: the script went past the memory limit of 67108864 bytes'
        )
        assert await tool.run('x') == '5'
    finally:
        await tool.aclose()


async def test_a_kept_session_whose_worker_was_killed_says_the_sandbox_restarted(pool):
    tool = CodeTool({}, pool=pool, keep_session=True, limits=corral.Limits(wall_time=10, cpu_time=1))
    try:
        await tool.run('x = 5')
        assert await tool.run('while True: pass') == (
            'The script failed: Traceback (most recent call last):\n'
            '  File "main.py", line 1, in <module>\n'
            '    while True: pass\n'
            + _WHILE_TRUE
            + 'TimeoutError: the script used more than the cpu_time limit of 1 second of CPU\n\n'
            'The sandbox was restarted: variables from earlier calls are gone.'
        )
        assert (await tool.run('x')).startswith('The script did not run, because it has type errors:\nerror[unresolved-reference]: Name `x`')
    finally:
        await tool.aclose()
