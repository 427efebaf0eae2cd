"""The sandbox language: what a script may write and use. Runs in the worker only."""

from .compile import CompiledScript, compile_script
from .builtins import make_builtins, EXCEPTIONS

__all__ = ['CompiledScript', 'compile_script', 'make_builtins', 'EXCEPTIONS']
