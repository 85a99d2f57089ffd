"""The ceiling: one bare FastAPI ``POST /mcp`` route that does the JSON-RPC work and nothing else.

It parses the request body (stdlib ``json``), dispatches on ``method`` and answers with the same
bytes as the project (``examples/bench_app.py``): the ``tools/call`` results in its key order,
its SSE framing for ``countdown``, and for ``tools/list`` the project's own result object,
captured in-process before the run (``bench.harness.capture``, the file named by
``BENCH_TOOLS_LIST``) and encoded once at start-up, as a hand-written endpoint would cache static
data. No MCP header checks, no validation: the floor any MCP server stands above.

Workload d runs in its own process (``BENCH_EXTRA_TOOLS=1``), where the route declares what
``lookup`` declares in the project: ``db = Depends(get_db)`` (the yield dependency, torn down by
FastAPI) and ``x_tenant: str = Header()``. ``initialize`` gets a fixed result and an
``Mcp-Session-Id`` (never checked afterwards), notifications get 202.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Depends, FastAPI, Header, Request, Response
from fastapi.responses import StreamingResponse

from bench.servers.tools import DB, EXTRA_TOOLS, NOTE_TEXT, get_db

PV_KEY = "io.modelcontextprotocol/protocolVersion"
SERVER_INFO = {"io.modelcontextprotocol/serverInfo": {"name": "bench", "version": "0.1.0"}}
SESSION_ID = secrets.token_hex(16)
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode

with open(os.environ["BENCH_TOOLS_LIST"], "rb") as _f:
    _LISTS: dict[str, Any] = json.load(_f)  # protocol version -> the project's tools/list result
LIST_BYTES = {era: _dumps(result).encode() for era, result in _LISTS.items()}


def _modern(params: dict[str, Any]) -> bool:
    return PV_KEY in (params.get("_meta") or {})


def tool_result(structured: dict[str, Any], text: str, modern: bool) -> dict[str, Any]:
    """A ``CallToolResult`` as the project writes it: one text block, ``structuredContent``, ``isError``."""
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "structuredContent": structured, "isError": False}
    if modern:
        result["resultType"] = "complete"
        result["_meta"] = SERVER_INFO
    return result


def envelope(request_id: Any, result: dict[str, Any]) -> bytes:
    return _dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()


def sse_frame(message: dict[str, Any]) -> bytes:
    return b"event: message\r\ndata: " + _dumps(message).encode() + b"\r\n\r\n"


async def countdown_stream(request_id: Any, params: dict[str, Any]) -> AsyncIterator[bytes]:
    n = params["arguments"]["n"]
    token = (params.get("_meta") or {}).get("progressToken")
    for i in range(1, n + 1):
        if token is not None:
            note = {"progressToken": token, "progress": i, "total": n}
            yield sse_frame({"jsonrpc": "2.0", "method": "notifications/progress", "params": note})
    result = tool_result({"done": n}, _dumps({"done": n}), _modern(params))
    yield sse_frame({"jsonrpc": "2.0", "id": request_id, "result": result})


def _json(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(content=body, status_code=status, headers=headers, media_type="application/json")


async def answer(body: bytes, db: dict[str, str], tenant: str | None) -> Response:
    """The JSON-RPC work of every workload; ``db``/``tenant`` are what ``lookup`` needs."""
    try:
        msg = json.loads(body)
        method, rid, params = msg["method"], msg.get("id"), msg.get("params") or {}
    except (ValueError, KeyError, TypeError):
        return _json(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}', 400)
    if method == "tools/call":
        name, args = params.get("name"), params.get("arguments") or {}
        if name == "add":
            total = args["a"] + args["b"]
            return _json(envelope(rid, tool_result({"result": total}, str(total), _modern(params))))
        if name == "lookup":
            found = {"value": db[args["key"]], "tenant": tenant or ""}
            return _json(envelope(rid, tool_result(found, _dumps(found), _modern(params))))
        if name == "countdown":
            return StreamingResponse(countdown_stream(rid, params), media_type="text/event-stream")
    elif method == "resources/read":  # workloads r, rm: the project's ReadResourceResult, built per request
        result = {"contents": [{"uri": params["uri"], "mimeType": "text/plain", "text": NOTE_TEXT}]}
        if _modern(params):
            result.update({"resultType": "complete", "ttlMs": 0, "cacheScope": "private", "_meta": SERVER_INFO})
        return _json(envelope(rid, result))
    elif method == "prompts/get":  # workloads g, gm: the project's GetPromptResult
        text = f"Hello, {(params.get('arguments') or {})['who']}!"
        result = {"messages": [{"role": "user", "content": {"type": "text", "text": text}}], "description": "Greet someone (workloads g, gm: prompts/get)."}
        if _modern(params):
            result.update({"resultType": "complete", "_meta": SERVER_INFO})
        return _json(envelope(rid, result))
    elif method == "tools/list":
        era = "2026-07-28" if _modern(params) else "2025-11-25"
        return _json(b'{"jsonrpc":"2.0","id":' + _dumps(rid).encode() + b',"result":' + LIST_BYTES[era] + b"}")
    elif method == "initialize":
        result = {
            "protocolVersion": params.get("protocolVersion") or "2025-11-25",
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": SERVER_INFO["io.modelcontextprotocol/serverInfo"],
        }
        return _json(envelope(rid, result), headers={"mcp-session-id": SESSION_ID})
    elif "id" not in msg:
        return Response(status_code=202)
    return _json(_dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}}).encode(), 404)


async def mcp(request: Request) -> Response:
    """Every workload but d: no dependencies on the route."""
    return await answer(await request.body(), DB, request.headers.get("x-tenant"))


async def mcp_with_dependencies(request: Request, db: dict[str, str] = Depends(get_db), x_tenant: str = Header()) -> Response:
    """Workload d: ``lookup``'s dependencies solved by FastAPI on the route."""
    return await answer(await request.body(), db, x_tenant)


app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
app.add_api_route("/mcp", mcp_with_dependencies if EXTRA_TOOLS else mcp, methods=["POST"])
