"""Smoke test of bench/run.py: every figure runs once with tiny parameters, so CI catches a broken
benchmark. No timing is asserted. The monty side runs only when pydantic-monty (the `bench` extra)
is installed."""

import importlib.util
import os
import pathlib
import sys

import pytest

_PATH = pathlib.Path(__file__).resolve().parent.parent / 'bench' / 'run.py'


def _load_bench():
    spec = importlib.util.spec_from_file_location('corral_bench_run', _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


bench = _load_bench()
PARAMS = bench.Params.tiny()
FIGURES = {figure.number: figure for figure in bench.build_figures(PARAMS)}


def _type_checker_available() -> bool:
    try:
        from corral.typecheck import TypeChecker  # noqa: F401
    except ImportError:
        return False
    return True


def _make_side(name):
    if name == 'monty':
        if not bench.MONTY_AVAILABLE:
            pytest.skip('pydantic-monty is not installed (pip install -e ".[bench]")')
        return bench.MontySide()
    return bench.CorralSide()


@pytest.mark.parametrize('side_name', ['corral', 'monty'])
@pytest.mark.parametrize('number', list(FIGURES))
async def test_figure_runs_once(number, side_name):
    figure = FIGURES[number]
    if number.startswith('6') and side_name == 'corral' and not _type_checker_available():
        pytest.skip('corral.typecheck.TypeChecker is not available yet')
    if number.startswith('7') and side_name == 'corral' and os.geteuid() != 0:
        # a worker is not dumpable: only root reads its /proc/PID/smaps_rollup
        pytest.skip("figure 7 reads a worker's memory from /proc, which only root may")
    side = _make_side(side_name)
    sides = [side, bench.CPythonSide()]
    async with side:
        result = await bench.run_figure(figure, sides, PARAMS, reps=1, warmup=0, raise_errors=True)
    assert not result.errors
    for row in figure.rows:
        values = result.values(side_name, row.metric)
        assert len(values) == 1, row.label
        assert values[0] >= 0 or row.metric == 'added'  # type checking can cost "less than nothing" by noise
    if number in ('4', '5'):
        assert len(result.values('CPython', 'time')) == 1
    table = bench.render_table([result])
    assert figure.rows[0].label in table
    bench.render_notes([result])


def test_cpython_exec_script_returns_the_last_expression():
    assert bench.exec_script(bench.FIB.format(n=10)) == 55
    assert bench.exec_script(bench.LOOP.format(steps=10)) == bench._loop(10)
    assert bench.exec_script('x = 1') is None
