"""Standard library modules as the sandbox offers them: facades holding the public API only.

`import json` in a script gets a fresh module object holding `json`'s public names (its `__all__`,
else its public non-module names), never a module inside it (no `json.decoder`, `asyncio.sys`),
never a private name. Some modules are narrowed or wrapped, because parts of them reflect on
objects by name or hand out the worker's own machinery:

- asyncio: an allow-list (tasks, gather, sleep, timeouts, queues, locks ...); `run` awaits its
  coroutine where the script's top level calls it (`facades.run`); no event loop access, no
  subprocesses, streams, threads or policies;
- operator: `attrgetter` and `methodcaller` read attributes through the sandbox's rules;
- functools: `update_wrapper`/`wraps` copy only names and docs; `singledispatch` refuses string
  annotations (it would `eval` them); `cached_property` is a reviewed re-implementation;
  `singledispatchmethod` is left out;
- dataclasses: `asdict`, `astuple`, `replace` read fields through the sandbox's rules;
  `dataclass` decorates only the script's classes; `make_dataclass` checks its names;
- copy: `copy`/`deepcopy` from `copying.py`;
- typing: `get_type_hints` evaluates annotation strings as names, attributes and subscripts
  only, by the sandbox's rules; string: `Formatter` reads attributes
  with the sandbox's rules; types, shlex, email.utils: an allow-list (no `types.CodeType`, no
  `shlex.shlex` and its file reading, no `make_msgid`); logging, warnings: see `logs.py`; uuid: no `uuid1`/`getnode` (they run commands to find a MAC address); enum: no
  `global_enum` (it writes into the worker's `__main__`); contextlib: no `redirect_stdout`,
  `redirect_stderr` (they swap `sys.stdout`) or `chdir` (a script calls `os.chdir`);
- the facades of `facades.py` (os, os.path, pathlib, glob, time, random, sys, io, pprint,
  zoneinfo) and `uuid.uuid4` reach the host or the session's seed (see `hostio.py`).

Reading a name a facade does not offer raises `AttributeError` with the words of
`catalog.missing_member` (what the module offers instead); the type checker says the same.
`import a.b` works for the sandbox's submodules (`os.path`, `collections.abc`), which are
attributes of their parent as in CPython.

Facades are built on first import and cached for the worker process (one process per session).
"""

from __future__ import annotations

import _string
import ast
import asyncio
import collections
import dataclasses
import email.utils
import functools
import importlib
import operator
import string
import sys
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any

from . import copying
from .guards import (
    MARK,
    _type_name,
    guarded_getattr,
    is_script_class,
    private_refusal,
    register_class,
)
from .catalog import PACKAGE_MODULES, STDLIB_MODULES, missing_member, module_note
from .packages import BUILDERS as PACKAGE_BUILDERS
from .packages import load, loaded
from .facades import BUILDERS, TextCalendar, async_sleep, get_running_loop, prcal, prmonth, register_random, reveal_type, run, uuid4
from .facades import time as _clock
from .logs import BUILDERS as LOG_BUILDERS
from .rules import (
    CLASS_ASSIGN_DUNDERS,
    DEFINABLE_DUNDERS,
    attribute_refusal,
    is_dunder,
    normalize,
)

__all__ = ['facade', 'import_module', 'load_packages', 'module_names', 'public_names', 'stdlib_module']

_ASYNCIO = (
    'ALL_COMPLETED', 'FIRST_COMPLETED', 'FIRST_EXCEPTION', 'Barrier', 'BoundedSemaphore', 'BrokenBarrierError',
    'CancelledError', 'Condition', 'Event', 'Future', 'IncompleteReadError', 'InvalidStateError', 'LifoQueue',
    'LimitOverrunError', 'Lock', 'PriorityQueue', 'Queue', 'QueueEmpty', 'QueueFull', 'Semaphore', 'Task',
    'TaskGroup', 'Timeout', 'TimeoutError', 'all_tasks', 'as_completed', 'create_task', 'current_task',
    'ensure_future', 'gather', 'get_running_loop', 'iscoroutine', 'iscoroutinefunction', 'isfuture', 'run', 'shield', 'sleep', 'timeout',
    'timeout_at', 'wait', 'wait_for',
)

