"""The `corral keys`, `corral tenants` and `corral sessions` commands: a server's API keys, tenant
quotas and stored sessions.

    corral keys create --tenant NAME [--store URL]      prints a new key, once
    corral keys list [--store URL]                      key id, tenant, created, revoked
    corral keys revoke KEY_ID [--store URL]
    corral tenants set NAME [--concurrent-sessions N] [--stored-bytes SIZE] [--cpu-seconds-per-hour S] [--store URL]
    corral tenants list [--store URL]                   each tenant's own quotas ('default': the server's)
    corral sessions list [--store URL [--tenant NAME] | --server URL [--api-key KEY]]
    corral sessions delete ID... [--store URL [--tenant NAME] | --server URL [--api-key KEY]]
    corral sessions expire --retention DURATION [--store URL]   delete every tenant's sessions untouched that long

`--store` is the server's store URL (`sqlite:///path.db`, `postgresql://...`; default: `$CORRAL_STORE`
as `corral serve` reads it, else the embedded SQLite store). A quota given as `default` goes back to the server's default; sizes take units
(`512MiB`, `2GB`). `corral sessions` works on a store (`--tenant`: whose sessions; default `''`, the
tenant of a server without keys) or, with `--server` (default `$CORRAL_URL`), on a running server as
the tenant of the API key (`--api-key`, default `$CORRAL_API_KEY`). A DURATION is a number of
seconds, or of minutes, hours or days with `m`, `h`, `d` (`90m`, `30d`). Exit status 0; 1 when the
store or the server fails, or has no such key or session; 2 for bad usage (a bad name or value).
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import CorralError
from ..store.tenants import QUOTA_NAMES
from ..store.base import check_tenant
from ..store.url import configured_store_url, open_store
from .keys import KeyRing
from .quotas import Quotas

__all__ = ['add_commands', 'run', 'parse_duration']

_SIZE = re.compile(r'(\d+)\s*(|b|kb|mb|gb|tb|kib|mib|gib|tib)', re.IGNORECASE | re.ASCII)
_UNITS = {'': 1, 'b': 1, 'kb': 10**3, 'mb': 10**6, 'gb': 10**9, 'tb': 10**12, 'kib': 2**10, 'mib': 2**20, 'gib': 2**30, 'tib': 2**40}
_DEFAULT = 'default'


def _count(text: str) -> int | str:
    if text == _DEFAULT:
        return text
    if not text.isascii() or not text.isdigit():
        raise argparse.ArgumentTypeError(f"takes a whole number or 'default', not {text!r}")
    return int(text)


def _size(text: str) -> int | str:
    if text == _DEFAULT:
        return text
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"takes a number of bytes with an optional unit (KiB, MiB, GiB, KB, MB, GB) or 'default', not {text!r}")
    return int(match[1]) * _UNITS[match[2].lower()]


def _seconds(text: str) -> float | str:
    if text == _DEFAULT:
        return text
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes a number of seconds or 'default', not {text!r}") from None
    if not (value >= 0 and value != float('inf')):
        raise argparse.ArgumentTypeError(f"takes a number of seconds, 0 or more, or 'default', not {text!r}")
    return value


_DURATION = re.compile(r'(\d+(?:\.\d+)?)\s*(s|m|h|d|)', re.IGNORECASE | re.ASCII)
_DURATION_UNITS = {'': 1, 's': 1, 'm': 60, 'h': 3600, 'd': 86400}


def parse_duration(text: str) -> float:
    """Seconds from a duration: a number of seconds, or with a unit `s`, `m`, `h`, `d` (`30d`,
    `12h`, `90m`, `3600`); above 0. Raises `argparse.ArgumentTypeError` naming the forms."""
    match = _DURATION.fullmatch(text.strip())
    seconds = float(match[1]) * _DURATION_UNITS[match[2].lower()] if match else 0.0
    if not (math.isfinite(seconds) and seconds > 0):
        raise argparse.ArgumentTypeError(f'takes a duration above 0: seconds, or a number with m, h or d (90m, 30d); not {text!r}')
    return seconds


#: Each quota's option: how its value is read, and the placeholder `--help` shows.
_QUOTA_OPTIONS = {'concurrent_sessions': (_count, 'N'), 'stored_bytes': (_size, 'SIZE'), 'cpu_seconds_per_hour': (_seconds, 'SECONDS')}


def add_commands(commands: Any) -> None:
    """Add `keys` and `tenants` to the `corral` command's subparsers."""
    store = argparse.ArgumentParser(add_help=False)
    store.add_argument(
        '--store', metavar='URL', help="the server's store: sqlite:///path.db or postgresql://... (default: $CORRAL_STORE, else the embedded SQLite store)"
    )
    keys = commands.add_parser('keys', help="a server's API keys").add_subparsers(dest='action', required=True)
    create = keys.add_parser('create', parents=[store], help='make a key for a tenant and print it (shown once)')
    create.add_argument('--tenant', required=True, help='the tenant the key acts as')
    keys.add_parser('list', parents=[store], help='list the keys (never their secrets)')
    revoke = keys.add_parser('revoke', parents=[store], help='revoke a key, for good')
    revoke.add_argument('key_id', metavar='KEY_ID', help='the key id, as `corral keys list` shows it')
    tenants = commands.add_parser('tenants', help="a server's tenants and their quotas").add_subparsers(dest='action', required=True)
    set_ = tenants.add_parser('set', parents=[store], help="set a tenant's quotas")
    set_.add_argument('tenant', metavar='NAME')
    for name, (parse, metavar) in _QUOTA_OPTIONS.items():
        set_.add_argument('--' + name.replace('_', '-'), dest=name, type=parse, metavar=metavar, help=f"the tenant's {name} quota, or 'default'")
    tenants.add_parser('list', parents=[store], help="each tenant's own quotas")
    where = argparse.ArgumentParser(add_help=False, parents=[store])
    where.add_argument('--tenant', default='', help="whose sessions, in a store (default: '', the tenant of a server without keys)")
    where.add_argument('--server', metavar='URL', default=os.environ.get('CORRAL_URL') or None, help="a corral server's URL instead of a store (default: $CORRAL_URL)")
    where.add_argument('--api-key', metavar='KEY', default=os.environ.get('CORRAL_API_KEY') or None, help="with --server: the key, whose tenant's sessions these are (default: $CORRAL_API_KEY)")
    sessions = commands.add_parser('sessions', help='stored sessions: list, delete, expire').add_subparsers(dest='action', required=True)
    sessions.add_parser('list', parents=[where], help="list a tenant's stored sessions")
    delete = sessions.add_parser('delete', parents=[where], help="delete stored sessions with their records (freeing the tenant's stored_bytes)")
    delete.add_argument('session_ids', metavar='ID', nargs='+', help='the ids of the sessions to delete')
    expire = sessions.add_parser('expire', parents=[store], help="delete every tenant's stored sessions untouched for a while")
    expire.add_argument('--retention', type=parse_duration, required=True, metavar='DURATION', help='how long untouched: 3600, 90m, 12h, 30d')


