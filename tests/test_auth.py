"""``McpRouter(authenticate=...)``: ctx.auth, tenant-scoped ctx.state, session binding, 401/403.

Spec 2025-11-25 ``basic/authorization`` (401 with ``WWW-Authenticate``) and
``basic/security_best_practices`` §Session Hijacking (sessions bound to the principal).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pydantic
import pytest
from conftest import Wire, assert_error, mcp_settings, open_client, result_of, tool_text
from fastapi import Depends, FastAPI, Header, HTTPException

from fastapi_mcp_ctx import Context, McpRouter, McpSettings, Principal, mcp_context
from fastapi_mcp_ctx.errors import TenantRequiredError

USERS = {
    "token-alice": Principal(subject="alice", tenant_id="acme", scopes=frozenset({"notes"})),
    "token-bob": Principal(subject="bob", tenant_id="globex"),
    "token-carol": Principal(subject="carol", tenant_id="acme"),
    "token-notenant": Principal(subject="dave"),
    "token-alice-refreshed": Principal(subject="alice", tenant_id="acme"),
}


def authenticate(authorization: str | None = Header(default=None)) -> Principal | None:
    if authorization is None or not authorization.startswith("Bearer "):
        return None
    principal = USERS.get(authorization.removeprefix("Bearer "))
    if principal is None:
        raise HTTPException(401, "invalid token", headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
    return principal


def build_app(**settings: Any) -> FastAPI:
    router = McpRouter(settings=mcp_settings(**settings), authenticate=authenticate)

    @router.tool()
    async def whoami(ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """The caller as the server sees it."""
        auth: Principal = ctx.auth
        return {"subject": auth.subject, "tenant": ctx.tenant_id}

    @router.tool()
    async def remember(key: str, value: str, ctx: Context = Depends(mcp_context)) -> str:
        """Store a value for the caller's tenant."""
        await ctx.state.set(key, value)
        return "ok"

    @router.tool()
    async def recall(key: str, ctx: Context = Depends(mcp_context)) -> str | None:
        """Read a value of the caller's tenant."""
        value: Any = await ctx.state.get(key)
        return value

    app = FastAPI()
    app.include_router(router)
    return app


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with open_client(build_app()) as c:
        yield c


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


async def _unauthenticated(app: FastAPI, era: str, headers: dict[str, str] | None = None) -> httpx.Response:
    async with open_client(app) as c:
        wire = Wire(c)
        if era == "legacy":
            return await wire.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}, headers)  # fmt: skip
        return await wire.modern("server/discover", check=False, request_id=1, headers=headers)


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, None),  # issue 22 item 6: the app's own scheme, not a Bearer resource server
        ({"auth_mode": "jwt"}, "Bearer"),
        ({"auth_mode": "oauth"}, "Bearer"),
        ({"resource_url": "https://mcp.example.com/mcp"}, 'Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"'),
    ],
    ids=["no-mode", "jwt", "oauth", "resource-url"],
)
async def test_authenticate_returning_none_is_401_with_a_challenge_only_in_a_bearer_mode(
    settings: dict[str, Any], expected: str | None, era: str
) -> None:
    response = await _unauthenticated(build_app(**settings), era)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == -32001
    assert response.headers.get("www-authenticate") == expected
    if expected is None:
        assert "authenticate" in response.json()["error"]["message"]


def _raising(headers: dict[str, str] | None) -> Any:
    def refuse(x_api_key: str | None = Header(default=None)) -> Principal | None:
        raise HTTPException(401, "bad API key", headers=headers)

    return refuse


