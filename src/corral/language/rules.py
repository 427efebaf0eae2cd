"""The attribute and name rules of the sandbox language, shared by the validator and the guards.

One table per question, so the static check (`validate.py`) and the run-time guards (`guards.py`,
for `getattr`, `str.format`, `operator.attrgetter`, class patterns ...) can never disagree:

- a *dunder* (`__x__`) may be read only when it is in `READ_DUNDERS`, stored only when it is in
  `STORE_DUNDERS`, defined in a class body only when it is in `DEFINABLE_DUNDERS`;
- an *internal* name (`f_globals`, `co_code`, `tb_frame`, `gi_frame`, `get_loop` ...) is refused on
  every object, because it reaches interpreter frames, code, or the worker's event loop;
- a *private* name (`_x`, `__x`) is allowed only on objects of classes the script defines: the
  guards decide at run time (`guards.check_private`).
"""

from __future__ import annotations

import types
import unicodedata

__all__ = [
    'CLASS_ASSIGN_DUNDERS',
    'CLOCK_ATTRIBUTES',
    'DEFINABLE_DUNDERS',
    'DICT_ATTRIBUTE',
    'FILTERED_ATTRIBUTES',
    'FORMAT_ATTRIBUTES',
    'INTERNAL_NAMES',
    'NAME_DUNDERS',
    'OWN_DUNDERS',
    'OWN_STORE_DUNDERS',
    'READ_DUNDERS',
    'STORE_DUNDERS',
    'attribute_refusal',
    'dunder_hint',
    'is_dunder',
    'is_private',
    'normalize',
]

_OPERATORS = (
    'add', 'sub', 'mul', 'matmul', 'truediv', 'floordiv', 'mod', 'divmod', 'pow', 'lshift', 'rshift',
    'and', 'xor', 'or',
)

#: Protocol methods: reading them yields a bound method of the same object, nothing new.
_PROTOCOL = frozenset(
    [f'__{op}__' for op in _OPERATORS]
    + [f'__r{op}__' for op in _OPERATORS]
    + [f'__i{op}__' for op in _OPERATORS if op != 'divmod']
    + [
        '__neg__', '__pos__', '__abs__', '__invert__', '__int__', '__float__', '__complex__', '__index__',
        '__round__', '__trunc__', '__floor__', '__ceil__', '__bool__', '__hash__', '__eq__', '__ne__',
        '__lt__', '__le__', '__gt__', '__ge__', '__repr__', '__str__', '__format__', '__bytes__',
        '__len__', '__length_hint__', '__iter__', '__next__', '__reversed__', '__contains__',
        '__getitem__', '__setitem__', '__delitem__', '__missing__', '__call__', '__enter__', '__exit__',
        '__aenter__', '__aexit__', '__aiter__', '__anext__', '__await__', '__fspath__',
    ]
)

#: Public attributes whose reads the rewrite sends through a filter: `x.format` through
#: `__corral_format__` (`str.format` would walk attributes of its arguments), `x.now` through
#: `__corral_clock__` (`datetime.now` would read the host's clock). A `match` pattern reads
#: attributes with no code of the sandbox in between, so patterns cannot read any of them.
FORMAT_ATTRIBUTES = frozenset({'format', 'format_map'})
CLOCK_ATTRIBUTES = frozenset({'now', 'today', 'utcnow'})
FILTERED_ATTRIBUTES = FORMAT_ATTRIBUTES | CLOCK_ATTRIBUTES

#: Dunder attributes a script may read: protocol methods, names and docs, `__class__` (what
#: `type(x)` gives, but for an object that says otherwise, which is the script's own), and what
#: `super().__init__()`, `super().__new__(cls)`, `super().__post_init__()`, exception chaining and
#: `Enum.__members__` need, and the parts of a type alias (`list[int].__args__`, `__origin__`).
READ_DUNDERS: frozenset[str] = _PROTOCOL | {
    '__init__', '__new__', '__post_init__', '__init_subclass__',
    '__name__', '__qualname__', '__doc__', '__module__', '__class__',
    '__cause__', '__context__', '__suppress_context__', '__notes__', '__members__', '__args__', '__origin__',
}

#: Dunder attributes a script may assign (decorators copy names and docs).
STORE_DUNDERS: frozenset[str] = frozenset({'__name__', '__qualname__', '__doc__'})

#: Dunder attributes a script may read on its own classes, functions and their objects only
#: (`guards.own_refusal`), where they give back what the script made: annotations, dataclass
#: fields, a NamedTuple's `__getnewargs__`, the function `functools.wraps` wrapped, a TypedDict's
#: keys; and `object.__setattr__` / `__delattr__`, which set the script's own objects' attributes
#: by the rules of `setattr` (the standard way to set a field of a frozen dataclass). The rewrite
#: reads them through `__corral_own__`; a class pattern cannot read them.
OWN_DUNDERS: frozenset[str] = frozenset({
    '__annotations__', '__dataclass_fields__', '__dataclass_params__', '__getnewargs__', '__wrapped__',
    '__optional_keys__', '__required_keys__', '__total__', '__setattr__', '__delattr__',
})

#: Dunder methods a class body may define (`def __x__` or `__x__ = ...`).
DEFINABLE_DUNDERS: frozenset[str] = _PROTOCOL | {
    '__init__', '__new__', '__post_init__', '__init_subclass__', '__set_name__', '__class_getitem__',
    '__getattr__', '__get__', '__set__', '__delete__', '__copy__', '__deepcopy__', '__getstate__',
    '__setstate__',
}

