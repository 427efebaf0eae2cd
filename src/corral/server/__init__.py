"""`corral serve` and its client: sandboxes on a server, host functions in the caller.

- `protocol`: the frames a session's WebSocket carries (both sides).
- `client`: `RemotePool` and `RemoteSession` (needs `websockets`; re-exported from `corral`).
- `app`: the Starlette app (`create_app`, `CorralServer`: admission, drain, lifespan); `hooks`: its hooks for
  authentication, quotas and metrics; `ceilings`: the operator's ceilings on sessions' limits.
- `connection`: one client's connection and its session (frames, the writer, requests, feeds), with
  `opening` (OPEN's options, mounts), `calls` (host calls sent to the client) and `ending` (how it ends).
- `serve`: the `corral serve` command (uvicorn).
- `keys`, `quotas`, `admin`: API keys and tenants, tenant quotas, and `corral keys` / `corral tenants`.
"""
