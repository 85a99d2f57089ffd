"""Alembic environment for the ``mcp_state`` table (async engine), shipped in the package.

Run by ``fastapi-mcp-ctx migrate`` (:mod:`fastapi_mcp_ctx.backends.sql_migrations`), which
builds its ``Config`` in code and hands over an open connection in
``config.attributes["connection"]``; or by ``alembic`` with the repository's ``alembic.ini``
(developers), where the database URL is taken, in order, from ``config.attributes["url"]``,
``-x url=...``, then the ``MCP_STORAGE_URL`` environment variable.
Only the tables of ``fastapi_mcp_ctx.backends._sql_models.metadata`` are compared, so
``alembic check`` ignores the application's own tables in a shared database.
"""

from __future__ import annotations

import asyncio
import os
from logging.config import fileConfig
from typing import Any

from alembic import context
from sqlalchemy.engine import Connection

from fastapi_mcp_ctx.backends._sql_models import VERSION_TABLE, metadata
from fastapi_mcp_ctx.backends.sql import make_engine

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def _url() -> str:
    url = config.attributes.get("url") or context.get_x_argument(as_dictionary=True).get("url")
    url = url or os.environ.get("MCP_STORAGE_URL")
    if not url:
        raise SystemExit("no database URL: pass -x url=... or set MCP_STORAGE_URL")
    if not url.startswith(("sqlite+aiosqlite:", "postgresql+asyncpg:")):
        raise SystemExit("MCP state migrations need a sqlite+aiosqlite:// or postgresql+asyncpg:// URL")
    return url


def _include_name(name: str | None, type_: str, parent_names: Any) -> bool:
    if type_ == "table":
        return name in metadata.tables
    return True


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        include_name=_include_name,
        compare_type=True,
        render_as_batch=connection.dialect.name == "sqlite",
    )


def _run_sync(connection: Connection) -> None:
    _configure(connection)
    with context.begin_transaction():
        context.run_migrations()


async def _run_async(url: str) -> None:
    engine = make_engine(url, timeout=30.0, pool_size=1, max_overflow=0)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run_sync)
    finally:
        await engine.dispose()


def run_migrations_offline() -> None:
    """``--sql``: emit SQL without connecting."""
    context.configure(
        url=_url(),
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
elif isinstance(shared := config.attributes.get("connection"), Connection):
    _run_sync(shared)
else:
    asyncio.run(_run_async(_url()))
