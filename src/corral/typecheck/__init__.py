"""Type checking of model-written scripts with ty (Astral's checker).

``TypeChecker.check`` runs ty 0.0.99 on a script, with the host functions'
stubs usable without import, module stubs importable by name, and the session's
earlier snippets as context, and returns ty's full diagnostic text rendered with
two lines of source context (see ``_render``), or None when the script is clean.
"""

from ._checker import TypeChecker
from ._formats import DIAGNOSTIC_FORMATS, DiagnosticRecord, diagnostic_records, format_diagnostics
from ._ran import failing_line

__all__ = ['DIAGNOSTIC_FORMATS', 'DiagnosticRecord', 'TypeChecker', 'diagnostic_records', 'failing_line', 'format_diagnostics']
