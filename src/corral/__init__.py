"""corral: run a model's Python script in a locked-down CPython worker, with host functions.

    import corral

    async with corral.Pool() as pool:
        async with pool.checkout(type_check=True, type_check_stubs=STUBS) as session:
            result = await session.feed_run(code, external_lookup={'get_order': get_order})
"""

import sys as _sys

from .supported import python_refusal as _python_refusal

if _python_refusal(_sys.implementation.name, _sys.version_info) is not None:
    raise ImportError(_python_refusal(_sys.implementation.name, _sys.version_info))

from .errors import (  # noqa: E402 - after the check of the Python
    CorralError,
    OperatorError,
    SandboxAuthError,
    SandboxConnectionError,
    SandboxCheckerError,
    SandboxError,
    SandboxInsecureError,
    SandboxLimitError,
    SandboxQuotaError,
    SandboxRuntimeError,
    SandboxSessionBusyError,
    SandboxStateError,
    SandboxStoreError,
    SandboxSyntaxError,
    SandboxTypingError,
    SandboxWorkerError,
    StubError,
)
from .host.checkpoints import CheckpointLimits
from .host.deferred import Deferred, PendingCall, SandboxPaused, StopFeed
from .host.external import ExternalModule
from .host.observer import PoolObserver
from .host.os_access import Mount, OsAccess
from .integrations.code_tool import CodeTool
from .host.pool import Pool
from .host.session import OfferModules, PrintCallback, Session
from .host.sync import SyncPool, SyncSession
from .limits import Limits
from .server.client import RemotePool, RemoteSession
from .server.keys import ApiKey, KeyRing
from .server.quotas import CpuCounting, QuotaStore, Quotas, TenantQuotas, TenantSlot
from .store import PostgresStore, SQLiteStore, Store, StoredState, open_store
from .typecheck import format_diagnostics
from .described import ExceptionValue, FileValue, InstanceValue, ModuleValue, NamedTupleValue
from .hostobjects import HostClass, HostObject
from .values import HostFunction, Image, SandboxBuiltin, bounded_repr

__all__ = [
    'ApiKey',
    'CheckpointLimits',
    'CodeTool',
    'CpuCounting',
    'Deferred',
    'ExceptionValue',
    'ExternalModule',
    'FileValue',
    'HostClass',
    'HostFunction',
    'HostObject',
    'Image',
    'InstanceValue',
    'KeyRing',
    'Limits',
    'ModuleValue',
    'Mount',
    'NamedTupleValue',
    'OfferModules',
    'OsAccess',
    'PendingCall',
    'Pool',
    'PoolObserver',
    'PostgresStore',
    'PrintCallback',
    'QuotaStore',
    'Quotas',
    'RemotePool',
    'RemoteSession',
    'SandboxBuiltin',
    'CorralError',
    'OperatorError',
    'SandboxAuthError',
    'SandboxConnectionError',
    'SandboxCheckerError',
    'SandboxError',
    'SandboxInsecureError',
    'SandboxLimitError',
    'SandboxPaused',
    'SandboxQuotaError',
    'SandboxRuntimeError',
    'SandboxSessionBusyError',
    'SandboxStateError',
    'SandboxStoreError',
    'SandboxSyntaxError',
    'SandboxTypingError',
    'SandboxWorkerError',
    'SQLiteStore',
    'Session',
    'Store',
    'StoredState',
    'StopFeed',
    'StubError',
    'SyncPool',
    'SyncSession',
    'TenantQuotas',
    'TenantSlot',
    'bounded_repr',
    'format_diagnostics',
    'open_store',
]
