"""The `corral serve` command: the app of `corral.server.app` on uvicorn.

    corral serve [--host 127.0.0.1] [--port 8765] [--store sqlite:///PATH|postgresql://...]
                 [--max-frame BYTES] [--max-outbox BYTES] [--drain-grace SECONDS] [--lease-ttl SECONDS] [--ssl-keyfile KEY --ssl-certfile CERT] [--skip-layers LAYER,...]

With no options it serves on loopback only, one tenant, sessions stored in the embedded SQLite
store. On SIGTERM it drains (`CorralServer.drain`): it takes no new sessions, gives running feeds
`--drain-grace` seconds, and sends every client on to another replica. TLS: give uvicorn's `--ssl-keyfile`/`--ssl-certfile` (clients then use `wss://`), or
terminate TLS at an ingress or load balancer in front of plain `ws://`.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import sys
from typing import Any

from ..errors import SandboxInsecureError
from ..integrations._common import add_skip_layers
from . import protocol as p

__all__ = ['main', 'DEFAULT_PORT', 'DRAIN_GRACE']

#: The port `corral serve` listens on by default.
DEFAULT_PORT = 8765

#: Seconds, on SIGTERM, that the feeds running get to end (`corral serve --drain-grace`); give the
#: pod's `terminationGracePeriodSeconds` more than this.
DRAIN_GRACE = 20.0


def _loopback(host: str) -> bool:
    if host == 'localhost':
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def main(argv: list[str]) -> int:
    """Run `corral serve` until SIGINT or SIGTERM; returns the exit status."""
    try:
        import uvicorn

        from .app import MAX_OUTBOX, create_app
    except ImportError as error:
        print(f'corral serve: error: the server needs its extra ({error}): pip install "corral[server]"', file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(prog='corral serve', description='Serve corral sandboxes over WebSocket; host functions run in each client.')
    parser.add_argument('--host', default='127.0.0.1', help='address to listen on (default: 127.0.0.1, loopback only)')
    parser.add_argument('--port', type=int, default=DEFAULT_PORT, help=f'port to listen on (default: {DEFAULT_PORT})')
    parser.add_argument('--store', metavar='URL', help='session store: sqlite:///PATH or postgresql://... (default: the embedded SQLite store)')
    parser.add_argument('--max-frame', type=int, default=p.MAX_FRAME, metavar='BYTES', help=f'largest frame taken from a client (default: {p.MAX_FRAME})')
    parser.add_argument('--max-outbox', type=int, default=MAX_OUTBOX, metavar='BYTES', help=f'bytes held for a client that does not read before it is cut off (default: {MAX_OUTBOX})')
    parser.add_argument('--drain-grace', type=float, default=DRAIN_GRACE, metavar='SECONDS', help=f'on SIGTERM, seconds the feeds running get to end before their sessions move elsewhere (default: {DRAIN_GRACE:g})')
    parser.add_argument('--lease-ttl', type=float, default=30.0, metavar='SECONDS', help="seconds a stored session's lease outlives a replica that died holding it (default: 30)")
    parser.add_argument('--ssl-keyfile', metavar='FILE', help="TLS private key (uvicorn's option); clients connect with wss://")
    parser.add_argument('--ssl-certfile', metavar='FILE', help="TLS certificate (uvicorn's option)")
    parser.add_argument('--log-level', default='warning', help="uvicorn's log level (default: warning)")
    add_skip_layers(parser)
    args = parser.parse_args(argv)
    if not _loopback(args.host):
        print(
            f'corral serve: error: refusing to serve on {args.host}, beyond this machine, with no API keys: '
            'anyone who can reach it could run code as this server; serve on 127.0.0.1 behind an authenticating proxy',
            file=sys.stderr,
        )
        return 2
    from ..host.pool import Pool

    pool = Pool(store=args.store, skip_layers=args.skip_layers, lease_ttl=args.lease_ttl)
    app = create_app(pool=pool, max_frame=args.max_frame, max_outbox=args.max_outbox)
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        ws_max_size=args.max_frame + 1024 * 1024,  # frames past max_frame get the app's error; far past it, uvicorn's close
        ws_per_message_deflate=False,
        lifespan='on',
        log_level=args.log_level,
        ssl_keyfile=args.ssl_keyfile,
        ssl_certfile=args.ssl_certfile,
    )
    corral = app.state.corral

    class Server(uvicorn.Server):
        async def shutdown(self, sockets: Any = None) -> None:
            for listener in self.servers:  # no new connections: they go to other replicas
                listener.close()
            await corral.drain(args.drain_grace)
            await super().shutdown(sockets)

    server = Server(config)

    async def run() -> None:
        await pool.start()
        try:
            await server.serve()
        finally:
            await pool.aclose()

    try:
        asyncio.run(run())
    except SandboxInsecureError as error:
        print(error.display(), file=sys.stderr)
        return 1
    return 0
