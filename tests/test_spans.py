"""OpenTelemetry spans: a `run code` span per feed, a child per host call and per type check."""

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

_exporter = InMemorySpanExporter()


@pytest.fixture(scope='module')
def spans():
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_exporter))
    trace.set_tracer_provider(provider)
    return _exporter


async def test_feed_and_host_calls_make_spans(spans, pool):
    spans.clear()

    async def get_order(order_id):
        return {'id': order_id}

    def fail():
        raise ValueError('no')

    stubs = 'async def get_order(order_id: str) -> dict: ...\ndef fail() -> None: ...\n'
    async with pool.checkout(type_check=True, type_check_stubs=stubs) as session:
        code = "import asyncio\nawait asyncio.gather(get_order('o1'), get_order('o2'))\ntry:\n    fail()\nexcept ValueError:\n    pass\n"
        await session.feed_run(code, external_lookup={'get_order': get_order, 'fail': fail})
    finished = {span.name: span for span in spans.get_finished_spans()}
    assert sorted(span.name for span in spans.get_finished_spans()) == ['call fail', 'call get_order', 'call get_order', 'run code', 'type check']
    run = finished['run code']
    assert run.attributes['code'] == code
    for span in spans.get_finished_spans():
        if span.name != 'run code':
            assert span.parent.span_id == run.context.span_id
    call = finished['call fail']
    assert call.attributes['function'] == 'fail'
    assert call.status.status_code == trace.StatusCode.ERROR
    assert [event.name for event in call.events] == ['exception']
    assert finished['call get_order'].attributes['args'] in ("['o1']", "['o2']")


async def test_spans_nest_under_the_callers_span(spans, pool):
    spans.clear()
    tracer = trace.get_tracer('app')
    with tracer.start_as_current_span('tool call') as outer:
        async with pool.checkout() as session:
            await session.feed_run('1')
    run = next(span for span in spans.get_finished_spans() if span.name == 'run code')
    assert run.parent.span_id == outer.get_span_context().span_id
