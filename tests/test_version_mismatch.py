"""2025 era: a session's requests must carry the version it negotiated in ``MCP-Protocol-Version``
(or none). A served version that differs is refused 400 ``-32600`` (``ProtocolVersionMismatchError``,
``data.negotiated``), on POST (single and batch), GET and DELETE alike; the session survives.

Spec 2025-11-25 ``basic/transports`` §Protocol Version Header: the header SHOULD be the negotiated
version, and an invalid or unsupported one MUST get 400. The official SDKs check only that the
header is a version they serve (their transports do not know the session's version), so they
serve such a request in the negotiated version while the client believes another: here the
server knows the session's version, and a version the session does not speak is unsupported
for it. Conforming clients always send the negotiated version (the official Python client does:
tests/test_clients.py).
"""

from __future__ import annotations

import json

import httpx
import pytest
from conftest import ACCEPT_BOTH, LEGACY, Wire, asgi_exchange, make_app, make_router, open_client, rpc
from fastapi import FastAPI

from fastapi_mcp_ctx.errors import ProtocolVersionMismatchError, UnsupportedVersionHeaderError

OLDER = "2025-06-18"


def app_with_tool() -> FastAPI:
    router = make_router()

    @router.tool()
    async def echo(text: str) -> str:
        """Echo."""
        return text

    return make_app(router)


def assert_mismatch(response: httpx.Response, requested: str, negotiated: str) -> None:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == -32600
    assert error["data"]["reason"] == "protocol_version_mismatch"
    assert error["data"]["negotiated"] == negotiated and error["data"]["requested"] == requested
    assert negotiated in error["message"] and "hint" in error["data"]["recovery"]


@pytest.mark.parametrize(("negotiated", "sent"), [(LEGACY, OLDER), (OLDER, LEGACY), ("2025-03-26", LEGACY)])
async def test_a_served_version_other_than_the_negotiated_one_is_400_on_post_get_and_delete(negotiated: str, sent: str) -> None:
    app = app_with_tool()
    async with open_client(app) as client:
        wire = Wire(client)
        session = await wire.initialize(negotiated)
        call = rpc("tools/call", {"name": "echo", "arguments": {"text": "x"}}, 7)
        mismatched = {"mcp-session-id": session, "mcp-protocol-version": sent}
        response = await wire.post(call, mismatched)
        assert_mismatch(response, sent, negotiated)
        assert response.json()["id"] == 7
        assert_mismatch(await wire.post(rpc("notifications/initialized", {}, None), mismatched), sent, negotiated)
        assert_mismatch(await client.delete("/mcp", headers=mismatched), sent, negotiated)
        get_headers = {**mismatched, "accept": "text/event-stream"}
        async with asgi_exchange(app, "GET", headers=get_headers) as get:
            assert get.status == 400
        # The session is intact: the negotiated version, or no header (assume the negotiated one), is served.
        for headers in ({"mcp-session-id": session, "mcp-protocol-version": negotiated}, {"mcp-session-id": session}):
            served = await wire.post(call, headers)
            assert served.status_code == 200, served.text
            assert "x" in served.text


async def test_a_batch_in_a_2025_03_26_session_with_another_version_is_refused_whole() -> None:
    async with open_client(app_with_tool()) as client:
        wire = Wire(client)
        session = await wire.initialize("2025-03-26")
        batch = [rpc("tools/list", {}, 1), rpc("ping", {}, 2)]
        headers = {"content-type": "application/json", "accept": ACCEPT_BOTH, "mcp-session-id": session, "mcp-protocol-version": OLDER}
        response = await client.post("/mcp", content=json.dumps(batch).encode(), headers=headers)
        assert_mismatch(response, OLDER, "2025-03-26")
        headers["mcp-protocol-version"] = "2025-03-26"
        served = await client.post("/mcp", content=json.dumps(batch).encode(), headers=headers)
        assert served.status_code == 200, served.text


async def test_an_unserved_version_keeps_its_own_error_naming_every_served_version() -> None:
    async with open_client(app_with_tool()) as client:
        wire = Wire(client)
        session = await wire.initialize(LEGACY)
        response = await wire.post(rpc("tools/list", {}, 3), {"mcp-session-id": session, "mcp-protocol-version": "1999-01-01"})
        assert response.status_code == 400
        error = response.json()["error"]
        assert error["data"]["reason"] == "unsupported_version" and len(error["data"]["supported"]) > 1


def test_the_mismatch_error_is_an_unsupported_version_header_error() -> None:
    exc = ProtocolVersionMismatchError(OLDER, LEGACY)
    assert isinstance(exc, UnsupportedVersionHeaderError)
    assert exc.http_status == 400 and exc.code == -32600
    assert str(exc) == exc.message and LEGACY in str(exc)
