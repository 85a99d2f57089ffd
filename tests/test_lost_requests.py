"""Lost MCP requests get a pointer: the 404 of an MCP request that reached no route names the
path the app's ``McpRouter`` serves, in both eras; the app's other 404s (its own 404 handler
included) are unchanged; ``check`` names the right URL; ``McpTestClient`` on an app without a
router says how to add one. The official client, run by uvicorn's lifespan, sees the pointer.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from asgi_lifespan import LifespanManager
from conftest import mcp_settings, modern_meta
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from mcp import Client
from mcp.shared.exceptions import MCPError
from serving import uvicorn_thread

from fastapi_mcp_ctx import McpRouter
from fastapi_mcp_ctx._probe import probe
from fastapi_mcp_ctx._server import lost_requests
from fastapi_mcp_ctx._server.lost_requests import MAX_SNIFF_BYTES, install_pointer
from fastapi_mcp_ctx.errors import McpResponseError
from fastapi_mcp_ctx.testing import McpTestClient

ACCEPT = "application/json, text/event-stream"
INITIALIZE = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


def _app(*, own_404: bool = True) -> FastAPI:
    app = FastAPI()
    app.include_router(McpRouter(settings=mcp_settings()), prefix="/api")

    @app.get("/items")
    async def items() -> list[int]:
        return [1]

    if own_404:

        @app.exception_handler(404)
        async def not_found(request: Request, exc: Exception) -> JSONResponse:
            return JSONResponse({"own": "not here", "path": request.url.path}, status_code=404)

    return app


def _client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


def _assert_pointer(response: httpx.Response, path: str, request_id: Any) -> None:
    assert response.status_code == 404
    body = response.json()
    assert body["jsonrpc"] == "2.0" and body["id"] == request_id
    assert body["error"]["code"] == -32600
    assert f"No MCP endpoint at {path}" in body["error"]["message"] and "/api/mcp" in body["error"]["message"]
    assert body["error"]["data"]["mcpPaths"] == ["/api/mcp"] and body["error"]["data"]["path"] == path


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_lost_mcp_request_gets_the_path_the_router_serves(era: str) -> None:
    app = _app()
    if era == "legacy":
        message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE}
        headers = {"Accept": ACCEPT}
    else:
        message = {"jsonrpc": "2.0", "id": "a", "method": "tools/list", "params": {"_meta": modern_meta("2026-07-28")}}
        headers = {"Accept": ACCEPT, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
    async with LifespanManager(app), _client(app) as http:  # the router's lifespan installs the pointer
        for path in ("/mcp", "/", "/api"):
            _assert_pointer(await http.post(path, json=message, headers=headers), path, message["id"])
        # a JSON-RPC body alone (no MCP Accept) is recognised; so are the MCP headers alone
        _assert_pointer(await http.post("/mcp", json=message), "/mcp", message["id"])
        _assert_pointer(await http.get("/mcp", headers={"Mcp-Session-Id": "abc"}), "/mcp", None)
        _assert_pointer(await http.delete("/v1/mcp", headers={"MCP-Protocol-Version": "2025-11-25"}), "/v1/mcp", None)
        batch = [message, {"jsonrpc": "2.0", "method": "notifications/initialized"}]
        _assert_pointer(await http.post("/mcp", content=json.dumps(batch), headers={"Content-Type": "application/json"}), "/mcp", None)
        # the right path still serves
        right = await http.post("/api/mcp", json=message, headers=headers)
        assert right.status_code == 200, right.text


async def test_the_apps_other_404s_are_unchanged() -> None:
    for own in (True, False):
        app = _app(own_404=own)
        expected = (lambda path: {"own": "not here", "path": path}) if own else (lambda path: {"detail": "Not Found"})
        async with LifespanManager(app), _client(app) as http:
            assert (await http.get("/nothing")).json() == expected("/nothing")
            assert (await http.post("/orders", json={"item": "anvil"})).json() == expected("/orders")  # JSON, not JSON-RPC
            assert (await http.post("/orders", json={"jsonrpc": "2.0", "result": 1, "id": 1})).json() == expected("/orders")
            assert (await http.post("/orders", content=b"{not json", headers={"Content-Type": "application/json"})).json() == expected("/orders")
            big = b'{"jsonrpc": "2.0", "method": "x", "pad": "' + b"x" * MAX_SNIFF_BYTES + b'"}'
            assert (await http.post("/orders", content=big, headers={"Content-Type": "application/json"})).json() == expected("/orders")
            assert (await http.post("/orders", json={"jsonrpc": "2.0", "method": "x"}, headers={"Content-Type": "text/plain"})).json() == expected("/orders")
            assert (await http.get("/items")).json() == [1]


async def test_without_a_lifespan_the_first_mcp_request_installs_the_pointer() -> None:
    app = _app()
    message = {"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": INITIALIZE}
    async with _client(app) as http:
        assert (await http.post("/mcp", json=message)).json() == {"own": "not here", "path": "/mcp"}  # nothing installed yet
        assert (await http.post("/api/mcp", json=message, headers={"Accept": ACCEPT})).status_code == 200
        _assert_pointer(await http.post("/mcp", json=message), "/mcp", 7)


async def test_an_app_without_an_mcp_router_keeps_its_404() -> None:
    app = FastAPI()
    async with LifespanManager(app), _client(app) as http:
        response = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE})
    assert response.status_code == 404 and response.json() == {"detail": "Not Found"}


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_official_client_at_a_wrong_path_gets_the_pointer(mode: str) -> None:
    app = _app()
    with uvicorn_thread(app) as url:  # uvicorn runs the lifespan
        wrong = url.rsplit("/", 1)[0] + "/wrong"
        with anyio.fail_after(15), pytest.raises(BaseException) as caught:
            async with Client(wrong, mode=mode, cache=None) as client:
                await client.list_tools()
    errors = [leaf for leaf in _leaves(caught.value) if isinstance(leaf, MCPError)]
    assert errors, repr(caught.value)
    assert "No MCP endpoint at /wrong: this server's MCP endpoint is /api/mcp" in str(errors[0])


async def test_check_names_the_path_the_server_serves() -> None:
    app = _app()
    async with LifespanManager(app):
        report = await probe("http://127.0.0.1/mcp", transport=httpx.ASGITransport(app=app), timeout=5)
    text = report.render()
    assert not report.ok
    assert "no MCP endpoint at /mcp; this server's MCP endpoint is /api/mcp: fastapi-mcp-ctx check http://127.0.0.1/api/mcp" in text


async def test_the_test_client_on_an_app_without_a_router_says_how_to_add_one() -> None:
    app = FastAPI()
    with pytest.raises(McpResponseError) as caught:
        async with McpTestClient(app):
            pass
    message = str(caught.value)
    assert caught.value.http_status == 404
    assert "the app has no McpRouter; add one with app.include_router(McpRouter())" in message
    assert "prefix" not in message


async def test_a_body_that_never_ends_is_not_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lost_requests, "SNIFF_SECONDS", 0.05)
    app = _app()
    install_pointer(app)
    never = anyio.Event()
    chunks = [{"type": "http.request", "body": b'{"jsonrpc": "2.0", "method": "ping", "id"', "more_body": True}]

    async def receive() -> dict[str, Any]:
        if chunks:
            return chunks.pop(0)
        await never.wait()  # the rest of the body never comes
        return {"type": "http.disconnect"}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": "/orders", "raw_path": b"/orders", "root_path": "", "query_string": b"",
        "headers": [(b"content-type", b"application/json"), (b"host", b"127.0.0.1")],
        "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80),
    }  # fmt: skip
    with anyio.fail_after(5):  # a hang fails here; the sniff gives up after 0.05 s
        await app(scope, receive, send)
    assert sent[0]["status"] == 404
    assert json.loads(b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")) == {"own": "not here", "path": "/orders"}


async def test_no_body_makes_the_sniff_a_500_deep_nesting_and_bad_bytes_fall_through() -> None:
    """The sniff never parses recursively in Python: bodies nested past any stack (arrays, objects,
    a JSON-RPC-shaped object with a deep ``params``), not UTF-8, or a lone ``[`` get the app's own
    404, and a JSON-RPC message after whitespace and ``[`` is still recognised."""
    app = _app()
    deep_params = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"a": ' + b"[" * 200_000 + b"]" * 200_000 + b"}}"
    bodies = [b"[" * 200_000, b'[{"a": ' + b"[" * 200_000, b'{"a": ' * 100_000, deep_params, b"\xff\xfe{", b"[", b" "]
    async with LifespanManager(app), _client(app) as http:
        for body in bodies:
            response = await http.post("/orders", content=body, headers={"Content-Type": "application/json"})
            assert response.status_code == 404 and response.json() == {"own": "not here", "path": "/orders"}, body[:40]
        spaced = b' \r\n[ \t{"jsonrpc": "2.0", "method": "notifications/initialized"}]'
        _assert_pointer(await http.post("/mcp", content=spaced, headers={"Content-Type": "application/json"}), "/mcp", None)


async def test_behind_a_root_path_the_pointer_names_the_path_clients_send_to() -> None:
    """A proxy's ``root_path`` (uvicorn ``--root-path``) prefixes the MCP path the pointer names."""
    app = _app()
    transport = httpx.ASGITransport(app=app, root_path="/proxy")
    async with LifespanManager(app), httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        response = await http.post("/proxy/nope", json={"jsonrpc": "2.0", "id": 3, "method": "ping"})
    assert response.status_code == 404
    assert response.json()["error"]["data"] == {"requestId": 3, "reason": "invalid_request", "path": "/proxy/nope", "mcpPaths": ["/proxy/api/mcp"]}
