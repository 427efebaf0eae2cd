"""The sandbox's standard library, as stubs for ty: generated from the facades, once per process.

ty checks a script against a typeshed folder (`--typeshed`): its own vendored typeshed, copied
out of the ty binary, where

- the stub of every sandbox module (`catalog.STDLIB_MODULES`) keeps only the names its facade
  offers (`modules.module_names`), so `os.system` or `from json import decoder` is ty's own
  "has no member" diagnostic;
- `builtins.pyi` drops the builtins the sandbox does not have (`eval`, `exec`, `input` ...).

Removed statements become blank lines, so every line keeps its number (diagnostics that point
into `stdlib/builtins.pyi:4201` still do). A star import (`from .tasks import *`) becomes an
explicit import of the allowed names; a facade name the stub does not declare for this Python on
Linux (there should be none; the tests check) gets an `Any` declaration at the end. Imports of
modules the sandbox does not have are reported by the checker itself (see `_checker.py`), with
ty's diagnostic format: ty must still resolve them for the stubs that use them.
"""

from __future__ import annotations

import ast
import importlib
import os
import shutil
import sys
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterable

from ..language import catalog
from ..language.builtins import UNAVAILABLE_BUILTINS
from ..language.modules import module_names
from ._typeshed import VendoredTypeshed

__all__ = ['SandboxTypeshed', 'sandbox_typeshed', 'stub_path']

_VERSION = sys.version_info[:2]  # the workers run this interpreter
_PLATFORM = 'linux'

#: Builtins the stubs need for themselves even though a script cannot use them.
_STRUCTURAL_BUILTINS = frozenset({'function', 'ellipsis', 'memoryview', 'reveal_type', 'reveal_locals'})


def stub_path(module: str, exists: Callable[[str], bool]) -> str | None:
    """`stdlib/a/b.pyi` or `stdlib/a/b/__init__.pyi` for module `a.b`, whichever exists."""
    base = 'stdlib/' + module.replace('.', '/')
    for candidate in (base + '.pyi', base + '/__init__.pyi'):
        if exists(candidate):
            return candidate
    return None


class SandboxTypeshed:
    """A typeshed folder on disk: ty's vendored stubs with the sandbox's standard library."""

    def __init__(self, ty_bin: str) -> None:
        self.root = tempfile.mkdtemp(prefix='corral-typeshed-')
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.root, True)
        #: Facade names with no declaration in the stub, per module (added as `Any`).
        self.undeclared: dict[str, list[str]] = {}
        self._build(VendoredTypeshed(ty_bin))

    @property
    def stdlib(self) -> str:
        return os.path.join(self.root, 'stdlib')

    def read(self, relative: str) -> str | None:
        """The text of `stdlib/...` in this folder, or None."""
        try:
            with open(os.path.join(self.root, relative), encoding='utf-8') as f:
                return f.read()
        except OSError:
            return None

    def _build(self, vendored: VendoredTypeshed) -> None:
        archive = vendored._open()
        if archive is None:
            raise RuntimeError("could not read the typeshed stubs inside ty's binary")
        texts: dict[str, str] = {}
        for info in archive.infolist():
            if info.is_dir() or not info.filename.startswith('stdlib/'):
                continue
            text = vendored.read(info.filename)
            if text is not None:
                texts[info.filename] = text
        exists = texts.__contains__
        for module in catalog.STDLIB_MODULES:
            path = stub_path(module, exists)
            if path is None:
                raise RuntimeError(f'ty has no stub for the sandbox module {module!r}')
            allowed = frozenset(module_names(module))
            real = importlib.import_module(module)
            removed = frozenset(name for name in dir(real) if not name.startswith('_')) - allowed
            package = module if path.endswith('/__init__.pyi') else module.rpartition('.')[0]
            stub = _StubFilter(texts[path], removed, allowed, package, lambda name: _star_exports(name, texts))
            texts[path] = stub.text()
            if stub.undeclared:
                self.undeclared[module] = stub.undeclared
        texts['stdlib/builtins.pyi'] = _filter_builtins(texts['stdlib/builtins.pyi'])
        for relative, text in texts.items():
            full = os.path.join(self.root, relative)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, 'w', encoding='utf-8', newline='') as f:
                f.write(text)


