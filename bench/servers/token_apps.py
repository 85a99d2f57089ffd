"""The two servers of ``bench/bench_tokens.py`` (run by uvicorn, one process each).

* ``project``: an ``McpRouter`` in ``MCP_AUTH_MODE=jwt`` (an HS256 development secret from
  ``BENCH_JWT_SECRET``, so no JWKS is needed: the refusal of a large token never reaches a key),
  stateless, one tool ``add``; every other setting at its default (``MCP_JWT_MAX_TOKEN_BYTES``
  16 KiB, ``MCP_MAX_REQUEST_HEADER_BYTES`` 32 KiB).
* ``bare``: the least an ASGI app can do with the same request: look the ``authorization`` header
  up in the ASGI scope and answer 401 with a short JSON body (the floor: what uvicorn spends
  receiving and parsing a 4 MB header, plus one response).
"""

from __future__ import annotations

import os
from typing import Any

from fastapi import FastAPI

from fastapi_mcp_ctx import McpRouter, McpSettings

_settings = McpSettings(
    auth_mode="jwt",
    jwt_secret=os.environ.get("BENCH_JWT_SECRET", "b" * 32),
    jwt_issuer="https://idp.example.test",
    resource_url="https://mcp.example.test/mcp",
    session_mode="stateless",
    log_level="error",
)
_router = McpRouter(settings=_settings)


@_router.tool()
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


project = FastAPI()
project.include_router(_router)

_REFUSED = b'{"error":"unauthorized"}'


async def bare(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body", False):
        pass
    authorization = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
    status = 401 if len(authorization) > 16 * 1024 or not authorization else 200
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(_REFUSED)).encode())]})  # fmt: skip
    await send({"type": "http.response.body", "body": _REFUSED})
