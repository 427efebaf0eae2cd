"""Helpers shared by the red-team tests."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import corral


async def run(pool: corral.Pool, code: str, lookup: dict[str, Callable[..., Any]] | None = None, **checkout: Any) -> Any:
    async with pool.checkout(**checkout) as session:
        return await session.feed_run(code, external_lookup=lookup, print_callback=lambda stream, text: None)


async def refusal(pool: corral.Pool, code: str, lookup: dict[str, Callable[..., Any]] | None = None, **checkout: Any) -> corral.SandboxError:
    """Run an attack that must fail; return the error (the script returned no value)."""
    try:
        value = await run(pool, code, lookup, **checkout)
    except (corral.SandboxSyntaxError, corral.SandboxRuntimeError) as error:
        return error
    raise AssertionError(f'the attack was not refused; it returned {value!r}')


def last_line(error: corral.SandboxError) -> str:
    return error.display().rstrip('\n').splitlines()[-1]


def marker_path(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / 'corral-escaped'
    assert not path.exists()
    return path
