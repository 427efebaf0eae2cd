"""Code Mode for Pydantic AI: an agent's tools behind one `run_code` tool, run by corral.

    from pydantic_ai import Agent
    from corral.pydantic_ai import CodeMode

    agent = Agent('anthropic:claude-sonnet-4-6', capabilities=[CodeMode()])

The model writes a Python script that calls the selected tools as `async` functions (stubs generated
from their JSON schemas are in the `run_code` description and type-check every script). Each call
from the script goes through Pydantic AI's own tool machinery (argument validation, capability
hooks, usage limits, approvals), so a tool behaves the same whether the model calls it directly or
from code. Variables persist between `run_code` calls of one agent run; `restart: true` resets them.
With a pool that has a store, scripts pause on calls that wait for a person's approval, and the
variables persist across the runs of a conversation (see `CodeMode`'s `pool`).

The script has no files, environment variables or clock unless granted:

    CodeMode(mounts=Mount('/srv/reports', '/data', mode='read-only'), os_access=OsAccess(clock=True))
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import hmac
import json
import re
import secrets
import typing
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Any

try:
    from pydantic import TypeAdapter, ValidationError
    from pydantic_ai import UserPromptNode
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.exceptions import AgentRunError, ApprovalRequired, CallDeferred, ModelRetry, ToolFailed, UserError
    from pydantic_ai.messages import BinaryContent, ModelMessage, ModelRequest, ToolCallPart, ToolReturn, ToolReturnPart
    from pydantic_ai.tool_manager import ToolManager
    from pydantic_ai.run import AgentRunResult
    from pydantic_ai.tools import (
        AgentDepsT,
        DeferredToolRequests,
        DeferredToolResult,
        DeferredToolResults,
        RunContext,
        ToolApproved,
        ToolDefinition,
        ToolDenied,
        ToolSelector,
        matches_tool_selector,
    )
    from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, WrapperToolset
    from pydantic_ai.toolsets.abstract import ToolsetTool
except ImportError as _error:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "corral.pydantic_ai needs Pydantic AI: install it with `pip install -e '.[pydantic-ai]'` in corral's clone"
    ) from _error
from typing_extensions import NotRequired, TypedDict

from ..host.deferred import Deferred, PendingCall, SandboxPaused
from ..host.os_access import Mount, OsAccess
from ..host.pool import Pool
from ..server.client import RemotePool, pool_from_environment
from ..host.session import Session
from ..limits import Limits
from ._common import (
    CallRecord,
    catalog_instructions,
    describe_calls,
    error_text,
    images_in,
    json_form,
    mount_list,
    run_code_description,
    run_script,
    sandbox_value,
    tool_value,
)
from .stubs import SchemaFunction, StubWriter

__all__ = ['CodeMode', 'CodeModeToolset']

RUN_CODE = 'run_code'


class _RunCodeArgs(TypedDict):
    code: str
    restart: NotRequired[bool]


_RUN_CODE_SCHEMA: dict[str, Any] = {
    'type': 'object',
    'properties': {
        'code': {'type': 'string', 'description': 'The Python script to run.'},
        'restart': {
            'type': 'boolean',
            'default': False,
            'description': 'Reset the sandbox first: forget the variables, functions and imports of earlier calls.',
        },
    },
    'required': ['code'],
    'additionalProperties': False,
}
_RUN_CODE_VALIDATOR = TypeAdapter(_RunCodeArgs).validator


@dataclass
class CodeMode(AbstractCapability[AgentDepsT]):
    """Move an agent's tools behind one `run_code` tool that runs the model's Python in corral.

    - `tools`: which tools move: `'all'`, a list of names, a predicate `(ctx, tool_def) -> bool`,
      or a dict matched against tool metadata (`FunctionToolset(...).with_metadata(code_mode=True)`
      with `tools={'code_mode': True}`). The others stay ordinary tool calls.
    - `max_retries`: how many times a failed script (syntax, type, runtime error, a limit) is sent
      back to the model to fix, per `run_code` call.
    - `max_tool_calls`: calls a single script may make to the tools, over all its pauses.
    - `type_check`: check every script against the tools' stubs before it runs.
    - `limits`: the sandbox's `corral.Limits` (wall time, memory, output ...).
    - `packages`: third-party packages scripts may import (`'numpy'`, `'pandas'`, `'matplotlib'`) in
      the pools the runs make (give them to your own `Pool(packages=...)` instead).
    - `pool`: a `corral.Pool` (or `corral.RemotePool`) to check sandboxes out of; by default each
      agent run makes its own (a `corral.RemotePool` of the server at `CORRAL_URL` when that is set).
      A pool given a store (`Pool(store=...)`, or a `RemotePool`) keeps the sessions there: a call from a script to a
      tool that needs approval or is deferred then pauses the script, and the run ends with
      `DeferredToolRequests` naming that call (its tool and arguments); the next run's
      `deferred_tool_results` resume it from that call, in any process using the store. And the
      next run of a conversation (given its message history) starts from a fork of its session.
      A stored session is bound to the `run_code` call that paused or returned it: answers given
      to another `run_code` call, and a history whose `run_code` return names a session that
      call did not return (signed with the pool's state key), are refused with a `UserError`.
    - `tenant`: whose stored sessions a run reaches: a str, or a function of the run's context
      (`tenant=lambda ctx: ctx.deps.user_id`), as `Pool.checkout(tenant=...)` takes it. An
      application whose users send back their message histories and approvals gives each user
      a tenant: a session id another user learned then names no session of theirs. A
      `RemotePool`'s tenant is its API key's: give each user a key of their own instead.
    - `os_access`: a `corral.OsAccess` granting the script environment variables (`environ=`), the
      clock (`clock=True`), or files outside the mounts.
    - `mounts`: one `corral.Mount(host_dir, sandbox_path, mode)` or several: host folders the script
      reads as files (`CodeTool`'s name; `mount`, the old name, is taken too). The default mode,
      `'overlay'`, is copy-on-write: the script may write, but its writes stay in the run's
      sandbox; `'read-only'` forbids writes; `'read-write'` keeps them.
      Leave `os_access` and `mounts` unset unless the task needs host access, and grant only what
      it needs. The `run_code` description tells the model what was granted.
    - `dynamic_catalog`: put the functions' stubs in the agent's instructions (rebuilt before each
      model request) instead of the `run_code` description, which then keeps only how to use it
      and the limits, and stays the same when the tools change.

    In an agent spec: `capabilities: [{CodeMode: {tools: [search, fetch], max_retries: 5}}]`, loaded
    with `Agent.from_file(path, custom_capability_types=[CodeMode])`. `os_access` and `mounts` are
    Python objects, so they cannot be set in a spec.
    """

    tools: ToolSelector[AgentDepsT] = 'all'
    max_retries: int = 3
    _: KW_ONLY
    os_access: OsAccess | None = None
    mounts: Mount | Sequence[Mount] | None = None
    mount: Mount | Sequence[Mount] | None = field(default=None, repr=False)  # the old name of `mounts`
    dynamic_catalog: bool = False
    max_tool_calls: int = 100
    type_check: bool = True
    limits: Limits | None = None
    pool: Pool | RemotePool | None = field(default=None, repr=False)
    packages: Sequence[str] = ()
    tenant: str | Callable[[RunContext[AgentDepsT]], str] | None = field(default=None, repr=False)
    # the stubs of the latest step, for the instructions (a fresh one for each run: see `for_run`)
    _catalog: _Catalog = field(default_factory=lambda: _Catalog(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.packages and self.pool is not None:
            raise UserError('CodeMode: give packages to the pool (Pool(packages=...)), or leave pool out')
        if self.packages:
            from ..language.catalog import package_closure

            try:
                self.packages = package_closure(self.packages)
            except ValueError as error:
                raise UserError(f'CodeMode packages: {error}') from None
        if isinstance(self.limits, dict):  # from an agent spec: `limits: {wall_time: 10}`
            self.limits = Limits(**self.limits)
        if self.os_access is not None and not isinstance(self.os_access, OsAccess):
            raise UserError(
                f'CodeMode os_access must be a corral.OsAccess, not {type(self.os_access).__name__} '
                '(it cannot be set in an agent spec; pass it in Python)'
            )
        if self.mount is not None:
            if self.mounts is not None:
                raise UserError('CodeMode takes mounts or its old name mount, not both')
            self.mounts, self.mount = self.mount, None
        if self.mounts is not None:
            try:
                mount_list(self.mounts)
            except TypeError:
                raise UserError(
                    'CodeMode mounts must be a corral.Mount or a sequence of them '
                    '(it cannot be set in an agent spec; pass it in Python)'
                ) from None
        if not isinstance(self.dynamic_catalog, bool):
            raise UserError(f'CodeMode dynamic_catalog must be true or false, not {self.dynamic_catalog!r}')
        if self.max_retries < 0:
            raise UserError('CodeMode max_retries must be 0 or more')
        if self.max_tool_calls < 1:
            raise UserError('CodeMode max_tool_calls must be at least 1')
        if self.tenant is not None and not (isinstance(self.tenant, str) or callable(self.tenant)):
            raise UserError(f'CodeMode tenant must be a str or a function of the run context, not {type(self.tenant).__name__}')
        if self.tenant is not None and isinstance(self.pool, RemotePool):
            raise UserError(_REMOTE_TENANT)

    async def for_run(self, ctx: RunContext[AgentDepsT]) -> CodeMode[AgentDepsT]:
        return replace(self)  # with a fresh `_catalog`

    def get_instructions(self) -> Any:
        if not self.dynamic_catalog:
            return None
        catalog = self._catalog

        def code_mode_catalog(ctx: RunContext[AgentDepsT]) -> str | None:
            # the toolset fills the catalog in `get_tools`, which runs before the instructions of a step
            return catalog.instructions

        return code_mode_catalog

    async def before_node_run(self, ctx: RunContext[AgentDepsT], *, node: Any) -> Any:
        # Answers to the calls a paused script waits on go to the `run_code` call that resumes it.
        if isinstance(node, UserPromptNode) and node.deferred_tool_results is not None:
            results = _route_answers(node.deferred_tool_results)
            if results is not node.deferred_tool_results:
                return replace(node, deferred_tool_results=results)
        return node

    async def after_run(self, ctx: RunContext[AgentDepsT], *, result: AgentRunResult[Any]) -> AgentRunResult[Any]:
        # A paused `run_code` call is shown as the calls its script waits on.
        if isinstance(result.output, DeferredToolRequests):
            requests = _inner_requests(result.output)
            if requests is not result.output:
                result = copy.copy(result)
                result.output = requests
        return result

    def get_wrapper_toolset(self, toolset: AbstractToolset[AgentDepsT]) -> AbstractToolset[AgentDepsT] | None:
        return CodeModeToolset(
            wrapped=toolset,
            tool_selector=self.tools,
            max_retries=self.max_retries,
            max_tool_calls=self.max_tool_calls,
            type_check=self.type_check,
            limits=self.limits,
            pool=self.pool,
            os_access=self.os_access,
            mounts=mount_list(self.mounts),
            packages=self.packages,
            catalog=self._catalog if self.dynamic_catalog else None,
            tenant=self.tenant,
        )


class _Catalog:
    """The function stubs of one agent run's latest step, when they go in the instructions."""

    def __init__(self) -> None:
        self.stubs: str | None = None

    @property
    def instructions(self) -> str | None:
        return None if self.stubs is None else catalog_instructions(self.stubs, tool_name=RUN_CODE)


@dataclass(kw_only=True)
class _RunCodeTool(ToolsetTool[AgentDepsT]):
    """The `run_code` tool of one step, with what that step's script can call."""

    stubs: str
    functions: dict[str, tuple[str, SchemaFunction]]  # sandbox name -> (tool name, argument mapping)
    wrapped_tools: dict[str, ToolsetTool[AgentDepsT]]


class _RunState:
    """One agent run's sandbox: the session whose variables persist between `run_code` calls."""

    def __init__(self, pool: Pool | RemotePool | None, *, os_access: OsAccess | None = None, mounts: Sequence[Mount] = (), packages: Sequence[str] = ()) -> None:
        self._pool = pool
        self._packages = tuple(packages)
        # a pool given a store (and every corral server) keeps the sessions there, so a script can pause on a call that waits
        self.stored = isinstance(pool, RemotePool) or (pool is not None and pool.has_store)
        self._continued = False  # whether the run's first session was chosen (see `get_session`)
        self.paused: set[str] = set()  # the tool call ids of `run_code` calls whose scripts paused in this run
        self._os_access = os_access
        self._mounts = tuple(mounts)
        self._own_pool: Pool | RemotePool | None = None
        self.session: Session | None = None
        self.stubs: str | None = None
        self.lock = asyncio.Lock()

    async def get_session(
        self,
        *,
        stubs: str,
        type_check: bool,
        limits: Limits | None,
        session_id: str | None = None,
        messages: Sequence[ModelMessage] = (),
        tenant: str = '',
    ) -> Session:
        """The run's session: the one open, else a new one, or the stored session `session_id`
        of `tenant` (`''`: the store's one tenant).

        The first session of a run with a store forks the stored session of the latest `run_code`
        return in `messages` (the message history), so the conversation's variables come back;
        raises `UserError` when that return does not carry the binding this pool signed for it.
        """
        pool = self.pool()
        if tenant and isinstance(pool, RemotePool):
            raise UserError(_REMOTE_TENANT)
        fork_from: str | None = None
        if session_id is not None:
            await self.reset()
        elif not self._continued and self.stored:
            fork_from = _latest_session(messages, self.binding_key(), tenant)
        self._continued = True
        if self.session is None:
            self.stubs = stubs
            session = pool.checkout(
                type_check=type_check,
                type_check_stubs=stubs,
                limits=limits,
                os_access=self._os_access,
                mounts=self._mounts,
                ephemeral=False if session_id or fork_from else not self.stored,
                session_id=session_id or fork_from,
                fork=fork_from is not None,
                **({'tenant': tenant} if tenant else {}),
            )
            try:
                await session.__aenter__()
            except BaseException:
                await session.aclose()
                raise
            self.session = session
        return self.session

    def pool(self) -> Pool | RemotePool:
        """The pool the run's sessions come from: the one given, else one of its own."""
        if self._pool is not None:
            return self._pool
        if self._own_pool is None:
            self._own_pool = pool_from_environment(warm_workers=0, packages=self._packages)
        return self._own_pool

    def binding_key(self) -> bytes:
        """The key that signs which `run_code` call returned a stored session (`_binding`): made
        from the pool's state key, a `RemotePool`'s API key, or else a key of this process."""
        pool = self.pool()
        if isinstance(pool, RemotePool):
            secret = pool.api_key.encode() if pool.api_key else _PROCESS_KEY
        else:
            secret = pool._state_key()
        return hmac.new(secret, _BINDING_LABEL, hashlib.sha256).digest()

    async def reset(self) -> None:
        session, self.session = self.session, None
        if session is not None:
            await session.aclose()

    async def close(self) -> None:
        await self.reset()
        pool, self._own_pool = self._own_pool, None
        if pool is not None:
            await pool.aclose()


@dataclass
class CodeModeToolset(WrapperToolset[AgentDepsT]):
    """The toolset `CodeMode` wraps around an agent's tools: `run_code` plus the tools not selected."""

    tool_selector: ToolSelector[AgentDepsT] = 'all'
    max_retries: int = 3
    max_tool_calls: int = 100
    type_check: bool = True
    limits: Limits | None = None
    pool: Pool | RemotePool | None = field(default=None, repr=False)
    os_access: OsAccess | None = None
    mounts: Sequence[Mount] = ()
    packages: Sequence[str] = ()
    #: when set, the stubs go here (for the instructions) instead of the `run_code` description
    catalog: _Catalog | None = field(default=None, repr=False, compare=False)
    tenant: str | Callable[[RunContext[AgentDepsT]], str] | None = field(default=None, repr=False)
    _state: _RunState | None = field(default=None, init=False, repr=False, compare=False)

    async def for_run(self, ctx: RunContext[AgentDepsT]) -> AbstractToolset[AgentDepsT]:
        new = replace(self, wrapped=await self.wrapped.for_run(ctx))
        new._state = _RunState(self.pool, os_access=self.os_access, mounts=self.mounts, packages=self.packages)
        return new

    async def for_run_step(self, ctx: RunContext[AgentDepsT]) -> AbstractToolset[AgentDepsT]:
        wrapped = await self.wrapped.for_run_step(ctx)
        if wrapped is self.wrapped:
            return self
        new = replace(self, wrapped=wrapped)
        new._state = self._state
        return new

    async def __aexit__(self, *args: Any) -> bool | None:
        try:
            if self._state is not None:
                await self._state.close()
        finally:
            result = await self.wrapped.__aexit__(*args)
        return result

    # ----- the tools the model sees --------------------------------------------------------------

    async def get_tools(self, ctx: RunContext[AgentDepsT]) -> dict[str, ToolsetTool[AgentDepsT]]:
        tools = await self.wrapped.get_tools(ctx)
        native: dict[str, ToolsetTool[AgentDepsT]] = {}
        sandboxed: dict[str, ToolsetTool[AgentDepsT]] = {}
        for name, tool in tools.items():
            if _stays_native(ctx, tool.tool_def) or not await matches_tool_selector(self.tool_selector, ctx, tool.tool_def):
                native[name] = tool
            else:
                sandboxed[name] = tool
        if RUN_CODE in native:
            raise UserError(f"CodeMode offers a tool named '{RUN_CODE}'; rename the agent's own tool of that name")
        writer = StubWriter()
        functions: dict[str, tuple[str, SchemaFunction]] = {}
        for name, tool in sandboxed.items():
            tool_def = tool.tool_def
            function = writer.add_schema_function(
                name,
                parameters=tool_def.parameters_json_schema,
                returns=tool_def.return_schema,
                return_type=_annotated_return(writer, tool),
                description=tool_def.description,
            )
            if function.name == RUN_CODE:
                raise UserError(f"CodeMode offers a tool named '{RUN_CODE}'; rename the tool {name!r}")
            functions[function.name] = (name, function)
        stubs = writer.render()
        dynamic = self.catalog is not None
        description = run_code_description(
            '' if dynamic else stubs,
            limits=self.limits,
            max_calls=self.max_tool_calls,
            type_check=self.type_check,
            repl=True,
            os_access=self.os_access,
            mounts=self.mounts,
            catalog_in_instructions=dynamic,
        )
        if self.catalog is not None:
            self.catalog.stubs = stubs
        run_code = _RunCodeTool(
            toolset=self,
            tool_def=ToolDefinition(
                name=RUN_CODE,
                description=description,
                parameters_json_schema=_RUN_CODE_SCHEMA,
                sequential=True,
                metadata={'code_arg_name': 'code', 'code_arg_language': 'python'},
            ),
            max_retries=self.max_retries,
            args_validator=_RUN_CODE_VALIDATOR,
            stubs=stubs,
            functions=functions,
            wrapped_tools=tools,
        )
        return {**native, RUN_CODE: run_code}

    # ----- running a script ----------------------------------------------------------------------

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[AgentDepsT], tool: ToolsetTool[AgentDepsT]
    ) -> Any:
        if not isinstance(tool, _RunCodeTool):
            return await self.wrapped.call_tool(name, tool_args, ctx, tool)
        state = self._state
        if state is None:
            raise UserError('CodeModeToolset was used outside an agent run; let CodeMode build it')
        parent = ctx.tool_manager
        if parent is None:
            raise UserError('run_code needs the run context of an agent run step (ctx.tool_manager is not set)')
        resume = (ctx.tool_call_metadata or {}).get(_RESUME) if ctx.tool_call_approved else None
        tenant = self.tenant(ctx) if callable(self.tenant) else (self.tenant or '')
        if not isinstance(tenant, str):
            raise UserError(f'CodeMode tenant must give a str, not {type(tenant).__name__}')
        parent_id = ctx.tool_call_id or RUN_CODE
        async with state.lock:
            restarted: str | None = None
            if resume is None and ctx.tool_call_id in state.paused:
                # A handler answered the paused `run_code` call itself, not the calls its script waits on.
                raise UserError(
                    'run_code was answered as a whole while its script waits on calls; answer those calls '
                    '(the approvals and calls of the DeferredToolRequests), not run_code'
                )
            if resume is not None:
                if not state.stored:
                    raise UserError('run_code was given answers for a paused script, but CodeMode has no store: give it pool=Pool(store=...)')
            elif tool_args.get('restart'):
                await state.reset()
            elif state.session is not None and state.stubs != tool.stubs:
                # The session type-checks against the stubs it started with: new tools need a new one.
                await state.reset()
                restarted = 'The functions available changed, so the sandbox started again: variables from earlier calls are gone.'
            session = await state.get_session(
                stubs=tool.stubs,
                type_check=self.type_check,
                limits=self.limits,
                session_id=None if resume is None else resume['session_id'],
                messages=ctx.messages,
                tenant=tenant,
            )
            calls = _Calls(
                parent_id=parent_id,
                limit=self.max_tool_calls,
                ctx=ctx,
                manager=ToolManager[AgentDepsT](
                    toolset=self.wrapped, root_capability=parent.root_capability, ctx=ctx, tools=tool.wrapped_tools
                ),
                pausable=session.session_id is not None,
            )
            lookup = {py_name: calls.host_function(tool_name, function) for py_name, (tool_name, function) in tool.functions.items()}
            try:
                if resume is None:
                    outcome = await run_script(session, tool_args['code'], lookup)
                else:
                    pending = session.pending_calls
                    if any(not isinstance(call.payload, dict) or call.payload.get('run_code') != parent_id for call in pending):
                        await state.reset()
                        raise UserError(
                            f'deferred tool results for the run_code call {parent_id!r} name a stored session whose script '
                            'that call did not pause; they are refused'
                        )
                    # the calls the script made before it paused count toward max_tool_calls
                    calls.count = max((call.payload.get('calls', 0) for call in pending), default=0)
                    calls.deferred = [call.payload for call in pending]
                    answers = await calls.answer(resume['session_id'], session.pending_calls, resume['answers'], resume['metadata'])
                    outcome = await run_script(session, tool_args['code'], lookup, answers=answers)
            except SandboxPaused as paused:
                if calls.fatal is not None:
                    raise calls.fatal from None
                await state.reset()  # stored as it paused; the next run checks it out again, here or elsewhere
                state.paused.add(ctx.tool_call_id or RUN_CODE)
                raise _pause(ctx.tool_call_id or RUN_CODE, session.session_id, paused.calls) from None
            if calls.fatal is not None:
                raise calls.fatal
            if outcome.error is not None:
                text = error_text(outcome.error)
                summary = describe_calls(calls.records)
                if summary:
                    text += '\n\n' + summary
                if outcome.printed:
                    text += '\n\nPrinted before the failure:\n' + outcome.printed.rstrip('\n')
                if restarted:
                    text += '\n\n' + restarted
                if not session.alive:
                    await state.reset()
                    text += '\n\nThe sandbox was restarted: variables from earlier run_code calls are gone.'
                raise ModelRetry(text)
        value = json_form(outcome.value)
        extras: dict[str, Any] = {}
        if outcome.printed:
            extras['printed'] = outcome.printed
        if outcome.note:
            extras['note'] = outcome.note
        if restarted:
            extras['restarted'] = restarted
        content = {'result': value, **extras} if extras else value
        # returns in the order of their calls, as gathered calls may end in any order
        returns = {**{call_id: calls.returns[call_id] for call_id in calls.parts if call_id in calls.returns}, **calls.returns}
        metadata = {'tool_calls': calls.parts, 'tool_returns': returns}
        if session.session_id is not None:
            metadata[_SESSION] = session.session_id  # the next run of the conversation forks it
            metadata[_BINDING] = _binding(state.binding_key(), tenant, session.session_id, parent_id)
        # a figure the script made (its value, or plt.show()) reaches the model as the image itself
        images = [BinaryContent(data=image.data, media_type=image.mime_type) for image in images_in(outcome.value)]
        return ToolReturn(return_value=content, content=images or None, metadata=metadata)


#: `DeferredToolRequests.metadata` key of a paused `run_code` call, and `ToolApproved` metadata key of its resumption
_PAUSED = 'corral_paused'
_RESUME = 'corral_resume'
#: `run_code` return metadata key: the stored session the script ran in
_SESSION = 'corral_session_id'
#: `run_code` return metadata key: the MAC that binds that session to the return's tool call id (and tenant)
_BINDING = 'corral_session_binding'
_BINDING_LABEL = b'corral code mode: a stored session bound to the run_code call that returned it'
_REMOTE_TENANT = "CodeMode tenant scopes the sessions of a Pool's store; a RemotePool's tenant is its API key's: give each user a key of their own"
#: the binding key of a RemotePool without an API key: the process's own
_PROCESS_KEY = secrets.token_bytes(32)
#: the tool call id a call of a paused script is asked for by: `<run_code call id>__corral-<session id>-<call id>`
_INNER_ID = re.compile(r'(?P<parent>.+)__corral-(?P<session>[0-9a-f]+)-(?P<call>[0-9]+)')


def _binding(key: bytes, tenant: str, session_id: str, tool_call_id: str) -> str:
    """The hex HMAC-SHA256 that says the `run_code` call `tool_call_id` returned stored session `session_id` of `tenant`."""
    return hmac.new(key, json.dumps([tenant, session_id, tool_call_id]).encode(), hashlib.sha256).hexdigest()


def _latest_session(messages: Sequence[ModelMessage], key: bytes, tenant: str) -> str | None:
    """The stored session of the latest `run_code` return in `messages`, if any. Raises
    `UserError` when that return does not carry the binding (`_binding`) of its session to its
    tool call id and `tenant`: a history that names a session its call did not return."""
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, ToolReturnPart) and part.tool_name == RUN_CODE and isinstance(part.metadata, dict):
                    session_id = part.metadata.get(_SESSION)
                    if isinstance(session_id, str):
                        mac = part.metadata.get(_BINDING)
                        if not (isinstance(mac, str) and mac.isascii() and hmac.compare_digest(mac, _binding(key, tenant, session_id, part.tool_call_id))):
                            raise UserError(
                                f'the latest run_code return of the message history ({part.tool_call_id!r}) names a stored session '
                                f'that call did not return (its {_BINDING} does not match), so it is not continued'
                            )
                        return session_id
    return None


