"""The entry points that the hosted agent-sandbox service's documents use, served by corral.

Documents written for the hosted service run on corral with their import line changed from
`import logfire` to `from corral import logfire`:

    logfire.configure()
    pool = logfire.agent_sandboxes()
    async with pool: ...

With `CORRAL_URL` set (the URL of a `corral serve`, and `CORRAL_API_KEY` when it has keys), the
pool is a `corral.RemotePool`: the sandboxes run on that server, the host functions here, as the
hosted service runs them with `LOGFIRE_API_KEY`. Without it, the sandboxes run on this machine.
"""

from __future__ import annotations

from typing import Any

from .host.pool import Pool
from .server.client import RemotePool, pool_from_environment

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


def agent_sandboxes(**pool_options: Any) -> Pool | RemotePool:
    """A `corral.RemotePool` of the server at `CORRAL_URL` (with `CORRAL_API_KEY`) when it is set,
    else a local `corral.Pool` made with `pool_options`; neither connects or starts anything until
    the first checkout (see `corral.server.client.pool_from_environment`)."""
    return pool_from_environment(**pool_options)
