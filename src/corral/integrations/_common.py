"""What every door into corral shares: the `run_code` description, running one script, the
texts a model reads back (results, errors, and the calls that ran before an error), and what the
command lines share (`--skip-layers`, `--packages`, the version, the warnings they print)."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import datetime
import decimal
import enum
import importlib.metadata
import ipaddress
import math
import pathlib
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import SandboxError, SandboxRuntimeError, SandboxTypingError
from ..host.os_access import Mount, OsAccess
from ..host.session import PrintCallback, Session
from ..limits import Limits, amount
from ..worker.zygote import LAYERS
from ..values import MAX_DEPTH, REPR_LIMIT, UNPACKABLE_RESULT, Image, bounded_repr, cut_text

__all__ = [
    'add_packages',
    'add_skip_layers',
    'corral_version',
    'is_loopback',
    'warn_skipped_layers',
    'images_in',
    'CallRecord',
    'ScriptOutcome',
    'run_script',
    'run_code_description',
    'sandbox_limits_text',
    'catalog_instructions',
    'mount_list',
    'error_text',
    'describe_calls',
    'json_form',
]

# ----- the description -------------------------------------------------------------------------


def _layer_names(text: str) -> frozenset[str]:
    names = frozenset(filter(None, (name.strip() for name in text.split(','))))
    unknown = sorted(names - set(LAYERS))
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown layer(s) {', '.join(unknown)}; the layers are {', '.join(LAYERS)}")
    return names


def add_skip_layers(parser: argparse.ArgumentParser) -> None:
    """Add the `--skip-layers LAYER,...` option (comma-separated names of `Pool(skip_layers=...)`;
    `args.skip_layers` is a frozenset) to a command line."""
    parser.add_argument(
        '--skip-layers',
        type=_layer_names,
        default=frozenset(),
        metavar='LAYER,...',
        help=f"lockdown layers to run without, where this machine lacks them ({', '.join(LAYERS)}); scripts are then less contained",
    )


def warn_skipped_layers(command: str, skip_layers: frozenset[str]) -> None:
    """Print on stderr, for `--skip-layers`, that scripts run less contained (nothing without it)."""
    if skip_layers:
        print(
            f"{command}: warning: scripts run without the lockdown layers {', '.join(sorted(skip_layers))}, "
            'so they are less contained (--skip-layers)',
            file=sys.stderr,
        )


def is_loopback(host: str) -> bool:
    """Whether listening on `host` (a name or an address) reaches this machine only."""
    if host == 'localhost':
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def corral_version() -> str:
    """corral's version, as installed (`importlib.metadata`); `0+unknown` when run from a source
    folder that is not installed."""
    try:
        return importlib.metadata.version('corral')
    except importlib.metadata.PackageNotFoundError:
        return '0+unknown'


def _package_names(text: str) -> tuple[str, ...]:
    from ..language.catalog import package_closure

    try:
        return package_closure(filter(None, text.split(',')))
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_packages(parser: argparse.ArgumentParser) -> None:
    """Add the `--packages NAME,...` option (`Pool(packages=...)`: numpy, pandas, matplotlib;
    `args.packages` is a tuple, with what each package needs) to a command line."""
    parser.add_argument(
        '--packages',
        type=_package_names,
        default=(),
        metavar='NAME,...',
        help="third-party packages scripts may import (numpy, pandas, matplotlib), loaded before the lockdown; pip install -e '.[data]' in corral's clone",
    )


def _stdlib_modules() -> Sequence[str]:
    try:
        from ..worker.runtime import STDLIB_MODULES
    except ImportError:  # pragma: no cover - the worker package ships with corral
        return ()
    return STDLIB_MODULES


def _missing_builtins(*, files: bool = False) -> list[str]:
    try:
        from ..language.builtins import SAFE_BUILTINS
    except ImportError:  # pragma: no cover
        return []
    notable = ('open', 'eval', 'exec', 'compile', 'input', 'globals', 'locals', 'vars', 'breakpoint')
    # `open` is the host's (files under the mounts); without a grant it only raises PermissionError
    return [name for name in notable if name not in SAFE_BUILTINS and not (files and name == 'open')]


def mount_list(mounts: Mount | Sequence[Mount] | None) -> tuple[Mount, ...]:
    """`mounts` (one, several, or None) as a tuple, each checked to be a `Mount`."""
    if mounts is None:
        return ()
    if isinstance(mounts, Mount):
        return (mounts,)
    if isinstance(mounts, (str, bytes)) or not isinstance(mounts, Sequence):
        raise TypeError(f'mounts must be a corral.Mount or a sequence of them, not {type(mounts).__name__}')
    for mount in mounts:
        if not isinstance(mount, Mount):
            raise TypeError(f'mounts must be corral.Mount objects, not {type(mount).__name__}')
    return tuple(mounts)


def _overrides(os_access: OsAccess, *names: str) -> bool:
    return any(getattr(type(os_access), name) is not getattr(OsAccess, name) for name in names)


@dataclasses.dataclass(frozen=True)
class _Access:
    """What the host granted a script, as the description states it."""

    mounts: tuple[Mount, ...] = ()
    other_files: bool = False  # an OsAccess subclass serves files outside the mounts
    environ: bool = False
    environ_names: tuple[str, ...] | None = None  # None: not known in advance (a subclass answers)
    clock: bool = False
    cwd: str | None = None

    @property
    def files(self) -> bool:
        return bool(self.mounts) or self.other_files


def _access(os_access: OsAccess | None, mounts: Mount | Sequence[Mount] | None) -> _Access:
    granted = mount_list(mounts)
    if os_access is None:
        return _Access(mounts=granted)
    environ_names: tuple[str, ...] | None = None
    environ = _overrides(os_access, 'environ', 'getenv')
    known = getattr(os_access, '_environ', None)
    if not environ and known is not None:
        environ = True
        environ_names = tuple(sorted(known))
    return _Access(
        mounts=(*os_access.mounts, *granted),
        other_files=_overrides(os_access, 'stat', 'read_file', 'write_file', 'list_dir'),
        environ=environ,
        environ_names=environ_names,
        clock=bool(getattr(os_access, '_clock', False)) or _overrides(os_access, 'now'),
        cwd=os_access.cwd,
    )


_MODE_WORDS = {
    'read-only': 'read-only',
    'overlay': 'writable, but writes stay in the sandbox',
    'read-write': 'writable; writes are saved on the host',
}


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ', '.join(items[:-1]) + ' and ' + items[-1]


def _access_lines(access: _Access) -> list[str]:
    """The bullet lines that say what the script may reach besides its functions."""
    missing = ['no network']
    if not access.files:
        missing.append('no files')
    missing.append('no subprocesses')
    if not access.environ:
        missing.append('no environment variables')
    lines = [f'- The script runs in an isolated process with {_and(missing)}. Only a subset of Python is available.']
    if access.mounts:
        folders = [f'{mount.path} ({_MODE_WORDS[mount.mode]})' for mount in access.mounts]
        text = f'- Files under {_and(folders)} are available.'
        if not access.other_files:
            text += ' Other paths cannot be opened.'
        text += f' Relative paths start at {access.cwd or access.mounts[0].path}.'
        lines.append(text)
    elif access.other_files:
        lines.append('- The host serves some files (open(), pathlib.Path, os.listdir ...).')
    if access.environ:
        if access.environ_names:
            names = ', '.join(access.environ_names)
            lines.append(f'- These environment variables can be read with os.environ or os.getenv: {names}.')
        elif access.environ_names is None:
            lines.append('- Environment variables can be read with os.environ or os.getenv.')
        else:
            lines.append('- os.environ is available, but holds no variables.')
    if access.clock:
        lines.append('- The clock is available: datetime.datetime.now(), datetime.date.today() and time.time().')
    return lines


def _size(value: int) -> str:
    for unit, size in (('GiB', 1024**3), ('MiB', 1024**2), ('KiB', 1024)):
        if value >= size and value % size == 0:
            return f'{value // size} {unit}'
    return f'{value} bytes'


def sandbox_limits_text(
    limits: Limits | None = None,
    *,
    max_calls: int | None = None,
    type_check: bool = True,
    os_access: OsAccess | None = None,
    mounts: Mount | Sequence[Mount] | None = None,
    signatures: str = 'above',
) -> str:
    """The sandbox's limits in plain words, as a bullet list for a tool description.

    `os_access` and `mounts` are what the host grants (files, environment, clock), as passed to
    `Pool.checkout`; `signatures` says where the stubs the scripts are checked against are shown.
    """
    limits = limits or Limits()
    access = _access(os_access, mounts)
    lines = _access_lines(access)
    missing = _missing_builtins(files=access.files)
    if missing:
        lines.append(f'- These builtins are not available: {", ".join(missing)}.')
    modules = _stdlib_modules()
    if modules:
        lines.append(
            f'- Only these standard library modules can be imported: {", ".join(modules)}. '
            'No third-party packages (no numpy, pandas, requests).'
        )
    lines.append(
        '- Values passed to and returned by the functions are plain data: None, bool, int, float, str, '
        'bytes, list, tuple, dict, set, datetime, Decimal and UUID values (an enum arrives as its value, a path as str).'
    )
    bounds = []
    if limits.wall_time is not None:
        bounds.append(f"run for at most {amount('wall_time', limits.wall_time)}")
    if limits.memory is not None:
        bounds.append(f'use at most {_size(limits.memory)} of memory')
    calls = max_calls if max_calls is not None else limits.host_calls
    if calls is not None:
        bounds.append(f"make at most {calls} function call{'' if calls == 1 else 's'}")
    if limits.output is not None:
        bounds.append(f'print at most {_size(limits.output)}')
    if bounds:
        lines.append('- One script may ' + ', '.join(bounds[:-1]) + (' and ' if len(bounds) > 1 else '') + bounds[-1] + '.')
    if type_check:
        lines.append(f'- Every script is type-checked against the signatures {signatures} before it runs; a script with type errors does not run.')
    return '\n'.join(lines)


def run_code_description(
    stubs: str,
    *,
    limits: Limits | None = None,
    max_calls: int | None = None,
    type_check: bool = True,
    repl: bool = False,
    modules: Mapping[str, str] | None = None,
    os_access: OsAccess | None = None,
    mounts: Mount | Sequence[Mount] | None = None,
    catalog_in_instructions: bool = False,
    tool_name: str = 'run_code',
) -> str:
    """The description of a `run_code` tool: what it does, the functions as Python stubs, the limits.

    `repl`: variables persist between calls (and `restart` resets them). `modules` maps a module the
    script imports to its stub text. `os_access`, `mounts`: what the host grants the script.
    `catalog_in_instructions`: the stubs are given in the instructions (see `catalog_instructions`),
    so the description leaves them out and does not change when the functions do.
    """
    parts = ['Run a Python script and return the value of its last expression.']
    if catalog_in_instructions:
        parts.append(
            f'The script can call the functions listed in the instructions under "Functions for {tool_name}"; `await` '
            'the `async` ones, and run several at once with `await asyncio.gather(...)`. They are already '
            'defined: do not import or redefine them.'
        )
    else:
        has_async = 'async def ' in stubs or any('async def ' in text for text in (modules or {}).values())
        if stubs.strip():
            how = (
                'The script can call these functions; `await` the `async` ones, and run several at once with '
                '`await asyncio.gather(...)`. They are already defined: do not import or redefine them.'
                if has_async
                else 'The script can call these functions. They are already defined: do not import or redefine them.'
            )
            parts.append(f'{how}\n\n```python\n{stubs.rstrip()}\n```')
    for name, text in (modules or {}).items():
        parts.append(f'The script can import the module `{name}`:\n\n```python\n# {name}.pyi\n{text.rstrip()}\n```')
    returns = (
        'End the script with the expression whose value you want back; there is no need to print it. '
        'When the script ends with an assignment, the assigned value is returned. Printed output is '
        'returned with the value. A value with no JSON form comes back as its repr.'
    )
    parts.append(returns)
    if repl:
        parts.append(
            'Variables, functions and imports persist from one call to the next. Pass `restart: true` to '
            'start again with none.'
        )
    else:
        parts.append('Each script starts with no variables from earlier calls.')
    limits_text = sandbox_limits_text(
        limits,
        max_calls=max_calls,
        type_check=type_check,
        os_access=os_access,
        mounts=mounts,
        signatures='in the instructions' if catalog_in_instructions else 'above',
    )
    parts.append('Limits of the sandbox:\n' + limits_text)
    return '\n\n'.join(parts)


def catalog_instructions(stubs: str, *, tool_name: str = 'run_code') -> str:
    """The instructions that list the functions a `run_code` script can call, as Python stubs."""
    heading = f'## Functions for {tool_name}'
    if not stubs.strip():
        return f'{heading}\n\nScripts run with the `{tool_name}` tool have no functions to call at the moment.'
    return (
        f'{heading}\n\n'
        f'Scripts run with the `{tool_name}` tool can call these functions (already defined, do not import '
        f'them):\n\n```python\n{stubs.rstrip()}\n```'
    )


# ----- host calls, as the model is told about them ---------------------------------------------


@dataclasses.dataclass
class CallRecord:
    """One call a script made to a host function: `outcome` is `'running'`, `'returned'`,
    `'raised'`, or `'refused'` (it never ran: invalid arguments, denied, no approval); `detail` the
    value returned or the error's text."""

    name: str
    arguments: Any
    outcome: str = 'running'
    detail: Any = None


