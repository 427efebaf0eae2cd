"""bench/monty_door.py runs: each figure once, with tiny parameters, against both binaries."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip('pydantic_monty')

BENCH = Path(__file__).resolve().parents[1] / 'bench' / 'monty_door.py'


@pytest.mark.slow
def test_the_monty_door_benchmark_prints_every_figure() -> None:
    run = subprocess.run([sys.executable, str(BENCH), '--quick', '--repeat', '1'], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    rows = [line.split(' | ')[0].lstrip('| ') for line in run.stdout.splitlines()[2:]]
    assert rows == [
        'trivial feed (1 + 1)',
        'host call round trip (f(1))',
        'trivial feed, warm session (median of 40)',
        'host call round trip, warm session (median of 40)',
        'host object method call, warm session (median of 40)',
        'checkout + feed + reset',
        'fib(20)',
        '100,000-step loop',
        'feed with type check',
        'same feed, unchecked',
        'os.walk of a mount (11 folders, 100 files)',
    ]
