"""Smoke test of bench/warm_workers.py: one small round of each side, so CI catches a broken
benchmark. No timing is asserted."""

import importlib.util
import pathlib
import sys

import pytest

_PATH = pathlib.Path(__file__).resolve().parent.parent / 'bench' / 'warm_workers.py'
spec = importlib.util.spec_from_file_location('corral_bench_warm_workers', _PATH)
bench = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = bench
spec.loader.exec_module(bench)


@pytest.mark.parametrize('side', ['fixed', 'demand'])
async def test_a_round_bursts_and_decays_back_to_the_warm_floor(side):
    result = await bench.one_round(bench.sides(decay=0.05)[side], checkouts=4, decay_wait=0.3)
    assert sorted(result) == sorted(
        [f'{burst} {name}' for burst in 'AB' for name in ('total', 'p50', 'p99', 'first p50')]
        + [f'after {when} {name}' for when in ('burst', 'decay') for name in ('idle', 'uss', 'pss')]
    )
    assert result['after decay idle'] == bench.FLOOR
    assert {row[0] for row in bench.ROWS} <= set(result)  # every row of the table has its measurement


def _namespaces_tests():
    path = pathlib.Path(__file__).resolve().parent / 'worker' / 'test_namespaces.py'
    spec = importlib.util.spec_from_file_location('corral_test_namespaces', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def _round_as_read() -> dict:
    result = await bench.one_round(bench.sides(decay=0.05)['fixed'], checkouts=2, decay_wait=0.3)
    return {
        'read': all(result[f'after {when} {name}'] > 0 for when in ('burst', 'decay') for name in ('uss', 'pss')),
        'note': sys.modules['run'].memory_note(),
    }


@pytest.mark.slow
@pytest.mark.forks  # as_ordinary_user forks the test process
def test_an_ordinary_user_reads_the_workers_memory_it_may_and_says_what_it_is():
    """A worker is not dumpable, so a user other than root may not read its smaps_rollup: the bench
    reads the RssAnon of /proc/PID/status instead, and its report says so."""
    assert _namespaces_tests().as_ordinary_user(_round_as_read) == {'read': True, 'note': sys.modules['run'].STATUS_NOTE}