@pytest.mark.parametrize(
    ("settings", "raised", "expected"),
    [
        ({}, None, None),
        ({}, {"WWW-Authenticate": 'ApiKey realm="notes"'}, 'ApiKey realm="notes"'),
        ({"auth_mode": "jwt"}, {"WWW-Authenticate": 'ApiKey realm="notes"'}, 'ApiKey realm="notes"'),
        ({"auth_mode": "jwt"}, None, "Bearer"),
    ],
    ids=["none-as-raised", "own-scheme", "own-scheme-in-bearer-mode", "bearer-mode-adds-its-challenge"],
)
async def test_an_http_exception_401_of_authenticate_passes_through_as_raised(
    settings: dict[str, Any], raised: dict[str, str] | None, expected: str | None, era: str
) -> None:
    router = McpRouter(settings=mcp_settings(**settings), authenticate=_raising(raised))
    app = FastAPI()
    app.include_router(router)
    response = await _unauthenticated(app, era, {"x-api-key": "wrong"})
    assert response.status_code == 401
    assert response.headers.get("www-authenticate") == expected
    assert response.json()["error"]["message"] == "bad API key"


async def test_invalid_token_keeps_the_dependency_headers(wire: Wire) -> None:
    response = await wire.modern("tools/list", check=False, headers=bearer("nope"))
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer error="invalid_token"'


async def test_ctx_auth_and_tenant_come_from_the_principal(wire: Wire, era: str) -> None:
    result = result_of(await wire.call_tool(era, "whoami", headers=bearer("token-alice")))
    assert result["structuredContent"] == {"subject": "alice", "tenant": "acme"}


async def test_state_is_isolated_between_tenants_and_shared_within_one(client: httpx.AsyncClient, era: str) -> None:
    wire = Wire(client)
    assert result_of(await wire.call_tool(era, "remember", {"key": "k", "value": "acme-secret"}, headers=bearer("token-alice")))["isError"] is False
    other = Wire(client)
    bob = result_of(await other.call_tool(era, "recall", {"key": "k"}, headers=bearer("token-bob")))
    assert bob["structuredContent"] == {"result": None}
    same_tenant = Wire(client)
    carol = result_of(await same_tenant.call_tool(era, "recall", {"key": "k"}, headers=bearer("token-carol")))
    assert carol["structuredContent"] == {"result": "acme-secret"}


async def test_principal_without_tenant_makes_state_fail_closed(wire: Wire, era: str) -> None:
    response = await wire.call_tool(era, "remember", {"key": "k", "value": "v"}, headers=bearer("token-notenant"), check=False)
    assert_error(response, 403, TenantRequiredError.code)


async def test_session_is_bound_to_its_subject(client: httpx.AsyncClient) -> None:
    alice = Wire(client)
    await alice.initialize(headers=bearer("token-alice"))
    ok = await alice.legacy("tools/call", {"name": "whoami", "arguments": {}}, headers=bearer("token-alice"))
    assert "alice" in tool_text(result_of(ok))
    hijack = await alice.legacy("tools/call", {"name": "whoami", "arguments": {}}, headers=bearer("token-bob"), check=False)
    assert_error(hijack, 404, -32600)
    delete = await client.delete("/mcp", headers={"mcp-session-id": alice.session or "", **bearer("token-bob")})
    assert delete.status_code == 404


@pytest.mark.parametrize("mode", ["bogus", "basic", ""])
def test_an_unknown_auth_mode_is_refused_when_settings_are_read(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_AUTH_MODE", mode)
    with pytest.raises(pydantic.ValidationError, match=r"MCP_AUTH_MODE=.*use none, jwt or oauth"):
        McpSettings()


@pytest.mark.parametrize(("raw", "mode"), [("jwt", "jwt"), (" OAuth ", "oauth"), ("JWT", "jwt")])
def test_jwt_and_oauth_modes_are_read(raw: str, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_AUTH_MODE", raw)
    assert McpSettings().auth_mode == mode


def test_auth_mode_none_is_accepted_in_any_case(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_AUTH_MODE", " None ")
    assert McpSettings().auth_mode == "none"


async def test_b04_a_refreshed_token_of_the_same_subject_keeps_the_session(client: httpx.AsyncClient) -> None:
    """B04: the session is bound to the principal's subject, not to the token's bytes."""
    alice = Wire(client)
    await alice.initialize(headers=bearer("token-alice"))
    refreshed = await alice.legacy("tools/call", {"name": "whoami", "arguments": {}}, headers=bearer("token-alice-refreshed"))
    assert result_of(refreshed)["structuredContent"] == {"subject": "alice", "tenant": "acme"}