def _inner_id(parent_id: str, session_id: str, call_id: int) -> str:
    return f'{parent_id}__corral-{session_id}-{call_id}'


def _pause(parent_id: str, session_id: str | None, pending: list[PendingCall]) -> ApprovalRequired | CallDeferred:
    """What a `run_code` call whose script paused raises: its pending calls, for `CodeMode.after_run`
    to show as the deferred calls they are (the session id is in their tool call ids)."""
    assert session_id is not None  # only stored sessions pause (`_Calls.pausable`)
    inner = [
        {
            'tool_call_id': _inner_id(parent_id, session_id, call.call_id),
            'tool_name': call.payload['tool_name'],
            'args': call.payload['args'],
            'kind': call.payload['kind'],
            'metadata': call.payload['metadata'],
        }
        for call in pending
    ]
    metadata = {_PAUSED: inner}
    if any(call['kind'] == 'approval' for call in inner):
        return ApprovalRequired(metadata=metadata)
    return CallDeferred(metadata=metadata)


def _inner_requests(requests: DeferredToolRequests) -> DeferredToolRequests:
    """`requests` with each paused `run_code` call replaced by the calls its script waits on, by their
    tool names and arguments (what an approval UI shows): `send_email(to=..., body=...)`."""
    paused = {
        part.tool_call_id
        for part in (*requests.approvals, *requests.calls)
        if part.tool_name == RUN_CODE and _PAUSED in (requests.metadata.get(part.tool_call_id) or {})
    }
    if not paused:
        return requests
    approvals = [part for part in requests.approvals if part.tool_call_id not in paused]
    calls = [part for part in requests.calls if part.tool_call_id not in paused]
    metadata = {key: value for key, value in requests.metadata.items() if key not in paused}
    for parent_id in paused:
        for inner in requests.metadata[parent_id][_PAUSED]:
            part = ToolCallPart(tool_name=inner['tool_name'], args=inner['args'], tool_call_id=inner['tool_call_id'])
            (approvals if inner['kind'] == 'approval' else calls).append(part)
            if inner['metadata']:
                metadata[part.tool_call_id] = inner['metadata']
    return replace(requests, approvals=approvals, calls=calls, metadata=metadata)


