"""Runs the examples of pydantic-ai-harness's Code Mode document, each file as the document has it,
in a Python with pydantic-ai-harness[codemode] (not corral), and prints what each run gives.

The model is Pydantic AI's `FunctionModel`, put in place of the examples' Anthropic model with
`agent.override(model=...)` as Pydantic AI's testing guide does it (no request leaves the
machine); it calls `run_code` with the code the document shows, then with the code of the
document's other claims (retries, REPL state, `restart`, the Sandbox Restrictions on clock,
environment and files, a mount's modes), on agents of its own. Code Mode's sandbox is
`$MONTY_BIN subprocess`, or, with CODE_MODE_SANDBOX set, that `ws://` URL, given to each
example's `CodeMode` as its `monty_sandbox` once the example has built it; with CODE_MODE_SANDBOX_KEY
set too, `monty_sandbox` is a function that returns a pool sending that key as its bearer token.
"""

from __future__ import annotations

import os
import runpy
import tempfile
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, models
from pydantic_ai.messages import ModelMessage, ModelResponse, RetryPromptPart, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_harness import CodeMode
from pydantic_monty import AsyncMontyWebsocket, MountDir, OSAccess

HERE = Path(__file__).parent
models.ALLOW_MODEL_REQUESTS = False
os.environ['ANTHROPIC_API_KEY'] = 'unused'  # the examples name Anthropic's model, which the override replaces


def example(name: str, **names: Any) -> dict[str, Any]:
    """The globals of example `name` once it has run, with `names` defined before it (what it uses and does not define)."""
    return runpy.run_path(str(HERE / name), init_globals=names, run_name='__main__')


def code_modes(agent: Agent) -> list[CodeMode]:
    return [capability for capability in agent.root_capability.capabilities if isinstance(capability, CodeMode)]


def run(agent: Agent, *calls: dict[str, Any], last_line: bool = False) -> Any:
    """Runs `agent` with a model that calls `run_code` with each of `calls` in turn, then answers 'done';
    prints the tools the model was offered and what each call gave back to it (of an error's text,
    with `last_line`, its last line: the exception)."""
    if sandbox := os.environ.get('CODE_MODE_SANDBOX'):
        if key := os.environ.get('CODE_MODE_SANDBOX_KEY'):
            url, headers = sandbox, {'Authorization': f'Bearer {key}'}
            sandbox = lambda: AsyncMontyWebsocket(url, connect_headers=lambda: headers)  # noqa: E731
        for capability in code_modes(agent):
            capability.monty_sandbox = sandbox

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = sum(isinstance(message, ModelResponse) for message in messages)
        if turn == 0:
            print('offered:', [tool.name for tool in info.function_tools])
        if turn < len(calls):
            return ModelResponse(parts=[ToolCallPart('run_code', calls[turn])])
        return ModelResponse(parts=[TextPart('done')])

    with agent.override(model=FunctionModel(respond)):
        result = agent.run_sync('Go.')
    for message in result.all_messages():
        for part in message.parts:
            if isinstance(part, ToolReturnPart) and part.tool_name == 'run_code':
                error = last_line and isinstance(part.content, str) and part.content.startswith('Runtime error:')
                print('returned:', repr(part.content.rpartition('\n')[2] if error else part.content))
            elif isinstance(part, RetryPromptPart) and part.tool_name == 'run_code':
                print('retry:', repr(part.content))
    return result


def search(query: str) -> list[str]:
    """The addresses of the pages found for `query`."""
    return [f'https://example.com/{query}/{n}' for n in (1, 2)]


def fetch(url: str) -> str:
    """The text of the page at `url`."""
    return f'the page at {url}'


print('# Basic Pattern, with the code the document shows the model generating')
agent = example('basic_pattern.py')['agent']
result = run(agent, {'code': (HERE / 'model_code.py').read_text()})

print('# Observability, on that run')
found = example('observability.py', result=result, ToolReturnPart=ToolReturnPart)
print('tool calls:', [(part.tool_name, part.args) for part in found['tool_calls'].values()])
print('tool returns:', [(part.tool_name, part.content) for part in found['tool_returns'].values()])

print('# Retries, REPL State and restart, on the same agent')
run(
    agent,
    {'code': "await get_weather(town='Paris')"},
    {'code': "oslo = await get_weather(city='Oslo')"},
    {'code': "oslo['condition']"},
    {'code': 'oslo', 'restart': True},
)

print('# Choose Which Tools Are Sandboxed')
example('choose_tools.py')
print('ran')
agent = example('metadata_tools.py', search=search, fetch=fetch)['agent']
run(agent, {'code': "[await fetch(url=url) for url in await search(query='corral')]"})

print('# Retries')
example('retries.py')
print('ran')

print('# Agent Specs')
os.chdir(HERE)
agent = example('agent_specs.py')['agent']
run(agent, {'code': 'sum(range(10))'})
os.chdir(HERE / 'arguments')
agent = example('agent_specs.py')['agent']
print('CodeMode:', [(capability.tools, capability.max_retries) for capability in code_modes(agent)])

print('# Sandbox Restrictions: no clock, environment or files without os_access or a mount, no approvals')
clock, environment = 'import datetime\ntype(datetime.datetime.now()).__name__', "import os\nos.getenv('API_BASE')"
files = "from pathlib import Path\n[Path(f'/{mode}/data.csv').read_text() for mode in ('overlay', 'read-only', 'read-write')]"
writes = [f"from pathlib import Path\nPath('/{mode}/summary.md').write_text('# done')" for mode in ('overlay', 'read-only', 'read-write')]
written = "from pathlib import Path\n[Path(f'/{mode}/summary.md').exists() for mode in ('overlay', 'read-only', 'read-write')]"
agent = Agent(capabilities=[CodeMode(max_retries=5)])


@agent.tool_plain(requires_approval=True)
def delete_file(path: str) -> str:
    """Deletes the file at `path`, once a person approves."""
    return f'deleted {path}'


approval = "await delete_file(path='/data/old.csv')"  # no HandleDeferredToolCalls: an error the model reads
run(agent, *({'code': code} for code in (clock, environment, files, approval)), last_line=True)
print('# with os_access and a mount of each mode')
with tempfile.TemporaryDirectory() as host:
    mounts = []
    for mode in ('overlay', 'read-only', 'read-write'):
        (Path(host) / mode).mkdir()
        (Path(host) / mode / 'data.csv').write_text(f'{mode}\n')
        mounts.append(MountDir(virtual_path=f'/{mode}', host_path=str(Path(host) / mode), mode=mode))
    code_mode = CodeMode(max_retries=5, os_access=OSAccess(environ={'API_BASE': 'https://api.example.com'}), mount=mounts)
    run(Agent(capabilities=[code_mode]), *({'code': code} for code in (clock, environment, files, *writes, written)), last_line=True)
    print('on the host:', sorted(str(path.relative_to(host)) for path in Path(host).rglob('*')))
