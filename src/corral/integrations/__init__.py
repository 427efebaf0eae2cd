"""How agent frameworks use corral: three doors onto one `run_code` tool.

- `corral.CodeTool` (`code_tool.py`): a `run_code` tool for any framework or model API.
- `corral.pydantic_ai.CodeMode` (`pydantic_ai.py`): a Pydantic AI capability that moves an agent's
  tools behind `run_code`. Needs the `pydantic-ai` extra.
- `corral mcp` (`mcp.py`): an MCP server offering `run_code`. Needs the `mcp` extra.

Only this package's framework-neutral parts are imported here; the optional frameworks are imported
by their own modules.
"""

from .code_tool import CodeTool
from .stubs import stubs_from_functions

__all__ = ['CodeTool', 'stubs_from_functions']
