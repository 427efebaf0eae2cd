"""The sandbox language: what a script may write and use. Runs in the worker (the host reads
`catalog` and builds facades only to list their names: the type checker and the docs).

Layers, in the order a feed meets them: `validate` (refuse constructs, with a SyntaxError a model
can act on), `rewrite` (route private attributes, `str.format`, the clock methods, handlers, `with`
and class patterns through guards), `builtins` (an allow-list with guarded reflection), `modules`
and `facades` (standard library facades), `hostio` (files, environment, clock and seed, through
the host). `catalog` is the one list of what a script may import, and the words of every refusal
of a module or a name, shared with the type checker and `reference` (the docs page).
`SandboxStop` is how the worker stops a script; scripts cannot catch it.

Imports go one way, each module importing only from the groups before its own (checked by
`tests/test_imports.py`): `rules`, `catalog`, `walk`, `stop`, `identity`, `native`, `strformat`;
then `validate`, `rewrite`, `hostio`, `preload`; `compile`, `facades`; `guards`; `copying`,
`packages`, `builtins`; `modules`; `reference`, `rebuild`. A lower module that needs a higher one's work takes
it as an argument (`strformat.safe_format`'s `refusal`, `catalog.missing_member`'s `available`).
"""

from .builtins import EXCEPTIONS, SAFE_BUILTINS, STDLIB_EXCEPTIONS, make_builtins
from .compile import CompiledScript, compile_script, compile_unguarded
from .modules import import_module, stdlib_module
from .stop import SandboxStop, find_stop, is_stop

__all__ = [
    'EXCEPTIONS',
    'STDLIB_EXCEPTIONS',
    'SAFE_BUILTINS',
    'CompiledScript',
    'SandboxStop',
    'compile_script',
    'compile_unguarded',
    'find_stop',
    'import_module',
    'is_stop',
    'make_builtins',
    'stdlib_module',
]
