"""What a script may import and use: the one list the runtime, the type checker and the docs share.

- `STDLIB_MODULES`: the standard library modules a script may import (each one a facade, see
  `modules.py`); `module_names(name)` is what a facade offers.
- `missing_module(name)`, `missing_member(module, name)`, `missing_builtin(name)`: the words a
  script reads when it reaches for something the sandbox does not have. The worker raises them
  (`ModuleNotFoundError`, `ImportError`, `AttributeError`, `NameError`); the type checker adds
  the same text to ty's diagnostic as an `info:` line; `docs/sandbox-language.md` lists them.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    'MEMBER_HINTS',
    'MODULE_HINTS',
    'MODULE_NOTES',
    'STDLIB_MODULES',
    'missing_member',
    'missing_module',
    'module_names',
]

#: The standard library modules a script may import, in the order the docs list them.
STDLIB_MODULES: tuple[str, ...] = (
    'abc', 'asyncio', 'base64', 'bisect', 'calendar', 'collections', 'collections.abc', 'contextlib',
    'copy', 'csv', 'dataclasses', 'datetime', 'decimal', 'difflib', 'enum', 'fnmatch', 'fractions',
    'functools', 'glob', 'hashlib', 'heapq', 'io', 'itertools', 'json', 'math', 'operator', 'os',
    'os.path', 'pathlib', 'pprint', 'random', 're', 'statistics', 'string', 'sys', 'textwrap', 'time',
    'typing', 'unicodedata', 'uuid', 'zoneinfo',
)

_NETWORK = 'a script has no network access; call the host functions you were given'
_PROCESSES = 'a script cannot run commands, processes or threads'
_INTERNALS = 'interpreter internals are not available in the sandbox'
_THIRD_PARTY = 'third-party packages are not installed in the sandbox; use the standard library modules below'

#: Why a module is missing, for the modules a model reaches for most.
MODULE_HINTS: dict[str, str] = {
    **dict.fromkeys(
        ['socket', 'ssl', 'http', 'urllib', 'urllib.request', 'requests', 'httpx', 'aiohttp', 'ftplib', 'smtplib',
         'xmlrpc', 'websockets', 'asyncio.streams'],
        _NETWORK,
    ),
    **dict.fromkeys(['subprocess', 'multiprocessing', 'signal', 'pty', 'asyncio.subprocess'], _PROCESSES),
    **dict.fromkeys(
        ['threading', 'concurrent', 'concurrent.futures', '_thread'],
        'threads are not available; asyncio.gather and asyncio.create_task run work concurrently',
    ),
    'secrets': 'randomness comes from the session\'s seeded random module (random.randbytes, random.choice, uuid.uuid4)',
    **dict.fromkeys(['pickle', 'marshal', 'shelve', 'dbm'], 'serialize data with json'),
    **dict.fromkeys(['shutil', 'tempfile'], 'use open(), os and pathlib on the folders the host mounted'),
    'sqlite3': 'databases are reached through the host functions you were given',
    **dict.fromkeys(
        ['importlib', 'inspect', 'gc', 'ctypes', 'builtins', 'traceback', 'types', 'code', 'codeop', 'dis', 'ast',
         'weakref', 'sysconfig', 'site', 'runpy', 'pdb', 'faulthandler', 'resource', 'atexit', 'warnings'],
        _INTERNALS,
    ),
    'logging': 'print() is the script\'s output',
    **dict.fromkeys(
        ['numpy', 'pandas', 'scipy', 'sklearn', 'matplotlib', 'pydantic', 'yaml', 'bs4', 'dateutil', 'pytz', 'attrs',
         'typing_extensions', 'tqdm', 'rich', 'polars', 'openai', 'anthropic'],
        _THIRD_PARTY,
    ),
}

_RUN = 'a script cannot run commands or processes'
_FILES_LINKS = 'file permissions, owners and links are not available in the sandbox'
_PROCESS_INFO = 'process information is not available in the sandbox'
_LOOP = 'the script already runs in an event loop: use await (top-level await works) and asyncio.gather / asyncio.create_task'
_THREADS = 'threads are not available in the sandbox; use asyncio tasks'
_LOCALTIME = 'the sandbox has no local time zone: use time.gmtime(), or datetime with zoneinfo'

#: Why a member is missing, for the members a model reaches for most: `(module, name) -> hint`.
MEMBER_HINTS: dict[tuple[str, str], str] = {
    **{('os', name): _RUN for name in (
        'system', 'popen', 'spawnl', 'spawnv', 'execv', 'execve', 'execl', 'execvp', 'fork', 'kill', 'killpg',
        'posix_spawn', 'startfile', 'wait', 'waitpid', 'abort', '_exit', 'nice')},
    **{('os', name): _FILES_LINKS for name in (
        'chmod', 'chown', 'lchown', 'symlink', 'link', 'readlink', 'utime', 'umask', 'access', 'chroot', 'mkfifo',
        'truncate')},
    **{('os', name): _PROCESS_INFO for name in (
        'getpid', 'getppid', 'getuid', 'getgid', 'geteuid', 'getlogin', 'uname', 'cpu_count', 'times', 'getloadavg')},
    ('os', 'urandom'): 'randomness comes from the session\'s seeded random module: random.randbytes(n)',
    ('os', 'getrandom'): 'randomness comes from the session\'s seeded random module: random.randbytes(n)',
    ('os', 'chdir'): 'the working folder is fixed; use paths under the mounted folders',
    ('os', 'putenv'): 'assign os.environ[name] instead (it stays in the session)',
    ('os', 'unsetenv'): 'del os.environ[name] instead (it stays in the session)',
    **{('os', name): 'open files with open() or pathlib.Path' for name in ('open', 'read', 'write', 'close', 'fdopen', 'pipe', 'dup', 'dup2')},
    ('os', 'get_terminal_size'): 'a script has no terminal',
    ('os.path', 'expanduser'): 'a script has no home folder; use paths under the mounted folders',
    ('os.path', 'expandvars'): 'read variables with os.environ or os.getenv',
    ('os.path', 'ismount'): 'mounts are listed by the host',
    ('sys', 'modules'): _INTERNALS,
    ('sys', 'path'): _INTERNALS,
    ('sys', '_getframe'): _INTERNALS,
    ('sys', 'settrace'): _INTERNALS,
    ('sys', 'setprofile'): _INTERNALS,
    ('sys', 'exc_info'): 'use the exception bound by except ... as error',
    ('sys', 'exception'): 'use the exception bound by except ... as error',
    ('sys', 'setrecursionlimit'): 'the host sets the recursion limit of a session (its Limits); write the recursion as a loop',
    ('sys', 'getrecursionlimit'): 'the host sets the recursion limit of a session (its Limits)',
    ('sys', 'argv'): 'a script has no command line',
    ('sys', 'stdin'): 'a script cannot read input; use the host functions you were given',
    ('sys', 'executable'): _INTERNALS,
    **{('time', name): _LOCALTIME for name in ('localtime', 'mktime', 'ctime', 'asctime', 'timezone', 'altzone', 'daylight', 'tzname', 'tzset')},
    **{('time', name): 'use time.perf_counter() or time.monotonic()' for name in ('thread_time', 'thread_time_ns', 'clock_gettime', 'clock_gettime_ns', 'get_clock_info')},
    ('random', 'SystemRandom'): 'randomness comes from the session\'s seeded generator; use random.Random() or the module functions',
    ('uuid', 'uuid1'): 'uuid1 reads the machine\'s network address; use uuid.uuid4()',
    ('uuid', 'getnode'): 'it reads the machine\'s network address',
    **{('asyncio', name): _LOOP for name in (
        'get_event_loop', 'get_running_loop', 'new_event_loop', 'set_event_loop', 'Runner',
        'get_event_loop_policy', 'set_event_loop_policy', 'AbstractEventLoop')},
    **{('asyncio', name): _THREADS for name in ('to_thread', 'run_coroutine_threadsafe', 'wrap_future')},
    **{('asyncio', name): _PROCESSES for name in ('create_subprocess_exec', 'create_subprocess_shell', 'subprocess')},
    **{('asyncio', name): _NETWORK for name in ('open_connection', 'start_server', 'StreamReader', 'StreamWriter', 'open_unix_connection', 'start_unix_server')},
    ('typing', 'get_type_hints'): 'it evaluates annotation strings; read annotations in your own code instead',
    ('contextlib', 'redirect_stdout'): 'write to a buffer with print(..., file=buffer)',
    ('contextlib', 'redirect_stderr'): 'write to a buffer with print(..., file=buffer)',
    ('contextlib', 'chdir'): 'the working folder is fixed; use paths under the mounted folders',
    ('string', 'Formatter'): 'use str.format() or f-strings',
    ('functools', 'singledispatchmethod'): 'use functools.singledispatch on a function',
    ('calendar', 'LocaleTextCalendar'): 'locales are not available in the sandbox; use calendar.TextCalendar',
    ('calendar', 'LocaleHTMLCalendar'): 'locales are not available in the sandbox; use calendar.HTMLCalendar',
    ('zoneinfo', 'reset_tzpath'): 'the time zone data is built into the sandbox',
    ('zoneinfo', 'TZPATH'): 'the time zone data is built into the sandbox',
    **{('io', name): 'use open(), io.StringIO or io.BytesIO' for name in (
        'FileIO', 'open_code', 'BufferedReader', 'BufferedWriter', 'BufferedRandom', 'BufferedRWPair')},
    **{('json', name): "the sandbox offers json's own names: json.JSONDecodeError, json.JSONDecoder, json.JSONEncoder"
       for name in ('decoder', 'encoder', 'scanner')},
}

#: What a module's facade does differently from CPython's module (for the docs).
MODULE_NOTES: dict[str, str] = {
    'asyncio': (
        'the script runs in an event loop already: top-level `await` works, `asyncio.run(main())` in a statement '
        'of the top level awaits `main()` on that loop and gives its value (elsewhere it raises `RuntimeError`, as '
        'in a running loop), and `gather` (with '
        '`return_exceptions=True`), `create_task`, `TaskGroup`, `Semaphore`, `as_completed`, `wait_for`, `timeout` '
        'and `sleep` run on it; no access to the loop itself, threads, subprocesses or streams'
    ),
    'datetime': (
        '`datetime.now()`, `datetime.today()`, `datetime.utcnow()` and `date.today()` read the clock through the '
        'host (the `os_access` handler); without one they raise `PermissionError`'
    ),
    'time': (
        '`time()`, `time_ns()` and `gmtime()`/`strftime()` without a time read the clock through the host; '
        '`monotonic` and `perf_counter` read the host\'s monotonic clock (so a stored session replays them); '
        '`process_time` and `sleep` run in the sandbox; '
        'there is no local time zone (`localtime`, `mktime`)'
    ),
    'random': (
        'seeded once per session by the host (reproducible: the same seed gives the same numbers); '
        '`seed()` and `Random()` without a value draw from the session\'s seed; no `SystemRandom`'
    ),
    'uuid': '`uuid4()` draws from the session\'s seeded generator; no `uuid1`/`getnode`',
    'os': (
        'files, folders and the environment come from the host (mounts and the `os_access` handler); '
        'without them these functions raise `PermissionError`; no processes or commands; the sandbox has no '
        'symbolic links'
    ),
    'os.path': 'path arithmetic as on Linux; `exists`, `isfile`, `isdir`, `getsize`... ask the host',
    'pathlib': '`Path` reads and writes through the host (mounts, `os_access`); `PurePath` classes as in CPython',
    'glob': 'matches paths through the host (mounts, `os_access`); results are sorted',
    'io': '`open` is the sandbox\'s `open()`; `StringIO`, `BytesIO` and `TextIOWrapper` work in memory',
    'sys': '`stdout`/`stderr` write to the captured output; `exit()` ends the script with `SystemExit`',
    'pprint': '`pprint()` and `pp()` print to the captured output',
    'zoneinfo': 'every time zone of the host\'s tz database is built in',
    'operator': '`attrgetter` and `methodcaller` read attributes with the sandbox\'s rules',
    'functools': '`wraps`/`update_wrapper` copy names and docs; `cached_property` works on the script\'s classes',
    'dataclasses': '`dataclass` applies to the script\'s classes; `asdict`, `astuple`, `replace` as in CPython',
    'copy': 'copies builtin values, collections, dates, decimals and objects of the script\'s classes',
    'contextlib': 'no `redirect_stdout`/`redirect_stderr` (use `print(..., file=buffer)`), no `chdir`',
    'calendar': '`prmonth`, `prcal` and `TextCalendar`\'s `pr*` methods print to the captured output; no locale calendars',
    'typing': '`reveal_type` prints to the captured output; no `get_type_hints` (it evaluates strings)',
}


def module_names(name: str) -> tuple[str, ...]:
    """The public names the facade of sandbox module `name` offers (its submodules too), sorted."""
    from .modules import public_names, stdlib_module

    return tuple(public_names(stdlib_module(name)))


def _listing(names: Iterable[str]) -> str:
    return ', '.join(sorted(names))


def missing_module(name: str, host_modules: Iterable[str] = ()) -> str:
    """Why `import name` fails, and what a script may import instead."""
    hint = MODULE_HINTS.get(name) or MODULE_HINTS.get(name.partition('.')[0])
    if hint is None and name.partition('.')[0] in STDLIB_MODULES:
        hint = f"the sandbox offers '{name.partition('.')[0]}' itself, not its submodules"
    text = f"No module named '{name}'"
    if hint:
        text += f': {hint}'
    host = sorted(host_modules)
    text += f'. A script may import: {_listing(STDLIB_MODULES)}'
    if host:
        text += f'; and the host\'s modules: {_listing(host)}'
    return text


def missing_member(module: str, name: str, available: Iterable[str] | None = None) -> str:
    """Why `module.name` is not there, and what the module offers."""
    names = sorted(available if available is not None else module_names(module))
    hint = MEMBER_HINTS.get((module, name))
    text = f"module '{module}' has no attribute '{name}' in the sandbox"
    if hint:
        text += f': {hint}'
    text += '.'
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.75)
    if close and name not in close:
        text += f' Did you mean: {", ".join(close)}?'
    if len(names) <= 60:
        text += f' {module} offers: {_listing(names)}'
    else:
        text += f' dir({module}) lists the {len(names)} names {module} offers'
    return text
