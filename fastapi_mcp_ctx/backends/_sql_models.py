"""The SQL schema of the state backend (SQLAlchemy Core). The Alembic migrations shipped in
``fastapi_mcp_ctx/migrations/`` create it (``fastapi-mcp-ctx migrate``); ``alembic check``
compares them against this metadata.

``mcp_state``::

    key         TEXT PRIMARY KEY   (COLLATE "C" on PostgreSQL: byte order, like Redis and SQLite)
    value       TEXT NOT NULL      JSON text
    expires_at  DOUBLE NULL        epoch seconds; NULL = never expires

``mcp_alembic_version`` (Alembic's own version table, one row: the schema's revision)::

    version_num VARCHAR(32) PRIMARY KEY
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

__all__ = ["KEY_TYPE", "SCHEMA_REVISIONS", "VERSION_TABLE", "metadata", "state_table", "version_table"]

metadata = sa.MetaData()

VERSION_TABLE = "mcp_alembic_version"
"""Alembic's version table for these migrations: not ``alembic_version``, so the project's
own Alembic history can live in the same database."""

SCHEMA_REVISIONS: tuple[str, ...] = ("0001",)
"""The migrations' revisions, oldest first; the last one is the schema this code needs.
A test holds it equal to the revisions in ``fastapi_mcp_ctx/migrations/versions``."""

KEY_TYPE = sa.Text().with_variant(postgresql.TEXT(collation="C"), "postgresql")

state_table = sa.Table(
    "mcp_state",
    metadata,
    sa.Column("key", KEY_TYPE, primary_key=True),
    sa.Column("value", sa.Text(), nullable=False),
    sa.Column("expires_at", sa.Double[float](), nullable=True),
    sa.Index("ix_mcp_state_expires_at", "expires_at"),
)

version_table = sa.Table(
    VERSION_TABLE,
    sa.MetaData(),  # not in ``metadata``: Alembic owns it, autogenerate must not compare it
    sa.Column("version_num", sa.String(32), nullable=False),
    sa.PrimaryKeyConstraint("version_num", name=f"{VERSION_TABLE}_pkc"),
)
"""The same table Alembic creates, used to stamp a schema made by ``create_tables=True``."""