#: Characters of the repr of one argument or result in a call summary.
_SHORT = 80


def _short(value: Any) -> str:
    return bounded_repr(value, limit=_SHORT)


def _call_text(record: CallRecord) -> str:
    args = record.arguments
    if isinstance(args, Mapping):
        shown = ', '.join(f'{key}={_short(value)}' for key, value in args.items())
    elif isinstance(args, tuple) and len(args) == 2 and isinstance(args[1], Mapping):
        positional = [_short(value) for value in args[0]]
        shown = ', '.join(positional + [f'{key}={_short(value)}' for key, value in args[1].items()])
    else:
        shown = _short(args)
    if record.outcome == 'returned':
        result = f'returned {_short(record.detail)}'
    elif record.outcome == 'raised':
        result = f'raised {record.detail}'
    else:
        result = 'was still running when the script stopped'
    return f'- {record.name}({shown}) {result}'


def describe_calls(records: Sequence[CallRecord], *, limit: int = 20) -> str:
    """A summary of the host calls a failed script made, or '' when it made none.

    Calls refused before they ran (invalid arguments, no approval) are left out: the script's error
    already says why, and they changed nothing.
    """
    records = [record for record in records if record.outcome != 'refused']
    if not records:
        return ''
    lines = [_call_text(record) for record in records[:limit]]
    if len(records) > limit:
        lines.append(f'- ... and {len(records) - limit} more calls')
    count = len(records)
    noun = 'call' if count == 1 else 'calls'
    return (
        f'Before the failure, the script made {count} function {noun}; whatever {"it" if count == 1 else "they"} did has happened:\n'
        + '\n'.join(lines)
        + '\nDo not repeat a call that changed something.'
    )


