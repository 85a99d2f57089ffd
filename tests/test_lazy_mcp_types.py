"""Idle cost: ``mcp_types`` (every pydantic model of the protocol, ~3.5 MB of idle RSS) loads
only where one of its models is used, never to build an app nor to serve a plain call.

The package keeps the protocol revisions in ``_wire/versions.py`` (``import mcp_types.version``
would run ``mcp_types/__init__``); they must stay ``mcp_types.version``'s.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import mcp_types.version as upstream
import pytest

from fastapi_mcp_ctx._wire import versions

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
    print(json.dumps([answers, built, sorted(m for m in sys.modules if m == "mcp_types" or m.startswith("mcp_types."))]))
    """
)


def test_building_an_app_and_serving_calls_does_not_import_mcp_types() -> None:
    out = subprocess.run([sys.executable, "-c", _CODE], capture_output=True, text=True, timeout=60, check=True)
    answers, built, loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert answers == [200, True, 200, True, 200, True], out.stdout
    assert built is False
    assert loaded == []


@pytest.mark.parametrize(
    "name", ["KNOWN_PROTOCOL_VERSIONS", "HANDSHAKE_PROTOCOL_VERSIONS", "MODERN_PROTOCOL_VERSIONS", "LATEST_HANDSHAKE_VERSION"]
)
def test_the_package_versions_are_mcp_types_versions(name: str) -> None:
    assert getattr(versions, name) == getattr(upstream, name)


def test_is_version_at_least_answers_as_mcp_types_does() -> None:
    for version in [*upstream.KNOWN_PROTOCOL_VERSIONS, "zzz", ""]:
        for minimum in upstream.KNOWN_PROTOCOL_VERSIONS:
            assert versions.is_version_at_least(version, minimum) is upstream.is_version_at_least(version, minimum)
    with pytest.raises(ValueError, match="minimum must be a known protocol version, got 'zzz'"):
        versions.is_version_at_least("2025-11-25", "zzz")
