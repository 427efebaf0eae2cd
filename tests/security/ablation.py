"""What each layer blocks on its own: the red-team suite run with layers turned off.

    python -m tests.security.ablation ['configuration' ...]

Runs every attack of `attacks.py` under several configurations of `Pool(skip_layers=...)` and
counts, for each, how the attacks ended:

- refused: the sandbox raised an error and the attack's marker file never appeared;
- reached: the script ran to its end without an error (it reached what the language layer would
  have refused, a class hierarchy or a frame, say) but changed nothing outside the worker;
- leaked: the script ran to its end and returned host information it should not see (the native
  attacks of `attacks.py` return a text starting with LEAK: a host file's metadata, the host's pid,
  name or network, a root uid);
- escaped: the marker file appeared on the host.

This is a measurement, not a test: the suite in `test_attacks.py` asserts the full configuration.
"""

from __future__ import annotations

import asyncio
import collections
import sys
import tempfile
from pathlib import Path

import corral
from corral.worker import namespaces
from corral.worker.zygote import LAYERS

from .attacks import ATTACKS

EVERY_LAYER = frozenset(LAYERS)
NAMESPACES = frozenset(namespaces.LAYERS)

CONFIGURATIONS = {
    'all layers': set(),
    'no language guard': {'language'},
    'no seccomp': {'seccomp'},
    'language guard only': EVERY_LAYER - {'language'},
    'seccomp only': EVERY_LAYER - {'seccomp', 'no_new_privs'},
    'namespaces and uid only': EVERY_LAYER - NAMESPACES,
    **{f'{layer} only': EVERY_LAYER - {layer} for layer in ('mntns', 'pidns', 'utsns', 'netns', 'uid')},
    'no layer': EVERY_LAYER,
}


def get_data(*args: object, **kwargs: object) -> dict[str, list[int]]:
    return {'rows': [1, 2, 3]}


async def run_attack(pool: corral.Pool, code: str, host: bool) -> str:
    limits = corral.Limits(wall_time=5, grace=1)
    try:
        async with pool.checkout(limits=limits) as session:
            value = await session.feed_run(code, external_lookup={'get_data': get_data} if host else None, print_callback=lambda *_: None)
    except corral.SandboxError:
        return 'refused'
    return 'leaked' if isinstance(value, str) and value.startswith('LEAK') else 'reached'


async def measure(skip: set[str]) -> collections.Counter[str]:
    counts: collections.Counter[str] = collections.Counter()
    async with corral.Pool(skip_layers=skip) as pool:
        for attack in ATTACKS:
            with tempfile.TemporaryDirectory() as folder:
                marker = Path(folder) / 'corral-escaped'
                outcome = await run_attack(pool, attack.code.replace('MARKER', str(marker)), attack.host)
                counts['escaped' if marker.exists() else outcome] += 1
    return counts


async def main(names: list[str]) -> None:
    """Print the table for the configurations `names` (all when empty)."""
    print(f'{len(ATTACKS)} attacks\n')
    print('| configuration | refused | reached (no effect outside the worker) | leaked (host information) | escaped (marker on the host) |')
    print('| --- | --- | --- | --- | --- |')
    for name, skip in CONFIGURATIONS.items():
        if names and name not in names:
            continue
        counts = await measure(skip)
        print(f"| {name} | {counts['refused']} | {counts['reached']} | {counts['leaked']} | {counts['escaped']} |")
        sys.stdout.flush()


if __name__ == '__main__':
    asyncio.run(main(sys.argv[1:]))
