"""What the checker adds to ty's diagnostics so they say what the sandbox says at run time.

- ty's `import-not-found` for a module nobody has gets, instead of its list of search paths, the
  sandbox's own words: `info: No module named 'requests': ... A script may import: abc, ...`
  (`catalog.missing_module`, the text of the `ModuleNotFoundError` the script would get).
- ty resolves every module of its typeshed (the sandbox's stubs import some of them), so an
  import of a standard library module the sandbox does not offer (`import subprocess`) gets an
  `import-not-found` diagnostic made here, in ty's format, with the same `info:` line.
- "Module `os` has no member `system`" gets `info: module 'os' has no attribute 'system' in the
  sandbox: ...` (`catalog.missing_member`, the text of the `AttributeError`).
- "Name `eval` used when not defined" gets the text of the sandbox's `NameError` for it.
- "Expected `Order`, found `dict[...]`" where `Order` is a `TypedDict` of the stubs gets how to
  pass a dict built before the call (`typed_dict_hint`): PEP 589 has a type checker take a dict
  bound to a plain variable as a `dict`, whatever its keys.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection

from ..language import catalog
from ..language.builtins import UNAVAILABLE_BUILTINS
from ..language.modules import module_names
from . import _render
from ._syntax import Syntax, parse

__all__ = ['annotate', 'unresolved_imports', 'typed_dicts', 'typed_dict_hint']

_IMPORT_RE = re.compile(r'^error\[import-not-found\]: Cannot resolve imported module `([^`]+)`$')
_MEMBER_RE = re.compile(r'^error\[(?:unresolved-attribute|import-not-found|possibly-missing-attribute)\]: Module `([^`]+)` has no member `([^`]+)`$')
_NAME_RE = re.compile(r'^error\[unresolved-reference\]: Name `([^`]+)` used when not defined$')
_SUBMODULE_RE = re.compile(r'^warning\[possibly-missing-submodule\]: Submodule `([^`]+)` might not have been imported$')
_DOTTED_RE = re.compile(r'[A-Za-z_][A-Za-z0-9_]*(?:\s*\.\s*[A-Za-z_][A-Za-z0-9_]*)*')
_SEARCH_INFO = ('info: Searched in the following paths', 'info:   ', 'info: make sure your Python environment')


def _package_modules(packages: Collection[str]) -> frozenset[str]:
    return frozenset(module for package in packages for module in catalog.PACKAGE_MODULES[package])


def allowed_module(name: str, host_modules: Collection[str], packages: Collection[str] = ()) -> bool:
    """Whether a script may import `name`: a sandbox module, a module of the pool's packages, a
    host module, or a package of one."""
    if name in catalog.STDLIB_MODULES or name in host_modules or name in _package_modules(packages):
        return True
    return any(host.startswith(name + '.') for host in host_modules)


def annotate(diag: _render.Diagnostic, host_modules: Collection[str], code_lines: list[str] | None = None, script_name: str = '', packages: Collection[str] = ()) -> None:
    """Replace or add the `info:` lines of one diagnostic with the sandbox's words (in place)."""
    header = diag.header
    match = _SUBMODULE_RE.match(header)
    primary = diag.primary
    if match and code_lines is not None and primary is not None and primary.path == script_name and 0 < primary.line <= len(code_lines):
        # `json.decoder`: the dotted name at the diagnostic names the module
        text = code_lines[primary.line - 1]
        dotted = _DOTTED_RE.match(text, _byte_to_char(text, primary.col - 1))
        parts = [part.strip() for part in dotted.group(0).split('.')] if dotted else []
        name = match.group(1)
        if name in parts and parts.index(name) > 0:
            module = '.'.join(parts[: parts.index(name)])
            if module in catalog.STDLIB_MODULES:
                diag.blocks.append(_render.Block(title=[f'info: {catalog.missing_member(module, name, module_names(module))}']))
        return
    match = _IMPORT_RE.match(header)
    if match:
        name = match.group(1)
        diag.blocks = [block for block in diag.blocks if not block.title[0].startswith(_SEARCH_INFO)]
        diag.blocks.append(_render.Block(title=[f'info: {catalog.missing_module(name, host_modules, packages)}']))
        return
    match = _MEMBER_RE.match(header)
    if match:
        module, name = match.groups()
        if module in catalog.STDLIB_MODULES or module in _package_modules(packages):
            diag.blocks.append(_render.Block(title=[f'info: {catalog.missing_member(module, name, module_names(module))}']))
        return
    match = _NAME_RE.match(header)
    if match and match.group(1) in UNAVAILABLE_BUILTINS:
        name = match.group(1)
        diag.blocks.append(_render.Block(title=[f'info: {name}() is not available in the sandbox; {UNAVAILABLE_BUILTINS[name]}']))


_EXPECTED_TYPED_DICT_RE = re.compile(r'Expected `([A-Za-z_][A-Za-z0-9_]*)`, found `dict\[')


def typed_dicts(stubs: Collection[str]) -> frozenset[str]:
    """The names of the classes the stub texts define as `TypedDict`s (`class Order(TypedDict):`)."""
    names = set()
    for text in stubs:  # the host's own, and short: read here
        tree = parse(text)
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.ClassDef) and any(
                (isinstance(base, ast.Name) and base.id == 'TypedDict') or (isinstance(base, ast.Attribute) and base.attr == 'TypedDict')
                for base in node.bases
            ):
                names.add(node.name)
    return frozenset(names)


