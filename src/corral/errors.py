"""The errors corral raises in the host, sorted by who can act on them; all are `CorralError`s.

- `SandboxError`: what the model can fix, its script, its types, its limits. A `run_code` tool
  sends its `display()` back to the model, which tries again.
- `OperatorError`: what only the application or the server's operator can fix: a refused API key
  (`SandboxAuthError`), a tenant's quota (`SandboxQuotaError`), a server that cannot be reached
  (`SandboxConnectionError`), a failing store (`SandboxStoreError`), a machine that cannot lock
  the sandbox down (`SandboxInsecureError`). It is not a `SandboxError`, so an `except
  SandboxError` in a `run_code` handler lets it through to the application, and the model never
  reads "ask the server's operator for a key".

Every error carries its text in `display()`; `str(error)` is the same text, so
`f'The script failed: {e}'` reads well.
"""

from __future__ import annotations

__all__ = [
    'CorralError',
    'SandboxError',
    'OperatorError',
    'SandboxSyntaxError',
    'SandboxTypingError',
    'SandboxCheckerError',
    'SandboxRuntimeError',
    'SandboxWorkerError',
    'SandboxLimitError',
    'SandboxInsecureError',
    'SandboxStateError',
    'SandboxSessionBusyError',
    'SandboxStoreError',
    'SandboxAuthError',
    'SandboxQuotaError',
    'SandboxConnectionError',
    'StubError',
]


