"""The attack scripts of the red-team suite, with where each idea comes from.

Each `Attack` is a script a hostile model could write, the last line of the error it must get
(`expected`), and, in `code`, the `MARKER` path its payload writes or touches if the attack ever
gets through (the tests check that the file never appears). Sources, abbreviated:

- pysandbox: Victor Stinner's pysandbox and its post-mortem ("pysandbox is broken by design", 2013)
- RestrictedPython: its documented guards (`_getattr_`, format, `__class__` ...) and advisories
  (CVE-2023-37271 stack frames via generators, CVE-2023-41039 `string.Formatter` / format_map)
- smolagents: local Python executor escapes (2024-2025 advisories: dunder access through
  `getattr`, `__class__` walks, builtins recovery through function globals)
- pyjail: CTF "pyjail" write-ups (subclass walks, `__builtins__` recovery, unicode NFKC identifiers,
  decorators and metaclasses, `match` patterns, format strings, frame walks)
- cpython: the CPython documentation and issues on the named feature
- corral issue: what corral's own issues found
"""

from __future__ import annotations

import dataclasses
import textwrap

from corral.language.catalog import missing_member, module_note
from corral.language.modules import module_names


@dataclasses.dataclass(frozen=True)
class Attack:
    id: str
    source: str
    code: str
    expected: str
    #: host functions the script gets, by name (see test_attacks.HOST)
    host: bool = False
    syntax: bool = False


def attack(id: str, source: str, code: str, expected: str, *, host: bool = False) -> Attack:
    return Attack(id, source, textwrap.dedent(code).strip() + '\n', expected, host, expected.startswith('SyntaxError'))


_DUNDER = "attribute '{0}' cannot be read in the sandbox: names like __this__ are refused except a short list"

#: The start of a script whose metaclass keeps the class mark it finds in a class body's namespace.
_STEAL_MARK = """
        import asyncio
        stash = []
        class M(type):
            def __new__(mcs, name, bases, ns):
                stash.append(ns['__corral' + '_classmark__'])
                return super().__new__(mcs, name, bases, ns)
        class C(metaclass=M):
            pass
"""

#: The start of a script whose class namespace key `K('__match_args__')` answers the guard's lookup
#: "no" and, once the subject's `__class__` property `arm` has run, CPython's "yes".
_LYING_KEY = """
        armed = []
        class K(str):
            def __hash__(self):
                return hash('__match_args__')
            def __eq__(self, other):
                return bool(armed)
        def arm(self):
            armed.append(1)
            return S
        T = type
"""
#: What the lying-key scripts get: a class whose namespace has a key that is not a str is refused
#: as it is made (the guards' checked snapshot of `__match_args__` held them before; see test_guards).
_LYING_KEY_REFUSED = "TypeError: class S cannot be made in the sandbox: its namespace has a key of type 'K'; attribute names are strings"


#: A dunder a script reads of its own classes, functions and objects only, read of another's.
OWN = "AttributeError: attribute '{0}' can be read in the sandbox only on the script's own classes, functions and their objects ({1})"
WRAPPED = "only the script's own functions show what they wrap"
ANNOTATIONS = "only the script's own classes and functions show their annotations"
#: object.__setattr__ / __delattr__ handed an object that is not the script's.
SETTER = "TypeError: {0}() can change attributes in the sandbox only of the script's own classes, functions and their objects ({1})"


def dunder(name: str, hint: str = '', *, syntax: bool = True, store: bool = False) -> str:
    text = f"attribute '{name}' cannot be {'assigned' if store else 'read'} in the sandbox: names like __this__ are refused except a short list"
    if hint:
        text += f'; {hint}'
    return ('SyntaxError: ' if syntax else 'AttributeError: ') + text


def internal(name: str, *, syntax: bool = True) -> str:
    text = (
        f"attribute '{name}' is not available in the sandbox: it reaches interpreter internals "
        f'(frames, code, tracebacks, generators or the event loop)'
    )
    return ('SyntaxError: ' if syntax else 'AttributeError: ') + text


def private(name: str, where: str) -> str:
    return (
        f"AttributeError: attribute '{name}' is private: the sandbox allows names starting with '_' only on objects "
        f"of classes the script defines ({where} are not); use the public API"
    )


def foreign_private(name: str, cls: str, base: str) -> str:
    return (
        f"AttributeError: attribute '{name}' is private: {cls} derives from {base}, a class the script did not define, "
        f"so the sandbox refuses names starting with '_' on it; use the public API"
    )


def not_theirs(name: str, owner: str) -> str:
    return f"AttributeError: attribute '{name}' is private to {owner}, a class the script did not define; use the public API"


CLASS = 'use type(x) instead'
FUNC = 'function internals are not available in the sandbox'
METHOD = 'method internals are not available in the sandbox'
TB = 'tracebacks are not available to scripts; an uncaught exception shows its traceback to the host'
MRO = 'use type(x).mro()'
HIER = 'class hierarchies cannot be walked in the sandbox'
PICKLE = 'pickling is not available in the sandbox; use copy.copy or copy.deepcopy'
def no_module(name: str) -> str:
    return f"ModuleNotFoundError: No module named '{name}'\n" + module_note(name)


def no_member(module: str, name: str) -> str:
    return 'AttributeError: ' + missing_member(module, name, module_names(module))


def cannot_import(module: str, name: str) -> str:
    return f"ImportError: cannot import name '{name}' from '{module}' (unknown location)\n" + missing_member(module, name, module_names(module))
CODE_HINT = 'a script cannot run code from a string; write the code in the script itself'