#: Other dunders a class body may assign.
CLASS_ASSIGN_DUNDERS: frozenset[str] = frozenset({'__slots__', '__match_args__', '__hash__', '__doc__', '__name__', '__qualname__'})

#: Dunders a script may assign on its own classes after the class statement (a class decorator's
#: `cls.__init__ = __init__`): the methods a class body may define, checked as the class
#: statement checks them (`guards.own_store`), but `__init_subclass__`, which only a class body sets.
OWN_STORE_DUNDERS: frozenset[str] = (DEFINABLE_DUNDERS - {'__init_subclass__'}) | {'__match_args__', '__hash__'}

#: Dunder names (variables) a script may read: `if __name__ == '__main__':`, and `__doc__`
#: (None, a class body's own docstring in a class body, as in CPython).
NAME_DUNDERS: frozenset[str] = frozenset({'__name__', '__debug__', '__doc__'})

#: Read as `x.__dict__` or `vars(x)`, a copy of the attributes a script may read by name, whose
#: changes go to the object through the store rules (`guards.attribute_dict`); the real dict of
#: an object never reaches a script.
DICT_ATTRIBUTE = '__dict__'


def _internal_names() -> frozenset[str]:
    """Attribute names of frames, code, tracebacks, generators, coroutines and async generators.

    Computed from this interpreter's own types, plus names newer Pythons add, so a new attribute of
    a frame is refused the day it appears.
    """
    prefixes = ('f_', 'co_', 'tb_', 'gi_', 'cr_', 'ag_')
    kinds = (
        types.FrameType, types.CodeType, types.TracebackType, types.GeneratorType, types.CoroutineType,
        types.AsyncGeneratorType,
    )
    names = {name for kind in kinds for name in dir(kind) if name.startswith(prefixes)}
    names |= {
        'f_generator', 'gi_suspended', 'cr_suspended', 'ag_suspended', 'co_branches', 'co_qualname',
        'co_lines', 'co_positions', 'co_exceptiontable', 'f_trace_lines', 'f_trace_opcodes',
    }
    # Task and Future methods that hand out the worker's event loop, its frames or coroutines.
    names |= {'get_loop', 'get_stack', 'print_stack', 'get_coro'}
    return frozenset(names)


#: Attribute names refused on every object, whatever its type.
INTERNAL_NAMES: frozenset[str] = _internal_names()

_HINTS = {
    '__class__': 'use type(x) instead',
    '__dict__': 'only x.__dict__ or vars(x) reads it, on objects of the script\'s classes; read the attributes by name, or use dataclasses.asdict(x)',
    '__subclasses__': 'class hierarchies cannot be walked in the sandbox',
    '__bases__': 'use type(x).mro()',
    '__base__': 'use type(x).mro()',
    '__mro__': 'use type(x).mro()',
    '__globals__': 'function internals are not available in the sandbox',
    '__code__': 'function internals are not available in the sandbox',
    '__closure__': 'function internals are not available in the sandbox',
    '__builtins__': 'the builtins are not available as an object; call them by name',
    '__import__': 'use an import statement',
    '__traceback__': 'tracebacks are not available to scripts; an uncaught exception shows its traceback to the host',
    '__self__': 'method internals are not available in the sandbox',
    '__func__': 'method internals are not available in the sandbox',
    '__wrapped__': 'only the script\'s own functions show what they wrap',
    '__getattribute__': 'use getattr(obj, name)',
    '__setattr__': 'assign the attribute directly, or use a property or dataclass(frozen=True)',
    '__delattr__': 'use del obj.name',
    '__reduce__': 'pickling is not available in the sandbox; use copy.copy or copy.deepcopy',
    '__reduce_ex__': 'pickling is not available in the sandbox; use copy.copy or copy.deepcopy',
    '__annotations__': 'only the script\'s own classes and functions show their annotations',
    '__del__': 'finalizers are not supported in the sandbox; use a with statement',
}


def is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith('__') and name.endswith('__')


def is_private(name: str) -> bool:
    """`_x` or `__x` (not a dunder): allowed only on objects of the script's own classes."""
    return name.startswith('_') and not is_dunder(name)


def normalize(name: str) -> str:
    """The name the parser would see: identifiers are NFKC-normalized (`＿` is `_`)."""
    return name if name.isascii() else unicodedata.normalize('NFKC', name)


def dunder_hint(name: str) -> str:
    return _HINTS.get(name, '')


def attribute_refusal(name: str, *, store: bool = False) -> str | None:
    """Why attribute `name` may not be read (or stored), or None when the static rules allow it.

    Private names are not refused here: whether `_x` is allowed depends on the object.
    """
    name = normalize(name)
    if is_dunder(name):
        allowed = STORE_DUNDERS if store else READ_DUNDERS
        if name in allowed:
            return None
        hint = dunder_hint(name)
        what = 'assigned' if store else 'read'
        text = f"attribute '{name}' cannot be {what} in the sandbox: names like __this__ are refused except a short list"
        return f'{text}; {hint}' if hint else text
    if name in INTERNAL_NAMES:
        return (
            f"attribute '{name}' is not available in the sandbox: it reaches interpreter internals "
            f"(frames, code, tracebacks, generators or the event loop)"
        )
    if name.startswith('__corral'):
        return f"attribute '{name}' is reserved by the sandbox"
    return None
