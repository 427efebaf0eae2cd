"""Host objects: an object or a class of the host's that a script holds and uses, never has.

`HostObject(value, methods=..., attributes=...)` in a host function's result (or a module's
value) is, in the script, an object of a class named as the value's (`type(x).__name__`) whose
allow-listed methods and attributes are host calls: `x.add(2, 3)` runs `value.add(2, 3)` on the
host, `x.size` reads `value.size` there, each time. `HostClass(cls, init=True, ...)` is the class
itself: calling it in the script constructs on the host, and the instance is a `HostObject` with
the class's `instance_*` lists, of the same class in the script (`isinstance(x, Cls)`).

No part of the host object enters the worker: the script's object holds a random name the
session gave it (its wire form, `ObjectRef`), and the host resolves each call's name against the
objects the session gave (`HostObjects.resolve`), checking the name against the lists there, so a
forged name, another session's, one from before a load or a method not listed reaches nothing.
Names starting with `_` cannot be listed, so no dunder (`__class__`, `__reduce__`, ...) is ever
reached. Back out of the sandbox the object is the `HostObject` (or `HostClass`) again.
"""

from __future__ import annotations

import dataclasses
import inspect
import secrets
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ['GONE', 'NOT_GIVEN', 'HostClass', 'HostObject', 'HostObjects', 'ObjectRef', 'call_parts', 'gone', 'is_object_call', 'make_proxy']

#: The call names' prefixes: an object's, a class's; `<async ...` for a method the script awaits.
_OBJECT, _CLASS = 'object', 'class'
#: The method a class's construction is called by.
CONSTRUCT = '__call__'
#: Why a call reaches nothing: the session did not give the name it carries.
NOT_GIVEN = 'is not one this session gave (one given before the session was stored and loaded is gone)'
#: The host's answer to a call of an object, class or callable value it did not give: the worker,
#: which knows the script's class or function, says which (`values.call_error`). No name a
#: session gave is ever in it.
GONE = f'the host object or function this call reaches {NOT_GIVEN}'


def _public_names(owner: str, kind: str, names: Iterable[str]) -> tuple[str, ...]:
    """`names` as a tuple, each checked to be a public identifier; `ValueError` else."""
    if isinstance(names, str):
        raise TypeError(f'{owner} {kind} must be a collection of names, not a str: {names!r}')
    out = tuple(names)
    for name in out:
        if type(name) is not str or not name.isidentifier() or name.startswith('_'):
            raise ValueError(f'{owner} {kind} may only list public names (no leading underscore): {name!r} is not one')
    return out


def _check_class_name(owner: str, what: str, cls: type) -> None:
    """`ValueError` unless `cls`'s name is an identifier: the script's class is named as it is."""
    name = type.__dict__['__name__'].__get__(cls)
    if not name.isidentifier():
        raise ValueError(f'{owner} needs {what} named by an identifier, as the script names it: {name!r} is not one')


def _raw(cls: type, name: str) -> Any:
    """What `cls` (or the first class of its MRO that has it) defines `name` as, unbound."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return vars(klass)[name]
    return None


class HostClass:
    """A host class given to a script (in a host function's result or a module's values): in the
    script, a class named as `cls` is. With `init`, calling it constructs an instance on the host
    (`cls(*args, **kwargs)`), which the script holds as a `HostObject` with `instance_methods`
    and `instance_attributes`; without, calling it is `TypeError: cannot instantiate host class
    'Name'`. `methods` are classmethods or staticmethods of `cls` the script may call on the class,
    `attributes` its attributes the script may read (`Cls.LIMIT`, read on the host at each read).
    Raises `TypeError` for a `cls` that is not a class, `ValueError` for a name that is not a
    public one, a method that is no classmethod or staticmethod, or a class whose name is no
    identifier."""

    __slots__ = ('cls', 'init', 'methods', 'attributes', 'instance_methods', 'instance_attributes')

    def __init__(
        self,
        cls: type,
        *,
        init: bool = False,
        methods: Iterable[str] = (),
        attributes: Iterable[str] = (),
        instance_methods: Iterable[str] = (),
        instance_attributes: Iterable[str] = (),
    ) -> None:
        if not isinstance(cls, type):
            raise TypeError(f'HostClass needs a class, not {type(cls).__name__}')
        _check_class_name('HostClass', 'a class', cls)
        self.cls = cls
        self.init = bool(init)
        self.methods = _public_names('HostClass', 'methods', methods)
        for name in self.methods:
            if not isinstance(_raw(cls, name), (classmethod, staticmethod)):
                raise ValueError(f'HostClass methods are called on the class: {cls.__name__}.{name} is no classmethod or staticmethod')
        self.attributes: tuple[str, ...] | None = _public_names('HostClass', 'attributes', attributes)
        self.instance_methods = _public_names('HostClass', 'instance_methods', instance_methods)
        self.instance_attributes = _public_names('HostClass', 'instance_attributes', instance_attributes)

    @property
    def name(self) -> str:
        """The class's name, as the script sees it."""
        return type.__dict__['__name__'].__get__(self.cls)

    def call_method(self, name: str) -> Callable[..., Any]:
        """The class's method `name`, to call (the session checked that the script may)."""
        return getattr(self.cls, name)

    def read_attribute(self, name: str) -> Any:
        """The class's attribute `name` (the session checked that the script may read it); it may
        be an awaitable of it, which the session awaits."""
        return getattr(self.cls, name)

    def construct(self, *args: Any, **kwargs: Any) -> HostObject:
        """A new instance (`cls(*args, **kwargs)`) as a `HostObject` with the instance lists;
        `TypeError` when the class may not be instantiated."""
        if not self.init:
            raise TypeError(f'cannot instantiate host class {self.name!r}')
        value = self.cls(*args, **kwargs)
        own = self if type(value) is self.cls else None  # a `__new__` that made another class's
        return HostObject(value, methods=self.instance_methods, attributes=self.instance_attributes, cls=own)

    def __repr__(self) -> str:
        return f'HostClass({self.cls!r}, init={self.init!r})'


