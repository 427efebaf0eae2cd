"""Host functions for the MCP server tests (`corral mcp --functions tests/integrations/mcp_functions.py`)."""

import asyncio


async def get_order(order_id: str) -> dict:
    """Return one order, with its `status` and number of `items`."""
    await asyncio.sleep(0)
    return {'id': order_id, 'status': 'shipped', 'items': 3}


def add(a: int, b: int = 2) -> int:
    """Add two numbers."""
    return a + b


def _private() -> None:
    """Not offered to scripts."""