ATTACKS: list[Attack] = [
    # ----- subclass walks and builtins recovery --------------------------------------------------
    attack('subclass-walk-tuple', 'pysandbox; pyjail', """
        for c in ().__class__.__bases__[0].__subclasses__():
            if c.__name__ == '_wrap_close':
                c.__init__.__globals__['system']('touch MARKER')
    """, dunder('__bases__', MRO)),
    attack('subclass-walk-list-mro', 'pyjail', """
        [].__class__.__mro__[-1].__subclasses__()
    """, dunder('__mro__', MRO)),
    attack('object-subclasses', 'pyjail', """
        object.__subclasses__()
    """, dunder('__subclasses__', 'class hierarchies cannot be walked in the sandbox')),
    attack('type-subclasses-unbound', 'pyjail', """
        type.__subclasses__(object)
    """, dunder('__subclasses__', 'class hierarchies cannot be walked in the sandbox')),
    attack('type-mro-then-subclasses', 'pyjail: type(x).mro() gives object; then __subclasses__', """
        base = type(()).mro()[-1]
        base.__subclasses__()
    """, dunder('__subclasses__', 'class hierarchies cannot be walked in the sandbox')),
    attack('getattr-subclasses', 'smolagents advisory: dunder through getattr', """
        base = type(()).mro()[-1]
        getattr(base, '__subcl' + 'asses__')()
    """, dunder('__subclasses__', 'class hierarchies cannot be walked in the sandbox', syntax=False)),
    attack('getattr-class', 'smolagents advisory', """
        getattr(getattr((), '__class__'), '__subclasses__')()
    """, dunder('__subclasses__', HIER, syntax=False)),
    attack('getattr-concat-bases', 'RestrictedPython guarded getattr bypass attempts', """
        name = ''.join(['__', 'bas', 'es__'])
        getattr(int, name)
    """, dunder('__bases__', MRO, syntax=False)),
    attack('function-globals', 'pysandbox; smolagents', """
        def f():
            pass
        f.__globals__['__builtins__']['__import__']('os').system('touch MARKER')
    """, dunder('__globals__', FUNC)),
    attack('lambda-globals-getattr', 'smolagents advisory', """
        g = getattr(lambda: 0, '__glob' + 'als__')
        g['__builtins__']['open']('MARKER', 'w')
    """, dunder('__globals__', FUNC, syntax=False)),
    attack('method-init-globals', 'pyjail: obj.__init__.__globals__', """
        class A:
            def __init__(self):
                pass
        A().__init__.__globals__
    """, dunder('__globals__', FUNC)),
    attack('builtins-name', 'pyjail', """
        __builtins__['__import__']('os').system('touch MARKER')
    """, "SyntaxError: name '__builtins__' is not available in the sandbox: names like __this__ are refused; call builtins by their name"),
    attack('import-dunder-call', 'pyjail', """
        __import__('os').system('touch MARKER')
    """, "SyntaxError: name '__import__' is not available in the sandbox: names like __this__ are refused; use an import statement"),
    attack('builtin-self-module', 'pyjail: len.__self__ is the builtins module', """
        len.__self__.open('MARKER', 'w')
    """, dunder('__self__', METHOD)),
    attack('print-self-worker', 'corral: print is the worker\'s; its __self__ would be the worker', """
        print.__self__._sock
    """, dunder('__self__', METHOD)),
    attack('print-self-getattr', 'corral', """
        getattr(print, '__self__')
    """, dunder('__self__', METHOD, syntax=False)),
    attack('function-code', 'pysandbox', """
        def f():
            return 1
        f.__code__.co_consts
    """, dunder('__code__', FUNC)),
    attack('closure-cells', 'pyjail', """
        def outer():
            secret = 1
            def inner():
                return secret
            return inner
        outer().__closure__[0].cell_contents
    """, dunder('__closure__', FUNC)),
    attack('function-builtins-attr', 'cpython 3.10: function.__builtins__', """
        (lambda: 0).__builtins__
    """, dunder('__builtins__', 'the builtins are not available as an object; call them by name')),
    attack('dict-of-object', 'pyjail', """
        class A:
            pass
        A.__dict__['__dict__']
    """, "KeyError: '__dict__'"),
    attack('getattribute-unbound', 'pyjail: object.__getattribute__(x, name)', """
        object.__getattribute__((), '__class__')
    """, dunder('__getattribute__', 'use getattr(obj, name)')),
    attack('super-getattribute', 'pyjail', """
        class A:
            def leak(self):
                return super().__getattribute__('__class__')
        A().leak()
    """, dunder('__getattribute__', 'use getattr(obj, name)')),
    attack('vars-builtin', 'pyjail', """
        vars()['__builtins__']
    """, 'NameError: vars() without an argument is not available in the sandbox; use your variables directly, or keep values in a dict'),
    attack('globals-builtin', 'pyjail', """
        globals()['__builtins__']
    """, 'NameError: globals() is not available in the sandbox; use your variables directly, or keep values in a dict'),
    attack('locals-builtin', 'pyjail', """
        locals()
    """, 'NameError: locals() is not available in the sandbox; use your variables directly, or keep values in a dict'),
    attack('eval', 'pyjail', """
        eval("__import__('os').system('touch MARKER')")
    """, f'NameError: eval() is not available in the sandbox; {CODE_HINT}'),
    attack('exec', 'pyjail', """
        exec("import os; os.system('touch MARKER')")
    """, f'NameError: exec() is not available in the sandbox; {CODE_HINT}'),
    attack('compile', 'pyjail', """
        compile('1', 'x', 'eval')
    """, f'NameError: compile() is not available in the sandbox; {CODE_HINT}'),
    attack('eval-alias', 'pyjail: taking the builtin as a value first', """
        e = eval
        e.__call__
    """, f'NameError: eval() is not available in the sandbox; {CODE_HINT}'),
    attack('open', 'smolagents', """
        open('MARKER', 'w').write('x')
    """, "PermissionError: [Errno 13] Permission denied (the host has not granted file access; the host grants it with "
         "checkout(mounts=[Mount(host_dir, sandbox_path)])): 'MARKER'"),
    attack('chdir', 'corral issue: os.chdir to move where relative paths reach', """
        import os
        os.chdir('/tmp')
        open('MARKER', 'w')
    """, "PermissionError: [Errno 13] Permission denied (the host has not granted file access; the host grants it with "
         "checkout(mounts=[Mount(host_dir, sandbox_path)])): '/tmp'"),
    attack('breakpoint', 'pyjail: breakpoint() drops into pdb', """
        breakpoint()
    """, 'NameError: breakpoint() is not available in the sandbox; debuggers are not available in the sandbox'),
    attack('input', 'pyjail', """
        input()
    """, 'NameError: input() is not available in the sandbox; a script cannot read input; use the host functions you were given'),
    attack('help', 'pyjail: help() pager runs a shell', """
        help()
    """, 'NameError: help() is not available in the sandbox; help is not available in the sandbox'),
    attack('memoryview', 'pysandbox', """
        memoryview(b'x')
    """, 'NameError: memoryview() is not available in the sandbox; use bytes or bytearray'),
    attack('type-three-args', 'RestrictedPython: type() with a namespace of special methods', """
        X = type('X', (), {'__getattr__': lambda self, n: n, '__del__': lambda self: open('MARKER', 'w')})
    """, "TypeError: class X cannot define '__del__' in the sandbox; finalizers are not supported in the sandbox; use a with statement"),
    attack('type-three-args-class-property', 'pyjail: a class whose __class__ lies, made by type()', """
        X = type('X', (), {'__class__': property(lambda self: type(print))})
    """, "TypeError: class X cannot define '__class__' in the sandbox; use type(x) instead"),
    attack('type-three-args-str-subclass-key', 'corral red team: a namespace key that is not a str', """
        class K(str):
            pass
        X = type('X', (), {K('__getattribute__'): lambda self, n: 1})
    """, "TypeError: class X cannot be made in the sandbox: its namespace has a key of type 'K'; attribute names are strings"),
    attack('type-alias-class-body-still-checked', 'pyjail: type() through an alias; its lambdas are still validated', """
        t = type
        X = t('X', (), {'leak': lambda self: self.__class__.__subclasses__()})
    """, dunder('__subclasses__', HIER)),
    attack('build-class-name', 'pyjail', """
        __build_class__
    """, "SyntaxError: name '__build_class__' is not available in the sandbox: names like __this__ are refused; use a class statement"),
    attack('loader-name', 'pyjail: __loader__.load_module', """
        __loader__.load_module('os')
    """, "SyntaxError: name '__loader__' is not available in the sandbox: names like __this__ are refused"),
    attack('corral-guard-name', 'corral: calling a guard by its name', """
        __corral_getattr__((), '__class__')
    """, "SyntaxError: name '__corral_getattr__' is reserved by the sandbox; choose another name"),
    attack('global-builtins', 'pyjail', """
        def f():
            global __builtins__
    """, "SyntaxError: name in 'global' '__builtins__' is not allowed in the sandbox: names like __this__ are refused; call builtins by their name"),
    attack('del-builtins', 'pyjail', """
        del __builtins__
    """, "SyntaxError: name '__builtins__' is not available in the sandbox: names like __this__ are refused; call builtins by their name"),
    attack('argument-builtins', 'pyjail', """
        def f(__builtins__):
            pass
    """, "SyntaxError: argument name '__builtins__' is not allowed in the sandbox: names like __this__ are refused; call builtins by their name"),
    attack('reduce-ex', 'pysandbox: object.__reduce_ex__ hands out __dict__ and copyreg', """
        object.__reduce_ex__((), 2)
    """, dunder('__reduce_ex__', PICKLE)),
    attack('getstate', 'cpython 3.11 object.__getstate__ returns __dict__', """
        import asyncio
        asyncio.Queue().__getstate__()
    """, dunder('__getstate__')),
    attack('setattr-class', 'RestrictedPython guarded setattr', """
        class A:
            pass
        class B:
            pass
        setattr(A(), '__class__', B)
    """, dunder('__class__', CLASS, syntax=False, store=True)),
    attack('store-code', 'pysandbox', """
        def f():
            pass
        f.__code__ = None
    """, dunder('__code__', FUNC, store=True)),
    attack('delattr-dunder', 'RestrictedPython', """
        class A:
            pass
        delattr(A, '__init__')
    """, dunder('__init__', syntax=False, store=True)),
    attack('comprehension-class', 'pyjail: inside a comprehension', """
        [c for c in ().__class__.__mro__]
    """, dunder('__mro__', MRO)),
    attack('fstring-class', 'pyjail: f-string expressions', """
        f'{().__class__.__base__}'
    """, dunder('__base__', MRO)),
    attack('method-func-globals', 'pyjail', """
        class A:
            def m(self):
                pass
        A().m.__func__.__globals__
    """, dunder('__func__', METHOD)),
    attack('classmethod-func', 'pyjail', """
        cm = classmethod(lambda cls: 0)
        cm.__func__
    """, dunder('__func__', METHOD)),
    attack('wrapped-attribute', 'pyjail: __wrapped__ of decorated stdlib functions', """
        import functools
        functools.lru_cache(len).__wrapped__
    """, OWN.format('__wrapped__', '_lru_cache_wrapper objects are not') + '; ' + WRAPPED),

    # ----- unicode identifiers ---------------------------------------------------------------------
    attack('nfkc-fullwidth-name', 'pyjail: NFKC-normalised identifiers', """
        ｆ = lambda: 0
        ｆ.__globals__
    """, dunder('__globals__', FUNC)),
    attack('nfkc-fullwidth-underscores', 'pyjail: _＿subclasses_＿ normalises to __subclasses__', """
        int._＿subclasses_＿
    """, dunder('__subclasses__', HIER)),
    attack('nfkc-builtins-name', 'pyjail', """
        _＿builtins_＿
    """, "SyntaxError: name '__builtins__' is not available in the sandbox: names like __this__ are refused; call builtins by their name"),
    attack('nfkc-getattr-string', 'pyjail: a string is not normalised by getattr, but the guard normalises it', """
        getattr(int, '\\uff3f\\uff3fsubclasses\\uff3f\\uff3f')
    """, dunder('__subclasses__', HIER, syntax=False)),
    attack('nfkc-italic-format', 'pyjail: mathematical italic letters in an attribute name', """
        '{0.__globals__}'.𝘧𝘰𝘳𝘮𝘢𝘵(1)
    """, 'AttributeError: str.format() field {0.__globals__}: ' + _DUNDER.format('__globals__') + '; ' + FUNC),

    # ----- format strings --------------------------------------------------------------------------
    attack('format-class', 'RestrictedPython format guard; pyjail', """
        '{0.__globals__}'.format(1)
    """, 'AttributeError: str.format() field {0.__globals__}: ' + _DUNDER.format('__globals__') + '; ' + FUNC),
    attack('format-globals', 'RestrictedPython CVE-2023-41039', """
        def f():
            pass
        '{0.__globals__}'.format(f)
    """, 'AttributeError: str.format() field {0.__globals__}: ' + _DUNDER.format('__globals__') + '; ' + FUNC),
    attack('format-deep-chain', 'pyjail', """
        class A:
            def __init__(self):
                pass
        '{0.__init__.__globals__[__builtins__]}'.format(A())
    """, 'AttributeError: str.format() field {0.__init__.__globals__[__builtins__]}: ' + _DUNDER.format('__globals__') + '; ' + FUNC),
    attack('format-unbound', 'pyjail: str.format as an unbound method', """
        str.format('{0.__globals__}', 1)
    """, 'AttributeError: str.format() field {0.__globals__}: ' + _DUNDER.format('__globals__') + '; ' + FUNC),
    attack('format-map', 'RestrictedPython CVE-2023-41039: format_map', """
        '{x.__globals__}'.format_map({'x': 1})
    """, 'AttributeError: str.format() field {x.__globals__}: ' + _DUNDER.format('__globals__') + '; ' + FUNC),
    attack('format-through-getattr', 'RestrictedPython', """
        getattr('{0.__globals__}', 'format')(1)
    """, 'AttributeError: str.format() field {0.__globals__}: ' + _DUNDER.format('__globals__') + '; ' + FUNC),
    attack('format-str-subclass', 'pyjail: a str subclass inherits the unguarded method', """
        class S(str):
            pass
        S('{0.__globals__}').format(1)
    """, 'AttributeError: str.format() field {0.__globals__}: ' + _DUNDER.format('__globals__') + '; ' + FUNC),
    attack('format-through-super', 'pyjail: super() reaches str.format past an override', """
        class S(str):
            def format(self, *a):
                return 'safe'
        super(S, S('{0.__globals__}')).format(1)
    """, 'AttributeError: str.format() field {0.__globals__}: ' + _DUNDER.format('__globals__') + '; ' + FUNC),
    attack('format-methodcaller', 'pyjail', """
        import operator
        operator.methodcaller('format', 1)('{0.__globals__}')
    """, 'AttributeError: str.format() field {0.__globals__}: ' + _DUNDER.format('__globals__') + '; ' + FUNC),
    attack('format-map-builtin', 'pyjail: map(str.format, ...)', """
        list(map(str.format, ['{0.__globals__}'], [1]))
    """, 'AttributeError: str.format() field {0.__globals__}: ' + _DUNDER.format('__globals__') + '; ' + FUNC),
    attack('format-nested-spec', 'pyjail: a field inside the format spec', """
        '{0:{1.__globals__}}'.format(1, 2)
    """, 'AttributeError: str.format() field {1.__globals__}: ' + _DUNDER.format('__globals__') + '; ' + FUNC),
    attack('format-private-foreign', 'RestrictedPython: private attributes in format', """
        import asyncio
        '{0._queue}'.format(asyncio.Queue())
    """, 'AttributeError: str.format() field {0._queue}: ' + private('_queue', 'Queue objects')[len('AttributeError: '):]),
    attack('string-formatter', 'RestrictedPython CVE-2023-41039: string.Formatter().get_field', """
        import string
        string.Formatter().get_field('0.__class__.__base__', (1,), {})
    """, dunder('__base__', MRO, syntax=False)),

    # ----- frames, tracebacks, generators, coroutines ---------------------------------------------
    attack('sys-getframe', 'pysandbox; pyjail', """
        import sys
        sys._getframe()
    """, private('_getframe', 'module objects')),
    attack('traceback-frame', 'pyjail; RestrictedPython', """
        try:
            1 / 0
        except Exception as e:
            e.__traceback__.tb_frame.f_back.f_globals
    """, dunder('__traceback__', TB)),
    attack('traceback-getattr', 'pyjail', """
        try:
            1 / 0
        except Exception as e:
            tb = getattr(e, '__traceback__')
    """, dunder('__traceback__', TB, syntax=False)),
    attack('tb-frame-name', 'pyjail', """
        def walk(tb):
            return tb.tb_frame
    """, internal('tb_frame')),
    attack('frame-back-getattr', 'pyjail', """
        class Fake:
            pass
        getattr(Fake(), 'f_back')
    """, internal('f_back', syntax=False)),
    attack('generator-frame', 'RestrictedPython CVE-2023-37271', """
        g = (x for x in [1])
        g.gi_frame.f_back.f_back.f_globals
    """, internal('gi_frame')),
    attack('generator-frame-getattr', 'RestrictedPython CVE-2023-37271', """
        g = (x for x in [1])
        getattr(g, 'gi_fr' + 'ame')
    """, internal('gi_frame', syntax=False)),
    attack('generator-code', 'pyjail', """
        def gen():
            yield 1
        gen().gi_code
    """, internal('gi_code')),
    attack('coroutine-frame', 'pyjail', """
        async def f():
            pass
        c = f()
        c.cr_frame
    """, internal('cr_frame')),
    attack('async-generator-frame', 'pyjail', """
        async def agen():
            yield 1
        agen().ag_frame
    """, internal('ag_frame')),
    attack('task-get-stack', 'asyncio: Task.get_stack() returns frames', """
        import asyncio
        asyncio.current_task().get_stack()
    """, internal('get_stack')),
    attack('task-get-coro', 'asyncio: the worker\'s own coroutine', """
        import asyncio
        asyncio.current_task().get_coro()
    """, internal('get_coro')),
    attack('task-print-stack-getattr', 'asyncio', """
        import asyncio
        getattr(asyncio.current_task(), 'print_' + 'stack')()
    """, internal('print_stack', syntax=False)),
    attack('import-traceback', 'pyjail', """
        import traceback
    """, no_module('traceback')),
    attack('import-inspect', 'pyjail: inspect.currentframe', """
        import inspect
        inspect.currentframe()
    """, no_module('inspect')),

    # ----- asyncio internals -----------------------------------------------------------------------
    attack('asyncio-get-running-loop', 'asyncio: the loop gives raw fd access', """
        import asyncio
        asyncio.get_running_loop().add_reader(0, print)
    """, "AttributeError: '_UnixSelectorEventLoop' object has no attribute 'add_reader'"),
    attack('asyncio-get-event-loop', 'asyncio', """
        import asyncio
        asyncio.get_event_loop().subprocess_shell
    """, no_member('asyncio', 'get_event_loop')),
    attack('asyncio-new-event-loop', 'asyncio', """
        import asyncio
        asyncio.new_event_loop()
    """, no_member('asyncio', 'new_event_loop')),
    attack('asyncio-future-get-loop', 'asyncio: Future.get_loop()', """
        import asyncio
        asyncio.Future().get_loop()
    """, internal('get_loop')),
    attack('asyncio-gather-get-loop', 'asyncio: a gathering future', """
        import asyncio
        getattr(asyncio.gather(), 'get_loop')()
    """, internal('get_loop', syntax=False)),
    attack('asyncio-private-loop', 'asyncio: Queue._loop', """
        import asyncio
        q = asyncio.Queue()
        await q.put(1)
        q._loop
    """, private('_loop', 'Queue objects')),
    attack('asyncio-subclass-private-loop', 'corral: a script subclass of a foreign class', """
        import asyncio
        class Q(asyncio.Queue):
            def loop(self):
                return self._loop
        Q().loop()
    """, foreign_private('_loop', 'Q', 'Queue')),
    attack('asyncio-super-private-loop', 'corral: super() past the script class', """
        import asyncio
        class F(asyncio.Future):
            def loop(self):
                return super()._loop
        F().loop()
    """, foreign_private('_loop', 'F', 'Future')),
    attack('enum-metaclass-private', 'corral: private names of a reviewed base stay refused', """
        import enum
        class Color(enum.Enum):
            RED = 1
        Color._create_('Evil', ['A'])
    """, not_theirs('_create_', 'EnumType')),
    attack('asyncio-subprocess', 'asyncio', """
        import asyncio
        await asyncio.create_subprocess_shell('touch MARKER')
    """, no_member('asyncio', 'create_subprocess_shell')),
    attack('asyncio-to-thread', 'asyncio: threads outlive a stop', """
        import asyncio
        await asyncio.to_thread(print, 1)
    """, no_member('asyncio', 'to_thread')),
    attack('asyncio-sys-module', 'corral issue: asyncio.sys exists on the real module', """
        import asyncio
        asyncio.sys.modules['os'].system('touch MARKER')
    """, no_member('asyncio', 'sys')),
    attack('asyncio-events-module', 'asyncio submodules', """
        from asyncio import events
    """, cannot_import('asyncio', 'events')),

    # ----- imports ---------------------------------------------------------------------------------
    attack('import-os', 'every sandbox', """
        import os
        os.system('touch MARKER')
    """, no_member('os', 'system')),
    attack('import-subprocess', 'every sandbox', """
        import subprocess
    """, no_module('subprocess')),
    attack('import-socket', 'every sandbox', """
        import socket
    """, no_module('socket')),
    attack('import-ctypes', 'pysandbox', """
        import ctypes
    """, no_module('ctypes')),
    # Native code that got past the guard asks the kernel about the host; each returns a text
    # starting with LEAK when it learns something (the ablation counts those).
    attack('native-stat-host-path', 'corral issue: newfstatat with AT_EMPTY_PATH passes seccomp', """
        import ctypes
        stat = ctypes.create_string_buffer(256)
        found = ctypes.CDLL(None).syscall(262, -100, b'/etc/passwd', stat, 0x1000) == 0
        'LEAK: a host file exists, with its owner and size' if found else 'contained'
    """, no_module('ctypes')),
    attack('native-host-pid', 'corral issue: SO_PEERCRED and getppid give the host pid', """
        import posix
        'LEAK: the host pid of the zygote' if posix.getppid() != 1 else 'contained'
    """, no_module('posix')),
    attack('native-hostname', "corral issue: uname gives the host's name", """
        import posix
        'LEAK: the host name' if posix.uname().nodename != 'sandbox' else 'contained'
    """, no_module('posix')),
    attack('native-root-uid', 'corral issue: workers ran as uid 0', """
        import posix
        'LEAK: the worker runs as root' if 0 in posix.getresuid() + posix.getresgid() else 'contained'
    """, no_module('posix')),
    attack('native-network-interfaces', 'every sandbox', """
        import socket
        'LEAK: the host network' if len(socket.if_nameindex()) > 1 else 'contained'
    """, no_module('socket')),
    attack('import-gc', 'pysandbox: gc.get_referrers', """
        import gc
        gc.get_referrers
    """, no_module('gc')),
    attack('import-pickle', 'pysandbox: pickle runs code', """
        import pickle
    """, no_module('pickle')),
    attack('import-codecs', 'pyjail: codecs and encodings', """
        import codecs
    """, no_module('codecs')),
    attack('import-importlib', 'pyjail', """
        import importlib
    """, no_module('importlib')),
    attack('import-builtins', 'pyjail', """
        import builtins
    """, no_module('builtins')),
    attack('from-os-import', 'every sandbox', """
        from os import system
    """, cannot_import('os', 'system')),
    attack('json-submodule', 'corral issue: json.decoder', """
        import json.decoder
    """, no_module('json.decoder')),
    attack('json-decoder-attr', 'corral issue', """
        import json
        json.decoder
    """, no_member('json', 'decoder')),
    attack('random-private-os', 'pyjail: random._os', """
        import random
        random._os
    """, private('_os', 'module objects')),
    attack('import-main', 'pyjail: __main__', """
        import __main__
    """, "SyntaxError: module '__main__' is not available in the sandbox"),
    attack('future-import', 'pyjail: future annotations make every annotation a string', """
        from __future__ import annotations
        import typing
        def f(x: __import__('os').system('touch MARKER')):
            pass
        typing.get_type_hints(f)
    """, "SyntaxError: name '__import__' is not available in the sandbox: names like __this__ are refused; use an import statement"),
    attack('relative-import', 'pyjail', """
        from . import worker
    """, 'SyntaxError: relative imports are not supported in the sandbox; import modules by their name'),
    attack('import-star', 'corral', """
        from json import *
    """, "SyntaxError: 'from json import *' is not supported in the sandbox; import the names you need: from json import name1, name2"),
    attack('typing-get-type-hints', 'pyjail: get_type_hints evaluates strings', """
        import typing
        def f(x: "__import__('os')"):
            pass
        typing.get_type_hints(f)
    """, 'TypeError: get_type_hints() in the sandbox evaluates annotations of names, attributes, subscripts, lists, '
         "tuples, constants and |, not \"__import__('os')\""),
    attack('forwardref-evaluate', 'pyjail', """
        import typing
        typing.ForwardRef('1')._evaluate({}, {}, frozenset())
    """, private('_evaluate', 'ForwardRef objects')),
    attack('uuid1-runs-commands', 'cpython: uuid.getnode() runs ifconfig', """
        import uuid
        uuid.uuid1()
    """, no_member('uuid', 'uuid1')),
    attack('enum-global-enum', 'corral: writes into the worker __main__', """
        import enum
        enum.global_enum
    """, no_member('enum', 'global_enum')),

    # ----- decorators, metaclasses, descriptors ----------------------------------------------------
    attack('decorator-globals', 'pyjail: a decorator receives the function', """
        def steal(f):
            return f.__globals__
        @steal
        def g():
            pass
    """, dunder('__globals__', FUNC)),
    attack('metaclass-instancecheck', 'pyjail: a metaclass that matches everything', """
        class M(type):
            def __instancecheck__(cls, other):
                return True
    """, "SyntaxError: method '__instancecheck__' cannot be defined in the sandbox; use an explicit check method instead of overriding isinstance()"),
    attack('fake-class-property', 'pyjail: a __class__ property fools isinstance', """
        class Fake:
            @property
            def __class__(self):
                return int
    """, "SyntaxError: method '__class__' cannot be defined in the sandbox; the special methods a class may define are __init__, __repr__, __str__, __eq__, __hash__, __lt__, __len__, __iter__, __getitem__, __enter__, __exit__, __post_init__, ..."),
    attack('del-finalizer', 'pysandbox: finalizers run after a stop', """
        class A:
            def __del__(self):
                pass
    """, "SyntaxError: method '__del__' cannot be defined in the sandbox; finalizers are not supported in the sandbox; use a with statement or an explicit close() method"),
    attack('dunder-function-at-module', 'pyjail', """
        def __getattr__(name):
            return name
    """, "SyntaxError: function '__getattr__' cannot be defined in the sandbox: names like __this__ are allowed only for "
         'methods (__init__, __repr__, __str__, __eq__, __hash__, __lt__, __len__, __iter__, __getitem__, __enter__, '
         '__exit__, __post_init__, ...), in a class body or to set on a class later; give the function an ordinary name'),
    attack('descriptor-owner-dict', 'pyjail: __set_name__ gets the owner', """
        class D:
            def __set_name__(self, owner, name):
                self.ns = owner.__dict__
        class A:
            d = D()
        A.d.ns['__corral_classmark__']
    """, "KeyError: '__corral_classmark__'"),
    attack('init-subclass-bases', 'pyjail', """
        class Base:
            def __init_subclass__(cls):
                cls.__bases__
    """, dunder('__bases__', MRO)),
    attack('metaclass-returns-foreign-class', 'corral: a metaclass returning asyncio.Queue is not the script\'s class', """
        import asyncio
        class X(metaclass=lambda name, bases, ns: asyncio.Queue):
            pass
        q = X()
        await q.put(1)
        q._getters
    """, private('_getters', 'Queue objects')),
    attack('metaclass-namespace-match-args', 'pyjail: dunder names built from strings in a metaclass namespace', """
        class M(type):
            def __new__(mcs, name, bases, ns):
                ns['__match' + '_args__'] = ('__glob' + 'als__',)
                return super().__new__(mcs, name, bases, ns)
        class C(metaclass=M):
            pass
        def f():
            pass
        match f:
            case C(g):
                g
    """, "TypeError: class pattern C(...) would read attribute '__globals__' cannot be read in the sandbox: names like __this__ are refused except a short list; function internals are not available in the sandbox (named in C.__match_args__)"),
    attack('stolen-mark-on-foreign-class', 'corral: the class mark copied onto a foreign class', _STEAL_MARK + """
        setattr(asyncio.Queue, '__corral' + '_classmark__', stash[0])
    """, "AttributeError: attribute '__corral_classmark__' cannot be assigned in the sandbox: names like __this__ are refused except a short list"),

    # ----- match class patterns --------------------------------------------------------------------
    attack('match-keyword-class', 'pyjail: keyword patterns read attributes', """
        match ():
            case object(__globals__=c):
                c
    """, 'SyntaxError: class pattern keyword: ' + _DUNDER.format('__globals__') + '; ' + FUNC),
    attack('match-args-dunder', 'pyjail: __match_args__ names a refused attribute', """
        class C:
            __match_args__ = ('__globals__',)
            def __init__(self):
                pass
        match C():
            case C(g):
                g
    """, "TypeError: class pattern C(...) would read attribute '__globals__' cannot be read in the sandbox: names like __this__ are refused except a short list; function internals are not available in the sandbox (named in C.__match_args__)"),
    attack('match-args-private-foreign', 'corral: __match_args__ naming a foreign private attribute', """
        import asyncio
        class Q(asyncio.Queue):
            __match_args__ = ('_getters',)
        match Q():
            case Q(getters):
                getters
    """, foreign_private('_getters', 'Q', 'Queue')),
    attack('match-value-private', 'corral: value patterns cannot be guarded', """
        import asyncio
        q = asyncio.Queue()
        match 1:
            case q._maxsize:
                pass
    """, "SyntaxError: a value pattern cannot read private attribute '_maxsize' in the sandbox; bind it to a variable and compare in a guard: case v if v == ..."),

    # the rewrite filters reads of `format` and the clock's `now`/`today`; a pattern reads with no
    # code of the sandbox in between (found by a red-team pass: raw str.format printed worker
    # module globals, datetime.now read the host's clock without the clock grant)
    attack('match-keyword-format', 'corral red team: a keyword pattern reads str.format unfiltered', """
        match '{0.__globals__}':
            case str(format=f):
                f(len)
    """, "SyntaxError: a class pattern cannot read 'format' in the sandbox; match without it and read .format in the case body"),
    attack('match-args-format', 'corral red team: __match_args__ of a str subclass names format', """
        class S(str):
            __match_args__ = ('format',)
        match S('{0.__globals__}'):
            case S(f):
                f(len)
    """, "TypeError: class pattern S(...) would read 'format' (named in S.__match_args__), which a class pattern cannot read in the sandbox; match S() and read .format in the case body"),
    attack('match-value-format', 'corral red team: a value pattern hands str.format to __eq__', """
        class Capture:
            def __eq__(self, other):
                other(len)
                return False
            __hash__ = None
        text = '{0.__globals__}'
        match Capture():
            case text.format:
                pass
    """, "SyntaxError: a value pattern cannot read attribute 'format' in the sandbox; bind it to a variable and compare in a guard: case v if v == ..."),
    attack('match-value-dict', "corral red team: a value pattern hands a facade module's real __dict__ (its __loader__, __spec__) to __eq__", """
        import json
        class Capture:
            def __eq__(self, other):
                other['__loader__']
                return False
            __hash__ = None
        match Capture():
            case json.__dict__:
                pass
    """, "SyntaxError: a value pattern cannot read attribute '__dict__' in the sandbox; bind it to a variable and compare in a guard: case v if v == ..."),
    attack('match-keyword-clock', 'corral red team: a keyword pattern on a class subject reads datetime.now', """
        import datetime
        match datetime.datetime:
            case type(now=now):
                now()
    """, "SyntaxError: a class pattern cannot read 'now' in the sandbox; match without it and read .now in the case body"),
    attack('match-value-clock', 'corral red team: a value pattern hands datetime.now to __eq__', """
        import datetime
        class Capture:
            def __eq__(self, other):
                other()
                return False
            __hash__ = None
        match Capture():
            case datetime.datetime.now:
                pass
    """, "SyntaxError: a value pattern cannot read attribute 'now' in the sandbox; bind it to a variable and compare in a guard: case v if v == ..."),
    attack('match-args-str-subclass-dunder', 'corral red team: a str subclass skipped the __match_args__ check', """
        class S(str):
            __match_args__ = ('__dict__',)
        match S('x'):
            case S(d):
                d
    """, "TypeError: class pattern S(...) would read attribute '__dict__' cannot be read in the sandbox: names like __this__ are refused except a short list; only x.__dict__ or vars(x) reads it, on objects of the script's classes; read the attributes by name, or use dataclasses.asdict(x) (named in S.__match_args__)"),
    attack('match-args-from-metaclass', 'corral red team: CPython finds __match_args__ on the metaclass too', """
        class M(type):
            __match_args__ = ('format',)
        class S(str, metaclass=M):
            pass
        match S('{0.__globals__}'):
            case S(f):
                f(len)
    """, "TypeError: class pattern S(...) would read 'format' (named in S.__match_args__), which a class pattern cannot read in the sandbox; match S() and read .format in the case body"),
    # a namespace key that is a str subclass answers the guard's lookup of __match_args__ one way
    # and CPython's the other; the subject's __class__ property flips it in between (red team).
    # Script subclasses now match through a proxy holding the checked snapshot: S self-matches.
    attack('match-args-lying-key-format', 'corral red team: a lying __match_args__ key, then str.format', _LYING_KEY + """
        S = T('S', (int,), {K('__match_args__'): ('format',)})
        U = T('U', (str,), {'__class__': property(arm)})
        match U('{0.__globals__[__name__]}'):
            case S(f):
                f(print)
    """, _LYING_KEY_REFUSED),
    attack('match-args-lying-key-clock', 'corral red team: a lying __match_args__ key, then datetime.now', _LYING_KEY + """
        import datetime
        S = T('S', (int,), {K('__match_args__'): ('now',)})
        D = T('D', (datetime.datetime,), {'__class__': property(arm)})
        match D(2000, 1, 1):
            case S(now):
                now()
    """, _LYING_KEY_REFUSED),
    attack('match-args-lying-key-private', 'corral red team: a lying __match_args__ key, then a Queue\'s private fields', _LYING_KEY + """
        import asyncio
        S = T('S', (int,), {K('__match_args__'): ('_getters', '_loop')})
        Q = T('Q', (asyncio.Queue,), {'__class__': property(arm)})
        match Q(7):
            case S(getters, loop):
                loop
    """, _LYING_KEY_REFUSED),
    attack('match-mapping-key-private', 'corral red team: a mapping pattern key is a value pattern too', """
        import asyncio
        q = asyncio.Queue()
        match {}:
            case {q._getters: v}:
                v
    """, "SyntaxError: a value pattern cannot read private attribute '_getters' in the sandbox; bind it to a variable and compare in a guard: case v if v == ..."),
    attack('match-mapping-key-format', 'corral red team: a mapping pattern key reading str.format', """
        text = '{0.__globals__}'
        match {}:
            case {text.format: v}:
                v
    """, "SyntaxError: a value pattern cannot read attribute 'format' in the sandbox; bind it to a variable and compare in a guard: case v if v == ..."),

    # a class body's namespace comes from the metaclass's __prepare__: it answered the guards' own
    # names (__corral_match__ here) with the script's objects (red team). Class bodies now declare
    # the guards global.
    attack('class-body-prepare-hijack-match', 'corral red team: __prepare__ supplies a fake __corral_match__', """
        class S(str):
            __match_args__ = ('format',)
        class Fake:
            def __getattr__(self, name):
                return S
        class Meta:
            def __getattr__(self, name):
                return lambda *args, **kwargs: {'__corral' + '_match__': Fake()}
            def __call__(self, name, bases, ns):
                return ns
        class C(metaclass=Meta()):
            match S('{0.__class__.__mro__}'):
                case S(f):
                    f(1)
    """, "TypeError: class pattern S(...) would read 'format' (named in S.__match_args__), which a class pattern cannot read in the sandbox; match S() and read .format in the case body"),
    attack('class-body-prepare-hijack-import', 'corral red team: a fake __corral_match__ and __match_args__ naming __globals__', """
        import json
        T = type
        Meta = T('Meta', (type,), {'__instancecheck__': lambda cls, obj: True})
        Target = Meta('Target', (), {'__match_args__': ('__globals__',)})
        class Fake:
            def __getattr__(self, k):
                return Target
        M = T('M', (type,), {'__prepare__': lambda name, bases, **kw: {'__corral' + '_match__': Fake()}})
        class C(metaclass=M):
            match json.dumps:
                case Target(g):
                    g['__builtins__']['__imp' + 'ort__']('os').system('touch MARKER')
    """, "TypeError: class Meta cannot define '__instancecheck__' in the sandbox"),

    attack('dataclass-dunder-field', 'corral red team: a metaclass writes __annotations__; dataclass __eq__ reads the fields unguarded', """
        import dataclasses
        got = []
        class Catch:
            def __eq__(self, other):
                got.append(other)
                return True
        def mine():
            pass
        class M(type):
            def __new__(mcs, name, bases, ns):
                if name == 'X':
                    ns['__annotations__'] = {'__globals__': object}
                else:
                    ns['__class__'] = property(lambda s: type(mine))
                    ns['__globals__'] = Catch()
                return super().__new__(mcs, name, bases, ns)
        @dataclasses.dataclass
        class X(metaclass=M):
            pass
        class B(metaclass=M):
            pass
        X.__eq__(mine, B())
        got[0]['__builtins__']['__imp' + 'ort__']('os').system('touch MARKER')
    """, "TypeError: dataclass(): field name '__globals__' is not allowed in the sandbox"),

    # ----- every class a class statement makes passes one rule, whatever its metaclass does ---------
    # (red team: a metaclass added what a class body may not define, read the class mark out of the
    # namespace, and with a metaclass whose mro() hid asyncio.TaskGroup made a class that counted as
    # the script's; its private attributes gave the worker's event loop and the feed's task)
    attack('metaclass-adds-getattribute', 'corral red team: a metaclass adds what a class body may not define', """
        class M(type):
            def __new__(mcs, name, bases, ns):
                ns['__getattri' + 'bute__'] = lambda self, name: 42
                return super().__new__(mcs, name, bases, ns)
        class Z(metaclass=M):
            pass
    """, "TypeError: class Z cannot define '__getattribute__' in the sandbox; use getattr(obj, name)"),
    attack('metaclass-adds-class-property', 'pyjail: a __class__ property fools isinstance', """
        class M(type):
            def __new__(mcs, name, bases, ns):
                ns['__cla' + 'ss__'] = property(lambda self: int)
                return super().__new__(mcs, name, bases, ns)
        class Z(metaclass=M):
            pass
    """, "TypeError: class Z cannot define '__class__' in the sandbox; use type(x) instead"),
    attack('metaclass-adds-finalizer', 'pysandbox: finalizers run after a stop', """
        class M(type):
            def __new__(mcs, name, bases, ns):
                ns['__d' + 'el__'] = lambda self: None
                return super().__new__(mcs, name, bases, ns)
        class Z(metaclass=M):
            pass
    """, "TypeError: class Z cannot define '__del__' in the sandbox; finalizers are not supported in the sandbox; use a with statement"),
    attack('metaclass-adds-non-str-key', 'corral red team: a namespace key that is not a str', """
        class K(str):
            def __hash__(self):
                return hash('__match_args__')
            def __eq__(self, other):
                return True
        class M(type):
            def __new__(mcs, name, bases, ns):
                ns[K('x')] = ('_loop',)
                return super().__new__(mcs, name, bases, ns)
        class Z(metaclass=M):
            pass
    """, "TypeError: class Z cannot be made in the sandbox: its namespace has a key of type 'K'; attribute names are strings"),
    attack('metaclass-mro-hides-taskgroup', 'corral red team: a stolen class mark and an mro() that hides asyncio.TaskGroup', _STEAL_MARK + """
        class Hide(type):
            def mro(cls):
                return [cls, object]
        G = Hide('G', (asyncio.TaskGroup,), {'__corral' + '_classmark__': stash[0]})
        g = G()
        asyncio.TaskGroup.__init__(g)
        await asyncio.TaskGroup.__aenter__(g)
        g._loop.call_later(0.5, print, 'later')
    """, "TypeError: class Hide cannot define 'mro' in the sandbox: classes keep Python's method resolution order"),
    attack('stolen-mark-after-its-statement', 'corral red team: the mark of a finished class statement marks nothing', _STEAL_MARK + """
        T = type
        Hide = T('Hide', (type,), {'mro': lambda cls: [cls, object]})
        G = Hide('G', (asyncio.TaskGroup,), {'__corral' + '_classmark__': stash[0]})
        g = G()
        asyncio.TaskGroup.__init__(g)
        await asyncio.TaskGroup.__aenter__(g)
        g._loop
    """, "TypeError: class Hide cannot define 'mro' in the sandbox: classes keep Python's method resolution order"),
    attack('live-mark-on-a-class-with-hidden-bases', 'corral red team: a metaclass returns a class it made with the live mark', """
        import asyncio
        T = type
        Hide = T('Hide', (type,), {'mro': lambda cls: [cls, object]})
        class M(type):
            def __new__(mcs, name, bases, ns):
                return Hide('G', (asyncio.TaskGroup,), {'__corral' + '_classmark__': ns['__corral' + '_classmark__']})
        class C(metaclass=M):
            pass
        g = C()
        asyncio.TaskGroup.__init__(g)
        await asyncio.TaskGroup.__aenter__(g)
        g._loop
    """, "TypeError: class Hide cannot define 'mro' in the sandbox: classes keep Python's method resolution order"),
    attack('live-mark-in-init-subclass', 'corral red team: __init_subclass__ of a class made with the live mark reads a foreign private', """
        import asyncio
        class Base:
            def __init_subclass__(cls):
                cls.loop = cls._probe()
        T = type
        Hide = T('Hide', (type,), {'mro': lambda cls: [cls, Base, object]})
        class M(type):
            def __new__(mcs, name, bases, ns):
                mark = ns['__corral' + '_classmark__']
                Hide('G', (asyncio.TaskGroup, Base), {'__corral' + '_classmark__': mark, '_probe': classmethod(lambda c: c._loop)})
                return super().__new__(mcs, name, bases, ns)
        class C(metaclass=M):
            pass
    """, "TypeError: class Hide cannot define 'mro' in the sandbox: classes keep Python's method resolution order"),
    attack('metaclass-made-by-type', 'corral red team: a metaclass made by calling type() has an unchecked namespace', """
        T = type
        Hide = T('Hide', (type,), {'mro': lambda cls: [cls, object]})
        class G(metaclass=Hide):
            pass
    """, "TypeError: class Hide cannot define 'mro' in the sandbox: classes keep Python's method resolution order"),
    attack('type-alias-getattribute', 'corral red team: type() under another name takes any namespace', """
        import asyncio
        T = type
        X = T('X', (), {'__getattri' + 'bute__': lambda self, name: asyncio.Queue()})
        X()._loop
    """, "TypeError: class X cannot define '__getattribute__' in the sandbox; use getattr(obj, name)"),
    attack('type-new-getattribute', 'corral red team: type.__new__ takes any namespace', """
        import asyncio
        X = type.__new__(type, 'X', (), {'__getattri' + 'bute__': lambda self, name: asyncio.Queue()})
        X()._getters
    """, "TypeError: class X cannot define '__getattribute__' in the sandbox; use getattr(obj, name)"),

    # ----- copy, dataclasses, functools, operator ------------------------------------------------
    attack('copy-foreign-dict', 'pysandbox: copy uses __reduce_ex__, which hands out __dict__', """
        import asyncio, copy
        memo = {}
        copy.deepcopy([asyncio.Queue()], memo)
    """, "TypeError: deepcopy() in the sandbox cannot copy a 'Queue' object; it copies builtin containers and values, collections containers, dates and decimals, and objects of classes the script defines"),
    attack('copy-reduce-setattr', 'pysandbox: copy._reconstruct calls setattr with names from data', """
        import asyncio, copy
        class M(type):
            def __new__(mcs, name, bases, ns):
                ns['__red' + 'uce__'] = lambda self: (lambda: asyncio.Queue, (), (None, {'__match_args__': ('_loop',)}))
                return super().__new__(mcs, name, bases, ns)
        class E(metaclass=M):
            pass
        copy.copy(E())
    """, "TypeError: class E cannot define '__reduce__' in the sandbox; " + PICKLE),
    attack('dataclass-field-name-dunder', 'corral: a mutated Field.name makes asdict read any attribute', """
        import dataclasses
        @dataclasses.dataclass
        class P:
            x: int = 0
        dataclasses.fields(P)[0].name = '__globals__'
        dataclasses.asdict(P())
    """, dunder('__globals__', FUNC, syntax=False)),
    attack('dataclass-replace-foreign-private', 'corral: replace() reads fields by name', """
        import asyncio, dataclasses
        @dataclasses.dataclass
        class Q(asyncio.Queue):
            _getters: int = 0
        dataclasses.replace(Q())
    """, foreign_private('_getters', 'Q', 'Queue')),
    attack('dataclass-foreign-class', 'corral: decorating a foreign class rewrites it', """
        import asyncio, dataclasses
        dataclasses.dataclass(asyncio.Queue)
    """, 'TypeError: dataclass() in the sandbox applies only to classes the script defines'),
    attack('update-wrapper-globals', 'pyjail: update_wrapper copies any attribute it is told to', """
        import functools
        def w():
            pass
        functools.update_wrapper(w, print, updated=('__globals__',))
    """, 'TypeError: update_wrapper() in the sandbox copies the default attributes only; leave assigned and updated out'),
    attack('update-wrapper-foreign-dict', 'pyjail: update_wrapper copies wrapped.__dict__', """
        import asyncio, functools
        class W:
            pass
        w = functools.update_wrapper(W(), asyncio.Queue())
        w._getters
    """, "AttributeError: 'W' object has no attribute '_getters'"),
    attack('singledispatch-string-annotation', 'pyjail: singledispatch evaluates string annotations', """
        import functools
        @functools.singledispatch
        def f(x):
            pass
        @f.register
        def _(x: "().__class__"):
            pass
    """, "TypeError: singledispatch register(): annotation '().__class__' is not a class; the sandbox does not evaluate string annotations: use @f.register(cls)"),
    attack('cached-property-attrname', 'corral: cached_property reads instance.__dict__[attrname]', """
        import asyncio, functools
        class Holder:
            _getters = functools.cached_property(lambda self: 0)
        asyncio.Queue.leak = Holder._getters
        asyncio.Queue().leak
    """, "TypeError: cached_property in the sandbox works on objects of the script's own classes, not 'Queue'"),
    attack('attrgetter-class', 'pyjail: operator.attrgetter', """
        import operator
        operator.attrgetter('__globals__')(1)
    """, "AttributeError: attrgetter('__globals__'): " + _DUNDER.format('__globals__') + '; ' + FUNC),
    attack('attrgetter-dotted', 'pyjail', """
        import operator
        operator.attrgetter('real.__globals__')(1)
    """, "AttributeError: attrgetter('real.__globals__'): " + _DUNDER.format('__globals__') + '; ' + FUNC),
    attack('attrgetter-private', 'RestrictedPython', """
        import asyncio, operator
        operator.attrgetter('_getters')(asyncio.Queue())
    """, private('_getters', 'Queue objects')),
    attack('attrgetter-sorted-key', 'pyjail', """
        import operator
        sorted([1, 2], key=operator.attrgetter('__globals__'))
    """, "AttributeError: attrgetter('__globals__'): " + _DUNDER.format('__globals__') + '; ' + FUNC),
    attack('methodcaller-reduce', 'pyjail', """
        import operator
        operator.methodcaller('__reduce_ex__', 2)(())
    """, "AttributeError: methodcaller('__reduce_ex__'): " + _DUNDER.format('__reduce_ex__') + '; ' + PICKLE),

    # ----- exceptions ------------------------------------------------------------------------------
    attack('exception-context-traceback', 'pyjail: exception chaining', """
        try:
            try:
                1 / 0
            except ZeroDivisionError:
                raise ValueError('x')
        except ValueError as e:
            e.__context__.__traceback__
    """, dunder('__traceback__', TB)),
    attack('exception-group-traceback', 'cpython 3.11 except*', """
        try:
            raise ExceptionGroup('g', [ValueError(1)])
        except* ValueError as group:
            group.exceptions[0].__traceback__
    """, dunder('__traceback__', TB)),

    # ----- the host-function boundary --------------------------------------------------------------
    attack('host-function-globals', 'smolagents: tools are functions of the host', """
        get_data.__globals__
    """, dunder('__globals__', FUNC), host=True),
    attack('host-function-globals-getattr', 'smolagents', """
        getattr(get_data, '__glo' + 'bals__')['os'].system('touch MARKER')
    """, dunder('__globals__', FUNC, syntax=False), host=True),
    attack('host-function-closure', 'corral: host functions close over the worker', """
        getattr(get_data, '__closure__')[0].cell_contents
    """, dunder('__closure__', FUNC, syntax=False), host=True),
    attack('host-function-code', 'corral', """
        get_data.__code__
    """, dunder('__code__', FUNC), host=True),
    attack('host-function-format', 'RestrictedPython CVE-2023-41039', """
        '{0.__globals__}'.format(get_data)
    """, 'AttributeError: str.format() field {0.__globals__}: ' + _DUNDER.format('__globals__') + '; ' + FUNC, host=True),
    attack('host-function-defaults', 'pyjail', """
        get_data.__kwdefaults__
    """, dunder('__kwdefaults__'), host=True),
    attack('host-result-is-data', 'corral: host results are plain data', """
        get_data().__class__.__subclasses__()
    """, dunder('__subclasses__', HIER), host=True),
    # ----- x.__dict__ and vars(x): a guarded copy of the script's own objects' attributes -----------------
    attack('dict-write-foreign-private', 'corral: __dict__ writes take the store rules', """
        import asyncio
        class Q(asyncio.Queue):
            pass
        Q().__dict__['_loop'] = None
    """, "AttributeError: attribute '_loop' is private: Q derives from Queue, a class the script did not define, so the "
         "sandbox refuses names starting with '_' on it; use the public API"),
    attack('dict-read-foreign-private', 'corral: __dict__ lists what getattr may read', """
        import asyncio
        class Q(asyncio.Queue):
            pass
        vars(Q())['_queue']
    """, "KeyError: '_queue'"),
    attack('dict-write-dunder', 'corral: __dict__.update cannot set what assignment cannot', """
        class A:
            pass
        A().__dict__.update({'__getattr__': lambda self, name: name})
    """, dunder('__getattr__', syntax=False, store=True)),
    attack('dict-of-class-through-getattr', 'corral: the __dict__ descriptor hands out real dicts', """
        class A:
            pass
        getattr(A, '__dict__')['__dict__']
    """, "KeyError: '__dict__'"),
    attack('dict-class-mark-in-init-subclass', 'corral: a class being made holds the sandbox mark', """
        class Base:
            def __init_subclass__(cls):
                Base.seen = dict(vars(cls))
        class C(Base):
            pass
        Base.seen['__corral_classmark__']
    """, "KeyError: '__corral_classmark__'"),
    attack('vars-of-module', 'pyjail: vars(module) walks a module', """
        import os
        vars(os)['_exit']
    """, 'TypeError: vars(): the __dict__ of module objects cannot be read in the sandbox: only objects and classes the '
         'script defines show theirs; read the attributes by name'),
    attack('vars-of-builtin-stand-in', 'corral: print is the worker\'s own function', """
        vars(print)
    """, 'TypeError: vars(): the __dict__ of builtin_function_or_method objects cannot be read in the sandbox: only '
         'objects and classes the script defines show theirs; read the attributes by name'),
    attack('dict-of-function', 'pyjail: a function\'s __dict__', """
        def f():
            pass
        f.__dict__
    """, 'AttributeError: the __dict__ of function objects cannot be read in the sandbox: only objects and classes the '
         'script defines show theirs; read the attributes by name'),
    attack('stand-in-made-by-the-script', 'corral: type(print) wraps a function of choice', """
        type(print)(len, len)
    """, "TypeError: cannot create 'builtin_function_or_method' instances"),
    attack('stand-in-private', 'corral: the C function behind a stand-in', """
        getattr(open, '_real')
    """, "AttributeError: attribute '_real' is private: the sandbox allows names starting with '_' only on objects of "
         "classes the script defines (builtin_function_or_method objects are not); use the public API"),
    attack('class-store', 'pyjail: __class__ assignment changes an object\'s type', """
        class A:
            pass
        a = A()
        a.__class__ = type(print)
    """, dunder('__class__', CLASS, store=True)),
    # ----- the sandbox's identity values (ids, identity hashes, default reprs from a counter) ------
    attack('identity-hash-globals', 'corral issue: object.__hash__ is the sandbox\'s own function', """
        object.__hash__.__globals__['_entries']
    """, dunder('__globals__', FUNC)),
    attack('identity-repr-closure-getattr', 'corral issue: identity functions', """
        getattr(type(lambda: 0).__repr__, '__clo' + 'sure__')
    """, dunder('__closure__', FUNC, syntax=False)),
    attack('identity-class-hash-code', 'corral issue: identity functions', """
        h = type.__hash__
        getattr(h, '__co' + 'de__')
    """, dunder('__code__', FUNC, syntax=False)),
    attack('identity-id-stand-in', 'corral issue: the sandbox id', """
        getattr(id, '_function')
    """, "AttributeError: attribute '_function' is private: the sandbox allows names starting with '_' only on objects of "
         "classes the script defines (builtin_function_or_method objects are not); use the public API"),
    attack('identity-hash-replaced', 'corral issue: a script swapping the identity hash for its own', """
        setattr(object, '__hash__', lambda self: 0)
    """, "AttributeError: attribute '__hash__' can be assigned in the sandbox only on the script's own classes (class object is not)"),
    attack('identity-method-hash-vars', 'corral issue: identity functions', """
        class A:
            def f(self):
                pass
        vars(type(A().f).__hash__)
    """, "TypeError: vars(): the __dict__ of function objects cannot be read in the sandbox: only objects and classes the script defines show theirs; read the attributes by name"),
    attack('identity-method-hash-on-a-liar', 'corral issue: an identity function handed an object that answers any attribute', """
        class A:
            def f(self):
                pass
            def __getattr__(self, name):
                return 1
        type(A().f).__hash__(A())
    """, "TypeError: descriptor '__hash__' requires a 'method' object but received a 'A'"),
    attack('identity-function-repr-on-another-type', 'corral issue: identity functions', """
        type(lambda: 0).__repr__(5)
    """, "TypeError: descriptor '__repr__' requires a 'function' object but received a 'int'"),
    attack('asyncio-run-nested', 'corral: asyncio.run away from the top level', """
        import asyncio
        async def g():
            return 1
        def f():
            return asyncio.run(g())
        f()
    """, 'RuntimeError: asyncio.run() cannot be called from a running event loop: the script already runs in an event '
         'loop: call asyncio.run(main()) at the top level of the script, where the sandbox awaits it on that loop, or '
         'await the coroutine (await main())'),
    # ----- dunders of the script's own objects: read and set on what the script made only ---------
    attack('object-setattr-module', 'corral issue: object.__setattr__ past a module facade', """
        import json
        object.__setattr__(json, 'dumps', lambda *a: open('MARKER', 'w'))
    """, SETTER.format('__setattr__', 'module objects are not')),
    attack('object-setattr-host-class', 'cpython: object.__setattr__ on a class of the host', """
        import json
        object.__setattr__(json.JSONDecoder, 'decode', lambda *a: open('MARKER', 'w'))
    """, SETTER.format('__setattr__', 'class JSONDecoder is not')),
    attack('object-setattr-builtin', 'cpython: object.__setattr__ on a builtin function', """
        object.__setattr__(len, 'x', 1)
    """, SETTER.format('__setattr__', 'builtin_function_or_method objects are not')),
    attack('object-delattr-module', 'corral issue: object.__delattr__ of a module facade', """
        import os
        object.__delattr__(os, 'getcwd')
    """, SETTER.format('__delattr__', 'module objects are not')),
    attack('object-setattr-class-store', 'pyjail: __class__ assignment through object.__setattr__', """
        class A:
            pass
        s = object.__setattr__
        s(A(), '__class__', type(print))
    """, dunder('__class__', CLASS, syntax=False, store=True)),
    attack('bound-setattr-dict-store', 'pyjail: an object\'s __dict__ replaced through its __setattr__', """
        class A:
            pass
        A().__setattr__('__dict__', {})
    """, dunder('__dict__', "only x.__dict__ or vars(x) reads it, on objects of the script's classes; read the attributes by name, or use dataclasses.asdict(x)", syntax=False, store=True)),
    attack('getattr-setattr-bound', 'corral red team: the real bound __setattr__ through getattr()', """
        class A:
            pass
        getattr(A(), '__set' + 'attr__')('__class__', type(print))
    """, dunder('__class__', CLASS, syntax=False, store=True)),
    attack('frozen-dataclass-setattr-from-vars', 'corral red team: a frozen dataclass\'s own __setattr__ calls object.__setattr__ for a subclass', """
        import dataclasses
        @dataclasses.dataclass(frozen=True)
        class P:
            x: int
        class Q(P):
            pass
        vars(P)['__setattr__'](Q(1), '__class__', type(print))
    """, "KeyError: '__setattr__'"),
    attack('format-setattr', 'RestrictedPython: format fields reach attributes', """
        class A:
            pass
        '{0.__setattr__}'.format(A())
    """, "AttributeError: str.format() field {0.__setattr__}: attribute '__setattr__' can be read in the sandbox only as x.__setattr__ or C.__setattr__, written out"),
    attack('type-setattr-getattribute', 'pyjail: a special method set on a class after its statement', """
        class A:
            pass
        type.__setattr__(A, '__getattribute__', lambda self, name: open('MARKER', 'w'))
        A().x
    """, dunder('__getattribute__', 'use getattr(obj, name)', syntax=False, store=True)),
    attack('class-store-method-on-host-class', 'corral issue: a class decorator\'s helper on a class of the host', """
        import json
        def __init__(self, *args, **kwargs):
            open('MARKER', 'w')
        json.JSONDecoder.__init__ = __init__
    """, "AttributeError: attribute '__init__' can be assigned in the sandbox only on the script's own classes (class JSONDecoder is not)"),
    attack('setattr-method-on-builtin-instance', 'corral issue: a method set on an object, not a class', """
        class A:
            pass
        def __repr__(self):
            return 'x'
        setattr(A(), '__repr__', __repr__)
    """, "AttributeError: attribute '__repr__' can be assigned in the sandbox only on the script's own classes (A objects are not)"),
    attack('late-getattr-answers-special-names', 'corral red team: a __getattr__ set after the class statement answers C code\'s special names', """
        import dataclasses
        class C:
            pass
        C.__getattr__ = lambda self, name: {'x': dataclasses.field()}
        dataclasses.fields(C())
    """, 'TypeError: must be called with a dataclass type or instance'),
    attack('annotations-of-host-class', 'corral issue: annotations of the host\'s classes name its internals', """
        import json
        json.JSONDecoder.__annotations__
    """, OWN.format('__annotations__', 'class JSONDecoder is not') + '; ' + ANNOTATIONS),
    attack('annotations-of-module', 'corral issue: a module\'s annotations', """
        import asyncio
        getattr(asyncio, '__annota' + 'tions__')
    """, OWN.format('__annotations__', 'module objects are not') + '; ' + ANNOTATIONS),
    attack('getnewargs-of-host-object', 'corral issue: __getnewargs__ of a foreign object', """
        (1).__getnewargs__()
    """, OWN.format('__getnewargs__', 'int objects are not')),
    attack('wrapped-of-stdlib-wrapper', 'pyjail: __wrapped__ of a wrapper the standard library made around a builtin', """
        import functools
        functools.singledispatch(len).__wrapped__
    """, OWN.format('__wrapped__', 'function objects are not') + '; ' + WRAPPED),
    attack('getnewargs-inherited-from-host-class', 'corral issue: a dunder found on a foreign base', """
        class I(int):
            pass
        I(1).__getnewargs__()
    """, OWN.format('__getnewargs__', 'I objects are not')),
    attack('own-dunder-class-pattern', 'pyjail: a class pattern reads attributes with no guard', """
        class A:
            x: int
        match A():
            case A(__annotations__=a):
                a
    """, "SyntaxError: class pattern keyword: attribute '__annotations__' cannot be read in the sandbox: names like __this__ "
         "are refused except a short list; only the script's own classes and functions show their annotations"),
    # ----- the standard library agents reach for: logging, warnings, types, string, shlex, email -----
    attack('logging-file-handler', 'corral issue: logging writes files through its own open()', """
        import logging
        logging.FileHandler('MARKER')
    """, 'AttributeError: ' + missing_member('logging', 'FileHandler', module_names('logging'))),
    attack('logging-basic-config-file', 'corral issue: basicConfig(filename=) opens a file', """
        import logging
        logging.basicConfig(filename='MARKER')
    """, "ValueError: basicConfig(filename=...) is not available in the sandbox: log to the script's stderr (the default), "
         'or to a stream: basicConfig(stream=buffer)'),
    attack('logging-brace-style-globals', 'RestrictedPython CVE-2023-41039: a format string walks attributes; logging\'s { style', """
        import logging
        f = logging.Formatter('{msg.__init__.__globals__}', style='{')
        f.format(logging.makeLogRecord({'msg': logging.Handler()}))
    """, "AttributeError: str.format() field {msg.__init__.__globals__}: attribute '__globals__' cannot be read in the "
         'sandbox: names like __this__ are refused except a short list; function internals are not available in the sandbox'),
    attack('logging-brace-style-real-class', 'corral red team: the real Formatter class reached through type()', """
        import logging
        handler = logging.StreamHandler()
        real = type(handler).mro()[1]
        real.__init__(handler, None)
        f = type(logging.Formatter())('{msg.__init__.__globals__}', style='{')
        f.format(logging.makeLogRecord({'msg': real()}))
    """, "AttributeError: str.format() field {msg.__init__.__globals__}: attribute '__globals__' cannot be read in the "
         'sandbox: names like __this__ are refused except a short list; function internals are not available in the sandbox'),
    attack('warnings-explicit-host-file', 'corral issue: warn_explicit names a host file whose line it reads', """
        import warnings
        warnings.warn_explicit('x', UserWarning, '/etc/passwd', 1)
    """, 'AttributeError: ' + missing_member('warnings', 'warn_explicit', module_names('warnings'))),
    attack('string-formatter-globals', 'RestrictedPython CVE-2023-41039: string.Formatter.get_field', """
        import string
        def f():
            pass
        string.Formatter().format('{0.__globals__}', f)
    """, "AttributeError: attribute '__globals__' cannot be read in the sandbox: names like __this__ are refused except a "
         'short list; function internals are not available in the sandbox'),
    attack('string-formatter-subclass-super', 'RestrictedPython: a subclass reaches the base get_field through super()', """
        import string
        class F(string.Formatter):
            def get_field(self, name, args, kwargs):
                return super().get_field(name, args, kwargs)
        def f():
            pass
        F().format('{0.__globals__}', f)
    """, "AttributeError: attribute '__globals__' cannot be read in the sandbox: names like __this__ are refused except a "
         'short list; function internals are not available in the sandbox'),
    attack('string-formatter-mro-base', 'corral red team: the real string.Formatter through the facade class\'s MRO', """
        import string
        bases = string.Formatter.mro()
        def f():
            pass
        bases[0]().format('{0.__globals__}', f)
    """, "AttributeError: attribute '__globals__' cannot be read in the sandbox: names like __this__ are refused except a "
         'short list; function internals are not available in the sandbox'),
    attack('types-code-type', 'pyjail: types.CodeType builds bytecode', """
        import types
        types.CodeType(0, 0, 0, 0, 0, 0, b'', (), (), (), '', '', '', 0, b'', b'')
    """, 'AttributeError: ' + missing_member('types', 'CodeType', module_names('types'))),
    attack('types-new-class-finalizer', 'pyjail: a class with a finalizer made by types.new_class', """
        import types
        X = types.new_class('X', (), {}, lambda ns: ns.update({'__del__': lambda self: open('MARKER', 'w')}))
    """, "TypeError: class X cannot define '__del__' in the sandbox; finalizers are not supported in the sandbox; use a with statement"),
    attack('shlex-source-file', 'cpython: shlex.shlex reads files named in its input (sourcehook)', """
        import shlex
        lexer = shlex.shlex('source MARKER', posix=True)
    """, 'AttributeError: ' + missing_member('shlex', 'shlex', module_names('shlex'))),
    attack('email-msgid-host-name', 'cpython: email.utils.make_msgid reads the host name', """
        import email.utils
        email.utils.make_msgid()
    """, 'AttributeError: ' + missing_member('email.utils', 'make_msgid', module_names('email.utils'))),
    attack('urllib-request', 'corral issue: urllib.parse is offered, urllib.request is not', """
        import urllib.request
    """, no_module('urllib.request')),
    attack('running-loop-private', 'corral issue: the loop behind asyncio.get_running_loop()', """
        import asyncio
        async def main():
            return getattr(asyncio.get_running_loop(), '_lo' + 'op').add_reader
        await main()
    """, "AttributeError: attribute '_loop' is private: the sandbox allows names starting with '_' only on objects of "
         'classes the script defines (_UnixSelectorEventLoop objects are not); use the public API'),
    attack('running-loop-executor', 'cpython: run_in_executor runs a function on a thread', """
        import asyncio
        async def main():
            await asyncio.get_running_loop().run_in_executor(None, open, 'MARKER', 'w')
        await main()
    """, 'RuntimeError: run_in_executor() is not available: threads are not available in the sandbox; await the work in a '
         'task (asyncio.create_task, asyncio.gather)'),
    attack('running-loop-reader', 'cpython: a loop watches file descriptors and signals', """
        import asyncio
        async def main():
            asyncio.get_running_loop().add_signal_handler(2, print)
        await main()
    """, "AttributeError: '_UnixSelectorEventLoop' object has no attribute 'add_signal_handler'"),
    attack('running-loop-handle-callback', 'corral red team: a timer handle holds its callback and the loop', """
        import asyncio
        async def main():
            handle = asyncio.get_running_loop().call_later(10, print)
            return handle._loop
        await main()
    """, "AttributeError: attribute '_loop' is private: the sandbox allows names starting with '_' only on objects of "
         'classes the script defines (TimerHandle objects are not); use the public API'),
    attack('type-hints-eval-call', 'pyjail: typing.get_type_hints evaluates annotation strings', """
        import typing
        class A:
            x: "open('MARKER', 'w')"
        typing.get_type_hints(A)
    """, 'TypeError: get_type_hints() in the sandbox evaluates annotations of names, attributes, subscripts, lists, '
         "tuples, constants and |, not \"open('MARKER', 'w')\""),
    attack('type-hints-eval-dunder-walk', 'pyjail: a subclass walk in an annotation string', """
        import typing
        def f(x: '().__class__.__base__.__subclasses__') -> None:
            pass
        typing.get_type_hints(f)
    """, dunder('__base__', MRO, syntax=False)),
    attack('type-hints-eval-builtins-name', 'pyjail: __builtins__ named in an annotation string', """
        import typing
        class A:
            x: '__builtins__'
        typing.get_type_hints(A)
    """, "NameError: name '__builtins__' is not available in the sandbox"),
    attack('type-hints-forward-ref-module', 'cpython: a ForwardRef names the module its names come from', """
        import typing
        class A:
            x: typing.ForwardRef('system', module='os')
        typing.get_type_hints(A)
    """, 'TypeError: get_type_hints() in the sandbox does not look names up in other modules (ForwardRef module=)'),
]
