"""Smoke test of bench/fresh_workers.py: a few forks of the floor and a few sessions, so CI
catches a broken benchmark. No timing is asserted."""

import importlib.util
import pathlib
import sys

import pytest

import corral

_PATH = pathlib.Path(__file__).resolve().parent.parent / 'bench' / 'fresh_workers.py'
spec = importlib.util.spec_from_file_location('corral_bench_fresh_workers', _PATH)
bench = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = bench
spec.loader.exec_module(bench)


def test_the_fork_floor_forks_a_process_of_the_zygotes_size():
    result = bench.fork_floor(3)
    assert sorted(result) == ['child', 'parent', 'rss', 'total', 'uss']
    assert result['total'] == pytest.approx(result['parent'] + result['child']) and result['rss'] > 10


async def test_sessions_count_the_cpu_of_host_zygote_and_worker():
    async with corral.Pool(warm_workers=1) as pool:
        async with pool.checkout() as session:
            await session.feed_run('1 + 1')
        result = await bench.sessions(pool, 2)
    assert sorted(result) == ['faults', 'host', 'rss', 'total', 'uss', 'worker', 'zygote']
    assert result['total'] == pytest.approx(result['host'] + result['zygote'] + result['worker']) and result['faults'] > 0
