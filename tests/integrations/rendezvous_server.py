"""An upstream MCP server that serves only once another has started too: `rendezvous_server.py NAME
FOLDER OTHER` writes FOLDER/NAME, then waits (a minute at the most) for FOLDER/OTHER. Two of them
behind one `corral mcp` both serve only when corral starts them at the same time."""

import sys
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer

name, folder, other = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
(folder / name).write_text('started')
deadline = time.monotonic() + 60
while not (folder / other).exists():
    if time.monotonic() > deadline:
        sys.exit(f'{other} never started: the upstream servers were started one after the other')
    time.sleep(0.05)

server = MCPServer(name)


@server.tool(name=f'{name}_name')
def own_name() -> str:
    """This server's name."""
    return name


if __name__ == '__main__':
    server.run()
