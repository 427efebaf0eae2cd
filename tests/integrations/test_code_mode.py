"""`corral.pydantic_ai.CodeMode`: a real Pydantic AI agent, driven by `FunctionModel`, no network."""

from __future__ import annotations

import gc
import textwrap
from typing import Any

import pytest

pytest.importorskip('pydantic_ai')

from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import HandleDeferredToolCalls
from pydantic_ai.exceptions import UsageLimitExceeded
from pydantic_ai.messages import ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import UsageLimits
from typing_extensions import TypedDict

from corral import Limits
from corral.pydantic_ai import CodeMode

from .scripted_model import Script, answers

WEATHER_SCRIPT = """\
import asyncio

paris, tokyo = await asyncio.gather(
    get_weather(city='Paris'),
    get_weather(city='Tokyo'),
)
paris_c = await convert_temp(fahrenheit=paris['temp_f'])
tokyo_c = await convert_temp(fahrenheit=tokyo['temp_f'])
{'paris': paris_c, 'tokyo': tokyo_c}
"""


class Forecast(TypedDict):
    """A day's forecast."""

    day: str
    high: float


def weather_agent(model: FunctionModel, **code_mode: Any) -> Agent[None, str]:
    agent = Agent(model, capabilities=[CodeMode(**code_mode)])

    @agent.tool_plain
    def get_weather(city: str) -> dict:
        return {'city': city, 'temp_f': 72, 'condition': 'sunny'}

    @agent.tool_plain
    def convert_temp(fahrenheit: float) -> float:
        return round((fahrenheit - 32) * 5 / 9, 1)

    return agent


async def test_seed_002_weather_example():
    script = Script(WEATHER_SCRIPT)
    result = await weather_agent(script.model).run('Weather in Paris and Tokyo, in Celsius?')
    assert answers(result.all_messages()) == [{'paris': 22.2, 'tokyo': 22.2}]
    assert [tool.name for tool in script.infos[0].function_tools] == ['run_code']
    description = script.infos[0].function_tools[0].description
    assert textwrap.dedent('''\
        ```python
        async def get_weather(city: str) -> dict:
            ...


        async def convert_temp(fahrenheit: float) -> float:
            ...
        ```''') in description
    assert 'make at most 100 function calls' in description
    assert 'Pass `restart: true` to start again with none.' in description


TYPE_ERROR = '''The script did not run, because it has type errors:
error[invalid-argument-type]: Argument to function `get_weather` is incorrect
 --> main.py:1:19
  |
1 | await get_weather(city=1)
  |                   ^^^^^^ Expected `str`, found `Literal[1]`
info: Function defined here
 --> repl_type_stubs.pyi:1:11
  |
1 | async def get_weather(city: str) -> dict:
  |           ^^^^^^^^^^^ --------- Parameter declared here
2 |     ...
  |'''


async def test_type_error_then_its_fix():
    script = Script('await get_weather(city=1)', "(await get_weather(city='Paris'))['temp_f']")
    result = await weather_agent(script.model).run('x')
    assert answers(result.all_messages()) == [('retry', TYPE_ERROR), 72]
    assert result.output == 'done'


async def test_runtime_error_then_its_fix():
    script = Script(
        "w = await get_weather(city='Oslo')\nprint('got', w['city'])\nw['temp_f'] / 0",
        "w = await get_weather(city='Oslo')\nw['temp_f'] / 2",
    )
    result = await weather_agent(script.model).run('x')
    assert answers(result.all_messages()) == [
        (
            'retry',
            'The script failed: Traceback (most recent call last):\n'
            '  File "main.py", line 3, in <module>\n'
            "    w['temp_f'] / 0\n"
            "    ~~~~~~~~~~~~^~~\n"
            'ZeroDivisionError: division by zero\n\n'
            'Before the failure, the script made 1 function call; whatever it did has happened:\n'
            "- get_weather(city='Oslo') returned {'city': 'Oslo', 'temp_f': 72, 'condition': 'sunny'}\n"
            'Do not repeat a call that changed something.\n\n'
            'Printed before the failure:\n'
            'got Oslo',
        ),
        36.0,
    ]


