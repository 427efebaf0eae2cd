"""`corral run`: exit codes and output."""

import subprocess
import sys
import textwrap

import pytest


def corral(*args, cwd, stdin=None):
    done = subprocess.run([sys.executable, '-m', 'corral', *args], input=stdin, capture_output=True, text=True, cwd=cwd, timeout=120, check=False)
    return done.returncode, done.stdout, done.stderr


def test_run_prints_the_repr_of_the_result(tmp_path):
    (tmp_path / 'script.py').write_text('words = ["a", "b"]\n{w: len(w) for w in words}\n')
    assert corral('run', 'script.py', cwd=tmp_path) == (0, "{'a': 1, 'b': 1}\n", '')


def test_run_prints_a_sandbox_error_on_stderr_and_exits_1(tmp_path):
    (tmp_path / 'script.py').write_text('x = 1\nx.missing\n')
    assert corral('run', 'script.py', cwd=tmp_path) == (
        1,
        '',
        'Traceback (most recent call last):\n'
        '  File "script.py", line 2, in <module>\n'
        '    x.missing\n'
        "AttributeError: 'int' object has no attribute 'missing'\n",
    )


def test_bad_usage_exits_2(tmp_path):
    assert corral('run', 'absent.py', cwd=tmp_path) == (2, '', 'corral: error: cannot read absent.py: No such file or directory\n')
    code, out, err = corral('frobnicate', cwd=tmp_path)
    assert (code, out) == (2, '') and "invalid choice: 'frobnicate'" in err


@pytest.mark.slow
def test_functions_module_and_type_check(tmp_path):
    (tmp_path / 'tools.py').write_text(textwrap.dedent('''
        def add(a: int, b: int) -> int:
            """Add two numbers."""
            return a + b

        async def shout(text: str) -> str:
            return text.upper()

        def _hidden() -> None:
            pass
    '''))
    (tmp_path / 'ok.py').write_text('await shout("hi") + str(add(1, 2))\n')
    assert corral('run', 'ok.py', '--functions', 'tools.py', cwd=tmp_path) == (0, "'HI3'\n", '')
    (tmp_path / 'bad.py').write_text('add("1", 2)\n')
    for checked in ([], ['--type-check']):  # checked by default, as the tools and the demo check
        code, out, err = corral('run', 'bad.py', '--functions', 'tools.py', *checked, cwd=tmp_path)
        assert (code, out) == (1, '')
        assert err.startswith('error[invalid-argument-type]: Argument to function `add` is incorrect\n --> bad.py:1:5\n')
    code, out, err = corral('run', 'bad.py', '--functions', 'tools.py', '--no-type-check', cwd=tmp_path)
    assert (code, out, err.splitlines()[-1]) == (1, '', 'TypeError: can only concatenate str (not "int") to str')
    (tmp_path / 'hidden.py').write_text('_hidden()\n')
    code, out, err = corral('run', 'hidden.py', '--functions', 'tools.py', '--no-type-check', cwd=tmp_path)
    assert (code, err.splitlines()[-1]) == (1, "NameError: name '_hidden' is not defined")


def test_stubs_file(tmp_path):
    (tmp_path / 'api.pyi').write_text('def lookup(key: str) -> int: ...\n')
    (tmp_path / 'script.py').write_text('lookup(1)\n')
    code, out, err = corral('run', 'script.py', '--stubs', 'api.pyi', '--type-check', cwd=tmp_path)
    assert code == 1 and err.startswith('error[invalid-argument-type]: Argument to function `lookup` is incorrect\n')


def test_a_result_too_long_for_repr_is_summarised(tmp_path):
    (tmp_path / 'big.py').write_text('[10**5000, 1]\n')
    assert corral('run', 'big.py', cwd=tmp_path) == (0, '[<int of 16610 bits>, 1]\n', '')


def test_functions_as_a_dotted_name_from_the_current_folder(tmp_path):
    (tmp_path / 'fns.py').write_text('def add(a: int, b: int) -> int:\n    return a + b\n')
    (tmp_path / 'use.py').write_text('add(1, 2)\n')
    assert corral('run', 'use.py', '--functions', 'fns', cwd=tmp_path) == (0, '3\n', '')


