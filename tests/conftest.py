import pytest

import corral


@pytest.fixture
async def pool():
    async with corral.Pool() as pool:
        yield pool


@pytest.fixture
async def session(pool):
    async with pool.checkout() as session:
        yield session
