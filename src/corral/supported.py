"""Where corral runs: CPython 3.11, 3.12 and 3.13, its workers on Linux with user namespaces and seccomp.

The language layer reads and rewrites each release's syntax tree and reaches into CPython's own
objects (type slots, frames, the class machinery), so a Python it was not made for is refused as
`import corral` starts (`python_refusal`), not left to fail somewhere inside. The workers need
Linux (`platform_refusal`, checked as a pool starts its workers); which of Linux's lockdown layers
a machine lacks is found, and refused with the way to enable each, as the workers start
(`corral.worker.namespaces`). A client of a server (`corral.RemotePool`) runs no worker and needs
only a supported Python.
"""

from __future__ import annotations

__all__ = ['PYTHONS', 'platform_refusal', 'python_refusal']

#: The CPython releases corral supports, as (major, minor).
PYTHONS = ((3, 11), (3, 12), (3, 13))


def python_refusal(implementation: str, version: tuple[int, ...]) -> str | None:
    """Why corral cannot run on `implementation` (`sys.implementation.name`) at `version`
    (`sys.version_info`), or None where it can."""
    if implementation == 'cpython' and tuple(version[:2]) in PYTHONS:
        return None
    name = 'CPython' if implementation == 'cpython' else implementation
    return (
        f'corral runs on CPython 3.11, 3.12 and 3.13; this is {name} {".".join(map(str, version[:3]))}. '
        'Make a virtual environment with one of those (python3.12 -m venv .venv) and install corral in it'
    )


def platform_refusal(platform: str) -> str | None:
    """Why corral's workers cannot run on `platform` (`sys.platform`), or None where they can."""
    if platform == 'linux':
        return None
    return (
        f"corral's workers run on Linux, locked down with its user namespaces and seccomp; this is {platform}. "
        'Run them on a Linux machine or container (corral serve there) and reach them with corral.RemotePool'
    )
