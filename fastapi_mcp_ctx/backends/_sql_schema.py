"""Is the SQL state schema there, and at the revision this code needs?

Run by :class:`~fastapi_mcp_ctx.backends.sql.SqlBackend` once, at first use (or at start-up:
``await mcp_router.check()``), on a synchronous connection (``AsyncConnection.run_sync``).
The revision is read from Alembic's version table (``mcp_alembic_version``); no Alembic
import is needed at run time. A problem is a message for the operator that names the
command to run (``fastapi-mcp-ctx migrate``) and never the database URL.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError

from ._sql_models import SCHEMA_REVISIONS, VERSION_TABLE, metadata, state_table, version_table

__all__ = ["create_schema", "is_missing_table", "schema_problem"]

_MIGRATE = "run `fastapi-mcp-ctx migrate` with MCP_STORAGE_URL set to this database"
_UNDEFINED_TABLE = "42P01"  # PostgreSQL SQLSTATE undefined_table


def create_schema(conn: sa.Connection) -> None:
    """``create_tables=True``: create the tables when missing and stamp them with the current
    revision, so a later ``fastapi-mcp-ctx migrate`` starts from the right place.

    Safe when several processes race (``IF NOT EXISTS``, ``ON CONFLICT DO NOTHING``).
    """
    for table in (*metadata.sorted_tables, version_table):
        conn.execute(sa.schema.CreateTable(table, if_not_exists=True))
        for index in table.indexes:
            conn.execute(sa.schema.CreateIndex(index, if_not_exists=True))
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    unversioned = ~sa.exists(sa.select(version_table.c.version_num))
    stamp = insert(version_table).from_select(
        ["version_num"], sa.select(sa.literal(SCHEMA_REVISIONS[-1], sa.String(32))).where(unversioned)
    )
    conn.execute(stamp.on_conflict_do_nothing())


def schema_problem(conn: sa.Connection) -> str | None:
    """``None`` when ``mcp_state`` exists at revision ``SCHEMA_REVISIONS[-1]``, else what the
    operator must do (one sentence naming ``fastapi-mcp-ctx migrate``)."""
    inspector = sa.inspect(conn)
    has_state = inspector.has_table(state_table.name)
    revisions: list[str] = []
    if inspector.has_table(VERSION_TABLE):
        revisions = [str(r) for r in conn.execute(sa.select(version_table.c.version_num)).scalars()]
    head = SCHEMA_REVISIONS[-1]
    if not revisions:
        if not has_state:
            return (
                "The ctx.state SQL schema is missing (no table mcp_state): "
                f"{_MIGRATE} (or, for an embedded SQLite file only, set MCP_STORAGE_CREATE_TABLES=true)."
            )
        return f"The table mcp_state carries no schema revision ({VERSION_TABLE} is missing or empty): {_MIGRATE}."
    if revisions == [head]:
        if has_state:
            return None
        return (
            f"The table mcp_state is missing although {VERSION_TABLE} records revision {head}: "
            f"delete the rows of {VERSION_TABLE}, then {_MIGRATE}."
        )
    found = ", ".join(sorted(revisions))
    if len(revisions) == 1 and revisions[0] in SCHEMA_REVISIONS:
        return f"The ctx.state SQL schema is at revision {found}; this version of fastapi-mcp-ctx needs {head}: {_MIGRATE}."
    return (
        f"The ctx.state SQL schema is at revision {found}, which this version of fastapi-mcp-ctx (schema {head}) "
        "does not know: install the fastapi-mcp-ctx version that migrated this database, or a newer one."
    )


def is_missing_table(exc: BaseException) -> bool:
    """True for a driver error saying a table does not exist (SQLite ``no such table``,
    PostgreSQL SQLSTATE 42P01): the schema went away under a running server."""
    if not isinstance(exc, DBAPIError):
        return False
    orig = exc.orig
    return getattr(orig, "sqlstate", None) == _UNDEFINED_TABLE or "no such table" in str(orig)
