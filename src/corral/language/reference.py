"""The reference of the sandbox language, generated from the facades: `docs/sandbox-language.md`.

    python -m corral.language.reference > docs/sandbox-language.md

The page lists what a script may use in the words the run time and the type checker use (they
all read `catalog.py`), and a test checks that the file in the repository is what this prints.
Its last section, what numpy, pandas and matplotlib offer (`render_packages`), is built from the
same facades a worker builds, so printing it imports the three libraries: it needs the `data`
extra (`pip install -e '.[data]' in corral's clone`), and lists the names of the versions installed.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import sys
import types

from . import catalog
from .builtins import EXCEPTIONS, SAFE_BUILTINS, UNAVAILABLE_BUILTINS
from .modules import module_names, stdlib_module
from .rules import DEFINABLE_DUNDERS, OWN_DUNDERS, OWN_STORE_DUNDERS, READ_DUNDERS, STORE_DUNDERS

__all__ = ['render', 'render_language', 'render_packages']

_SYNTAX = f"""\
A script is a Python {sys.version_info[0]}.{sys.version_info[1]} program. It may use everything a model writes for data work and
orchestration:

- functions: defaults, `*args`, `**kwargs`, positional-only and keyword-only parameters, closures,
  `lambda`, decorators, recursion (up to the session's recursion limit);
- classes: methods, `@property`, `@classmethod`, `@staticmethod`, inheritance and `super()`,
  special methods (`__init__`, `__repr__`, `__eq__`, `__lt__`, `__len__`, `__iter__`, `__getitem__`,
  `__enter__`/`__exit__`, operators ...), `__slots__`, dataclasses, enums, named tuples, protocols,
  abstract base classes;
- generators, `yield from`, comprehensions and generator expressions;
- `async def`, `await` (also at the top level of the script), `async for`, `async with`, async
  generators and comprehensions;
- `try`/`except`/`else`/`finally`, `except*`, `raise ... from ...`, `assert`, `with`, `match`
  (every pattern kind), `for`/`while` with `else`, `break`, `continue`;
- f-strings, `str.format`, `%` formatting, the walrus operator, star-unpacking, `global` and
  `nonlocal`, type annotations (also `typing` generics, `TypedDict`, `Protocol`).

The value of the script's last expression is its result. Variables, functions, classes and
imports persist between the scripts of one session.
"""

_REFUSED = """\
`asyncio.run(main())` in a statement of the script's top level (also in an `if`, `for` or `try`
there) awaits `main()` on the feed's event loop and gives its value; `from __future__ import
annotations` (and the other features) may open a script, as in CPython. `x.__class__` is
`type(x)`. `x.__dict__` and `vars(x)` of the script's own objects are a copy of the attributes a
script may read by name, whose changes go to the object under the rules of `setattr` (a later
change to the object does not show in it); a script class's is a read-only copy of what it
defines.

Refused, and why:

- before the script runs (a `SyntaxError` naming the construct and what to write instead):
  - `from module import *`: modules are facades of their public names; import the names you need;
  - relative imports: a script is not part of a package;
  - names like `__this__` except the ones below, as attributes, variables, arguments or imports:
    they walk class hierarchies (`__bases__`, `__mro__`, `__subclasses__`), reach function and
    method internals (`__globals__`, `__code__`, `__closure__`, `__self__`), the builtins as an
    object (`__builtins__`, `__import__`) or the object model's hooks (`__getattribute__`,
    `__del__`), which is how escapes from Python sandboxes begin; assigning `__class__` or
    `__dict__` is refused with them;
  - the attributes of frames, code, tracebacks, generators, coroutines and the event loop
    (`f_globals`, `co_code`, `tb_frame`, `gi_frame`, `cr_frame`, `ag_frame`, `get_loop`, ...):
    they reach the worker's own frames and loop;
  - a `match` pattern that reads `format`, `format_map`, `now`, `today` or `utcnow`, or a private
    attribute in a value pattern (a class pattern's keyword, the dotted name of a value pattern or
    of a mapping pattern's key; a class's `__match_args__` naming one fails at run time): a pattern
    reads attributes with no sandbox code in between; match without it and read the attribute in
    the case body;
- at run time:
  - names starting with `_` on objects and classes the script did not define (`AttributeError`
    saying so): they are the private state of the sandbox's and the standard library's objects;
  - `x.__dict__` and `vars(x)` of objects the script did not define (modules, functions, the
    standard library's objects): their real namespaces; read the attributes by name;
  - the special names a script reads or sets of what it made only (below) on anything else:
    `object.__setattr__` on a module or a host class, a host function's `__wrapped__`;
  - `asyncio.run()` anywhere else (in a function): the script already runs in an event loop, as
    in CPython when a loop is running (`RuntimeError`); call it at the top level, or `await`;
  - the builtins and module members listed below as not available, each with its reason.
"""


def _code_list(names: object) -> str:
    return ', '.join(f'`{name}`' for name in sorted(names))  # type: ignore[call-overload]


def _kind(value: object) -> str:
    if isinstance(value, types.ModuleType):
        return 'modules'
    if isinstance(value, type):
        return 'exceptions' if issubclass(value, BaseException) else 'classes'
    if callable(value):
        return 'functions'
    return 'constants'


def _module_section(name: str) -> list[str]:
    module = stdlib_module(name)
    lines = [f'### `{name}`', '']
    note = catalog.MODULE_NOTES.get(name)
    if note:
        lines += [note[0].upper() + note[1:] + '.', '']
    groups: dict[str, list[str]] = {}
    for member in module_names(name):
        groups.setdefault(_kind(getattr(module, member)), []).append(member)
    for kind in ('modules', 'functions', 'classes', 'exceptions', 'constants'):
        if kind in groups:
            lines.append(f'- {kind}: {_code_list(groups[kind])}')
    withheld = sorted(member for (module_name, member) in catalog.MEMBER_HINTS if module_name == name)
    if withheld:
        lines.append('- not offered:')
        for member in withheld:
            lines.append(f'  - `{name}.{member}`: {catalog.MEMBER_HINTS[(name, member)]}')
    lines.append('')
    return lines


def render() -> str:
    """The page, as Markdown: `render_language()` then `render_packages()`.

    Raises `ImportError` when numpy, pandas or matplotlib is not installed (see `render_packages`).
    """
    return render_language() + '\n' + render_packages()


def render_language() -> str:
    """The page up to its section on the packages: syntax, builtins, standard library modules,
    files and output. Needs only the standard library."""
    lines = [
        '# The sandbox language',
        '',
        '<!-- Generated by `python -m corral.language.reference`; tests/language/test_docs.py checks it. -->',
        '',
        'What a script may use, in the words a script reads when it reaches for something else. The',
        'run time and the type checker (`type_check=True`) say the same: the checker reports what is',
        'missing before anything runs, in ty\'s format, with the run-time message as an `info:` line.',
        'A pool made with `Pool(packages=[...])` offers numpy, pandas and matplotlib too: see',
        '[the last section](#packages-numpy-pandas-and-matplotlib).',
        '',
        '## Syntax',
        '',
        _SYNTAX,
        _REFUSED,
        f'Special names a script may read: {_code_list(READ_DUNDERS)}.',
        '',
        f'Special names a script may assign: {_code_list(STORE_DUNDERS)}.',
        '',
        f'Special names a script may read of its own classes, functions and their objects (annotations, dataclass '
        f'fields, what `functools.wraps` wrapped; `object.__setattr__(self, name, value)` sets an attribute by the rules '
        f'of `setattr`, as a frozen dataclass\'s `__post_init__` does): {_code_list(OWN_DUNDERS)}.',
        '',
        f'Special methods a script may set on its own classes after their class statement (a class decorator\'s '
        f'`cls.__init__ = __init__`; a function of that name may be defined anywhere): {_code_list(OWN_STORE_DUNDERS)}. '
        '`type(name, bases, namespace)` makes a class under the rules of a class statement.',
        '',
        f'Special methods a class may define: {_code_list(DEFINABLE_DUNDERS)}.',
        '',
        '## Builtins',
        '',
        f'Functions and types: {_code_list({*SAFE_BUILTINS, "getattr", "hasattr", "setattr", "delattr", "vars", "print", "open"} - {"None", "True", "False", "Ellipsis", "NotImplemented"})}.',
        '',
        'Constants: `None`, `True`, `False`, `Ellipsis`, `NotImplemented`, `__name__` (`\'__main__\'`), `__debug__`, `__doc__` (None; a class body\'s own docstring in a class body).',
        '',
        f'Exceptions: {_code_list(EXCEPTIONS)}.',
        '',
        '`getattr`, `hasattr`, `setattr` and `delattr` follow the attribute rules above; `vars(x)` is',
        '`x.__dict__` (above), and `vars()` is not available. These, `print` and `open` look and fail as',
        'CPython\'s built-in functions do (`<built-in function print>`, CPython\'s words for arguments',
        'that do not fit). `print` writes',
        'to the captured output (`file=` another object writes there). `open` opens files under the',
        'host\'s mounts (see below).',
        '',
        'Not available (a `NameError` that says what to do instead):',
        '',
    ]
    for name, hint in UNAVAILABLE_BUILTINS.items():
        lines.append(f'- `{name}()`: {hint}')
    lines += [
        '',
        '## Modules',
        '',
        'A script may import these standard library modules (and the modules the host offers):',
        '',
        ', '.join(f'`{name}`' for name in catalog.STDLIB_MODULES) + '.',
        '',
        'Each is a facade: the module\'s public names only, never a module inside it (except',
        '`os.path` and `collections.abc`), never a private name. Importing anything else raises',
        "`ModuleNotFoundError` with CPython's message, the sandbox's words in a note below it, for example:",
        '',
        '```',
        "ModuleNotFoundError: No module named 'requests'",
        catalog.module_note('requests'),
        '```',
        '',
        'and reading a name a module does not offer raises `AttributeError`:',
        '',
        '```',
        'AttributeError: ' + catalog.missing_member('os', 'system', module_names('os')),
        '```',
        '',
    ]
    for name in catalog.STDLIB_MODULES:
        lines += _module_section(name)
    lines += [
        'Modules that are not offered, and why:',
        '',
    ]
    for name, hint in sorted(catalog.MODULE_HINTS.items()):
        lines.append(f'- `{name}`: {hint}')
    lines += [
        '',
        '## Files, environment, clock and randomness',
        '',
        'A script reaches files, environment variables and the clock only through the host, which',
        'grants them at checkout:',
        '',
        '```python',
        'pool.checkout(',
        "    mounts=[corral.Mount('/srv/reports', '/data', mode='read-only')],",
        "    os_access=corral.OsAccess(environ={'REGION': 'eu'}, clock=True),",
        ')',
        '```',
        '',
        '- Files: `open()`, `pathlib.Path`, the `os` and `os.path` file functions and `glob` work on the',
        '  folders the host mounts. `Mount(host_dir, sandbox_path, mode)`: `\'overlay\'` (the default:',
        '  the script may write, but its writes live in the session only), `\'read-only\'` (writes raise',
        '  `OSError: [Errno 30] Read-only file system`) or `\'read-write\'` (writes reach the host). The',
        '  working folder starts at the first mount; `os.chdir` moves it to any folder that exists, and',
        '  the session keeps it. `..` is resolved as Linux resolves it (the folder it leaves must exist);',
        '  absolute paths outside every mount and links that lead outside are refused with',
        '  `PermissionError`. The sandbox has no symbolic links, file descriptors or processes.',
        '- Environment: `os.environ` and `os.getenv` read what `OsAccess(environ=...)` grants;',
        '  assignments stay in the session.',
        '- Clock: `datetime.datetime.now()`, `datetime.datetime.today()`, `datetime.datetime.utcnow()`,',
        '  `datetime.date.today()`, `time.time()`, `time.time_ns()` read the host\'s clock when',
        '  `OsAccess(clock=...)` grants it. `time.monotonic()`, `time.perf_counter()`,',
        '  `time.process_time()`, `time.sleep()` and `asyncio.sleep()` always work.',
        '- Without a grant, these raise `PermissionError`, for example:',
        '',
        '```',
        'PermissionError: the host has not granted clock access (datetime.now(), date.today(), time.time()); '
        'the host grants it with checkout(os_access=OsAccess(clock=True))',
        '```',
        '',
        '- Randomness: `random` is seeded once per session (`checkout(random_seed=...)`, or a fresh seed',
        '  the session reports as `session.random_seed`): the same seed gives the same numbers, and',
        '  `random.seed(n)` gives the numbers CPython gives. `uuid.uuid4()` draws from the session\'s',
        '  seed too, and so does `os.urandom(n)` (at most `OsAccess(max_urandom_bytes=...)` bytes, 1 MiB',
        '  unless the host says otherwise, or an OsAccess that overrides `urandom` gives them).',
        '  There is no `random.SystemRandom`, `os.getrandom` or `secrets`.',
        '',
        '## Output',
        '',
        '`print()`, `sys.stdout.write()`, `sys.stderr.write()`, `pprint.pprint()` and',
        '`calendar.prmonth()` write to the captured output of the feed, in order with the script\'s',
        'host calls (`feed_run(print_callback=...)`).',
        '',
    ]
    return '\n'.join(lines)


