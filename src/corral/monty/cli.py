"""`corral-monty`: corral behind the clients of Monty's wire protocol.

    corral-monty subprocess     serve one parent on stdin/stdout (how pydantic_monty runs a
                                worker: MONTY_BIN=$(which corral-monty))
"""

from __future__ import annotations

import argparse
import sys

from .stdio import serve_stdio

__all__ = ['main']


def main(argv: list[str] | None = None) -> None:
    """Parse `argv` (default: the process's arguments) and run the command."""
    parser = argparse.ArgumentParser(prog='corral-monty', description="corral behind Monty's wire protocol")
    commands = parser.add_subparsers(dest='command', required=True)
    commands.add_parser('subprocess', help='serve one parent on stdin and stdout, framed (4-byte little-endian length, one protobuf message)')
    parser.parse_args(sys.argv[1:] if argv is None else argv)
    serve_stdio()
