"""Smoke test of bench/packages.py: every figure runs once with tiny parameters, so CI catches a
broken benchmark. No timing is asserted."""

import importlib.util
import pathlib
import sys

import pytest

pytest.importorskip('pandas')
pytest.importorskip('matplotlib')

_PATH = pathlib.Path(__file__).resolve().parent.parent / 'bench' / 'packages.py'


@pytest.mark.slow
async def test_every_figure_runs_once():
    spec = importlib.util.spec_from_file_location('corral_bench_packages', _PATH)
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # dataclasses look their module up by name
    spec.loader.exec_module(bench)
    table = await bench.run(bench.Params.tiny())
    rows = [line.split(' | ')[0].lstrip('| ') for line in table.splitlines()[2:] if line.startswith('| ')]
    assert rows == [
        '1. checkout + first feed (import pandas, group 10,000 rows) vs `python -c`',
        '1. the same script in a kept session vs `python -c`',
        '3. idle warm worker USS',
        '3. idle warm worker RSS',
        '4. checkouts per second (checkout, feed `1`, close)',
        '2. zygote start (`Pool.start()`)',
    ]
