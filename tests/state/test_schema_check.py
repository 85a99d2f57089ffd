"""A missing or outdated SQL schema is a configuration error naming `fastapi-mcp-ctx migrate`,
found at first use (or by `check()`), logged once, and never a retryable outage; once the
operator migrates, the same running backend works without a restart. SQLite and PostgreSQL."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from fastapi_mcp_ctx.backends import _sql_schema, sql_migrations
from fastapi_mcp_ctx.backends._sql_models import VERSION_TABLE
from fastapi_mcp_ctx.backends.sql import SqlBackend
from fastapi_mcp_ctx.errors import ConfigurationError, StateUnavailableError
from fastapi_mcp_ctx.state import ContextState

from .conftest import temporary_postgres_database
from .test_failures import every_call

LOGGER = "fastapi_mcp_ctx.backends.sql"


async def _execute(url: str, *statements: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            for statement in statements:
                await conn.execute(sa.text(statement))
    finally:
        await engine.dispose()


async def _assert_misconfigured(backend: SqlBackend, needle: str, secret: str) -> None:
    """Every call (and check()) raises ConfigurationError: -32603, HTTP 500, not retryable,
    naming the command and the problem, never the database URL."""
    s = ContextState(backend, "acme")
    for call in [*every_call(s), backend.check]:
        with pytest.raises(ConfigurationError) as info:
            await call()
        error = info.value
        assert not isinstance(error, StateUnavailableError)
        assert (error.code, error.http_status, error.retryable) == (-32603, 500, False)
        assert "Retry-After" not in error.headers and "retry later" not in error.message
        assert "fastapi-mcp-ctx" in error.message and needle in error.message
        assert secret not in error.message


async def _missing_then_migrated(url: str, secret: str, caplog: pytest.LogCaptureFixture) -> None:
    backend = SqlBackend(url)
    try:
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            await _assert_misconfigured(backend, "fastapi-mcp-ctx migrate", secret)
        logged = [r for r in caplog.records if r.name == LOGGER]
        assert len(logged) == 1, [r.getMessage() for r in logged]  # once, not per call
        assert logged[0].levelno == logging.ERROR and "fastapi-mcp-ctx migrate" in logged[0].getMessage()
        assert "no table mcp_state" in logged[0].getMessage()

        await sql_migrations.upgrade(url)  # the operator acts; the running backend recovers
        await backend.check()
        s = ContextState(backend, "acme")
        await s.set("k", {"v": 1})
        assert await s.get("k") == {"v": 1}

        await _execute(url, "DROP TABLE mcp_state")  # gone under a running server
        with pytest.raises(ConfigurationError, match="fastapi-mcp-ctx migrate"):
            await s.get("k")
        with pytest.raises(ConfigurationError, match=f"{VERSION_TABLE} records revision 0001"):
            await s.get("k")  # checked again: the precise cause
    finally:
        await backend.aclose()


async def test_sqlite_missing_schema(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    await _missing_then_migrated(f"sqlite+aiosqlite:///{tmp_path / 'secret-name.db'}", "secret-name", caplog)


@pytest.mark.postgres
async def test_postgres_missing_schema(caplog: pytest.LogCaptureFixture) -> None:
    async with temporary_postgres_database("mcp_schema") as url:
        database = sa.make_url(url).database
        assert database
        await _missing_then_migrated(url, database, caplog)


async def _outdated(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    await sql_migrations.upgrade(url)
    monkeypatch.setattr(_sql_schema, "SCHEMA_REVISIONS", ("0001", "0002"))  # this code wants a newer schema


async def _newer(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    await sql_migrations.upgrade(url)
    await _execute(url, f"UPDATE {VERSION_TABLE} SET version_num = '9999'")  # migrated by a newer release


async def _unversioned(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    await _execute(url, "CREATE TABLE mcp_state (key TEXT PRIMARY KEY, value TEXT NOT NULL, expires_at FLOAT)")


@pytest.mark.parametrize(
    ("prepare", "needle"),
    [
        (_outdated, "at revision 0001; this version of fastapi-mcp-ctx needs 0002"),
        (_newer, "at revision 9999, which this version of fastapi-mcp-ctx"),
        (_unversioned, "carries no schema revision"),
    ],
    ids=["outdated", "newer", "unversioned"],
)
async def test_schema_at_another_revision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prepare: Callable[..., Awaitable[None]], needle: str
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'other.db'}"
    await prepare(url, monkeypatch)
    backend = SqlBackend(url)
    try:
        await _assert_misconfigured(backend, needle, "other.db")
    finally:
        await backend.aclose()


async def test_create_tables_keeps_its_meaning_and_stamps(tmp_path: Path) -> None:
    """MCP_STORAGE_CREATE_TABLES: the tables appear on first use, at the current revision."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'embedded.db'}"
    for _ in range(2):  # a second process finds them there
        backend = SqlBackend(url, create_tables=True)
        try:
            await backend.check()
            await ContextState(backend, "a").set("k", 1)
        finally:
            await backend.aclose()
    assert await sql_migrations.current_revision(url) == "0001"


async def test_unreachable_database_stays_retryable() -> None:
    backend = SqlBackend("postgresql+asyncpg://postgres@127.0.0.1:1/none")
    try:
        with pytest.raises(StateUnavailableError) as info:
            await backend.check()
        assert info.value.retryable and info.value.http_status == 503
    finally:
        await backend.aclose()
