"""``MCP_AUTH_MODE=jwt`` / ``oauth`` against a real loopback JWKS server (tests/jwt_support.py).

Every bad token of known-faults B30 gets 401 with ``error="invalid_token"`` and the RFC 9728
``resource_metadata`` (B54); a key published after start-up passes after exactly one refetch;
known keys survive an unreachable provider; tenants never read each other's state; a missing
scope is 403 ``insufficient_scope`` (B54) and hides the tool; the metadata is served at both
paths, at the app's root whatever the router's prefix.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import jwt
import pytest
from conftest import Wire, error_of, mcp_settings, open_client, result_of
from fastapi import Depends, FastAPI, HTTPException, Security
from fastapi.security import SecurityScopes
from jwt_support import METADATA_URL, RESOURCE, KeyServer, RsaKey, b64, claims, key_server, unsigned

from fastapi_mcp_ctx import Context, McpRouter, Principal, mcp_context
from fastapi_mcp_ctx.errors import ConfigurationError

ISSUER = "https://idp.example.test"


@pytest.fixture(scope="module")
def rsa_key() -> RsaKey:
    return RsaKey.generate("k1")


@pytest.fixture(scope="module")
def other_key() -> RsaKey:
    return RsaKey.generate("k2")


@pytest.fixture
def idp(rsa_key: RsaKey) -> Iterator[KeyServer]:
    with key_server(rsa_key) as server:
        yield server


def jwt_router(idp: KeyServer, **overrides: Any) -> McpRouter:
    values: dict[str, Any] = {
        "auth_mode": "jwt",
        "jwt_jwks_url": idp.jwks_url,
        "jwt_issuer": ISSUER,
        "resource_url": RESOURCE,
        "jwt_jwks_refetch_seconds": 0.0,
    }
    values.update(overrides)
    router = McpRouter(settings=mcp_settings(**values))

    @router.tool()
    async def whoami(ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """Who is calling."""
        auth: Principal = ctx.auth
        return {"sub": auth.subject, "tenant": ctx.tenant_id, "client": auth.client_id, "scopes": sorted(auth.scopes)}

    @router.tool(scopes=["notes:write"])
    async def write_note(text: str, ctx: Context = Depends(mcp_context)) -> str:
        """Store a note in the caller's tenant."""
        await ctx.state.set("note", text)
        return text

    @router.tool()
    async def read_note(ctx: Context = Depends(mcp_context)) -> str | None:
        """The caller's tenant's note."""
        return await ctx.state.get("note", str)

    return router


def app_of(router: McpRouter, prefix: str = "") -> FastAPI:
    app = FastAPI()
    app.include_router(router, prefix=prefix)
    return app


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def challenge_params(response: httpx.Response) -> dict[str, str]:
    value = response.headers["www-authenticate"]
    assert value.startswith("Bearer "), value
    params: dict[str, str] = {}
    for part in value[len("Bearer ") :].split(", "):
        name, _, quoted = part.partition("=")
        params[name] = quoted.strip('"')
    return params


async def list_tools(client: httpx.AsyncClient, era: str, headers: dict[str, str]) -> httpx.Response:
    wire = Wire(client)
    if era == "legacy":
        return await wire.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}, headers)
    return await wire.modern("tools/list", {}, headers=headers, check=False)


async def test_no_token_is_401_with_the_metadata_challenge_in_both_eras(idp: KeyServer, era: str) -> None:
    async with open_client(app_of(jwt_router(idp))) as client:
        response = await list_tools(client, era, {})
    assert response.status_code == 401, response.text
    params = challenge_params(response)
    assert params == {"scope": "notes:write", "resource_metadata": METADATA_URL}
    assert error_of(response)["code"] == -32001


