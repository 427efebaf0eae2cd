"""`open_store`: a store from a URL, or the embedded default; `open_tenant_tables`: the tenant
tables of a store or a store URL."""

from __future__ import annotations

import os
from typing import cast
from urllib.parse import unquote, urlsplit

from .base import Store, redact_url
from .postgres import PostgresStore
from .sqlite import SQLiteStore
from .tenants import TenantTables

__all__ = ['open_store', 'open_tenant_tables', 'STORE_ENV', 'configured_store_url']

#: The environment variable every corral command reads its store URL from when `--store` is not
#: given (`corral serve`, `keys`, `tenants`, `sessions`), as a Kubernetes Secret gives it.
STORE_ENV = 'CORRAL_STORE'

_SCHEMES = (
    "the accepted store URLs are 'sqlite:///absolute/path.db', 'sqlite:relative/path.db', "
    "and 'postgresql://user:password@host:port/database' (or 'postgres://...')"
)


def open_store(url: str | None = None) -> Store:
    """The store a URL names. Opens nothing yet: the first call on the store connects.

    - `None`: the embedded default, a `SQLiteStore` at `$XDG_DATA_HOME/corral/sessions.db` or
      `~/.local/share/corral/sessions.db` (see `default_database_path`).
    - `'sqlite:///abs/path.db'`: a `SQLiteStore` at the absolute path `/abs/path.db` (the URL's path,
      percent-decoded; `sqlite:////abs/path.db`, SQLAlchemy's spelling, is the same file).
      `'sqlite:relative/path.db'` (no slashes after the colon) is relative to the current directory.
    - `'postgresql://user:password@host:port/database'` or `'postgres://...'`: a `PostgresStore`
      (needs the `postgres` extra).

    Raises `ValueError` for any other URL, naming the accepted ones (and showing the URL without its
    password).
    """
    if url is None:
        return SQLiteStore()
    if not isinstance(url, str):
        raise TypeError(f'a store URL must be a str, not {type(url).__name__}')
    try:
        parts = urlsplit(url)
    except ValueError as e:
        raise ValueError(f'unreadable store URL ({e}); {_SCHEMES}') from None
    scheme = parts.scheme.lower()
    if scheme in ('postgresql', 'postgres'):
        return PostgresStore(url)
    if scheme != 'sqlite':
        raise ValueError(f'unknown store URL {redact_url(url)!r}: {_SCHEMES}')
    if parts.netloc:
        raise ValueError(
            f'the store URL {url!r} names a host ({parts.netloc!r}), and a SQLite store is a local file: '
            "write 'sqlite:///absolute/path.db' (three slashes) or 'sqlite:relative/path.db'"
        )
    if parts.query or parts.fragment:
        raise ValueError(f'the store URL {url!r} has a query or fragment, and a SQLite store takes none')
    path = unquote(parts.path)
    if not path:
        raise ValueError(f'the store URL {url!r} names no file: {_SCHEMES}')
    if path.startswith('//'):
        path = '/' + path.lstrip('/')
    return SQLiteStore(path)


def configured_store_url(url: str | None) -> str | None:
    """The store URL a command uses: `url` (its `--store`) when given, else `$CORRAL_STORE`, else
    None (the embedded default)."""
    return url or os.environ.get(STORE_ENV) or None


def open_tenant_tables(store: TenantTables | str | None, what: str) -> tuple[TenantTables, bool]:
    """The tenant tables of `store` (a store that has them, a store URL, or None for the embedded
    default), and whether they were opened here (then their user closes them). `what` names what
    the caller keeps, for the `TypeError` of a store without them."""
    if store is None or isinstance(store, str):
        return cast(TenantTables, open_store(store)), True
    if isinstance(store, TenantTables):
        return store, False
    raise TypeError(f'{type(store).__name__} keeps no {what}: use a SQLiteStore, a PostgresStore or a store URL')
