"""Smoke test of bench/identity.py: each workload once, tiny, so CI catches a broken benchmark.
No timing is asserted."""

import importlib.util
import pathlib
import sys

_PATH = pathlib.Path(__file__).resolve().parent.parent / 'bench' / 'identity.py'
spec = importlib.util.spec_from_file_location('corral_bench_identity', _PATH)
bench = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = bench
spec.loader.exec_module(bench)


async def test_every_workload_runs_in_corral_and_in_cpython():
    rows = await bench.measure({'big': 100, 'small': 10, 'tiny': 10}, 1)
    assert [name for name, _, _ in rows] == list(bench.WORKLOADS)
    assert all(len(ours) == len(theirs) == 1 for _, ours, theirs in rows)
