"""What a script may reach on the host through `CodeMode` and `CodeTool` (mounts, `os_access`), and
`CodeMode(dynamic_catalog=True)`: the functions' stubs in the instructions, not the tool description."""

from __future__ import annotations

import os
from typing import Any

import pytest

pytest.importorskip('pydantic_ai')

from pydantic_ai import Agent, RunContext
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelRequest
from pydantic_ai.models.function import FunctionModel

from corral import Limits, Mount, OsAccess
from corral.integrations import CodeTool
from corral.integrations._common import sandbox_limits_text
from corral.pydantic_ai import CodeMode
from cpython_carets import carets

from .scripted_model import Script, answers


def code_mode_agent(model: FunctionModel, **code_mode: Any) -> Agent[None, str]:
    agent = Agent(model, capabilities=[CodeMode(**code_mode)])

    @agent.tool_plain
    def get_weather(city: str) -> dict:
        return {'city': city, 'temp_f': 72}

    return agent


@pytest.fixture
def reports(tmp_path):
    folder = tmp_path / 'reports'
    folder.mkdir()
    (folder / 'q1.txt').write_text('revenue: 42\n')
    return folder


READ_ONLY_WRITE = (
    'The script failed: Traceback (most recent call last):\n'
    '  File "main.py", line 1, in <module>\n'
    "    open('/data/summary.txt', 'w').write('x')\n"
    + carets("open('/data/summary.txt', 'w').write('x')", 'open')
    + "OSError: [Errno 30] Read-only file system: '/data/summary.txt'"
)


async def test_read_only_mount_reads_and_refuses_writes(reports):
    script = Script(
        "open('/data/q1.txt').read()",
        "open('/data/summary.txt', 'w').write('x')",
        "text = open('q1.txt').read()\nint(text.split(':')[1])",
    )
    agent = code_mode_agent(script.model, mount=Mount(reports, '/data', mode='read-only'))
    result = await agent.run('x')
    assert answers(result.all_messages()) == [
        'revenue: 42\n',
        ('retry', READ_ONLY_WRITE),
        42,
    ]
    assert sorted(os.listdir(reports)) == ['q1.txt']
    description = script.description()
    assert '- The script runs in an isolated process with no network, no subprocesses and no environment variables.' in description
    assert '- Files under /data (read-only) are available. Other paths cannot be opened. Relative paths start at /data.' in description
    assert 'clock' not in description
    assert 'These builtins are not available: eval,' in description  # `open` works here


async def test_overlay_mount_writes_stay_in_the_sandbox(reports):
    script = Script(
        "from pathlib import Path\nPath('/data/q1.txt').write_text('revenue: 0\\n')\nPath('/data/new.txt').write_text('made')\nsorted(p.name for p in Path('/data').iterdir())",
        "[open('/data/q1.txt').read(), open('/data/new.txt').read()]",  # the same run: the same sandbox
    )
    result = await code_mode_agent(script.model, mounts=Mount(reports, '/data')).run('x')  # CodeTool's name; `mount` too
    assert answers(result.all_messages()) == [['new.txt', 'q1.txt'], ['revenue: 0\n', 'made']]
    assert (reports / 'q1.txt').read_text() == 'revenue: 42\n'
    assert sorted(os.listdir(reports)) == ['q1.txt']
    assert '- Files under /data (writable, but writes stay in the sandbox) are available.' in script.description()


async def test_read_write_mount_and_several_mounts(reports, tmp_path):
    out = tmp_path / 'out'
    out.mkdir()
    script = Script("open('/out/copy.txt', 'w').write(open('/data/q1.txt').read())")
    agent = code_mode_agent(script.model, mount=[Mount(reports, '/data', mode='read-only'), Mount(out, '/out', mode='read-write')])
    result = await agent.run('x')
    assert answers(result.all_messages()) == [12]
    assert (out / 'copy.txt').read_text() == 'revenue: 42\n'
    assert (
        '- Files under /data (read-only) and /out (writable; writes are saved on the host) are available. '
        'Other paths cannot be opened. Relative paths start at /data.'
    ) in script.description()