_built: dict[str, SandboxTypeshed] = {}
_lock = threading.Lock()


def sandbox_typeshed(ty_bin: str) -> SandboxTypeshed:
    """The sandbox typeshed for this ty binary, built on first use (a fraction of a second)."""
    with _lock:
        typeshed = _built.get(ty_bin)
        if typeshed is None or not os.path.isdir(typeshed.root):
            typeshed = _built[ty_bin] = SandboxTypeshed(ty_bin)
        return typeshed


# ----- conditions in stubs ---------------------------------------------------------------------------

def _condition(node: ast.expr) -> bool | None:
    """The value of a stub's `if` test for this Python on Linux, or None when unknown."""
    if isinstance(node, ast.BoolOp):
        values = [_condition(v) for v in node.values]
        if isinstance(node.op, ast.And):
            if any(v is False for v in values):
                return False
            return True if all(v is True for v in values) else None
        if any(v is True for v in values):
            return True
        return False if all(v is False for v in values) else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        value = _condition(node.operand)
        return None if value is None else not value
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, op, right = node.left, node.ops[0], node.comparators[0]
        subject = _sys_attribute(left)
        if subject == 'version_info' and isinstance(right, ast.Tuple):
            try:
                version = tuple(ast.literal_eval(right))
            except ValueError:
                return None
            here = _VERSION[: len(version)]
            return _compare(here, op, version)
        if subject == 'platform' and isinstance(right, ast.Constant) and isinstance(right.value, str):
            return _compare(_PLATFORM, op, right.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == 'startswith':
        if _sys_attribute(node.func.value) == 'platform' and len(node.args) == 1 and isinstance(node.args[0], ast.Constant):
            return _PLATFORM.startswith(node.args[0].value)
    return None


def _sys_attribute(node: ast.expr) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == 'sys':
        return node.attr
    return None


def _compare(left: object, op: ast.cmpop, right: object) -> bool | None:
    try:
        if isinstance(op, ast.GtE):
            return left >= right  # type: ignore[operator]
        if isinstance(op, ast.Gt):
            return left > right  # type: ignore[operator]
        if isinstance(op, ast.Lt):
            return left < right  # type: ignore[operator]
        if isinstance(op, ast.LtE):
            return left <= right  # type: ignore[operator]
        if isinstance(op, ast.Eq):
            return left == right
        if isinstance(op, ast.NotEq):
            return left != right
    except TypeError:
        return None
    return None


# ----- star imports ------------------------------------------------------------------------------------

_star_cache: dict[tuple[str, int], frozenset[str]] = {}


def _star_exports(module: str, texts: dict[str, str]) -> frozenset[str]:
    """Names `from module import *` binds (an over-approximation: every `__all__` entry of any branch)."""
    key = (module, id(texts))
    cached = _star_cache.get(key)
    if cached is not None:
        return cached
    path = stub_path(module, texts.__contains__)
    names: set[str] = set()
    if path is not None:
        tree = ast.parse(texts[path])
        declared_all = False
        for node in ast.walk(tree):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            if any(isinstance(t, ast.Name) and t.id == '__all__' for t in targets):
                declared_all = True
                value = node.value
                if isinstance(value, (ast.List, ast.Tuple)):
                    names.update(e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str))
        if not declared_all:
            names = {name for name in _top_level_names(tree.body) if not name.startswith('_')}
    result = frozenset(names)
    _star_cache[key] = result
    return result


