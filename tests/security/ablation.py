"""What each layer blocks on its own: the red-team suite run with layers turned off.

    python -m tests.security.ablation [--packages] ['configuration' ...]

Runs every attack of `attacks.py` under several configurations of `Pool(skip_layers=...)` and
counts, for each, how the attacks ended. With `--packages`, the pool loads numpy, pandas and
matplotlib (`Pool(packages=[...])`) and the attacks are the packages' own ways out: the scripts of
`test_package_attacks.py` (the path they write, `/tmp/x`, made the marker) and the payloads of
`package_payloads.py`, which carry those ways to a marker written or a host file read.

- refused: the sandbox raised an error and the attack's marker file never appeared;
- reached: the script ran to its end without an error (it reached what the language layer would
  have refused, a class hierarchy or a frame, say) but changed nothing outside the worker;
- leaked: the script ran to its end and returned host information it should not see (the native
  attacks of `attacks.py` return a text starting with LEAK: a host file's metadata, the host's pid,
  name or network, a root uid; the package payloads, the text of `SECRET`);
- escaped: the marker file appeared on the host.

Each attack runs in a fresh session, with a fresh folder on the host (only the user running the
ablation may enter it) that holds the marker's place and `SECRET`, a file only that user may
read, holding `package_payloads.SECRET_TEXT`.

This is a measurement, not a test: `test_attacks.py`, `test_package_attacks.py` and
`test_package_payloads.py` assert the full configuration.
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
from .package_payloads import PAYLOADS, SECRET_TEXT

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


#: The packages the `--packages` table loads.
PACKAGES = ('numpy', 'pandas', 'matplotlib')


def package_attacks() -> list[tuple[str, bool]]:
    """The packages' ways out, as (script, whether it gets host functions): the refusals of
    `test_package_attacks.py`, then `package_payloads.PAYLOADS`."""
    from .test_package_attacks import ATTACKS as REFUSALS

    return [(code.replace("'/tmp/x'", "'MARKER'"), False) for code, _, _ in REFUSALS.values()] + [(attack.code, attack.host) for attack in PAYLOADS]


async def measure(skip: set[str], attacks: list[tuple[str, bool]], packages: tuple[str, ...] = ()) -> collections.Counter[str]:
    """How `attacks` ((script, host) pairs) end in a pool skipping `skip` and loading `packages`:
    outcome -> count."""
    counts: collections.Counter[str] = collections.Counter()
    async with corral.Pool(skip_layers=skip, packages=packages) as pool:
        for code, host in attacks:
            with tempfile.TemporaryDirectory() as folder:
                marker = Path(folder) / 'corral-escaped'
                secret = Path(folder) / 'secret'
                secret.write_text(SECRET_TEXT + '\n')
                secret.chmod(0o600)
                outcome = await run_attack(pool, code.replace('MARKER', str(marker)).replace('SECRET', str(secret)), host)
                counts['escaped' if marker.exists() else outcome] += 1
    return counts


async def main(names: list[str], packages: bool = False) -> None:
    """Print the table for the configurations `names` (all when empty), of the package attacks
    with the packages loaded when `packages`."""
    attacks = package_attacks() if packages else [(attack.code, attack.host) for attack in ATTACKS]
    print(f'{len(attacks)} attacks' + (f', with {", ".join(PACKAGES)} loaded' if packages else '') + '\n')
    print('| configuration | refused | reached (no effect outside the worker) | leaked (host information) | escaped (marker on the host) |')
    print('| --- | --- | --- | --- | --- |')
    for name, skip in CONFIGURATIONS.items():
        if names and name not in names:
            continue
        counts = await measure(skip, attacks, PACKAGES if packages else ())
        print(f"| {name} | {counts['refused']} | {counts['reached']} | {counts['leaked']} | {counts['escaped']} |")
        sys.stdout.flush()


if __name__ == '__main__':
    arguments = sys.argv[1:]
    asyncio.run(main([name for name in arguments if name != '--packages'], '--packages' in arguments))