# ----- running a script ------------------------------------------------------------------------


@dataclasses.dataclass
class ScriptOutcome:
    """What one script did: its value (or error), what it printed, and a note about the value."""

    value: Any = None
    printed: str = ''
    note: str | None = None
    error: SandboxError | None = None


#: Expression nodes whose evaluation calls nothing of the script's (no host calls, no side effects
#: beyond attribute and item reads), so evaluating one a second time is safe.
_PURE_NODES = (
    ast.Expression, ast.Name, ast.Load, ast.Constant, ast.Attribute, ast.Subscript, ast.Slice, ast.Tuple,
    ast.List, ast.Set, ast.Dict, ast.Starred, ast.UnaryOp, ast.unaryop, ast.operator, ast.boolop,
    ast.cmpop, ast.BinOp, ast.BoolOp, ast.Compare, ast.IfExp,
)


@dataclasses.dataclass(frozen=True)
class _Ending:
    kind: str  # 'expression', 'assignment', 'other', 'empty'
    source: str = ''  # the expression, or the assigned names as an expression
    pure: bool = False
    names: str = ''


def _ending(code: str) -> _Ending:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return _Ending('other')
    if not tree.body:
        return _Ending('empty')
    last = tree.body[-1]
    if isinstance(last, ast.Expr):
        source = ast.get_source_segment(code, last.value) or ''
        pure = all(isinstance(node, _PURE_NODES) for node in ast.walk(ast.Expression(last.value)))
        return _Ending('expression', source, pure)
    targets: list[ast.expr] = []
    if isinstance(last, ast.Assign):
        targets = [last.targets[-1]]
    elif isinstance(last, (ast.AnnAssign, ast.AugAssign)) and (not isinstance(last, ast.AnnAssign) or last.value is not None):
        targets = [last.target]
    if len(targets) == 1:
        target = targets[0]
        names: list[str] = []
        if isinstance(target, ast.Name):
            names = [target.id]
        elif isinstance(target, (ast.Tuple, ast.List)) and all(isinstance(elt, ast.Name) for elt in target.elts):
            names = [elt.id for elt in target.elts]  # type: ignore[attr-defined]
        if names:
            source = names[0] if len(names) == 1 else '(' + ', '.join(names) + ')'
            return _Ending('assignment', source, True, ', '.join(f'`{name}`' for name in names))
    return _Ending('other')


