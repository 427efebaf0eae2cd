"""A front door for Monty's wire protocol (monty.v1, protocol versions 5 and 6).

The clients of Monty's protocol (`pydantic_monty.Monty` and `AsyncMonty`, whose pool runs
`$MONTY_BIN subprocess`) reach corral sessions through it, unchanged: `corral-monty subprocess`
serves one parent on stdin and stdout, checkout after checkout, each a fresh corral session in a
fresh worker of one pool the process keeps.

- `monty_v1.proto` / `monty_v1_pb2`: the schema, and protoc's module for it.
- `codec`: values as Monty's `Arena` of nodes, both ways.
- `turns`: the turn machine, Monty's requests answered by corral's `Pool` and `Session`.
- `names`: the names and modules a feed's text needs from the parent; `parent_os`: the script's
  files, environment and clock as the parent's `OsCall`s.
- `stdio`: the framed stdin/stdout transport; `cli`: the `corral-monty` command.
"""

from .stdio import serve_stdio
from .turns import PROTOCOL_VERSIONS, MontyChild

__all__ = ['MontyChild', 'PROTOCOL_VERSIONS', 'serve_stdio']
