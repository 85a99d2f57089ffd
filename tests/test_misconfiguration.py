"""A misconfigured server says what to do, where it is configured or at first use:

- a storage URL whose extra is not installed fails when the router is built, with a typed
  ``ConfigurationError`` naming ``pip install "fastapi-mcp-ctx[…]"`` (the missing modules are
  simulated by hiding them in ``sys.modules``);
- a missing SQL schema reaches the client as -32603 with HTTP 500 (never a retryable 503)
  and a message naming ``fastapi-mcp-ctx migrate`` without the database URL, in both eras;
  ``await mcp_router.check()`` finds it at start-up.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from conftest import Wire, assert_error, make_app, mcp_settings, open_client, result_of
from fastapi import Depends
from missing import hide

from fastapi_mcp_ctx import Context, McpRouter, mcp_context
from fastapi_mcp_ctx._extras import EXTRAS
from fastapi_mcp_ctx.backends import backend_from_url
from fastapi_mcp_ctx.backends.sql_migrations import upgrade
from fastapi_mcp_ctx.errors import ConfigurationError

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("url", "missing", "reimported", "extra"),
    [
        ("redis://127.0.0.1:6379/0", "redis", ["fastapi_mcp_ctx.backends.redis"], "redis"),
        ("rediss://127.0.0.1:6380/0", "redis", ["fastapi_mcp_ctx.backends.redis"], "redis"),
        ("sqlite+aiosqlite:///state.db", "sqlalchemy", ["fastapi_mcp_ctx.backends.sql"], "sql"),
        ("postgresql+asyncpg://u@h/db", "sqlalchemy", ["fastapi_mcp_ctx.backends.sql"], "sql"),
        ("sqlite+aiosqlite:///state.db", "aiosqlite", [], "sql"),  # the driver alone
        ("postgresql+asyncpg://u@h/db", "asyncpg", [], "sql"),
    ],
)
def test_missing_extra_fails_when_the_router_is_built(
    monkeypatch: pytest.MonkeyPatch, url: str, missing: str, reimported: list[str], extra: str
) -> None:
    hide(monkeypatch, missing, *reimported)
    for build in (lambda: backend_from_url(url), lambda: McpRouter(settings=mcp_settings(storage_url=url))):
        with pytest.raises(ConfigurationError) as info:
            build()
        message = info.value.message
        assert f'pip install "fastapi-mcp-ctx[{extra}]"' in message
        assert f"{missing!r} is not installed" in message and url.split("://")[0] in message
        assert isinstance(info.value.__cause__, ModuleNotFoundError)


def test_memory_needs_no_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in ("redis", "sqlalchemy", "aiosqlite", "asyncpg", "alembic"):
        hide(monkeypatch, module)
    McpRouter(settings=mcp_settings(storage_url="memory://"))


def test_extras_table_matches_pyproject() -> None:
    """Every extra named in the error table exists in pyproject.toml and brings those modules."""
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra, modules in EXTRAS.items():
        requirements = " ".join(declared[extra]).lower()
        for module in modules - {"greenlet"}:  # greenlet comes with sqlalchemy[asyncio]
            assert module in requirements, (extra, module)


def _state_app(url: str) -> tuple[McpRouter, object]:
    router = McpRouter(settings=mcp_settings(storage_url=url))

    @router.tool()
    async def remember(text: str, ctx: Context = Depends(mcp_context)) -> str:
        """Store text in ctx.state."""
        await ctx.state.set("last", text)
        return text

    return router, make_app(router)


async def test_missing_schema_is_a_500_naming_migrate_in_both_eras(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'hidden-secret.db'}"
    router, app = _state_app(url)
    with pytest.raises(ConfigurationError, match="fastapi-mcp-ctx migrate"):
        await router.check()  # the opt-in start-up check
    try:
        with caplog.at_level(logging.WARNING):
            async with open_client(app) as client:
                wire = Wire(client)
                for era in ("legacy", "modern", "legacy", "modern"):
                    response = await wire.call_tool(era, "remember", {"text": "hi"})
                    error = assert_error(response, 500, -32603)
                    assert "fastapi-mcp-ctx migrate" in error["message"]
                    assert "hidden-secret" not in response.text and "sqlite" not in error["message"]
                    assert "retry-after" not in response.headers
        logged = [r for r in caplog.records if "fastapi-mcp-ctx migrate" in r.getMessage()]
        assert len(logged) == 1  # the server log says it once, not per request

        await upgrade(url)  # the operator runs `fastapi-mcp-ctx migrate`: no restart needed
        await router.check()
        async with open_client(app) as client:
            result = result_of(await Wire(client).call_tool("modern", "remember", {"text": "hi"}))
            assert result["isError"] is False
    finally:
        await router.aclose()
