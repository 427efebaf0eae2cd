"""Smoke test of bench/server.py: a small load on a real `corral serve` and on a local pool (and on
monty's, when the `bench` extra is installed), so CI catches a broken benchmark. No timing is asserted."""

import importlib.util
import pathlib
import sys

import pytest

pytest.importorskip('uvicorn')
pytest.importorskip('websockets')

_PATH = pathlib.Path(__file__).resolve().parent.parent / 'bench' / 'server.py'
spec = importlib.util.spec_from_file_location('corral_bench_server', _PATH)
bench = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = bench
spec.loader.exec_module(bench)

KEYS = ['alone feed p50', 'checkout p50 @3', 'checkout p99 @3', 'feed p50 @3', 'feed p99 @3', 'feeds/s @3', 'per host call', 'per host call cpu', 'trivial feed cpu', 'trivial feed p50']


@pytest.mark.slow
async def test_the_bench_measures_the_server_and_the_local_pool(tmp_path):
    with bench.corral_serve(str(tmp_path)) as url:
        for side in (bench.ServerSide([url]), bench.LocalSide()):
            try:
                result = await bench.measure(side, clients=3, feeds=3, call_seconds=0.0)
            finally:
                await side.stop()
            assert sorted(result) == KEYS


@pytest.mark.skipif(bench.AsyncMonty is None, reason='pydantic-monty is not installed')
async def test_the_bench_measures_monty():
    side = bench.MontySide()
    await side.start()
    try:
        result = await bench.measure(side, clients=3, feeds=3, call_seconds=0.0)
    finally:
        await side.stop()
    assert sorted(result) == KEYS


def test_the_report_of_a_baseline_server_compares_it_with_the_same_local_pool():
    one = dict.fromkeys(KEYS, 0.002) | {'feeds/s @3': 10.0}
    results = {'corral serve': [one], 'baseline serve': [one | {'feeds/s @3': 5.0}], 'local Pool': [one | {'feeds/s @3': 8.0}], 'monty': [one]}
    lines = bench.report(results, (3,), 1, 0.0, 'baseline serve').splitlines()
    assert lines[0] == '3 concurrent clients × 3 feeds of a script with 10 gathered host calls (0 ms each), 1 `baseline serve` process(es) on loopback'
    assert lines[2] == '| measure | baseline serve | local Pool | monty (local) | serve / local | serve / monty |'
    assert lines[4] == '| 3 clients: feeds per second — higher is better | 5.00 /s | 8.00 /s | 10.0 /s | 0.62× | 0.50× |'
    assert lines[-1].endswith('feeds per second 0.62× with 3 clients of the local Pool\'s.')


@pytest.mark.slow
async def test_the_batches_take_turns_on_each_side(tmp_path):
    with bench.corral_serve(str(tmp_path)) as url:
        sides = [bench.LocalSide(), bench.ServerSide([url])]
        try:
            table = await bench.batches(sides, 2)
        finally:
            for side in sides:
                await side.stop()
    rows = table.splitlines()[4:]
    assert [row.split(' | ')[0] for row in rows] == ['| local Pool', '| corral serve']
    assert [row.count('(') for row in rows] == [4, 6]  # min–max of two rounds in every cell but the local Pool's added ones
