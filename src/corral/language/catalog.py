"""What a script may import and use: the one list the runtime, the type checker and the docs share.

- `STDLIB_MODULES`: the standard library modules a script may import (each one a facade, see
  `modules.py`, whose `module_names(name)` is what a facade offers).
- `missing_module(name)`, `missing_member(module, name)`, `missing_builtin(name)`: the words a
  script reads when it reaches for something the sandbox does not have. The worker raises them
  (`AttributeError`, `NameError`; an import's `ModuleNotFoundError` and `ImportError` carry
  CPython's own message, the sandbox's words in a note: `module_note`); the type checker adds
  the same text to ty's diagnostic as an `info:` line; `docs/sandbox-language.md` lists them.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    'MEMBER_HINTS',
    'MODULE_HINTS',
    'MODULE_NOTES',
    'PACKAGES',
    'PACKAGE_ATTRIBUTE_HINTS',
    'PACKAGE_MODULES',
    'STDLIB_MODULES',
    'WITHHELD_PACKAGE_NAMES',
    'package_closure',
    'missing_member',
    'missing_module',
    'module_note',
]

#: The standard library modules a script may import, in the order the docs list them.
STDLIB_MODULES: tuple[str, ...] = (
    'abc', 'asyncio', 'base64', 'bisect', 'calendar', 'collections', 'collections.abc', 'contextlib',
    'copy', 'csv', 'dataclasses', 'datetime', 'decimal', 'difflib', 'email', 'email.utils', 'enum', 'fnmatch',
    'fractions', 'functools', 'glob', 'graphlib', 'hashlib', 'heapq', 'html', 'io', 'itertools', 'json',
    'logging', 'math', 'operator', 'os', 'os.path', 'pathlib', 'pprint', 'random', 're', 'shlex',
    'statistics', 'string', 'sys', 'textwrap', 'time', 'types', 'typing', 'unicodedata', 'urllib',
    'urllib.parse', 'uuid', 'warnings', 'zoneinfo',
)

#: The third-party packages a pool may offer (`Pool(packages=[...])`) -> the modules a script may
#: import from each, in the order the docs list them.
PACKAGE_MODULES: dict[str, tuple[str, ...]] = {
    'numpy': ('numpy', 'numpy.fft', 'numpy.linalg', 'numpy.random'),
    'pandas': ('pandas',),
    'matplotlib': ('matplotlib', 'matplotlib.pyplot'),
}
PACKAGES: tuple[str, ...] = tuple(PACKAGE_MODULES)
#: What each package needs loaded with it.
_REQUIRES = {'pandas': ('numpy',), 'matplotlib': ('numpy',)}


def package_closure(packages: Iterable[str]) -> tuple[str, ...]:
    """`packages` with what they need (`['pandas']` -> `('numpy', 'pandas')`), in `PACKAGES` order.

    Raises `ValueError` naming an unknown package and the ones there are.
    """
    wanted = set()
    for name in packages:
        if not isinstance(name, str) or name not in PACKAGE_MODULES:
            raise ValueError(f'unknown package {name!r}: the packages a pool can offer scripts are {", ".join(PACKAGES)}')
        wanted.add(name)
        wanted.update(_REQUIRES.get(name, ()))
    return tuple(name for name in PACKAGES if name in wanted)


_PICKLE = 'pickle runs code as it loads; keep data as CSV or JSON'
_FILES = 'numpy reads and writes files as text here: np.loadtxt, np.genfromtxt and np.savetxt on the mounted folders'
_MEMORY = 'it reaches the worker\'s raw memory'
_PANDAS_FORMAT = 'the sandbox reads and writes CSV and JSON: read_csv, read_json, to_csv, to_json (and to_string, to_html)'
_EVAL = 'it evaluates a string as code; select with boolean masks, df[(df["a"] > 1) & (df["b"] < 2)], and compute columns with df["c"] = df["a"] + df["b"]'

#: Names a package's objects do not have in the sandbox: class -> {attribute: why}. The classes
#: themselves are changed in the zygote (`packages.py`), so every way to the name meets the refusal.
PACKAGE_ATTRIBUTE_HINTS: dict[str, dict[str, str]] = {
    'ndarray': {
        'ctypes': _MEMORY,
        'tofile': _FILES,
        'dump': _PICKLE + ': np.savetxt, or arr.tolist() with json',
        'dumps': _PICKLE + ': arr.tolist() with json',
    },
    'DataFrame': {
        'query': _EVAL,
        'eval': _EVAL,
        'to_pickle': _PICKLE + ': to_csv or to_json',
        'style': 'styling needs templates the sandbox does not have; use to_string() or to_html()',
        'to_clipboard': 'a script has no clipboard',
        **dict.fromkeys(
            ('to_hdf', 'to_sql', 'to_excel', 'to_parquet', 'to_feather', 'to_orc', 'to_stata', 'to_xml', 'to_latex',
             'to_markdown', 'to_xarray', 'to_iceberg', 'to_gbq'),
            _PANDAS_FORMAT,
        ),
    },
}

_NUMPY_WITHHELD = {
    'load': _PICKLE + ' (np.load unpickles); ' + _FILES,
    'save': _FILES,
    'savez': _FILES,
    'savez_compressed': _FILES,
    'fromfile': _FILES,
    'memmap': _FILES,
    'fromregex': _FILES,
    'ctypeslib': _MEMORY,
    'lib': 'numpy.lib is not available (np.lib.stride_tricks.as_strided reads memory outside the array); its public functions are in numpy itself',
    'show_config': 'interpreter internals are not available in the sandbox',
    'show_runtime': 'interpreter internals are not available in the sandbox',
    'get_include': 'interpreter internals are not available in the sandbox',
    'info': 'interpreter internals are not available in the sandbox; use help() on the host',
    'test': 'interpreter internals are not available in the sandbox',
    'testing': 'interpreter internals are not available in the sandbox',
    'f2py': 'a script cannot run commands or processes',
    'DataSource': _FILES,
}
_PANDAS_WITHHELD = {
    'read_pickle': _PICKLE + ': read_csv or read_json',
    'to_pickle': _PICKLE + ': to_csv or to_json',
    'eval': _EVAL,
    'read_clipboard': 'a script has no clipboard',
    'read_sql': 'databases are reached through the host functions you were given',
    'read_sql_query': 'databases are reached through the host functions you were given',
    'read_sql_table': 'databases are reached through the host functions you were given',
    **dict.fromkeys(
        ('read_hdf', 'read_excel', 'read_parquet', 'read_feather', 'read_orc', 'read_stata', 'read_sas', 'read_spss',
         'read_html', 'read_xml', 'read_iceberg', 'HDFStore', 'ExcelFile', 'ExcelWriter'),
        _PANDAS_FORMAT,
    ),
    'set_eng_float_format': 'use pd.set_option("display.float_format", ...)',
    'show_versions': 'interpreter internals are not available in the sandbox',
    'test': 'interpreter internals are not available in the sandbox',
}
_PLOT_BACKEND = 'the sandbox draws with Agg: a figure as the last expression, or plt.show(), comes back as a PNG image'
_PYPLOT_WITHHELD = {
    **dict.fromkeys(
        ('switch_backend', 'ion', 'ioff', 'pause', 'ginput', 'waitforbuttonpress', 'connect', 'disconnect',
         'install_repl_displayhook', 'uninstall_repl_displayhook', 'new_figure_manager', 'get_current_fig_manager',
         'draw_if_interactive', 'isinteractive', 'get_backend'),
        _PLOT_BACKEND,
    ),
    'imread': 'read images through the host functions you were given',
    'imsave': 'save the figure with plt.savefig on a mounted folder',
    'rc_file': 'set rcParams directly',
    'rc_file_defaults': 'use rcdefaults()',
    'get_plot_commands': 'interpreter internals are not available in the sandbox',
    'set_loglevel': 'interpreter internals are not available in the sandbox',
}
_MATPLOTLIB_WITHHELD = {
    'use': _PLOT_BACKEND,
    'get_backend': _PLOT_BACKEND,
    'interactive': _PLOT_BACKEND,
    'is_interactive': _PLOT_BACKEND,
    **dict.fromkeys(('get_configdir', 'get_cachedir', 'get_data_path', 'matplotlib_fname', 'rc_file', 'rc_params_from_file', 'rc_file_defaults', 'set_loglevel'), 'interpreter internals are not available in the sandbox'),
}

#: Names a package's module facade leaves out: module -> names.
WITHHELD_PACKAGE_NAMES: dict[str, frozenset[str]] = {
    'numpy': frozenset(_NUMPY_WITHHELD),
    'pandas': frozenset(_PANDAS_WITHHELD),
    'matplotlib': frozenset(_MATPLOTLIB_WITHHELD),
    'matplotlib.pyplot': frozenset(_PYPLOT_WITHHELD),
    'numpy.random': frozenset({'get_bit_generator', 'set_bit_generator'}),
}

_NETWORK = 'a script has no network access; call the host functions you were given'
_PROCESSES = 'a script cannot run commands, processes or threads'
_INTERNALS = 'interpreter internals are not available in the sandbox'
_THIRD_PARTY = 'third-party packages are not installed in the sandbox; use the standard library modules below'
#: Why a package a pool can offer (`PACKAGES`) is missing: the pool was made without it.
_WITHOUT_PACKAGE = (
    'this sandbox was started without {0}; work with the modules below, or tell the user that its host '
    "can add it (Pool(packages=['{0}']), packages=['{0}'] on CodeTool and CodeMode, --packages {0} on corral run, corral mcp and corral serve)"
)

#: Why a module is missing, for the modules a model reaches for most.
MODULE_HINTS: dict[str, str] = {
    **dict.fromkeys(
        ['socket', 'ssl', 'http', 'urllib.request', 'urllib.error', 'urllib.response', 'requests', 'httpx', 'aiohttp', 'ftplib', 'smtplib',
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
        ['importlib', 'inspect', 'gc', 'ctypes', 'builtins', 'traceback', 'code', 'codeop', 'dis', 'ast',
         'weakref', 'sysconfig', 'site', 'runpy', 'pdb', 'faulthandler', 'resource', 'atexit'],
        _INTERNALS,
    ),
    'logging.handlers': 'logging writes to the script\'s stderr (the default of basicConfig and StreamHandler), or to a stream',
    'logging.config': 'configure logging with basicConfig, or with handlers and formatters in code',
    **dict.fromkeys(
        ['scipy', 'sklearn', 'pydantic', 'yaml', 'bs4', 'dateutil', 'pytz', 'attrs', 'typing_extensions', 'tqdm', 'rich',
         'polars', 'openai', 'anthropic'],
        _THIRD_PARTY,
    ),
    **{name: _WITHOUT_PACKAGE.format(name) for name in PACKAGES},
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
    ('os', 'getrandom'): 'randomness comes from the session\'s seed: os.urandom(n) or random.randbytes(n)',
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
    ('sys', 'argv'): 'a script has no command line',
    ('sys', 'stdin'): 'a script cannot read input; use the host functions you were given',
    ('sys', 'executable'): _INTERNALS,
    **{('time', name): _LOCALTIME for name in ('localtime', 'mktime', 'ctime', 'asctime', 'timezone', 'altzone', 'daylight', 'tzname', 'tzset')},
    **{('time', name): 'use time.perf_counter() or time.monotonic()' for name in ('thread_time', 'thread_time_ns', 'clock_gettime', 'clock_gettime_ns', 'get_clock_info')},
    ('random', 'SystemRandom'): 'randomness comes from the session\'s seeded generator; use random.Random() or the module functions',
    ('uuid', 'uuid1'): 'uuid1 reads the machine\'s network address; use uuid.uuid4()',
    ('uuid', 'getnode'): 'it reads the machine\'s network address',
    **{('asyncio', name): _LOOP for name in (
        'get_event_loop', 'new_event_loop', 'set_event_loop', 'Runner',
        'get_event_loop_policy', 'set_event_loop_policy', 'AbstractEventLoop')},
    **{('asyncio', name): _THREADS for name in ('to_thread', 'run_coroutine_threadsafe', 'wrap_future')},
    **{('asyncio', name): _PROCESSES for name in ('create_subprocess_exec', 'create_subprocess_shell', 'subprocess')},
    **{('asyncio', name): _NETWORK for name in ('open_connection', 'start_server', 'StreamReader', 'StreamWriter', 'open_unix_connection', 'start_unix_server')},
    ('contextlib', 'redirect_stdout'): 'write to a buffer with print(..., file=buffer)',
    ('contextlib', 'redirect_stderr'): 'write to a buffer with print(..., file=buffer)',
    ('contextlib', 'chdir'): 'call os.chdir(path) and os.chdir back',
    **{('types', name): _INTERNALS for name in ('CodeType', 'FrameType', 'TracebackType', 'CellType', 'coroutine')},
    ('shlex', 'shlex'): 'it can read files (source, sourcehook); use shlex.split, shlex.quote and shlex.join',
    ('email.utils', 'make_msgid'): 'it reads the host\'s name; build an id with uuid.uuid4()',
    ('email.utils', 'localtime'): _LOCALTIME,
    ('logging', 'FileHandler'): 'open the file with open() and log to it: StreamHandler(file)',
    ('warnings', 'warn_explicit'): 'use warnings.warn(message, category, stacklevel)',
    ('functools', 'singledispatchmethod'): 'use functools.singledispatch on a function',
    ('calendar', 'LocaleTextCalendar'): 'locales are not available in the sandbox; use calendar.TextCalendar',
    ('calendar', 'LocaleHTMLCalendar'): 'locales are not available in the sandbox; use calendar.HTMLCalendar',
    ('zoneinfo', 'reset_tzpath'): 'the time zone data is built into the sandbox',
    ('zoneinfo', 'TZPATH'): 'the time zone data is built into the sandbox',
    **{('io', name): 'use open(), io.StringIO or io.BytesIO' for name in (
        'FileIO', 'open_code', 'BufferedReader', 'BufferedWriter', 'BufferedRandom', 'BufferedRWPair')},
    **{('numpy', name): hint for name, hint in _NUMPY_WITHHELD.items()},
    **{('pandas', name): hint for name, hint in _PANDAS_WITHHELD.items()},
    **{('matplotlib.pyplot', name): hint for name, hint in _PYPLOT_WITHHELD.items()},
    **{('matplotlib', name): hint for name, hint in _MATPLOTLIB_WITHHELD.items()},
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
        'and `sleep` run on it; `get_running_loop()` gives its clock, tasks, futures and callbacks (`time`, '
        '`create_task`, `create_future`, `call_soon`, `call_later`, `call_at`); tasks a script does not await stay '
        'for the next scripts of the session (up to 100), and go on while those run the loop; no access to the loop '
        'itself, threads, subprocesses or streams'
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
    'sys': (
        '`stdout`/`stderr` write to the captured output; `exit()` ends the script with `SystemExit`; '
        '`setrecursionlimit` sets a limit up to the session\'s `Limits.recursion` (a higher one gives that)'
    ),
    'pprint': '`pprint()` and `pp()` print to the captured output',
    'zoneinfo': 'every time zone of the host\'s tz database is built in',
    'operator': '`attrgetter` and `methodcaller` read attributes with the sandbox\'s rules',
    'functools': '`wraps`/`update_wrapper` copy names and docs; `cached_property` works on the script\'s classes',
    'dataclasses': '`dataclass` applies to the script\'s classes; `asdict`, `astuple`, `replace` as in CPython',
    'copy': 'copies builtin values, collections, dates, decimals and objects of the script\'s classes',
    'contextlib': 'no `redirect_stdout`/`redirect_stderr` (use `print(..., file=buffer)`), no `chdir` (call `os.chdir`)',
    'calendar': '`prmonth`, `prcal` and `TextCalendar`\'s `pr*` methods print to the captured output; no locale calendars',
    'typing': (
        '`reveal_type` prints to the captured output; `get_type_hints` evaluates annotation strings as names, '
        'attributes, subscripts and `|` only (no calls), by the sandbox\'s rules'
    ),
    'logging': (
        'handlers write to the script\'s stderr (`basicConfig()`, `StreamHandler()`, and a logger with none) or to a '
        'stream the script gives; no `FileHandler`; a logged traceback or stack shows the script\'s frames'
    ),
    'warnings': (
        '`warn` writes to the script\'s stderr through the real filters (`simplefilter`, `filterwarnings`, '
        '`catch_warnings`); no `warn_explicit`'
    ),
    'string': '`Formatter` reads fields\' attributes by the sandbox\'s rules, as `str.format` does',
    'types': 'the types of values a script has (`SimpleNamespace`, `MappingProxyType`, `FunctionType` ...); no `CodeType`, `FrameType`, `TracebackType`, `CellType` or `coroutine`',
    'shlex': '`split`, `quote` and `join`; no `shlex` class (it can read files)',
    'email.utils': 'address and date helpers; `formatdate()` without a time reads the clock through the host; no `make_msgid`, `localtime`',
    'email': 'only `email.utils`',
    'urllib': 'only `urllib.parse` (strings only; no network)',
}


def _listing(names: Iterable[str]) -> str:
    return ', '.join(sorted(names))


def missing_module(name: str, host_modules: Iterable[str] = (), packages: Iterable[str] = ()) -> str:
    """Why `import name` fails, and what a script may import instead (`packages`: the ones the
    session's pool offers, see `PACKAGES`): the type checker's `info:` line."""
    hint, listing = _module_hint(name, host_modules, packages)
    return f"No module named '{name}'" + (f': {hint}. ' if hint else '. ') + listing


def module_note(name: str, host_modules: Iterable[str] = (), packages: Iterable[str] = ()) -> str:
    """The note (`add_note`) of the `ModuleNotFoundError` of `import name`, whose message is
    CPython's own (`No module named 'name'`): why, and what a script may import instead."""
    hint, listing = _module_hint(name, host_modules, packages)
    return f'{hint}. {listing}' if hint else listing


def _module_hint(name: str, host_modules: Iterable[str], packages: Iterable[str]) -> tuple[str | None, str]:
    """`(why the sandbox has no module name, or None; 'A script may import: ...')`."""
    offered = (*STDLIB_MODULES, *(module for package in packages for module in PACKAGE_MODULES[package]))
    top = name.partition('.')[0]
    hint = MODULE_HINTS.get(name) or (None if top in offered else MODULE_HINTS.get(top))
    if hint is None and top in offered:
        hint = f"the sandbox offers '{top}' itself, not its submodules"
    listing = f'A script may import: {_listing(offered)}'
    host = sorted(host_modules)
    if host:
        listing += f'; and the host\'s modules: {_listing(host)}'
    return hint, listing


def missing_member(module: str, name: str, available: Iterable[str]) -> str:
    """Why `module.name` is not there, and what the module offers (`available`: the names its
    facade offers, `modules.module_names(module)`)."""
    names = sorted(available)
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