class HostObject:
    """A host object given to a script (in a host function's result, a module's values, a
    `HostClass`'s construction): in the script, an object of a class named as the value's, whose
    `methods` are host calls running `value.method(...)` on the host and whose `attributes` read
    `value.attribute` there at each read; any other attribute is `AttributeError`. `cls` is its
    class's `HostClass` (default: one of `type(value)` with no lists, the same for every object of
    that class in a session). Raises `ValueError` for a name that is not public, a `cls` of
    another class, or a value whose class's name is no identifier."""

    __slots__ = ('value', 'methods', 'attributes', 'cls')

    def __init__(self, value: Any, *, methods: Iterable[str] = (), attributes: Iterable[str] = (), cls: HostClass | None = None) -> None:
        if cls is not None and cls.cls is not type(value):
            raise ValueError(f'HostObject cls is the HostClass of {cls.name!r}, but the value is a {type(value).__name__!r}')
        if cls is None:
            _check_class_name('HostObject', 'a value of a class', type(value))
        self.value = value
        self.methods = _public_names('HostObject', 'methods', methods)
        self.attributes: tuple[str, ...] | None = _public_names('HostObject', 'attributes', attributes)
        self.cls = cls

    def call_method(self, name: str) -> Callable[..., Any]:
        """The method `name` of the value, to call (the session checked that the script may)."""
        return getattr(self.value, name)

    def read_attribute(self, name: str) -> Any:
        """The attribute `name` of the value (the session checked that the script may read it);
        it may be an awaitable of it, which the session awaits."""
        return getattr(self.value, name)

    def is_async(self, name: str) -> bool:
        """Whether the script awaits method `name`'s calls: an async function of the value's class
        (a classmethod or staticmethod too), or one the value holds as its own attribute."""
        raw = _raw(type(self.value), name)
        if raw is None:  # its own `__dict__`, read past any `__getattr__` or `__getattribute__` of its class
            try:
                raw = object.__getattribute__(self.value, '__dict__').get(name)
            except (AttributeError, TypeError):
                raw = None
        if isinstance(raw, (classmethod, staticmethod)):
            raw = raw.__func__
        return inspect.iscoroutinefunction(raw)

    def __repr__(self) -> str:
        return f'HostObject({self.value!r}, methods={self.methods!r}, attributes={self.attributes!r})'


@dataclasses.dataclass(frozen=True)
class ObjectRef:
    """A host object's or class's wire form: the name the session gave it (`<object 9f...>`,
    `<class 1c...>`), its class's name, the class's methods as (name, awaited) pairs and its
    attributes, and the object's methods and attributes (attributes None: any public name, each
    read asking the host, whose answer may be a function). A class's own ref has
    `token == class_token` and no methods or attributes of its own."""

    token: str
    class_token: str
    class_name: str
    class_methods: tuple[tuple[str, bool], ...]
    class_attributes: tuple[str, ...] | None
    methods: tuple[tuple[str, bool], ...]
    attributes: tuple[str, ...] | None

    @property
    def is_class(self) -> bool:
        return self.token == self.class_token

    def parts(self) -> list[Any]:
        """The plain data the ref crosses as."""
        class_attributes = None if self.class_attributes is None else list(self.class_attributes)
        attributes = None if self.attributes is None else list(self.attributes)
        methods = [list(pair) for pair in self.methods]
        return [self.token, self.class_token, self.class_name, [list(pair) for pair in self.class_methods], class_attributes, methods, attributes]

    @classmethod
    def from_parts(cls, parts: Any) -> ObjectRef:
        """The ref `parts()` gave; `ValueError` for parts of the wrong kinds."""
        if type(parts) is not list or len(parts) != 7:
            raise ValueError('malformed host object in a frame')
        token, class_token, class_name, class_methods, class_attributes, methods, attributes = parts
        if not (_is_token(token) and _is_token(class_token) and type(class_name) is str and class_name.isidentifier()):
            raise ValueError('malformed host object in a frame')
        pairs = _pairs(class_methods)
        return cls(token, class_token, class_name, pairs, _names(class_attributes), _pairs(methods), _names(attributes))


