"""Helpers of the server→client request tests: an app whose tool ``ask`` sends one request to
the client, and a raw ASGI call whose SSE response is read while it streams (the client's
answer goes on another HTTP request meanwhile).

``RAISED`` collects what ``ctx.send_request`` raised in ``ask`` (the tests clear it).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from conftest import ACCEPT_BOTH, LEGACY, AsgiExchange, Wire, asgi_exchange, make_app, make_router, open_client, rpc, sse_events
from fastapi import Depends, FastAPI

from fastapi_mcp_ctx import Context, McpRouter, mcp_context

RAISED: list[BaseException] = []


def build(**overrides: Any) -> tuple[FastAPI, McpRouter]:
    """An app (settings ``overrides``) with the tool ``ask(method, params, timeout)``."""
    router = make_router(**overrides)

    @router.tool()
    async def ask(
        method: str, params: dict[str, Any] | None = None, timeout: float | None = None, ctx: Context = Depends(mcp_context)
    ) -> dict[str, Any]:
        """Send one request to the client; return its result."""
        try:
            return {"answer": await ctx.send_request(method, params, timeout=timeout)}
        except Exception as exc:
            RAISED.append(exc)
            raise

    return make_app(router), router


@asynccontextmanager
async def in_session(app: FastAPI, capabilities: dict[str, Any] | None = None, **kwargs: Any) -> AsyncIterator[tuple[Wire, str]]:
    """A raw client on ``app`` and a fresh 2025 session (``initialize`` with ``capabilities``)."""
    async with open_client(app) as client:
        wire = Wire(client)
        yield wire, await wire.initialize(capabilities=capabilities, **kwargs)


def frames(exchange: AsgiExchange) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an SSE response so far."""
    return [json.loads(e["data"]) for e in sse_events(exchange.body.decode()) if e.get("data")]


async def wait_frames(exchange: AsgiExchange, count: int, timeout: float = 3.0) -> list[dict[str, Any]]:
    """The messages once at least ``count`` arrived (fails after ``timeout`` seconds)."""
    await exchange.wait_for(lambda ex: len(frames(ex)) >= count, timeout)
    return frames(exchange)


async def finished(exchange: AsgiExchange) -> None:
    """Wait for the end of the response."""
    await exchange.wait_for(lambda ex: ex.done.is_set())


@asynccontextmanager
async def calling(
    app: FastAPI,
    session: str | None,
    arguments: dict[str, Any],
    *,
    tool: str = "ask",
    request_id: Any = 7,
    accept: str = ACCEPT_BOTH,
) -> AsyncIterator[AsgiExchange]:
    """``tools/call`` of ``tool`` on a raw ASGI exchange whose response is read as it streams."""
    body = json.dumps(rpc("tools/call", {"name": tool, "arguments": arguments}, request_id)).encode()
    headers = {"content-type": "application/json", "accept": accept, "mcp-protocol-version": LEGACY}
    if session is not None:
        headers["mcp-session-id"] = session
    async with asgi_exchange(app, "POST", headers=headers, body_chunks=[body]) as exchange:
        yield exchange


async def answer(wire: Wire, message: dict[str, Any], session: str | None = None) -> None:
    """POST a JSON-RPC response from the client (default: in ``wire.session``): 202, no body."""
    response = await wire.post({"jsonrpc": "2.0", **message}, wire.legacy_headers(session if session is not None else ...))
    assert response.status_code == 202 and response.content == b"", response.text
