"""Small misconfigurations refused when the settings are read, with what to do; error bodies
that say the right thing (a too-many-streams 503 has its own reason, a 401 echoes the id)."""

from __future__ import annotations

import base64
import json

import pytest
from conftest import MODERN, modern_meta, open_client
from notify_app import build, listen_body, listen_headers, listening
from pydantic import ValidationError
from test_auth import build_app as build_auth_app

from fastapi_mcp_ctx import McpSettings


@pytest.mark.parametrize("key", ["", "short", "x" * 15, "k" * 42, "ab" * 31, "!" * 44, "A" * 43 + ","])
def test_empty_or_short_request_state_key_is_refused(key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_REQUEST_STATE_KEY", key)
    with pytest.raises(ValidationError) as info:
        McpSettings()
    text = str(info.value)
    assert "fastapi-mcp-ctx keygen" in text and "at least 32 bytes" in text
    assert ("is empty" in text) is (key == "" or key.endswith(","))
    assert not key or key not in text  # the key is never echoed


def test_a_32_byte_request_state_key_list_and_no_key_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    b64, hexed = "k" * 43, "0f" * 32
    settings = McpSettings(request_state_key=f"{b64}, {hexed}")
    assert settings.request_state_keys == (base64.urlsafe_b64decode(b64 + "="), bytes.fromhex(hexed))
    monkeypatch.delenv("MCP_REQUEST_STATE_KEY", raising=False)
    assert McpSettings().request_state_key is None and McpSettings().request_state_keys == ()


@pytest.mark.parametrize("path", ["nopath", "", "mcp/"])
def test_path_without_leading_slash_is_refused(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_PATH", path)
    with pytest.raises(ValidationError, match="must start with '/'"):
        McpSettings()


def test_path_with_leading_slash_is_kept() -> None:
    assert McpSettings(path="/v1/mcp").path == "/v1/mcp"


async def test_too_many_listen_streams_has_its_own_reason() -> None:
    app, _ = build(listen_max_streams=1)
    async with listening(app, 1, {"toolsListChanged": True}), open_client(app) as client:
        refused = await client.post("/mcp", content=listen_body(2, {"toolsListChanged": True}), headers=listen_headers())
    assert refused.status_code == 503
    error = refused.json()["error"]
    assert error["data"]["reason"] == "too_many_streams" and error["data"]["retryAfter"] == 5


@pytest.mark.parametrize("token", [None, "nope"], ids=["missing", "invalid"])
@pytest.mark.parametrize("request_id", [7, "req-7"])
async def test_401_echoes_the_request_id(token: str | None, request_id: int | str) -> None:
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    headers |= {"mcp-protocol-version": MODERN, "mcp-method": "tools/list"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/list", "params": {"_meta": modern_meta()}}
    async with open_client(build_auth_app()) as client:
        response = await client.post("/mcp", content=json.dumps(body), headers=headers)
    assert response.status_code == 401
    assert response.json()["id"] == request_id and response.json()["error"]["code"] == -32001


async def test_401_on_a_notification_or_garbage_has_a_null_id() -> None:
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    async with open_client(build_auth_app()) as client:
        for content in (b'{"jsonrpc":"2.0","method":"notifications/initialized"}', b"{not json"):
            response = await client.post("/mcp", content=content, headers=headers)
            assert response.status_code == 401 and response.json()["id"] is None


def test_word_valued_settings_ignore_case_and_the_log_floor_defaults_to_info(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MCP_LOG_LEVEL", "MCP_SESSION_MODE", "MCP_TELEMETRY", "MCP_TELEMETRY_DETAIL", "MCP_CACHE_SCOPE"):
        monkeypatch.delenv(name, raising=False)
    assert McpSettings().log_level == "info"
    monkeypatch.setenv("MCP_LOG_LEVEL", " WARNING ")
    monkeypatch.setenv("MCP_SESSION_MODE", "Auto")
    monkeypatch.setenv("MCP_TELEMETRY", "OFF")
    monkeypatch.setenv("MCP_TELEMETRY_DETAIL", "Required")
    monkeypatch.setenv("MCP_CACHE_SCOPE", "PUBLIC")
    settings = McpSettings()
    assert (settings.log_level, settings.session_mode, settings.telemetry) == ("warning", "auto", "off")
    assert (settings.telemetry_detail, settings.cache_scope) == ("required", "public")
    monkeypatch.setenv("MCP_LOG_LEVEL", "loud")
    with pytest.raises(ValidationError):
        McpSettings()