class _Repr(str):
    """The repr of a value that has no form outside the sandbox."""


async def run_script(
    session: Session,
    code: str,
    lookup: Mapping[str, Callable[..., Any]],
    *,
    answers: tuple[Mapping[int, Any], Mapping[int, BaseException]] | None = None,
    print_callback: PrintCallback | None = None,
) -> ScriptOutcome:
    """Run `code` in `session` and say what happened; sandbox errors are returned, not raised.

    When the script ends with an assignment, the assigned value is fetched with a second, side-effect
    free snippet. A last value that cannot leave the sandbox is fetched again as its `repr` when its
    expression is side-effect free. What the script prints goes to `print_callback` when one is
    given, and is otherwise kept in the outcome's `printed`. With `answers` (values and errors by
    call id), `code` is the paused feed of `session`, which goes on with them (`session.resume`).
    `SandboxPaused` is raised.
    """
    printed: list[str] = []

    def on_print(stream: str, text: str) -> None:
        printed.append(text)

    outcome = ScriptOutcome()
    ending = _ending(code)
    fetch: str | None = None
    try:
        if answers is None:
            outcome.value = await session.feed_run(code, external_lookup=lookup, print_callback=print_callback or on_print)
        else:
            values, errors = answers
            outcome.value = await session.resume(values, errors=errors, external_lookup=lookup, print_callback=print_callback or on_print)
        outcome.value = _shown(session, outcome.value)
        if ending.kind == 'assignment':
            fetch = ending.source
            outcome.note = f'The script ended with an assignment; the value returned is that of {ending.names}.'
        elif ending.kind in ('other', 'empty') and outcome.value is None:
            outcome.note = 'The script did not end with an expression, so it has no value to return.'
    except SandboxRuntimeError as error:
        if not (error.exc_type == 'TypeError' and error.message.startswith(UNPACKABLE_RESULT)):
            outcome.error = error
        elif ending.kind == 'expression' and ending.pure:
            fetch = ending.source
        else:
            outcome.value = _Repr(f'<{_type_in(error.message)}>')
            outcome.note = 'The value has no form outside the sandbox; return repr() of it to see it.'
    except SandboxError as error:
        outcome.error = error
    if fetch is not None:
        try:
            outcome.value = await _fetch(session, fetch)
        except SandboxError as error:
            outcome.error = error
    outcome.printed = ''.join(printed)
    return outcome


