"""Alembic migrations of mcp_state, shipped in the package: upgrade, downgrade, upgrade again,
and no drift between the migration and the SQLAlchemy models (``compare_metadata`` is empty),
on SQLite and PostgreSQL. Migrations run through ``fastapi_mcp_ctx.backends.sql_migrations``
(what ``fastapi-mcp-ctx migrate`` runs); the repository's ``alembic.ini`` keeps working."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from fastapi_mcp_ctx.backends import sql_migrations
from fastapi_mcp_ctx.backends._sql_models import SCHEMA_REVISIONS, VERSION_TABLE, metadata
from fastapi_mcp_ctx.backends.sql import SqlBackend
from fastapi_mcp_ctx.state import ContextState

from .conftest import REPO, alembic, temporary_postgres_database


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
    step = await sql_migrations.upgrade(url)
    assert (step.before, step.after, step.changed) == (None, "0001", True)
    info = await _inspect(url)
    assert "mcp_state" in info["tables"] and info["revision"] == "0001"
    assert info["diff"] == []
    assert (await sql_migrations.upgrade(url)).changed is False  # idempotent

    backend = SqlBackend(url)
    s = ContextState(backend, "migrations")
    try:
        await s.set("k", {"v": 1})
        assert await s.get("k") == {"v": 1}
    finally:
        await backend.aclose()

    step = await sql_migrations.downgrade(url, "base")
    assert (step.before, step.after) == ("0001", None)
    info = await _inspect(url)
    assert "mcp_state" not in info["tables"] and info["revision"] is None

    await asyncio.to_thread(alembic, url, "upgrade")  # env.py's own path (no shared connection)
    info = await _inspect(url)
    assert info["revision"] == "0001" and info["diff"] == []
    assert await sql_migrations.current_revision(url) == "0001"


async def test_sqlite_upgrade_downgrade_upgrade_no_drift(tmp_path: Path) -> None:
    await _migration_cycle(f"sqlite+aiosqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
async def test_postgres_upgrade_downgrade_upgrade_no_drift() -> None:
    async with temporary_postgres_database("mcp_migrations") as url:
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


def test_schema_revisions_are_the_packaged_migrations() -> None:
    """SCHEMA_REVISIONS (what the backend checks at run time, without Alembic) lists the
    shipped revisions in order, and they live inside the package (so in the wheel)."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(sql_migrations.alembic_config("sqlite+aiosqlite://"))
    walked = [rev.revision for rev in script.walk_revisions("base", "heads")]
    assert tuple(reversed(walked)) == SCHEMA_REVISIONS
    assert script.get_current_head() == SCHEMA_REVISIONS[-1]
    package = Path(sql_migrations.__file__).resolve().parents[1]
    assert package / "migrations" == sql_migrations.MIGRATIONS_DIR
    assert (sql_migrations.MIGRATIONS_DIR / "env.py").is_file()


def test_offline_sql_for_postgres() -> None:
    import io

    out = io.StringIO()
    sql_migrations.upgrade_sql("postgresql+asyncpg://nobody@127.0.0.1:1/none", out)  # no connection made
    text = out.getvalue()
    assert 'CREATE TABLE mcp_state' in text and 'COLLATE "C"' in text
    assert f"INSERT INTO {VERSION_TABLE} (version_num) VALUES ('0001')" in text


async def test_upgrade_adopts_a_table_made_by_create_tables_without_a_revision(tmp_path: Path) -> None:
    """fastapi-mcp-ctx 0.1.0's create_tables=True left mcp_state without a version row: the
    schema check asks for `migrate`, and migrate stamps it instead of failing on CREATE TABLE."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'old.db'}"
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(metadata.create_all)
            await conn.execute(sa.text("INSERT INTO mcp_state (key, value) VALUES ('t/a/k', '1')"))
    finally:
        await engine.dispose()
    step = await sql_migrations.upgrade(url)
    assert (step.before, step.after) == (None, "0001")
    backend = SqlBackend(url)
    try:
        assert await ContextState(backend, "a").get("k") == 1
    finally:
        await backend.aclose()


async def test_create_tables_matches_the_migration(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'c.db'}"
    backend = SqlBackend(url, create_tables=True)
    try:
        await ContextState(backend, "x").set("k", 1)
    finally:
        await backend.aclose()
    info = await _inspect(url)
    assert info["diff"] == [] and info["revision"] == "0001"  # stamped: `migrate` later starts from here
    assert (await sql_migrations.upgrade(url)).changed is False


def test_alembic_cli_check(tmp_path: Path) -> None:
    """The developers' command line in the checkout (alembic.ini → the packaged scripts):
    `alembic -x url=... upgrade head` then `alembic check`."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"
    alembic_bin = Path(sys.executable).with_name("alembic")
    for args in (["upgrade", "head"], ["check"]):
        proc = subprocess.run(
            [str(alembic_bin), "-x", f"url={url}", *args], cwd=REPO, capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
    assert "No new upgrade operations detected" in proc.stdout + proc.stderr
