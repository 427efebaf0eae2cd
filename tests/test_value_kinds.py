"""Values of kinds beyond plain data that cross the boundary: time zones with their names and a
time's `fold`, a script's exceptions, named tuples and class instances (as inert descriptions)."""

from __future__ import annotations

import datetime
import zoneinfo

import msgpack
import pytest

from corral.values import pack, unpack

PLUS2 = datetime.timezone(datetime.timedelta(hours=2), 'PLUS2')
NEW_YORK = zoneinfo.ZoneInfo('America/New_York')


@pytest.mark.parametrize(
    ('value', 'expected'),
    [
        (datetime.time(1, 2, fold=1), 'datetime.time(1, 2, fold=1)'),
        (datetime.time(1, 2, tzinfo=PLUS2), "datetime.time(1, 2, tzinfo=datetime.timezone(datetime.timedelta(seconds=7200), 'PLUS2'))"),
        (PLUS2, "datetime.timezone(datetime.timedelta(seconds=7200), 'PLUS2')"),
        (datetime.timezone.utc, 'datetime.timezone.utc'),
        (datetime.timezone(datetime.timedelta(hours=2)), 'datetime.timezone(datetime.timedelta(seconds=7200))'),
        (
            datetime.datetime(2024, 6, 15, 12, tzinfo=NEW_YORK),
            "datetime.datetime(2024, 6, 15, 12, 0, tzinfo=datetime.timezone(datetime.timedelta(days=-1, seconds=72000), 'EDT'))",
        ),
        (  # the second 01:30 of the night clocks go back: fold and the zone's name of that hour
            datetime.datetime(2024, 11, 3, 1, 30, fold=1, tzinfo=NEW_YORK),
            "datetime.datetime(2024, 11, 3, 1, 30, fold=1, tzinfo=datetime.timezone(datetime.timedelta(days=-1, seconds=68400), 'EST'))",
        ),
        (datetime.datetime(2024, 6, 15, 12, tzinfo=zoneinfo.ZoneInfo('UTC')), 'datetime.datetime(2024, 6, 15, 12, 0, tzinfo=datetime.timezone.utc)'),
        (datetime.datetime(2024, 6, 15, 12, fold=1), 'datetime.datetime(2024, 6, 15, 12, 0, fold=1)'),
        (datetime.time(1, 2, tzinfo=datetime.timezone(datetime.timedelta(hours=1), 'zoné\ud800\0')), "datetime.time(1, 2, tzinfo=datetime.timezone(datetime.timedelta(seconds=3600), 'zoné\\ud800\\x00'))"),
    ],
    ids=['time-fold', 'time-named-zone', 'named-zone', 'utc', 'fixed-zone', 'zoneinfo', 'zoneinfo-fold', 'zoneinfo-utc', 'naive-fold', 'odd-name'],
)
def test_zone_names_and_fold_cross_both_ways(value, expected):
    for side in ('host', 'sandbox'):
        assert repr(unpack(pack(value, side=side))) == expected


def test_a_datetime_subclass_crosses_with_its_zone_name_and_none_of_its_overrides():
    class Shifty(datetime.datetime):
        def isoformat(self, *args):
            raise AssertionError('called')

        def tzname(self):
            raise AssertionError('called')

    value = Shifty(2024, 1, 15, 12, tzinfo=NEW_YORK)
    decoded = unpack(pack(value, side='sandbox'))
    assert type(decoded) is datetime.datetime
    assert repr(decoded) == "datetime.datetime(2024, 1, 15, 12, 0, tzinfo=datetime.timezone(datetime.timedelta(days=-1, seconds=68400), 'EST'))"


@pytest.mark.parametrize(
    ('code', 'data', 'error'),
    [
        (7, b'01:02\x002', 'malformed datetime or time in a frame'),  # a fold that is neither 0 nor 1
        (7, b'01:02\x00', 'malformed datetime or time in a frame'),
        (5, b'2024-01-01T00:00:00+24:00\x000X', 'offset must be a timedelta strictly between'),
        (9, bytes(12) + b'\xff', "'utf-8' codec can't decode byte 0xff"),
        (8, bytes(12) + b'x', 'malformed timedelta or time zone in a frame'),  # a timedelta has no name
    ],
    ids=['fold-2', 'fold-missing', 'offset-a-day', 'zone-name-not-utf8', 'timedelta-with-name'],
)
def test_a_malformed_zone_or_fold_is_a_value_error(code, data, error):
    with pytest.raises(ValueError, match=error):
        unpack(msgpack.packb(msgpack.ExtType(code, data)))
