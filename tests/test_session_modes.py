"""``MCP_SESSION_MODE`` = ``stateful`` | ``stateless`` | ``auto``, ``require_session_mode`` and
``expose_stateless_session_id`` (spec 2025-11-25 ``basic/transports`` §Session Management).

``auto`` issues a session on ``initialize``; a 2025 request that names a session is served in
it (an unknown one is 404), a request that names none is served alone, as in ``stateless``,
and its ``ctx.send_request`` fails at once.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from conftest import ACCEPT_BOTH, LEGACY, Wire, make_app, mcp_settings, open_client, result_of, rpc, tool_text
from fastapi import Depends, FastAPI

from fastapi_mcp_ctx import Context, McpRouter, McpSettings, mcp_context
from fastapi_mcp_ctx.errors import ConfigurationError

UNKNOWN = "0f" * 16
MODES = ["stateful", "stateless", "auto"]


def build(mode: str, **kwargs: Any) -> tuple[FastAPI, McpRouter]:
    router = McpRouter(settings=mcp_settings(session_mode=mode), **kwargs)

    @router.tool()
    async def who(ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """Report the session this call sees."""
        return {"session": ctx.session_id, "capabilities": dict(ctx.client_capabilities or {}), "version": ctx.protocol_version}

    @router.tool()
    async def ping_client(ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """Ping the client (30 s timeout)."""
        return await ctx.send_request("ping", timeout=30)

    return make_app(router), router


async def initialize(wire: Wire) -> tuple[int, str | None]:
    params = {"protocolVersion": LEGACY, "capabilities": {"roots": {}}, "clientInfo": {"name": "pytest", "version": "1"}}
    response = await wire.post(rpc("initialize", params, 0))
    assert response.status_code == 200
    return response.status_code, response.headers.get("mcp-session-id")


# status of: initialize issues a session | tools/list without a session id | with an unknown id | GET without | DELETE without
MATRIX = {
    "stateful": (True, 400, 404, 400, 400),
    "stateless": (False, 200, 200, 405, 405),
    "auto": (True, 200, 404, 400, 400),
}


@pytest.mark.parametrize("mode", MODES)
async def test_the_session_mode_matrix(mode: str) -> None:
    issues, without, unknown, get_without, delete_without = MATRIX[mode]
    app, _ = build(mode)
    async with open_client(app) as client:
        wire = Wire(client)
        _, session = await initialize(wire)
        assert (session is not None) == issues
        assert (await wire.legacy("tools/list", session=None, check=False)).status_code == without
        response = await wire.legacy("tools/list", session=UNKNOWN, check=False)
        assert response.status_code == unknown
        if unknown == 200:
            assert "mcp-session-id" not in response.headers  # stateless: an id sent is not ours, not echoed
        get = await client.get("/mcp", headers={"accept": "text/event-stream", "mcp-protocol-version": LEGACY})
        assert get.status_code == get_without
        if get_without == 405:
            assert get.headers["allow"] == "POST"
        assert (await client.delete("/mcp", headers={"mcp-protocol-version": LEGACY})).status_code == delete_without
        if session is not None:
            served = await wire.legacy("tools/call", {"name": "who", "arguments": {}}, session=session)
            assert served.headers["mcp-session-id"] == session
            seen = result_of(served)["structuredContent"]
            assert seen == {"session": session, "capabilities": {"roots": {}}, "version": LEGACY}
            assert (await client.delete("/mcp", headers=wire.legacy_headers(session))).status_code == 200
            assert (await wire.legacy("tools/list", session=session, check=False)).status_code == 404


@pytest.mark.parametrize("mode", ["stateless", "auto"])
async def test_a_request_without_a_session_is_served_alone(mode: str) -> None:
    app, _ = build(mode)
    async with open_client(app) as client:
        wire = Wire(client)
        await initialize(wire)
        response = await wire.legacy("tools/call", {"name": "who", "arguments": {}}, session=None)
        assert "mcp-session-id" not in response.headers
        assert result_of(response)["structuredContent"] == {"session": None, "capabilities": {}, "version": LEGACY}
        headerless = await wire.legacy("tools/call", {"name": "who", "arguments": {}}, session=None, version=None)
        assert result_of(headerless)["structuredContent"]["version"] == "2025-03-26"  # spec: assume 2025-03-26


@pytest.mark.parametrize("mode", ["stateless", "auto"])
async def test_send_request_without_a_session_fails_at_once(mode: str) -> None:
    app, router = build(mode)
    async with open_client(app) as client:
        wire = Wire(client)
        started = time.monotonic()
        response = await wire.legacy("tools/call", {"name": "ping_client", "arguments": {}}, session=None)
    assert time.monotonic() - started < 15  # not the 60 s server-request timeout
    assert response.headers["content-type"] == "application/json"
    result = result_of(response)
    assert result["isError"] is True
    text = tool_text(result)
    assert "has no session" in text and "MCP_SESSION_MODE=stateful or auto" in text
    assert len(router.pending) == 0


# -- require_session_mode -------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "required"), [("stateless", "stateful"), ("auto", "stateful"), ("stateful", "stateless")])
def test_a_required_mode_that_differs_refuses_to_start(mode: str, required: Any) -> None:
    with pytest.raises(ConfigurationError) as info:
        McpRouter(settings=mcp_settings(session_mode=mode), require_session_mode=required)
    message = info.value.message
    assert f"MCP_SESSION_MODE={required}" in message and repr(mode) in message and "require_session_mode" in message


def test_the_required_mode_is_checked_against_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_SESSION_MODE", "stateless")
    with pytest.raises(ConfigurationError, match="MCP_SESSION_MODE=stateful"):
        McpRouter(settings=McpSettings(), require_session_mode="stateful")
    monkeypatch.setenv("MCP_SESSION_MODE", "stateful")
    assert McpRouter(settings=McpSettings(), require_session_mode="stateful").settings.session_mode == "stateful"


@pytest.mark.parametrize("mode", MODES)
def test_a_matching_required_mode_starts(mode: Any) -> None:
    assert McpRouter(settings=mcp_settings(session_mode=mode), require_session_mode=mode).settings.session_mode == mode


# -- expose_stateless_session_id --------------------------------------------------------------------


async def sessions_seen(app: FastAPI, count: int = 2, **kwargs: Any) -> list[Any]:
    async with open_client(app) as client:
        wire = Wire(client)
        seen: list[Any] = []
        for _ in range(count):
            response = await wire.legacy("tools/call", {"name": "who", "arguments": {}}, session=None, **kwargs)
            assert "mcp-session-id" not in response.headers
            seen.append(result_of(response)["structuredContent"]["session"])
        return seen


@pytest.mark.parametrize("mode", ["stateless", "auto"])
async def test_stateless_session_id_is_hidden_by_default(mode: str) -> None:
    assert await sessions_seen(build(mode)[0]) == [None, None]


@pytest.mark.parametrize("mode", ["stateless", "auto"])
async def test_exposed_stateless_session_id_is_a_fresh_token_per_request(mode: str) -> None:
    app = make_app(router := McpRouter(settings=mcp_settings(session_mode=mode, expose_stateless_session_id=True)))

    @router.tool()
    async def who(ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """Report the session."""
        return {"session": ctx.session_id}

    first, second = await sessions_seen(app)
    assert re.fullmatch(r"[0-9a-f]{32}", first) and re.fullmatch(r"[0-9a-f]{32}", second) and first != second
    assert await router.sessions.get(first) is None  # a token, not a session: nothing was stored


async def test_the_router_argument_overrides_the_setting() -> None:
    on = build("stateless", expose_stateless_session_id=True)[0]
    assert all(isinstance(s, str) for s in await sessions_seen(on))
    off = McpRouter(settings=mcp_settings(session_mode="stateless", expose_stateless_session_id=True), expose_stateless_session_id=False)
    assert off.settings.expose_stateless_session_id is False


async def test_exposure_never_applies_to_2026_or_to_real_sessions() -> None:
    app, _ = build("auto", expose_stateless_session_id=True)
    async with open_client(app) as client:
        wire = Wire(client)
        modern = await wire.modern("tools/call", {"name": "who", "arguments": {}})
        assert result_of(modern)["structuredContent"]["session"] is None
        _, session = await initialize(wire)
        in_session = await wire.legacy("tools/call", {"name": "who", "arguments": {}}, session=session)
        assert result_of(in_session)["structuredContent"]["session"] == session


async def test_stateless_initialize_carries_no_session_and_later_requests_need_none() -> None:
    app, _ = build("stateless")
    async with open_client(app) as client:
        body = rpc("initialize", {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}, 1)
        response = await client.post("/mcp", content=json.dumps(body), headers={"content-type": "application/json", "accept": ACCEPT_BOTH})
        assert response.status_code == 200 and "mcp-session-id" not in response.headers
