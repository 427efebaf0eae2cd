"""The documents' three examples, run through `corral serve` with only their imports changed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from test_seeds import BILLING_OUTPUT, CODE_TOOL_OUTPUT


@pytest.mark.parametrize(('module', 'expected'), [('corral.examples.code_tool_main', CODE_TOOL_OUTPUT), ('corral.examples.billing_main', BILLING_OUTPUT)])
def test_document_example_through_the_server(server, module, expected):
    env = {**os.environ, 'CORRAL_URL': server.url}
    done = subprocess.run([sys.executable, '-m', module], capture_output=True, text=True, timeout=120, check=False, env=env)
    assert (done.stdout, done.stderr, done.returncode) == (expected, '', 0)


async def test_code_mode_weather_example_through_the_server(server, monkeypatch):
    pytest.importorskip('pydantic_ai')
    from integrations.scripted_model import Script, answers
    from integrations.test_code_mode import WEATHER_SCRIPT, weather_agent

    monkeypatch.setenv('CORRAL_URL', server.url)
    script = Script(WEATHER_SCRIPT)
    result = await weather_agent(script.model).run('Weather in Paris and Tokyo, in Celsius?')
    assert answers(result.all_messages()) == [{'paris': 22.2, 'tokyo': 22.2}]
