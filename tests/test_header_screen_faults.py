"""Auth defect found by a hostile fault run (2026-12-01): two Authorization headers on one POST."""

from __future__ import annotations

from typing import Any

import httpx
from conftest import ACCEPT_BOTH, BASE_URL, mcp_settings, rpc
from fastapi import Depends, FastAPI, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from jwt_support import RESOURCE, KeyServer, RsaKey, claims
from test_jwt_auth import ISSUER, idp, rsa_key

from fastapi_mcp_ctx import Context, McpRouter, mcp_context

__all__ = ["idp", "rsa_key"]


async def test_two_authorization_headers_are_refused_not_split_between_gate_and_app(idp: KeyServer, rsa_key: RsaKey) -> None:
    """``Authorization`` is a singleton field (RFC 9110 §11.6.2). A POST may repeat headers
    (only GET/DELETE refuse it); ``header_map`` keeps the *last* value, which the jwt gate
    verifies, while FastAPI's ``request.headers`` (``HTTPBearer``, any app dependency that
    forwards or decodes the caller's token) reads the *first*. A caller with any valid token
    thus runs the tool with a second, unverified credential in the app's hands. Expected: 400
    (or both sides reading the same, verified value)."""
    settings = mcp_settings(auth_mode="jwt", jwt_jwks_url=idp.jwks_url, jwt_issuer=ISSUER, resource_url=RESOURCE)
    router = McpRouter(settings=settings)

    @router.tool()
    async def token_seen(
        creds: HTTPAuthorizationCredentials = Security(HTTPBearer()), ctx: Context = Depends(mcp_context)
    ) -> dict[str, Any]:
        """The token the app's dependency got, and the subject the gate verified."""
        return {"app_token": creds.credentials, "verified_subject": ctx.auth.subject if ctx.auth else None}

    app = FastAPI()
    app.include_router(router)
    valid = rsa_key.sign(claims(ISSUER))
    forged = "forged.unverified.token"
    headers = [
        ("content-type", "application/json"),
        ("accept", ACCEPT_BOTH),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "token_seen"),
        ("authorization", f"Bearer {forged}"),
        ("authorization", f"Bearer {valid}"),
    ]
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "pytest", "version": "1"},
    }
    body = rpc("tools/call", {"name": "token_seen", "arguments": {}, "_meta": meta}, 1)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL, timeout=10.0) as client:
        response = await client.post("/mcp", json=body, headers=headers)
    if response.status_code == 200:
        result = response.json()["result"]
        assert result["structuredContent"]["app_token"] != forged, f"the gate verified one token, the app got another: {result}"
    else:
        assert response.status_code == 400, response.text


async def test_the_431_header_bound_comes_before_the_apps_dependencies_on_the_mcp_route() -> None:
    """``MCP_MAX_REQUEST_HEADER_BYTES`` is checked "before anything reads one" (endpoint.py) so a
    4 MB ``Authorization`` is never decoded; but ``FastAPI(dependencies=[...])`` (and router- /
    include-level ones) are solved by the route before ``McpEndpoint.handle`` runs: an app's
    own token dependency receives the 200 KB header, then the 431 is sent."""
    from conftest import make_router, open_client  # noqa: PLC0415
    from fastapi import Header  # noqa: PLC0415

    seen: list[int] = []

    def app_auth(authorization: str = Header("")) -> None:
        seen.append(len(authorization))

    router = make_router()

    @router.tool()
    async def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    app = FastAPI(dependencies=[Depends(app_auth)])
    app.include_router(router)
    async with open_client(app) as client:
        response = await client.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"accept": ACCEPT_BOTH, "authorization": "Bearer " + "a" * 200_000},
        )
    assert response.status_code == 431
    assert seen == [], f"the app's dependency read a {seen[0]}-byte Authorization before the 431"