_UUID = (
    'UUID', 'uuid3', 'uuid4', 'uuid5', 'NAMESPACE_DNS', 'NAMESPACE_URL', 'NAMESPACE_OID', 'NAMESPACE_X500',
    'RESERVED_NCS', 'RFC_4122', 'RESERVED_MICROSOFT', 'RESERVED_FUTURE', 'SafeUUID',
)

_CONTEXTLIB = (
    'AbstractAsyncContextManager', 'AbstractContextManager', 'AsyncContextDecorator', 'AsyncExitStack',
    'ContextDecorator', 'ExitStack', 'aclosing', 'asynccontextmanager', 'closing', 'contextmanager', 'nullcontext',
    'suppress',
)

_ABC = (
    'ABC', 'ABCMeta', 'abstractclassmethod', 'abstractmethod', 'abstractproperty', 'abstractstaticmethod',
    'get_cache_token', 'update_abstractmethods',
)

_TYPES = (
    'AsyncGeneratorType', 'BuiltinFunctionType', 'BuiltinMethodType', 'ClassMethodDescriptorType', 'CoroutineType',
    'DynamicClassAttribute', 'EllipsisType', 'FunctionType', 'GeneratorType', 'GenericAlias', 'GetSetDescriptorType',
    'LambdaType', 'MappingProxyType', 'MemberDescriptorType', 'MethodDescriptorType', 'MethodType', 'MethodWrapperType',
    'ModuleType', 'NoneType', 'NotImplementedType', 'SimpleNamespace', 'UnionType', 'WrapperDescriptorType',
    'new_class', 'prepare_class', 'resolve_bases',
)

_EMAIL_UTILS = (
    'collapse_rfc2231_value', 'decode_params', 'decode_rfc2231', 'encode_rfc2231', 'format_datetime', 'formataddr',
    'formatdate', 'getaddresses', 'mktime_tz', 'parseaddr', 'parsedate', 'parsedate_to_datetime', 'parsedate_tz',
    'quote', 'unquote',
)

#: Names left out of a module's public API.
_WITHHELD: dict[str, frozenset[str]] = {
    'typing': frozenset({'no_type_check', 'no_type_check_decorator'}),
    'enum': frozenset({'global_enum', 'global_enum_repr', 'global_flag_repr', 'global_str', 'pickle_by_enum_name', 'pickle_by_global_name'}),
    'functools': frozenset({'singledispatchmethod'}),
    'calendar': frozenset({'LocaleTextCalendar', 'LocaleHTMLCalendar'}),
}

#: Names taken from an explicit list instead of the module's public API.
#: `types`: no `CodeType` (it makes code from bytes), `FrameType`, `TracebackType`, `CellType`, `coroutine`;
#: `shlex`: no `shlex` class (its `sourcehook` opens files); `email.utils`: no `make_msgid` (it reads
#: the host's name) or `localtime`; `email`, `urllib`: their sandbox submodules only.
_ONLY: dict[str, tuple[str, ...]] = {
    'asyncio': _ASYNCIO, 'uuid': _UUID, 'contextlib': _CONTEXTLIB, 'abc': _ABC, 'types': _TYPES,
    'shlex': ('join', 'quote', 'split'), 'email': (), 'email.utils': _EMAIL_UTILS, 'urllib': (),
}

_cache: dict[str, types.ModuleType] = {}

#: The submodules a script may import (`os.path`, `numpy.linalg`): each is an attribute of its parent.
_SUBMODULES = tuple(
    name for name in (*STDLIB_MODULES, *(module for modules in PACKAGE_MODULES.values() for module in modules))
    if '.' in name
)

#: Modules CPython's C code imports on first use (PyImport_Import, with a list as fromlist);
#: they get the real, preloaded module (see `preload.py`), never a script.
_C_IMPORTS = frozenset({'_strptime', 'time', 'datetime', 'calendar', 'locale'})


class _Facade(types.ModuleType):
    """A sandbox module: reading a name it does not offer says what it offers instead."""

    def __getattr__(self, name: str) -> Any:
        if is_dunder(name):
            raise AttributeError(f"module '{self.__name__}' has no attribute '{name}'")
        # with `obj` given, 3.12 and later add no hint of their own to the text's own `Did you mean`
        raise AttributeError(missing_member(self.__name__, name, public_names(self)), obj=self)


