"""`corral serve` and its client: sandboxes on a server, host functions in the caller.

- `protocol`: the frames a session's WebSocket carries (both sides).
- `client`: `RemotePool` and `RemoteSession` (needs `websockets`; re-exported from `corral`).
- `app`: the Starlette app (`create_app`), its hooks for authentication, quotas and metrics.
- `serve`: the `corral serve` command (uvicorn).
"""
