"""Run a script in this process, as the worker does, for tests that need to inject things (a stop)."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

from corral.language import compile_script, import_module, make_builtins
from corral.worker.runtime import STDLIB_MODULES

_counter = 0


def namespace(**extra: Any) -> dict[str, Any]:
    builtins = make_builtins(
        print=lambda *values, **kwargs: None,
        import_=lambda name, g, l, fromlist, level: import_module(name, fromlist, level, host_modules={}, stdlib=STDLIB_MODULES),
    )
    builtins.update(extra)
    return {'__name__': '__main__', '__builtins__': builtins}


def run_local(code: str, **extra: Any) -> Any:
    """Compile `code` with the language layer and run it on a fresh event loop; return its last value."""
    global _counter
    _counter += 1
    script = compile_script(code, f'<script {_counter}>')
    scope = namespace(**extra)

    async def main() -> Any:
        result = script.start(scope)
        return await result if script.is_async else result

    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()
        gc.collect()  # finalize leftover tasks now, not in the middle of someone's ast.parse
