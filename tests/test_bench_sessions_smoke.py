"""Smoke test of bench/sessions.py: one round of each measurement on a one-feed session, so CI
catches a broken benchmark. No timing is asserted; the monty round runs only when pydantic-monty
(the `bench` extra) is installed."""

import importlib.util
import pathlib
import sys

import pytest

import corral

from store.postgres_server import drop_tables

_PATH = pathlib.Path(__file__).resolve().parent.parent / 'bench' / 'sessions.py'
spec = importlib.util.spec_from_file_location('corral_bench_sessions', _PATH)
bench = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = bench
spec.loader.exec_module(bench)


async def test_a_corral_round_dumps_and_loads():
    async with corral.Pool(state_key=bench.KEY) as pool:
        result = await bench.corral_round(pool, 1)
    assert sorted(result) == ['dump', 'load', 'load_cpu', 'ran', 'ran_cpu', 'replay', 'replay_cpu', 'replay_kept', 'replay_kept_cpu', 'size']


async def test_a_stored_round_resumes_and_forks_from_the_checkpoint_and_replayed(tmp_path):
    async with corral.Pool(state_key=bench.KEY, store=f'sqlite:///{tmp_path}/s.db') as pool, corral.Pool(
        state_key=bench.KEY, store=pool.store, checkpoints=None
    ) as cold:
        result = await bench.stored_round(pool, cold, 2)
    assert sorted(result) == ['fork', 'fork_replay', 'resume', 'resume_replay']


async def test_a_stored_round_on_postgres_from_the_checkpoint_alone(postgres_server):
    await drop_tables(postgres_server.url)
    async with corral.Pool(state_key=bench.KEY, store=postgres_server.url) as pool:
        result = await bench.stored_round(pool, None, 2)
    assert sorted(result) == ['fork', 'resume']


@pytest.mark.slow
async def test_the_checkouts_alone_on_postgres_print_their_table(postgres_server, capsys):
    await drop_tables(postgres_server.url)
    await bench.main(['--quick', '--checkouts-only', '--postgres', postgres_server.url])
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "| feeds | stored session, just closed | corral, from its checkpoint | corral, replayed | monty's load_session | checkpoint / monty | replayed / monty |"
    assert [line.split(' | ')[:2] for line in lines[3:]] == [['| 10', 'checkout(session_id=...)'], ['| 10', 'checkout(session_id=..., fork=True)']]


async def test_checkouts_in_a_row_and_the_trivial_feed_run():
    async with corral.Pool() as pool:
        assert await bench.checkouts(pool, count=2, gap=0.01) > 0
        assert await bench.trivial_feed(pool, count=3) > 0


@pytest.mark.skipif(bench.AsyncMonty is None, reason='pydantic-monty is not installed')
async def test_a_monty_round_dumps_and_loads():
    async with bench.AsyncMonty() as pool:
        result = await bench.monty_round(pool, 1)
    assert sorted(result) == ['dump', 'load', 'ran', 'size']


async def test_the_stored_feed_cost_counts_what_a_late_feed_writes(tmp_path):
    async with corral.Pool(state_key=bench.KEY, store=f'sqlite:///{tmp_path}/s.db') as pool:
        result = await bench.stored_feed_cost(pool, 6)
    assert sorted(result) == ['bytes', 'ephemeral', 'stored', 'write']
    assert 0 < result['bytes'] < 4096  # a late feed appends its record, not the session
