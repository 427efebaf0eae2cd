"""Values of kinds beyond plain data through Monty's client and `corral-monty subprocess`: named
time zones and `fold`, exceptions, named tuples, and a script's class instances and dataclasses,
as inputs, results and host-call arguments."""

from __future__ import annotations

import datetime
import zoneinfo

import pytest

from .test_client import binary, monty  # noqa: F401  (fixtures)

pydantic_monty = pytest.importorskip('pydantic_monty')


def test_named_zones_and_fold_cross_both_ways(monty: pydantic_monty.Monty) -> None:  # noqa: F811
    plus2 = datetime.timezone(datetime.timedelta(hours=2), 'PLUS2')
    inputs = {
        'a': datetime.time(1, 2, tzinfo=plus2),
        'b': datetime.time(1, 2, fold=1),
        'c': plus2,
        'd': datetime.datetime(2024, 1, 15, 12, tzinfo=zoneinfo.ZoneInfo('America/New_York')),
    }
    with monty.checkout() as session:
        result = session.feed_run('(a, b, c, d, d.tzname(), b.fold)', inputs=inputs)
    assert repr(result) == (
        "(datetime.time(1, 2, tzinfo=datetime.timezone(datetime.timedelta(seconds=7200), 'PLUS2')), "
        'datetime.time(1, 2, fold=1), '
        "datetime.timezone(datetime.timedelta(seconds=7200), 'PLUS2'), "
        "datetime.datetime(2024, 1, 15, 12, 0, tzinfo=datetime.timezone(datetime.timedelta(days=-1, seconds=68400), 'EST')), "
        "'EST', 1)"
    )
