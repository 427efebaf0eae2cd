"""Fixtures of the stored-session tests."""

from __future__ import annotations

import pytest

from store.postgres_server import drop_tables


@pytest.fixture(params=['sqlite', 'postgres'])
async def url(request, tmp_path):
    """A store's URL, once an empty SQLite file and once the real PostgreSQL server's emptied tables."""
    if request.param == 'sqlite':
        return f'sqlite://{tmp_path}/store.db'
    url = request.getfixturevalue('postgres_server').url
    await drop_tables(url)
    return url
