"""The SQL engines of the state backend: one ``AsyncEngine`` per URL and event loop, and SQLite's
lock model.

:func:`make_engine` builds the engine for a ``sqlite+aiosqlite`` or ``postgresql+asyncpg`` URL
(timeouts; SQLite in WAL mode with a small FIFO pool, an in-memory SQLite refused);
:class:`LoopEngine` is one loop's engine with its autocommit view; :func:`retry_when_locked`
retries a SQLite operation that found the file locked. Used by ``backends.sql``, the migration
runner (``sql_migrations``) and the Alembic environment.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from types import CoroutineType
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from ..errors import ConfigurationError, StateUnavailableError

__all__ = ["SQLITE_LOCK_WAIT", "LoopEngine", "make_engine", "retry_when_locked"]


class _OnSqlite(Protocol):
    @property
    def is_sqlite(self) -> bool: ...


_B = TypeVar("_B", bound=_OnSqlite)
_P = ParamSpec("_P")
_R = TypeVar("_R")


_SQLITE_POOL = 4
SQLITE_LOCK_WAIT = 30.0  # seconds a SQLite call may wait for the file's write lock or a pooled connection


def make_engine(url: str, *, timeout: float, pool_size: int, max_overflow: int) -> AsyncEngine:
    """The ``AsyncEngine`` for ``url`` (no I/O): timeouts in seconds; SQLite in WAL mode.

    SQLite takes a file path only (``sqlite+aiosqlite:///state.db``, ``////abs/state.db``): an
    in-memory database (``sqlite+aiosqlite://``, ``:memory:``, ``mode=memory``) exists once per
    connection, so each pooled connection would see its own empty database; it is refused.

    Raises:
        ValueError: a database or driver other than ``sqlite+aiosqlite`` / ``postgresql+asyncpg``.
        ConfigurationError: an in-memory SQLite URL (the message names ``memory://``).
        ModuleNotFoundError: the driver is not installed.
    """
    parsed = sa.make_url(url)
    backend = parsed.get_backend_name()
    driver = parsed.get_driver_name()
    if backend == "postgresql":
        if driver != "asyncpg":
            raise ValueError(f"unsupported PostgreSQL driver {driver!r}: use postgresql+asyncpg://")
        return create_async_engine(
            parsed,
            pool_size=pool_size,
            max_overflow=max_overflow,
            pool_timeout=timeout * 2,
            connect_args={"timeout": timeout, "command_timeout": timeout * 2},
        )
    if backend == "sqlite":
        if driver != "aiosqlite":
            raise ValueError(f"unsupported SQLite driver {driver!r}: use sqlite+aiosqlite://")
        database = parsed.database or ""
        if database in ("", ":memory:") or "mode=memory" in database or parsed.query.get("mode") == "memory":
            raise ConfigurationError(
                "an in-memory SQLite database is not supported for ctx.state (each pooled connection would see "
                "its own empty database): use MCP_STORAGE_URL=memory:// for state in this process, or a file, "
                "sqlite+aiosqlite:///state.db"
            )
        # One writer at a time is SQLite's model: a few pooled connections queue fairly in the
        # pool (FIFO), where many would spin in SQLite's busy handler and starve some writers.
        # An embedded file is never "down", so a lock wait may last longer than a network timeout.
        engine = create_async_engine(
            parsed,
            pool_size=_SQLITE_POOL,
            max_overflow=0,
            pool_timeout=SQLITE_LOCK_WAIT,
            connect_args={"timeout": SQLITE_LOCK_WAIT},
        )
        event.listen(engine.sync_engine, "connect", _sqlite_on_connect)
        return engine
    raise ValueError(f"unsupported SQL database {backend!r} (sqlite+aiosqlite, postgresql+asyncpg)")


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


def retry_when_locked(
    method: Callable[Concatenate[_B, _P], CoroutineType[Any, Any, _R]],
) -> Callable[Concatenate[_B, _P], CoroutineType[Any, Any, _R]]:
    """Retry one SQLite operation that found the file locked (``SQLITE_BUSY``), for up to
    ``SQLITE_LOCK_WAIT`` seconds with a capped exponential backoff.

    SQLite answers some lock conflicts at once instead of waiting in its busy handler (a WAL
    reader whose snapshot went stale, a deferred transaction upgrading to write); its
    documentation's remedy is to retry. Each operation is one transaction that rolled back
    on failure, so a retry is safe. Other databases and other errors pass through.
    """

    @functools.wraps(method)
    async def wrapper(self: _B, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        if not self.is_sqlite:
            return await method(self, *args, **kwargs)
        deadline = time.monotonic() + SQLITE_LOCK_WAIT
        delay = 0.002
        while True:
            try:
                return await method(self, *args, **kwargs)
            except StateUnavailableError as exc:
                locked = isinstance(exc.__cause__, OperationalError) and "locked" in str(exc.__cause__)
                if not locked or time.monotonic() + delay > deadline:
                    raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)

    return wrapper


class LoopEngine:
    """The engine of one event loop, with its autocommit view and table-creation lock."""

    __slots__ = ("auto", "engine", "owned", "ready_lock")

    def __init__(self, engine: AsyncEngine, owned: bool) -> None:
        self.engine = engine
        self.auto: AsyncEngine = engine.execution_options(isolation_level="AUTOCOMMIT")
        self.owned = owned
        self.ready_lock = asyncio.Lock()

    async def aclose(self) -> None:
        """On its own loop: dispose of the engine if the backend made it."""
        if self.owned:
            await self.engine.dispose()