_Facade.__name__ = _Facade.__qualname__ = 'module'
_Facade.__module__ = 'builtins'


def import_module(
    name: str,
    fromlist: Any,
    level: int,
    *,
    host_modules: dict[str, types.ModuleType],
    stdlib: tuple[str, ...] | frozenset[str] = STDLIB_MODULES,
    packages: tuple[str, ...] = (),
) -> types.ModuleType:
    """The import hook's work: a host module or a standard library facade, never anything else.

    `import a.b` returns the facade of `a` (which holds `b`), `from a.b import x` the facade of
    `a.b`. `from m import name` is checked here: when `name` is not in the facade, CPython would
    fall back to `sys.modules['m.name']`, the real submodule (`from asyncio import events`).
    `packages`: the third-party packages the worker loaded (`packages.load`), whose modules
    (`catalog.PACKAGE_MODULES`) a script may import too.
    """
    if level:
        raise ImportError('relative imports are not supported in the sandbox')
    if type(fromlist) is list and fromlist in ([], ['__doc__']) and (name in _C_IMPORTS or name.partition('.')[0] in packages):
        # CPython's own C code importing a helper (`time.strptime` imports `_strptime`, numpy's
        # `numpy._core._methods`) goes through the builtins of the running frame, with a list as
        # fromlist; a script's import statement passes None or a tuple
        module = sys.modules.get(name)
        if module is not None:
            return module
    module = host_modules.get(name)
    if module is None:
        if name not in stdlib and not any(name in PACKAGE_MODULES[package] for package in packages):
            error: ImportError = ModuleNotFoundError(f"No module named '{name}'", name=name)
            error.add_note(module_note(name, host_modules, packages))
            raise error
        module = stdlib_module(name)
        if not fromlist and '.' in name:
            module = stdlib_module(name.partition('.')[0])
    elif not fromlist and '.' in name:  # `import pkg.sub` binds `pkg`, which holds `sub`
        module = host_modules[name.partition('.')[0]]
    for item in fromlist or ():
        if type(item) is not str or item == '*' or item not in module.__dict__:
            error = ImportError(f'cannot import name {item!r} from {name!r} (unknown location)', name=name)
            if type(item) is str and item != '*' and isinstance(module, _Facade):
                error.add_note(missing_member(name, item, public_names(module)))
            raise error
    return module


def stdlib_module(name: str) -> types.ModuleType:
    """The facade of standard library module `name` (one of `STDLIB_MODULES`, or of a loaded
    package's `PACKAGE_MODULES`), cached."""
    module = _cache.get(name)
    if module is None:
        builder = BUILDERS.get(name) or LOG_BUILDERS.get(name) or PACKAGE_BUILDERS.get(name)
        if builder is None:
            module = facade(importlib.import_module(name))
        else:
            real = sys.modules.get(name)
            module = _module(name, getattr(real, '__doc__', None), builder(), real)
            if name == 'random':
                register_random(module)
        _cache[name] = module
    return module


def load_packages(packages: Iterable[str]) -> None:
    """Load `packages` (`packages.load`: names of `catalog.PACKAGES`, with what they need) and
    build the facades of their modules, in the zygote before the lockdown: a worker's import finds
    them made. Raises `ImportError` when one is not installed."""
    load(packages)
    for name in loaded():
        for module in PACKAGE_MODULES[name]:
            stdlib_module(module)


def public_names(module: types.ModuleType) -> list[str]:
    """What a facade offers: its public names, sandbox submodules included (`os.path`)."""
    return sorted(key for key in module.__dict__ if not key.startswith('_'))


def module_names(name: str) -> tuple[str, ...]:
    """The public names the facade of sandbox module `name` offers (its submodules too), sorted."""
    return tuple(public_names(stdlib_module(name)))


_FUNCTIONS = (types.FunctionType, types.BuiltinFunctionType)


