"""Shared helpers of the protocol suite: apps, raw wire clients, SSE parsing, result checks.

Every raw wire test talks to an in-process ASGI app through
``httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")``:
the loopback host matters, DNS-rebinding protection switches on when the ASGI scope's
``server`` is a loopback address.

A test module defines an ``app`` fixture (usually built with :func:`make_app` and
:func:`mcp_settings`); the ``client`` and ``wire`` fixtures here use it.

:class:`Wire` knows both eras:

- ``await wire.initialize()`` → a fresh 2025 session id (``wire.session`` keeps the last one);
- ``await wire.legacy("tools/list")`` → a POST with ``Mcp-Session-Id`` and
  ``MCP-Protocol-Version: 2025-11-25``;
- ``await wire.modern("tools/call", {"name": "add", ...})`` → a POST with every 2026-07-28
  header (``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``) and a full ``_meta`` envelope.

Every successful ``result`` the helpers see is validated against the official wire
models (``mcp_types.methods.serialize_server_result``): 2026-07-28 for modern requests,
2025-11-25 for legacy ones; legacy results must not carry 2026-only members.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from fastapi import Depends, FastAPI, Header
from mcp_types.methods import serialize_server_result

from fastapi_mcp_ctx import Context, McpRouter, McpSettings, mcp_context

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
ACCEPT_BOTH = "application/json, text/event-stream"
BASE_URL = "http://127.0.0.1"

META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"

NAME_MEMBER = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
MODERN_ONLY_RESULT_KEYS = ("resultType", "ttlMs", "cacheScope")
TEST_REQUEST_STATE_KEY = "dGVzdC1vbmx5LXJlcXVlc3Qtc3RhdGUta2V5LTMyYnk"  # 32 bytes, base64url; tests only


# -- settings and apps --------------------------------------------------------------------


def mcp_settings(**overrides: Any) -> McpSettings:
    """``McpSettings`` with every field that shapes the wire given explicitly (no env leak)."""
    values: dict[str, Any] = {
        "server_name": "test-server",
        "server_version": "1.2.3",
        "instructions": None,
        "path": "/mcp",
        "max_body_bytes": 1024 * 1024,
        "body_timeout_seconds": 10.0,
        "page_size": 100,
        "session_mode": "stateful",
        "session_idle_seconds": 1800.0,
        "max_sessions": 10_000,
        "allowed_hosts": None,
        "allowed_origins": None,
        "dns_rebinding_protection": None,
        "storage_url": "memory://",
        "storage_create_tables": False,
        "auth_mode": "none",
        "request_state_key": TEST_REQUEST_STATE_KEY,  # routers on Redis/PostgreSQL refuse to start without one
        "log_level": "debug",
        "cache_ttl_ms": 0,
        "cache_scope": "private",
        "expose_stateless_session_id": False,
        "server_request_timeout_seconds": 60.0,
        "http_resumability": True,
        "event_retention_count": 1000,
        "event_retention_seconds": 300.0,
        "sse_retry_ms": 1000,
        "shutdown_grace_seconds": 3.0,
        "shutdown_signals": True,
        "max_client_metadata_bytes": 64 * 1024,
        "max_sessions_per_owner": None,
        "listen_max_streams_per_owner": None,
        "input_max_rounds": 10,
        "session_store_url": "memory://",
        "session_store_namespace": "mcp:",
        "session_lease_seconds": 10.0,
        "max_batch_size": 100,
    }
    values.update(overrides)
    return McpSettings(**values)


def make_router(**overrides: Any) -> McpRouter:
    """A fresh ``McpRouter`` with explicit settings (``overrides`` go to :func:`mcp_settings`)."""
    return McpRouter(settings=mcp_settings(**overrides))


def make_app(*routers: McpRouter, **kwargs: Any) -> FastAPI:
    """A FastAPI app including ``routers``."""
    app = FastAPI(**kwargs)
    for router in routers:
        app.include_router(router)
    return app


def add_lookup_tool(router: McpRouter, get_db: Callable[[], AsyncIterator[dict[str, str]]]) -> None:
    """Register the shared benchmark's d tool: ``lookup(key)`` with the yield dependency
    ``get_db``, the ``X-Tenant`` header and the Context; returns ``{"value", "tenant"}``."""

    async def lookup(
        key: str,
        db: dict[str, str] = Depends(get_db),
        x_tenant: str = Header(),
        ctx: Context = Depends(mcp_context),
    ) -> dict[str, str]:
        """Look a key up in the tenant's store."""
        return {"value": db[key], "tenant": x_tenant}

    router.add_tool(lookup)


@asynccontextmanager
async def open_client(app: Any, **kwargs: Any) -> AsyncIterator[httpx.AsyncClient]:
    """An ``httpx.AsyncClient`` bound in process to ``app`` on ``http://127.0.0.1``."""
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url=kwargs.pop("base_url", BASE_URL), timeout=10.0, **kwargs
    ) as client:
        yield client