def _route_answers(results: DeferredToolResults) -> DeferredToolResults:
    """`results` with the answers to calls of paused scripts gathered into a `ToolApproved` of each
    paused `run_code` call, whose metadata carries them (read back in `CodeModeToolset.call_tool`)."""
    resumed: dict[str, dict[str, Any]] = {}
    kept = DeferredToolResults(
        approvals=dict(results.approvals),
        calls=dict(results.calls),
        metadata=dict(results.metadata),
        answered_by=dict(results.answered_by),
    )
    for tool_call_id, result in results.to_tool_call_results().items():
        match = _INNER_ID.fullmatch(tool_call_id)
        if match is None:
            continue
        kept.approvals.pop(tool_call_id, None)
        kept.calls.pop(tool_call_id, None)
        entry = resumed.setdefault(match['parent'], {'session_id': match['session'], 'answers': {}, 'metadata': {}})
        if entry['session_id'] != match['session']:
            raise UserError(f'deferred tool results name two sessions for the run_code call {match["parent"]!r}')
        call_id = int(match['call'])
        entry['answers'][call_id] = result
        entry['metadata'][call_id] = kept.metadata.pop(tool_call_id, None)
    if not resumed:
        return results
    for parent_id, entry in resumed.items():
        kept.approvals[parent_id] = ToolApproved()
        kept.metadata[parent_id] = {_RESUME: entry}
    return kept