def _is_public(name: Any) -> bool:
    return type(name) is str and name.isidentifier() and not name.startswith('_')


def _is_token(token: Any) -> bool:
    return type(token) is str and token.startswith(('<object ', '<class ')) and token.endswith('>') and len(token) < 64


def _names(names: Any) -> tuple[str, ...] | None:
    if names is not None and (type(names) is not list or not all(_is_public(name) for name in names)):
        raise ValueError('malformed host object in a frame')
    return None if names is None else tuple(names)


def _pairs(items: Any) -> tuple[tuple[str, bool], ...]:
    if type(items) is not list or not all(type(item) is list and len(item) == 2 and _is_public(item[0]) and type(item[1]) is bool for item in items):
        raise ValueError('malformed host object in a frame')
    return tuple((name, awaited) for name, awaited in items)


def call_name(token: str, member: str, *, awaited: bool = False, read: bool = False) -> str:
    """The host call's name for method `member` of the object or class `token` (`<object 9f...>.add`),
    or for a read of attribute `member` (`<object 9f...>:size`); `<async ...` when awaited."""
    head = f'<async {token[1:]}' if awaited else token
    return f'{head}{":" if read else "."}{member}'


def is_object_call(name: str) -> bool:
    """Whether a host call's name is one of a host object's or class's."""
    return name.startswith(('<object ', '<class ', '<async object ', '<async class '))


class HostObjects:
    """The host objects and classes one session gave its script: each gets a random name (`ref`)
    by which its calls reach it (`resolve`) and it comes back out of the sandbox as itself
    (`get`). A name from another session, or from before the session was stored and loaded,
    resolves to nothing here."""

    def __init__(self) -> None:
        self._by_token: dict[str, HostObject | HostClass] = {}
        self._refs: dict[int, tuple[HostObject | HostClass, ObjectRef]] = {}
        self._classes: dict[type, HostClass] = {}  # the default HostClass of each class

    def _class(self, value: HostObject) -> HostClass:
        if value.cls is not None:
            return value.cls
        cls = type(value.value)
        own = self._classes.get(cls)
        if own is None:
            own = self._classes[cls] = HostClass(cls)
        return own

    def ref(self, value: HostObject | HostClass) -> ObjectRef:
        """`value`'s wire form, named the first time it crosses."""
        entry = self._refs.get(id(value))
        if entry is not None and entry[0] is value:
            return entry[1]
        if isinstance(value, HostClass):
            token = f'<{_CLASS} {secrets.token_hex(8)}>'
            methods = tuple((name, inspect.iscoroutinefunction(getattr(value.cls, name))) for name in value.methods)
            ref = ObjectRef(token, token, value.name, methods, value.attributes, (), ())
        else:
            cls = self.ref(self._class(value))
            token = f'<{_OBJECT} {secrets.token_hex(8)}>'
            methods = tuple((name, value.is_async(name)) for name in value.methods)
            ref = ObjectRef(token, cls.token, cls.class_name, cls.class_methods, cls.class_attributes, methods, value.attributes)
        self._by_token[token] = value
        self._refs[id(value)] = (value, ref)
        return ref

    def get(self, token: str) -> HostObject | HostClass | None:
        """The object or class given under `token`, or None."""
        return self._by_token.get(token)

    def shown(self, name: str) -> str | None:
        """How a host call named `name` reads in an error: the class and the member (`Counter.add`)."""
        token, member, _, _ = call_parts(name)
        target = self._by_token.get(token)
        return None if target is None else f'{self.ref(target).class_name}.{member}'

    def resolve(self, name: str) -> Callable[..., Any]:
        """What a host call named `name` (`call_name`) runs: the object's method, a function
        reading its attribute, the class's construction or method; else a function raising the
        script's error: `NameError` for a name this session did not give, `AttributeError` for a
        member not listed (as Python words it), `TypeError` for a class that may not be
        instantiated."""
        token, member, read, awaited = call_parts(name)
        target = self._by_token.get(token)
        if target is None or not (member == CONSTRUCT or member.isidentifier()):
            return _raising(NameError(GONE))
        is_class = isinstance(target, HostClass)
        if is_class and member == CONSTRUCT and not read and not awaited:
            return target.construct
        ref = self.ref(target)
        attributes = ref.class_attributes if is_class else ref.attributes
        if read:  # None: any public name, its owner deciding (`read_attribute`)
            allowed = member in attributes if attributes is not None else not member.startswith('_')
        else:
            allowed = dict(ref.class_methods if is_class else ref.methods).get(member) is awaited
        if not allowed:
            owner = f'type object {ref.class_name!r}' if is_class else f'{ref.class_name!r} object'
            return _raising(AttributeError(f'{owner} has no attribute {member!r}'))
        if read:
            return lambda: target.read_attribute(member)
        return lambda *args, **kwargs: target.call_method(member)(*args, **kwargs)