#: Runs `python -m corral ARGS...` after a seccomp filter under which unshare(2) fails with EPERM (in
#: the command's process, and so in its zygote), as Docker's default profile does for a container
#: without CAP_SYS_ADMIN. Loaded by a process of its own before exec, not in a `preexec_fn`: a fork
#: of the test process that runs Python (an import) in the child may hang beside another thread.
_WITHOUT_NAMESPACES = (
    'import errno, os, sys, pyseccomp\n'
    'rules = pyseccomp.SyscallFilter(pyseccomp.ALLOW)\n'
    'rules.add_rule(pyseccomp.ERRNO(errno.EPERM), "unshare")\n'
    'rules.load()\n'
    'os.execv(sys.executable, [sys.executable, "-m", "corral", *sys.argv[1:]])'
)


def corral_without_namespaces(*args, cwd):
    done = subprocess.run([sys.executable, '-c', _WITHOUT_NAMESPACES, *args], capture_output=True, text=True, cwd=cwd, timeout=120, check=False)
    return done.returncode, done.stdout, done.stderr


_NAMESPACES = 'ipcns,mntns,netns,pidns,userns,utsns'


@pytest.mark.slow
def test_a_missing_layer_is_refused_with_display_text_and_exit_1(tmp_path):
    (tmp_path / 'script.py').write_text('1 + 1\n')
    for command in (['run', 'script.py'], ['demo'], ['mcp', '--functions', 'tools.py']):
        (tmp_path / 'tools.py').write_text('def add(a: int, b: int) -> int:\n    return a + b\n')
        code, out, err = corral_without_namespaces(*command, cwd=tmp_path)
        assert (code, out) == (1, ''), command
        lines = err.splitlines()
        assert lines[0] == 'refusing to run scripts: these lockdown layers are not available on this machine:', command
        assert lines[-1] == (
            "Or run without them, knowing scripts are then less contained: Pool(skip_layers=['ipcns', 'mntns', 'netns', 'pidns', "
            f"'userns', 'utsns']), or on the command line --skip-layers {_NAMESPACES}."
        ), command
        assert 'Traceback' not in err


@pytest.mark.slow
def test_skip_layers_runs_without_them(tmp_path):
    (tmp_path / 'script.py').write_text('1 + 1\n')
    warning = (
        'corral: warning: scripts run without the lockdown layers ipcns, mntns, netns, pidns, userns, utsns, '
        'so they are less contained (--skip-layers)\n'
    )
    assert corral_without_namespaces('run', 'script.py', '--skip-layers', _NAMESPACES, cwd=tmp_path) == (0, '2\n', warning)
    code, out, err = corral_without_namespaces('demo', '--skip-layers', _NAMESPACES, cwd=tmp_path)
    assert (code, out.splitlines()[0], err) == (0, "['shipped', 'shipped']", warning)


def test_an_unknown_layer_is_bad_usage(tmp_path):
    code, out, err = corral('run', 'script.py', '--skip-layers', 'netns,selinux', cwd=tmp_path)
    assert (code, out, err.splitlines()[-1]) == (
        2,
        '',
        'corral run: error: argument --skip-layers: unknown layer(s) selinux; the layers are language, seccomp, userns, '
        'netns, mntns, pidns, utsns, ipcns, uid, rlimits, no_new_privs',
    )


def test_a_script_from_standard_input(tmp_path):
    assert corral('run', '-', cwd=tmp_path, stdin='1 +\n') == (
        1, '', '  File "main.py", line 1\n    1 +\n       ^\nSyntaxError: invalid syntax\n'
    )
    assert corral('run', '-', cwd=tmp_path, stdin='import sys\nprint("out")\nprint("err", file=sys.stderr)\n6 * 7') == (0, 'out\n42\n', 'err\n')


def test_a_script_ending_in_an_assignment_prints_the_value_as_the_tools_return_it(tmp_path):
    assert corral('run', '-', cwd=tmp_path, stdin='xs = [1, 2]\ntotal, n = sum(xs), len(xs)\n') == (0, '(3, 2)\n', '')
    assert corral('run', '-', '--type-check', cwd=tmp_path, stdin='class A: ...\nA') == (0, "<class '__main__.A'>\n", '')


