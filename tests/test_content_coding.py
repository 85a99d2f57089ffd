"""A POST body with a ``Content-Encoding`` this server does not decode is refused, never parsed
as if plain: 415 with a JSON-RPC error naming the coding and ``Accept-Encoding: identity``
(RFC 9110 §8.4, §15.5.16). ``identity`` (or an empty value) is the plain body and is served.
"""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest
from conftest import LEGACY, MODERN, Wire, assert_error, make_app, make_router, modern_meta, result_of, rpc


@pytest.fixture
def app() -> Any:
    router = make_router()

    @router.tool()
    async def echo(t: str) -> str:
        """Echo."""
        return t

    return make_app(router)


def body_of(era: str) -> dict[str, Any]:
    if era == "modern":
        return rpc("tools/list", {"_meta": modern_meta()}, 7)
    return rpc("ping", None, 7)


async def headers_of(wire: Wire, era: str) -> dict[str, str]:
    if era == "modern":
        return {"mcp-protocol-version": MODERN, "mcp-method": "tools/list"}
    await wire.initialize()
    return {"mcp-session-id": wire.session or "", "mcp-protocol-version": LEGACY}


@pytest.mark.parametrize("coding", ["gzip", "br", "deflate", "x-made-up", "identity, gzip", "GZIP"])
async def test_a_content_coding_other_than_identity_is_415_naming_it(wire: Wire, era: str, coding: str) -> None:
    headers = await headers_of(wire, era)
    plain = json.dumps(body_of(era)).encode()
    content = gzip.compress(plain) if "gzip" in coding.lower() else plain  # a plain body is refused too: never guessed
    response = await wire.post(None, {**headers, "content-encoding": coding}, content=content)
    error = assert_error(response, 415, -32600, request_id=None)
    refused = coding.split(",")[-1].strip().lower()
    assert refused in error["message"]
    assert error["data"]["contentEncoding"] == refused
    assert error["data"]["reason"] == "unsupported_content_encoding"
    assert response.headers["accept-encoding"] == "identity"


async def test_a_coding_in_a_second_copy_of_the_header_is_refused(wire: Wire) -> None:
    headers = [("content-type", "application/json"), ("accept", "application/json, text/event-stream")]
    headers += [("content-encoding", "identity"), ("content-encoding", "gzip")]
    response = await wire.client.post("/mcp", content=json.dumps(rpc("ping", None, 1)).encode(), headers=headers)
    assert_error(response, 415, -32600)
    assert response.headers["accept-encoding"] == "identity"


@pytest.mark.parametrize("coding", ["identity", "Identity", ""])
async def test_identity_is_the_plain_body_and_is_served(wire: Wire, era: str, coding: str) -> None:
    headers = await headers_of(wire, era)
    response = await wire.post(body_of(era), {**headers, "content-encoding": coding})
    assert response.status_code == 200, response.text
    assert isinstance(result_of(response), dict)
