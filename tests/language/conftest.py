"""Fixtures of the language conformance suite: one pool per test module, a fresh session per script."""

from __future__ import annotations

import pytest_asyncio

import corral


@pytest_asyncio.fixture(scope='module', loop_scope='module')
async def pool():
    async with corral.Pool(warm_workers=2) as pool:
        yield pool
