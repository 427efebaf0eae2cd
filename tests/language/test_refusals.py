"""Every refusal, with the exact words a script reads: constructs, builtins, modules, members, host grants.

The texts come from one place (`corral.language.catalog` and the validator); these tests pin them,
so a change to what a model reads is a deliberate one.
"""

from __future__ import annotations

import textwrap

import pytest

import corral
from corral.language.catalog import STDLIB_MODULES, missing_member, missing_module
from corral.language.modules import module_names

MODULES = ', '.join(STDLIB_MODULES)
OS_OFFERS = (
    'DirEntry, F_OK, PathLike, R_OK, SEEK_CUR, SEEK_END, SEEK_SET, W_OK, X_OK, altsep, chdir, curdir, defpath, devnull, environ, '
    'error, extsep, fsdecode, fsencode, fspath, getcwd, getenv, linesep, listdir, lstat, makedirs, mkdir, name, pardir, '
    'path, pathsep, remove, removedirs, rename, replace, rmdir, scandir, sep, stat, stat_result, strerror, unlink, urandom, walk'
)
NO_FILES = (
    "PermissionError: [Errno 13] Permission denied (the host has not granted file access; the host grants it with "
    "checkout(mounts=[Mount(host_dir, sandbox_path)])): '{}'"
)
NO_CLOCK = (
    'PermissionError: the host has not granted clock access (datetime.now(), date.today(), time.time()); '
    'the host grants it with checkout(os_access=OsAccess(clock=True))'
)
NO_ENVIRON = (
    'PermissionError: the host has not granted access to environment variables; the host grants it with '
    'checkout(os_access=OsAccess(environ={...}))'
)
CODE = 'a script cannot run code from a string; write the code in the script itself'

