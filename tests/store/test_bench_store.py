"""Smoke test of bench/store.py: one repetition of every figure on both stores, so CI notices a broken
benchmark. No timing is asserted."""

import importlib.util
import pathlib
import sys

import corral

from .conftest import drop_tables

_PATH = pathlib.Path(__file__).resolve().parents[2] / 'bench' / 'store.py'


def _load_bench():
    spec = importlib.util.spec_from_file_location('corral_bench_store', _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def test_bench_store_runs(tmp_path, postgres_server):
    bench = _load_bench()
    await drop_tables(postgres_server.url)
    stores = {
        'sqlite': corral.open_store(f'sqlite://{tmp_path}/s.db'),
        'postgres': corral.open_store(postgres_server.url),
    }
    try:
        samples = await bench.measure(stores, {'10 KB': 1, '10 MB': 1})
    finally:
        for store in stores.values():
            await store.close()
    operations = ['put 10 KB', 'get 10 KB', 'put 10 MB', 'get 10 MB', 'append 10 KB to 10 MB', 'acquire + release']
    assert list(samples) == operations
    assert all(len(samples[op][name]) == 1 for op in operations for name in stores)
    table = bench.render(samples).splitlines()
    assert table[0] == '| operation | sqlite | postgres | ratio (postgres/sqlite) |'
    assert [line.split(' | ')[0] for line in table[2:8]] == [f'| {op}' for op in operations]
