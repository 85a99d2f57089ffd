"""Raw Streamable HTTP over real sockets for the replica tests: 2025 sessions, POST calls and
GET streams read event by event while they are open (httpx streaming), 2026 requests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import httpx

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
ACCEPT = "application/json, text/event-stream"
SUB = "io.modelcontextprotocol/subscriptionId"


def legacy_headers(session: str | None = None, **extra: str) -> dict[str, str]:
    headers = {"content-type": "application/json", "accept": ACCEPT, "mcp-protocol-version": LEGACY, **extra}
    if session is not None:
        headers["mcp-session-id"] = session
    return headers


def modern_headers(method: str, name: str | None = None) -> dict[str, str]:
    headers = {"content-type": "application/json", "accept": ACCEPT, "mcp-protocol-version": MODERN, "mcp-method": method}
    if name is not None:
        headers["mcp-name"] = name
    return headers


def modern_meta() -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "replica-tests", "version": "1"},
    }


def call(name: str, arguments: dict[str, Any] | None = None, request_id: Any = 1, token: Any = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


async def initialize(http: httpx.AsyncClient, url: str, capabilities: dict[str, Any] | None = None) -> str:
    """A 2025-11-25 session through ``url`` (initialize + notifications/initialized); its id."""
    body = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": capabilities or {}, "clientInfo": {"name": "replica-tests", "version": "1"}},
    }
    response = await http.post(url, json=body, headers=legacy_headers())
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    done = await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=legacy_headers(session))
    assert done.status_code == 202, done.text
    return session


async def result_of(response: httpx.Response) -> dict[str, Any]:
    """The final JSON-RPC message of a JSON or SSE answer."""
    if response.headers["content-type"].startswith("application/json"):
        return response.json()
    events = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()]
    return events[-1]


async def call_tool(http: httpx.AsyncClient, url: str, session: str, name: str, arguments: dict[str, Any] | None = None) -> Any:
    """``tools/call`` in ``session`` at ``url``; the ``structuredContent`` (asserts no error),
    unwrapped when the tool returns a plain value (``{"result": value}``)."""
    response = await http.post(url, json=call(name, arguments, request_id=name), headers=legacy_headers(session))
    assert response.status_code == 200, (response.status_code, response.text)
    message = await result_of(response)
    assert "result" in message and not message["result"].get("isError"), message
    structured = message["result"]["structuredContent"]
    return structured["result"] if set(structured) == {"result"} else structured


@dataclass
class Event:
    """One SSE event: ``id`` (None without one), ``data`` (decoded JSON, None when empty)."""

    id: str | None
    data: Any


class SseStream:
    """An open SSE response read one event at a time."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines = response.aiter_lines()
        self.seen: list[Event] = []

    @property
    def status(self) -> int:
        return self.response.status_code

    @property
    def headers(self) -> httpx.Headers:
        return self.response.headers

    async def next(self, timeout: float = 5.0) -> Event | None:
        """The next event, or None when the server closed the stream. Raises TimeoutError."""
        event_id: str | None = None
        data: list[str] = []
        with anyio.fail_after(timeout):
            async for line in self._lines:
                if line == "":
                    if event_id is None and not data:
                        continue
                    text = "\n".join(data)
                    event = Event(event_id, json.loads(text) if text.strip() else None)
                    self.seen.append(event)
                    return event
                if line.startswith(":"):
                    continue
                field, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if field == "id":
                    event_id = value
                elif field == "data":
                    data.append(value)
        return None

    async def message(self, timeout: float = 5.0) -> tuple[str | None, dict[str, Any]]:
        """The next event carrying a JSON-RPC message (priming events are skipped): (id, message)."""
        while True:
            event = await self.next(timeout)
            assert event is not None, f"the stream ended; seen: {self.seen}"
            if event.data is not None:
                return event.id, event.data

    async def drain(self, seconds: float) -> list[dict[str, Any]]:
        """Every message arriving within ``seconds`` (a stream end stops early)."""
        found: list[dict[str, Any]] = []
        with anyio.move_on_after(seconds):
            while (event := await self.next(seconds + 1)) is not None:
                if event.data is not None:
                    found.append(event.data)
        return found


@asynccontextmanager
async def stream(
    http: httpx.AsyncClient, method: str, url: str, headers: dict[str, str], body: Any = None
) -> AsyncIterator[SseStream]:
    """Send a request and yield its response as an :class:`SseStream` while it is open."""
    kwargs: dict[str, Any] = {"headers": headers}
    if body is not None:
        kwargs["json"] = body
    async with http.stream(method, url, **kwargs) as response:
        yield SseStream(response)
