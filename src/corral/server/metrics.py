"""The server's operations endpoints: Prometheus metrics counted from a pool's events, and health probes.

    metrics = Metrics()
    pool = Pool(observer=metrics)
    app = Starlette(routes=[*ops_routes(metrics, ready=is_ready), ...])

`/metrics` answers in the Prometheus text format (version 0.0.4), or OpenMetrics when the scraper
asks for it, through the official `prometheus-client`; `/healthz` says the process answers; `/readyz` says whether it takes sessions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from ..errors import CorralError, SandboxStateError, SandboxStoreError, StubError
from ..host.deferred import SandboxPaused
from ..host.observer import PoolObserver
from ..host.pool import Pool

if TYPE_CHECKING:
    from .app import CorralServer

__all__ = ['FEED_BUCKETS', 'Metrics', 'READY_TIMEOUT', 'TYPE_CHECK_BUCKETS', 'error_kind', 'ops_routes', 'pool_readiness']

#: Bucket bounds of `corral_feed_seconds`, in seconds: from a trivial feed (a few ms) to the
#: longest `Limits.wall_time` a deployment would set.
FEED_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
#: Bucket bounds of `corral_type_check_seconds`, in seconds: a warm ty checks a short script in
#: milliseconds; `Limits.type_check_time` stops it at 10 s by default.
TYPE_CHECK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: Seconds `/readyz` waits for the readiness check before answering not ready: a store that hangs
#: must fail the probe, not hold it past the kubelet's own timeout (1 s by default).
READY_TIMEOUT = 0.8
#: The session id the readiness check asks the store for: no session has it (ids are made of
#: 32 hex digits), so a reachable store answers "no stored session".
_PROBE_SESSION = 'readiness-probe'


def error_kind(error: BaseException) -> str:
    """The `kind` label of an error: the corral exception's name without `Sandbox` and `Error`, in
    snake case (`SandboxTypingError` -> `'typing'`, `SandboxSessionBusyError` -> `'session_busy'`,
    `StubError` -> `'stub'`); `'cancelled'` for a cancelled feed; `'host'` for anything else (an
    `OSError` of the zygote, a bug)."""
    if isinstance(error, asyncio.CancelledError):
        return 'cancelled'
    if not isinstance(error, (CorralError, StubError)):
        return 'host'
    name = type(error).__name__.removeprefix('Sandbox').removesuffix('Error')
    return ''.join(f'_{c.lower()}' if c.isupper() else c for c in name).lstrip('_')


class Metrics(PoolObserver):
    """Prometheus metrics of one pool, counted from its events (`Pool(observer=metrics)`).

    In `registry` (default: a registry of its own, so two servers in one process, or a test,
    never share counts):

    - `corral_sessions_active` (gauge): sessions entered and not yet ended.
    - `corral_feeds_total{outcome}` (counter): feeds and resumptions that ended, by `outcome`:
      `ok` (returned a value), `paused` (on deferred host calls), `error` (raised).
    - `corral_errors_total{kind}` (counter): errors raised by feeds and checkouts, by `kind`
      (see `error_kind`: `typing`, `syntax`, `runtime`, `limit`, `worker`, `checker`, `stub`,
      `state`, `session_busy`, `store`, `insecure`, `cancelled`, `host`).
    - `corral_host_calls_total` (counter): host function calls the scripts made.
    - `corral_feed_seconds` (histogram, `FEED_BUCKETS`): wall time of each feed, type check included.
    - `corral_worker_starts_total` (counter): workers forked, for checkouts or kept warm.
    - `corral_type_check_seconds` (histogram, `TYPE_CHECK_BUCKETS`): wall time of each ty check.
    - `corral_checkpoints` and `corral_checkpoint_bytes` (gauges): the live checkpoints the pool
      keeps, and the private memory of their workers (see `CheckpointLimits`).
    - `corral_loads_total{source}` (counter): checkouts of a stored session by id and
      `load_session` calls, by where the state came from: `checkpoint` or `replay`.
    - `corral_sessions_expired_total` (counter): stored sessions the pool's retention deleted.

    And, once it watches a server (`watch`), the server's connections:

    - `corral_connections_pending` (gauge): connections that have not sent their OPEN frame yet.
    - `corral_connections_refused_total{reason}` (counter): connections refused as they were
      accepted, by `reason`: `pending_per_address`, `pending_total` (see `app.MAX_PENDING`).
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.sessions_active = Gauge('corral_sessions_active', 'Sessions entered and not yet ended.', registry=r)
        self.feeds = Counter('corral_feeds', 'Feeds (and resumptions) that ended, by outcome: ok, paused, error.', ['outcome'], registry=r)
        self.errors = Counter('corral_errors', 'Errors raised by feeds and checkouts, by kind.', ['kind'], registry=r)
        self.host_calls = Counter('corral_host_calls', 'Host function calls made by scripts.', registry=r)
        self.feed_seconds = Histogram('corral_feed_seconds', 'Wall time of a feed, type check included.', buckets=FEED_BUCKETS, registry=r)
        self.worker_starts = Counter('corral_worker_starts', 'Sandbox workers forked, for checkouts or kept warm.', registry=r)
        self.type_check_seconds = Histogram('corral_type_check_seconds', 'Wall time of a type check.', buckets=TYPE_CHECK_BUCKETS, registry=r)
        self.checkpoints = Gauge('corral_checkpoints', 'Live checkpoints kept.', registry=r)
        self.checkpoint_bytes = Gauge('corral_checkpoint_bytes', 'Private memory of the live checkpoints kept.', registry=r)
        self.loads = Counter('corral_loads', 'Checkouts of a stored session by id and load_session calls, by source: checkpoint or replay.', ['source'], registry=r)
        self.sessions_expired_total = Counter('corral_sessions_expired', 'Stored sessions deleted by the retention, untouched for longer.', registry=r)

    def watch(self, server: CorralServer) -> None:
        """Report `server`'s connections too (its `pending` and `refused` counts, read at each scrape)."""
        self.registry.register(_ConnectionCollector(server))

    def worker_started(self) -> None:
        self.worker_starts.inc()

    def session_opened(self) -> None:
        self.sessions_active.inc()

    def session_closed(self) -> None:
        self.sessions_active.dec()

    def checkout_failed(self, error: BaseException) -> None:
        self.errors.labels(error_kind(error)).inc()

    def feed_ended(self, seconds: float, error: BaseException | None) -> None:
        self.feed_seconds.observe(seconds)
        if error is None:
            self.feeds.labels('ok').inc()
        elif isinstance(error, SandboxPaused):
            self.feeds.labels('paused').inc()
        else:
            self.feeds.labels('error').inc()
            self.errors.labels(error_kind(error)).inc()

    def host_call(self, function: str) -> None:
        self.host_calls.inc()

    def type_checked(self, seconds: float, passed: bool) -> None:
        self.type_check_seconds.observe(seconds)

    def checkpoints_changed(self, count: int, memory: int) -> None:
        self.checkpoints.set(count)
        self.checkpoint_bytes.set(memory)

    def checkpoint_taken(self, used: bool) -> None:
        self.loads.labels('checkpoint' if used else 'replay').inc()
    def sessions_expired(self, count: int) -> None:
        self.sessions_expired_total.inc(count)


