"""A test that needs a lockdown layer the machine does not give is skipped saying which and how to
enable it (tests/conftest.py), unless CORRAL_TESTS_NEED_LOCKDOWN is set, as CI sets it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(TESTS), 'src')

#: A test module run on its own: seccomp answers unshare(2) with EPERM in its process, as Docker's
#: default profile does, so the pool it starts is refused.
REFUSED = '''
import errno

import pyseccomp
import pytest

import corral


@pytest.mark.asyncio
async def test_needs_the_sandbox():
    rules = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    rules.add_rule(pyseccomp.ERRNO(errno.EPERM), 'unshare')
    rules.load()
    async with corral.Pool(warm_workers=0) as pool, pool.checkout() as session:
        await session.feed_run('1')
'''


def _run(tmp_path: os.PathLike[str], **env: str) -> list[str]:
    (tmp_path / 'test_refused.py').write_text(REFUSED)  # type: ignore[operator]
    done = subprocess.run(
        [sys.executable, '-m', 'pytest', '-q', '-rs', '-p', 'conftest', '-p', 'no:cacheprovider', 'test_refused.py'],
        cwd=tmp_path, env={'PATH': os.environ.get('PATH', ''), 'PYTHONPATH': f'{TESTS}:{SRC}', **env},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return done.stdout.splitlines()


@pytest.mark.slow
def test_a_missing_layer_skips_the_test_with_the_refusal(tmp_path):
    lines = _run(tmp_path)
    skipped = next(line for line in lines if line.startswith('SKIPPED'))
    assert skipped == (
        'SKIPPED [1] test_refused.py:10: this machine does not give what the sandbox needs: refusing to run scripts: '
        'these lockdown layers are not available on this machine:'
    )
    assert '- userns: unshare(CLONE_NEWUSER) failed: Operation not permitted' in '\n'.join(lines)
    assert 'To enable them:' in lines
    assert lines[-1].startswith('1 skipped in ')


@pytest.mark.slow
def test_ci_fails_it_instead(tmp_path):
    lines = _run(tmp_path, CORRAL_TESTS_NEED_LOCKDOWN='1')
    assert 'E           corral.errors.SandboxInsecureError: refusing to run scripts: these lockdown layers are not available on this machine:' in lines
    assert lines[-1].startswith('1 failed in ')
