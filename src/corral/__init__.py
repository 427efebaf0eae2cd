"""corral: run a model's Python script in a locked-down CPython worker, with host functions.

    import corral

    async with corral.Pool() as pool:
        async with pool.checkout(type_check=True, type_check_stubs=STUBS) as session:
            result = await session.feed_run(code, external_lookup={'get_order': get_order})
"""

from .errors import (
    SandboxError,
    SandboxInsecureError,
    SandboxLimitError,
    SandboxRuntimeError,
    SandboxSessionBusyError,
    SandboxStateError,
    SandboxSyntaxError,
    SandboxTypingError,
    SandboxWorkerError,
)
from .host.external import ExternalModule
from .host.os_access import Mount, OsAccess
from .integrations.code_tool import CodeTool
from .host.pool import Pool
from .host.session import PrintCallback, Session
from .host.sync import SyncPool, SyncSession
from .limits import Limits
from .values import bounded_repr

__all__ = [
    'CodeTool',
    'ExternalModule',
    'Limits',
    'Mount',
    'OsAccess',
    'Pool',
    'PrintCallback',
    'SandboxError',
    'SandboxInsecureError',
    'SandboxLimitError',
    'SandboxRuntimeError',
    'SandboxSessionBusyError',
    'SandboxStateError',
    'SandboxSyntaxError',
    'SandboxTypingError',
    'SandboxWorkerError',
    'Session',
    'SyncPool',
    'SyncSession',
    'bounded_repr',
]