async def test_os_access_environ():
    script = Script("import os\n[os.environ['REGION'], os.getenv('HOME'), open('/etc/hostname').read()]", "import os\nos.environ['REGION']")
    result = await code_mode_agent(script.model, os_access=OsAccess(environ={'REGION': 'eu'})).run('x')
    assert answers(result.all_messages()) == [
        (
            'retry',
            'The script failed: Traceback (most recent call last):\n'
            '  File "main.py", line 2, in <module>\n'
            "    [os.environ['REGION'], os.getenv('HOME'), open('/etc/hostname').read()]\n"
            + carets("[os.environ['REGION'], os.getenv('HOME'), open('/etc/hostname').read()]", 'open')
            + "PermissionError: [Errno 13] Permission denied (the host has not granted file access; the host grants it "
            "with checkout(mounts=[Mount(host_dir, sandbox_path)])): '/etc/hostname'",
        ),
        'eu',
    ]
    description = script.description()
    assert '- The script runs in an isolated process with no network, no files and no subprocesses.' in description
    assert '- These environment variables can be read with os.environ or os.getenv: REGION.' in description
    assert 'Files under' not in description and 'clock' not in description


async def test_nothing_granted_by_default():
    script = Script("import os\nos.environ['REGION']", '1')
    result = await code_mode_agent(script.model).run('x')
    assert answers(result.all_messages()) == [
        (
            'retry',
            'The script failed: Traceback (most recent call last):\n'
            '  File "main.py", line 2, in <module>\n'
            "    os.environ['REGION']\n"
            '    ~~~~~~~~~~^^^^^^^^^^\n'
            'PermissionError: the host has not granted access to environment variables; the host grants it with '
            'checkout(os_access=OsAccess(environ={...}))',
        ),
        1,
    ]
    assert (
        '- The script runs in an isolated process with no network, no files, no subprocesses and no environment '
        'variables. Only a subset of Python is available.'
    ) in script.description()


async def test_clock_is_stated_only_when_granted():
    import datetime

    moment = datetime.datetime(2024, 5, 6, 7, 8, tzinfo=datetime.timezone.utc)
    script = Script('import datetime\ndatetime.date.today().isoformat()')
    result = await code_mode_agent(script.model, os_access=OsAccess(clock=lambda: moment)).run('x')
    assert answers(result.all_messages()) == ['2024-05-06']
    assert '- The clock is available: datetime.datetime.now(), datetime.date.today() and time.time().' in script.description()
    assert 'clock' not in sandbox_limits_text(Limits())
    assert 'clock' not in sandbox_limits_text(Limits(), os_access=OsAccess(environ={}))


CATALOG = '''\
## Functions for run_code

Scripts run with the `run_code` tool can call these functions (already defined, do not import them):

```python
async def get_weather(city: str) -> dict:
    ...
```'''


async def test_dynamic_catalog_puts_the_stubs_in_the_instructions():
    script = Script("(await get_weather(city='Oslo'))['temp_f']", 'await get_weather(city=1)')
    agent = code_mode_agent(script.model, dynamic_catalog=True)
    result = await agent.run('x')
    assert [info.instructions for info in script.infos] == [CATALOG] * 3
    request = result.all_messages()[0]
    assert isinstance(request, ModelRequest) and request.instructions == CATALOG
    description = script.description()
    assert 'get_weather' not in description and '```python' not in description
    assert (
        'The script can call the functions listed in the instructions under "Functions for run_code"; '
        '`await` the `async` ones'
    ) in description
    assert '- Every script is type-checked against the signatures in the instructions before it runs' in description
    assert 'make at most 100 function calls' in description
    (answer, type_error) = answers(result.all_messages())
    assert answer == 72
    assert type_error[1].startswith('The script did not run, because it has type errors:\nerror[invalid-argument-type]')

    # a second run gets its own catalog; without the option, the stubs stay in the description
    script.infos.clear()
    await agent.run('again')
    assert script.infos[0].instructions == CATALOG
    plain = Script('1')
    await code_mode_agent(plain.model).run('x')
    assert plain.infos[0].instructions is None
    assert 'async def get_weather(city: str) -> dict:' in plain.description()


async def test_dynamic_catalog_follows_the_tools_and_keeps_other_instructions():
    async def only_later(ctx: RunContext[None], tool_def: Any) -> Any:
        return tool_def if ctx.run_step > 1 else None

    script = Script('x = 1', 'await late()')
    agent = Agent(script.model, instructions='Be brief.', capabilities=[CodeMode(dynamic_catalog=True)])

    @agent.tool_plain(prepare=only_later)
    def late() -> str:
        return 'here'

    result = await agent.run('x')
    assert script.infos[0].instructions == (
        'Be brief.\n\n## Functions for run_code\n\n'
        'Scripts run with the `run_code` tool have no functions to call at the moment.'
    )
    assert script.infos[1].instructions == (
        'Be brief.\n\n## Functions for run_code\n\n'
        'Scripts run with the `run_code` tool can call these functions (already defined, do not import them):\n\n'
        '```python\nasync def late() -> str:\n    ...\n```'
    )
    assert script.description(0) == script.description(1)  # the tool description does not change
    assert answers(result.all_messages())[-1]['result'] == 'here'


