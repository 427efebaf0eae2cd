"""bench/monty_ws.py runs: each figure once, against the monty binary and corral serve."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip('pydantic_monty')

BENCH = Path(__file__).resolve().parents[1] / 'bench' / 'monty_ws.py'


@pytest.mark.slow
def test_the_monty_websocket_benchmark_prints_every_figure() -> None:
    run = subprocess.run([sys.executable, str(BENCH), '--quick', '--repeat', '1'], capture_output=True, text=True, timeout=600)
    assert run.returncode in (0, -6), run.stderr  # pydantic_monty 1.4.0 aborts at exit now and then, its work done
    rows = [line.split(' | ')[0].lstrip('| ') for line in run.stdout.splitlines()[2:]]
    assert rows == ['trivial feed (1 + 1)', 'host call round trip (f(1))', 'checkout + feed + close']