def _stays_native(ctx: RunContext[Any], tool_def: ToolDefinition) -> bool:
    """Tools that keep their own tool call whatever the selector says."""
    if tool_def.tool_kind is not None:  # the framework's own control tools (tool search, loading)
        return True
    if tool_def.unless_native:  # a fallback the model request may drop for a provider-native tool
        return True
    if tool_def.metadata and 'code_arg_name' in tool_def.metadata:  # another code tool: no code in code
        return True
    try:
        return not ctx.is_tool_available(tool_def)  # hidden until revealed (deferred loading)
    except Exception:  # pragma: no cover - older contexts
        return False


def _annotated_return(writer: StubWriter, tool: ToolsetTool[Any]) -> str | None:
    """The stub text of a plain function tool's return annotation, or None when it has none.

    Preferred to the return schema: it keeps the names of `TypedDict`s and dataclasses.
    """
    toolset = tool.toolset
    if not isinstance(toolset, FunctionToolset):
        return None
    original = getattr(tool, 'original_name', None) or tool.tool_def.name
    function = getattr(toolset.tools.get(original), 'function', None)
    if function is None:
        return None
    try:
        hints = typing.get_type_hints(function, include_extras=True)
    except Exception:
        return None
    if 'return' not in hints:
        return None
    annotation = _unwrap_tool_return(hints['return'])
    if annotation is None:
        return None
    return writer.python_type(annotation, hint=f'{tool.tool_def.name}_result')


