"""What a new user meets first: settings refused with the variable's name, the sealing key a
shared store needs, and the development-token recipe of docs/auth.md working as written."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import Wire, mcp_settings, open_client, result_of
from fastapi import Depends, FastAPI

from fastapi_mcp_ctx import Context, McpRouter, get_settings, mcp_context
from fastapi_mcp_ctx.errors import ConfigurationError

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def fresh_settings() -> Any:
    get_settings.cache_clear()
    yield get_settings
    get_settings.cache_clear()


def test_bad_environment_values_name_each_variable_never_the_value(monkeypatch: pytest.MonkeyPatch, fresh_settings: Any) -> None:
    monkeypatch.setenv("MCP_SESSION_MODE", "bogus")
    monkeypatch.setenv("MCP_MAX_SESSIONS", "0")
    monkeypatch.setenv("MCP_JWT_SECRET", "s3cret-value-that-must-not-leak")
    monkeypatch.setenv("MCP_JWT_LEEWAY", "s3cret-value-that-must-not-leak")
    with pytest.raises(ConfigurationError) as caught:
        fresh_settings()
    message = caught.value.message
    assert message.startswith("Invalid settings: ")
    assert "MCP_SESSION_MODE: Input should be 'stateful', 'stateless' or 'auto'" in message
    assert "MCP_MAX_SESSIONS: Input should be greater than or equal to 1" in message
    assert "MCP_JWT_LEEWAY" in message and "s3cret" not in message
    with pytest.raises(ConfigurationError):  # McpRouter() reads the same settings
        McpRouter()


def test_a_settings_error_is_one_line_in_the_cli(tmp_path: Path) -> None:
    (tmp_path / "app_mod.py").write_text(
        "from fastapi import FastAPI\nfrom fastapi_mcp_ctx import McpRouter\napp = FastAPI()\napp.include_router(McpRouter())\n",
        encoding="utf-8",
    )
    env = {"PATH": os.environ.get("PATH", ""), "MCP_SESSION_MODE": "bogus", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "fastapi_mcp_ctx", "serve", "app_mod:app", "--app-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    assert "MCP_SESSION_MODE: Input should be 'stateful', 'stateless' or 'auto'" in done.stderr


@pytest.mark.parametrize("value", ["a.example,b.example:*", '["a.example", "b.example:*"]'])
def test_allow_lists_read_comma_separated_or_json(monkeypatch: pytest.MonkeyPatch, fresh_settings: Any, value: str) -> None:
    monkeypatch.setenv("MCP_ALLOWED_HOSTS", value)
    monkeypatch.setenv("MCP_ALLOWED_ORIGINS", "http://a.example, http://b.example")
    settings = fresh_settings()
    assert settings.allowed_hosts == ["a.example", "b.example:*"]
    assert settings.allowed_origins == ["http://a.example", "http://b.example"]


def test_a_shared_store_without_a_key_says_what_to_run(tmp_path: Path) -> None:
    settings = mcp_settings(request_state_key=None, storage_url="postgresql+asyncpg://u:secretpw@127.0.0.1:1/db")
    with pytest.raises(ConfigurationError) as caught:
        McpRouter(settings=settings)
    message = caught.value.message
    assert "can be shared by several processes" in message and "fastapi-mcp-ctx keygen" in message
    assert "secretpw" not in message and " is shared" not in message


def test_a_state_sealed_by_another_process_key_names_the_setting_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    from fastapi_mcp_ctx._auth.sealing import RequestStateSealer, StateBinding
    from fastapi_mcp_ctx.errors import InvalidRequestStateError

    binding = StateBinding(tenant_id=None, client_id=None, subject=None, operation="tools/call:t", arguments_digest="d")
    one = RequestStateSealer((b"another process's random key....",))  # what another replica's process key seals
    two = McpRouter(settings=mcp_settings(request_state_key=None)).request_state
    assert not two.shared
    token = one.seal("x", binding)
    with caplog.at_level(logging.WARNING, "fastapi_mcp_ctx"), pytest.raises(InvalidRequestStateError):
        two.open(token, binding)
    assert any("MCP_REQUEST_STATE_KEY is unset" in r.getMessage() for r in caplog.records)


async def test_the_development_token_recipe_of_the_auth_guide_works(monkeypatch: pytest.MonkeyPatch) -> None:
    text = (REPO / "docs" / "auth.md").read_text(encoding="utf-8")
    shell = re.search(r"a development setup names both:\n\n```bash\n(.*?)```", text, re.DOTALL)
    recipe = re.search(r"space-separated\):\n\n```python\n(.*?)```", text, re.DOTALL)
    assert shell is not None and recipe is not None
    secret = "k" * 43
    values = {"MCP_AUTH_MODE": "jwt", "MCP_JWT_SECRET": secret, "MCP_JWT_ISSUER": "dev", "MCP_RESOURCE_URL": "http://127.0.0.1:8000/mcp"}
    for name in values:  # the bash block sets exactly these
        assert f"{name}=" in shell.group(1)
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    namespace: dict[str, Any] = {"__name__": "docs_auth_dev", "print": lambda *_: None}
    exec(compile(recipe.group(1), "docs/auth.md", "exec"), namespace)  # noqa: S102
    router = McpRouter(
        settings=mcp_settings(auth_mode="jwt", jwt_secret=secret, jwt_issuer="dev", resource_url=values["MCP_RESOURCE_URL"])
    )

    @router.tool(scopes=["notes:write"])
    async def whoami(ctx: Context = Depends(mcp_context)) -> str:
        """Who is calling."""
        return f"{ctx.auth.subject}@{ctx.tenant_id}"

    app = FastAPI()
    app.include_router(router)
    async with open_client(app) as client:
        response = await Wire(client).call_tool("modern", "whoami", {}, headers={"Authorization": f"Bearer {namespace['token']}"})
        assert result_of(response)["structuredContent"] == {"result": "alice@acme"}, response.text


async def test_an_unknown_session_id_with_memory_sessions_hints_at_the_shared_store_once(caplog: pytest.LogCaptureFixture) -> None:
    import fastapi_mcp_ctx._transport.memory_sessions as memory_sessions

    memory_sessions._unknown_hinted = False  # pyright: ignore[reportPrivateUsage]
    app = FastAPI()
    app.include_router(McpRouter(settings=mcp_settings()))
    async with open_client(app) as client:
        with caplog.at_level(logging.WARNING, "fastapi_mcp_ctx"):
            for _ in range(3):
                response = await client.post(
                    "/mcp",
                    json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                    headers={"Mcp-Session-Id": "from-another-worker", "MCP-Protocol-Version": "2025-11-25", "Accept": "application/json, text/event-stream"},
                )
                assert response.status_code == 404
    hints = [r for r in caplog.records if "MCP_SESSION_STORE_URL=redis://" in r.getMessage()]
    assert len(hints) == 1 and "several uvicorn workers" in hints[0].getMessage()


def _numeric_fields() -> list[str]:
    from fastapi_mcp_ctx import McpSettings

    return [
        name
        for name, info in McpSettings.model_fields.items()
        if any(t in str(info.annotation) for t in ("int", "float")) and info.annotation is not bool and "bool" not in str(info.annotation)
    ]


def test_every_numeric_setting_is_bounded_and_finite() -> None:
    """A value a store cannot hold (MCP_SESSION_IDLE_SECONDS=inf, 1e300, a 20-digit count) once
    passed validation and failed later, at start-up with a traceback or as a 500 per request."""
    from annotated_types import Le, Lt

    from fastapi_mcp_ctx import McpSettings

    names = _numeric_fields()
    assert len(names) >= 25, names
    for name in names:
        info = McpSettings.model_fields[name]
        assert any(isinstance(m, (Le, Lt)) for m in info.metadata), f"{name} has no upper bound"
        if "float" in str(info.annotation):
            assert any(getattr(m, "allow_inf_nan", None) is False for m in info.metadata), f"{name} admits inf/nan"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("MCP_SESSION_IDLE_SECONDS", "inf"),
        ("MCP_SESSION_IDLE_SECONDS", "1e300"),
        ("MCP_EVENT_RETENTION_SECONDS", "nan"),
        ("MCP_EVENT_RETENTION_COUNT", "99999999999999999999"),
        ("MCP_KEEPALIVE_SECONDS", "-inf"),
    ],
)
def test_out_of_range_values_are_refused_at_start_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, fresh_settings: Any, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError) as caught:
        fresh_settings()
    assert caught.value.message.startswith(f"Invalid settings: {name}: "), caught.value.message


def test_an_unknown_storage_scheme_names_the_setting_never_the_url() -> None:
    with pytest.raises(ConfigurationError) as caught:
        McpRouter(settings=mcp_settings(storage_url="bogus://user:pw@host/db"))
    message = caught.value.message
    assert message.startswith("MCP_STORAGE_URL: unsupported storage URL scheme 'bogus'") and "pw" not in message


def test_allow_lists_refuse_a_json_value_that_is_not_a_list(monkeypatch: pytest.MonkeyPatch, fresh_settings: Any) -> None:
    for value in ('{"evil.com": 1}', '"evil.com"'):
        monkeypatch.setenv("MCP_ALLOWED_HOSTS", value)
        with pytest.raises(ConfigurationError, match="MCP_ALLOWED_HOSTS"):
            fresh_settings()
        fresh_settings.cache_clear()


async def test_a_change_notification_the_bus_cannot_take_never_fails_a_call_whose_work_is_done(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A tool that changed something, then could not publish the change (Redis down): the call
    used to answer 503 "retry later", so a client following Retry-After repeated the change."""
    from fastapi_mcp_ctx._transport.bus import MemoryBus
    from fastapi_mcp_ctx.errors import StateUnavailableError

    class DownBus(MemoryBus):
        async def publish(self, channel: str, message: Any) -> int:
            raise StateUnavailableError("The replica bus (redis) is unavailable, retry later")

    router = McpRouter(settings=mcp_settings(), list_changed={"tools"}, resources_subscribe=True, bus=DownBus())
    effects: list[str] = []

    @router.tool()
    async def effect(ctx: Context = Depends(mcp_context)) -> int:
        """Change something, then say so."""
        effects.append("done")
        await ctx.notify_tools_list_changed()
        await ctx.notify_resource_updated("notes://a")
        return len(effects)

    app = FastAPI()
    app.include_router(router)
    async with open_client(app) as client:
        with caplog.at_level(logging.WARNING, "fastapi_mcp_ctx"):
            for era in ("modern", "legacy"):
                response = await Wire(client).call_tool(era, "effect", {})
                assert response.status_code == 200, response.text
                assert "isError" not in result_of(response) or not result_of(response)["isError"]
    assert effects == ["done", "done"]
    lost = [r.getMessage() for r in caplog.records if "was not published" in r.getMessage()]
    assert any("tools/list_changed" in m for m in lost) and any("resources/updated" in m for m in lost)
    with pytest.raises(StateUnavailableError):  # outside a request the caller decides
        await router.notify_tools_list_changed()


