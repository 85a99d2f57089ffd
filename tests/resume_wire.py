"""Raw-wire helpers of the resumability and shutdown tests: 2025 sessions at a chosen version,
POST calls and GET streams observed while open (``conftest.asgi_exchange``), SSE event lists."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from conftest import ACCEPT_BOTH, LEGACY, AsgiExchange, Wire, asgi_exchange, open_client, rpc, sse_events

ID_SHAPE = r"[0-9a-f]{16}:[0-9]+"


async def new_session(app: Any, version: str = LEGACY, headers: dict[str, str] | None = None) -> str:
    """A fresh 2025 session at ``version``; returns its id."""
    async with open_client(app) as client:
        return await Wire(client).initialize(version, headers=headers)


def call_body(name: str, arguments: dict[str, Any] | None = None, request_id: Any = 1, token: Any = "tok") -> bytes:
    """A ``tools/call`` body (``token`` None: no progress token)."""
    params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return json.dumps(rpc("tools/call", params, request_id)).encode()


def legacy_headers(session_id: str | None, version: str = LEGACY, accept: str = ACCEPT_BOTH, **extra: str) -> dict[str, str]:
    """The headers of a 2025 POST on ``session_id``."""
    headers = {"content-type": "application/json", "accept": accept, "mcp-protocol-version": version, **extra}
    if session_id is not None:
        headers["mcp-session-id"] = session_id
    return headers


@asynccontextmanager
async def post_call(
    app: Any,
    session_id: str | None,
    name: str,
    arguments: dict[str, Any] | None = None,
    *,
    request_id: Any = 1,
    token: Any = "tok",
    version: str = LEGACY,
    accept: str = ACCEPT_BOTH,
    headers: dict[str, str] | None = None,
    wait_started: bool = False,
) -> AsyncIterator[AsgiExchange]:
    """A 2025 ``tools/call`` POST whose response is observed while it runs."""
    merged = {**legacy_headers(session_id, version, accept), **(headers or {})}
    body = call_body(name, arguments, request_id, token)
    async with asgi_exchange(app, "POST", headers=merged, body_chunks=[body], wait_started=wait_started) as exchange:
        yield exchange


@asynccontextmanager
async def get_stream(
    app: Any, session_id: str, last_event_id: str | None = None, *, version: str = LEGACY, headers: dict[str, str] | None = None
) -> AsyncIterator[AsgiExchange]:
    """A 2025 GET (the session's stream, or a resume from ``last_event_id``)."""
    merged = {"accept": "text/event-stream", "mcp-session-id": session_id, "mcp-protocol-version": version, **(headers or {})}
    if last_event_id is not None:
        merged["last-event-id"] = last_event_id
    async with asgi_exchange(app, "GET", headers=merged) as exchange:
        yield exchange


def events(exchange: AsgiExchange) -> list[dict[str, Any]]:
    """The SSE events so far (``retry``-only blocks included, comments not)."""
    return sse_events(exchange.body.decode())


def messages(exchange: AsgiExchange) -> list[dict[str, Any]]:
    """The JSON-RPC messages so far."""
    return [json.loads(e["data"]) for e in events(exchange) if e.get("data")]


def ids(exchange: AsgiExchange) -> list[str]:
    """The event ids so far, in order."""
    return [e["id"] for e in events(exchange) if "id" in e]


def id_of(exchange: AsgiExchange, predicate: Any) -> str:
    """The id of the first event whose message satisfies ``predicate``."""
    for event in events(exchange):
        if event.get("data") and predicate(json.loads(event["data"])):
            return event["id"]
    raise AssertionError(f"no such event in {exchange.body!r}")


def answered(request_id: Any) -> Any:
    """Predicate: the exchange carries the response to ``request_id``."""
    return lambda exchange: any(m.get("id") == request_id and ("result" in m or "error" in m) for m in messages(exchange))


def count(n: int) -> Any:
    """Predicate: at least ``n`` JSON-RPC messages arrived."""
    return lambda exchange: len(messages(exchange)) >= n


def log_texts(exchange: AsgiExchange) -> list[Any]:
    """The text of every ``notifications/message`` so far (``ctx.log``'s message, or the raw ``data``)."""
    texts: list[Any] = []
    for message in messages(exchange):
        if message.get("method") == "notifications/message":
            data = message["params"]["data"]
            texts.append(data.get("message") if isinstance(data, dict) else data)
    return texts
