"""Transport security: Host / Origin allow-lists against DNS rebinding (known fault B29).

Spec 2025-11-25 ``basic/transports`` §Security Warning; 2026-07-28 ``streamable-http``
§Security & Endpoint: an invalid Origin gets 403, an unexpected Host a 4xx (421 here);
on by default for loopback binds; an absent Origin (non-browser client) is allowed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import ACCEPT_BOTH, LEGACY, MODERN, Wire, asgi_exchange, make_app, make_router, modern_meta, open_client, rpc

from fastapi_mcp_ctx._auth.host_rules import is_loopback_host

EVIL_HOST = "evil.example.test:8000"
EVIL_ORIGIN = "http://evil.example.test:8000"
INIT = rpc("initialize", {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}, 1)


def build_app(**settings: Any) -> Any:
    router = make_router(**settings)

    @router.tool()
    async def ping_tool() -> str:
        """Answer pong."""
        return "pong"

    return make_app(router)


@pytest.fixture
def app() -> Any:
    return build_app()


async def post(client: Any, body: Any, headers: dict[str, str]) -> Any:
    merged = {"content-type": "application/json", "accept": ACCEPT_BOTH, **headers}
    return await client.post("/mcp", content=json.dumps(body), headers=merged)


async def test_b29_bad_host_is_421(client: Any) -> None:
    response = await post(client, INIT, {"host": EVIL_HOST, "origin": EVIL_ORIGIN})
    assert response.status_code == 421
    assert "mcp-session-id" not in response.headers


async def test_b29_bad_host_without_origin_is_421(client: Any) -> None:
    response = await post(client, INIT, {"host": EVIL_HOST})
    assert response.status_code == 421


async def test_b29_bad_host_on_get_is_421(client: Any) -> None:
    response = await client.get("/mcp", headers={"host": EVIL_HOST, "accept": "text/event-stream"})
    assert response.status_code == 421


async def test_b29_bad_origin_is_403(client: Any) -> None:
    response = await post(client, INIT, {"origin": "http://evil.example.test"})
    assert response.status_code == 403
    assert "mcp-session-id" not in response.headers
    if response.content:
        body = response.json()
        assert body.get("id") is None
        assert "result" not in body


async def test_b29_null_origin_is_403(client: Any) -> None:
    response = await post(client, INIT, {"origin": "null"})
    assert response.status_code == 403


async def test_b29_good_host_and_origin_is_200(client: Any) -> None:
    response = await post(client, INIT, {"host": "127.0.0.1:8000", "origin": "http://127.0.0.1:8000"})
    assert response.status_code == 200
    assert response.headers.get("mcp-session-id")


@pytest.mark.parametrize(
    "host,origin",
    [("localhost:8000", "http://localhost:8000"), ("localhost", "http://localhost"), ("[::1]:9000", "http://[::1]:9000")],
)
async def test_b29_loopback_names_are_allowed(client: Any, host: str, origin: str) -> None:
    response = await post(client, INIT, {"host": host, "origin": origin})
    assert response.status_code == 200


async def test_b29_absent_origin_is_ok(client: Any) -> None:
    response = await post(client, INIT, {})
    assert response.status_code == 200


async def test_b29_host_with_lookalike_suffix_is_421(client: Any) -> None:
    response = await post(client, INIT, {"host": "127.0.0.1.evil.example.test"})
    assert response.status_code == 421
    response = await post(client, INIT, {"host": "localhost:80abc"})
    assert response.status_code == 421


async def test_b29_modern_request_with_bad_origin_is_403(client: Any) -> None:
    body = rpc("server/discover", {"_meta": modern_meta()}, 1)
    response = await post(client, body, {"origin": EVIL_ORIGIN, "mcp-protocol-version": MODERN, "mcp-method": "server/discover"})
    assert response.status_code == 403
    response = await post(client, body, {"host": EVIL_HOST, "mcp-protocol-version": MODERN, "mcp-method": "server/discover"})
    assert response.status_code == 421


async def test_b29_bad_origin_on_existing_session_is_403(client: Any) -> None:
    wire = Wire(client)
    sid = await wire.initialize()
    response = await post(client, rpc("tools/list", None, 2), {"mcp-session-id": sid, "origin": EVIL_ORIGIN})
    assert response.status_code == 403


async def test_b29_configured_allow_list_admits_extra_host() -> None:
    app = build_app(allowed_hosts=["mcp.example.test:*"], allowed_origins=["https://app.example.test"])
    async with open_client(app) as client:
        ok = await post(client, INIT, {"host": "mcp.example.test:443", "origin": "https://app.example.test"})
        assert ok.status_code == 200
        bad = await post(client, INIT, {"host": EVIL_HOST})
        assert bad.status_code == 421
        bad_origin = await post(client, INIT, {"host": "mcp.example.test", "origin": EVIL_ORIGIN})
        assert bad_origin.status_code == 403


async def test_b29_empty_allow_list_denies_foreign_host() -> None:
    app = build_app(allowed_hosts=[], allowed_origins=[])
    async with open_client(app) as client:
        bad = await post(client, INIT, {"host": EVIL_HOST})
        assert bad.status_code == 421


async def test_b29_forced_protection_on_non_loopback_bind() -> None:
    app = build_app(dns_rebinding_protection=True)
    async with asgi_exchange(
        app,
        "POST",
        headers={"content-type": "application/json", "accept": ACCEPT_BOTH},
        body_chunks=[json.dumps(INIT).encode()],
        host=EVIL_HOST,
        server=("10.0.0.5", 8000),
    ) as exchange:
        assert exchange.status == 421


async def test_b29_disabled_protection_admits_any_host() -> None:
    app = build_app(dns_rebinding_protection=False)
    async with open_client(app) as client:
        response = await post(client, INIT, {"host": EVIL_HOST, "origin": EVIL_ORIGIN})
        assert response.status_code == 200


async def init_status(host: str, server: tuple[str, int], origin: str | None = None) -> int | None:
    """HTTP status of an initialize POST with this ``Host`` (and ``Origin``) on this server address."""
    headers = {"content-type": "application/json", "accept": ACCEPT_BOTH}
    if origin is not None:
        headers["origin"] = origin
    body = [json.dumps(INIT).encode()]
    async with asgi_exchange(build_app(), "POST", headers=headers, body_chunks=body, host=host, server=server) as exchange:
        return exchange.status


@pytest.mark.parametrize("server_ip", ["127.0.0.2", "127.1.2.3", "::ffff:127.0.0.2", "::1"])
async def test_loopback_family_server_address_is_protected(server_ip: str) -> None:
    # served on 0.0.0.0 and reached on 127.0.0.2: still a loopback connection, still protected
    assert await init_status("evil.example.com", (server_ip, 8000)) == 421


@pytest.mark.parametrize(
    ("host", "origin"),
    [("127.0.0.2:8000", "http://127.0.0.2:8000"), ("[::ffff:127.0.0.1]:8000", "https://[::ffff:127.0.0.1]"), ("127.9.9.9", None)],
)
async def test_loopback_family_hosts_are_in_default_allow_list(host: str, origin: str | None) -> None:
    assert await init_status(host, ("127.0.0.2", 8000), origin) == 200


@pytest.mark.parametrize(
    "host",
    ["128.0.0.1:8000", "127.0.0.2:99999", "127.0.0.2.evil.test", "[::2]:8000", "0.0.0.0:8000", "127.1", "[0:0:0:0:0:0:0:1]:8000", "127.0.0.2:", "::1"],
)
async def test_non_loopback_literals_stay_refused(host: str) -> None:
    assert await init_status(host, ("127.0.0.2", 8000)) == 421


def test_is_loopback_host() -> None:
    for name in ("127.0.0.1", "127.255.0.9", "::1", "[::1]", "::ffff:127.0.0.5", "LOCALHOST"):
        assert is_loopback_host(name), name
    for name in ("10.0.0.1", "::2", "::ffff:10.0.0.1", "0.0.0.0", "evil.example.com", ""):
        assert not is_loopback_host(name), name