REFUSALS = [
    # ----- constructs ------------------------------------------------------------------------------
    ('import-star', 'from json import *',
     "SyntaxError: 'from json import *' is not supported in the sandbox; import the names you need: from json import name1, name2"),
    ('relative-import', 'from . import x',
     'SyntaxError: relative imports are not supported in the sandbox; import modules by their name'),
    ('future-import-late', 'x = 1\nfrom __future__ import annotations',
     'SyntaxError: from __future__ imports must occur at the beginning of the file'),
    ('future-import-unknown', 'from __future__ import braces', 'SyntaxError: not a chance'),
    ('dunder-class-store', 'class A: pass\nA().__class__ = int',
     "SyntaxError: attribute '__class__' cannot be assigned in the sandbox: names like __this__ are refused except a short list; use type(x) instead"),
    ('dunder-bases', '().__class__.__bases__',
     "SyntaxError: attribute '__bases__' cannot be read in the sandbox: names like __this__ are refused except a short list; use type(x).mro()"),
    ('dict-of-foreign-object', 'import json\njson.__dict__',
     "AttributeError: the __dict__ of module objects cannot be read in the sandbox: only objects and classes the script defines show theirs; read the attributes by name"),
    ('asyncio-run-in-a-function', 'import asyncio\nasync def main():\n    return 1\ndef f():\n    return asyncio.run(main())\nf()',
     'RuntimeError: asyncio.run() cannot be called from a running event loop: the script already runs in an event loop: call '
     'asyncio.run(main()) at the top level of the script, where the sandbox awaits it on that loop, or await the coroutine (await main())'),
    ('function-globals', 'def f(): pass\nf.__globals__',
     "SyntaxError: attribute '__globals__' cannot be read in the sandbox: names like __this__ are refused except a short list; function internals are not available in the sandbox"),
    ('generator-frame', 'g = (x for x in [1])\ng.gi_frame',
     "SyntaxError: attribute 'gi_frame' is not available in the sandbox: it reaches interpreter internals (frames, code, tracebacks, generators or the event loop)"),
    ('traceback', 'try:\n    1/0\nexcept Exception as e:\n    e.__traceback__',
     "SyntaxError: attribute '__traceback__' cannot be read in the sandbox: names like __this__ are refused except a short list; tracebacks are not available to scripts; an uncaught exception shows its traceback to the host"),
    ('builtins-name', '__builtins__',
     "SyntaxError: name '__builtins__' is not available in the sandbox: names like __this__ are refused; call builtins by their name"),
    ('import-dunder', "__import__('os')",
     "SyntaxError: name '__import__' is not available in the sandbox: names like __this__ are refused; use an import statement"),
    ('getattr-dunder', "getattr(1, '__sub' + 'classes__')",
     "AttributeError: attribute '__subclasses__' cannot be read in the sandbox: names like __this__ are refused except a short list; class hierarchies cannot be walked in the sandbox"),
    ('private-foreign', 'import asyncio\nasyncio.Queue()._queue',
     "AttributeError: attribute '_queue' is private: the sandbox allows names starting with '_' only on objects of classes the script defines (Queue objects are not); use the public API"),
    # ----- builtins ----------------------------------------------------------------------------------
    ('eval', "eval('1')", f'NameError: eval() is not available in the sandbox; {CODE}'),
    ('exec', "exec('x = 1')", f'NameError: exec() is not available in the sandbox; {CODE}'),
    ('compile', "compile('1', 's', 'eval')", f'NameError: compile() is not available in the sandbox; {CODE}'),
    ('globals', 'globals()', 'NameError: globals() is not available in the sandbox; use your variables directly, or keep values in a dict'),
    ('locals', 'locals()', 'NameError: locals() is not available in the sandbox; use your variables directly, or keep values in a dict'),
    ('vars', 'vars()', 'NameError: vars() without an argument is not available in the sandbox; use your variables directly, or keep values in a dict'),
    ('input', 'input()', 'NameError: input() is not available in the sandbox; a script cannot read input; use the host functions you were given'),
    ('breakpoint', 'breakpoint()', 'NameError: breakpoint() is not available in the sandbox; debuggers are not available in the sandbox'),
    ('help', 'help(len)', 'NameError: help() is not available in the sandbox; help is not available in the sandbox'),
    ('exit', 'exit()', 'NameError: exit() is not available in the sandbox; end the script, or raise an exception'),
    ('memoryview', "memoryview(b'x')", 'NameError: memoryview() is not available in the sandbox; use bytes or bytearray'),
    # ----- modules and members -----------------------------------------------------------------------
    ('import-third-party', 'import requests',
     "ModuleNotFoundError: No module named 'requests'\na script has no network access; call the host functions you were "
     f'given. A script may import: {MODULES}'),
    ('import-unknown', 'import foo',
     f"ModuleNotFoundError: No module named 'foo'\nA script may import: {MODULES}"),
    ('import-subprocess', 'import subprocess',
     "ModuleNotFoundError: No module named 'subprocess'\na script cannot run commands, processes or threads. A script may "
     f'import: {MODULES}'),
    ('import-secrets', 'import secrets',
     "ModuleNotFoundError: No module named 'secrets'\nrandomness comes from the session's seeded random module "
     f'(random.randbytes, random.choice, uuid.uuid4). A script may import: {MODULES}'),
    ('import-submodule', 'import json.decoder',
     "ModuleNotFoundError: No module named 'json.decoder'\nthe sandbox offers 'json' itself, not its submodules. A script "
     f'may import: {MODULES}'),
    ('os-system', "import os\nos.system('ls')",
     f"AttributeError: module 'os' has no attribute 'system' in the sandbox: a script cannot run commands or processes. os offers: {OS_OFFERS}"),
    ('from-os-import-system', 'from os import system',
     "ImportError: cannot import name 'system' from 'os' (unknown location)\nmodule 'os' has no attribute 'system' in the sandbox: a script "
     f'cannot run commands or processes. os offers: {OS_OFFERS}'),
    ('os-getrandom', 'import os\nos.getrandom(4)',
     "AttributeError: module 'os' has no attribute 'getrandom' in the sandbox: randomness comes from the session's seed: "
     f'os.urandom(n) or random.randbytes(n). Did you mean: urandom? os offers: {OS_OFFERS}'),
    ('json-typo', "import json\njson.dump_s({})",
     "AttributeError: module 'json' has no attribute 'dump_s' in the sandbox. Did you mean: dumps, dump? json offers: "
     'JSONDecodeError, JSONDecoder, JSONEncoder, dump, dumps, load, loads'),
    ('json-decoder', 'import json\njson.decoder',
     "AttributeError: module 'json' has no attribute 'decoder' in the sandbox: the sandbox offers json's own names: "
     'json.JSONDecodeError, json.JSONDecoder, json.JSONEncoder. json offers: JSONDecodeError, JSONDecoder, JSONEncoder, '
     'dump, dumps, load, loads'),
    ('sys-settrace', 'import sys\nsys.settrace(None)',
     "AttributeError: module 'sys' has no attribute 'settrace' in the sandbox: interpreter internals are not available in "
     'the sandbox. sys offers: byteorder, exit, float_info, float_repr_style, get_int_max_str_digits, getdefaultencoding, '
     'getrecursionlimit, getsizeof, hash_info, hexversion, int_info, intern, maxsize, maxunicode, platform, '
     'set_int_max_str_digits, setrecursionlimit, stderr, stdout, version, version_info'),
    ('random-systemrandom', 'import random\nrandom.SystemRandom()',
     "AttributeError: module 'random' has no attribute 'SystemRandom' in the sandbox: randomness comes from the session's "
     "seeded generator; use random.Random() or the module functions. random offers: Random, betavariate, choice, choices, "
     'expovariate, gammavariate, gauss, getrandbits, getstate, lognormvariate, normalvariate, paretovariate, randbytes, '
     'randint, random, randrange, sample, seed, setstate, shuffle, triangular, uniform, vonmisesvariate, weibullvariate'),
    ('time-localtime', 'import time\ntime.localtime()',
     "AttributeError: module 'time' has no attribute 'localtime' in the sandbox: the sandbox has no local time zone: use "
     'time.gmtime(), or datetime with zoneinfo. time offers: gmtime, monotonic, monotonic_ns, perf_counter, '
     'perf_counter_ns, process_time, process_time_ns, sleep, strftime, strptime, struct_time, time, time_ns'),
    ('asyncio-get-event-loop', 'import asyncio\nasyncio.get_event_loop()',
     missing_member('asyncio', 'get_event_loop', module_names('asyncio'))),
    ('contextlib-redirect-stdout', 'import contextlib\ncontextlib.redirect_stdout',
     "AttributeError: module 'contextlib' has no attribute 'redirect_stdout' in the sandbox: write to a buffer with "
     "print(..., file=buffer). contextlib offers: AbstractAsyncContextManager, AbstractContextManager, AsyncContextDecorator, "
     'AsyncExitStack, ContextDecorator, ExitStack, aclosing, asynccontextmanager, closing, contextmanager, nullcontext, suppress'),
    # ----- what the host has not granted ---------------------------------------------------------------
    ('open-without-mount', "open('data.csv')", NO_FILES.format('data.csv')),
    ('path-without-mount', "import pathlib\npathlib.Path('/data/x.txt').read_text()", NO_FILES.format('/data/x.txt')),
    ('listdir-without-mount', "import os\nos.listdir('/tmp')", NO_FILES.format('/tmp')),
    ('write-without-mount', "open('out.txt', 'w')", NO_FILES.format('out.txt')),
    ('datetime-now', 'import datetime\ndatetime.datetime.now()', NO_CLOCK),
    ('date-today', 'from datetime import date\ndate.today()', NO_CLOCK),
    ('time-time', 'import time\ntime.time()', NO_CLOCK),
    ('clock-getattr', "import datetime\ngetattr(datetime.datetime, 'now')()", NO_CLOCK),
    ('clock-attrgetter', "import datetime, operator\noperator.attrgetter('now')(datetime.datetime)()", NO_CLOCK),
    ('clock-methodcaller', "import datetime, operator\noperator.methodcaller('today')(datetime.date)", NO_CLOCK),
    ('clock-instance', 'import datetime\ndatetime.date(2020, 1, 1).today()', NO_CLOCK),
    ('clock-subclass-super', 'import datetime\nclass D(datetime.datetime):\n    @classmethod\n    def now(cls, tz=None):\n        return super().now(tz)\nD.now()', NO_CLOCK),
    ('clock-class-pattern', 'import datetime\nmatch datetime.datetime(2020, 1, 1):\n    case datetime.datetime(now=f):\n        f()',
     "SyntaxError: a class pattern cannot read 'now' in the sandbox; match without it and read .now in the case body"),
    ('getenv', "import os\nos.getenv('HOME')", NO_ENVIRON),
    ('environ', "import os\nos.environ['HOME']", NO_ENVIRON),
    ('open-fd', 'open(0)', 'PermissionError: open() of a file descriptor is not available in the sandbox; open files by their path'),
]


@pytest.mark.asyncio(loop_scope='module')
@pytest.mark.parametrize(('code', 'expected'), [pytest.param(code, expected, id=name) for name, code, expected in REFUSALS])
async def test_refusal(pool, code: str, expected: str) -> None:
    async with pool.checkout() as session:
        with pytest.raises((corral.SandboxSyntaxError, corral.SandboxRuntimeError)) as info:
            await session.feed_run(textwrap.dedent(code), print_callback=lambda stream, text: None)
    # the exception's line, and the note an import's refusal carries below it
    last = '\n'.join(info.value.display().rstrip('\n').splitlines()[-expected.count('\n') - 1:])
    if not expected.startswith(('SyntaxError', 'NameError', 'AttributeError', 'ImportError', 'ModuleNotFoundError', 'PermissionError', 'TypeError', 'RuntimeError')):
        expected = 'AttributeError: ' + expected
    assert last == expected


def test_messages_come_from_the_catalog() -> None:
    assert missing_module('requests').startswith("No module named 'requests': a script has no network access")
    assert missing_member('os', 'system', module_names('os')).startswith("module 'os' has no attribute 'system' in the sandbox")
