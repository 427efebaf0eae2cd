"""The `corral` command.

    corral run SCRIPT [--stubs FILE.pyi] [--functions MODULE] [--type-check]
    corral demo [--billing]
    corral mcp [--functions MODULE] [--upstream 'COMMAND ...'] [--transport stdio|http] ...

`run` prints the repr of the script's result on stdout and exits 0; on a sandbox error it prints
the error's display text on stderr and exits 1; bad usage exits 2.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import inspect
import os
import runpy
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from .errors import SandboxError
from .host.pool import Pool
from .values import bounded_repr

__all__ = ['main']


class _UsageError(Exception):
    pass


def _load_module(spec: str) -> ModuleType:
    """Import MODULE given as a dotted name or a path to a .py file."""
    if spec.endswith('.py') or '/' in spec:
        path = Path(spec)
        if not path.is_file():
            raise _UsageError(f'--functions: no such file: {spec}')
        module_spec = importlib.util.spec_from_file_location(path.stem, path)
        assert module_spec is not None and module_spec.loader is not None
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[path.stem] = module
        module_spec.loader.exec_module(module)
        return module
    if '' not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` does: a module of the current folder
    try:
        return importlib.import_module(spec)
    except ImportError as error:
        raise _UsageError(f'--functions: cannot import {spec}: {error}') from None


def public_functions(module: ModuleType) -> dict[str, Callable[..., Any]]:
    """The module's public functions (defined in it, names without a leading underscore)."""
    return {
        name: value
        for name, value in vars(module).items()
        if not name.startswith('_') and inspect.isfunction(value) and value.__module__ == module.__name__
    }


async def _run(args: argparse.Namespace) -> int:
    try:
        code = Path(args.script).read_text()
    except OSError as error:
        raise _UsageError(f'cannot read {args.script}: {error.strerror}') from None
    functions: dict[str, Callable[..., Any]] = {}
    stubs = None
    if args.functions:
        from .integrations.stubs import stubs_from_functions

        functions = public_functions(_load_module(args.functions))
        stubs = stubs_from_functions(functions)
    if args.stubs:
        try:
            stubs = (stubs + '\n' if stubs else '') + Path(args.stubs).read_text()
        except OSError as error:
            raise _UsageError(f'cannot read {args.stubs}: {error.strerror}') from None
    async with Pool(warm_workers=0) as pool:
        async with pool.checkout(type_check=args.type_check, type_check_stubs=stubs, script_name=Path(args.script).name) as session:
            try:
                result = await session.feed_run(code, external_lookup=functions)
            except SandboxError as error:
                print(error.display(), file=sys.stderr)
                return 1
    print(bounded_repr(result))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = argparse.ArgumentParser(prog='corral', description='Run Python scripts in a corral sandbox.')
    commands = parser.add_subparsers(dest='command', required=True)
    run = commands.add_parser('run', help='run a script and print the repr of its last expression')
    run.add_argument('script', help='the Python script to run')
    run.add_argument('--stubs', metavar='FILE.pyi', help='stubs of the host functions, for --type-check')
    run.add_argument('--functions', metavar='MODULE', help='module (dotted name or path) whose public functions the script may call')
    run.add_argument('--type-check', action='store_true', help='check the script with ty before running it')
    demo = commands.add_parser('demo', help="run the documents' example: a run_code tool tested without a model")
    demo.add_argument('--billing', action='store_true', help='run the billing-module example instead')
    commands.add_parser('mcp', help='serve run_code over MCP (corral mcp --help for its options)', add_help=False)
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ['mcp']:  # its options are its own (the `mcp` extra is imported only here)
        from .integrations.mcp import main as mcp_main

        return mcp_main(argv[1:])
    args = parser.parse_args(argv)
    try:
        if args.command == 'demo':
            runpy.run_module('corral.examples.billing_main' if args.billing else 'corral.examples.code_tool_main', run_name='__main__')
            return 0
        return asyncio.run(_run(args))
    except _UsageError as error:
        print(f'corral: error: {error}', file=sys.stderr)
        return 2


if __name__ == '__main__':
    sys.exit(main())