@pytest.mark.parametrize(
    ("era", "meta", "needle"),
    [
        ("legacy", "x", "params._meta must be an object"),
        ("legacy", {"progressToken": {"a": 1}}, "progressToken"),
        ("legacy", {"progressToken": 1.5}, "progressToken"),
        ("legacy", {"progressToken": True}, "progressToken"),
        ("modern", {"progressToken": [1]}, "progressToken"),
        ("modern", {"io.modelcontextprotocol/clientInfo": 5}, "clientInfo"),
        ("modern", {"io.modelcontextprotocol/clientInfo": {"version": "1"}}, "clientInfo"),
    ],
)
async def test_meta_members_of_the_wrong_type_are_invalid_params(era: str, meta: Any, needle: str) -> None:
    router = McpRouter(settings=mcp_settings())

    @router.tool()
    async def ping_tool() -> str:
        """Answer."""
        return "pong"

    app = FastAPI()
    app.include_router(router)
    async with open_client(app) as client:
        wire = Wire(client)
        response = await wire.call_tool(era, "ping_tool", {}, meta=meta, check=False)
    body = response.json()
    assert body["error"]["code"] == -32602 and needle in body["error"]["message"], body


async def test_the_test_client_refuses_non_json_numbers_before_sending() -> None:
    from fastapi_mcp_ctx.testing import McpTestClient

    router = McpRouter(settings=mcp_settings())

    @router.tool()
    async def add(a: float, b: float) -> float:
        """Add."""
        return a + b

    app = FastAPI()
    app.include_router(router)
    async with McpTestClient(app) as client:
        with pytest.raises(ValueError, match="JSON compliant"):
            await client.call_tool("add", {"a": float("nan"), "b": 1})
        assert (await client.call_tool("add", {"a": 1.5, "b": 1})).result["structuredContent"] == {"result": 2.5}
