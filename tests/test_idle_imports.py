"""Idle cost: an app serving plain calls in both eras loads none of the parts needed only on first use.

Idle RSS counts against bare FastAPI (issue 23: at most 1.15x), so what only some applications use
loads when they use it: the JWT verifier and its JWKS fetcher (with ``urllib.request``) in the
``jwt`` / ``oauth`` auth modes, ``mcp_types`` (every pydantic model of the protocol, the per-version
schemas of server->client requests among them) where one of its models is first used, pyjwt,
cryptography, the OpenTelemetry SDK and the Redis / SQL backends when configured; building the app
loads no ``mcp_types`` either. Run in a fresh interpreter, with raw ASGI calls (httpx itself imports
``urllib.request``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

FIRST_USE = (
    "fastapi_mcp_ctx._auth.bearer",
    "fastapi_mcp_ctx._auth.jwks",
    "urllib.request",
    "mcp_types",  # every pydantic model of the protocol (~3.5 MB): loaded where one of its models is used
    "jwt",
    "cryptography",
    "opentelemetry.sdk",
    "redis",
    "sqlalchemy",
    "asyncpg",
)

_CODE = textwrap.dedent(
    """
    import asyncio, json, sys
    from fastapi import Depends, FastAPI
    import fastapi_mcp_ctx
    from fastapi_mcp_ctx import Context, McpRouter, McpSettings, mcp_context

    router = McpRouter(settings=McpSettings(session_mode="stateless"))

    @router.tool()
    async def add(a: int, b: int, ctx: Context = Depends(mcp_context)) -> int:
        "Add."
        return a + b

    @router.tool()
    async def pair(a: int) -> dict[str, int]:
        "A structured result."
        return {"a": a}

    app = FastAPI()
    app.include_router(router)
    built = "mcp_types" in sys.modules
    META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}

    async def call(version, extra_headers, params):
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()
        headers = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                   (b"accept", b"application/json, text/event-stream"), (b"mcp-protocol-version", version), *extra_headers]
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
                 "path": "/mcp", "raw_path": b"/mcp", "query_string": b"", "root_path": "", "headers": headers,
                 "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80), "state": {}}
        sent = []

        async def receive():
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message):
            sent.append(message)

        await app(scope, receive, send)
        return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])

    async def main():
        add = {"name": "add", "arguments": {"a": 2, "b": 3}}
        pair = {"name": "pair", "arguments": {"a": 7}}
        legacy = await call(b"2025-11-25", [], add)
        modern = await call(b"2026-07-28", [(b"mcp-method", b"tools/call"), (b"mcp-name", b"add")], {**add, "_meta": META})
        structured = await call(b"2025-11-25", [], pair)
        return [legacy[0], b'"text":"5"' in legacy[1], modern[0], b'"text":"5"' in modern[1],
                structured[0], b'"structuredContent":{"a":7}' in structured[1]]

    answers = asyncio.run(main())
    prefixes = tuple(sys.argv[1:])
    print(json.dumps([answers, built, sorted(m for m in sys.modules if m.startswith(prefixes))]))
    """
)


def test_an_idle_app_serving_both_eras_loads_no_first_use_part() -> None:
    out = subprocess.run([sys.executable, "-c", _CODE, *FIRST_USE], capture_output=True, text=True, timeout=60, check=True)
    answers, built, loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert answers == [200, True, 200, True, 200, True], out.stdout
    assert built is False  # mcp_types not loaded by building the app either
    loaded = [m for m in loaded if m in FIRST_USE or m.startswith(tuple(p + "." for p in FIRST_USE))]
    assert loaded == [], loaded
