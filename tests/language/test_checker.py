"""The type checker knows the sandbox's subset, and says what the run time says.

- Everything that runs is accepted: every builtin, exception class and module name the sandbox
  offers, and every conformance script (their only diagnostics are ordinary type errors).
- What does not run is a diagnostic before anything runs, in ty's format, whose `info:` line is
  the exact text of the error the script would get at run time.
"""

from __future__ import annotations

import re

import pytest
import pytest_asyncio

import corral
from corral.language import catalog
from corral.language.builtins import EXCEPTIONS, SAFE_BUILTINS
from corral.language.modules import module_names
from corral.typecheck import TypeChecker

from . import cases_stdlib, cases_syntax

pytestmark = pytest.mark.asyncio(loop_scope='module')

MODULES = ', '.join(catalog.STDLIB_MODULES)


@pytest_asyncio.fixture(scope='module', loop_scope='module')
async def checker():
    tc = TypeChecker()
    yield tc
    await tc.aclose()


async def test_every_offered_name_is_accepted(checker):
    lines = []
    for index, module in enumerate(catalog.STDLIB_MODULES):
        lines.append(f'import {module} as m{index}')
        lines += [f'm{index}.{name}' for name in module_names(module)]
    names = sorted({*SAFE_BUILTINS, *EXCEPTIONS, 'getattr', 'hasattr', 'setattr', 'delattr', 'print', 'open'})
    lines += [f'{name}' for name in names]
    assert len(lines) > 900
    result = await checker.check('\n'.join(lines) + '\n') or ''
    headers = [line for line in result.splitlines() if re.match(r'^(error|warning)\[', line)]
    # deprecated names (abc.abstractproperty, re.template ...) run, and ty says they are deprecated
    assert [h for h in headers if not h.startswith('warning[deprecated]')] == []


_SANDBOX_DIAGNOSTIC = re.compile(
    r'^(?:error|warning)\[[a-z-]+\]: (?:Module `[^`]+` has no member|Cannot resolve imported module|Name `[^`]+` used when not defined|Submodule `)',
    re.M,
)


@pytest.mark.parametrize('c', [pytest.param(c, id=c.id) for c in [*cases_syntax.CASES, *cases_stdlib.CASES]])
async def test_conformance_scripts_have_no_sandbox_diagnostics(checker, c):
    # the scripts may have ordinary type errors on purpose (an abstract class instantiated, a frozen
    # dataclass assigned); none may be about a name the sandbox offers
    result = await checker.check(c.code) or ''
    assert _SANDBOX_DIAGNOSTIC.findall(result) == []


async def test_missing_module_in_the_format_of_ty(checker):
    assert await checker.check('import os\nimport subprocess\nsubprocess.run(["ls"])\n') == (
        'error[import-not-found]: Cannot resolve imported module `subprocess`\n'
        ' --> main.py:2:8\n'
        '  |\n'
        '1 | import os\n'
        '2 | import subprocess\n'
        '  |        ^^^^^^^^^^\n'
        '3 | subprocess.run(["ls"])\n'
        '  |\n'
        "info: No module named 'subprocess': a script cannot run commands, processes or threads. A script may import: "
        f'{MODULES}'
    )


async def test_unknown_module_replaces_the_search_paths(checker):
    result = await checker.check('from requests import get\n', modules={'billing': 'def f() -> int: ...\n'})
    assert result == (
        'error[import-not-found]: Cannot resolve imported module `requests`\n'
        ' --> main.py:1:6\n'
        '  |\n'
        '1 | from requests import get\n'
        '  |      ^^^^^^^^\n'
        "info: No module named 'requests': a script has no network access; call the host functions you were given. "
        f"A script may import: {MODULES}; and the host's modules: billing"
    )


