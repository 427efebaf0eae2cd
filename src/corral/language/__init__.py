"""The sandbox language: what a script may write and use. Runs in the worker only.

Layers, in the order a feed meets them: `validate` (refuse constructs, with a SyntaxError a model
can act on), `rewrite` (route private attributes, `str.format`, handlers, `with` and class patterns
through guards), `builtins` (an allow-list with guarded reflection), `modules` (standard library
facades). `SandboxStop` is how the worker stops a script; scripts cannot catch it.
"""

from .builtins import EXCEPTIONS, SAFE_BUILTINS, make_builtins
from .compile import CompiledScript, compile_script
from .modules import import_module, stdlib_module
from .stop import SandboxStop, find_stop, is_stop

__all__ = [
    'EXCEPTIONS',
    'SAFE_BUILTINS',
    'CompiledScript',
    'SandboxStop',
    'compile_script',
    'find_stop',
    'import_module',
    'is_stop',
    'make_builtins',
    'stdlib_module',
]