def gone(name: str, class_name: str | None) -> NameError:
    """The script's error for a call named `name` whose object or class the session did not give
    (the host answered `GONE`), naming it as the script knows it: its class's name `class_name`
    (None: not known, as for a name the worker never made) and the member used
    (`the Counter object whose add this calls is not one this session gave (...)`)."""
    if class_name is None:
        return NameError(GONE)
    token, member, read, _ = call_parts(name)
    use = 'reads' if read else 'calls'
    if token.startswith(f'<{_OBJECT} '):
        return NameError(f'the {class_name} object whose {member} this {use} {NOT_GIVEN}')
    if member == CONSTRUCT:
        return NameError(f'the class {class_name} this makes an object of {NOT_GIVEN}')
    return NameError(f'the class {class_name} whose {member} this {use} {NOT_GIVEN}')


def call_parts(name: str) -> tuple[str, str, bool, bool]:
    """A host call's name (`call_name`) as (the object's token, the member, whether it reads an
    attribute, whether it is awaited)."""
    awaited = name.startswith('<async ')
    token, _, member = (f'<{name[len("<async "):]}' if awaited else name).partition('>')
    return token + '>', member[1:], member.startswith(':'), awaited


def _raising(error: BaseException) -> Callable[..., Any]:
    def refused(*args: Any, **kwargs: Any) -> Any:
        raise error

    return refused


def make_proxy(ref: ObjectRef, classes: dict[str, type], host_function: Callable[[str, bool], Callable[..., Any]], made: dict[int, Any]) -> Any:
    """In a worker: the script's object (or class) of `ref`. A class is made once per class
    token (`classes`), so every object of it is an instance of it; `made` keeps each object's ref
    by its id, for the object to leave as it came. `host_function(name, awaited)` gives the
    function making host calls named `name`."""
    cls = classes.get(ref.class_token)
    if cls is None:
        cls = classes[ref.class_token] = _proxy_class(ref, host_function, made)
        made[id(cls)] = (cls, ObjectRef(ref.class_token, ref.class_token, ref.class_name, ref.class_methods, ref.class_attributes, (), ()))
    if ref.is_class:
        return cls
    obj = object.__new__(cls)
    made[id(obj)] = (obj, ref)
    return obj


def _proxy_class(ref: ObjectRef, host_function: Callable[[str, bool], Callable[..., Any]], made: dict[int, Any]) -> type:
    class_name = ref.class_name
    construct = host_function(call_name(ref.class_token, CONSTRUCT), False)

    def __new__(cls: type, *args: Any, **kwargs: Any) -> Any:
        return construct(*args, **kwargs)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        pass

    def __getattr__(self: Any, name: str) -> Any:
        entry = made.get(id(self))
        own: ObjectRef | None = entry[1] if entry is not None and entry[0] is self else None
        if own is not None and not name.startswith('_'):
            if own.attributes is None or name in own.attributes:
                return host_function(call_name(own.token, name, read=True), False)()
            methods = dict(own.methods)
            if name in methods:
                return host_function(call_name(own.token, name, awaited=methods[name]), methods[name])
        raise AttributeError(f'{class_name!r} object has no attribute {name!r}')

    def __repr__(self: Any) -> str:
        return f'<{class_name} object of the host>'

    namespace: dict[str, Any] = {
        '__slots__': (), '__new__': __new__, '__init__': __init__, '__getattr__': __getattr__, '__repr__': __repr__, '__module__': 'host',
    }
    for name, awaited in ref.class_methods:
        namespace[name] = staticmethod(host_function(call_name(ref.class_token, name, awaited=awaited), awaited))
    attributes = ref.class_attributes
    if attributes == ():
        return type(class_name, (), namespace)

    def class_getattr(cls: type, name: str) -> Any:  # a class attribute: read on the host
        if not name.startswith('_') and (attributes is None or name in attributes):
            return host_function(call_name(ref.class_token, name, read=True), False)()
        raise AttributeError(f'type object {class_name!r} has no attribute {name!r}')

    meta = type(f'{class_name}Type', (type,), {'__getattr__': class_getattr, '__module__': 'host'})
    return meta(class_name, (), namespace)
