"""`CodeTool`: a `run_code` tool for any agent framework, or for a model API called directly."""

from __future__ import annotations

import asyncio
import base64
import functools
import inspect
import json
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any

from ..host.external import ExternalModule, is_async_callable
from ..host.os_access import Mount, OsAccess
from ..host.pool import Pool
from ..host.session import Session
from ..limits import Limits
from ..values import Image
from ._common import (
    images_in,
    CallRecord,
    describe_calls,
    error_text,
    mount_list,
    run_code_description,
    run_script,
    sandbox_value,
    tool_value,
    value_repr,
)
from .stubs import StubWriter, python_name, stubs_from_functions

__all__ = ['CodeTool']

_CODE_PARAMETER = {'type': 'string', 'description': 'The Python script to run.'}
_RESTART_PARAMETER = {
    'type': 'boolean',
    'description': 'Start from a fresh sandbox, without the variables of earlier calls.',
    'default': False,
}


class CodeTool:
    """One tool, `run_code`, that runs a model's Python script with your functions callable from it.

        async def get_order(order_id: str) -> dict:
            '''Return one order, with its `status` and number of `items`.'''
            ...

        async with CodeTool({'get_order': get_order}) as tool:
            tools = [tool.anthropic_tool()]          # or openai_chat_tool(), openai_responses_tool()
            ...
            result_text = await tool.run(code)       # when the model calls run_code

    - `functions`: name -> sync or async callable the script calls by that name. Their stubs (what
      the model reads, and what the script is type-checked against) are generated from their
      signatures and docstrings; pass `stubs` to write them yourself.
    - `modules`: name -> `ExternalModule` (or a mapping of functions) the script imports.
    - `type_check`: check every script before it runs (the model gets the diagnostics).
    - `keep_session`: keep one sandbox across calls, so variables persist (the tool then takes a
      `restart` argument); by default every call starts from a fresh sandbox.
    - `pool`: the `corral.Pool` to check sessions out of; by default the tool makes its own, closed
      by `aclose()` (or leaving `async with`), or else when its event loop ends (`asyncio.run`
      returning): a tool made once, at import, serves every `asyncio.run` of the program.
    - `mounts`: host folders the script may use as files (`corral.Mount(host_dir, sandbox_path,
      mode)`; the default mode, `'overlay'`, keeps the script's writes in its session).
    - `os_access`: a `corral.OsAccess` granting environment variables, the clock, or files outside
      the mounts. Grant only what the task needs: by default the script has none of them.
    - `packages`: third-party packages scripts may import (`'numpy'`, `'pandas'`, `'matplotlib'`),
      for the pool the tool makes (give them to your own `Pool(packages=...)` instead).

    `run()` returns text for the model: the repr of the script's value, or the error to fix, with
    what the script printed and, after a failure, the function calls that had already run.
    """

    def __init__(
        self,
        functions: Mapping[str, Callable[..., Any]] | None = None,
        *,
        modules: Mapping[str, ExternalModule | Mapping[str, Callable[..., Any]]] | None = None,
        type_check: bool = True,
        stubs: str | None = None,
        limits: Limits | None = None,
        pool: Pool | None = None,
        keep_session: bool = False,
        name: str = 'run_code',
        os_access: OsAccess | None = None,
        mounts: Mount | Sequence[Mount] | None = None,
        packages: Sequence[str] = (),
    ) -> None:
        if packages and pool is not None:
            raise ValueError('give packages to the pool (Pool(packages=...)), or leave pool out and CodeTool makes one with them')
        self.packages = tuple(packages)
        if os_access is not None and not isinstance(os_access, OsAccess):
            raise TypeError(f'os_access must be a corral.OsAccess, not {type(os_access).__name__}')
        self.os_access = os_access
        self.mounts = mount_list(mounts)
        self.name = name
        self.type_check = type_check
        self.limits = limits if limits is not None else Limits()
        self.keep_session = keep_session
        if functions is not None and not isinstance(functions, Mapping):
            raise TypeError(f'functions must map names to callables (a dict), not {type(functions).__name__}: CodeTool({{"get_order": get_order}})')
        self._functions: dict[str, Callable[..., Any]] = {}
        for key, function in (functions or {}).items():
            if not callable(function):
                raise TypeError(f'functions[{key!r}] is not callable: {type(function).__name__}')
            py_name = python_name(key)
            if py_name in self._functions:
                raise ValueError(f'two functions are both named {py_name!r} in the sandbox; rename one')
            self._functions[py_name] = function
        if stubs is None:
            writer = StubWriter()
            for key, function in self._functions.items():
                writer.add_python_function(key, function)
            stubs = writer.render()
        self.stubs = stubs
        self._modules: dict[str, ExternalModule] = {}
        for module_name, module in (modules or {}).items():
            if not isinstance(module, ExternalModule):
                module = ExternalModule(module)
            if module.stubs is None:
                module = ExternalModule(module.functions, stubs=stubs_from_functions(module.functions))
            self._modules[module_name] = module
        self.description = run_code_description(
            self.stubs,
            limits=self.limits,
            type_check=type_check,
            repl=keep_session,
            modules={module_name: module.stubs or '' for module_name, module in self._modules.items()},
            os_access=os_access,
            mounts=self.mounts,
        )
        self._pool = pool
        self._own_pool = pool is None
        self._session: Session | None = None
        self._session_records: list[CallRecord] | None = None
        self._lock = asyncio.Lock()
        self._closer: AsyncGenerator[None, None] | None = None

    # ----- tool definitions ----------------------------------------------------------------------

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the tool's arguments: `code`, and `restart` when the session is kept."""
        properties: dict[str, Any] = {'code': dict(_CODE_PARAMETER)}
        if self.keep_session:
            properties['restart'] = dict(_RESTART_PARAMETER)
        return {'type': 'object', 'properties': properties, 'required': ['code'], 'additionalProperties': False}

    def anthropic_tool(self) -> dict[str, Any]:
        """The tool in the format of Anthropic's Messages API (`tools=[...]`)."""
        return {'name': self.name, 'description': self.description, 'input_schema': self.parameters}

    def openai_chat_tool(self) -> dict[str, Any]:
        """The tool in the format of OpenAI's Chat Completions API (`tools=[...]`)."""
        return {
            'type': 'function',
            'function': {'name': self.name, 'description': self.description, 'parameters': self.parameters},
        }

    def openai_responses_tool(self) -> dict[str, Any]:
        """The tool in the format of OpenAI's Responses API (`tools=[...]`)."""
        return {
            'type': 'function',
            'name': self.name,
            'description': self.description,
            'parameters': self.parameters,
            'strict': False,
        }

    def json_schema(self) -> dict[str, Any]:
        """The tool as one plain JSON schema: its arguments, titled with its name and described."""
        return {'title': self.name, 'description': self.description, **self.parameters}

    # ----- running -------------------------------------------------------------------------------

    async def call(self, arguments: Mapping[str, Any] | str) -> str:
        """Answer a model's call of the tool: `arguments` as the model sent them (a dict, or JSON text)."""
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError as error:
                return f'The arguments of {self.name} are not valid JSON: {error}'
        if not isinstance(arguments, Mapping) or not isinstance(arguments.get('code'), str):
            return f'{self.name} takes an object with a string `code`, the Python script to run.'
        return await self.run(arguments['code'], restart=bool(arguments.get('restart', False)))

    async def run(self, code: str, *, restart: bool = False) -> str:
        """Run `code` and return the text the model should see: the value's repr, or the error."""
        text, _, _ = await self._execute(code, restart=restart)
        return text

    async def call_content(self, arguments: Mapping[str, Any] | str, *, format: str = 'anthropic') -> list[dict[str, Any]]:
        """Answer a model's call of the tool as content blocks: the text `call()` returns, then
        each image the script made (a matplotlib figure as its value, or `plt.show()`).

        `format`: `'anthropic'` (the content of a `tool_result`: `text` and base64 `image`
        blocks) or `'openai'` (the output of a Responses API `function_call_output`:
        `input_text` and `input_image` with a data URL). Raises ValueError for another format.
        """
        if format not in ('anthropic', 'openai'):
            raise ValueError(f"format must be 'anthropic' or 'openai', not {format!r}")
        if isinstance(arguments, str) or not isinstance(arguments.get('code'), str):
            text, images = await self.call(arguments), []
        else:
            text, _, images = await self._execute(arguments['code'], restart=bool(arguments.get('restart', False)))
        if format == 'anthropic':
            return [{'type': 'text', 'text': text}, *(
                {'type': 'image', 'source': {'type': 'base64', 'media_type': image.mime_type, 'data': _base64(image)}} for image in images
            )]
        return [{'type': 'input_text', 'text': text}, *(
            {'type': 'input_image', 'image_url': f'data:{image.mime_type};base64,{_base64(image)}'} for image in images
        )]

    async def _execute(self, code: str, *, restart: bool = False) -> tuple[str, bool, list[Image]]:
        """The text for the model, whether the script succeeded, and the images it made."""
        if self.keep_session:
            async with self._lock:
                if restart:
                    await self._close_session()
                if self._session is None:
                    records: list[CallRecord] = []
                    self._session = await self._checkout(records)
                    self._session_records = records
                assert self._session_records is not None
                self._session_records.clear()
                return await self._run(self._session, code, self._session_records, keep=True)
        records = []
        async with await self._checkout(records) as session:
            return await self._run(session, code, records, keep=False)

    async def reset(self) -> None:
        """Forget the kept session's variables: the next call starts from a fresh sandbox."""
        async with self._lock:
            await self._close_session()

    async def _run(self, session: Session, code: str, records: list[CallRecord], *, keep: bool) -> tuple[str, bool, list[Image]]:
        lookup = {name: _recorded(name, function, records) for name, function in self._functions.items()}
        outcome = await run_script(session, code, lookup)
        if outcome.error is not None:
            text = error_text(outcome.error)
            summary = describe_calls(records)
            if summary:
                text += '\n\n' + summary
            if outcome.printed:
                text += '\n\nPrinted before the failure:\n' + outcome.printed.rstrip('\n')
            if keep and not session.alive:
                await self._close_session()
                text += '\n\nThe sandbox was restarted: variables from earlier calls are gone.'
            return text, False, []
        text = value_repr(outcome.value)
        if outcome.note:
            text += f'\n\n({outcome.note})'
        if outcome.printed:
            text += '\n\nPrinted:\n' + outcome.printed.rstrip('\n')
        return text, True, images_in(outcome.value)

    async def _checkout(self, records: list[CallRecord]) -> Session:
        if self._pool is None:
            self._pool = Pool(packages=self.packages)
            self._closer = _closing_at_loop_end(self)
            await self._closer.asend(None)
        modules = {
            name: ExternalModule(
                {fname: _recorded(f'{name}.{fname}', f, records) for fname, f in module.functions.items()},
                stubs=module.stubs,
            )
            for name, module in self._modules.items()
        }
        session = self._pool.checkout(
            type_check=self.type_check,
            type_check_stubs=self.stubs,
            external_modules=modules,
            limits=self.limits,
            os_access=self.os_access,
            mounts=self.mounts,
        )
        try:
            return await session.__aenter__()
        except BaseException:
            await session.aclose()
            raise

    async def _close_session(self) -> None:
        session, self._session, self._session_records = self._session, None, None
        if session is not None:
            await session.aclose()

    async def aclose(self) -> None:
        """Close the kept session, and the pool when the tool made it."""
        await self._close_session()
        if self._own_pool and self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.aclose()
        closer, self._closer = self._closer, None
        if closer is not None:
            await closer.aclose()

    async def __aenter__(self) -> CodeTool:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f'CodeTool({sorted(self._functions)!r}, modules={sorted(self._modules)!r}, keep_session={self.keep_session})'


