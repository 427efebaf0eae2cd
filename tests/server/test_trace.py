"""The server's spans continue the client's trace: `run code` sits under the caller's span.

The server runs in the same process as the client here (so one exporter sees both sides), in an
event-loop task started before the caller's span: only the `traceparent` sent over the
connection can link them. As in tests/test_spans.py, the application runs in a process of its own.
"""

from __future__ import annotations

import json
import subprocess
import sys

from .conftest import free_port

APP = '''
import asyncio, json, sys
import uvicorn
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import corral
from corral.server.app import create_app

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
PORT = int(sys.argv[1])

async def get_order(order_id):
    return {'id': order_id}

async def main():
    app = create_app(store='sqlite:///' + sys.argv[2])
    server = uvicorn.Server(uvicorn.Config(app, host='127.0.0.1', port=PORT, log_level='warning', lifespan='on'))
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
    async with corral.RemotePool(f'ws://127.0.0.1:{PORT}') as pool:
        with trace.get_tracer('app').start_as_current_span('tool call'):
            async with pool.checkout() as session:
                await session.feed_run("await get_order('o1')", external_lookup={'get_order': get_order})
    server.should_exit = True
    await serving
    spans = [
        {'name': s.name, 'trace': s.context.trace_id, 'id': s.context.span_id, 'parent': s.parent.span_id if s.parent else None}
        for s in exporter.get_finished_spans()
    ]
    print(json.dumps(spans))

asyncio.run(main())
'''


def test_run_code_span_sits_under_the_clients_span(tmp_path):
    done = subprocess.run([sys.executable, '-c', APP, str(free_port()), str(tmp_path / 'store.db')], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    spans = {span['name']: span for span in json.loads(done.stdout.splitlines()[-1])}
    tool_call, run_code, call = spans['tool call'], spans['run code'], spans['call get_order']
    assert run_code['parent'] == tool_call['id']
    assert call['parent'] == run_code['id']
    assert tool_call['trace'] == run_code['trace'] == call['trace']
    assert tool_call['parent'] is None