async def _fetch(session: Session, source: str) -> Any:
    """The value of a side-effect free expression, as its repr when it cannot leave the sandbox;
    when that repr fails too (a value nested past the recursion limit), the error that says why
    the value cannot leave, not the failure of a `repr()` the script never called."""
    try:
        return _shown(session, await session.feed_run(source, print_callback=_ignore))
    except SandboxRuntimeError as error:
        if not (error.exc_type == 'TypeError' and error.message.startswith(UNPACKABLE_RESULT)):
            raise
        try:
            return _Repr(await session.feed_run(f'repr({source})', print_callback=_ignore))
        except SandboxError:
            if not session.alive:
                raise
            raise error from None


def images_in(value: Any) -> list[Image]:
    """The images a script's value is: one `Image`, or a list or tuple of them (`plt.show()` of
    several figures); none for any other value."""
    if isinstance(value, Image):
        return [value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(item, Image) for item in value):
        return list(value)
    return []


def _shown(session: Session, value: Any) -> Any:
    """A numpy or pandas value as a model reads it: the library's own repr (its table), not the
    plain form it crossed in."""
    return value if session.value_repr is None else _Repr(session.value_repr)


def _ignore(stream: str, text: str) -> None:
    pass


def _type_in(message: str) -> str:
    marker = "a value of type '"
    start = message.find(marker)
    if start < 0:
        return 'a value'
    end = message.find("'", start + len(marker))
    return f'{message[start + len(marker):end]} object'