# -- wire parsing -------------------------------------------------------------------------


def sse_events(text: str) -> list[dict[str, Any]]:
    """Parse an SSE body into events: ``{"event": ..., "id": ..., "data": ...}`` (comments skipped)."""
    events: list[dict[str, Any]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        if not block.strip():
            continue
        event: dict[str, Any] = {}
        data_lines: list[str] = []
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "data":
                data_lines.append(value)
            else:
                event[field] = value
        if data_lines:
            event["data"] = "\n".join(data_lines)
        if event:
            events.append(event)
    return events


def messages_of(response: httpx.Response) -> list[dict[str, Any]]:
    """Every JSON-RPC message in ``response`` (one for JSON, each ``data`` frame for SSE)."""
    content_type = response.headers.get("content-type", "")
    if content_type.startswith("text/event-stream"):
        return [json.loads(e["data"]) for e in sse_events(response.text) if e.get("data")]
    if not response.content:
        return []
    return [response.json()]


def final_message(response: httpx.Response) -> dict[str, Any]:
    """The last JSON-RPC message of ``response`` (the response to the request)."""
    messages = messages_of(response)
    assert messages, f"no JSON-RPC message in the response (status {response.status_code}, body {response.text!r})"
    return messages[-1]


def result_of(response: httpx.Response) -> dict[str, Any]:
    """The ``result`` of a successful response (fails the test on an error)."""
    message = final_message(response)
    assert "error" not in message, f"unexpected JSON-RPC error: {message['error']!r} (HTTP {response.status_code})"
    assert "result" in message, message
    return message["result"]


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC ``error`` object of a response (fails the test when it succeeded)."""
    message = final_message(response)
    assert "error" in message, f"expected a JSON-RPC error, got {message!r} (HTTP {response.status_code})"
    assert message.get("jsonrpc") == "2.0"
    return message["error"]


def assert_error(
    response: httpx.Response, status: int, code: int, *, request_id: Any = ..., id_type: type | None = None
) -> dict[str, Any]:
    """Assert HTTP ``status`` plus a JSON-RPC error ``code`` (and the echoed id when given)."""
    error = error_of(response)
    assert response.status_code == status, f"HTTP {response.status_code} != {status}: {response.text}"
    assert error["code"] == code, f"code {error['code']} != {code}: {error!r}"
    assert isinstance(error.get("message"), str) and error["message"]
    if request_id is not ...:
        message = final_message(response)
        assert "id" in message, "an error response must carry an id member (null when unreadable)"
        assert message["id"] == request_id
        assert type(message["id"]) is type(request_id)
    return error


def tool_text(result: Mapping[str, Any]) -> str:
    """The concatenated text blocks of a ``CallToolResult``."""
    return "\n".join(block["text"] for block in result.get("content", []) if block.get("type") == "text")


def check_result(method: str, version: str, result: dict[str, Any]) -> None:
    """Validate ``result`` against the official wire model of ``(method, version)``."""
    era_version = MODERN if version == MODERN else LEGACY
    serialize_server_result(method, era_version, result)  # raises on any shape error
    if era_version == LEGACY:
        for key in MODERN_ONLY_RESULT_KEYS:
            assert key not in result, f"legacy result of {method} carries 2026-only member {key!r}: {result!r}"
        assert SERVER_INFO not in result.get("_meta", {}), "serverInfo stamp is 2026-only"
    else:
        assert result.get("resultType") in ("complete", "input_required"), result


def modern_meta(
    version: Any = MODERN,
    capabilities: Any = None,
    client_info: Any = ...,
    **extra: Any,
) -> dict[str, Any]:
    """A full 2026-07-28 ``_meta`` envelope; ``extra`` adds keys (``progressToken``...)."""
    meta: dict[str, Any] = {META_VERSION: version, META_CAPABILITIES: {} if capabilities is None else capabilities}
    if client_info is ...:
        meta[META_CLIENT_INFO] = {"name": "pytest", "version": "1"}
    elif client_info is not None:
        meta[META_CLIENT_INFO] = client_info
    meta.update(extra)
    return meta


def rpc(method: str, params: dict[str, Any] | None = None, request_id: Any = 1) -> dict[str, Any]:
    """A JSON-RPC request object (``request_id=None`` omits the id: a notification)."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if request_id is not None:
        message["id"] = request_id
    if params is not None:
        message["params"] = params
    return message


class Wire:
    """Raw JSON-RPC over Streamable HTTP against one app (see the module docstring)."""

    def __init__(self, client: httpx.AsyncClient, path: str = "/mcp") -> None:
        self.client = client
        self.path = path
        self.session: str | None = None
        self._next_id = 100

    def next_id(self) -> int:
        self._next_id += 1
        return self._next_id

    async def post(
        self, body: Any, headers: Mapping[str, str] | None = None, *, content: bytes | None = None
    ) -> httpx.Response:
        """POST ``body`` (JSON) or raw ``content`` with JSON content type and Accept both."""
        merged = {"content-type": "application/json", "accept": ACCEPT_BOTH, **(headers or {})}
        data = content if content is not None else json.dumps(body).encode()
        return await self.client.post(self.path, content=data, headers=merged)

    # -- 2025 era --------------------------------------------------------------------------
    async def initialize(
        self,
        version: str = LEGACY,
        capabilities: dict[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        client_info: dict[str, Any] | None = None,
        *,
        initialized: bool = True,
    ) -> str:
        """``initialize`` (+ ``notifications/initialized``); returns and remembers the session id."""
        params = {
            "protocolVersion": version,
            "capabilities": capabilities or {},
            "clientInfo": client_info or {"name": "pytest", "version": "1"},
        }
        response = await self.post(rpc("initialize", params, 0), headers)
        assert response.status_code == 200, response.text
        result = result_of(response)
        check_result("initialize", LEGACY, result)
        session = response.headers.get("mcp-session-id")
        assert session, "initialize must assign an Mcp-Session-Id in stateful mode"
        self.session = session
        if initialized:
            note = await self.post(
                rpc("notifications/initialized", {}, None),
                {"mcp-session-id": session, "mcp-protocol-version": result["protocolVersion"], **(headers or {})},
            )
            assert note.status_code == 202, note.text
        return session

    def legacy_headers(self, session: str | type(...) | None = ..., version: str | None = LEGACY) -> dict[str, str]:
        headers: dict[str, str] = {}
        sid = self.session if session is ... else session
        if sid is not None:
            headers["mcp-session-id"] = sid
        if version is not None:
            headers["mcp-protocol-version"] = version
        return headers

    async def legacy(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        request_id: Any = ...,
        session: Any = ...,
        version: str | None = LEGACY,
        headers: Mapping[str, str] | None = None,
        check: bool = True,
    ) -> httpx.Response:
        """A 2025-era request on the current (or given) session."""
        rid = self.next_id() if request_id is ... else request_id
        merged = {**self.legacy_headers(session, version), **(headers or {})}
        response = await self.post(rpc(method, params, rid), merged)
        if check:
            self._check(method, LEGACY, response)
        return response

    # -- 2026 era --------------------------------------------------------------------------
    def modern_headers(self, method: str, params: Mapping[str, Any] | None, version: str = MODERN) -> dict[str, str]:
        headers = {"mcp-protocol-version": version, "mcp-method": method}
        member = NAME_MEMBER.get(method)
        if member is not None and params is not None and isinstance(params.get(member), str):
            headers["mcp-name"] = params[member]
        return headers

    async def modern(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        request_id: Any = ...,
        meta: dict[str, Any] | None = None,
        headers: Mapping[str, str | None] | None = None,
        check: bool = True,
    ) -> httpx.Response:
        """A 2026-07-28 request with the full header set and ``_meta`` envelope.

        ``headers`` entries override the computed ones; a ``None`` value removes a header.
        """
        rid = self.next_id() if request_id is ... else request_id
        body_params = dict(params or {})
        body_params["_meta"] = {**modern_meta(), **(meta or {})}
        merged: dict[str, str | None] = {**self.modern_headers(method, body_params), **(headers or {})}
        final = {k: v for k, v in merged.items() if v is not None}
        response = await self.post(rpc(method, body_params, rid), final)
        if check:
            self._check(method, MODERN, response)
        return response

    # -- either era ---------------------------------------------------------------------------
    async def call_tool(
        self,
        era: str,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        meta: dict[str, Any] | None = None,
        request_id: Any = ...,
        check: bool = True,
    ) -> httpx.Response:
        """``tools/call`` in ``era`` (``"legacy"``: initializes a session first if needed)."""
        params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
        if era == "legacy":
            if self.session is None:
                await self.initialize(headers=headers)
            if meta:
                params["_meta"] = meta
            return await self.legacy("tools/call", params, request_id=request_id, headers=headers, check=check)
        return await self.modern("tools/call", params, request_id=request_id, meta=meta, headers=headers, check=check)

    async def request(self, era: str, method: str, params: dict[str, Any] | None = None, **kwargs: Any) -> httpx.Response:
        """Any request in ``era`` (``"legacy"``: initializes a session first if needed)."""
        if era == "legacy":
            if self.session is None:
                await self.initialize()
            return await self.legacy(method, params, **kwargs)
        return await self.modern(method, params, **kwargs)

    @staticmethod
    def _check(method: str, version: str, response: httpx.Response) -> None:
        """Validate any successful result against the official wire model."""
        messages = messages_of(response)
        if not messages:
            return
        last = messages[-1]
        if "result" in last and isinstance(last["result"], dict):
            check_result(method, version, last["result"])


# -- raw ASGI (streams that stay open, disconnects, lying Content-Length) -----------------


class AsgiExchange:
    """What a raw ASGI call produced so far (see :func:`asgi_exchange`)."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.chunks: list[bytes] = []
        self.started = anyio.Event()
        self.done = anyio.Event()
        self.finished = anyio.Event()
        self._changed = anyio.Event()
        self.disconnect = anyio.Event()

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_for(self, predicate: Callable[[AsgiExchange], bool], timeout: float = 30.0) -> None:
        """Wait until ``predicate(self)`` holds (fails after ``timeout`` seconds)."""
        with anyio.fail_after(timeout):
            while not predicate(self):
                if self.finished.is_set() and not predicate(self):
                    raise AssertionError(f"response ended without the expected content: {self.body!r}")
                await self._changed.wait()


@asynccontextmanager
async def asgi_exchange(
    app: Any,
    method: str,
    path: str = "/mcp",
    headers: Mapping[str, str] | None = None,
    body_chunks: list[bytes] | None = None,
    *,
    host: str = "127.0.0.1",
    server: tuple[str, int] = ("127.0.0.1", 80),
    disconnect_after_body: bool = False,
    disconnect_after_response: bool = True,
    wait_started: bool = True,
    start_timeout: float = 30.0,
) -> AsyncIterator[AsgiExchange]:
    """Call ``app`` as an ASGI server would, without buffering the response.

    ``receive`` hands out ``body_chunks`` then blocks until the block exits, the test sets
    ``exchange.disconnect``, or (like uvicorn, ``disconnect_after_response``) the response
    is complete; then it reports ``http.disconnect``. The block is entered
    once the response has started; on exit the client disconnects and the app gets a
    bounded time to finish before it is cancelled.
    """
    exchange = AsgiExchange()
    chunks = list(body_chunks or [b""])
    if disconnect_after_body:
        exchange.disconnect.set()

    async def receive() -> dict[str, Any]:
        if chunks:
            chunk = chunks.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}
        await exchange.disconnect.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            exchange.status = message["status"]
            exchange.headers = {k.decode().lower(): v.decode() for k, v in message.get("headers", [])}
            exchange.started.set()
        elif message["type"] == "http.response.body":
            exchange.chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                exchange.done.set()
                if disconnect_after_response:
                    exchange.disconnect.set()
        exchange._notify()

    raw_headers = [(b"host", host.encode())]
    raw_headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": raw_headers,
        "client": ("127.0.0.1", 54321),
        "server": server,
        "state": {},
    }

    async def run_app() -> None:
        try:
            await app(scope, receive, send)
        finally:
            exchange.done.set()
            exchange.finished.set()
            exchange._notify()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_app)
        if wait_started:
            with anyio.fail_after(start_timeout):
                await exchange.started.wait()
        try:
            yield exchange
        finally:
            exchange.disconnect.set()
            with anyio.move_on_after(2.0):
                await exchange.finished.wait()
            tg.cancel_scope.cancel()


# -- fixtures -------------------------------------------------------------------------------


@pytest.fixture
async def client(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    """A raw client on the module's ``app`` fixture."""
    async with open_client(app) as c:
        yield c


@pytest.fixture
def wire(client: httpx.AsyncClient) -> Wire:
    """A :class:`Wire` on the module's ``app`` fixture."""
    return Wire(client)


@pytest.fixture
def wire_factory() -> Callable[[httpx.AsyncClient], Wire]:
    """Build a :class:`Wire` on any client."""
    return Wire


@pytest.fixture(params=["legacy", "modern"])
def era(request: pytest.FixtureRequest) -> str:
    """Run a test in both protocol eras."""
    return request.param


def guide_example(heading: str) -> dict[str, Any]:
    """Run the first ``python`` block below ``heading`` (a ``## `` line) of docs/guide.md as
    written; returns the names it defined."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "guide.md").read_text(encoding="utf-8")
    section = text.split(f"{heading}\n", 1)[1]
    source = section.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {"__name__": "guide_example"}
    exec(compile(source, "docs/guide.md", "exec"), namespace)  # noqa: S102
    return namespace


# -- time the test controls --------------------------------------------------------------------


class SessionClock:
    """The clock of a router's in-memory session store, moved by the test (``clock.advance(s)``)
    instead of sleeping past an idle time: no assertion rests on how long a sleep took."""

    def __init__(self, router: McpRouter) -> None:
        import time

        self.now = time.time()
        router.sessions.clock = lambda: self.now  # type: ignore[attr-defined]  # MemorySessionStore

    def advance(self, seconds: float) -> None:
        self.now += seconds
