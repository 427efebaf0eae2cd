"""Where stored sessions live: a `Store` keeps the signed state bytes of each session and its lease.

    store = open_store('sqlite:///var/lib/app/sessions.db')   # or 'postgresql://...', or None: the default
    await store.acquire(session_id, holder=token, ttl=30)
    await store.put(session_id, state, holder=token, generation=1)
    await store.append(session_id, record, holder=token, generation=2)
    stored = await store.get(session_id)   # StoredState(state, records, generation)

`SQLiteStore` is the embedded default (one file, the processes of one machine); `PostgresStore`
serves many machines. Any object with the `Store` methods can stand in for them.
"""

from .base import Store, StoredState
from .postgres import PostgresStore
from .sqlite import SQLiteStore, default_database_path
from .url import open_store

__all__ = ['PostgresStore', 'SQLiteStore', 'Store', 'StoredState', 'default_database_path', 'open_store']