async def test_retries_run_out_after_max_retries():
    from pydantic_ai.exceptions import UnexpectedModelBehavior

    script = Script('1/0', '1/0', '1/0')
    with pytest.raises(UnexpectedModelBehavior, match="Tool 'run_code' exceeded max retries count of 1"):
        await weather_agent(script.model, max_retries=1).run('x')


async def test_repl_state_persists_and_restart_resets_it():
    script = Script(
        "w = await get_weather(city='Oslo')",
        "w['temp_f'] + 1",
        {'code': "w['temp_f']", 'restart': True},
        "n = 5\nprint(n)\nn * 2",
    )
    result = await weather_agent(script.model).run('x')
    assert answers(result.all_messages()) == [
        {
            'result': {'city': 'Oslo', 'temp_f': 72, 'condition': 'sunny'},
            'note': 'The script ended with an assignment; the value returned is that of `w`.',
        },
        73,
        (
            'retry',
            'The script did not run, because it has type errors:\n'
            'error[unresolved-reference]: Name `w` used when not defined\n'
            ' --> main.py:1:1\n'
            '  |\n'
            "1 | w['temp_f']\n"
            '  | ^',
        ),
        {'result': 10, 'printed': '5\n'},
    ]


async def test_repl_state_is_per_run():
    script = Script('x = 1')
    agent = weather_agent(script.model)
    await agent.run('first')
    script.steps = ['x']
    result = await agent.run('second')
    assert answers(result.all_messages())[0][1].startswith(
        'The script did not run, because it has type errors:\nerror[unresolved-reference]: Name `x` used when not defined'
    )


async def test_a_class_or_function_the_script_defined_comes_back_as_its_repr():
    script = Script('class A: ...\nA', 'A.__name__')
    result = await weather_agent(script.model).run('x')
    assert answers(result.all_messages()) == ["<class '__main__.A'>", 'A']


async def test_values_with_no_json_form_come_back_as_repr():
    script = Script('len', '{1, 2}', "import datetime\n[datetime.date(2024, 1, 2), b'\\xff', (1, 2)]")
    result = await weather_agent(script.model).run('x')
    assert answers(result.all_messages()) == ['<built-in function len>', '{1, 2}', ['datetime.date(2024, 1, 2)', "b'\\xff'", [1, 2]]]


def selection_agent(model: FunctionModel, selector: Any) -> Agent[None, str]:
    search_tools = FunctionToolset[None]()

    @search_tools.tool_plain
    def search(query: str) -> list[str]:
        """Search the web."""
        return [f'{query} result']

    @search_tools.tool_plain
    def fetch(url: str) -> str:
        """Fetch a page."""
        return f'page at {url}'

    agent = Agent(model, toolsets=[search_tools.with_metadata(code_mode=True)], capabilities=[CodeMode(tools=selector)])

    @agent.tool_plain
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        return f'sent to {to}'

    return agent


@pytest.mark.parametrize(
    'selector',
    [
        ['search', 'fetch'],
        lambda ctx, tool_def: tool_def.name in {'search', 'fetch'},
        {'code_mode': True},
    ],
    ids=['names', 'predicate', 'metadata'],
)
async def test_tool_selection(selector):
    script = Script(
        "[await search(query='corral'), await fetch(url='https://x')]",
        ToolCallPart('send_email', {'to': 'a@b.c', 'body': 'hi'}, tool_call_id='direct'),
    )
    result = await selection_agent(script.model, selector).run('x')
    offered = script.infos[0].function_tools
    assert sorted(tool.name for tool in offered) == ['run_code', 'send_email']
    description = next(tool.description for tool in offered if tool.name == 'run_code')
    assert 'async def search(query: str) -> list[str]:\n    """Search the web."""' in description
    assert 'async def fetch(url: str) -> str:\n    """Fetch a page."""' in description
    assert 'send_email' not in description
    assert answers(result.all_messages()) == [[['corral result'], 'page at https://x'], 'sent to a@b.c']


