"""The `corral serve` command: the app of `corral.server.app` on uvicorn.

    corral serve [--host 127.0.0.1] [--port 8765] [--store sqlite:///PATH|postgresql://...]
                 [--max-frame BYTES] [--max-outbox BYTES] [--idle-timeout SECONDS] [--drain-grace SECONDS] [--lease-ttl SECONDS] [--checkpoints COUNT] [--retention DURATION] [--state-key-file FILE] [--packages numpy,pandas,matplotlib] [--ssl-keyfile KEY --ssl-certfile CERT] [--skip-layers LAYER,...]
                 [--max-pending N] [--max-pending-per-address N] [--max-limit NAME=VALUE ...]
                 [--handshake-timeout SECONDS] [--max-handshakes-per-address N] [--allow-origin ORIGIN ...]
                 [--max-mount-files N] [--max-tenant-mount-files N] [--max-tenant-mount-bytes BYTES]

With no options it serves on loopback only, sessions stored in the embedded SQLite store. Every
connection runs as the tenant of the API key it sends (`corral keys create --tenant NAME`, kept in
the store), within that tenant's quotas (`corral tenants set`); a caller without a key is let in,
as the single tenant `''`, only by a server listening on loopback in a store where no key was
ever made. On SIGTERM it drains (`CorralServer.drain`): it takes no new sessions, gives running feeds
`--drain-grace` seconds, and sends every client on to another replica. TLS: give uvicorn's `--ssl-keyfile`/`--ssl-certfile` (clients then use `wss://`), or
terminate TLS at an ingress or load balancer in front of plain `ws://`. Beside the sessions, without
a key: `/metrics` (Prometheus), `/healthz` and `/readyz` (`corral.server.metrics`). The store URL
and the state key may come from the environment instead, as a Kubernetes Secret gives them:
`CORRAL_STORE`, and `CORRAL_STATE_KEY` (hex digits) or `CORRAL_STATE_KEY_FILE`.

It logs on stderr (`--log-level`, default info): as it starts, its address, its store, how many
API keys the store holds and the lockdown layers in force (a warning when it listens beyond
loopback with no key made, or skips a layer); every refused key, quota or connection, at info.
A store it cannot use stops it before it listens, saying why (exit status 1).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from typing import Any

from ..errors import SandboxInsecureError, SandboxStateError, SandboxStoreError
from ..host.checkpoints import CheckpointLimits
from ..store.base import redact_url
from ..store.url import STORE_ENV, configured_store_url
from ..worker.zygote import LAYERS
from ..integrations._common import add_packages, add_skip_layers, is_loopback
from . import protocol as p
from .admin import parse_duration

__all__ = ['main', 'DEFAULT_PORT', 'DRAIN_GRACE']

#: The port `corral serve` listens on by default.
DEFAULT_PORT = 8765

#: Seconds, on SIGTERM, that the feeds running get to end (`corral serve --drain-grace`); give the
#: pod's `terminationGracePeriodSeconds` more than this.
DRAIN_GRACE = 20.0


def _max_limit(text: str) -> tuple[str, float]:
    """One `--max-limit NAME=VALUE`: the limit's name and its ceiling (a number, in the limit's unit)."""
    name, equals, value = text.partition('=')
    if not equals or not name.strip():
        raise argparse.ArgumentTypeError(f'{text!r} is not NAME=VALUE (e.g. memory=2147483648, wall_time=60)')
    try:
        return name.strip(), int(value)
    except ValueError:
        pass
    try:
        return name.strip(), float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f'the ceiling of {name.strip()} must be a number, not {value!r}') from None


def main(argv: list[str]) -> int:
    """Run `corral serve` until SIGINT or SIGTERM; returns the exit status."""
    try:
        import uvicorn

        from .app import (
            IDLE_TIMEOUT, MAX_MOUNT_FILES, MAX_OUTBOX, MAX_PENDING, MAX_PENDING_PER_ADDRESS, MAX_TENANT_MOUNT_BYTES, MAX_TENANT_MOUNT_FILES,
            create_app,
        )
        from .listener import HANDSHAKE_TIMEOUT, MAX_HANDSHAKES_PER_ADDRESS, WebSocketProtocol, guarded_http
    except ImportError as error:
        print(f"corral serve: error: the server needs its extra ({error}): pip install -e '.[server]' in corral's clone", file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(prog='corral serve', description='Serve corral sandboxes over WebSocket; host functions run in each client.')
    parser.add_argument('--host', default='127.0.0.1', help='address to listen on (default: 127.0.0.1, loopback only); beyond loopback every caller needs an API key')
    parser.add_argument('--port', type=int, default=DEFAULT_PORT, help=f'port to listen on (default: {DEFAULT_PORT})')
    parser.add_argument(
        '--store', metavar='URL',
        help=f'session store: sqlite:///PATH or postgresql://... (default: ${STORE_ENV}, else the embedded SQLite store)',
    )
    parser.add_argument('--max-frame', type=int, default=p.MAX_FRAME, metavar='BYTES', help=f'largest frame taken from a client (default: {p.MAX_FRAME})')
    parser.add_argument('--max-outbox', type=int, default=MAX_OUTBOX, metavar='BYTES', help=f'bytes held for a client that does not read before it is cut off (default: {MAX_OUTBOX})')
    parser.add_argument('--idle-timeout', type=float, default=IDLE_TIMEOUT, metavar='SECONDS', help=f"seconds a session waits for its client's next request before it is parked (default: {IDLE_TIMEOUT:g})")
    parser.add_argument(
        '--max-pending', type=int, default=MAX_PENDING, metavar='N',
        help=f'connections that have not opened a session yet, in all, before more are refused (default: {MAX_PENDING})',
    )
    parser.add_argument(
        '--max-pending-per-address', type=int, default=MAX_PENDING_PER_ADDRESS, metavar='N',
        help=f"connections from one client address that have not opened a session yet, before more are refused (default: {MAX_PENDING_PER_ADDRESS})",
    )
    parser.add_argument(
        '--max-limit', type=_max_limit, action='append', default=[], metavar='NAME=VALUE',
        help="a ceiling on sessions' limits (a field of corral.Limits, in its unit: bytes, seconds, items ...), higher or lower than "
        'its default; sessions may lower it, not raise it. Repeat for more limits (default: the default Limits() '
        'for memory, cpu_time, code_size, stub_size, type_check_time, type_check_memory, value_items and value_size, '
        'no ceiling for the others)',
    )
    parser.add_argument(
        '--handshake-timeout', type=float, default=HANDSHAKE_TIMEOUT, metavar='SECONDS',
        help=f'seconds a connection has to send its HTTP request (the WebSocket upgrade) before it is closed (default: {HANDSHAKE_TIMEOUT:g})',
    )
    parser.add_argument(
        '--max-handshakes-per-address', type=int, default=MAX_HANDSHAKES_PER_ADDRESS, metavar='N',
        help=f'connections from one client address that have not upgraded to a WebSocket yet, before more are refused (default: {MAX_HANDSHAKES_PER_ADDRESS})',
    )
    parser.add_argument(
        '--max-mount-files', type=int, default=MAX_MOUNT_FILES, metavar='N',
        help=f"files and folders a session's mounts may upload (default: {MAX_MOUNT_FILES})",
    )
    parser.add_argument(
        '--max-tenant-mount-files', type=int, default=MAX_TENANT_MOUNT_FILES, metavar='N',
        help=f"files and folders the mounts of one tenant's open sessions may hold together (default: {MAX_TENANT_MOUNT_FILES})",
    )
    parser.add_argument(
        '--max-tenant-mount-bytes', type=int, default=MAX_TENANT_MOUNT_BYTES, metavar='BYTES',
        help=f"bytes the mounts of one tenant's open sessions may hold together (default: {MAX_TENANT_MOUNT_BYTES})",
    )
    parser.add_argument(
        '--allow-origin', action='append', default=[], metavar='ORIGIN',
        help="a web origin (https://app.example.com) whose pages may open sessions; repeat for more. Without one, every "
        "WebSocket from a web page (one that sends an Origin header) is refused; corral's clients send none",
    )
    parser.add_argument('--drain-grace', type=float, default=DRAIN_GRACE, metavar='SECONDS', help=f'on SIGTERM, seconds the feeds running get to end before their sessions move elsewhere (default: {DRAIN_GRACE:g})')
    parser.add_argument(
        '--retention', type=parse_duration, metavar='DURATION',
        help="delete stored sessions (every tenant's) untouched for this long, with their records: seconds, or 90m, 12h, 30d (default: kept for ever)",
    )
    parser.add_argument(
        '--checkpoints', type=int, default=CheckpointLimits.count, metavar='COUNT',
        help=f"live checkpoints the server keeps, the idle workers of closed stored sessions that their next load starts in instead of a replay (default: {CheckpointLimits.count}; 0 keeps none)",
    )
    parser.add_argument('--lease-ttl', type=float, default=30.0, metavar='SECONDS', help="seconds a stored session's lease outlives a replica that died holding it (default: 30)")
    parser.add_argument(
        '--state-key-file', metavar='FILE', default=os.environ.get('CORRAL_STATE_KEY_FILE'),
        help='file holding the key (16 bytes or more) that signs session states, the same on every replica sharing the store; '
        'a PostgreSQL store needs one (default: $CORRAL_STATE_KEY_FILE, else $CORRAL_STATE_KEY in hex digits; a SQLite store keeps its own)',
    )
    add_packages(parser)
    parser.add_argument('--ssl-keyfile', metavar='FILE', help="TLS private key (uvicorn's option); clients connect with wss://")
    parser.add_argument('--ssl-certfile', metavar='FILE', help="TLS certificate (uvicorn's option)")
    parser.add_argument(
        '--log-level', default='info', choices=('critical', 'error', 'warning', 'info', 'debug', 'trace'),
        help='what is logged on stderr: info (the default) logs the start and every refusal; debug also each HTTP request',
    )
    add_skip_layers(parser)
    args = parser.parse_args(argv)
    if args.checkpoints < 0:
        parser.error(f'--checkpoints must be 0 or more, not {args.checkpoints}')
    args.store = configured_store_url(args.store)
    log = _logger(args.log_level)
    from ..host.pool import Pool
    from ..store.url import open_store
    from .keys import KeyRing
    from .metrics import Metrics, ops_routes, pool_readiness
    from .quotas import Quotas
    from .tenancy import TenantHooks, authenticator

    state_key = None
    if not args.state_key_file and os.environ.get('CORRAL_STATE_KEY'):  # as a Kubernetes Secret gives it
        try:
            state_key = bytes.fromhex(os.environ['CORRAL_STATE_KEY'].strip())
        except ValueError:
            state_key = b''
        if len(state_key) < 16:
            print('corral serve: error: CORRAL_STATE_KEY must be 32 or more hex digits (16 bytes or more; 64 digits from secrets.token_hex(32) are best)', file=sys.stderr)
            return 2
    if args.state_key_file:
        try:
            with open(args.state_key_file, 'rb') as file:
                state_key = file.read()
        except OSError as error:
            print(f'corral serve: error: cannot read --state-key-file: {error}', file=sys.stderr)
            return 2
        if len(state_key) < 16:
            print(f'corral serve: error: the state key in {args.state_key_file} is {len(state_key)} bytes; it needs 16 or more (32 random ones are best)', file=sys.stderr)
            return 2
    try:
        store = open_store(args.store)
    except (TypeError, ValueError) as error:
        print(f'corral serve: error: --store: {error}', file=sys.stderr)
        return 2
    # Every connection is its key's tenant; callers without a key only on loopback, while no key was ever made.
    keys, quotas = KeyRing(store), Quotas(store)
    metrics = Metrics()
    pool = Pool(
        store=quotas.guard(store), skip_layers=args.skip_layers, packages=args.packages, lease_ttl=args.lease_ttl, state_key=state_key, observer=metrics,
        retention=args.retention, checkpoints=CheckpointLimits(count=args.checkpoints) if args.checkpoints > 0 else None,
    )
    draining = lambda: app.state.corral.draining  # noqa: E731
    try:
        app = create_app(
            pool=pool,
            routes=ops_routes(metrics, ready=pool_readiness(pool, draining=draining)),
            authenticate=authenticator(keys, anonymous=is_loopback(args.host)),
            hooks=[TenantHooks(quotas)],
            max_frame=args.max_frame,
            max_outbox=args.max_outbox,
            idle_timeout=args.idle_timeout,
            max_pending=args.max_pending,
            max_pending_per_address=args.max_pending_per_address,
            max_limits=dict(args.max_limit),
            allowed_origins=args.allow_origin,
            max_mount_files=args.max_mount_files,
            max_tenant_mount_files=args.max_tenant_mount_files,
            max_tenant_mount_bytes=args.max_tenant_mount_bytes,
        )
        http = guarded_http(handshake_timeout=args.handshake_timeout, max_per_address=args.max_handshakes_per_address)
    except ValueError as error:
        print(f'corral serve: error: {error}', file=sys.stderr)
        return 2
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        http=http,
        ws_max_size=args.max_frame + 1024 * 1024,  # frames past max_frame get the app's error; far past it, uvicorn's close
        ws=WebSocketProtocol,
        ws_per_message_deflate=False,
        lifespan='on',
        log_level=args.log_level,
        access_log=args.log_level in ('debug', 'trace'),
        ssl_keyfile=args.ssl_keyfile,
        ssl_certfile=args.ssl_certfile,
    )
    corral = app.state.corral
    metrics.watch(corral)

    class Server(uvicorn.Server):
        async def shutdown(self, sockets: Any = None) -> None:
            for listener in self.servers:  # no new connections: they go to other replicas
                listener.close()
            await corral.drain(args.drain_grace)
            await super().shutdown(sockets)

    server = Server(config)

    async def run() -> int:
        try:
            try:  # a store that cannot be used, or no key to sign states with, stops the server before it listens
                where = redact_url(args.store) if args.store else f'the embedded SQLite store {store.path}'  # type: ignore[attr-defined]
                keys_made = len([key for key in await keys.list() if key.revoked is None])
                try:
                    await store.get(_PROBE)
                except SandboxStateError:  # there is no such session: the store answered
                    pass
                if state_key is None:
                    store.default_state_key()  # a SQLite store's own key; a PostgreSQL store has none
            except SandboxStoreError as error:
                print(f'corral serve: error: the store cannot be used: {error}', file=sys.stderr)
                return 1
            except SandboxStateError as error:  # no state key
                print(f'corral serve: error: {error} (--state-key-file, or $CORRAL_STATE_KEY in hex digits)', file=sys.stderr)
                return 2
            await pool.start()
            scheme = 'wss' if args.ssl_certfile else 'ws'
            skipped = sorted(pool.skip_layers)
            log.info(
                'serving on %s://%s:%d, sessions stored in %s%s, %d API key%s, lockdown layers: %s%s',
                scheme, args.host, args.port, where, f' (kept {args.retention:g} seconds untouched)' if args.retention else '',
                keys_made, '' if keys_made == 1 else 's',
                ', '.join(layer for layer in LAYERS if layer not in pool.skip_layers),
                f' (skipped: {", ".join(skipped)})' if skipped else '',
            )
            if skipped:
                log.warning('scripts run without the lockdown layers %s, so they are less contained (--skip-layers)', ', '.join(skipped))
            if not is_loopback(args.host) and keys_made == 0:
                log.warning(
                    'listening on %s, beyond loopback, and the store has no API key: every caller is refused until one is made '
                    '(corral keys create --tenant NAME, with this store: --store or $%s)', args.host, STORE_ENV,
                )
            await server.serve()
            return 0
        finally:
            await pool.aclose()
            await quotas.close()
            await store.close()

    try:
        return asyncio.run(run())
    except SandboxInsecureError as error:
        print(error.display(), file=sys.stderr)
        return 1


#: The id the store is asked for as the server starts: no session has it (so `get` says so).
_PROBE = 'start-probe'


def _logger(level: str) -> logging.Logger:
    """corral's logger, writing on stderr at `level` (uvicorn's names; its `trace` is debug here)."""
    log = logging.getLogger('corral')
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter('%(levelname)s: corral serve: %(message)s'))
    log.addHandler(handler)
    log.setLevel(logging.DEBUG if level == 'trace' else level.upper())
    log.propagate = False
    return logging.getLogger('corral.server')
