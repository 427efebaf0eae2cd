"""The entry points that the hosted agent-sandbox service's documents use, served by corral.

Documents written for the hosted service run on corral with their import line changed from
`import logfire` to `from corral import logfire`:

    logfire.configure()
    pool = logfire.agent_sandboxes()
    async with pool: ...

corral runs the sandboxes on this machine instead of a remote service, so there is no API key.
"""

from __future__ import annotations

from typing import Any

from .host.pool import Pool

__all__ = ['configure', 'agent_sandboxes']


def configure(*, console: bool = False) -> None:
    """Set up tracing for the `run code` spans corral emits.

    corral emits spans through the OpenTelemetry API, to whatever tracer provider the application
    configured. With `console=True` (and `opentelemetry-sdk` installed), this installs a tracer
    provider that prints finished spans to stdout. Otherwise it changes nothing.
    """
    if not console:
        return
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(provider)


def agent_sandboxes(**pool_options: Any) -> Pool:
    """A `corral.Pool` (it starts nothing until the first checkout); options are those of `Pool`."""
    return Pool(**pool_options)
