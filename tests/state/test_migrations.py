"""Alembic migrations of mcp_state: upgrade, downgrade, upgrade again, and no drift between
the migration and the SQLAlchemy models (``compare_metadata`` is empty), on SQLite and
PostgreSQL. Migrations run programmatically, as ``alembic upgrade head`` would."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from fastapi_mcp_ctx.backends._sql_models import VERSION_TABLE, metadata
from fastapi_mcp_ctx.backends.sql import SqlBackend
from fastapi_mcp_ctx.state import ContextState

from .conftest import REPO, alembic, service_url


async def _inspect(url: str) -> dict[str, Any]:
    """Tables, the alembic revision and the autogenerate diff against the models."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    def sync(conn: sa.Connection) -> dict[str, Any]:
        insp = sa.inspect(conn)
        tables = set(insp.get_table_names())
        ctx = MigrationContext.configure(
            conn,
            opts={
                "version_table": VERSION_TABLE,
                "compare_type": True,
                "include_name": lambda name, type_, parent: type_ != "table" or name in metadata.tables,
            },
        )
        return {"tables": tables, "revision": ctx.get_current_revision(), "diff": compare_metadata(ctx, metadata)}

    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(sync)
    finally:
        await engine.dispose()


async def _migration_cycle(url: str) -> None:
    await asyncio.to_thread(alembic, url, "upgrade")
    info = await _inspect(url)
    assert "mcp_state" in info["tables"] and info["revision"] == "0001"
    assert info["diff"] == []

    backend = SqlBackend(url)
    s = ContextState(backend, "migrations")
    try:
        await s.set("k", {"v": 1})
        assert await s.get("k") == {"v": 1}
    finally:
        await backend.aclose()

    await asyncio.to_thread(alembic, url, "downgrade", "base")
    info = await _inspect(url)
    assert "mcp_state" not in info["tables"] and info["revision"] is None

    await asyncio.to_thread(alembic, url, "upgrade")
    info = await _inspect(url)
    assert info["revision"] == "0001" and info["diff"] == []


async def test_sqlite_upgrade_downgrade_upgrade_no_drift(tmp_path: Path) -> None:
    await _migration_cycle(f"sqlite+aiosqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
async def test_postgres_upgrade_downgrade_upgrade_no_drift() -> None:
    url = service_url("postgres")
    try:
        await _migration_cycle(url)
        engine = create_async_engine(url)
        try:
            async with engine.connect() as conn:
                collation = (
                    await conn.execute(
                        sa.text(
                            "SELECT collation_name FROM information_schema.columns "
                            "WHERE table_name = 'mcp_state' AND column_name = 'key'"
                        )
                    )
                ).scalar_one()
            assert collation == "C"  # byte order, as Redis and SQLite
        finally:
            await engine.dispose()
    finally:
        await asyncio.to_thread(alembic, url, "upgrade")  # leave the schema at head


async def test_create_tables_matches_the_migration(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'c.db'}"
    backend = SqlBackend(url, create_tables=True)
    try:
        await ContextState(backend, "x").set("k", 1)
    finally:
        await backend.aclose()
    info = await _inspect(url)
    assert info["diff"] == []


def test_alembic_cli_check(tmp_path: Path) -> None:
    """The documented command line: `alembic -x url=... upgrade head` then `alembic check`."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"
    alembic_bin = Path(sys.executable).with_name("alembic")
    for args in (["upgrade", "head"], ["check"]):
        proc = subprocess.run(
            [str(alembic_bin), "-x", f"url={url}", *args], cwd=REPO, capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
    assert "No new upgrade operations detected" in proc.stdout + proc.stderr