def error_text(error: SandboxError) -> str:
    """The text a model sees for a script that did not succeed, as seed 000 formats it."""
    if isinstance(error, SandboxTypingError):
        return f'The script did not run, because it has type errors:\n{error.display()}'
    return f'The script failed: {error}'


# ----- values, as a model sees them ------------------------------------------------------------


def json_form(value: Any) -> Any:
    """`value` with every part that has no JSON form replaced by its repr.

    JSON forms: None, bool, int, finite float, str, lists (tuples become lists) and dicts with
    str, int or float keys. A value whose repr is longer than `values.REPR_LIMIT` characters
    becomes that repr, cut there (`value_repr`), so what reaches a model is bounded.
    """
    shown = value_repr(value)
    if len(shown) > REPR_LIMIT:
        return shown
    return _json_form(value, 0)


def _json_form(value: Any, depth: int) -> Any:
    if isinstance(value, _Repr):
        return str(value)
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value if value.bit_length() <= 64 else bounded_repr(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if depth >= MAX_DEPTH:
        return bounded_repr(value)
    if isinstance(value, (list, tuple)):
        return [_json_form(item, depth + 1) for item in value]
    if isinstance(value, dict):
        return {
            (key if isinstance(key, (str, int, float)) and not isinstance(key, bool) else bounded_repr(key)): _json_form(item, depth + 1)
            for key, item in value.items()
        }
    return bounded_repr(value)


def value_repr(value: Any) -> str:
    """The text a model reads for a script's value: its repr (or, for a value that has no form
    outside the sandbox, the repr the sandbox made of it), at most about `values.REPR_LIMIT`
    characters (`values.bounded_repr`); never raises."""
    if isinstance(value, _Repr):
        return cut_text(str.__str__(value))
    return bounded_repr(value)


_PLAIN = (type(None), bool, int, float, str, bytes, decimal.Decimal, uuid.UUID)
_DATETIMES = (datetime.date, datetime.time, datetime.timedelta, datetime.timezone)


def sandbox_value(value: Any) -> Any:
    """`value` made of what can enter the sandbox, for a host call's result.

    Dataclasses and pydantic models become dicts, enums their values, a Windows path its text (a
    POSIX one crosses as a path, as `corral.values` sends them), a `ToolReturn`-like wrapper is not unwrapped here; any other
    object becomes its JSON form, or its repr. Decimals and UUIDs cross as themselves.
    """
    if isinstance(value, _PLAIN) or isinstance(value, _DATETIMES):
        return value
    if isinstance(value, pathlib.PurePath):  # a POSIX path crosses as a path (the sandbox's `Path`)
        return pathlib.PurePosixPath(str(value)) if isinstance(value, pathlib.PurePosixPath) else str(value)
    if isinstance(value, enum.Enum):
        return sandbox_value(value.value)
    if isinstance(value, Mapping):
        return {_sandbox_key(key): sandbox_value(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return tuple(sandbox_value(item) for item in value)
    if isinstance(value, list):
        return [sandbox_value(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return frozenset(map(sandbox_value, value)) if isinstance(value, frozenset) else set(map(sandbox_value, value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: sandbox_value(getattr(value, field.name)) for field in dataclasses.fields(value)}
    dump = getattr(value, 'model_dump', None)
    if callable(dump) and not isinstance(value, type):
        try:
            return sandbox_value(dump())
        except Exception:
            pass
    try:
        from pydantic_core import to_jsonable_python

        return to_jsonable_python(value)
    except Exception:
        return repr(value)


def tool_value(value: Any) -> Any:
    """A script's argument to a tool, as the tool gets it: a path (a `PurePosixPath` once it has
    crossed the boundary) as its text, as the stubs describe paths (`str`) and as `sandbox_value`
    sends them in, within lists, tuples, sets and dicts too; anything else as it came."""
    if isinstance(value, pathlib.PurePath):
        return str(value)
    if type(value) is dict:
        return {tool_value(key): tool_value(item) for key, item in value.items()}
    if type(value) in (list, tuple, set, frozenset):
        return type(value)(map(tool_value, value))
    return value


def _sandbox_key(key: Any) -> Any:
    if isinstance(key, (str, int, float, bool)) or key is None:
        return key
    if isinstance(key, enum.Enum):
        return _sandbox_key(key.value)
    return str(key)