class CorralError(Exception):
    """Base class of every error corral raises: a `SandboxError` or an `OperatorError`."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._text = text

    def display(self) -> str:
        """What failed, where, and why: for the model (a `SandboxError`) or for whoever runs the
        application (an `OperatorError`)."""
        return self._text

    def __str__(self) -> str:
        return self._text


class SandboxError(CorralError):
    """Base class of the errors a model can act on: its script, its types, its limits. Send
    `display()` back to the model."""


class OperatorError(CorralError):
    """Base class of the errors only the application or the server's operator can act on (a key,
    a quota, a connection, a store, the machine's lockdown layers); not a `SandboxError`, so that
    a `run_code` handler that sends every `SandboxError` to its model lets these through.
    Integrations raise them to the application: CodeMode and CodeTool out of the agent run or the
    tool call, the MCP server as a protocol error to its client, never as a tool result."""


class SandboxSyntaxError(SandboxError):
    """The script is not valid Python, or uses a construct the sandbox refuses.

    `display()` shows the line and a caret, as Python does:

        File "main.py", line 1
          x = (1,
              ^
      SyntaxError: '(' was never closed
    """


class SandboxTypingError(SandboxError):
    """The type check found errors; the script did not run.

    `display()` is ty's full diagnostic text, with paths named after the script and the stub files
    (`main.py`, `repl_type_stubs.pyi`, `<module>.pyi`). `concise` is ty's own one-line text of the
    same diagnostics (`main.py:1:1: error[rule] message`, a line each), when the check was asked
    for it (`Session.check(code, concise=True)`), else None.
    """

    def __init__(self, text: str, *, concise: str | None = None) -> None:
        super().__init__(text)
        self.concise = concise


class SandboxCheckerError(SandboxError):
    """The type checker could not check the script (ty is not installed, could not start, or
    crashed on it); the script did not run. `display()` says what happened; a check that ran too
    long or grew too large is a `SandboxLimitError` instead.
    """


class SandboxRuntimeError(SandboxError):
    """The script raised an exception it did not catch.

    `display()` is a traceback of the script's own frames only, ending with the exception.
    `exc_type` is the exception's class name (`'ValueError'`), `message` its text, `module` the
    module its class is in (`'builtins'`, `'json.decoder'`; '' when not known), `fields` the
    constructor's arguments of a standard decoding error, as plain data, else None: `encoding`,
    `object`, `start`, `end`, `reason` of a `UnicodeEncodeError`/`UnicodeDecodeError`; `msg`,
    `doc`, `pos`, `lineno`, `colno` of a `json.JSONDecodeError` (an `object` over 64 KiB is empty,
    a `doc` over it left out).
    """

    def __init__(
        self, text: str, *, exc_type: str, message: str, module: str = '', fields: dict[str, str | bytes | int] | None = None
    ) -> None:
        super().__init__(text)
        self.exc_type = exc_type
        self.message = message
        self.module = module
        self.fields = fields


class SandboxWorkerError(SandboxError):
    """The worker process serving the session died or broke the channel's rules.

    The session cannot be used again; check out a new one.
    """


class SandboxLimitError(SandboxError):
    """The script went past one of the session's limits.

    A limit enforced by killing the worker (wall time, memory) also ends the session; the others
    (host calls, output) leave it usable. `limit` names the limit (a field of `corral.Limits`, e.g. `'wall_time'`), `value` its setting.
    """

    def __init__(self, text: str, *, limit: str, value: object) -> None:
        super().__init__(text)
        self.limit = limit
        self.value = value


class SandboxInsecureError(OperatorError):
    """A lockdown layer that the pool requires is not available on this machine."""


class SandboxStateError(SandboxError):
    """A stored session state cannot be loaded: it was altered, comes from an incompatible corral
    version, is truncated, is over the size quota, was made for another pool's functions, or is not
    in the store. `display()` names which; the state is never executed or unpickled to find out.
    """


class SandboxSessionBusyError(SandboxError):
    """The stored session is checked out elsewhere: another holder has its lease.

    The lease expires when its holder stops renewing it (its process died), so a crashed process does
    not lock a session forever; try again later, or fork the session instead.
    """


class SandboxStoreError(OperatorError):
    """The session store failed: its disk is full, its database is unreachable or its connection
    was lost, its file is locked by another process for too long, or it has no place to live.

    `display()` says which, and where. Stores write atomically, so what was stored before the failed
    operation is intact: a state being written either replaced the old one whole or not at all.
    """


class SandboxAuthError(OperatorError):
    """The server refused the API key: it is unknown, revoked, or not shaped like a corral key.

    `display()` is the same text in every case, so that a caller learns nothing about which keys
    exist; the server's operator creates keys with `corral keys create --tenant NAME`.
    """


class SandboxQuotaError(OperatorError):
    """A tenant went over one of its quotas; what it asked for was not done.

    `quota` names the quota (`'concurrent_sessions'`, `'stored_bytes'`, `'cpu_seconds_per_hour'`),
    `limit` its setting for the tenant, `used` the tenant's use when it was refused (sessions,
    bytes, or CPU seconds in the last hour), and `display()` says all three, e.g.
    `tenant 'acme' has 10 sessions open; its quota is 10 (concurrent_sessions)`.
    """

    def __init__(self, text: str, *, tenant: str, quota: str, limit: float, used: float) -> None:
        super().__init__(text)
        self.tenant = tenant
        self.quota = quota
        self.limit = limit
        self.used = used


class SandboxConnectionError(OperatorError):
    """`RemotePool` cannot reach the corral server (refused, unresolved, timed out, TLS failed), or
    lost it and could not take the session up again on another replica. `display()` names the URL
    and the reason."""


class StubError(ValueError):
    """The stubs a session was checked out with are wrong: a mistake of the application, not of the
    script, so it is a `ValueError` and not a `SandboxError` (an application that sends every
    `SandboxError`'s text to its model does not send this one).

    Raised by `pool.checkout(type_check=True, ...)` when ty finds errors in the stub files themselves
    (a misspelled import such as `from typing import Litteral`, an undefined type, a syntax error),
    which would otherwise leave the functions they declare unchecked; `diagnostics` is ty's text.
    Raised by the first `feed_run` that runs a script when `type_check_stubs` declares a function
    that its `external_lookup` does not provide (and by checkout when an `ExternalModule`'s stubs
    declare a function it does not have); `diagnostics` is then None.
    """

    def __init__(self, text: str, *, diagnostics: str | None = None) -> None:
        super().__init__(text)
        self.diagnostics = diagnostics
