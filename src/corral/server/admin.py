"""The `corral keys` and `corral tenants` commands: a server's API keys and tenant quotas.

    corral keys create --tenant NAME [--store URL]      prints a new key, once
    corral keys list [--store URL]                      key id, tenant, created, revoked
    corral keys revoke KEY_ID [--store URL]
    corral tenants set NAME [--concurrent-sessions N] [--stored-bytes SIZE] [--cpu-seconds-per-hour S] [--store URL]
    corral tenants list [--store URL]                   each tenant's own quotas ('default': the server's)

`--store` is the server's store URL (`sqlite:///path.db`, `postgresql://...`; default: `$CORRAL_STORE`
as `corral serve` reads it, else the embedded SQLite store). A quota given as `default` goes back to the server's default; sizes take units
(`512MiB`, `2GB`). Exit status 0; 1 when the store fails or has no such key; 2 for bad usage (a bad name or value).
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import CorralError
from ..store.tenants import QUOTA_NAMES
from ..store.url import configured_store_url
from .keys import KeyRing
from .quotas import Quotas

__all__ = ['add_commands', 'run']

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


async def run(args: argparse.Namespace) -> int:
    """Run `corral keys ...` or `corral tenants ...`; returns the exit status."""
    store = configured_store_url(args.store)
    try:
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


def _shown(value: float | None) -> str:
    return _DEFAULT if value is None else f'{value:g}' if isinstance(value, float) else str(value)


def _when(moment: datetime.datetime) -> str:
    return moment.strftime('%Y-%m-%dT%H:%M:%SZ')


def _print_table(rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print('  '.join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