def _module(name: str, doc: str | None, values: dict[str, Any], real: types.ModuleType | None) -> types.ModuleType:
    module = _Facade(name, doc)
    for key, value in values.items():
        if type(value) in _FUNCTIONS and real is not None:
            # CPython's errors name a function with its module ("posix.listdir() argument after **
            # must be a mapping"): a sandbox function takes the module of the one it stands for
            own = getattr(getattr(real, key, None), '__module__', None)
            if type(own) is str and value.__module__ != own:
                value.__module__ = own
        setattr(module, key, value)
    module.__all__ = [key for key in values if not isinstance(values[key], types.ModuleType)]
    # a sandbox submodule is an attribute of its parent, as in CPython (`import os.path`)
    for child in _SUBMODULES:
        if child.rpartition('.')[0] == name:
            setattr(module, child.rpartition('.')[2], stdlib_module(child))
    return module


def facade(real: types.ModuleType) -> types.ModuleType:
    """A fresh module holding `real`'s public API, with the sandbox's replacements."""
    name = real.__name__
    names = _ONLY.get(name)
    if names is None:
        exported = getattr(real, '__all__', None)
        if exported is None:
            exported = [key for key in vars(real) if not key.startswith('_')]
        withheld = _WITHHELD.get(name, frozenset())
        names = tuple(key for key in exported if not key.startswith('_') and key not in withheld)
    replacements = _REPLACEMENTS.get(name, {})
    values = {}
    for key in names:
        value = replacements[key] if key in replacements else getattr(real, key, None)
        if value is None and not hasattr(real, key):
            continue
        if isinstance(value, types.ModuleType):
            continue
        values[key] = value
    return _module(name, real.__doc__, values, real)


# ----- operator --------------------------------------------------------------------------------

def _check_names(function: str, names: tuple[str, ...]) -> None:
    for name in names:
        for part in name.split('.'):
            refusal = attribute_refusal(normalize(part))
            if refusal is not None:
                raise AttributeError(f'{function}({name!r}): {refusal}')


class attrgetter:
    """`operator.attrgetter`, reading attributes with the sandbox's rules."""

    __slots__ = ('_names', '_paths')

    def __init__(self, attr: str, /, *attrs: str) -> None:
        names = (attr, *attrs)
        for name in names:
            if type(name) is not str:
                raise TypeError('attribute name must be a string')
        _check_names('attrgetter', names)
        self._names = names
        self._paths = tuple(tuple(name.split('.')) for name in names)

    def __call__(self, obj: Any, /) -> Any:
        values = []
        for path in self._paths:
            value = obj
            for part in path:
                value = guarded_getattr(value, part)
            values.append(value)
        return values[0] if len(values) == 1 else tuple(values)

    def __repr__(self) -> str:
        return f'operator.attrgetter({", ".join(map(repr, self._names))})'


class methodcaller:
    """`operator.methodcaller`, reading the method with the sandbox's rules."""

    __slots__ = ('_args', '_kwargs', '_name')

    def __init__(self, name: str, /, *args: Any, **kwargs: Any) -> None:
        if type(name) is not str:
            raise TypeError('method name must be a string')
        _check_names('methodcaller', (name,))
        self._name = name
        self._args = args
        self._kwargs = kwargs

    def __call__(self, obj: Any, /) -> Any:
        return guarded_getattr(obj, self._name)(*self._args, **self._kwargs)

    def __repr__(self) -> str:
        parts = [repr(self._name), *map(repr, self._args), *(f'{k}={v!r}' for k, v in self._kwargs.items())]
        return f'operator.methodcaller({", ".join(parts)})'


attrgetter.__module__ = methodcaller.__module__ = 'operator'


# ----- string ----------------------------------------------------------------------------------

def _get_field(self: Any, field_name: str, args: Any, kwargs: Any) -> tuple[Any, Any]:
    """`string.Formatter.get_field`, reading attributes with the sandbox's rules."""
    first, rest = _string.formatter_field_name_split(field_name)
    obj = self.get_value(first, args, kwargs)
    for is_attribute, key in rest:
        obj = guarded_getattr(obj, key) if is_attribute else obj[key]
    return obj, first


def _formatter() -> type:
    """`string.Formatter`: CPython's methods in a class that does not derive from it (a script's
    subclass must not reach the unguarded `get_field` through its MRO), with a guarded `get_field`."""
    namespace = {key: value for key, value in vars(string.Formatter).items() if key not in ('__dict__', '__weakref__')}
    namespace['get_field'] = _get_field
    cls = type('Formatter', (), namespace)
    cls.__module__ = 'string'
    return cls


Formatter = _formatter()