async def run(args: argparse.Namespace) -> int:
    """Run `corral keys ...`, `corral tenants ...` or `corral sessions ...`; returns the exit status."""
    store = configured_store_url(args.store)
    try:
        if args.command == 'sessions':
            return await _sessions(store, args)
        if args.command == 'keys':
            async with KeyRing(store) as ring:
                return await _keys(ring, args)
        async with Quotas(store) as quotas:
            return await _tenants(quotas, args)
    except ValueError as error:
        print(f'corral: error: {error}', file=sys.stderr)
        return 2
    except (LookupError, CorralError) as error:
        print(f'corral: error: {error}', file=sys.stderr)
        return 1


async def _keys(ring: KeyRing, args: argparse.Namespace) -> int:
    if args.action == 'create':
        key = await ring.create(args.tenant)
        print(key)
        print(f"the key above acts as tenant {args.tenant!r}; it is shown only now (the store keeps a digest of it)", file=sys.stderr)
    elif args.action == 'list':
        rows = [('KEY ID', 'TENANT', 'CREATED', 'REVOKED')]
        rows += [(k.key_id, k.tenant, _when(k.created), _when(k.revoked) if k.revoked else '-') for k in await ring.list()]
        _print_table(rows)
    else:
        await ring.revoke(args.key_id)
        print(f'revoked the key {args.key_id}')
    return 0


async def _tenants(quotas: Quotas, args: argparse.Namespace) -> int:
    if args.action == 'set':
        given = {name: getattr(args, name) for name in QUOTA_NAMES if getattr(args, name) is not None}
        if not given:
            raise ValueError('say which quotas to set: ' + ', '.join('--' + name.replace('_', '-') for name in QUOTA_NAMES))
        await quotas.set(args.tenant, **{name: None if value == _DEFAULT else value for name, value in given.items()})
        settings = await quotas.settings(args.tenant)
        print(f'{args.tenant}: ' + ', '.join(f'{name}={_shown(settings[name])}' for name in QUOTA_NAMES))
    else:
        rows = [('TENANT', *(name.upper() for name in QUOTA_NAMES))]
        for tenant in await quotas.tenants():
            settings = await quotas.settings(tenant)
            rows.append((tenant, *(_shown(settings[name]) for name in QUOTA_NAMES)))
        _print_table(rows)
    return 0


async def _sessions(url: str | None, args: argparse.Namespace) -> int:
    if getattr(args, 'server', None) and args.action != 'expire':
        from .client import RemotePool

        remote = RemotePool(args.server, api_key=args.api_key)
        if args.action == 'list':
            print('\n'.join(await remote.list_sessions()) or '(no stored sessions)')
        for session_id in getattr(args, 'session_ids', ()):
            await remote.delete_session(session_id)
            print(f'deleted the stored session {session_id!r}')
        return 0
    async with open_store(url) as store:
        if args.action == 'list':
            print('\n'.join(await store.list(tenant=check_tenant(args.tenant))) or '(no stored sessions)')
        elif args.action == 'delete':
            for session_id in args.session_ids:
                await store.delete(session_id, tenant=check_tenant(args.tenant))
                print(f'deleted the stored session {session_id!r}')
        else:
            expired = await store.delete_untouched(args.retention)
            for tenant, session_id in expired:
                print(f'{tenant or "-"}  {session_id}')
            print(f'deleted {len(expired)} stored session{"" if len(expired) == 1 else "s"} untouched for {args.retention:g} seconds', file=sys.stderr)
    return 0


def _shown(value: float | None) -> str:
    return _DEFAULT if value is None else f'{value:g}' if isinstance(value, float) else str(value)


def _when(moment: datetime.datetime) -> str:
    return moment.strftime('%Y-%m-%dT%H:%M:%SZ')


def _print_table(rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print('  '.join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
