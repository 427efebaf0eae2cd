"""Imported by the zygote before it forks workers: what the sandbox needs from disk, loaded once.

A locked-down worker cannot open a file, so anything CPython would load lazily must be loaded
here: the sandbox's modules, the modules they import on first use (`_strptime` for `strptime`,
the codecs of common encodings), and every time zone of the tz database (`zoneinfo.ZoneInfo(key)`
then finds its zone in ZoneInfo's cache, which `ZONES` keeps alive). The zygote also gets a fixed
local time zone (UTC), so naive local time does not depend on the machine.

The host never imports this module.
"""

from __future__ import annotations

import importlib
import os
import time
import zoneinfo

from .catalog import STDLIB_MODULES

__all__ = ['ZONES', 'ZONE_KEYS']

os.environ['TZ'] = 'UTC'
time.tzset()

#: Modules loaded lazily by the sandbox's modules (or by str.encode / bytes.decode).
_LAZY = (
    '_strptime', 'encodings.latin_1', 'encodings.ascii', 'encodings.cp1252', 'encodings.cp1251', 'encodings.cp437',
    'encodings.cp850', 'encodings.utf_16', 'encodings.utf_16_le', 'encodings.utf_16_be', 'encodings.utf_32',
    'encodings.utf_32_le', 'encodings.utf_32_be', 'encodings.utf_8_sig', 'encodings.iso8859_1', 'encodings.iso8859_2',
    'encodings.iso8859_15', 'encodings.mac_roman', 'encodings.unicode_escape', 'encodings.raw_unicode_escape',
    'encodings.punycode', 'encodings.idna', 'encodings.hex_codec', 'encodings.base64_codec', 'encodings.rot_13',
    'encodings.shift_jis', 'encodings.euc_jp', 'encodings.gbk', 'encodings.gb2312', 'encodings.big5',
    'encodings.euc_kr', 'encodings.koi8_r', 'encodings.utf_7', 'unicodedata', 'csv', 'pprint', 'glob', 'fnmatch',
    'contextlib', 'pathlib', 'posixpath', 'calendar', 'zoneinfo._common', 'zoneinfo._tzpath', 'locale',
)

for _name in (*STDLIB_MODULES, *_LAZY):
    try:
        importlib.import_module(_name)
    except ImportError:
        pass

# codecs look-ups by alias ('latin-1', 'utf8') are cached after the first one
for _encoding in ('latin-1', 'ascii', 'cp1252', 'utf-16', 'utf-32', 'utf-8-sig', 'iso-8859-15', 'utf8', 'latin1'):
    try:
        'x'.encode(_encoding)
    except LookupError:
        pass

#: Every zone of the tz database, kept alive so `ZoneInfo(key)` hits the cache in a worker.
ZONE_KEYS: frozenset[str] = frozenset(zoneinfo.available_timezones())
ZONES: dict[str, zoneinfo.ZoneInfo] = {}
for _key in sorted(ZONE_KEYS):
    try:
        ZONES[_key] = zoneinfo.ZoneInfo(_key)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        pass
ZONE_KEYS = frozenset(ZONES)

# strptime compiles its regexes (and reads the locale) on first use
time.strptime('2000-01-01', '%Y-%m-%d')
