"""OpenTelemetry spans: a `run code` span per feed, a child per host call and per type check.

The OpenTelemetry SDK registers fork handlers that start threads in forked children, so these
tests run the application in a process of its own and read back the spans it recorded.
"""

import json
import subprocess
import sys

import pytest

APP = '''
import asyncio, json
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import corral

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

async def get_order(order_id):
    return {'id': order_id}

def fail():
    raise ValueError('no')

STUBS = 'async def get_order(order_id: str) -> dict: ...\\ndef fail() -> None: ...\\n'
CODE = "import asyncio\\nawait asyncio.gather(get_order('o1'), get_order('o2'))\\ntry:\\n    fail()\\nexcept ValueError:\\n    pass\\n"

async def main():
    async with corral.Pool() as pool:
        with trace.get_tracer('app').start_as_current_span('tool call'):
            async with pool.checkout(type_check=True, type_check_stubs=STUBS) as session:
                await session.feed_run(CODE, external_lookup={'get_order': get_order, 'fail': fail})
        async with pool.checkout() as session:
            try:
                await session.feed_run('1 / 0')
            except corral.SandboxRuntimeError:
                pass
        async with pool.checkout(type_check=True, type_check_stubs=STUBS) as session:
            try:
                await session.feed_run('get_order(1)\\nfail(2)\\nfail(x)')
            except corral.SandboxTypingError:
                pass

asyncio.run(main())
print(json.dumps([
    {
        'name': span.name,
        'id': span.context.span_id,
        'parent': span.parent.span_id if span.parent else None,
        'attributes': dict(span.attributes),
        'status': span.status.status_code.name,
        'events': [event.name for event in span.events],
    }
    for span in exporter.get_finished_spans()
]))
'''


@pytest.mark.slow
def test_feeds_host_calls_and_type_checks_make_spans():
    done = subprocess.run([sys.executable, '-c', APP], capture_output=True, text=True, timeout=120, check=True)
    spans = json.loads(done.stdout)
    names = sorted(span['name'] for span in spans)
    assert names == ['call fail', 'call get_order', 'call get_order', 'run code', 'run code', 'run code', 'tool call', 'type check', 'type check']
    by_id = {span['id']: span for span in spans}
    tool_call = next(span for span in spans if span['name'] == 'tool call')
    first_run, second_run, third_run = [span for span in spans if span['name'] == 'run code']
    assert first_run['parent'] == tool_call['id'] and second_run['parent'] is None
    assert first_run['attributes'] == {'code': "import asyncio\nawait asyncio.gather(get_order('o1'), get_order('o2'))\ntry:\n    fail()\nexcept ValueError:\n    pass\n", 'script_name': 'main.py'}
    passed, failed = [span for span in spans if span['name'] == 'type check']
    assert passed['attributes'] == {'outcome': 'passed'}
    assert by_id[failed['parent']] is third_run
    assert failed['attributes'] == {'outcome': 'failed', 'diagnostics': 5, 'rules': ['unused-awaitable', 'invalid-argument-type', 'too-many-positional-arguments', 'unresolved-reference']}
    for span in spans:
        if span['name'] in ('call fail', 'call get_order') or span is passed:
            assert by_id[span['parent']] is first_run
    fail = next(span for span in spans if span['name'] == 'call fail')
    assert fail['attributes'] == {'function': 'fail', 'args': '[]', 'kwargs': '{}'}
    assert (fail['status'], fail['events']) == ('ERROR', ['exception'])
    assert sorted(span['attributes']['args'] for span in spans if span['name'] == 'call get_order') == ["['o1']", "['o2']"]
    assert (first_run['status'], second_run['status']) == ('UNSET', 'ERROR')


OBJECT_APP = APP.split('async def get_order')[0] + '''
class Counter:
    def add(self, n):
        return n

async def main():
    async with corral.Pool() as pool:
        for _ in range(2):
            async with pool.checkout() as session:
                await session.feed_run('c = get()\\nc.add(1)', external_lookup={'get': lambda: corral.HostObject(Counter(), methods=['add'])})

asyncio.run(main())
print(json.dumps([[span.name, dict(span.attributes)] for span in exporter.get_finished_spans() if span.name.startswith('call ')]))
'''


@pytest.mark.slow
def test_a_host_objects_call_span_names_it_without_the_sessions_random_name():
    done = subprocess.run([sys.executable, '-c', OBJECT_APP], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(done.stdout) == 2 * [
        ['call get', {'function': 'get', 'args': '[]', 'kwargs': '{}'}],
        ['call <host object>.add', {'function': '<host object>.add', 'args': '[1]', 'kwargs': '{}'}],
    ]