def _base64(image: Image) -> str:
    return base64.b64encode(image.data).decode('ascii')


async def _closing_at_loop_end(tool: CodeTool) -> AsyncGenerator[None, None]:
    """Closes `tool` when its event loop shuts down, if nothing closed it before.

    Started once (its first step registers it with the running loop), it waits at its `yield`;
    `asyncio.run` closes the async generators still open before it closes the loop
    (`loop.shutdown_asyncgens()`), and this one then closes the tool's pool: a pool left open
    would end its subprocesses after the loop is gone ("Event loop is closed").
    """
    try:
        yield
    finally:
        tool._closer = None  # `aclose` below must not wait for this generator, which is running it
        await tool.aclose()


def _recorded(name: str, function: Callable[..., Any], records: list[CallRecord]) -> Callable[..., Any]:
    """`function`, recording each call in `records` (for the summary a failed script gets)."""

    def start(args: tuple[Any, ...], kwargs: dict[str, Any]) -> CallRecord:
        record = CallRecord(name, (args, kwargs) if args else kwargs)
        records.append(record)
        return record

    def finish(record: CallRecord, error: BaseException | None, result: Any = None) -> None:
        if error is None:
            record.outcome, record.detail = 'returned', result
        else:
            record.outcome, record.detail = 'raised', f'{type(error).__name__}: {error}'

    if is_async_callable(function):

        @functools.wraps(function)
        async def async_call(*args: Any, **kwargs: Any) -> Any:
            args, kwargs = tool_value(args), tool_value(kwargs)
            record = start(args, kwargs)
            try:
                result = await function(*args, **kwargs)
            except BaseException as error:
                finish(record, error)
                raise
            finish(record, None, result)
            return sandbox_value(result)

        return async_call

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        args, kwargs = tool_value(args), tool_value(kwargs)
        record = start(args, kwargs)
        try:
            result = function(*args, **kwargs)
        except BaseException as error:
            finish(record, error)
            raise
        if inspect.isawaitable(result):
            return _settle(record, result)
        finish(record, None, result)
        return sandbox_value(result)

    async def _settle(record: CallRecord, awaitable: Any) -> Any:
        try:
            result = await awaitable
        except BaseException as error:
            finish(record, error)
            raise
        finish(record, None, result)
        return sandbox_value(result)

    return call
