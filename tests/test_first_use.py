"""What a new user meets first: settings refused with the variable's name, the sealing key a
shared store needs, and the development-token recipe of docs/auth.md working as written."""

from __future__ import annotations

import logging
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
    env = {"PATH": "/usr/bin:/bin", "MCP_SESSION_MODE": "bogus", "PYTHONPATH": str(REPO)}
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
    from fastapi_mcp_ctx._sealing import RequestStateSealer, StateBinding
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
    import fastapi_mcp_ctx._sessions as sessions

    sessions._unknown_hinted = False  # pyright: ignore[reportPrivateUsage]
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