def bad_tokens(rsa_key: RsaKey, other_key: RsaKey) -> dict[str, str]:
    good = claims(ISSUER)
    signed = rsa_key.sign(good)
    header, payload, signature = signed.split(".")
    tampered_payload = b64(jwt.utils.base64url_decode(payload).replace(b"tenant-a", b"tenant-b"))
    return {
        "wrong audience": rsa_key.sign(claims(ISSUER, aud="https://other.example.test")),
        "audience missing": rsa_key.sign(claims(ISSUER, aud=None)),
        "wrong issuer": rsa_key.sign(claims("https://evil.example.test")),
        "expired": rsa_key.sign(claims(ISSUER, exp=int(time.time()) - 3600)),
        "not yet valid": rsa_key.sign(claims(ISSUER, nbf=int(time.time()) + 3600)),
        "issued in the future": rsa_key.sign(claims(ISSUER, iat=int(time.time()) + 3600)),
        "no exp": rsa_key.sign(claims(ISSUER, exp=None)),
        "no sub": rsa_key.sign(claims(ISSUER, sub=None)),
        "alg none": unsigned(good),
        "alg null": unsigned(good, alg=None),
        "HS256 keyed with the RSA public key": _hs256_with(rsa_key.public_pem(), good),
        "unknown kid": other_key.sign(good),
        "signed by another key under k1": other_key.sign(good, kid="k1"),
        "tampered payload": f"{header}.{tampered_payload}.{signature}",
        "tampered signature": f"{header}.{payload}.{signature[:-4]}AAAA",
        "not a jwt": "abc.def",
    }


def _hs256_with(secret: bytes, payload: dict[str, Any]) -> str:
    """Algorithm confusion: HMAC-SHA256 keyed with the RSA public key's PEM (pyjwt refuses to
    encode that, so the signature is made by hand)."""
    import hashlib
    import hmac
    import json

    head = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "k1"}).encode())
    body = b64(json.dumps(payload).encode())
    signature = hmac.new(secret, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64(signature)}"


CASES = [
    "wrong audience", "audience missing", "wrong issuer", "expired", "not yet valid", "issued in the future", "no exp",
    "no sub", "alg none", "alg null", "HS256 keyed with the RSA public key", "unknown kid", "signed by another key under k1",
    "tampered payload", "tampered signature", "not a jwt",
]  # fmt: skip


@pytest.mark.parametrize("case", CASES)
async def test_b30_every_bad_token_is_401_invalid_token(idp: KeyServer, rsa_key: RsaKey, other_key: RsaKey, case: str, era: str) -> None:
    token = bad_tokens(rsa_key, other_key)[case]
    async with open_client(app_of(jwt_router(idp, jwt_leeway=5.0))) as client:
        response = await list_tools(client, era, bearer(token))
    assert response.status_code == 401, (case, response.text)
    assert challenge_params(response) == {"error": "invalid_token", "resource_metadata": METADATA_URL}
    body = error_of(response)
    assert body["code"] == -32001 and body["data"]["reason"] == "invalid_token"
    assert token not in response.text


NUMERIC_DATE_CASES = [
    ("exp", "1999999999", "a string"), ("exp", True, "a boolean"), ("exp", None, "null"), ("exp", float("inf"), "finite"),
    ("nbf", "1000", "a string"), ("nbf", False, "a boolean"), ("iat", "1000", "a string"), ("iat", True, "a boolean"),
    ("iat", [1000], "an array"), ("nbf", float("nan"), "finite"),
]  # fmt: skip


@pytest.mark.parametrize(("claim", "value", "named"), NUMERIC_DATE_CASES)
async def test_a_numeric_date_claim_that_is_not_a_json_number_is_401_naming_it(
    idp: KeyServer, rsa_key: RsaKey, claim: str, value: Any, named: str, era: str
) -> None:
    """RFC 7519 §2: exp / nbf / iat are JSON numbers; pyjwt alone reads "1999999999" as one
    (a far-future string exp passed) and lets a boolean nbf / iat through."""
    values = claims(ISSUER)
    values[claim] = value  # None stays: an explicit null
    token = rsa_key.sign(values)
    async with open_client(app_of(jwt_router(idp))) as client:
        response = await list_tools(client, era, bearer(token))
    assert response.status_code == 401, response.text
    params = challenge_params(response)
    assert params["error"] == "invalid_token"
    assert f"the {claim} claim must be a" in params["error_description"] and named in params["error_description"]
    assert "RFC 7519 NumericDate" in error_of(response)["message"]


async def test_a_fractional_numeric_date_is_a_json_number_and_passes(idp: KeyServer, rsa_key: RsaKey) -> None:
    now = time.time()
    token = rsa_key.sign(claims(ISSUER, exp=now + 300.5, nbf=now - 1.25, iat=now - 1.25))
    async with open_client(app_of(jwt_router(idp))) as client:
        response = await Wire(client).call_tool("modern", "whoami", headers=bearer(token))
    assert result_of(response)["structuredContent"]["sub"] == "alice"