async def test_all_tools_selected_by_default():
    script = Script("await send_email(to='a@b.c', body=await fetch(url='u'))")
    result = await selection_agent(script.model, 'all').run('x')
    assert [tool.name for tool in script.infos[0].function_tools] == ['run_code']
    assert answers(result.all_messages()) == ['sent to a@b.c']


async def test_agent_spec_from_yaml(tmp_path):
    spec = tmp_path / 'agent.yaml'
    spec.write_text(
        'model: test\n'
        'capabilities:\n'
        '  - CodeMode:\n'
        '      tools: [get_weather]\n'
        '      max_retries: 5\n'
        '      limits: {wall_time: 5}\n'
    )

    def get_weather(city: str) -> dict:
        return {'city': city, 'temp_f': 50}

    def convert_temp(fahrenheit: float) -> float:
        return round((fahrenheit - 32) * 5 / 9, 1)

    script = Script(*['1/0'] * 5, "(await get_weather(city='Rome'))['temp_f']")
    agent = Agent.from_file(spec, custom_capability_types=[CodeMode], model=script.model, tools=[get_weather, convert_temp])
    result = await agent.run('x')
    assert sorted(tool.name for tool in script.infos[0].function_tools) == ['convert_temp', 'run_code']
    assert answers(result.all_messages())[-1] == 50  # five retries were allowed
    code_mode = [cap for cap in agent.root_capability.capabilities if isinstance(cap, CodeMode)]
    assert [(cap.tools, cap.max_retries, cap.limits) for cap in code_mode] == [(['get_weather'], 5, Limits(wall_time=5))]
    assert 'One script may run for at most 5 seconds' in next(t.description for t in script.infos[0].function_tools if t.name == 'run_code')


async def test_nested_calls_are_child_spans_and_metadata():
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from pydantic_ai.models.instrumented import InstrumentationSettings

    exporter = InMemorySpanExporter()
    # Not kept alive by an exit hook: a live SDK provider re-detects its resource in every forked
    # child, with threads, which the fork-based lockdown tests (tests/worker) refuse to lock down.
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    global_provider = trace.get_tracer_provider()
    if isinstance(global_provider, TracerProvider):  # corral's own spans, when an SDK is installed
        global_provider.add_span_processor(SimpleSpanProcessor(exporter))

    script = Script(WEATHER_SCRIPT)
    agent = weather_agent(script.model)
    agent.instrument = InstrumentationSettings(tracer_provider=provider)
    result = await agent.run('x')

    agent.instrument = None
    del provider
    gc.collect()

    spans = {span.context.span_id: span for span in exporter.get_finished_spans()}
    (run_code,) = [span for span in spans.values() if span.name == 'execute_tool run_code']
    nested = [span for span in spans.values() if span.name.startswith('execute_tool ') and span is not run_code]
    assert sorted(span.name for span in nested) == [
        'execute_tool convert_temp',
        'execute_tool convert_temp',
        'execute_tool get_weather',
        'execute_tool get_weather',
    ]
    for span in nested:
        parent = span.parent
        while parent is not None and parent.span_id != run_code.context.span_id:
            parent = spans[parent.span_id].parent
        assert parent is not None, f'{span.name} is not under the run_code span'

    (part,) = [
        part
        for message in result.all_messages()
        for part in getattr(message, 'parts', [])
        if isinstance(part, ToolReturnPart) and part.tool_name == 'run_code'
    ]
    calls, returns = part.metadata['tool_calls'], part.metadata['tool_returns']
    assert list(calls) == list(returns) == ['call_1__1', 'call_1__2', 'call_1__3', 'call_1__4']
    assert [(call.tool_name, call.args) for call in calls.values()] == [
        ('get_weather', {'city': 'Paris'}),
        ('get_weather', {'city': 'Tokyo'}),
        ('convert_temp', {'fahrenheit': 72}),
        ('convert_temp', {'fahrenheit': 72}),
    ]
    assert all(isinstance(call, ToolCallPart) for call in calls.values())
    assert [(ret.tool_name, ret.tool_call_id, ret.content) for ret in returns.values()] == [
        ('get_weather', 'call_1__1', {'city': 'Paris', 'temp_f': 72, 'condition': 'sunny'}),
        ('get_weather', 'call_1__2', {'city': 'Tokyo', 'temp_f': 72, 'condition': 'sunny'}),
        ('convert_temp', 'call_1__3', 22.2),
        ('convert_temp', 'call_1__4', 22.2),
    ]


