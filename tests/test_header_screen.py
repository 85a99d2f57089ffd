"""The MCP route screens the header section before FastAPI solves any dependency.

``MCP_MAX_REQUEST_HEADER_BYTES`` (431, RFC 6585 §5) and a repeated credential header
(``Authorization`` / ``Proxy-Authorization``, RFC 9110 §11.6.2 / §11.7.2: singletons) are refused
by ``LeanRoute.handle`` before an app-, include- or route-level dependency reads a header; every
other single-valued header repeated is refused before authentication, on every method.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from conftest import ACCEPT_BOTH, BASE_URL, make_router, mcp_settings, open_client, rpc
from fastapi import APIRouter, Depends, FastAPI, Header

from fastapi_mcp_ctx import McpRouter

CALLS: list[str] = []


def app_auth(authorization: str = Header("")) -> None:
    """An application's own credential dependency: records what it was given."""
    CALLS.append(authorization[:16])


def _app(where: str) -> FastAPI:
    """An app whose MCP route has a dependency at ``where``: app, include or router level."""
    CALLS.clear()
    router = make_router()

    @router.tool()
    async def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    if where == "app":
        app = FastAPI(dependencies=[Depends(app_auth)])
        app.include_router(router)
    elif where == "include":
        app = FastAPI()
        app.include_router(router, dependencies=[Depends(app_auth)])
    else:
        outer = APIRouter(dependencies=[Depends(app_auth)])
        outer.include_router(router)
        app = FastAPI()
        app.include_router(outer)
    return app


PING = {"jsonrpc": "2.0", "id": 7, "method": "ping"}


@pytest.mark.parametrize("where", ["app", "include", "outer-router"])
async def test_the_header_bound_is_answered_before_any_dependency_runs(where: str) -> None:
    app = _app(where)
    async with open_client(app) as client:
        response = await client.post("/mcp", json=PING, headers={"accept": ACCEPT_BOTH, "x-pad": "a" * 200_000})
        assert response.status_code == 431, response.text
        assert response.json()["error"]["code"] == -32600
        assert "MCP_MAX_REQUEST_HEADER_BYTES" in response.json()["error"]["message"]
        assert CALLS == []
        ok = await client.post("/mcp", json=PING, headers={"accept": ACCEPT_BOTH, "authorization": "Bearer x"})
        assert ok.status_code == 400 and "session" in ok.text  # admitted (a 2025 ping outside a session)
        assert CALLS == ["Bearer x"]  # the dependency still runs for an admitted request


@pytest.mark.parametrize("name", ["authorization", "Proxy-Authorization"])
@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
async def test_a_repeated_credential_header_is_400_before_any_dependency(name: str, method: str) -> None:
    app = _app("app")
    headers = [("accept", ACCEPT_BOTH), ("content-type", "application/json"), (name, "Bearer one"), (name, "Bearer two")]
    async with open_client(app) as client:
        response = await client.request(method, "/mcp", json=PING if method == "POST" else None, headers=headers)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == -32600 and name.lower() in error["message"] and "exactly once" in error["message"]
    assert CALLS == []


async def test_a_repeated_mcp_header_on_post_is_refused_before_authentication_with_the_id() -> None:
    """A POST with two ``Mcp-Method`` copies under a required gate: 400 naming the header (not a
    401 challenge, not served), echoing the body's id."""
    settings = mcp_settings(
        auth_mode="jwt", jwt_jwks_url="https://idp.example.test/jwks", jwt_issuer="https://idp.example.test", resource_url="https://mcp.example.test/mcp"
    )
    router = McpRouter(settings=settings)
    app = FastAPI()
    app.include_router(router)
    headers = [
        ("accept", ACCEPT_BOTH),
        ("content-type", "application/json"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "ping"),
        ("mcp-method", "tools/list"),
    ]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL, timeout=10.0) as client:
        response = await client.post("/mcp", json=rpc("ping", None, 41), headers=headers)
    assert response.status_code == 400, response.text
    message: dict[str, Any] = response.json()
    assert message["id"] == 41 and message["error"]["code"] == -32020 and "mcp-method" in message["error"]["message"]
