"""Secure by default (known-faults B31): with no authentication configured (no MCP_AUTH_MODE,
no ``authenticate=``) only local requests are served: a loopback peer without any header a
proxy adds (``Forwarded``, ``X-Forwarded-*``, ``X-Real-IP``, ``Via``, ``True-Client-IP``,
``CF-Connecting-IP``). Everything else is 403 with a message naming MCP_AUTH_MODE, in both eras
and for GET / DELETE too, whatever FastAPI dependency the route has (issue 24 item 1: an
app-, router- or include-level dependency once lifted the gate)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from conftest import BASE_URL, Wire, error_of, mcp_settings, result_of
from fastapi import APIRouter, Depends, FastAPI, Header, HTTPException

from fastapi_mcp_ctx import McpRouter, Principal


def router_of(**overrides: Any) -> McpRouter:
    router = McpRouter(settings=mcp_settings(**{"auth_mode": None, **overrides}))

    @router.tool()
    async def hello() -> str:
        """Say hello."""
        return "hello"

    return router


@asynccontextmanager
async def peer_client(app: Any, peer: str) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app, client=(peer, 40000))
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL, timeout=10.0) as client:
        yield client


def app_of(router: McpRouter, **include: Any) -> FastAPI:
    app = FastAPI()
    app.include_router(router, **include)
    return app


@pytest.mark.parametrize("peer", ["203.0.113.9", "10.0.0.7", "2001:db8::1", "testclient"])
async def test_b31_a_remote_peer_is_refused_naming_mcp_auth_mode(peer: str, era: str) -> None:
    async with peer_client(app_of(router_of()), peer) as client:
        response = await Wire(client).call_tool(era, "hello", check=False) if era == "modern" else await Wire(client).post(
            {"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    assert response.status_code == 403, response.text
    error = error_of(response)
    assert "MCP_AUTH_MODE" in error["message"] and error["data"]["reason"] == "authentication_not_configured"
    assert "mcp-session-id" not in response.headers


PROXY_HEADERS = [
    {"x-forwarded-for": "203.0.113.9"},
    {"forwarded": "for=203.0.113.9"},
    {"x-real-ip": "203.0.113.9"},  # issue 24 item 2: nginx's usual proxy_set_header alone
    {"x-forwarded-host": "mcp.example.com"},
    {"x-forwarded-proto": "https"},
    {"via": "1.1 nginx"},
    {"true-client-ip": "203.0.113.9"},
    {"cf-connecting-ip": "203.0.113.9"},
]


@pytest.mark.parametrize("header", PROXY_HEADERS, ids=lambda h: next(iter(h)))
async def test_a_loopback_peer_behind_a_proxy_is_not_local(header: dict[str, str], era: str) -> None:
    async with peer_client(app_of(router_of()), "127.0.0.1") as client:
        response = await Wire(client).call_tool(era, "hello", headers=header, check=False) if era == "modern" else await Wire(client).post(
            {"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}, header)  # fmt: skip
    assert response.status_code == 403, response.text
    assert error_of(response)["data"]["reason"] == "authentication_not_configured"


async def test_get_and_delete_are_refused_too() -> None:
    async with peer_client(app_of(router_of()), "203.0.113.9") as client:
        get = await client.get("/mcp", headers={"accept": "text/event-stream", "mcp-session-id": "x"})
        delete = await client.delete("/mcp", headers={"mcp-session-id": "x"})
    assert (get.status_code, delete.status_code) == (403, 403)


@pytest.mark.parametrize("peer", ["127.0.0.1", "127.0.0.2", "::1", "::ffff:127.0.0.1"])
async def test_local_development_needs_no_setting(peer: str, era: str) -> None:
    async with peer_client(app_of(router_of()), peer) as client:
        response = await Wire(client).call_tool(era, "hello")
    assert result_of(response)["structuredContent"] == {"result": "hello"}


async def test_auth_mode_none_set_explicitly_serves_remote_callers(era: str) -> None:
    async with peer_client(app_of(router_of(auth_mode="none")), "203.0.113.9") as client:
        response = await Wire(client).call_tool(era, "hello", headers={"x-forwarded-for": "198.51.100.1"})
    assert result_of(response)["structuredContent"] == {"result": "hello"}


async def _noop() -> None:
    return None


def _app_level() -> FastAPI:
    app = FastAPI(dependencies=[Depends(_noop)])
    app.include_router(router_of())
    return app


def _router_level() -> FastAPI:
    outer = APIRouter(dependencies=[Depends(_noop)])
    outer.include_router(router_of())
    app = FastAPI()
    app.include_router(outer)
    return app


def _include_level() -> FastAPI:
    return app_of(router_of(), dependencies=[Depends(_noop)])


PLACEMENTS = {"app": _app_level, "router": _router_level, "include": _include_level}


@pytest.mark.parametrize("placement", list(PLACEMENTS))
async def test_a_dependency_on_the_route_never_lifts_the_local_only_gate(placement: str, era: str) -> None:
    """Issue 24 item 1: ``FastAPI(dependencies=...)``, ``APIRouter(dependencies=...)`` and
    ``include_router(r, dependencies=...)`` each once served every caller; a dependency may be a
    database session, so only MCP_AUTH_MODE or ``authenticate=`` lift the gate."""
    app = PLACEMENTS[placement]()
    async with peer_client(app, "203.0.113.9") as remote, peer_client(app, "127.0.0.1") as local:
        if era == "modern":
            refused = await Wire(remote).call_tool(era, "hello", check=False)
            proxied = await Wire(local).call_tool(era, "hello", headers={"x-forwarded-for": "203.0.113.9"}, check=False)
        else:
            initialize = {"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
            refused = await Wire(remote).post(initialize)
            proxied = await Wire(local).post(initialize, {"x-forwarded-for": "203.0.113.9"})
        served = await Wire(local).call_tool(era, "hello")
    for response in (refused, proxied):
        assert response.status_code == 403, response.text
        error = error_of(response)
        assert error["data"]["reason"] == "authentication_not_configured"
        assert "authenticate=" in error["data"]["recovery"]["hint"]
    assert result_of(served)["structuredContent"] == {"result": "hello"}


async def test_a_dependency_that_authenticates_still_needs_auth_mode_none_to_serve_remote_callers() -> None:
    async def api_key(x_api_key: str = Header(default="")) -> None:
        if x_api_key != "k1":
            raise HTTPException(401, "bad key")

    gated = app_of(router_of(), dependencies=[Depends(api_key)])
    opened = app_of(router_of(auth_mode="none"), dependencies=[Depends(api_key)])
    async with peer_client(gated, "203.0.113.9") as g, peer_client(opened, "203.0.113.9") as o:
        still_local_only = await Wire(g).call_tool("modern", "hello", headers={"x-api-key": "k1"}, check=False)
        ok = await Wire(o).call_tool("modern", "hello", headers={"x-api-key": "k1"})
        refused = await Wire(o).call_tool("modern", "hello", headers={"x-api-key": "no"}, check=False)
    assert still_local_only.status_code == 403
    assert result_of(ok)["structuredContent"] == {"result": "hello"}
    assert refused.status_code == 401


@pytest.mark.parametrize(
    ("overrides", "level", "names"),
    [({"auth_mode": "none"}, logging.WARNING, "MCP_AUTH_MODE=none"), ({}, None, None)],
    ids=["none", "unset"],
)
async def test_serving_non_local_callers_is_logged_once_at_first_use(
    overrides: dict[str, Any], level: int | None, names: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="fastapi_mcp_ctx")
    async with peer_client(app_of(router_of(**overrides)), "127.0.0.1") as client:
        for _ in range(3):
            await Wire(client).call_tool("modern", "hello")
    said = [r for r in caplog.records if "serves non-local callers" in r.getMessage()]
    if names is None:
        assert said == []
        return
    assert len(said) == 1 and said[0].levelno == level and names in said[0].getMessage() and "/mcp" in said[0].getMessage()


async def test_authenticate_serves_remote_callers() -> None:
    async def who() -> Principal:
        return Principal(subject="s")

    router = McpRouter(settings=mcp_settings(auth_mode=None), authenticate=who)

    @router.tool()
    async def hello() -> str:
        """Say hello."""
        return "hello"

    async with peer_client(app_of(router), "203.0.113.9") as client:
        response = await Wire(client).call_tool("modern", "hello")
    assert result_of(response)["structuredContent"] == {"result": "hello"}


async def test_serving_non_local_callers_is_logged_at_start_up_before_any_request(caplog: pytest.LogCaptureFixture) -> None:
    """Issue 24 item 1: the router says at the app's start-up (its lifespan), not at a first
    request that may come hours later, that an explicit setting lets non-local callers in; the
    path logged is the full one, prefix included."""
    from asgi_lifespan import LifespanManager  # noqa: PLC0415 - the testing extra's

    caplog.set_level(logging.INFO, logger="fastapi_mcp_ctx")
    app = FastAPI()
    app.include_router(router_of(auth_mode="none"), prefix="/api")
    async with LifespanManager(app):
        said = [r for r in caplog.records if "serves non-local callers" in r.getMessage()]
        assert len(said) == 1 and said[0].levelno == logging.WARNING
        assert "/api/mcp" in said[0].getMessage() and "MCP_AUTH_MODE=none" in said[0].getMessage()
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE_URL) as client:
            await client.post("/api/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert len([r for r in caplog.records if "serves non-local callers" in r.getMessage()]) == 1
