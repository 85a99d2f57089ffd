"""Apply the SQL state schema's migrations from code: what ``fastapi-mcp-ctx migrate`` runs.

The Alembic scripts ship inside the package (``fastapi_mcp_ctx/migrations/``), so this works
from any folder of a pip-installed project; the ``Config`` is built here, no ``alembic.ini``
is read. History is kept in ``mcp_alembic_version``, so these migrations can share a database
with the application's own Alembic project.

    from fastapi_mcp_ctx.backends.sql_migrations import upgrade

    await upgrade("postgresql+asyncpg://user:pw@host/db")       # → Migration("0001", "0001")

Needs the ``sql`` extra (``pip install "fastapi-mcp-ctx[sql]"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from ._sql_models import VERSION_TABLE, state_table, version_table
from .sql import make_engine

__all__ = ["MIGRATIONS_DIR", "Migration", "alembic_config", "current_revision", "downgrade", "upgrade", "upgrade_sql"]

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"
"""The Alembic script directory inside the installed package (``env.py``, ``versions/``)."""

_UNVERSIONED_BASELINE = "0001"
"""The revision of an ``mcp_state`` table without a version row: only ``create_tables=True``
of fastapi-mcp-ctx 0.1.0 made such tables (later versions stamp the revision they create)."""

_TIMEOUT = 30.0  # seconds: connect timeout; statements may take twice that


@dataclass(frozen=True)
class Migration:
    """The schema revision before and after a command (``None``: no schema)."""

    before: str | None
    after: str | None

    @property
    def changed(self) -> bool:
        """True when the command moved the revision."""
        return self.before != self.after


def alembic_config(url: str, *, output: TextIO | None = None) -> Config:
    """An Alembic ``Config`` for the packaged migrations and ``url`` (no ``alembic.ini``).

    Args:
        url: ``sqlite+aiosqlite:///…`` or ``postgresql+asyncpg://…``.
        output: where ``--sql`` output goes (default ``sys.stdout``).
    """
    cfg = Config(output_buffer=output) if output is not None else Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("path_separator", "os")
    cfg.attributes["url"] = url
    cfg.attributes["configure_logger"] = False
    return cfg


def _revision(conn: sa.Connection) -> str | None:
    inspector = sa.inspect(conn)
    if not inspector.has_table(VERSION_TABLE):
        return None
    rows = sorted(str(r) for r in conn.execute(sa.select(version_table.c.version_num)).scalars())
    return ",".join(rows) or None


def _run(conn: sa.Connection, url: str, name: str, revision: str) -> Migration:
    cfg = alembic_config(url)
    cfg.attributes["connection"] = conn
    before = _revision(conn)
    if name == "upgrade" and before is None and sa.inspect(conn).has_table(state_table.name):
        command.stamp(cfg, _UNVERSIONED_BASELINE)  # adopt a table made by create_tables=True
    if name == "upgrade":
        command.upgrade(cfg, revision)
    else:
        command.downgrade(cfg, revision)
    return Migration(before, _revision(conn))


async def _command(url: str, name: str, revision: str) -> Migration:
    engine = make_engine(url, timeout=_TIMEOUT, pool_size=1, max_overflow=0)
    try:
        async with engine.begin() as conn:  # one transaction: all steps or none (where DDL is transactional)
            return await conn.run_sync(_run, url, name, revision)
    finally:
        await engine.dispose()


async def upgrade(url: str, revision: str = "head") -> Migration:
    """Upgrade the schema at ``url`` to ``revision`` (``alembic upgrade``), in one transaction.

    An ``mcp_state`` table that has no revision yet (made by ``create_tables=True``) is
    adopted first (stamped ``0001``).

    Returns:
        The revisions before and after.
    Raises:
        ValueError: not a ``sqlite+aiosqlite`` / ``postgresql+asyncpg`` URL.
        sqlalchemy.exc.SQLAlchemyError, OSError: the database cannot be reached or refused a step.
        alembic.util.CommandError: an unknown revision.
    """
    return await _command(url, "upgrade", revision)


async def downgrade(url: str, revision: str) -> Migration:
    """Downgrade the schema at ``url`` to ``revision`` (``"base"``: drop everything); see :func:`upgrade`."""
    return await _command(url, "downgrade", revision)


async def current_revision(url: str) -> str | None:
    """The revision recorded at ``url`` (``None``: not migrated; several heads: comma-joined)."""
    engine = make_engine(url, timeout=_TIMEOUT, pool_size=1, max_overflow=0)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(_revision)
    finally:
        await engine.dispose()


def upgrade_sql(url: str, output: TextIO, revision: str = "head") -> None:
    """Write the SQL of the upgrade to ``revision`` to ``output`` without connecting
    (``alembic upgrade --sql``; ``revision`` may be ``"from:to"``). Only the dialect of ``url``
    matters."""
    command.upgrade(alembic_config(url, output=output), revision, sql=True)

