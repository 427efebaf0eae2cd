"""The `corral serve` command: the app of `corral.server.app` on uvicorn.

    corral serve [--host 127.0.0.1] [--port 8765] [--store sqlite:///PATH|postgresql://...]
                 [--max-frame BYTES] [--ssl-keyfile KEY --ssl-certfile CERT] [--skip-layers LAYER,...]

With no options it serves on loopback only, one tenant, sessions stored in the embedded SQLite
store. TLS: give uvicorn's `--ssl-keyfile`/`--ssl-certfile` (clients then use `wss://`), or
terminate TLS at an ingress or load balancer in front of plain `ws://`.
"""

from __future__ import annotations

import argparse
import ipaddress
import sys

from ..errors import SandboxInsecureError
from ..integrations._common import add_skip_layers
from . import protocol as p

__all__ = ['main', 'DEFAULT_PORT']

#: The port `corral serve` listens on by default.
DEFAULT_PORT = 8765


def _loopback(host: str) -> bool:
    if host == 'localhost':
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def main(argv: list[str]) -> int:
    """Run `corral serve` until SIGINT or SIGTERM; returns the exit status."""
    parser = argparse.ArgumentParser(prog='corral serve', description='Serve corral sandboxes over WebSocket; host functions run in each client.')
    parser.add_argument('--host', default='127.0.0.1', help='address to listen on (default: 127.0.0.1, loopback only)')
    parser.add_argument('--port', type=int, default=DEFAULT_PORT, help=f'port to listen on (default: {DEFAULT_PORT})')
    parser.add_argument('--store', metavar='URL', help='session store: sqlite:///PATH or postgresql://... (default: the embedded SQLite store)')
    parser.add_argument('--max-frame', type=int, default=p.MAX_FRAME, metavar='BYTES', help=f'largest frame taken from a client (default: {p.MAX_FRAME})')
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
    try:
        import uvicorn
    except ImportError:
        print('corral serve: error: the server needs its extra: pip install "corral[server]"', file=sys.stderr)
        return 2
    from ..host.pool import Pool
    from .app import create_app

    pool = Pool(store=args.store, skip_layers=args.skip_layers)
    app = create_app(pool=pool)
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
    app.state.corral.max_frame = args.max_frame
    server = uvicorn.Server(config)

    async def run() -> None:
        await pool.start()
        try:
            await server.serve()
        finally:
            await pool.aclose()

    import asyncio

    try:
        asyncio.run(run())
    except SandboxInsecureError as error:
        print(error.display(), file=sys.stderr)
        return 1
    return 0
