"""Fixtures of the red-team suite: one pool per test module, a fresh session (worker) per script.

Every attack runs end to end through a real `corral.Pool`, with the language layer alone: nothing
here depends on the OS lockdown (seccomp, rlimits) that lands separately.
"""

from __future__ import annotations

import pytest_asyncio

import corral


@pytest_asyncio.fixture(scope='module', loop_scope='module')
async def pool():
    async with corral.Pool(warm_workers=2) as pool:
        yield pool
