"""Secure by default (known-faults B31): with no authentication configured (no MCP_AUTH_MODE,
no ``authenticate=``, no HTTP-level dependency on the MCP route) only local requests are
served: a loopback peer without ``Forwarded`` / ``X-Forwarded-For``. Everything else is 403
with a message naming MCP_AUTH_MODE, in both eras and for GET / DELETE too."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from conftest import BASE_URL, Wire, error_of, mcp_settings, result_of
from fastapi import Depends, FastAPI, Header, HTTPException

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


@pytest.mark.parametrize("header", [{"x-forwarded-for": "203.0.113.9"}, {"forwarded": "for=203.0.113.9"}])
async def test_a_loopback_peer_behind_a_proxy_is_not_local(header: dict[str, str], era: str) -> None:
    async with peer_client(app_of(router_of()), "127.0.0.1") as client:
        response = await Wire(client).call_tool("modern", "hello", headers=header, check=False)
    assert response.status_code == 403, response.text


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


async def test_an_http_level_dependency_is_the_applications_own_authentication() -> None:
    async def api_key(x_api_key: str = Header(default="")) -> None:
        if x_api_key != "k1":
            raise HTTPException(401, "bad key")

    app = app_of(router_of(), dependencies=[Depends(api_key)])
    async with peer_client(app, "203.0.113.9") as client:
        ok = await Wire(client).call_tool("modern", "hello", headers={"x-api-key": "k1"})
        refused = await Wire(client).call_tool("modern", "hello", headers={"x-api-key": "no"}, check=False)
    assert result_of(ok)["structuredContent"] == {"result": "hello"}
    assert refused.status_code == 401


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