# ----- typing.get_type_hints ------------------------------------------------------------------

_HINT_NODES = 'names, attributes, subscripts, lists, tuples, constants and |'


def get_type_hints(obj: Any, globalns: Any = None, localns: Any = None, include_extras: bool = False) -> dict[str, Any]:
    """`typing.get_type_hints`: an annotation written as a string (or a `ForwardRef`) is evaluated
    as an expression of names, attributes, subscripts and `|` only, read by the sandbox's rules
    (CPython's `eval` would run any code the string holds). Names are looked up in `localns`, then
    `globalns` (by default the caller's, as a script's namespace is), then the builtins."""
    if globalns is None:
        frame = sys._getframe(1)
        globalns = frame.f_globals
        del frame
    builtins = globalns.get('__builtins__', {}) if isinstance(globalns, dict) else {}
    if isinstance(obj, type):
        hints: dict[str, Any] = {}
        for base in reversed(obj.mro()):
            own = type.__dict__['__dict__'].__get__(base).get('__annotations__', {})
            names = dict(type.__dict__['__dict__'].__get__(base)) if localns is None else localns
            for name, value in dict(own).items():
                hints[name] = _resolved(value, (names, globalns, builtins), 0)
    else:
        annotations = guarded_getattr(obj, '__annotations__', None)
        if annotations is None:
            raise TypeError(f'{obj!r} is not a module, class, method, or function.')
        hints = {name: _resolved(value, (localns or {}, globalns, builtins), 0) for name, value in dict(annotations).items()}
    if include_extras:
        return hints
    return {name: typing._strip_annotations(value) for name, value in hints.items()}  # type: ignore[attr-defined]


def _resolved(value: Any, scopes: tuple[Any, ...], depth: int) -> Any:
    if depth > 20:
        raise RecursionError('get_type_hints(): annotations refer to each other too deeply')
    if value is None:
        return type(None)
    if isinstance(value, str):
        return _resolved(_evaluated(value, scopes), scopes, depth + 1)
    if isinstance(value, typing.ForwardRef):
        if value.__forward_module__ is not None:
            raise TypeError('get_type_hints() in the sandbox does not look names up in other modules (ForwardRef module=)')
        return _resolved(_evaluated(value.__forward_arg__, scopes), scopes, depth + 1)
    args = getattr(value, '__args__', None)
    if type(args) is not tuple or not args or typing.get_origin(value) is typing.Literal:
        return value
    resolved = tuple(_resolved(arg, scopes, depth + 1) if isinstance(arg, (str, typing.ForwardRef)) or hasattr(arg, '__args__') else arg for arg in args)
    if all(a is b for a, b in zip(resolved, args)):
        return value
    if isinstance(value, types.GenericAlias):
        return types.GenericAlias(value.__origin__, resolved)
    if isinstance(value, types.UnionType):
        return functools.reduce(operator.or_, resolved)
    return value.copy_with(resolved)


def _evaluated(text: str, scopes: tuple[Any, ...]) -> Any:
    tree = ast.parse(text.strip(), mode='eval')
    return _evaluate(tree.body, text, scopes)


