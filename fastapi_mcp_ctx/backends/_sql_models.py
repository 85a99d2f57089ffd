"""The SQL schema of the state backend (SQLAlchemy Core). Alembic migrations in ``alembic/``
create it; ``alembic check`` compares them against this metadata.

``mcp_state``::

    key         TEXT PRIMARY KEY   (COLLATE "C" on PostgreSQL: byte order, like Redis and SQLite)
    value       TEXT NOT NULL      JSON text
    expires_at  DOUBLE NULL        epoch seconds; NULL = never expires
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

__all__ = ["KEY_TYPE", "VERSION_TABLE", "metadata", "state_table"]

metadata = sa.MetaData()

VERSION_TABLE = "mcp_alembic_version"
"""Alembic's version table for these migrations: not ``alembic_version``, so the project's
own Alembic history can live in the same database."""

KEY_TYPE = sa.Text().with_variant(postgresql.TEXT(collation="C"), "postgresql")

state_table = sa.Table(
    "mcp_state",
    metadata,
    sa.Column("key", KEY_TYPE, primary_key=True),
    sa.Column("value", sa.Text(), nullable=False),
    sa.Column("expires_at", sa.Double[float](), nullable=True),
    sa.Index("ix_mcp_state_expires_at", "expires_at"),
)