def typed_dict_hint(diag: _render.Diagnostic, names: Collection[str]) -> None:
    """Add to an `invalid-argument-type` diagnostic that expected one of the `TypedDict`s `names`
    and found a `dict` how a script passes one (in place)."""
    if not names or not diag.header.startswith('error[invalid-argument-type]'):
        return
    for line in diag.raw:
        match = _EXPECTED_TYPED_DICT_RE.search(line)
        if match and match.group(1) in names:
            name = match.group(1)
            diag.blocks.append(_render.Block(title=[
                f'info: `{name}` is a TypedDict: a dict bound to a variable before the call is a plain `dict` to the '
                f'checker; annotate the variable (`x: {name} = {{...}}`) or write the dict in the call'
            ]))
            return


def unresolved_imports(
    code: str,
    syntax: Syntax | None,
    script_name: str,
    host_modules: Collection[str],
    reported: Collection[tuple[int, int]],
    packages: Collection[str] = (),
) -> list[_render.Diagnostic]:
    """ty-format `import-not-found` diagnostics for the imports of the script `code` (whose syntax
    is `syntax`) of modules (and submodules, `from json import decoder`) the sandbox does not
    offer and ty resolved anyway (ty's own diagnostics are at `reported` positions), and
    `unresolved-attribute` ones for the names a package's facade leaves out (`np.load`, `from
    pandas import read_pickle`), which the package's own types have."""
    if syntax is None or not syntax.imports:
        return []
    lines: list[str] | None = None  # split when needed: 3 ms for 120 KB
    found: list[tuple[int, int, str, str | None]] = []
    offered = _package_modules(packages)
    aliases: dict[str, str] = {}  # a name the script binds to a package module -> the module
    for is_from, line, column, module, level, names in syntax.imports:
        if not is_from:
            for alias_line, alias_column, name, asname in names:
                if not allowed_module(name, host_modules, packages):
                    found.append((alias_line, alias_column, name, None))
                elif name in offered:
                    aliases[asname or name.partition('.')[0]] = name if asname else name.partition('.')[0]
        elif module in offered:
            withheld = catalog.WITHHELD_PACKAGE_NAMES.get(module, frozenset())
            for alias_line, alias_column, name, asname in names:
                if name in withheld:
                    found.append((alias_line, alias_column, name, module))
                elif f'{module}.{name}' in offered:
                    aliases[asname or name] = f'{module}.{name}'
        elif not level and module and module != '__future__':
            if not allowed_module(module, host_modules, packages):
                lines = _render.split_lines(code) if lines is None else lines
                position = _module_position(lines, line, column)
                if position is not None:
                    found.append((*position, module, None))
            elif module in catalog.STDLIB_MODULES and module not in host_modules:
                # `from json import decoder`: ty accepts a submodule the facade does not offer
                facade = set(module_names(module))
                for alias_line, alias_column, name, _ in names:
                    if name != '*' and name not in facade:
                        found.append((alias_line, alias_column, name, module))
    members: list[tuple[int, int, str, str]] = []
    for base, attribute, end_line, end_column in syntax.members if aliases else ():
        if base in aliases and attribute in catalog.WITHHELD_PACKAGE_NAMES.get(aliases[base], frozenset()):
            members.append((end_line, end_column, attribute, aliases[base]))
    if not found and not members:
        return []
    lines = _render.split_lines(code) if lines is None else lines
    diagnostics = []
    for lineno, byte_col, name, module in sorted(found, key=lambda item: item[:2]):
        text = lines[lineno - 1] if 0 < lineno <= len(lines) else ''
        col = len(text.encode('utf-8')[:byte_col].decode('utf-8', errors='ignore'))
        if (lineno, col + 1) in reported:
            continue
        diagnostics.append(_diagnostic(script_name, lineno, col, name, text, host_modules, module, packages))
    for lineno, byte_end, name, module in members:
        text = lines[lineno - 1] if 0 < lineno <= len(lines) else ''
        col = len(text.encode('utf-8')[:byte_end].decode('utf-8', errors='ignore')) - len(name)
        diagnostics.append(_diagnostic(script_name, lineno, col, name, text, host_modules, module, packages, attribute=True))
    return sorted(diagnostics, key=lambda diag: (diag.primary.line, diag.primary.col) if diag.primary else (0, 0))


def _byte_to_char(text: str, col: int) -> int:
    """ty's columns count characters (1-based); this is the 0-based character index."""
    return max(0, min(col, len(text)))


def _module_position(lines: list[str], line: int, column: int) -> tuple[int, int] | None:
    """Line and byte column of the module name in `from module import ...` at `line`, `column`."""
    text = lines[line - 1] if 0 < line <= len(lines) else ''
    data = text.encode('utf-8')
    match = re.compile(rb'from\s+').match(data, column)
    if match is None:
        return None
    return line, match.end()


def _diagnostic(
    script_name: str, lineno: int, col: int, name: str, text: str, host_modules: Collection[str], module: str | None = None,
    packages: Collection[str] = (), *, attribute: bool = False,
) -> _render.Diagnostic:
    shown = _render.normalize_line(text)
    caret_col = len(_render.normalize_line(text[:col]))
    width = len(str(lineno))
    gutter = ' ' * (width + 1) + '|'
    if module is not None:
        rule = 'unresolved-attribute' if attribute else 'import-not-found'
        header = f'error[{rule}]: Module `{module}` has no member `{name}`'
        info = catalog.missing_member(module, name, module_names(module))
    else:
        header = f'error[import-not-found]: Cannot resolve imported module `{name}`'
        info = catalog.missing_module(name, host_modules, packages)
    raw = '\n'.join([
        header,
        f'{" " * width}--> {script_name}:{lineno}:{col + 1}',
        gutter,
        f'{lineno} |{" " + shown if shown else ""}',
        f'{gutter} {" " * caret_col}{"^" * len(name)}',
        f'info: {info}',
    ])
    return _render.parse_output(raw)[0]