async def test_a_valid_token_fills_ctx_auth_and_tenant(idp: KeyServer, rsa_key: RsaKey, era: str) -> None:
    token = rsa_key.sign(claims(ISSUER, scope="notes:read notes:write"))
    async with open_client(app_of(jwt_router(idp))) as client:
        response = await Wire(client).call_tool(era, "whoami", headers=bearer(token))
    assert response.status_code == 200, response.text
    assert result_of(response)["structuredContent"] == {
        "sub": "alice", "tenant": "tenant-a", "client": "client-1", "scopes": ["notes:read", "notes:write"]
    }  # fmt: skip


async def test_the_tenant_claim_is_configurable_and_scp_lists_are_read(idp: KeyServer, rsa_key: RsaKey) -> None:
    token = rsa_key.sign(claims(ISSUER, tid=None, org="acme", scope=None, scp=["a", "b"], client_id=None, azp="web"))
    async with open_client(app_of(jwt_router(idp, jwt_tenant_claim="org"))) as client:
        response = await Wire(client).call_tool("modern", "whoami", headers=bearer(token))
    assert result_of(response)["structuredContent"] == {"sub": "alice", "tenant": "acme", "client": "web", "scopes": ["a", "b"]}


async def test_a_key_published_after_start_up_passes_after_one_refetch(idp: KeyServer, rsa_key: RsaKey, other_key: RsaKey) -> None:
    router = jwt_router(idp, jwt_jwks_refetch_seconds=30.0)
    now = [1000.0]  # the JWKS cache's clock, moved by the test (no wall-clock margin)
    gate = router.endpoint.gate
    assert gate is not None and gate.verifier is not None and gate.verifier.jwks is not None
    gate.verifier.jwks._clock = lambda: now[0]  # pyright: ignore[reportPrivateUsage]
    async with open_client(app_of(router)) as client:
        wire = Wire(client)
        first = await wire.call_tool("modern", "whoami", headers=bearer(rsa_key.sign(claims(ISSUER))))
        assert first.status_code == 200 and idp.hits["/jwks.json"] == 1
        now[0] += 31.0  # past the refetch interval
        idp.keys.append(other_key)  # the provider rotates in k2
        rotated = await wire.call_tool("modern", "whoami", headers=bearer(other_key.sign(claims(ISSUER, sub="bob"))))
        assert rotated.status_code == 200, rotated.text
        assert result_of(rotated)["structuredContent"]["sub"] == "bob"
        assert idp.hits["/jwks.json"] == 2
        for n in range(5):  # made-up key ids of one new shape within the interval: one fetch for that shape
            forged = RsaKey(f"bogus-{n}", other_key.private).sign(claims(ISSUER))
            refused = await wire.call_tool("modern", "whoami", headers=bearer(forged), check=False)
            assert refused.status_code == 401
        assert idp.hits["/jwks.json"] == 3


async def test_known_keys_are_kept_while_the_provider_is_unreachable(idp: KeyServer, rsa_key: RsaKey) -> None:
    router = jwt_router(idp, jwt_jwks_cache_seconds=0.05, jwt_cache_seconds=0.0)
    async with open_client(app_of(router)) as client:
        wire = Wire(client)
        token = rsa_key.sign(claims(ISSUER))
        assert (await wire.call_tool("modern", "whoami", headers=bearer(token))).status_code == 200
        idp.down = True
        time.sleep(0.1)  # the cached set is stale: the refetch fails, the known key still serves
        again = await wire.call_tool("modern", "whoami", headers=bearer(token))
        assert again.status_code == 200, again.text
        await wait_for_hits(idp, 2)  # the refresh ran (in the background) and failed


async def wait_for_hits(idp: KeyServer, count: int, timeout: float = 5.0) -> None:
    """Wait until the JWKS was fetched ``count`` times (a background refresh is under way)."""
    with anyio.fail_after(timeout):
        while idp.hits["/jwks.json"] < count:
            await anyio.sleep(0.01)