def _top_level_names(body: Iterable[ast.stmt], *, all_imports: bool = False) -> set[str]:
    """Names a stub's top level defines; imports count only as re-exports (`import a as a`)
    unless `all_imports`."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if all_imports:
                names.update(a.asname or a.name.partition('.')[0] for a in node.names)
            else:
                names.update(a.asname for a in node.names if a.asname is not None and a.asname == a.name.rpartition('.')[2])
        elif isinstance(node, ast.If):
            names |= _top_level_names(node.body, all_imports=all_imports) | _top_level_names(node.orelse, all_imports=all_imports)
    return names


# ----- filtering a module's stub -----------------------------------------------------------------------

class _StubFilter:
    """Blank out the statements of a stub that define names the facade does not offer.

    `removed`: the names CPython's module has and the facade does not (typeshed's own helpers,
    such as `typing.type_check_only`, stay: other stubs need them). `allowed`: the facade's names.
    """

    def __init__(self, source: str, removed: frozenset[str], allowed: frozenset[str], package: str, star_exports: Callable[[str], frozenset[str]], *, absolute_imports: bool = True) -> None:
        self._lines = source.splitlines(keepends=True)
        self._original = list(self._lines)
        self._removed = removed
        self._allowed = allowed
        self._package = package
        # `from .decoder import X` in a package's stub makes ty see `json.decoder`, a submodule the
        # sandbox does not offer: relative imports become absolute ones
        self._absolute = absolute_imports
        self._star_exports = star_exports
        self._declared: set[str] = set()
        self._submodules: set[str] = set()  # submodules this package's stub imports from
        tree = ast.parse(source)
        self._exported_all = _all_entries(tree)
        self._body(tree.body, active=True)
        self.undeclared = sorted(name for name in allowed - self._declared if not _is_sandbox_module(f'{package}.{name}'))
        # importing from a submodule makes ty see it as an attribute of the package (`json.decoder`):
        # unbind those the sandbox does not offer
        self._unbind = sorted(name for name in self._submodules if name not in allowed and not name.startswith('_'))

    def text(self) -> str:
        text = ''.join(self._lines)
        if not text.endswith('\n'):
            text += '\n'
        if self._unbind:
            text += f'\n# submodules the sandbox does not offer\ndel {", ".join(self._unbind)}\n'
        if self.undeclared:
            text += f'\n# names the sandbox offers that this stub does not declare for Python {_VERSION[0]}.{_VERSION[1]} on Linux\n'
            text += 'from typing import Any as _CorralAny\n'
            for name in self.undeclared:
                text += f'{name}: _CorralAny\n'
        return text

    def _keeps(self, name: str) -> bool:
        if name == '__getattr__':  # an "incomplete stub" hook would accept every name
            return False
        return name not in self._removed

    def _replace(self, node: ast.stmt, text: str | None) -> None:
        """Replace the lines of `node` (decorators included) by `text` on its first line, blanks after."""
        first = min([node.lineno, *(d.lineno for d in getattr(node, 'decorator_list', []))])
        last = node.end_lineno or node.lineno
        original = self._original[first - 1]
        indent = original[: len(original) - len(original.lstrip())]
        for number in range(first, last + 1):
            self._lines[number - 1] = '\n'
        if text is not None:
            self._lines[first - 1] = indent + text + '\n'

    def _body(self, body: list[ast.stmt], *, active: bool) -> None:
        kept = [self._statement(node, active=active) for node in body]
        if body and not any(kept):
            self._replace(body[0], 'pass')

    def _statement(self, node: ast.stmt, *, active: bool) -> bool:
        """Filter one statement; False when it was removed."""
        if isinstance(node, ast.If):
            value = _condition(node.test)
            self._body(node.body, active=active and value is not False)
            if node.orelse:
                self._body(node.orelse, active=active and value is not True)
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return self._named(node, node.name, active)
        if isinstance(node, ast.AnnAssign):
            if isinstance(node.target, ast.Name):
                return self._named(node, node.target.id, active)
            return True
        if isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            if '__all__' in names:
                return self._all(node, node.value)
            if names and not any(self._keeps(name) for name in names):
                self._replace(node, None)
                return False
            if active:
                self._declared.update(names)
            return True
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == '__all__':
            return self._all(node, node.value, augmented=True)
        if isinstance(node, ast.ImportFrom):
            return self._import_from(node, active)
        if isinstance(node, ast.Import):
            aliases = [a for a in node.names if not (a.asname is not None and a.asname == a.name and not self._keeps(a.asname))]
            if len(aliases) != len(node.names):
                if not aliases:
                    self._replace(node, None)
                    return False
                self._replace(node, 'import ' + ', '.join(f'{a.name} as {a.asname}' if a.asname else a.name for a in aliases))
            if active:
                self._declared.update(a.asname for a in aliases if a.asname and (a.asname == a.name or a.asname in self._exported_all))
            return True
        return True

    def _named(self, node: ast.stmt, name: str, active: bool) -> bool:
        if not self._keeps(name):
            self._replace(node, None)
            return False
        if active:
            self._declared.add(name)
        return True

    def _all(self, node: ast.stmt, value: ast.expr, augmented: bool = False) -> bool:
        if not isinstance(value, (ast.List, ast.Tuple)):
            return True
        entries = [e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        kept = [entry for entry in entries if self._keeps(entry)]
        if len(kept) == len(entries):
            return True
        if augmented and not kept:
            self._replace(node, None)
            return False
        self._replace(node, f'__all__ {"+=" if augmented else "="} [{", ".join(map(repr, kept))}]')
        return True

    def _import_from(self, node: ast.ImportFrom, active: bool) -> bool:
        source = self._resolve(node)
        if self._package and self._absolute:
            if source.startswith(self._package + '.'):
                self._submodules.add(source[len(self._package) + 1 :].partition('.')[0])
            elif source == self._package:
                self._submodules.update(a.name for a in node.names if a.name != '*')
        if any(a.name == '*' for a in node.names):
            names = sorted(name for name in self._star_exports(source) if self._keeps(name))
            if not names:
                self._replace(node, None)
                return False
            origin = source if node.level and node.module and self._absolute else f'{"." * node.level}{node.module or ""}'
            self._replace(node, f'from {origin} import {", ".join(f"{n} as {n}" for n in names)}')
            if active:
                self._declared.update(names)
            return True
        aliases = [
            a for a in node.names
            if not (a.asname is not None and a.asname == a.name and not self._keeps(a.asname))
            and a.asname != '__all__'
        ]
        relative_module = node.level and node.module and self._absolute
        if len(aliases) != len(node.names) or relative_module:
            if not aliases:
                self._replace(node, None)
                return False
            parts = [f'{a.name} as {a.asname}' if a.asname else a.name for a in aliases]
            origin = source if relative_module else f'{"." * node.level}{node.module or ""}'
            self._replace(node, f'from {origin} import {", ".join(parts)}')
        if active:
            for alias in aliases:
                bound = alias.asname or alias.name
                if alias.asname == alias.name or bound in self._exported_all:
                    self._declared.add(bound)
        return True

    def _resolve(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ''
        base = self._package.split('.') if self._package else []
        if node.level > 1:
            base = base[: len(base) - (node.level - 1)]
        return '.'.join([*base, *([node.module] if node.module else [])])


def _all_entries(tree: ast.Module) -> frozenset[str]:
    """Every name any `__all__` assignment of a stub lists (any branch)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets: list[ast.expr] = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == '__all__' for t in targets) and isinstance(node.value, (ast.List, ast.Tuple)):
            names.update(e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str))
    return frozenset(names)


def _is_sandbox_module(name: str) -> bool:
    return name in catalog.STDLIB_MODULES


def _filter_builtins(source: str) -> str:
    """builtins.pyi without the builtins a script cannot use (same line numbers)."""
    refused = frozenset((set(UNAVAILABLE_BUILTINS) | {'copyright', 'credits', 'license'}) - _STRUCTURAL_BUILTINS)
    tree = ast.parse(source)
    allowed = frozenset(_top_level_names(tree.body, all_imports=True) - refused)
    stub = _StubFilter(source, refused, allowed, 'builtins', lambda name: frozenset(), absolute_imports=False)
    stub.undeclared = []
    return stub.text()