@pytest.mark.slow
def test_limits(tmp_path):
    code, out, err = corral('run', '-', '--limits', 'wall_time=0.5,memory=256MiB', cwd=tmp_path, stdin='while True:\n    pass')
    assert (code, out, err.splitlines()[-1]) == (1, '', 'TimeoutError: the script ran past the wall_time limit of 0.5 seconds')
    assert corral('run', '-', '--limits', 'output=10', '--limits', 'host_calls=none', cwd=tmp_path, stdin='print("x" * 20)') == (
        0, 'xxxxxxxxxx\n[11 bytes of output left out: the script printed more than the output limit of 10 bytes]\nNone\n', ''
    )
    for spec, error in [
        ('wall_time=x', "--limits: wall_time takes a number of seconds, or none; not 'x'"),
        ('memory=3 parsecs', "--limits: memory takes a number of bytes, with an optional unit (KiB, MiB, GiB, KB, MB, GB), or none; not '3 parsecs'"),
        ('recursion=none', '--limits: recursion cannot be turned off'),
        ('host_calls=1.5', "--limits: host_calls takes a whole number; not '1.5'"),
        ('speed=1', "--limits takes NAME=VALUE pairs separated by commas, NAME one of wall_time, memory, cpu_time, recursion, host_calls, output, code_size, stub_size, type_check_time, type_check_memory, value_items, value_size, grace; not 'speed=1'"),
    ]:
        assert corral('run', '-', '--limits', spec, cwd=tmp_path, stdin='1') == (2, '', f'corral: error: {error}\n')


def test_parse_limits():
    from corral.cli import parse_limits

    assert parse_limits(['wall_time=5,memory=256MiB', 'output=1kb, cpu_time=none', 'wall_time=2.5']) == corral_limits(
        wall_time=2.5, memory=256 * 1024**2, output=1000, cpu_time=None
    )
    assert parse_limits(['value_items=5000,value_size=2MiB,code_size=1KiB,type_check_memory=none']) == corral_limits(
        value_items=5000, value_size=2 * 1024**2, code_size=1024, type_check_memory=None
    )


def corral_limits(**values):
    from corral import Limits

    return Limits(**values)


@pytest.mark.slow
def test_stubs_are_checked_without_type_check_and_must_fit_the_functions(tmp_path):
    (tmp_path / 'api.pyi').write_text('def lookup(key: str) -> int: ...\n')
    code, out, err = corral('run', '-', '--stubs', 'api.pyi', cwd=tmp_path, stdin='lookup(1)\n')
    assert (code, out, err.splitlines()[0]) == (1, '', 'error[invalid-argument-type]: Argument to function `lookup` is incorrect')
    assert corral('run', '-', '--stubs', 'api.pyi', cwd=tmp_path, stdin='lookup("k")\n') == (
        2, '', 'corral: error: the stubs declare `lookup`, which the external_lookup of the first feed does not provide: add it, or remove its stub\n'
    )
    (tmp_path / 'bad.pyi').write_text('def lookup(key: Key) -> int: ...\n')
    code, out, err = corral('run', '-', '--stubs', 'bad.pyi', cwd=tmp_path, stdin='1\n')
    assert (code, out, err.splitlines()[:2]) == (2, '', [
        'corral: error: ty finds errors in the stubs, which would leave their functions unchecked:',
        'error[unresolved-reference]: Name `Key` used when not defined',
    ])


def test_version(tmp_path):
    import importlib.metadata

    assert corral('--version', cwd=tmp_path) == (0, f"corral {importlib.metadata.version('corral')}\n", '')