def _evaluate(node: Any, text: str, scopes: tuple[Any, ...]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if is_dunder(node.id):
            raise NameError(f"name '{node.id}' is not available in the sandbox", name=node.id)
        for scope in scopes:
            if node.id in scope:
                return scope[node.id]
        raise NameError(f"name '{node.id}' is not defined", name=node.id)
    if isinstance(node, ast.Attribute):
        return guarded_getattr(_evaluate(node.value, text, scopes), node.attr)
    if isinstance(node, ast.Subscript):
        return _evaluate(node.value, text, scopes)[_evaluate(node.slice, text, scopes)]
    if isinstance(node, ast.Tuple):
        return tuple(_evaluate(item, text, scopes) for item in node.elts)
    if isinstance(node, ast.List):
        return [_evaluate(item, text, scopes) for item in node.elts]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _evaluate(node.left, text, scopes) | _evaluate(node.right, text, scopes)
    raise TypeError(f'get_type_hints() in the sandbox evaluates annotations of {_HINT_NODES}, not {text!r}')


get_type_hints.__module__ = 'typing'


# ----- email.utils -----------------------------------------------------------------------------

def formatdate(timeval: float | None = None, localtime: bool = False, usegmt: bool = False) -> str:
    """`email.utils.formatdate`; without a time, the sandbox's clock (`time.time()`) gives it."""
    return email.utils.formatdate(_clock() if timeval is None else timeval, localtime, usegmt)


formatdate.__module__ = 'email.utils'


# ----- functools -------------------------------------------------------------------------------

_WRAPPER_ASSIGNMENTS = functools.WRAPPER_ASSIGNMENTS
_WRAPPER_UPDATES = functools.WRAPPER_UPDATES
_FunctionType = types.FunctionType


def _owned(obj: Any) -> bool:
    """A function defined by the script, or an object or class of the script's own classes."""
    cls = type(obj)
    if cls is _FunctionType:
        namespace = obj.__globals__.get('__builtins__', None)
        return type(namespace) is dict and namespace.get('__corral_mark__') is MARK
    if is_script_class(cls) or (bool(type.__dict__['__flags__'].__get__(cls) & (1 << 31)) and is_script_class(obj)):
        return private_refusal(obj, '_') is None
    return False


def update_wrapper(wrapper: Any, wrapped: Any, assigned: Any = _WRAPPER_ASSIGNMENTS, updated: Any = _WRAPPER_UPDATES) -> Any:
    """`functools.update_wrapper`: copies the name, doc and annotations of `wrapped` onto `wrapper`
    (a function or object of the script), and `wrapped`'s attributes when it is the script's own."""
    if assigned is not _WRAPPER_ASSIGNMENTS or updated is not _WRAPPER_UPDATES:
        raise TypeError('update_wrapper() in the sandbox copies the default attributes only; leave assigned and updated out')
    if not _owned(wrapper):
        raise TypeError(f"update_wrapper() in the sandbox updates only functions and objects the script defines, not a '{_type_name(type(wrapper))}'")
    for attr in _WRAPPER_ASSIGNMENTS:
        try:
            value = getattr(wrapped, attr)
        except AttributeError:
            continue
        setattr(wrapper, attr, value)
    if _owned(wrapped):
        wrapper.__dict__.update(wrapped.__dict__)
    wrapper.__wrapped__ = wrapped
    return wrapper


def wraps(wrapped: Any, assigned: Any = _WRAPPER_ASSIGNMENTS, updated: Any = _WRAPPER_UPDATES) -> Callable[[Any], Any]:
    """`functools.wraps`, built on the sandbox's `update_wrapper`."""

    def decorator(wrapper: Any) -> Any:
        return update_wrapper(wrapper, wrapped, assigned, updated)

    return decorator


def _plain_annotation(annotation: Any) -> bool:
    """A class, None, or a union/generic of those: nothing `get_type_hints` would evaluate."""
    if annotation is None or bool(type.__dict__['__flags__'].__get__(type(annotation)) & (1 << 31)):
        return True
    if isinstance(annotation, (types.UnionType, types.GenericAlias)) or type(annotation).__module__ == 'typing':
        if isinstance(annotation, typing.ForwardRef):
            return False
        return all(_plain_annotation(arg) for arg in typing.get_args(annotation))
    return False


def singledispatch(func: Any) -> Any:
    """`functools.singledispatch`; `register` by annotation accepts classes only, not strings."""
    dispatcher = functools.singledispatch(func)
    register = dispatcher.register

    def checked_register(cls: Any, func: Any = None) -> Any:
        target = func if func is not None else cls
        if callable(target) and not bool(type.__dict__['__flags__'].__get__(type(target)) & (1 << 31)):
            annotations = getattr(target, '__annotations__', None) or {}
            for annotation in dict(annotations).values():
                if not _plain_annotation(annotation):
                    raise TypeError(
                        f'singledispatch register(): annotation {annotation!r} is not a class; the sandbox does not '
                        f'evaluate string annotations: use @f.register(cls)'
                    )
        return register(cls, func)

    dispatcher.register = checked_register
    return dispatcher


class cached_property:
    """`functools.cached_property`, re-implemented so its cache name obeys the attribute rules."""

    def __init__(self, func: Any) -> None:
        self._func = func
        self._attrname: str | None = None
        self.__doc__ = getattr(func, '__doc__', None)

    @property
    def func(self) -> Any:
        return self._func

    @property
    def attrname(self) -> str | None:
        return self._attrname

    def __set_name__(self, owner: Any, name: str) -> None:
        if self._attrname is None:
            self._attrname = name
        elif name != self._attrname:
            raise TypeError(
                f'Cannot assign the same cached_property to two different names ({self._attrname!r} and {name!r}).'
            )

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        if instance is None:
            return self
        name = self._attrname
        if name is None:
            raise TypeError('Cannot use cached_property instance without calling __set_name__ on it.')
        if not _owned(instance):
            raise TypeError(f"cached_property in the sandbox works on objects of the script's own classes, not '{_type_name(type(instance))}'")
        try:
            cache = object.__getattribute__(instance, '__dict__')
        except AttributeError:
            raise TypeError(f"No '__dict__' attribute on {_type_name(type(instance))!r} instance to cache {name!r} property.") from None
        if name in cache:
            return cache[name]
        value = self._func(instance)
        cache[name] = value
        return value


cached_property.__module__ = 'functools'

# ----- dataclasses -----------------------------------------------------------------------------

_FIELD = dataclasses._FIELD
_FIELD_INITVAR = dataclasses._FIELD_INITVAR
_FIELDS = dataclasses._FIELDS


def _script_class_or_refuse(cls: Any, function: str) -> None:
    flags = type.__dict__['__flags__'].__get__(type(cls))
    if not (flags & (1 << 31)) or not is_script_class(cls):
        raise TypeError(f'{function}() in the sandbox applies only to classes the script defines')


def dataclass(cls: Any = None, /, **kwargs: Any) -> Any:
    """`dataclasses.dataclass`, for the script's own classes."""

    def wrap(cls: Any) -> Any:
        _script_class_or_refuse(cls, 'dataclass')
        # a metaclass can put any annotations in the namespace; the generated methods read every
        # field unguarded (`__eq__` compares `self.__globals__`, `__init__` sets `self.__class__`)
        for name in type.__dict__['__dict__'].__get__(cls).get('__annotations__', {}):
            _check_field_name(name, 'dataclass')
        result = dataclasses.dataclass(cls, **kwargs)
        if result is not cls:  # slots=True makes a new class from the script's
            register_class(result)
        return result

    return wrap if cls is None else wrap(cls)


def _check_field_name(name: Any, function: str) -> None:
    if type(name) is not str or is_dunder(normalize(name)) or attribute_refusal(normalize(name)) is not None:
        raise TypeError(f'{function}(): field name {name!r} is not allowed in the sandbox')


def make_dataclass(cls_name: str, fields: Any, *, bases: tuple[type, ...] = (), namespace: dict[str, Any] | None = None, **kwargs: Any) -> type:
    """`dataclasses.make_dataclass` with the sandbox's name rules; the class counts as the script's."""
    fields = list(fields)
    for item in fields:
        _check_field_name(item if isinstance(item, str) else item[0], 'make_dataclass')
    for key in dict(namespace or {}):
        if type(key) is not str or (is_dunder(key) and key not in DEFINABLE_DUNDERS and key not in CLASS_ASSIGN_DUNDERS):
            raise TypeError(f'make_dataclass(): namespace key {key!r} is not allowed in the sandbox')
    module = kwargs.pop('module', '__main__') if 'module' not in _MAKE_DATACLASS_PARAMETERS else None
    if module is None:
        kwargs.setdefault('module', '__main__')
    cls = dataclasses.make_dataclass(cls_name, fields, bases=bases, namespace=namespace, **kwargs)
    if module is not None:  # Python < 3.12 has no module= argument
        cls.__module__ = module
    register_class(cls)
    return cls


_MAKE_DATACLASS_PARAMETERS = frozenset(__import__('inspect').signature(dataclasses.make_dataclass).parameters)


def _fields_of(obj: Any, function: str) -> Any:
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise TypeError(f'{function}() should be called on dataclass instances')
    return getattr(type(obj), _FIELDS).values()


def asdict(obj: Any, *, dict_factory: Callable[..., Any] = dict) -> Any:
    """`dataclasses.asdict`, reading fields with the sandbox's attribute rules."""
    _fields_of(obj, 'asdict')
    return _asdict(obj, dict_factory)


def _asdict(obj: Any, dict_factory: Callable[..., Any]) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        result = []
        for f in getattr(type(obj), _FIELDS).values():
            if f._field_type is _FIELD:
                result.append((f.name, _asdict(guarded_getattr(obj, f.name), dict_factory)))
        return dict_factory(result)
    if isinstance(obj, tuple) and hasattr(type(obj), '_fields'):
        return type(obj)(*[_asdict(v, dict_factory) for v in obj])
    if isinstance(obj, (list, tuple)):
        return type(obj)(_asdict(v, dict_factory) for v in obj)
    if isinstance(obj, dict):
        return type(obj)((_asdict(k, dict_factory), _asdict(v, dict_factory)) for k, v in obj.items())
    return copying.deepcopy(obj)


def astuple(obj: Any, *, tuple_factory: Callable[..., Any] = tuple) -> Any:
    """`dataclasses.astuple`, reading fields with the sandbox's attribute rules."""
    _fields_of(obj, 'astuple')
    return _astuple(obj, tuple_factory)


def _astuple(obj: Any, tuple_factory: Callable[..., Any]) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return tuple_factory([
            _astuple(guarded_getattr(obj, f.name), tuple_factory)
            for f in getattr(type(obj), _FIELDS).values()
            if f._field_type is _FIELD
        ])
    if isinstance(obj, tuple) and hasattr(type(obj), '_fields'):
        return type(obj)(*[_astuple(v, tuple_factory) for v in obj])
    if isinstance(obj, (list, tuple)):
        return type(obj)(_astuple(v, tuple_factory) for v in obj)
    if isinstance(obj, dict):
        return type(obj)((_astuple(k, tuple_factory), _astuple(v, tuple_factory)) for k, v in obj.items())
    return copying.deepcopy(obj)


def replace(obj: Any, /, **changes: Any) -> Any:
    """`dataclasses.replace`, reading fields with the sandbox's attribute rules."""
    for f in _fields_of(obj, 'replace'):
        if f._field_type is not _FIELD and f._field_type is not _FIELD_INITVAR:
            continue
        if not f.init:
            if f.name in changes:
                raise ValueError(f'field {f.name} is declared with init=False, it cannot be specified with replace()')
            continue
        if f.name not in changes:
            if f._field_type is _FIELD_INITVAR and f.default is dataclasses.MISSING:
                raise ValueError(f"InitVar {f.name!r} must be specified with replace()")
            changes[f.name] = guarded_getattr(obj, f.name)
    return type(obj)(**changes)


for _function in (dataclass, make_dataclass, asdict, astuple, replace):
    _function.__module__ = 'dataclasses'


# ----- collections -----------------------------------------------------------------------------

def namedtuple(typename: str, field_names: Any, *, rename: bool = False, defaults: Any = None, module: str | None = None) -> type:
    """`collections.namedtuple`; the class counts as the script's (so `p._asdict()` works)."""
    cls = collections.namedtuple(typename, field_names, rename=rename, defaults=defaults, module=module or '__main__')
    register_class(cls)
    return cls


namedtuple.__module__ = 'collections'
del _function

_REPLACEMENTS: dict[str, dict[str, Any]] = {
    'operator': {'attrgetter': attrgetter, 'methodcaller': methodcaller},
    'functools': {
        'update_wrapper': update_wrapper,
        'wraps': wraps,
        'singledispatch': singledispatch,
        'cached_property': cached_property,
    },
    'dataclasses': {
        'dataclass': dataclass,
        'make_dataclass': make_dataclass,
        'asdict': asdict,
        'astuple': astuple,
        'replace': replace,
    },
    'copy': {'copy': copying.copy, 'deepcopy': copying.deepcopy, 'Error': copying.Error},
    'collections': {'namedtuple': namedtuple},
    'uuid': {'uuid4': uuid4},
    'calendar': {'TextCalendar': TextCalendar, 'prmonth': prmonth, 'prcal': prcal},
    'typing': {'reveal_type': reveal_type, 'get_type_hints': get_type_hints},
    'string': {'Formatter': Formatter},
    'email.utils': {'formatdate': formatdate},
    'asyncio': {'run': run, 'get_running_loop': get_running_loop, 'sleep': async_sleep},
}

_ = asyncio  # imported so the allow-list above is checked against a loaded module