# (script, ty's header, the run-time error)
AGREEMENT = [
    ('import subprocess', 'error[import-not-found]: Cannot resolve imported module `subprocess`', "ModuleNotFoundError: No module named 'subprocess'\n" + catalog.module_note('subprocess')),
    ('import numpy', 'error[import-not-found]: Cannot resolve imported module `numpy`', "ModuleNotFoundError: No module named 'numpy'\n" + catalog.module_note('numpy')),
    ('import json.decoder', 'error[import-not-found]: Cannot resolve imported module `json.decoder`', "ModuleNotFoundError: No module named 'json.decoder'\n" + catalog.module_note('json.decoder')),
    ('import os\nos.system("ls")', 'error[unresolved-attribute]: Module `os` has no member `system`', 'AttributeError: ' + catalog.missing_member('os', 'system', module_names('os'))),
    ('import asyncio\nasyncio.get_event_loop()', 'error[unresolved-attribute]: Module `asyncio` has no member `get_event_loop`', 'AttributeError: ' + catalog.missing_member('asyncio', 'get_event_loop', module_names('asyncio'))),
    ('import time\ntime.localtime()', 'error[unresolved-attribute]: Module `time` has no member `localtime`', 'AttributeError: ' + catalog.missing_member('time', 'localtime', module_names('time'))),
    ('import random\nrandom.SystemRandom()', 'error[unresolved-attribute]: Module `random` has no member `SystemRandom`', 'AttributeError: ' + catalog.missing_member('random', 'SystemRandom', module_names('random'))),
    ('import json\njson.decoder', 'warning[possibly-missing-submodule]: Submodule `decoder` might not have been imported', 'AttributeError: ' + catalog.missing_member('json', 'decoder', module_names('json'))),
    ("eval('1')", 'error[unresolved-reference]: Name `eval` used when not defined',
     'NameError: eval() is not available in the sandbox; a script cannot run code from a string; write the code in the script itself'),
    ('input()', 'error[unresolved-reference]: Name `input` used when not defined',
     'NameError: input() is not available in the sandbox; a script cannot read input; use the host functions you were given'),
]


@pytest.mark.parametrize(('code', 'header', 'runtime'), [pytest.param(*row, id=row[0].splitlines()[-1]) for row in AGREEMENT])
async def test_checker_and_run_time_say_the_same(pool, checker, code, header, runtime):
    diagnostics = await checker.check(code + '\n')
    assert diagnostics is not None
    assert diagnostics.splitlines()[0] == header
    info = diagnostics.splitlines()[-1]
    exception, _, note = runtime.partition('\n')
    if note:  # an import's: CPython's message, the sandbox's words in a note; the checker's info line has both
        assert info == 'info: ' + catalog.missing_module(exception.split("'")[1])
        assert info.endswith(note)
    else:
        assert info == 'info: ' + runtime.partition(': ')[2]
    async with pool.checkout() as session:
        with pytest.raises(corral.SandboxRuntimeError) as error:
            await session.feed_run(code)
    assert error.value.display().splitlines()[-runtime.count('\n') - 1:] == runtime.splitlines()


async def test_from_import_of_a_withheld_name(pool, checker):
    diagnostics = await checker.check('from os import popen, path\nfrom json import decoder\n')
    assert diagnostics is not None
    assert [line for line in diagnostics.splitlines() if line.startswith(('error', 'info'))] == [
        'error[import-not-found]: Module `os` has no member `popen`',
        'info: ' + catalog.missing_member('os', 'popen', module_names('os')),
        'error[import-not-found]: Module `json` has no member `decoder`',
        'info: ' + catalog.missing_member('json', 'decoder', module_names('json')),
    ]


async def test_host_modules_and_their_packages_are_not_reported(checker):
    assert await checker.check('import billing\nbilling.f()\n', modules={'billing': 'def f() -> int: ...\n'}) is None


async def test_sandbox_stubs_keep_line_numbers_of_typeshed(checker):
    # removed definitions are blank lines: ty's positions in stdlib stubs stay those of its typeshed
    result = await checker.check('len(1)')
    assert result is not None and '--> stdlib/builtins.pyi:4201:5' in result


async def test_a_type_checked_session_refuses_before_running(pool):
    ran: list[str] = []
    async with pool.checkout(type_check=True) as session:
        await session.feed_run('import os\nx = 1', print_callback=lambda stream, text: ran.append(text))
        with pytest.raises(corral.SandboxTypingError) as info:
            await session.feed_run("print('ran')\nimport subprocess\nos.system('ls')", print_callback=lambda stream, text: ran.append(text))
    text = info.value.display()
    assert ran == []
    assert ' --> main.py:2:8\n' in text and ' --> main.py:3:1\n' in text  # numbered in this script, not the session's
    assert 'info: ' + catalog.missing_module('subprocess') in text
    assert 'info: ' + catalog.missing_member('os', 'system', module_names('os')) in text