@pytest.mark.slow
def test_mounts_environment_clock_and_packages(tmp_path):
    (tmp_path / 'reports').mkdir()
    (tmp_path / 'reports' / 'q1.txt').write_text('revenue: 42\n')
    script = "import os\nopen('/data/q1.txt', 'w').write('0')\n[open('/data/q1.txt').read(), os.environ['REGION']]\n"
    assert corral('run', '-', '--mount', 'reports:/data', '--env', 'REGION=eu', cwd=tmp_path, stdin=script) == (0, "['0', 'eu']\n", '')
    assert (tmp_path / 'reports' / 'q1.txt').read_text() == 'revenue: 42\n'  # an overlay: nothing reached the host
    code, out, err = corral('run', '-', '--mount', 'reports:/data:read-only', cwd=tmp_path, stdin="open('/data/q1.txt', 'w')\n")
    assert (code, err.splitlines()[-1]) == (1, "OSError: [Errno 30] Read-only file system: '/data/q1.txt'")
    assert corral('run', '-', '--mount', 'reports:/data:read-write', cwd=tmp_path, stdin="open('/data/q1.txt', 'w').write('1')\n") == (0, '1\n', '')
    assert (tmp_path / 'reports' / 'q1.txt').read_text() == '1'
    clock = 'import datetime\ndatetime.datetime.now().year > 2000\n'
    code, out, err = corral('run', '-', cwd=tmp_path, stdin=clock)
    assert (code, err.splitlines()[-1]) == (
        1, 'PermissionError: the host has not granted clock access (datetime.now(), date.today(), time.time()); '
        'the host grants it with checkout(os_access=OsAccess(clock=True))'
    )
    assert corral('run', '-', '--clock', cwd=tmp_path, stdin=clock) == (0, 'True\n', '')
    code, out, err = corral('run', '-', cwd=tmp_path, stdin='import numpy\n')
    assert code == 1 and '--packages numpy on corral run, corral mcp and corral serve' in err.splitlines()[-1]
    assert corral('run', '-', '--packages', 'numpy', cwd=tmp_path, stdin='import numpy\nint(numpy.arange(4).sum())\n') == (0, '6\n', '')


def test_bad_mounts_and_variables_are_bad_usage(tmp_path):
    code, out, err = corral('run', '-', '--mount', 'absent:/data', cwd=tmp_path, stdin='1\n')
    assert (code, err.splitlines()[-1]) == (2, "corral run: error: argument --mount: Mount host_dir 'absent' is not an existing folder")
    code, out, err = corral('run', '-', '--mount', 'nothing', cwd=tmp_path, stdin='1\n')
    assert (code, err.splitlines()[-1]) == (2, "corral run: error: argument --mount: takes HOST_DIR:PATH[:MODE] (e.g. ./reports:/data:read-only); not 'nothing'")
    code, out, err = corral('run', '-', '--mount', f'{tmp_path}:/data:rw', cwd=tmp_path, stdin='1\n')
    assert (code, err.splitlines()[-1]) == (2, "corral run: error: argument --mount: Mount mode must be one of 'overlay', 'read-only', 'read-write', not 'rw'")
    code, out, err = corral('run', '-', '--env', 'CORRAL_NOT_SET_HERE', cwd=tmp_path, stdin='1\n')
    assert (code, err.splitlines()[-1]) == (2, 'corral run: error: argument --env: CORRAL_NOT_SET_HERE is not set here; give it a value: --env CORRAL_NOT_SET_HERE=VALUE')


@pytest.mark.slow
def test_a_reader_that_leaves_ends_the_demo_quietly(tmp_path):
    done = subprocess.run(f'{sys.executable} -m corral demo | head -1', shell=True, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert (done.stdout, done.stderr) == ("['shipped', 'shipped']\n", '')


@pytest.mark.slow
def test_mcp_over_http_beyond_loopback_warns(tmp_path):
    import socket

    (tmp_path / 'tools.py').write_text('def add(a: int, b: int) -> int:\n    return a + b\n')
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    command = [sys.executable, '-m', 'corral', 'mcp', '--functions', 'tools.py', '--transport', 'http', '--host', '0.0.0.0', '--port', str(port), '--skip-layers', 'uid']
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        lines = [process.stderr.readline(), process.stderr.readline()]
    finally:
        process.terminate()
        process.wait(30)
    assert lines == [
        'corral mcp: warning: scripts run without the lockdown layers uid, so they are less contained (--skip-layers)\n',
        'corral mcp: warning: serving run_code over HTTP on 0.0.0.0, beyond loopback, with no authentication: anyone who can '
        'reach it runs scripts that call your functions; put it behind a proxy that authenticates, or listen on 127.0.0.1\n',
    ]


def test_the_readmes_mcp_client_configuration_starts_corral_mcp():
    import json
    import re
    from pathlib import Path

    from corral.integrations.mcp import _parser

    readme = (Path(__file__).resolve().parents[1] / 'README.md').read_text()
    (block,) = [text for text in re.findall(r'```json\n(.*?)```', readme, re.DOTALL) if 'mcpServers' in text]
    server = json.loads(textwrap.dedent(block))['mcpServers']['corral']
    assert server['command'].endswith('/.venv/bin/corral') and server['args'][0] == 'mcp'
    args = _parser().parse_args(server['args'][1:])
    assert (args.functions, args.transport) == (['/path/to/tools.py'], 'stdio')
