"""corral refuses, with a text that says what to do, a Python it does not know and a system its workers cannot run on."""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import pytest

import corral
from corral.supported import PYTHONS, platform_refusal, python_refusal

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'src')


def test_the_supported_pythons_are_accepted():
    assert [python_refusal('cpython', (*version, 0)) for version in PYTHONS] == [None, None, None]
    assert python_refusal(sys.implementation.name, sys.version_info) is None


@pytest.mark.parametrize(
    ('implementation', 'version', 'shown'),
    [('cpython', (3, 10, 13), 'CPython 3.10.13'), ('cpython', (3, 14, 0), 'CPython 3.14.0'), ('pypy', (3, 11, 9), 'pypy 3.11.9')],
)
def test_another_python_is_refused_saying_which_run_corral(implementation, version, shown):
    assert python_refusal(implementation, version) == (
        f'corral runs on CPython 3.11, 3.12 and 3.13; this is {shown}. '
        'Make a virtual environment with one of those (python3.12 -m venv .venv) and install corral in it'
    )


def _older_python() -> str | None:
    found = sorted(glob.glob(os.path.expanduser('~/.pyenv/versions/3.1[0]*/bin/python3')) + glob.glob('/usr/bin/python3.10'))
    return found[0] if found else None


@pytest.mark.skipif(_older_python() is None, reason='no Python 3.10 on this machine (pyenv install 3.10, or apt-get install python3.10)')
def test_import_corral_on_an_older_python_says_why():
    python = _older_python()
    assert python is not None
    result = subprocess.run([python, '-c', 'import corral'], env={'PYTHONPATH': SRC}, capture_output=True, text=True, timeout=60)
    version = subprocess.run([python, '-c', "import sys; print('.'.join(map(str, sys.version_info[:3])))"], capture_output=True, text=True).stdout.strip()
    assert (result.returncode, result.stderr.splitlines()[-1]) == (
        1,
        f'ImportError: corral runs on CPython 3.11, 3.12 and 3.13; this is CPython {version}. '
        'Make a virtual environment with one of those (python3.12 -m venv .venv) and install corral in it',
    )


def test_workers_run_on_linux_only():
    assert platform_refusal('linux') is None
    assert platform_refusal('darwin') == (
        "corral's workers run on Linux, locked down with its user namespaces and seccomp; this is darwin. "
        'Run them on a Linux machine or container (corral serve there) and reach them with corral.RemotePool'
    )


async def test_a_pool_on_another_system_is_refused_as_it_starts(monkeypatch):
    monkeypatch.setattr(sys, 'platform', 'darwin')
    with pytest.raises(corral.SandboxInsecureError) as info:
        async with corral.Pool(warm_workers=0) as pool, pool.checkout():
            pass
    assert str(info.value) == platform_refusal('darwin')
