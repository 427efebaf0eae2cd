"""Host functions: what a script may call, and how a call is run and answered."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
from collections.abc import Callable, Collection, Mapping
from typing import Any

from ..language.builtins import STDLIB_EXCEPTIONS

__all__ = ['ExternalModule', 'module_name_problem', 'is_async_callable', 'exception_payload', 'stub_functions', 'missing_functions']


class ExternalModule:
    """Host functions that a script imports as a module.

    `functions` maps a name to a sync or async callable; `values` maps a name to a constant of the
    module (a value of a kind that crosses into the sandbox, see `corral.values`; the script gets a
    copy at each feed). Names starting with `_` are not exposed.
    `stubs` is the module's `.pyi` text, used when the session type-checks (as `<name>.pyi`, where
    `name` is the key under which the session's `external_modules` offers the module):

        billing = ExternalModule({'list_invoices': list_invoices}, stubs=BILLING_STUB)
        pool.checkout(type_check=True, external_modules={'billing': billing})
        # the script: from billing import list_invoices

    Raises `TypeError` when a value in `functions` is not callable, `ValueError` when a name is
    both a function and a value.
    """

    __slots__ = ('functions', 'stubs', 'values')

    def __init__(self, functions: Mapping[str, Callable[..., Any]], *, stubs: str | None = None, values: Mapping[str, Any] | None = None) -> None:
        for name, function in functions.items():
            if not callable(function):
                raise TypeError(f'ExternalModule function {name!r} is not callable: {type(function).__name__}')
        self.functions = {name: f for name, f in functions.items() if not name.startswith('_')}
        self.values = {name: value for name, value in (values or {}).items() if not name.startswith('_')}
        both = sorted(self.functions.keys() & self.values.keys())
        if both:
            raise ValueError(f'ExternalModule names {both} are both functions and values')
        self.stubs = stubs

    def __repr__(self) -> str:
        return f'ExternalModule({sorted(self.functions)!r})'


def module_name_problem(name: Any, offered: Collection[str]) -> str | None:
    """Why `name` cannot name an external module among the names `offered` (the session's other
    modules), or None: it must be dotted identifiers (`pkg.sub`, a submodule the script imports as
    `import pkg.sub` and reaches as `pkg.sub`), and a submodule's parent must be offered too."""
    if not isinstance(name, str) or not all(part.isidentifier() for part in name.split('.')):
        return f'{name!r} is not a valid module name'
    parent = name.rpartition('.')[0]
    if parent and parent not in offered:
        return f'{name!r} is a submodule of {parent!r}, which is not offered: offer {parent!r} too'
    return None


def is_async_callable(function: Callable[..., Any]) -> bool:
    """Whether calling `function` returns what the script awaits: a coroutine (an `async def`, or an
    object whose `__call__` is one), or an awaitable from an object whose class says so with
    `corral_awaited = True` (`corral serve`'s stand-ins for a client's async functions, which return a future)."""
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(getattr(function, '__call__', None)) or getattr(type(function), 'corral_awaited', False) is True


def exception_payload(error: BaseException) -> list[Any]:
    """`[name, args]` of the nearest built-in exception class of `error`, as the script will see it.

    A standard library class the sandbox offers (`STDLIB_EXCEPTIONS`) goes by its dotted name
    (`json.JSONDecodeError`, with `[msg, doc, pos]` as its args); a host exception class the script
    cannot know (`httpx.HTTPError`) maps to its nearest built-in or such base class (`Exception`,
    `ValueError`, ...).
    """
    if not isinstance(error, Exception):  # SystemExit, KeyboardInterrupt: the host's, not the script's to catch as such
        return ['RuntimeError', [f'the host function exited ({type(error).__name__}: {error})']]
    for cls in type(error).__mro__:
        name = _STDLIB_NAMES.get(cls)
        if name == 'json.JSONDecodeError':  # its args are its message alone: it is built from msg, doc, pos
            fields = [getattr(error, field, None) for field in ('msg', 'doc', 'pos')]
            if [type(field) for field in fields] == [str, str, int]:
                return [name, fields]
        elif name is not None:
            return [name, list(error.args)]
        if getattr(builtins, cls.__name__, None) is cls:
            return [cls.__name__, list(error.args)]
    return ['Exception', [str(error)]]


_STDLIB_NAMES = {getattr(importlib.import_module(module), attr): name for name, (module, attr) in STDLIB_EXCEPTIONS.items()}


def stub_functions(stubs: str) -> list[str]:
    """The names of the functions `stubs` declares at its top level (`def`, `async def`), in order,
    each once; [] when the text does not parse (the type check reports that)."""
    try:
        tree = ast.parse(stubs)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    names = [node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return list(dict.fromkeys(names))


def missing_functions(stubs: str | None, functions: Mapping[str, Callable[..., Any]], where: str) -> str | None:
    """Why `stubs` do not fit `functions` (`where` names what should have them), or None when every
    function the stubs declare is there: a script would pass the check and fail with a NameError."""
    missing = [name for name in stub_functions(stubs or '') if name not in functions]
    if not missing:
        return None
    names = ', '.join(f'`{name}`' for name in missing)
    return f'the stubs declare {names}, which {where} does not provide: add {"them" if len(missing) > 1 else "it"}, or remove {"their" if len(missing) > 1 else "its"} stub'
