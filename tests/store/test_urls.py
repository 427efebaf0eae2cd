"""open_store: which store a URL names, and the errors for the URLs it refuses."""

from __future__ import annotations

import os

import pytest

import corral
from corral.store import PostgresStore, SQLiteStore

SCHEMES = (
    "the accepted store URLs are 'sqlite:///absolute/path.db', 'sqlite:relative/path.db', "
    "and 'postgresql://user:password@host:port/database' (or 'postgres://...')"
)


@pytest.mark.parametrize(
    ('url', 'path'),
    [
        ('sqlite:///var/lib/app/sessions.db', '/var/lib/app/sessions.db'),
        ('sqlite:////var/lib/app/sessions.db', '/var/lib/app/sessions.db'),  # SQLAlchemy's spelling
        ('SQLite:///x.db', '/x.db'),
        ('sqlite:///my%20sessions.db', '/my sessions.db'),
        ('sqlite:relative/sessions.db', os.path.join(os.getcwd(), 'relative/sessions.db')),
        ('sqlite:sessions.db', os.path.join(os.getcwd(), 'sessions.db')),
        ('sqlite:///:memory:', '/:memory:'),  # a file named ':memory:' in /, like any other file
    ],
)
def test_sqlite_urls(url, path):
    store = corral.open_store(url)
    assert isinstance(store, SQLiteStore)
    assert str(store.path) == path


def test_default_store_is_sqlite():
    assert repr(corral.open_store()) == 'SQLiteStore(None)'
    assert repr(corral.open_store(None)) == 'SQLiteStore(None)'


@pytest.mark.parametrize(
    ('url', 'shown'),
    [
        ('postgresql://corral:secret@db.internal:5433/sessions', 'postgresql://corral@db.internal:5433/sessions'),
        ('postgres://corral@db.internal/sessions', 'postgres://corral@db.internal/sessions'),
        ('postgresql://[::1]:5432/db', 'postgresql://[::1]:5432/db'),
        ('postgresql:///db', 'postgresql:///db'),
        ('postgresql://u:pw@h1:5432,h2:5433/db?password=pw&sslmode=require', 'postgresql://u@h1:5432,h2:5433/db'),
    ],
)
def test_postgres_urls_never_show_the_password(url, shown):
    store = corral.open_store(url)
    assert isinstance(store, PostgresStore)
    assert repr(store) == f'PostgresStore({shown!r})'


@pytest.mark.parametrize(
    ('url', 'text'),
    [
        ('mysql://root:hunter2@db/x', f"unknown store URL 'mysql://root@db/x': {SCHEMES}"),
        ('mysql://db/x?password=hunter2', f"unknown store URL 'mysql://db/x': {SCHEMES}"),
        ('/var/lib/app/sessions.db', f"unknown store URL '/var/lib/app/sessions.db': {SCHEMES}"),
        ('sessions.db', f"unknown store URL 'sessions.db': {SCHEMES}"),
        ('', f"unknown store URL '': {SCHEMES}"),
        ('redis://localhost:6379', f"unknown store URL 'redis://localhost:6379': {SCHEMES}"),
        ('sqlite://', f"the store URL 'sqlite://' names no file: {SCHEMES}"),
        ('sqlite:', f"the store URL 'sqlite:' names no file: {SCHEMES}"),
        (
            'sqlite://sessions.db',
            "the store URL 'sqlite://sessions.db' names a host ('sessions.db'), and a SQLite store is a local file: "
            "write 'sqlite:///absolute/path.db' (three slashes) or 'sqlite:relative/path.db'",
        ),
        ('sqlite:///x.db?mode=ro', "the store URL 'sqlite:///x.db?mode=ro' has a query or fragment, and a SQLite store takes none"),
        ('sqlite::memory:', "a SQLite store needs the path of a database file; got ':memory:'"),
        ('http://[::1', f"unreadable store URL (Invalid IPv6 URL); {SCHEMES}"),
    ],
)
def test_refused_urls(url, text):
    with pytest.raises(ValueError) as info:
        corral.open_store(url)
    assert str(info.value) == text


def test_non_string_url():
    with pytest.raises(TypeError) as info:
        corral.open_store(b'sqlite:///x.db')
    assert str(info.value) == 'a store URL must be a str, not bytes'


def test_stores_are_stores():
    assert isinstance(SQLiteStore('/tmp/x.db'), corral.Store)
    assert isinstance(PostgresStore('postgresql://localhost/x'), corral.Store)
