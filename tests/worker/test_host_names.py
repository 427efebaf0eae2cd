"""A host function may take a builtin's name for a feed; the builtin is the script's again in
the next feed that does not give that function (it was removed with it: `len` a NameError)."""

from __future__ import annotations

import pytest

import corral


async def test_a_builtin_a_host_function_hid_comes_back(session):
    assert await session.feed_run('len([1, 2])', external_lookup={'len': lambda value: 99}) == 99
    assert await session.feed_run('len([1, 2])') == 2
    assert await session.feed_run('len("abc"), abs(-2)', external_lookup={'abs': lambda value: 'host'}) == (3, 'host')
    assert await session.feed_run('abs(-2)', external_lookup={'other': lambda: 1}) == 2
    assert await session.feed_run('input()', external_lookup={'input': lambda: 'typed'}) == 'typed'
    with pytest.raises(corral.SandboxRuntimeError) as error:  # the stand-in of a builtin the sandbox does not offer
        await session.feed_run('input()')
    assert (error.value.exc_type, error.value.message) == ('NameError', 'input() is not available in the sandbox; a script cannot read input; use the host functions you were given')