async def test_an_expired_key_set_serves_while_one_background_refresh_runs(idp: KeyServer, rsa_key: RsaKey, other_key: RsaKey) -> None:
    """Stale-while-revalidate: past jwt_jwks_cache_seconds no request waits on a slow provider;
    one refresh runs; a token for a key published since waits for that refresh (no second fetch)."""
    router = jwt_router(idp, jwt_jwks_cache_seconds=0.2, jwt_cache_seconds=0.0)
    async with open_client(app_of(router)) as client:
        wire = Wire(client)
        token = rsa_key.sign(claims(ISSUER))
        assert (await wire.call_tool("modern", "whoami", headers=bearer(token))).status_code == 200
        assert idp.hits["/jwks.json"] == 1
        time.sleep(0.25)  # the key set is stale now
        idp.delay = 1.5  # and the provider slow
        idp.keys.append(other_key)
        started = time.monotonic()
        for _ in range(5):
            assert (await wire.call_tool("modern", "whoami", headers=bearer(token))).status_code == 200
        assert time.monotonic() - started < 1.0, "a request waited on the provider"
        rotated = await wire.call_tool("modern", "whoami", headers=bearer(other_key.sign(claims(ISSUER, sub="bob"))))
        assert rotated.status_code == 200, rotated.text
        assert result_of(rotated)["structuredContent"]["sub"] == "bob"
        assert idp.hits["/jwks.json"] == 2  # one background refresh served all of them
        idp.delay = 0.0
        for n in range(3):  # fresh again, no refresh under way: the unknown-kid rule refetches inline
            forged = RsaKey(f"bogus-{n}", other_key.private).sign(claims(ISSUER))
            assert (await wire.call_tool("modern", "whoami", headers=bearer(forged), check=False)).status_code == 401
    assert idp.hits["/jwks.json"] == 2 + 3  # jwt_router's refetch interval is 0: one refetch per unknown kid
    # (the interval's bound on those refetches: test_a_key_published_after_start_up_passes_after_one_refetch)


async def test_no_key_ever_fetched_is_503_not_401(idp: KeyServer, rsa_key: RsaKey) -> None:
    idp.down = True
    async with open_client(app_of(jwt_router(idp))) as client:
        response = await Wire(client).call_tool("modern", "whoami", headers=bearer(rsa_key.sign(claims(ISSUER))), check=False)
    assert response.status_code == 503, response.text
    assert "retry-after" in response.headers
    assert error_of(response)["data"]["reason"] == "identity_provider_unavailable"


async def test_a_tenant_a_token_never_reads_tenant_b_state(idp: KeyServer, rsa_key: RsaKey, era: str) -> None:
    app = app_of(jwt_router(idp))
    writer_a = bearer(rsa_key.sign(claims(ISSUER, scope="notes:write")))
    writer_b = bearer(rsa_key.sign(claims(ISSUER, sub="bob", tid="tenant-b", scope="notes:write")))
    async with open_client(app) as a_client, open_client(app) as b_client:
        a, b = Wire(a_client), Wire(b_client)
        assert (await a.call_tool(era, "write_note", {"text": "a-secret"}, headers=writer_a)).status_code == 200
        b_read = await b.call_tool(era, "read_note", headers=writer_b)
        assert result_of(b_read)["structuredContent"] == {"result": None}
        await b.call_tool(era, "write_note", {"text": "b-note"}, headers=writer_b)
        a_read = await a.call_tool(era, "read_note", headers=writer_a)
        assert result_of(a_read)["structuredContent"] == {"result": "a-secret"}


async def test_a_token_without_tenant_claim_cannot_use_state(idp: KeyServer, rsa_key: RsaKey) -> None:
    token = bearer(rsa_key.sign(claims(ISSUER, tid=None)))
    async with open_client(app_of(jwt_router(idp))) as client:
        response = await Wire(client).call_tool("modern", "read_note", headers=token, check=False)
    assert response.status_code == 403, response.text


async def test_b54_missing_scope_is_403_insufficient_scope_and_the_tool_is_hidden(idp: KeyServer, rsa_key: RsaKey, era: str) -> None:
    reader = bearer(rsa_key.sign(claims(ISSUER, scope="notes:read")))
    writer = bearer(rsa_key.sign(claims(ISSUER, scope="notes:read notes:write")))
    async with open_client(app_of(jwt_router(idp))) as client, open_client(app_of(jwt_router(idp))) as client2:
        wire = Wire(client)
        refused = await wire.call_tool(era, "write_note", {"text": "x"}, headers=reader, check=False)
        assert refused.status_code == 403, refused.text
        assert challenge_params(refused) == {"error": "insufficient_scope", "scope": "notes:write", "resource_metadata": METADATA_URL}
        error = error_of(refused)
        assert error["code"] == -32003 and error["data"]["reason"] == "insufficient_scope"
        assert error["data"]["requiredScopes"] == ["notes:write"]
        listed = await wire.request(era, "tools/list", {}, headers=reader)
        assert [t["name"] for t in result_of(listed)["tools"]] == ["whoami", "read_note"]
        wire2 = Wire(client2)
        allowed = await wire2.call_tool(era, "write_note", {"text": "x"}, headers=writer)
        assert allowed.status_code == 200 and result_of(allowed)["isError"] is False
        listed = await wire2.request(era, "tools/list", {}, headers=writer)
        assert [t["name"] for t in result_of(listed)["tools"]] == ["whoami", "write_note", "read_note"]