def _by_hint(names: dict[str, str | None]) -> list[str]:
    """`name -> hint` as lines of names sharing a hint, in the order of their first name."""
    groups: dict[str | None, list[str]] = {}
    for name in sorted(names):
        groups.setdefault(names[name], []).append(name)
    return [f'  - {_code_list(members)}' + (f': {hint}' if hint else '') for hint, members in groups.items()]


def _package_section(name: str) -> list[str]:
    module = stdlib_module(name)
    real = importlib.import_module(name)
    lines = [f'### `{name}`', '']
    groups: dict[str, list[str]] = {}
    own = []
    for member in module_names(name):
        value = getattr(module, member)
        groups.setdefault(_kind(value), []).append(member)
        if not isinstance(value, types.ModuleType) and value is not getattr(real, member, None):
            own.append(member)
    for kind in ('modules', 'functions', 'classes', 'exceptions', 'constants'):
        if kind in groups:
            lines.append(f'- {kind}: {_code_list(groups[kind])}')
    if own:
        lines.append(f"- the sandbox's own: {_code_list(own)}")
    withheld = catalog.WITHHELD_PACKAGE_NAMES.get(name, frozenset())
    if withheld:
        lines.append('- not offered:')
        lines += _by_hint({member: catalog.MEMBER_HINTS.get((name, member)) for member in withheld})
    lines.append('')
    return lines