def approval_agent(model: FunctionModel, *capabilities: Any) -> Agent[None, str]:
    agent = Agent(model, capabilities=[CodeMode(), *capabilities])

    @agent.tool_plain(requires_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file."""
        return f'deleted {path}'

    return agent


async def test_approval_required_without_a_handler_is_a_retry_error():
    script = Script("await delete_file(path='a.txt')")
    result = await approval_agent(script.model).run('x')
    assert answers(result.all_messages()) == [
        (
            'retry',
            'The script failed: Traceback (most recent call last):\n'
            '  File "main.py", line 1, in <module>\n'
            "    await delete_file(path='a.txt')\n"
            'PermissionError: delete_file() needs approval before it runs, and calls made from run_code cannot be approved on this agent',
        )
    ]


async def test_approval_resolved_by_a_handler_and_the_script_continues():
    asked = []

    def approve(ctx: RunContext[None], requests: Any) -> Any:
        asked.extend((call.tool_name, call.args) for call in requests.approvals)
        return requests.build_results(approve_all=True)

    script = Script("done = await delete_file(path='a.txt')\ndone.upper()")
    result = await approval_agent(script.model, HandleDeferredToolCalls(handler=approve)).run('x')
    assert asked == [('delete_file', {'path': 'a.txt'})]
    assert answers(result.all_messages()) == ['DELETED A.TXT']


async def test_approval_denied_by_a_handler():
    def deny(ctx: RunContext[None], requests: Any) -> Any:
        return requests.build_results(approvals={call.tool_call_id: False for call in requests.approvals})

    script = Script("try:\n    await delete_file(path='a.txt')\nexcept PermissionError as e:\n    str(e)\nelse:\n    'ran'")
    script.steps = ["try:\n    r = await delete_file(path='a.txt')\nexcept PermissionError as e:\n    r = str(e)\nr"]
    result = await approval_agent(script.model, HandleDeferredToolCalls(handler=deny)).run('x')
    assert answers(result.all_messages()) == ['delete_file() was denied: The tool call was denied.']


async def test_calls_go_through_capability_hooks_and_argument_validation():
    from pydantic_ai.capabilities import AbstractCapability

    seen = []

    class Audit(AbstractCapability[None]):
        async def before_tool_execute(self, ctx, *, call, tool_def, args):
            seen.append((call.tool_name, args))
            return args

    script = Script("await convert_temp(fahrenheit='212')", 'await get_weather(city=1)')
    agent = Agent(script.model, capabilities=[CodeMode(type_check=False), Audit()])
    agent.tool_plain(lambda fahrenheit: fahrenheit, name='convert_temp')

    @agent.tool_plain
    def get_weather(city: str) -> dict:
        return {'city': city}

    result = await agent.run('x')
    assert seen == [('run_code', {'code': "await convert_temp(fahrenheit='212')"}), ('convert_temp', {'fahrenheit': '212'}), ('run_code', {'code': 'await get_weather(city=1)'})]
    assert answers(result.all_messages()) == [
        '212',
        (
            'retry',
            'The script failed: Traceback (most recent call last):\n'
            '  File "main.py", line 1, in <module>\n'
            '    await get_weather(city=1)\n'
            'TypeError: get_weather() got invalid arguments:\n'
            '  city: Input should be a valid string (got 1)',
        ),
    ]


async def test_model_retry_from_a_tool_reaches_the_script_as_value_error():
    from pydantic_ai.exceptions import ModelRetry

    script = Script("try:\n    r = await lookup(key='x')\nexcept ValueError as e:\n    r = 'caught: ' + str(e)\nr")
    agent = Agent(script.model, capabilities=[CodeMode()])

    @agent.tool_plain
    def lookup(key: str) -> str:
        raise ModelRetry(f'no key {key!r}; try one of a, b')

    result = await agent.run('x')
    assert answers(result.all_messages()) == ["caught: no key 'x'; try one of a, b"]


async def test_max_tool_calls_per_script():
    script = Script("for city in ['a', 'b', 'c']:\n    await get_weather(city=city)")
    result = await weather_agent(script.model, max_tool_calls=2).run('x')
    (retry,) = answers(result.all_messages())
    assert retry[1].splitlines()[1:4] == [
        '  File "main.py", line 2, in <module>',
        '    await get_weather(city=city)',
        'RuntimeError: a script may make at most 2 tool calls, and this one tried to make more; '
        'make fewer calls per script (filter first, or split the work across run_code calls)',
    ]
    assert (
        'RuntimeError: a script may make at most 2 tool calls, and this one tried to make more; '
        'make fewer calls per script (filter first, or split the work across run_code calls)'
    )
    assert "- get_weather(city='b') returned {'city': 'b', 'temp_f': 72, 'condition': 'sunny'}" in retry[1]


async def test_usage_limits_end_the_run():
    script = Script("for city in ['a', 'b', 'c']:\n    await get_weather(city=city)")
    with pytest.raises(UsageLimitExceeded, match='The next tool call\\(s\\) would exceed the tool_calls_limit of 3'):
        await weather_agent(script.model).run('x', usage_limits=UsageLimits(tool_calls_limit=3))


async def test_stubs_from_return_annotations_and_schemas():
    from pydantic_ai import Tool

    def forecast(city: str, days: int = 3) -> list[Forecast]:
        """Forecast for the next days.

        Args:
            city: City name.
            days: How many days.
        """
        return [{'day': 'mon', 'high': 20.5}][:days]

    def untyped(x):
        return x

    async def schema_only(**kwargs: Any) -> Any:
        return {'ok': kwargs['level']}

    schema_tool = Tool.from_schema(
        schema_only,
        name='set-level',
        description='Set the level.',
        json_schema={'type': 'object', 'properties': {'level': {'type': 'integer', 'enum': [1, 2, 3]}}, 'required': ['level']},
    )
    script = Script("[(await forecast(city='Oslo'))[0]['high'], await set_level(level=2), await untyped(x=[1])]")
    agent = Agent(script.model, tools=[forecast, untyped, schema_tool], capabilities=[CodeMode()])
    result = await agent.run('x')
    description = script.infos[0].function_tools[0].description
    assert textwrap.dedent('''\
        ```python
        from typing import Any, Literal, TypedDict


        class Forecast(TypedDict):
            """A day's forecast."""
            day: str
            high: float


        async def forecast(city: str, days: int = 3) -> list[Forecast]:
            """Forecast for the next days.

            Args:
                city: City name.
                days: How many days.
            """


        async def untyped(x: Any) -> Any:
            ...


        async def set_level(level: Literal[1, 2, 3]) -> Any:
            """Set the level."""
        ```''') in description
    assert answers(result.all_messages()) == [[20.5, {'ok': 2}, [1]]]


async def test_a_tool_named_run_code_is_refused():
    script = Script('1')
    agent = Agent(script.model, capabilities=[CodeMode(tools=['other'])])

    @agent.tool_plain
    def run_code(code: str) -> str:
        return code

    from pydantic_ai.exceptions import UserError

    with pytest.raises(UserError, match="CodeMode offers a tool named 'run_code'"):
        await agent.run('x')


async def test_a_given_pool_is_used(pool):
    script = Script('1 + 1')
    result = await weather_agent(script.model, pool=pool).run('x')
    assert answers(result.all_messages()) == [2]


async def test_sandbox_restarts_when_the_functions_change():
    async def only_later(ctx: RunContext[None], tool_def: Any) -> Any:
        return tool_def if ctx.run_step > 1 else None

    script = Script('x = 1', "await late()")
    agent = Agent(script.model, capabilities=[CodeMode()])

    @agent.tool_plain(prepare=only_later)
    def late() -> str:
        return 'here'

    result = await agent.run('x')
    assert answers(result.all_messages()) == [
        {'result': 1, 'note': 'The script ended with an assignment; the value returned is that of `x`.'},
        {
            'result': 'here',
            'restarted': 'The functions available changed, so the sandbox started again: variables from earlier calls are gone.',
        },
    ]
