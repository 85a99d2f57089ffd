"""A served call leaves no reference cycles behind: the garbage collector has nothing to find.

Cycles per request make the cyclic GC run its full (generation 2) pass often, and on an app
holding the MCP type models that pass stalls every in-flight request for tens of
milliseconds (it showed as the p99 of the benchmark). Held for both tool kinds, and for the
benchmark's d tool (an async yield dependency, a ``Header``, the Context).
"""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
from conftest import add_lookup_tool, make_app, make_router, modern_meta
from fastapi import Depends, Request

from fastapi_mcp_ctx import Context, mcp_context
from fastapi_mcp_ctx.errors import NoBackChannelError


def _db() -> Iterator[str]:
    yield "db"


async def _session() -> AsyncIterator[dict[str, str]]:
    yield {"k1": "v1"}


def _app() -> Any:
    router = make_router()

    @router.tool()
    async def plain(a: int) -> int:
        """No dependencies."""
        return a

    @router.tool()
    async def with_deps(a: int, request: Request, ctx: Context = Depends(mcp_context), db: str = Depends(_db)) -> str:
        """Dependencies, a yield dependency and the Context."""
        await ctx.report_progress(1, 1)
        return f"{db}:{a}:{request.method}"

    @router.tool()
    async def asks(a: int, ctx: Context = Depends(mcp_context)) -> str:
        """ctx.send_request refused at once (2026 era): the error path of a server→client request."""
        try:
            await ctx.send_request("ping")
        except NoBackChannelError as exc:
            return exc.detail
        return "sent"

    @router.tool()
    async def slow(a: int) -> int:
        """Outlives the 50–100 ms after which a task watches for the client's disconnect."""
        await asyncio.sleep(0.11)
        return a

    add_lookup_tool(router, _session)
    return make_app(router)


ARGUMENTS: dict[str, dict[str, Any]] = {"plain": {"a": 1}, "with_deps": {"a": 1}, "asks": {"a": 1}, "lookup": {"key": "k1"}, "slow": {"a": 1}}


async def _exchange(app: Any, message: dict[str, Any], headers: list[tuple[bytes, bytes]], *, stay: bool = False) -> dict[str, Any]:
    """One POST of ``message`` to ``app``; ``stay``: the client stays connected (uvicorn's receive
    blocks until it leaves). Checks a 200 (and a successful result for ``tools/call``); returns
    the response's start message."""
    body = json.dumps(message).encode()
    base = [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json"), (b"accept", b"application/json, text/event-stream")]
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": "/mcp", "raw_path": b"/mcp", "query_string": b"", "root_path": "", "headers": base + headers,
        "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8000), "app": app,
    }
    sent: list[dict[str, Any]] = []
    done = False

    async def receive() -> dict[str, Any]:
        nonlocal done
        if not done:
            done = True
            return {"type": "http.request", "body": body, "more_body": False}
        if stay:
            await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    assert sent[0]["status"] == 200
    if message["method"] == "tools/call":
        assert b'"isError":false' in b"".join(m.get("body", b"") for m in sent[1:])
    return sent[0]


async def _call(app: Any, tool: str) -> None:
    params = {"name": tool, "arguments": ARGUMENTS[tool], "_meta": modern_meta()}
    headers = [(b"mcp-protocol-version", b"2026-07-28"), (b"mcp-method", b"tools/call"), (b"mcp-name", tool.encode()), (b"x-tenant", b"acme")]
    await _exchange(app, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, headers, stay=tool == "slow")


async def _cyclic_garbage(calls: int, call: Callable[[], Awaitable[object]]) -> list[str]:
    """Type names of the cyclic garbage ``calls`` runs of ``call`` leave behind."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(calls):
            await call()
        gc.collect()
        return [type(o).__name__ for o in gc.garbage]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


@pytest.mark.parametrize("tool", ["plain", "with_deps", "asks", "lookup", "slow"])
async def test_a_call_leaves_no_cyclic_garbage(tool: str) -> None:
    app = _app()
    for _ in range(20 if tool != "slow" else 3):  # warm caches
        await _call(app, tool)
    garbage = await _cyclic_garbage(50 if tool != "slow" else 10, lambda: _call(app, tool))
    assert garbage == [], sorted(set(garbage))


async def _legacy_call(app: Any, tool: str, session_id: str | None = None, method: str = "tools/call") -> dict[str, Any]:
    """One 2025-11-25 request (the benchmark's d shape: ``X-Tenant``, JSON and SSE accepted),
    in ``session_id`` when given; returns the response's start message."""
    params: dict[str, Any] = {"name": tool, "arguments": ARGUMENTS[tool]} if method == "tools/call" else {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "gc", "version": "1"}}  # fmt: skip
    headers = [(b"mcp-protocol-version", b"2025-11-25"), (b"x-tenant", b"acme")]
    if session_id is not None:
        headers.append((b"mcp-session-id", session_id.encode()))
    return await _exchange(app, {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, headers)


@pytest.mark.parametrize("mode", ["stateless", "session"])
async def test_a_2025_yield_and_header_dependency_call_leaves_no_cyclic_garbage(mode: str) -> None:
    """The benchmark's d call (yield dependency, ``Header``, the Context) in the 2025 era, without
    a session (workload d) and inside one (the resumable session response of workload s)."""
    router = make_router(session_mode="stateful" if mode == "session" else "stateless")
    add_lookup_tool(router, _session)
    app = make_app(router)
    session_id: str | None = None
    if mode == "session":
        start = await _legacy_call(app, "lookup", method="initialize")
        session_id = dict(start["headers"])[b"mcp-session-id"].decode()
    for _ in range(20):  # warm caches
        await _legacy_call(app, "lookup", session_id)
    garbage = await _cyclic_garbage(50, lambda: _legacy_call(app, "lookup", session_id))
    assert garbage == [], sorted(set(garbage))
