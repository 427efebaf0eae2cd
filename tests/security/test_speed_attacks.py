"""Attacks on the worker's type tests by identity: a script's class whose metaclass says it equals
a built-in type (`__eq__` always True, `__hash__` the type's own) is taken for none of them, so its
objects keep sandbox identities and cross as the script's objects, and none of its code runs
while they are packed."""

from __future__ import annotations

import corral

META = '''
class Meta(type):
    def __eq__(cls, other):
        return True
    def __hash__(cls):
        return hash(TARGET)
'''


async def run(code: str, target: str = 'int', **lookup):
    calls, printed = [], []

    def record(*args, **kwargs):
        calls.append((args, kwargs))
        return len(calls)

    async with corral.Pool() as pool, pool.checkout(type_check=False) as session:
        value = await session.feed_run(
            f'TARGET = {target}\n{META}{code}', external_lookup={'f': record, **lookup}, print_callback=lambda stream, text: printed.append(text)
        )
    return value, calls, printed


async def test_an_object_whose_class_says_it_is_a_generator_type_shows_no_address():
    """Taken for a generator, its identity would be CPython's: a heap address in its repr and hash,
    other on every run (and replay). It keeps the sandbox's."""
    code = (
        'class Code:\n    co_filename = "elsewhere"\n'
        'class C(metaclass=Meta):\n    ag_code = Code()\n    gi_code = Code()\n    cr_code = Code()\n'
        'c = C()\n[repr(c), hash(c) - hash(object()), repr(C())]'
    )
    for _ in range(2):
        value, _, _ = await run(code, 'type((lambda: (yield))())')
        assert value == ['<__main__.C object at 0x7f0000000020>', -1, '<__main__.C object at 0x7f0000000040>']


async def test_objects_whose_class_says_it_is_a_boundary_type_cross_as_the_scripts_objects():
    """A subclass of int whose metaclass says it equals any type crosses as its int (not as the repr
    a type alias takes); a class named str, one that says it is a dict view, and one that says it
    is an iterator cross as the script's objects, and their `__iter__` and `__repr__` never run."""
    code = (
        'class Num(int, metaclass=Meta):\n    pass\n'
        'class str(metaclass=Meta):\n    pass\n'
        'class View(metaclass=Meta):\n'
        '    def __iter__(self):\n        print("iterated")\n        return iter([1])\n'
        '    def __repr__(self):\n        print("shown")\n        return "view"\n'
        'n = Num(5)\n'
        'def gen():\n    yield 1\n'
        '[f(n, [n, [n]], {"k": n}), f(str()), f(View()), f(gen(), View()), View()]'
    )
    for target in ('int', 'type({}.keys())', 'map'):
        value, calls, printed = await run(code, target)
        view = corral.InstanceValue(type_name='View', module='__main__', attrs={}, is_dataclass=False)
        assert value == [1, 2, 3, 4, view]
        assert calls == [
            ((5, [5, [5]], {'k': 5}), {}),
            ((corral.InstanceValue(type_name='str', module='__main__', attrs={}, is_dataclass=False),), {}),
            ((view,), {}),
            (([1], view), {}),
        ]
        assert [type(item) for item in calls[0][0]] == [int, list, dict]
        assert printed == []
