"""The `corral` command.

    corral run SCRIPT|- [--stubs FILE.pyi] [--functions MODULE] [--[no-]type-check] [--limits NAME=VALUE,...]
               [--mount HOST_DIR:PATH[:MODE] ...] [--env NAME[=VALUE] ...] [--clock] [--packages NAME,...] [--skip-layers LAYER,...]
    corral --version
    corral demo [--billing] [--skip-layers LAYER,...]
    corral mcp [--functions MODULE] [--upstream 'COMMAND ...'] [--transport stdio|http] [--skip-layers LAYER,...] ...
    corral keys create|list|revoke ...; corral tenants set|list ...; corral sessions list|delete|expire ...   (see corral.server.admin)
    corral serve [--host 127.0.0.1] [--port 8765] [--store URL] ...   (see corral.server.serve)

`run` prints the repr of the script's result on stdout (the assigned value when the script ends
with an assignment, as the tools return it) and exits 0; on a sandbox error it prints the error's
display text on stderr and exits 1; bad usage (and stubs that do not fit) exits 2. Every command
refuses to run where a lockdown layer is missing (the display text of `SandboxInsecureError`,
exit 1) unless `--skip-layers` names it, and warns on stderr when it does. A closed standard output
(`corral demo | head`) ends a command quietly.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import importlib
import importlib.util
import inspect
import os
import re
import runpy
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from .errors import CorralError, SandboxInsecureError, StubError
from .host.os_access import Mount, OsAccess
from .host.pool import Pool
from .host.session import print_to_host
from .integrations._common import add_packages, add_skip_layers, corral_version, warn_skipped_layers
from .limits import Limits
from .server import admin
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


#: Units of the sizes `--limits` takes (`memory=256MiB`): bytes per unit.
_SIZE_UNITS = {'': 1, 'b': 1, 'kb': 1000, 'mb': 1000**2, 'gb': 1000**3, 'kib': 1024, 'mib': 1024**2, 'gib': 1024**3}
_SIZES = ('memory', 'output', 'code_size', 'stub_size', 'type_check_memory', 'value_size')
_SIZE_RE = re.compile(r'^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$', re.IGNORECASE)


def parse_limits(specs: list[str]) -> Limits:
    """`Limits` from `--limits` values, each `NAME=VALUE[,NAME=VALUE...]` (the later wins).

    NAME is a field of `corral.Limits`; VALUE is a number of seconds (`wall_time`, `cpu_time`,
    `grace`), of bytes with an optional unit (`memory`, `output`, `code_size`, `stub_size`, `type_check_memory`,
    `value_size`: `256MiB`, `1GB`, `4096`), a count (`recursion`, `host_calls`, `value_items`), or `none` to turn the limit off. Raises `ValueError` naming what is wrong.
    """
    fields = {field.name: field for field in dataclasses.fields(Limits)}
    values: dict[str, Any] = {}
    for spec in specs:
        for item in spec.split(','):
            name, equals, text = (part.strip() for part in item.partition('='))
            if not equals or name not in fields:
                raise ValueError(f'--limits takes NAME=VALUE pairs separated by commas, NAME one of {", ".join(fields)}; not {item.strip()!r}')
            annotation = str(fields[name].type)
            if text.lower() == 'none':
                if 'None' not in annotation:
                    raise ValueError(f'--limits: {name} cannot be turned off')
                values[name] = None
                continue
            match = _SIZE_RE.match(text)
            unit = match[2].lower() if match else ''
            if match is None or unit not in (_SIZE_UNITS if name in _SIZES else ('', 's')):
                what = 'a number of bytes, with an optional unit (KiB, MiB, GiB, KB, MB, GB)' if name in _SIZES else 'a number' + (' of seconds' if 'float' in annotation or name == 'cpu_time' else '')
                raise ValueError(f'--limits: {name} takes {what}, or none; not {text!r}')
            number = float(match[1]) * (_SIZE_UNITS[unit] if name in _SIZES else 1)
            if 'float' not in annotation and number != int(number):
                raise ValueError(f'--limits: {name} takes a whole number; not {text!r}')
            values[name] = number if 'float' in annotation else int(number)
    return Limits(**values)


def _mount(text: str) -> Mount:
    """One `--mount HOST_DIR:PATH[:MODE]` (MODE: overlay, the default; read-only; read-write)."""
    host_dir, _, rest = text.partition(':')
    path, _, mode = rest.partition(':')
    if not host_dir or not path:
        raise argparse.ArgumentTypeError(f'takes HOST_DIR:PATH[:MODE] (e.g. ./reports:/data:read-only); not {text!r}')
    try:
        return Mount(host_dir, path, mode or 'overlay')  # type: ignore[arg-type]
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _variable(text: str) -> tuple[str, str]:
    """One `--env NAME=VALUE`, or `--env NAME` for the value NAME has here."""
    name, equals, value = text.partition('=')
    if not name:
        raise argparse.ArgumentTypeError(f'takes NAME=VALUE, or NAME for its value here; not {text!r}')
    if not equals:
        if name not in os.environ:
            raise argparse.ArgumentTypeError(f'{name} is not set here; give it a value: --env {name}=VALUE')
        value = os.environ[name]
    return name, value


async def _run(args: argparse.Namespace) -> int:
    from .integrations._common import run_script, value_repr

    if args.script == '-':
        code, script_name = sys.stdin.read(), 'main.py'
    else:
        try:
            code = Path(args.script).read_text()
        except OSError as error:
            raise _UsageError(f'cannot read {args.script}: {error.strerror}') from None
        script_name = Path(args.script).name
    try:
        limits = parse_limits(args.limits)
    except ValueError as error:
        raise _UsageError(str(error)) from None
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
    # on by default where there is something to check against (stubs are only read by the check), as the tools do
    type_check = args.type_check if args.type_check is not None else stubs is not None
    os_access = OsAccess(environ=dict(args.env) if args.env else None, clock=args.clock) if args.env or args.clock else None
    try:
        async with Pool(warm_workers=0, skip_layers=args.skip_layers, packages=args.packages) as pool:
            async with pool.checkout(
                type_check=type_check, type_check_stubs=stubs, script_name=script_name, limits=limits, os_access=os_access, mounts=args.mount
            ) as session:
                outcome = await run_script(session, code, functions, print_callback=print_to_host)
    except StubError as error:
        raise _UsageError(str(error)) from None
    except CorralError as error:  # before any script ran: a lockdown layer missing
        print(error.display(), file=sys.stderr)
        return 1
    if outcome.error is not None:
        print(outcome.error.display(), file=sys.stderr)
        return 1
    print(value_repr(outcome.value) if isinstance(outcome.value, str) else bounded_repr(outcome.value))
    return 0


async def _check_demo(skip: frozenset[str]) -> None:
    async with Pool(warm_workers=0, skip_layers=skip) as pool:
        await pool.start()


def _demo(args: argparse.Namespace) -> int:
    """Run an example; its pools (made by `corral.logfire.agent_sandboxes`) get `--skip-layers`."""
    from . import logfire

    try:
        asyncio.run(_check_demo(args.skip_layers))
    except SandboxInsecureError as error:
        print(error.display(), file=sys.stderr)
        return 1
    make_pool = logfire.agent_sandboxes
    logfire.agent_sandboxes = functools.partial(make_pool, skip_layers=args.skip_layers)
    try:
        runpy.run_module('corral.examples.billing_main' if args.billing else 'corral.examples.code_tool_main', run_name='__main__')
    finally:
        logfire.agent_sandboxes = make_pool
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = argparse.ArgumentParser(prog='corral', description='Run Python scripts in a corral sandbox.')
    parser.add_argument('--version', action='version', version=f'corral {corral_version()}')
    commands = parser.add_subparsers(dest='command', required=True)
    run = commands.add_parser('run', help='run a script and print the repr of its last expression')
    run.add_argument('script', help="the Python script to run ('-': read it from standard input)")
    run.add_argument('--stubs', metavar='FILE.pyi', help='stubs of the host functions; the script is checked against them (unless --no-type-check)')
    run.add_argument('--functions', metavar='MODULE', help='module (dotted name or path) whose public functions the script may call (checked against their stubs)')
    run.add_argument(
        '--type-check', action=argparse.BooleanOptionalAction, default=None,
        help='check the script with ty before running it (default: on with --functions or --stubs, as the tools and the demo do)',
    )
    run.add_argument(
        '--mount', type=_mount, action='append', default=[], metavar='HOST_DIR:PATH[:MODE]',
        help="a host folder the script sees at PATH; MODE: overlay (the default: writes stay in the sandbox, none reach the host), read-only, read-write",
    )
    run.add_argument('--env', type=_variable, action='append', default=[], metavar='NAME[=VALUE]', help="an environment variable the script's os.environ has (NAME alone: its value here)")
    run.add_argument('--clock', action='store_true', help="let the script read the host's clock (datetime.now(), time.time()); without it the clock is refused")
    add_packages(run)
    add_skip_layers(run)
    run.add_argument(
        '--limits', metavar='NAME=VALUE,...', action='append', default=[],
        help='limits of the sandbox, e.g. wall_time=5,memory=256MiB (fields of corral.Limits; none turns one off)',
    )
    demo = commands.add_parser('demo', help="run the documents' example: a run_code tool tested without a model")
    demo.add_argument('--billing', action='store_true', help='run the billing-module example instead')
    add_skip_layers(demo)
    commands.add_parser('mcp', help='serve run_code over MCP (corral mcp --help for its options)', add_help=False)
    admin.add_commands(commands)
    commands.add_parser('serve', help='serve sandboxes over WebSocket to RemotePool clients (corral serve --help)', add_help=False)
    argv = sys.argv[1:] if argv is None else argv
    try:
        return _main(parser, argv)
    except BrokenPipeError:  # the reader of standard output left (`corral demo | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's flush does not fail again
        return 1


def _main(parser: argparse.ArgumentParser, argv: list[str]) -> int:
    if argv[:1] == ['mcp']:  # its options are its own (the `mcp` extra is imported only here)
        from .integrations.mcp import main as mcp_main

        return mcp_main(argv[1:])
    if argv[:1] == ['serve']:  # so is the server's (the `server` extra)
        from .server.serve import main as serve_main

        return serve_main(argv[1:])
    args = parser.parse_args(argv)
    if args.command in ('run', 'demo'):
        warn_skipped_layers('corral', args.skip_layers)
    try:
        if args.command == 'demo':
            return _demo(args)
        if args.command in ('keys', 'tenants', 'sessions'):
            return asyncio.run(admin.run(args))
        return asyncio.run(_run(args))
    except _UsageError as error:
        print(f'corral: error: {error}', file=sys.stderr)
        return 2


if __name__ == '__main__':
    sys.exit(main())
