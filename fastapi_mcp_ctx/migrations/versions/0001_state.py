"""mcp_state: the ctx.state key-value table.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "mcp_state",
        # COLLATE "C" on PostgreSQL: keys sort by byte, as in Redis and SQLite, and the
        # primary-key index serves the keyset range scans of list().
        sa.Column("key", sa.Text().with_variant(postgresql.TEXT(collation="C"), "postgresql"), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("expires_at", sa.Double[float](), nullable=True),
        sa.PrimaryKeyConstraint("key", name="pk_mcp_state"),
    )
    op.create_index("ix_mcp_state_expires_at", "mcp_state", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_mcp_state_expires_at", table_name="mcp_state")
    op.drop_table("mcp_state")