async def test_agent_spec_with_dynamic_catalog(tmp_path):
    spec = tmp_path / 'agent.yaml'
    spec.write_text('model: test\ncapabilities:\n  - CodeMode:\n      dynamic_catalog: true\n      max_retries: 2\n')

    def get_weather(city: str) -> dict:
        return {'city': city, 'temp_f': 50}

    script = Script("(await get_weather(city='Rome'))['temp_f']")
    agent = Agent.from_file(spec, custom_capability_types=[CodeMode], model=script.model, tools=[get_weather])
    result = await agent.run('x')
    assert answers(result.all_messages()) == [50]
    assert script.infos[0].instructions == CATALOG
    assert 'get_weather' not in script.description()
    (code_mode,) = [cap for cap in agent.root_capability.capabilities if isinstance(cap, CodeMode)]
    assert (code_mode.dynamic_catalog, code_mode.os_access, code_mode.mount) == (True, None, None)


@pytest.mark.parametrize(
    'options',
    [{'mount': {'host_dir': '/tmp', 'sandbox_path': '/data'}}, {'os_access': {'environ': {'A': 'b'}}}],
    ids=['mount', 'os_access'],
)
def test_host_access_cannot_come_from_a_spec(options):
    with pytest.raises(Exception, match=r'cannot be set in an agent spec; pass it in Python'):
        Agent.from_spec({'model': 'test', 'capabilities': [{'CodeMode': options}]}, custom_capability_types=[CodeMode])
    with pytest.raises(UserError, match=r'cannot be set in an agent spec'):
        CodeMode(**options)


# ----- CodeTool ---------------------------------------------------------------------------------


async def test_code_tool_with_a_mount(pool, reports):
    tool = CodeTool(pool=pool, mounts=Mount(reports, '/data', mode='read-only'))
    assert await tool.run("open('/data/q1.txt').read()") == "'revenue: 42\\n'"
    assert await tool.run("open('/data/summary.txt', 'w').write('x')") == READ_ONLY_WRITE
    assert await tool.run("open('/etc/passwd').read()") == (
        'The script failed: Traceback (most recent call last):\n'
        '  File "main.py", line 1, in <module>\n'
        "    open('/etc/passwd').read()\n"
        + carets("open('/etc/passwd').read()", 'open')
        + "PermissionError: [Errno 13] Permission denied (outside the folders the host mounted: /data): '/etc/passwd'"
    )
    assert '- Files under /data (read-only) are available. Other paths cannot be opened. Relative paths start at /data.' in tool.description
    assert sorted(os.listdir(reports)) == ['q1.txt']


async def test_code_tool_overlay_session_and_os_access(pool, reports):
    async with CodeTool(pool=pool, mounts=[Mount(reports, '/data')], os_access=OsAccess(environ={'REGION': 'eu'}), keep_session=True) as tool:
        assert await tool.run("import os\nopen('/data/q1.txt', 'a').write(os.environ['REGION'])") == '2'
        assert await tool.run("import os\n[open('q1.txt').read(), os.getenv('REGION')]") == "['revenue: 42\\neu', 'eu']"
        assert await tool.run("open('q1.txt').read()", restart=True) == "'revenue: 42\\n'"
    assert (reports / 'q1.txt').read_text() == 'revenue: 42\n'
    assert '- These environment variables can be read with os.environ or os.getenv: REGION.' in tool.description


def test_code_tool_refuses_what_is_not_a_grant(reports):
    with pytest.raises(TypeError, match='mounts must be corral.Mount objects, not str'):
        CodeTool(mounts=[str(reports)])
    with pytest.raises(TypeError, match='os_access must be a corral.OsAccess, not dict'):
        CodeTool(os_access={'environ': {}})  # type: ignore[arg-type]


def test_code_mode_takes_mounts_or_its_old_name_mount_not_both(reports):
    mount = Mount(reports, '/data')
    assert CodeMode(mounts=mount).mounts == CodeMode(mount=mount).mounts == mount
    assert CodeMode(mount=mount).mount is None
    with pytest.raises(UserError, match='^CodeMode takes mounts or its old name mount, not both$'):
        CodeMode(mounts=mount, mount=mount)
    with pytest.raises(UserError, match=r'^CodeMode mounts must be a corral.Mount or a sequence of them \(it cannot be set in an agent spec; pass it in Python\)$'):
        CodeMode(mount='/data')