async def test_listing_every_tool_when_hiding_is_off(idp: KeyServer, rsa_key: RsaKey) -> None:
    reader = bearer(rsa_key.sign(claims(ISSUER)))
    async with open_client(app_of(jwt_router(idp, hide_unauthorized_tools=False))) as client:
        listed = await Wire(client).modern("tools/list", {}, headers=reader)
    assert [t["name"] for t in result_of(listed)["tools"]] == ["whoami", "write_note", "read_note"]


@pytest.mark.parametrize("prefix", ["", "/api"])
async def test_b54_metadata_at_the_rfc9728_path_at_the_root_whatever_the_prefix(idp: KeyServer, prefix: str) -> None:
    app = app_of(jwt_router(idp), prefix=prefix)
    async with open_client(app) as client:
        challenge = await client.post(f"{prefix}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert challenge.status_code == 401
        assert challenge_params(challenge)["resource_metadata"] == METADATA_URL
        # RFC 9728 §3.3: the root document's resource would have to be the root; it is not served
        assert (await client.get("/.well-known/oauth-protected-resource")).status_code == 404
        for path in ("/.well-known/oauth-protected-resource/mcp",):
            response = await client.get(path, headers={"origin": "https://app.example.test"})
            assert response.status_code == 200, (path, response.text)
            assert response.json() == {
                "resource": RESOURCE,
                "authorization_servers": [ISSUER],
                "bearer_methods_supported": ["header"],
                "resource_name": "test-server",
                "scopes_supported": ["notes:write"],
            }
            assert response.headers["access-control-allow-origin"] == "*"
            preflight = await client.options(path, headers={"origin": "https://app.example.test", "access-control-request-method": "GET"})
            assert preflight.status_code == 204 and preflight.headers["access-control-allow-origin"] == "*"


@pytest.mark.parametrize("resource", ["https://mcp.example.test", "https://mcp.example.test/"])
async def test_a_root_resource_is_served_at_the_root_metadata_url(idp: KeyServer, resource: str) -> None:
    app = app_of(jwt_router(idp, resource_url=resource))
    async with open_client(app) as client:
        challenge = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert challenge_params(challenge)["resource_metadata"] == "https://mcp.example.test/.well-known/oauth-protected-resource"
        document = await client.get("/.well-known/oauth-protected-resource")
    assert document.status_code == 200 and document.json()["resource"] == resource


@pytest.mark.parametrize(
    ("resource", "aud"),
    [(RESOURCE, RESOURCE + "/"), (RESOURCE + "/", RESOURCE), (RESOURCE, RESOURCE), (RESOURCE + "/", RESOURCE + "/")],
    ids=["aud-slash", "resource-slash", "same", "both-slash"],
)
async def test_the_audience_matches_the_resource_with_or_without_a_trailing_slash(
    idp: KeyServer, rsa_key: RsaKey, resource: str, aud: str, era: str
) -> None:
    """Issue 24 item 13: ``aud = …/mcp/`` was refused under ``MCP_RESOURCE_URL = …/mcp``."""
    async with open_client(app_of(jwt_router(idp, resource_url=resource))) as client:
        response = await list_tools(client, era, bearer(rsa_key.sign(claims(ISSUER, aud=aud))))
        other = await list_tools(client, era, bearer(rsa_key.sign(claims(ISSUER, aud=RESOURCE + "x"))))
    assert response.status_code == 200, response.text
    assert other.status_code == 401


async def test_serve_metadata_installs_the_documents_before_any_mcp_request(idp: KeyServer) -> None:
    router = jwt_router(idp)
    app = app_of(router, prefix="/api")
    router.serve_metadata(app)
    async with open_client(app) as client:
        response = await client.get("/.well-known/oauth-protected-resource/mcp")
    assert response.status_code == 200 and response.json()["resource"] == RESOURCE


async def test_hs256_development_secret(rsa_key: RsaKey) -> None:
    secret = "s" * 32
    router = McpRouter(settings=mcp_settings(auth_mode="jwt", jwt_secret=secret, jwt_issuer=ISSUER, resource_url=RESOURCE))

    @router.tool()
    async def ping_me(ctx: Context = Depends(mcp_context)) -> str:
        """Subject."""
        return ctx.auth.subject

    async with open_client(app_of(router)) as client:
        wire = Wire(client)
        good = await wire.call_tool("modern", "ping_me", headers=bearer(jwt.encode(claims(ISSUER), secret, algorithm="HS256")))
        assert result_of(good)["structuredContent"] == {"result": "alice"}
        rs = await wire.call_tool("modern", "ping_me", headers=bearer(rsa_key.sign(claims(ISSUER))), check=False)
        assert rs.status_code == 401


async def test_oauth_mode_discovers_the_jwks_from_rfc8414_metadata(rsa_key: RsaKey) -> None:
    with key_server(rsa_key, issuer_path="/tenant1") as idp:
        issuer = idp.url + "/tenant1"
        router = McpRouter(settings=mcp_settings(auth_mode="oauth", oauth_issuer=issuer, resource_url=RESOURCE))

        @router.tool()
        async def sub(ctx: Context = Depends(mcp_context)) -> str:
            """Subject."""
            return ctx.auth.subject

        async with open_client(app_of(router)) as client:
            response = await Wire(client).call_tool("legacy", "sub", headers=bearer(rsa_key.sign(claims(issuer))))
            assert result_of(response)["structuredContent"] == {"result": "alice"}
            document = (await client.get("/.well-known/oauth-protected-resource/mcp")).json()
        assert idp.hits["/.well-known/oauth-authorization-server/tenant1"] == 1 and idp.hits["/jwks.json"] == 1
        assert document["authorization_servers"] == [issuer]


async def test_authenticate_wins_over_the_auth_mode(idp: KeyServer) -> None:
    async def anyone() -> Principal:
        return Principal(subject="custom", tenant_id="t")

    router = McpRouter(
        settings=mcp_settings(auth_mode="jwt", jwt_jwks_url=idp.jwks_url, jwt_issuer=ISSUER, resource_url=RESOURCE),
        authenticate=anyone,
    )

    @router.tool()
    async def sub(ctx: Context = Depends(mcp_context)) -> str:
        """Subject."""
        return ctx.auth.subject

    async with open_client(app_of(router)) as client:
        response = await Wire(client).call_tool("modern", "sub")
    assert result_of(response)["structuredContent"] == {"result": "custom"}
    assert idp.hits["/jwks.json"] == 0


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"resource_url": None}, "MCP_RESOURCE_URL"),
        ({"jwt_issuer": None}, "MCP_JWT_ISSUER"),
        ({"jwt_jwks_url": None}, "MCP_JWT_JWKS_URL"),
        ({"jwt_algorithms": ["none"]}, "must not contain 'none'"),
        ({"jwt_algorithms": ["RS256", "HS256"]}, "HMAC algorithms are refused"),
        ({"jwt_secret": "x" * 40}, "not both"),
        ({"jwt_jwks_url": "http://idp.example.test/jwks.json"}, "https://"),
        ({"jwt_jwks_url": None, "jwt_secret": "short"}, "at least 32 bytes"),
    ],
)
def test_misconfigurations_are_refused_at_start_up(idp: KeyServer, overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        jwt_router(idp, **overrides)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_official_client_with_a_bearer_token_in_both_eras(idp: KeyServer, rsa_key: RsaKey, mode: str) -> None:
    import anyio
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
    from serving import uvicorn_thread

    token = rsa_key.sign(claims(ISSUER, scope="notes:write"))
    with uvicorn_thread(app_of(jwt_router(idp))) as url:
        with anyio.fail_after(20):
            transport = streamable_http_client(url, http_client=create_mcp_http_client(headers=bearer(token)))
            async with Client(transport, mode=mode, cache=None) as client:
                names = [t.name for t in (await client.list_tools()).tools]
                assert names == ["whoami", "write_note", "read_note"]
                who = await client.call_tool("whoami", {})
                assert who.structured_content == {"sub": "alice", "tenant": "tenant-a", "client": "client-1", "scopes": ["notes:write"]}
                written = await client.call_tool("write_note", {"text": "n1"})
                assert written.is_error is False
                read = await client.call_tool("read_note", {})
                assert read.structured_content == {"result": "n1"}
        anonymous = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=5)
        assert anonymous.status_code == 401 and "resource_metadata=" in anonymous.headers["www-authenticate"]