class _ConnectionCollector:
    """The connection metrics of `Metrics.watch`, read from the server's counts at each scrape."""

    def __init__(self, server: CorralServer) -> None:
        self._server = server

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily('corral_connections_pending', 'Connections that have not opened a session yet.', value=self._server.pending)
        refused = CounterMetricFamily(
            'corral_connections_refused', 'Connections refused as they were accepted, by reason: pending_per_address, pending_total.', labels=['reason']
        )
        for reason, count in self._server.refused.items():
            refused.add_metric([reason], count)
        yield refused


def ops_routes(metrics: Metrics, ready: Callable[[], Awaitable[bool | str]]) -> list[Route]:
    """Starlette routes for operating the server: mount them with the app's others.

    - `GET /metrics`: `metrics` in the Prometheus text format, or in OpenMetrics when the
      request's `Accept` header asks for it (`prometheus_client.exposition.choose_encoder`).
    - `GET /healthz`: 200 `ok` whenever the event loop answers (the liveness probe: a process
      that cannot answer this is restarted).
    - `GET /readyz`: 200 `ready` when `await ready()` is True, else 503 `not ready`, followed by
      why when `ready()` says it as a str instead of False (`not ready: the server is draining`):
      the readiness probe, so the Service sends new sessions only to ready replicas. `ready`
      should say why not while the pool cannot start workers, the store cannot be reached, or
      the server drains; one that raises or takes longer than `READY_TIMEOUT` seconds is not
      ready, and says so.
    """

    async def metrics_endpoint(request: Request) -> Response:
        encoder, content_type = choose_encoder(request.headers.get('accept', ''))
        return Response(encoder(metrics.registry), headers={'content-type': content_type})

    async def healthz(request: Request) -> Response:
        return PlainTextResponse('ok')

    async def readyz(request: Request) -> Response:
        try:
            async with asyncio.timeout(READY_TIMEOUT):
                answer = await ready()
        except TimeoutError:
            answer = f'the readiness check took longer than {READY_TIMEOUT:g} seconds'
        except Exception as error:
            answer = f'the readiness check failed ({type(error).__name__}: {error})'
        if answer is True:
            return PlainTextResponse('ready')
        return PlainTextResponse('not ready' if answer is False else f'not ready: {answer}', status_code=503)

    return [
        Route('/metrics', metrics_endpoint, methods=['GET']),
        Route('/healthz', healthz, methods=['GET']),
        Route('/readyz', readyz, methods=['GET']),
    ]


def pool_readiness(pool: Pool, draining: Callable[[], bool]) -> Callable[[], Awaitable[bool | str]]:
    """A readiness check for `ops_routes`: True when `draining()` is False, the pool's zygote runs
    (`pool.started`) and its store answers a read; else why not, as a str.

    A pool whose zygote is not running (it died, or was never started) is not ready; the check
    starts it in the background, so the replica becomes ready again without a checkout (none
    would come: the Service sends nothing to a replica that is not ready). The store read asks
    for a session that does not exist: `SandboxStateError` ("no stored session") means it
    answered; `SandboxStoreError` (unreachable, locked) means not ready, and its text says why.
    """
    starting: asyncio.Task[None] | None = None

    async def ready() -> bool | str:
        nonlocal starting
        if draining():
            return 'the server is draining'
        if not pool.started:
            failed = starting is not None and starting.done() and not starting.cancelled() and starting.exception()
            if starting is None or starting.done():
                starting = asyncio.get_running_loop().create_task(pool.start())
                starting.add_done_callback(lambda task: task.cancelled() or task.exception())  # seen by the next check
            if failed:
                return f'the sandbox workers cannot start: {failed}'
            return 'the sandbox workers are starting'
        try:
            await pool.store.get(_PROBE_SESSION)
        except SandboxStateError:
            return True
        except SandboxStoreError as error:
            return f'the store does not answer: {error}'
        return True

    return ready