def _unwrap_tool_return(annotation: Any) -> Any:
    """`ToolReturn[X]` -> `X`; a bare `ToolReturn` -> None (unknown)."""
    if annotation is ToolReturn:
        return None
    if typing.get_origin(annotation) is ToolReturn:
        return typing.get_args(annotation)[0]
    return annotation


class _Calls:
    """The tool calls of one `run_code` call, made through Pydantic AI's tool manager."""

    def __init__(self, *, parent_id: str, limit: int, ctx: RunContext[Any], manager: ToolManager[Any], pausable: bool = False) -> None:
        self.parent_id = parent_id
        #: a call that needs approval or runs outside the agent pauses the script (a stored session)
        self.pausable = pausable
        self.limit = limit
        self.ctx = ctx
        self.manager = manager
        self.count = 0
        self.running = 0
        self.parts: dict[str, ToolCallPart] = {}
        self.returns: dict[str, ToolReturnPart] = {}
        self.records: list[CallRecord] = []
        self.fatal: BaseException | None = None
        self.deferred: list[dict[str, Any]] = []  # the payloads of the calls that paused the script

    def host_function(self, tool_name: str, function: SchemaFunction) -> Callable[..., Any]:
        async def call_tool(*args: Any, **kwargs: Any) -> Any:
            return await self.call(tool_name, function.arguments(tool_value(args), tool_value(kwargs)))

        call_tool.__name__ = function.name
        return call_tool

    def _check_limits(self, tool_name: str, *, counted: bool = False) -> None:
        if self.fatal is not None:
            raise RuntimeError('the agent run is stopping; no more tool calls can be made')
        if not counted and self.count >= self.limit:
            raise RuntimeError(
                f'a script may make at most {self.limit} tool calls, and this one tried to make more; '
                'make fewer calls per script (filter first, or split the work across run_code calls)'
            )
        usage_limits = self.ctx.usage_limits
        if usage_limits is not None and usage_limits.tool_calls_limit is not None:
            projected = copy.copy(self.ctx.usage)
            # the calls still running, this one, and run_code itself are not counted yet
            projected.tool_calls += self.running + 2
            try:
                usage_limits.check_before_tool_call(projected)
            except AgentRunError as error:
                self.fatal = error
                raise RuntimeError(f'{tool_name}() was not called: {error}') from None

    async def answer(
        self, session_id: str, pending: list[PendingCall], answers: dict[int, DeferredToolResult], metadata: dict[int, Any]
    ) -> tuple[dict[int, Any], dict[int, BaseException]]:
        """The values and errors the paused script's calls get from a person's (or a system's) answers.

        An approved call runs now, through the tool manager; a denied one raises `PermissionError`
        with the denial's message; a deferred call's result is its value. Calls not answered (or
        whose approved tool deferred again) stay pending.
        """
        waiting = {call.call_id: call for call in pending}
        unknown = sorted(set(answers) - set(waiting))
        if unknown:
            raise UserError(f'deferred tool results answer calls the paused script does not wait on: {unknown}')
        values: dict[int, Any] = {}
        errors: dict[int, BaseException] = {}
        for call_id, result in sorted(answers.items()):
            payload = waiting[call_id].payload
            tool_name, arguments = payload['tool_name'], payload['args']
            tool_call_id = _inner_id(self.parent_id, session_id, call_id)
            try:
                if isinstance(result, ToolApproved):
                    args = result.override_args if result.override_args is not None else arguments
                    values[call_id] = await self.call(
                        tool_name, args, approved=True, metadata=metadata.get(call_id), tool_call_id=tool_call_id, counted=True
                    )
                elif isinstance(result, ToolDenied):
                    self.records.append(CallRecord(tool_name, arguments, 'refused'))
                    raise PermissionError(f'{tool_name}() was denied: {result.message}')
                elif isinstance(result, ModelRetry):
                    raise ValueError(result.message)
                elif isinstance(result, ToolFailed):
                    raise RuntimeError(str(result))
                else:
                    value = result.return_value if isinstance(result, ToolReturn) else result
                    record = CallRecord(tool_name, arguments, 'returned', value)
                    self.records.append(record)
                    values[call_id] = sandbox_value(value)
            except Deferred:
                continue  # the approved tool deferred again: the script waits on
            except Exception as error:  # noqa: BLE001 - the script gets the error, as from any host function
                errors[call_id] = error
        return values, errors

    async def call(
        self,
        tool_name: str,
        arguments: dict[str, Any],
        *,
        approved: bool = False,
        metadata: Any = None,
        tool_call_id: str | None = None,
        counted: bool = False,
    ) -> Any:
        """Make the script's call to `tool_name` through the tool manager: its value for the
        script, or the error the script sees. `counted`: the call was counted toward
        `max_tool_calls` when the script made it (an approved call of a paused script)."""
        self._check_limits(tool_name, counted=counted)
        if not counted:
            self.count += 1
            for payload in self.deferred:  # stored with the pause: the count its resumption goes on from
                payload['calls'] = self.count
        call_id = tool_call_id or f'{self.parent_id}__{self.count}'
        part = ToolCallPart(tool_name=tool_name, args=arguments, tool_call_id=call_id)
        self.parts[call_id] = part
        record = CallRecord(tool_name, arguments)
        self.records.append(record)
        self.running += 1
        try:
            result = await self.manager.handle_call(part, approved=approved, metadata=metadata, wrap_validation_errors=False)
        except ValidationError as error:
            record.outcome = 'refused'
            raise TypeError(_validation_text(tool_name, error)) from None
        except ModelRetry as error:
            record.outcome, record.detail = 'raised', f'ValueError: {error.message}'
            raise ValueError(error.message) from None
        except ToolFailed as error:
            record.outcome, record.detail = 'raised', f'RuntimeError: {error}'
            raise RuntimeError(str(error)) from None
        except (ApprovalRequired, CallDeferred) as error:
            kind = 'approval' if isinstance(error, ApprovalRequired) else 'external'
            if self.pausable:
                record.outcome = 'refused'  # not run yet: the script pauses until it is answered
                self.parts.pop(call_id)
                payload = {'tool_name': tool_name, 'args': arguments, 'kind': kind, 'metadata': error.metadata, 'run_code': self.parent_id, 'calls': self.count}
                self.deferred.append(payload)
                raise Deferred(payload) from None
            if isinstance(error, ApprovalRequired):
                message = f'{tool_name}() needs approval before it runs, and calls made from run_code cannot be approved on this agent'
            else:
                message = f'{tool_name}() runs outside the agent (deferred), and calls made from run_code cannot wait for it on this agent'
            record.outcome = 'refused'
            raise PermissionError(message) from None
        except (AgentRunError, UserError) as error:
            # Errors of the run itself (a usage limit, a misconfigured tool) end the run, as they
            # would for a direct tool call; the script only learns that its call failed.
            self.fatal = error
            record.outcome, record.detail = 'raised', f'{type(error).__name__}: {error}'
            raise RuntimeError(f'{tool_name}() stopped the agent run: {error}') from None
        except Exception as error:
            record.outcome, record.detail = 'raised', f'{type(error).__name__}: {error}'
            raise
        finally:
            self.running -= 1
        if isinstance(result, ToolDenied):
            record.outcome = 'refused'
            self.returns[call_id] = ToolReturnPart(tool_name=tool_name, content=result.message, tool_call_id=call_id, outcome='denied')
            raise PermissionError(f'{tool_name}() was denied: {result.message}')
        metadata = None
        if isinstance(result, ToolReturn):
            metadata = result.metadata
            result = result.return_value
        record.outcome, record.detail = 'returned', result
        self.returns[call_id] = ToolReturnPart(tool_name=tool_name, content=result, tool_call_id=call_id, metadata=metadata)
        return sandbox_value(result)


def _validation_text(tool_name: str, error: ValidationError) -> str:
    lines = [f'{tool_name}() got invalid arguments:']
    for item in error.errors(include_url=False):
        location = '.'.join(str(part) for part in item.get('loc', ())) or '(arguments)'
        lines.append(f'  {location}: {item.get("msg")} (got {item.get("input")!r})')
    return '\n'.join(lines)
