"""Issue 24 item 3: a large bearer token costs no more than receiving it.

A token over ``MCP_JWT_MAX_TOKEN_BYTES`` (16 KiB) is refused before any of it is decoded; a token
within it is base64url-decoded once per segment and its header and payload JSON-parsed once (pyjwt's
``get_unverified_header``, an unverified ``decode`` and the verifying ``decode`` parsed it three
times); a header section over ``MCP_MAX_REQUEST_HEADER_BYTES`` is 431 before anything reads it.
Held structurally (decoder calls counted), never by timing; the costs are in ``bench/bench_tokens.py``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import jwt
import pytest
from conftest import Wire, error_of, mcp_settings, open_client, result_of
from fastapi import Depends, FastAPI
from jwt_support import RESOURCE, claims

from fastapi_mcp_ctx import Context, McpRouter, mcp_context
from fastapi_mcp_ctx._auth.bearer import JwtVerifier
from fastapi_mcp_ctx.errors import InvalidTokenError

ISSUER = "https://idp.example.test"
SECRET = "s" * 32


def settings(**overrides: Any) -> Any:
    return mcp_settings(**{"auth_mode": "jwt", "jwt_secret": SECRET, "jwt_issuer": ISSUER, "resource_url": RESOURCE, **overrides})


def token(padding: int = 0) -> str:
    return jwt.encode(claims(ISSUER, pad="x" * padding), SECRET, algorithm="HS256")


class Counted:
    """Counts calls of ``base64.urlsafe_b64decode`` and ``json.loads`` (what pyjwt decodes with too)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.b64 = 0
        self.json = 0
        self._b64: Callable[..., bytes] = base64.urlsafe_b64decode
        self._json: Callable[..., Any] = json.loads
        monkeypatch.setattr(base64, "urlsafe_b64decode", self._count_b64)
        monkeypatch.setattr(json, "loads", self._count_json)

    def _count_b64(self, *args: Any, **kwargs: Any) -> bytes:
        self.b64 += 1
        return self._b64(*args, **kwargs)

    def _count_json(self, *args: Any, **kwargs: Any) -> Any:
        self.json += 1
        return self._json(*args, **kwargs)


async def test_a_token_is_decoded_once_per_segment_and_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    verifier = JwtVerifier(settings(jwt_cache_seconds=0))
    good = token(padding=4000)
    counted = Counted(monkeypatch)
    principal = await verifier.verify(f"Bearer {good}")
    assert principal.subject == "alice"
    assert (counted.b64, counted.json) == (3, 2)  # header, payload, signature; header and payload
    counted.b64 = counted.json = 0
    forged = good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB")
    with pytest.raises(InvalidTokenError):
        await verifier.verify(f"Bearer {forged}")
    assert (counted.b64, counted.json) == (3, 2)  # a refusal reads no more than an acceptance


@pytest.mark.parametrize("size", [16 * 1024 + 1, 4 * 1024 * 1024])
async def test_a_token_over_the_bound_is_refused_before_any_decoding(size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    verifier = JwtVerifier(settings())
    big = token(padding=size)
    counted = Counted(monkeypatch)
    with pytest.raises(InvalidTokenError) as refused:
        await verifier.verify(f"Bearer {big}")
    assert (counted.b64, counted.json) == (0, 0)
    assert "longer than 16384 bytes" in refused.value.headers["WWW-Authenticate"]


async def test_the_token_bound_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    verifier = JwtVerifier(settings(jwt_max_token_bytes=64 * 1024))
    assert (await verifier.verify(f"Bearer {token(padding=40_000)}")).subject == "alice"
    with pytest.raises(InvalidTokenError):
        await JwtVerifier(settings()).verify(f"Bearer {token(padding=40_000)}")


def app(**overrides: Any) -> FastAPI:
    router = McpRouter(settings=settings(**overrides))

    @router.tool()
    async def whoami(ctx: Context = Depends(mcp_context)) -> str:
        """The subject."""
        return ctx.auth.subject

    application = FastAPI()
    application.include_router(router)
    return application


async def test_over_the_wire_a_large_token_is_401_naming_the_bound(era: str) -> None:
    async with open_client(app(max_request_header_bytes=64 * 1024)) as client:
        wire = Wire(client)
        if era == "legacy":
            response = await wire.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
                {"authorization": f"Bearer {token(padding=30_000)}"})  # fmt: skip
        else:
            response = await wire.call_tool(era, "whoami", headers={"authorization": f"Bearer {token(padding=30_000)}"}, check=False)
        assert response.status_code == 401
        assert 'error="invalid_token"' in response.headers["www-authenticate"]
        assert "longer than 16384 bytes" in response.headers["www-authenticate"]
        assert result_of(await wire.call_tool("modern", "whoami", headers={"authorization": f"Bearer {token()}"}))["structuredContent"] == {
            "result": "alice"
        }


@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
async def test_a_header_section_over_the_bound_is_431_before_anything_reads_it(method: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """uvicorn's httptools parser accepts headers of any size; the endpoint bounds them all."""
    verified: list[str | None] = []
    original = JwtVerifier.verify

    async def spy(self: JwtVerifier, authorization: str | None) -> Any:
        verified.append(authorization)
        return await original(self, authorization)

    monkeypatch.setattr(JwtVerifier, "verify", spy)
    async with open_client(app()) as client:
        headers = {"authorization": f"Bearer {'a' * (4 * 1024 * 1024)}", "accept": "application/json, text/event-stream"}
        if method == "POST":
            response = await Wire(client).call_tool("modern", "whoami", headers=headers, check=False)
        else:
            response = await client.request(method, "/mcp", headers={**headers, "mcp-session-id": "x"})
        assert response.status_code == 431, response.text
        error = error_of(response)
        assert error["data"]["reason"] == "headers_too_large" and "MCP_MAX_REQUEST_HEADER_BYTES" in error["message"]
        assert response.headers["connection"] == "close"
        assert verified == []
        spread = {f"x-filler-{i}": "v" * 1000 for i in range(40)}  # many small headers count together
        assert (await Wire(client).call_tool("modern", "whoami", headers=spread, check=False)).status_code == 431