def render_packages() -> str:
    """The page's section on numpy, pandas and matplotlib: for each module a script may import
    from them, the names its facade offers, the sandbox's own versions among them, and the names
    it leaves out with the reason a script reads; then the attributes closed on the libraries'
    objects. The facades take each library's public names (`__all__`) less the ones left out, so
    the section names the versions it lists.

    Raises `ImportError` (naming the `data` extra) when one of the libraries is not installed.
    """
    versions = []
    for package in catalog.PACKAGES:
        try:
            versions.append(f'{package} {importlib.metadata.version(package)}')
            importlib.import_module(package)
        except ImportError as error:
            raise ImportError(f"the page lists what {package} offers scripts: install it with pip install -e '.[data]' in corral's clone") from error
    modules = [module for package in catalog.PACKAGES for module in catalog.PACKAGE_MODULES[package]]
    lines = [
        '## Packages: numpy, pandas and matplotlib',
        '',
        f"A pool made with `Pool(packages=[...])` (any of {', '.join(f'`{package!r}`' for package in catalog.PACKAGES)};",
        "installed with `pip install -e '.[data]' in corral's clone`) loads these libraries before its workers lock",
        'down, and its scripts may import these modules besides the standard library:',
        ', '.join(f'`{module}`' for module in modules) + '. pandas and matplotlib bring numpy. In a pool',
        'without them the import fails:',
        '',
        '```',
        "ModuleNotFoundError: No module named 'numpy'",
        catalog.module_note('numpy'),
        '```',
        '',
        'Values cross in a plain form, both ways: a numpy scalar as the Python scalar, an array as',
        "nested lists, a `Series` as `{'name': ..., 'index': [...], 'data': [...]}`, a `DataFrame` as",
        "`{'columns': [...], 'index': [...], 'data': [[row], ...]}`, an `Index` as a list, `NaT` and `NA`",
        "as None; the host also gets the library's own repr of the value (`session.value_repr`). A",
        'figure (or its axes) as the last expression, or `plt.show()`, arrives at the host as',
        "`corral.Image(data=<PNG bytes>, mime_type='image/png')`.",
        '',
        "Each module is a facade, as the standard library's are: the library's public names less the",
        'ones it leaves out, each with the reason a script reads (`AttributeError`, and the same words',
        "from the type checker). The sandbox's own versions take the library's arguments; they read",
        "and write files through `open()` (the session's mounts), draw random numbers from the",
        "session's seed, and show figures as images.",
        '',
        f"Listed for {', '.join(versions)}; another version offers its own public names.",
        '',
    ]
    for name in modules:
        lines += _package_section(name)
    lines += [
        "### Closed on the libraries' objects",
        '',
        'These attributes are closed in the classes themselves, so every way to them (a method read by',
        "name, `getattr`, pandas' `df.agg('to_pickle')`, a subclass's `super()`) meets the refusal:",
        '',
    ]
    for cls, hints in catalog.PACKAGE_ATTRIBUTE_HINTS.items():
        lines.append(f'- `{cls}`:')
        lines += _by_hint(dict(hints))
    lines.append('')
    return '\n'.join(lines)


if __name__ == '__main__':
    sys.stdout.write(render())
