"""Python stubs that tell a model (and the type checker) which functions a script can call.

Two sources, one writer, so every door into corral shows functions the same way:

- `stubs_from_functions({'get_order': get_order})`: plain Python functions, from their signatures,
  type hints and docstrings; a `HostClass` among them as a stub class (`add_host_class`).
- `StubWriter.add_schema_function(...)`: tools known only by JSON schemas (Pydantic AI tools, MCP
  tools): objects become `TypedDict`s, enums `Literal`s, optional keys `NotRequired`.

The text is both the catalog in the `run_code` description and the `type_check_stubs` of the
session, so what the model reads is exactly what its script is checked against.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import datetime
import decimal
import enum
import inspect
import json
import keyword
import pathlib
import re
import types
import typing
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..host.external import is_async_callable
from ..hostobjects import HostClass

__all__ = ['stubs_from_functions', 'python_name', 'StubWriter', 'SchemaFunction']


def stubs_from_functions(mapping: Mapping[str, Callable[..., Any] | HostClass]) -> str:
    """The stub text of host functions: one `def` (or `async def`) per function, with its docstring;
    a `HostClass` becomes a stub class of what the script may use of it (`StubWriter.add_host_class`).

    Names are made valid identifiers with `python_name`. Types the sandbox cannot hold become
    `Any`; `TypedDict`s, dataclasses and pydantic models become `TypedDict` definitions (they
    reach the script as dicts); enums become `Literal`s of their values (or their values' types),
    a path returned `pathlib.Path` (the sandbox's), one taken `str`; `Decimal` and `UUID` stay themselves (`decimal.Decimal`, `uuid.UUID`), as each
    crosses the boundary (see the README's "Values that cross the boundary").

        >>> async def get_order(order_id: str) -> dict:
        ...     '''Return one order.'''
        >>> print(stubs_from_functions({'get_order': get_order}))
        async def get_order(order_id: str) -> dict:
            \"\"\"Return one order.\"\"\"
    """
    writer = StubWriter()
    for name, function in mapping.items():
        if isinstance(function, HostClass):
            writer.add_host_class(name, function)
        else:
            writer.add_python_function(name, function)
    return writer.render()


_INVALID = re.compile(r'[^0-9a-zA-Z_]')


def python_name(name: str) -> str:
    """`name` as a Python identifier: other characters become `_`, a keyword or leading digit gets one more."""
    result = _INVALID.sub('_', name) or '_'
    if result[0].isdigit():
        result = '_' + result
    if keyword.iskeyword(result):
        result += '_'
    return result


def _class_name(text: str) -> str:
    """`'get_weather'`, `'get-weather result'` -> `'GetWeatherResult'`."""
    words = [word for word in re.split(r'[^0-9a-zA-Z]+', text) if word]
    name = ''.join(word[:1].upper() + word[1:] for word in words) or 'Object'
    return python_name(name)


def _docstring(text: str, indent: str = '    ') -> str:
    text = inspect.cleandoc(text).replace('\\', '\\\\').replace('"""', '\\"\\"\\"')
    if text.endswith('"'):
        text = text[:-1] + '\\"'
    lines = text.splitlines() or ['']
    if len(lines) == 1:
        return f'{indent}"""{lines[0]}"""'
    body = '\n'.join(f'{indent}{line}' if line.strip() else '' for line in lines[1:])
    return f'{indent}"""{lines[0]}\n{body}\n{indent}"""'


def _comment(text: str | None) -> str:
    if not text:
        return ''
    line = ' '.join(text.split())
    if len(line) > 160:
        line = line[:157] + '...'
    return f'  # {line}'


def _literal_value(value: Any) -> str | None:
    """A short Python literal for a default or enum value, or None when it has no short one."""
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None or isinstance(value, (bool, int, float, str)):
        text = repr(value)
    elif isinstance(value, (list, tuple, dict)):
        try:
            text = repr(json.loads(json.dumps(value)))
        except (TypeError, ValueError):
            return None
        if isinstance(value, tuple):
            text = repr(tuple(json.loads(json.dumps(value))))
    else:
        return None
    return text if len(text) <= 80 else None


@dataclasses.dataclass(frozen=True)
class SchemaFunction:
    """How a stub function built from a JSON schema maps back to its tool.

    `params` pairs each Python parameter name with the tool's argument key, in order, so that
    positional and renamed arguments can be turned back into the tool's argument dict.
    """

    name: str
    params: tuple[tuple[str, str], ...]
    positional: int = -1  # how many parameters may be passed by position; -1: all

    def arguments(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The tool's argument dict for a call made with Python `args` and `kwargs`.

        Raises `TypeError` as Python would for too many arguments or an unknown keyword.
        """
        limit = len(self.params) if self.positional < 0 else self.positional
        if len(args) > limit:
            raise TypeError(f'{self.name}() takes {limit} positional arguments but {len(args)} were given')
        keys = dict(self.params)
        result: dict[str, Any] = {}
        for (_, key), value in zip(self.params, args, strict=False):
            result[key] = value
        for py_name, value in kwargs.items():
            key = keys.get(py_name)
            if key is None:
                raise TypeError(f'{self.name}() got an unexpected keyword argument {py_name!r}')
            if key in result:
                raise TypeError(f'{self.name}() got multiple values for argument {py_name!r}')
            result[key] = value
        return result


class StubWriter:
    """Collects functions and the types they use, and renders them as one stub file."""

    def __init__(self) -> None:
        self._typing: set[str] = set()
        self._abc: set[str] = set()
        self._modules: set[str] = set()
        self._returning = False  # a path a function returns reaches the script as a path; one it takes, as text
        self._definitions: dict[str, str] = {}
        self._names_by_key: dict[Any, str] = {}
        self._functions: list[str] = []
        self._function_names: set[str] = set()
        self._classes: dict[type, str] = {}  # host classes given stub classes, by the names they have

    # ----- output --------------------------------------------------------------------------------

    def render(self) -> str:
        """The stub text: imports, type definitions, then the functions, in the order added."""
        header: list[str] = [f'import {module}' for module in sorted(self._modules)]
        if self._abc:
            header.append(f'from collections.abc import {", ".join(sorted(self._abc))}')
        if self._typing:
            header.append(f'from typing import {", ".join(sorted(self._typing))}')
        blocks: list[str] = []
        if header:
            blocks.append('\n'.join(header))
        blocks.extend(self._definitions.values())
        blocks.extend(self._functions)
        return '\n\n\n'.join(blocks) + '\n' if blocks else ''

    @property
    def function_names(self) -> frozenset[str]:
        return frozenset(self._function_names)

    def _claim_function_name(self, name: str) -> str:
        py_name = python_name(name)
        if py_name in self._function_names:
            raise ValueError(f'two functions are both named {py_name!r} in the sandbox (from {name!r}); rename one')
        self._function_names.add(py_name)
        return py_name

    def _claim_type_name(self, base: str) -> str:
        name = base
        number = 2
        while name in self._definitions or name in self._function_names:
            name = f'{base}{number}'
            number += 1
        self._definitions[name] = ''  # reserved; filled in when its body is rendered
        return name

    # ----- Python functions ----------------------------------------------------------------------

    def add_python_function(self, name: str, function: Callable[..., Any]) -> str:
        """Add a stub for a Python callable; returns the name the script calls it by."""
        if not callable(function):
            raise TypeError(f'{name!r} is not callable: {type(function).__name__}')
        py_name = self._claim_function_name(name)
        self._functions.append(self._def(py_name, function))
        return py_name

    def add_host_class(self, name: str, host_class: HostClass) -> str:
        """Add a stub class for a `HostClass` given to the script as `name`: its class
        `attributes`, its instance attributes and methods (`instance_*`), its `__init__` when it
        may be made, its classmethods; a member's type from the class's hints and signatures, the
        class itself by `name`. Returns the name the script uses."""
        py_name = self._claim_function_name(name)
        cls = host_class.cls
        self._classes[cls] = py_name
        try:
            hints = typing.get_type_hints(cls, include_extras=True)
        except Exception:
            hints = {}
        lines = [_docstring(doc), ''] if (doc := inspect.getdoc(cls)) and doc != inspect.getdoc(object) else []
        for attribute in (*(host_class.attributes or ()), *host_class.instance_attributes):
            lines.append(f'    {attribute}: {self.python_type(hints.get(attribute, Any), hint=f"{py_name}_{attribute}")}')
        for method in (*(['__init__'] if host_class.init else []), *host_class.instance_methods, *host_class.methods):
            raw = inspect.getattr_static(cls, method, None)
            if raw is None:  # not the class's (an instance's own callable): any arguments
                lines.append(f'    def {method}(self, *args: {self._any()}, **kwargs: Any) -> Any:\n        ...')
                continue
            decorator = '    @classmethod\n' if isinstance(raw, classmethod) else '    @staticmethod\n' if isinstance(raw, staticmethod) else ''
            function = raw.__func__ if isinstance(raw, (classmethod, staticmethod)) else raw
            text = self._def(method, function, returns='None' if method == '__init__' else None, method=not isinstance(raw, staticmethod))
            lines.append(decorator + '\n'.join(f'    {line}' for line in text.splitlines()))
        self._functions.append(f'class {py_name}:\n' + ('\n'.join(lines) if lines else '    ...'))
        return py_name

    def _def(self, py_name: str, function: Callable[..., Any], *, returns: str | None = None, method: bool = False) -> str:
        """The `def` (or `async def`) of `function` as `py_name`, its docstring its body; a
        `method`'s first parameter (`self`, `cls`) as it is, its docstring its own (not one inherited)."""
        try:
            signature = inspect.signature(function)
        except (TypeError, ValueError):
            signature = None
        try:
            hints = typing.get_type_hints(function, include_extras=True)
        except Exception:
            hints = {}
        params: list[str] = []
        if signature is None:
            params = [*(['self'] if method else []), '*args: Any', '**kwargs: Any']
            self._typing.add('Any')
            returns = 'Any'
        else:
            kind = None
            for index, param in enumerate(signature.parameters.values()):
                text = param.name
                if param.kind is param.VAR_POSITIONAL:
                    text = '*' + text
                elif param.kind is param.VAR_KEYWORD:
                    text = '**' + text
                if not (method and index == 0):
                    annotation = hints.get(param.name, param.annotation)
                    text += ': ' + self.python_type(annotation, hint=f'{py_name}_{param.name}')
                if param.default is not param.empty:
                    text += ' = ' + (_literal_value(param.default) or '...')
                if param.kind is param.KEYWORD_ONLY and kind not in (param.KEYWORD_ONLY, param.VAR_POSITIONAL):
                    params.append('*')
                if param.kind is not param.POSITIONAL_ONLY and kind is param.POSITIONAL_ONLY:
                    params.append('/')
                params.append(text)
                kind = param.kind
            if kind is inspect.Parameter.POSITIONAL_ONLY:
                params.append('/')
            if returns is None:
                self._returning = True
                try:
                    returns = self.python_type(hints.get('return', signature.return_annotation), hint=f'{py_name}_result')
                finally:
                    self._returning = False
        prefix = 'async def' if is_async_callable(function) else 'def'
        doc = inspect.getdoc(function)
        if method and (function.__doc__ is None or function.__doc__ == getattr(getattr(object, py_name, None), '__doc__', None)):
            doc = None  # a method's docstring is its own, not one it inherits (`object.__init__`'s)
        body = _docstring(doc) if doc else '    ...'
        return f'{prefix} {py_name}({", ".join(params)}) -> {returns}:\n{body}'

    def python_type(self, annotation: Any, *, hint: str = 'Object') -> str:
        """The stub text of a Python annotation (`Any` for what a script cannot hold)."""
        return self._python_type(annotation, hint)

    def _any(self) -> str:
        self._typing.add('Any')
        return 'Any'

    def _python_type(self, tp: Any, hint: str) -> str:  # noqa: C901 - one branch per kind of type
        if tp is inspect.Parameter.empty or tp is Any or isinstance(tp, (str, typing.ForwardRef)):
            return self._any()
        if tp is None or tp is type(None):
            return 'None'
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin is typing.Annotated:
            return self._python_type(args[0], hint)
        if origin is not None and origin in _QUALIFIERS:
            return self._python_type(args[0], hint)
        if origin is typing.Union or origin is types.UnionType:
            return _union(self._python_type(arg, hint) for arg in args)
        if origin is typing.Literal:
            self._typing.add('Literal')
            return 'Literal[' + ', '.join(repr(a.value if isinstance(a, enum.Enum) else a) for a in args) + ']'
        if tp in _BUILTIN_NAMES:
            return _BUILTIN_NAMES[tp]
        if isinstance(tp, type) and tp in self._classes:  # a host class the stubs define
            return self._classes[tp]
        if tp in _DATETIME_TYPES:
            self._modules.add('datetime')
            return f'datetime.{tp.__name__}'
        if tp in _VALUE_TYPES:  # they cross as themselves (see corral.values)
            module, name = _VALUE_TYPES[tp]
            self._modules.add(module)
            return name
        if isinstance(tp, type) and issubclass(tp, pathlib.PurePath):
            if self._returning and tp is not pathlib.PureWindowsPath:  # the sandbox's own Path (see corral.values)
                self._modules.add('pathlib')
                return 'pathlib.Path'
            return 'str'  # the tool gets a path as its text (`tool_value`), which a script may give
        if origin is not None:
            name = _GENERIC_NAMES.get(origin)
            if name is None:
                return self._any()
            if name in _ABC_NAMES:
                self._abc.add(name)
            if not args:
                return name
            if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
                return f'tuple[{self._python_type(args[0], hint)}, ...]'
            if origin is collections.abc.Callable:
                return self._any()
            return f'{name}[{", ".join(self._python_type(arg, hint) for arg in args)}]'
        if isinstance(tp, type):
            if issubclass(tp, enum.Enum):
                values = [member.value for member in tp]
                if values and all(isinstance(v, (str, int, bool)) for v in values):
                    self._typing.add('Literal')
                    return 'Literal[' + ', '.join(repr(v) for v in values) + ']'
                # a member crosses as its value: the types of the values
                return _union(self._python_type(type(v), hint) for v in values) if values else self._any()
            if _is_typeddict(tp):
                return self._python_typeddict(tp)
            if dataclasses.is_dataclass(tp):
                fields = typing.get_type_hints(tp, include_extras=True)
                names = [field.name for field in dataclasses.fields(tp)]
                return self._python_record(tp, {name: fields.get(name, Any) for name in names}, set(names))
            model_fields = getattr(tp, 'model_fields', None)
            if isinstance(model_fields, dict) and hasattr(tp, 'model_dump'):
                return self._python_record(tp, {name: f.annotation for name, f in model_fields.items()}, set(model_fields))
            if issubclass(tp, tuple) and hasattr(tp, '_fields'):
                hints = typing.get_type_hints(tp)
                return f'tuple[{", ".join(self._python_type(hints.get(f, Any), hint) for f in tp._fields)}]'
            for base, name in _BUILTIN_NAMES.items():
                if isinstance(base, type) and base is not object and issubclass(tp, base):
                    return name
        return self._any()

    def _python_typeddict(self, tp: type) -> str:
        hints = typing.get_type_hints(tp, include_extras=True)
        required = set(getattr(tp, '__required_keys__', hints))
        return self._python_record(tp, hints, required)

    def _python_record(self, tp: type, fields: Mapping[str, Any], required: set[str]) -> str:
        key = ('class', tp)
        if key in self._names_by_key:
            return self._names_by_key[key]
        name = self._claim_type_name(python_name(tp.__name__))
        self._names_by_key[key] = name
        entries = [(field, self._python_type(annotation, f'{name}_{field}'), field in required, None) for field, annotation in fields.items()]
        own_doc = tp.__dict__.get('__doc__')
        if dataclasses.is_dataclass(tp) and isinstance(own_doc, str) and own_doc.startswith(f'{tp.__name__}('):
            own_doc = None  # the signature dataclasses writes when a class has no docstring
        self._definitions[name] = self._typeddict(name, entries, own_doc if isinstance(own_doc, str) else None)
        return name

    def _typeddict(self, name: str, entries: list[tuple[str, str, bool, str | None]], doc: str | None) -> str:
        self._typing.add('TypedDict')
        if any(not required for _, _, required, _ in entries):
            self._typing.add('NotRequired')
        if all(key.isidentifier() and not keyword.iskeyword(key) for key, _, _, _ in entries):
            lines = [f'class {name}(TypedDict):']
            if doc and doc.strip():
                lines.append(_docstring(doc))
            for key, type_text, required, description in entries:
                type_text = type_text if required else f'NotRequired[{type_text}]'
                lines.append(f'    {key}: {type_text}{_comment(description)}')
            if len(lines) == 1:
                lines.append('    pass')
            return '\n'.join(lines)
        items = ', '.join(f'{key!r}: {t if required else f"NotRequired[{t}]"}' for key, t, required, _ in entries)
        return f'{name} = TypedDict({name!r}, {{{items}}})'

    # ----- JSON schemas --------------------------------------------------------------------------

    def add_schema_function(
        self,
        name: str,
        *,
        parameters: Mapping[str, Any] | None,
        returns: Mapping[str, Any] | bool | None = None,
        description: str | None = None,
        is_async: bool = True,
        return_type: str | None = None,
    ) -> SchemaFunction:
        """Add a stub for a tool described by JSON schemas.

        `parameters` is the tool's input schema (an object); `returns` its output schema, `None`
        when it has none (the stub says `-> Any`); `return_type`, the return type as stub text
        already (from `python_type`), wins over `returns`. `description` becomes the docstring, followed by
        the parameters' own descriptions.
        """
        py_name = self._claim_function_name(name)
        parameters = dict(parameters or {})
        defs = _definitions_of(parameters)
        properties = parameters.get('properties') or {}
        required = set(parameters.get('required') or [])
        params: list[tuple[str, str]] = []
        rendered: list[tuple[str, bool]] = []  # (text, has a default)
        arg_docs: list[str] = []
        used: set[str] = set()
        for key, schema in properties.items():
            py_param = python_name(key)
            while py_param in used:
                py_param += '_'
            used.add(py_param)
            params.append((py_param, key))
            type_text = self._schema_type(schema, defs, f'{py_name}_{key}')
            text = f'{py_param}: {type_text}'
            has_default = key not in required
            if has_default:
                default = schema.get('default', ...) if isinstance(schema, dict) else ...
                text += ' = ' + ('...' if default is ... else _literal_value(default) or '...')
            rendered.append((text, has_default))
            if isinstance(schema, dict) and schema.get('description'):
                arg_docs.append(f'    {py_param}: {" ".join(str(schema["description"]).split())}')
        # Required parameters after an optional one can only be keyword-only.
        texts: list[str] = []
        positional = len(rendered)
        seen_default = False
        for index, (text, has_default) in enumerate(rendered):
            if not has_default and seen_default:
                positional = index
                texts.append('*')
                texts.extend(t for t, _ in rendered[index:])
                break
            seen_default = seen_default or has_default
            texts.append(text)
        if return_type is not None:
            return_text = return_type
        elif returns is None or returns is True or returns == {}:
            return_text = self._any()
        else:
            return_text = self._schema_type(returns, _definitions_of(returns), f'{py_name}_result')
        doc_parts = []
        if description and description.strip():
            doc_parts.append(inspect.cleandoc(description))
        if arg_docs:
            doc_parts.append('Args:\n' + '\n'.join(arg_docs))
        body = _docstring('\n\n'.join(doc_parts)) if doc_parts else '    ...'
        prefix = 'async def' if is_async else 'def'
        self._functions.append(f'{prefix} {py_name}({", ".join(texts)}) -> {return_text}:\n{body}')
        return SchemaFunction(name=py_name, params=tuple(params), positional=positional)

    def schema_type(self, schema: Any, *, hint: str = 'Object') -> str:
        """The stub text of a JSON schema (a `TypedDict` is defined for each object with properties)."""
        return self._schema_type(schema, _definitions_of(schema), hint)

    def _schema_type(self, schema: Any, defs: Mapping[str, Any], hint: str, seen: frozenset[str] = frozenset()) -> str:  # noqa: C901
        if schema is True or not isinstance(schema, dict) or not schema:
            return self._any()
        ref = schema.get('$ref')
        if isinstance(ref, str):
            target_name = ref.rsplit('/', 1)[-1]
            target = defs.get(target_name)
            if target is None or ref in seen:
                key = ('ref', ref, id(defs))
                return self._names_by_key.get(key) or self._any()
            if _is_object(target) and target.get('properties'):
                return self._schema_object(target, defs, target.get('title') or target_name, seen | {ref}, key=('ref', ref, id(defs)))
            return self._schema_type(target, defs, target_name, seen | {ref})
        if 'const' in schema:
            self._typing.add('Literal')
            return f'Literal[{_literal_value(schema["const"]) or "..."}]'
        if 'enum' in schema and isinstance(schema['enum'], list):
            values = schema['enum']
            members = [repr(v) for v in values if v is not None and isinstance(v, (str, int, bool))]
            parts = []
            if members:
                self._typing.add('Literal')
                parts.append(f'Literal[{", ".join(members)}]')
            if any(v is None for v in values):
                parts.append('None')
            return _union(parts) if parts else self._any()
        for combinator in ('anyOf', 'oneOf'):
            options = schema.get(combinator)
            if isinstance(options, list) and options:
                return _union(self._schema_type(option, defs, hint, seen) for option in options)
        all_of = schema.get('allOf')
        if isinstance(all_of, list) and len(all_of) == 1:
            return self._schema_type(all_of[0], defs, hint, seen)
        kind = schema.get('type')
        if isinstance(kind, list):
            rest = {k: v for k, v in schema.items() if k != 'type'}
            return _union(self._schema_type({**rest, 'type': one}, defs, hint, seen) for one in kind)
        if kind in _JSON_SCALARS:
            return _JSON_SCALARS[kind]
        if kind == 'array':
            prefix = schema.get('prefixItems')
            if isinstance(prefix, list) and prefix:
                return f'tuple[{", ".join(self._schema_type(item, defs, hint, seen) for item in prefix)}]'
            items = schema.get('items')
            if not items:
                return f'list[{self._any()}]'
            return f'list[{self._schema_type(items, defs, hint + "_item", seen)}]'
        if kind == 'object' or 'properties' in schema:
            if schema.get('properties'):
                return self._schema_object(schema, defs, schema.get('title') or hint, seen, key=('schema', _fingerprint(schema)))
            extra = schema.get('additionalProperties')
            if isinstance(extra, dict) and extra:
                return f'dict[str, {self._schema_type(extra, defs, hint + "_value", seen)}]'
            return f'dict[str, {self._any()}]'
        return self._any()

    def _schema_object(self, schema: Mapping[str, Any], defs: Mapping[str, Any], title: str, seen: frozenset[str], *, key: Any) -> str:
        if key in self._names_by_key:
            return self._names_by_key[key]
        name = self._claim_type_name(_class_name(title))
        self._names_by_key[key] = name
        required = set(schema.get('required') or [])
        entries = []
        for field, field_schema in schema['properties'].items():
            description = field_schema.get('description') if isinstance(field_schema, dict) else None
            entries.append((field, self._schema_type(field_schema, defs, f'{name}_{field}', seen), field in required, description))
        self._definitions[name] = self._typeddict(name, entries, schema.get('description'))
        return name


def _is_typeddict(tp: Any) -> bool:
    if typing.is_typeddict(tp):
        return True
    try:
        import typing_extensions
    except ImportError:  # pragma: no cover
        return False
    return typing_extensions.is_typeddict(tp)


def _union(parts: typing.Iterable[str]) -> str:
    unique: list[str] = []
    for part in parts:
        for piece in _split_union(part):
            if piece not in unique:
                unique.append(piece)
    if 'Any' in unique:
        return 'Any'
    if 'None' in unique:  # `X | None` reads best with None last
        unique.remove('None')
        unique.append('None')
    return ' | '.join(unique)


def _split_union(text: str) -> list[str]:
    """Top-level `|` members of a rendered type."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char in '[(':
            depth += 1
        elif char in '])':
            depth -= 1
        elif char == '|' and depth == 0:
            parts.append(text[start:index].strip())
            start = index + 1
    parts.append(text[start:].strip())
    return parts


def _definitions_of(schema: Any) -> Mapping[str, Any]:
    if not isinstance(schema, dict):
        return {}
    defs: dict[str, Any] = {}
    for key in ('definitions', '$defs'):
        value = schema.get(key)
        if isinstance(value, dict):
            defs.update(value)
    return defs


def _is_object(schema: Any) -> bool:
    return isinstance(schema, dict) and (schema.get('type') == 'object' or 'properties' in schema)


def _fingerprint(schema: Any) -> str:
    try:
        return json.dumps(schema, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(id(schema))


_QUALIFIERS = {typing.Required, typing.NotRequired, typing.ClassVar, typing.Final} | (
    {typing.ReadOnly} if hasattr(typing, 'ReadOnly') else set()
)

_JSON_SCALARS = {'string': 'str', 'integer': 'int', 'number': 'float', 'boolean': 'bool', 'null': 'None'}

_BUILTIN_NAMES: dict[Any, str] = {
    str: 'str', int: 'int', float: 'float', bool: 'bool', bytes: 'bytes', complex: 'complex',
    list: 'list', dict: 'dict', set: 'set', frozenset: 'frozenset', tuple: 'tuple', object: 'object',
}

_DATETIME_TYPES = (datetime.datetime, datetime.date, datetime.time, datetime.timedelta, datetime.timezone)

#: Other types that cross the boundary as themselves: type -> (module to import, name in a stub).
_VALUE_TYPES: dict[Any, tuple[str, str]] = {decimal.Decimal: ('decimal', 'decimal.Decimal'), uuid.UUID: ('uuid', 'uuid.UUID')}

_GENERIC_NAMES: dict[Any, str] = {
    list: 'list', dict: 'dict', set: 'set', frozenset: 'frozenset', tuple: 'tuple', type: 'type',
    collections.abc.Sequence: 'Sequence', collections.abc.MutableSequence: 'list',
    collections.abc.Mapping: 'Mapping', collections.abc.MutableMapping: 'dict',
    collections.abc.Iterable: 'Iterable', collections.abc.Collection: 'Collection',
    collections.abc.Set: 'Set', collections.abc.MutableSet: 'set',
    collections.abc.Callable: 'Callable',
}

_ABC_NAMES = {'Sequence', 'Mapping', 'Iterable', 'Collection', 'Set'}
