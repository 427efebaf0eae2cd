"""Code Mode for Pydantic AI: `from corral.pydantic_ai import CodeMode`.

Needs the `pydantic-ai` extra (`pip install -e '.[pydantic-ai]'` in corral's clone). See
`corral.integrations.pydantic_ai` for the implementation.
"""

from .integrations.pydantic_ai import CodeMode, CodeModeToolset

__all__ = ['CodeMode', 'CodeModeToolset']