def test_without_the_jwt_extra_the_mode_names_the_pip_install(idp: KeyServer, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "jwt", None)  # import jwt -> ModuleNotFoundError
    with pytest.raises(ConfigurationError, match=r'MCP_AUTH_MODE=jwt needs the .jwt. extra.*pip install "fastapi-mcp-ctx\[jwt\]"'):
        jwt_router(idp)


async def test_the_docs_example_runs_as_written(idp: KeyServer, rsa_key: RsaKey) -> None:
    """docs/auth.md "JWT mode": the block runs with the loopback JWKS in place of the IdP's."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "auth.md").read_text(encoding="utf-8")
    code = re.search(r"## JWT mode\n\n```python\n(.*?)```", text, re.DOTALL)
    assert code is not None
    source = code.group(1).replace("https://idp.example.com/.well-known/jwks.json", idp.jwks_url)
    source = source.replace("https://mcp.example.com/mcp", RESOURCE).replace("https://idp.example.com", ISSUER)
    namespace: dict[str, Any] = {"__name__": "docs_auth"}
    exec(compile(source, "docs/auth.md", "exec"), namespace)  # noqa: S102
    async with open_client(namespace["app"]) as client:
        wire = Wire(client)
        writer = bearer(rsa_key.sign(claims(ISSUER, scope="notes:write")))
        response = await wire.call_tool("modern", "add_note", {"text": "hi"}, headers=writer)
        assert result_of(response).get("structuredContent") == {"result": "hi"}, response.text
        refused = await wire.call_tool("modern", "add_note", {"text": "hi"}, headers=bearer(rsa_key.sign(claims(ISSUER))), check=False)
        assert refused.status_code == 403
        document = (await client.get("/.well-known/oauth-protected-resource/mcp")).json()
        assert document["scopes_supported"] == ["notes:write"] and document["resource"] == RESOURCE


async def test_a_verified_token_is_remembered_until_its_exp_only(idp: KeyServer, rsa_key: RsaKey, monkeypatch: pytest.MonkeyPatch) -> None:
    router = jwt_router(idp, jwt_leeway=0.0)
    verifier = router.endpoint.gate.verifier  # type: ignore[union-attr]
    full: list[str] = []
    original = verifier._verify  # pyright: ignore[reportPrivateUsage]

    async def counting(token: str) -> Any:
        full.append(token)
        return await original(token)

    monkeypatch.setattr(verifier, "_verify", counting)
    token = rsa_key.sign(claims(ISSUER, exp=int(time.time()) + 2))
    async with open_client(app_of(router)) as client:
        wire = Wire(client)
        for _ in range(3):
            assert (await wire.call_tool("modern", "whoami", headers=bearer(token))).status_code == 200
        assert len(full) == 1  # the signature was checked once
        forged = token[:-6] + ("A" * 6 if not token.endswith("A" * 6) else "B" * 6)
        assert (await wire.call_tool("modern", "whoami", headers=bearer(forged), check=False)).status_code == 401
        await anyio_sleep_until(int(time.time()) + 3)
        expired = await wire.call_tool("modern", "whoami", headers=bearer(token), check=False)
        assert expired.status_code == 401 and challenge_params(expired)["error"] == "invalid_token"


async def anyio_sleep_until(deadline: float) -> None:
    import anyio

    await anyio.sleep(max(0.0, deadline - time.time()))


async def test_a_jwks_redirect_to_plain_http_elsewhere_is_not_followed(idp: KeyServer, rsa_key: RsaKey) -> None:
    async with open_client(app_of(jwt_router(idp, jwt_jwks_url=idp.url + "/moved.json"))) as client:
        response = await Wire(client).call_tool("modern", "whoami", headers=bearer(rsa_key.sign(claims(ISSUER))), check=False)
    assert response.status_code == 503 and idp.hits["/moved.json"] == 1


async def test_authenticate_returning_none_gets_the_metadata_challenge_when_the_resource_is_set() -> None:
    async def nobody() -> Principal | None:
        return None

    router = McpRouter(settings=mcp_settings(resource_url=RESOURCE, jwt_issuer=ISSUER), authenticate=nobody)
    async with open_client(app_of(router)) as client:
        response = await Wire(client).modern("tools/list", {}, check=False)
        document = (await client.get("/.well-known/oauth-protected-resource/mcp")).json()
    assert response.status_code == 401
    assert challenge_params(response) == {"resource_metadata": METADATA_URL}
    assert document["resource"] == RESOURCE and document["authorization_servers"] == [ISSUER]


async def test_scopes_compose_with_a_security_dependency(idp: KeyServer, rsa_key: RsaKey) -> None:
    """``scopes=`` is checked by the framework; ``Security(dep, scopes=[...])`` still runs its own
    check (FastAPI ``SecurityScopes``): a caller needs both."""
    seen: list[list[str]] = []

    async def require(security_scopes: SecurityScopes, ctx: Context = Depends(mcp_context)) -> str:
        seen.append(security_scopes.scopes)
        if not set(security_scopes.scopes) <= ctx.auth.scopes:
            raise HTTPException(403, "needs " + security_scopes.scope_str)
        return ctx.auth.subject

    router = jwt_router(idp)

    @router.tool(scopes=["notes:write"])
    async def purge(user: str = Security(require, scopes=["notes:admin"])) -> str:
        """Purge every note."""
        return user

    def token(scope: str) -> dict[str, str]:
        return bearer(rsa_key.sign(claims(ISSUER, scope=scope)))

    async with open_client(app_of(router)) as client:
        wire = Wire(client)
        both = await wire.call_tool("modern", "purge", headers=token("notes:write notes:admin"))
        assert result_of(both).get("structuredContent") == {"result": "alice"}, both.text
        only_security = await wire.call_tool("modern", "purge", headers=token("notes:admin"), check=False)
        assert only_security.status_code == 403 and challenge_params(only_security)["error"] == "insufficient_scope"
        only_ours = await wire.call_tool("modern", "purge", headers=token("notes:write"), check=False)
        assert only_ours.status_code == 403 and "needs notes:admin" in only_ours.text
    assert seen == [["notes:admin"], ["notes:admin"]]  # the framework's refusal came before the dependency ran


async def test_b03_b04_sessions_follow_the_verified_principal_not_the_token_bytes(idp: KeyServer, rsa_key: RsaKey) -> None:
    async with open_client(app_of(jwt_router(idp))) as client:
        wire = Wire(client)
        await wire.initialize(headers=bearer(rsa_key.sign(claims(ISSUER))))
        refreshed = bearer(rsa_key.sign(claims(ISSUER, iat=int(time.time()) - 1, exp=int(time.time()) + 600)))
        same_caller = await wire.legacy("tools/call", {"name": "whoami", "arguments": {}}, headers=refreshed)
        assert result_of(same_caller)["structuredContent"]["sub"] == "alice"  # B04: a new token keeps the session
        other = bearer(rsa_key.sign(claims(ISSUER, sub="mallory")))
        hijack = await wire.legacy("tools/call", {"name": "whoami", "arguments": {}}, headers=other, check=False)
        assert hijack.status_code == 404  # B03: another subject's token never reaches the session
        other_tenant = bearer(rsa_key.sign(claims(ISSUER, tid="tenant-b")))
        assert (await wire.legacy("tools/list", {}, headers=other_tenant, check=False)).status_code == 404


@pytest.mark.parametrize(
    ("issuer", "advertised"),
    [("dev", []), ("https://idp.example.com/realm1", ["https://idp.example.com/realm1"]), ("urn:example:idp", [])],
)
def test_only_an_issuer_url_is_advertised_as_authorization_server(issuer: str, advertised: list[str]) -> None:
    """RFC 9728 ``authorization_servers`` lists issuer identifiers, which are URLs (RFC 8414 §2):
    the dev recipe's ``MCP_JWT_ISSUER=dev`` still checks ``iss`` but is not advertised."""
    from fastapi_mcp_ctx._auth.resource_metadata import metadata_document

    settings = mcp_settings(auth_mode="jwt", jwt_secret="s" * 32, jwt_issuer=issuer, resource_url="https://mcp.example.com/mcp")
    assert metadata_document(settings, [])["authorization_servers"] == advertised
