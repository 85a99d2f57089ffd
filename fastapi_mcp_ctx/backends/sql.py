"""SQL backend: SQLAlchemy 2 async Core on SQLite (aiosqlite) or PostgreSQL (asyncpg).

One table, ``mcp_state`` (see ``_sql_models``), created by the Alembic migrations shipped in
``fastapi_mcp_ctx/migrations/`` (``fastapi-mcp-ctx migrate``); the backend creates it itself
only with ``create_tables=True`` (meant for the embedded SQLite default). At first use (or
:meth:`SqlBackend.check`) the backend verifies the schema's revision: a missing or outdated
schema is a :class:`~fastapi_mcp_ctx.errors.ConfigurationError` naming the command to run,
logged once, never a retryable outage.

Every single-key operation is one statement on an autocommit connection: ``get`` a SELECT
filtered on ``expires_at``, ``set`` an ``INSERT … ON CONFLICT DO UPDATE``, ``take`` a
``DELETE … WHERE key = :k AND <live> RETURNING value`` (atomic: of concurrent takers only
one deletes the row). Batches run in one transaction. Expiry uses the backend's clock
(``time.time``), is filtered on every read and swept by a background task (started on
first use, cancelled by :meth:`SqlBackend.aclose`).

An ``AsyncEngine``'s pool belongs to one event loop, so the backend keeps one engine (and
one sweeper) per running loop, made on first use there (see :mod:`._loops`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from types import CoroutineType
from typing import Any, Concatenate, ParamSpec, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import (
    DataError,
    DBAPIError,
    IntegrityError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
    SQLAlchemyError,
)
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from ..errors import ConfigurationError, StateUnavailableError
from ._loops import OneLoop, PerLoop
from ._sql_models import state_table
from ._sql_schema import create_schema, is_missing_table, schema_problem
from .base import Clock, prefix_upper_bound

__all__ = ["SqlBackend", "make_engine"]

logger = logging.getLogger(__name__)

_T = state_table
_C = _T.c
_CHUNK = 500  # bound parameters per statement in batches

_live = sa.or_(_C.expires_at.is_(None), _C.expires_at > sa.bindparam("now"))
_GET = sa.select(_C.value).where(_C.key == sa.bindparam("k"), _live)
_TAKE = sa.delete(_T).where(_C.key == sa.bindparam("k"), _live).returning(_C.value)
_DELETE = sa.delete(_T).where(_C.key == sa.bindparam("k")).returning(_C.expires_at)
_SWEEP = sa.delete(_T).where(_C.expires_at <= sa.bindparam("now"))


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _retry_when_locked(
    method: Callable[Concatenate[SqlBackend, _P], CoroutineType[Any, Any, _R]],
) -> Callable[Concatenate[SqlBackend, _P], CoroutineType[Any, Any, _R]]:
    """Retry one SQLite operation that found the file locked (``SQLITE_BUSY``), for up to
    ``_SQLITE_LOCK_WAIT`` seconds with a capped exponential backoff.

    SQLite answers some lock conflicts at once instead of waiting in its busy handler (a WAL
    reader whose snapshot went stale, a deferred transaction upgrading to write); its
    documentation's remedy is to retry. Each operation is one transaction that rolled back
    on failure, so a retry is safe. Other databases and other errors pass through.
    """

    @functools.wraps(method)
    async def wrapper(self: SqlBackend, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        if not self.is_sqlite:
            return await method(self, *args, **kwargs)
        deadline = time.monotonic() + _SQLITE_LOCK_WAIT
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


class _LoopEngine:
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


class SqlBackend:
    """A :class:`~fastapi_mcp_ctx.backends.base.StateBackend` on a SQL database.

    Args:
        url: ``sqlite+aiosqlite:///path.db`` or ``postgresql+asyncpg://user:pw@host:port/db``.
        create_tables: create ``mcp_state`` on first use when missing (no migrations).
        clock: wall clock in seconds (``time.time``), used for ``expires_at``; injectable.
        timeout: connect / statement timeout in seconds (bounded failure on a dead server).
        sweep_interval: seconds between background deletions of expired rows.
        engine: an existing ``AsyncEngine`` to use instead of ``url`` (not disposed on close).
            An engine's pool belongs to one event loop: the backend uses it on the loop it
            is first used on, and a call from another loop raises ``RuntimeError`` (give
            ``url`` when several loops share the backend).

    No I/O here: each event loop that uses the backend gets its own engine from ``url``,
    which connects lazily. :meth:`aclose` stops the sweepers and disposes the engines; the
    next call reconnects.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        create_tables: bool = False,
        clock: Clock | None = None,
        timeout: float = 2.0,
        sweep_interval: float = 60.0,
        pool_size: int = 10,
        max_overflow: int = 20,
        engine: AsyncEngine | None = None,
    ) -> None:
        self._new_engine: Callable[[], AsyncEngine] | None = None
        if engine is None:
            if url is None:
                raise ValueError("SqlBackend needs a url or an engine")
            self._new_engine = functools.partial(
                make_engine, url, timeout=timeout, pool_size=pool_size, max_overflow=max_overflow
            )
            engine = self._new_engine()
        self._given: AsyncEngine = engine  # made or given here; serves the first loop
        self._spare: AsyncEngine | None = engine if self._new_engine is not None else None
        self._one_loop = OneLoop(
            "SqlBackend(engine=...)",
            "an AsyncEngine's pool cannot move between event loops",
            "Build the backend with SqlBackend(url) to get an engine per loop.",
        )
        self._loops: PerLoop[_LoopEngine] = PerLoop(
            self._open, _LoopEngine.aclose, self._sweep_loop if sweep_interval > 0 else None
        )
        self._clock: Clock = clock or time.time
        self._create_tables = create_tables
        self._ready = False  # schema verified (and created, with create_tables)
        self._reported: str | None = None
        self._sweep_interval = sweep_interval
        dialect = engine.dialect.name
        self.is_sqlite = dialect == "sqlite"
        if dialect == "postgresql":
            ins: Any = postgresql.insert(_T)
        elif dialect == "sqlite":
            ins = sqlite.insert(_T)
        else:
            raise ValueError(f"unsupported SQL dialect {dialect!r} (sqlite, postgresql)")
        self._upsert: Any = ins.on_conflict_do_update(
            index_elements=[_C.key],
            set_={"value": ins.excluded.value, "expires_at": ins.excluded.expires_at},
        )

    # ------------------------------------------------------------------ internals
    def _failure(self, exc: BaseException) -> StateUnavailableError | ConfigurationError:
        """The error a failed statement is raised as: a table gone under a running server is a
        configuration error (checked again on the next call); a statement the database refuses
        (``DataError``, ``IntegrityError``, ``ProgrammingError``, ``NotSupportedError``: a column
        altered, privileges revoked) is one too, since a retry fails the same way, and the log
        carries the database's own error text; anything else (connection refused, reset, timed
        out, pool exhausted, SQLite locked) a retryable outage."""
        if is_missing_table(exc):
            self._ready = False
            return self._misconfigured(
                "The ctx.state SQL schema is missing (the database has no table mcp_state): "
                "run `fastapi-mcp-ctx migrate` with MCP_STORAGE_URL set to this database."
            )
        kind = _refused_kind(exc)
        if kind is not None:
            logger.error("sql state backend: the database refused a statement (%s): %s", kind, _server_text(exc))
            return self._misconfigured(
                f"The ctx.state SQL database refuses its statements ({kind}): check that table mcp_state matches "
                "this version's schema (`fastapi-mcp-ctx migrate --check`, no manual ALTER) and that the database "
                "user may read and write it; the server log has the database's error."
            )
        logger.warning("sql state backend unavailable: %r", exc)
        return StateUnavailableError("State backend (sql) unavailable, retry later")

    def _misconfigured(self, message: str) -> ConfigurationError:
        if message != self._reported:  # once per distinct problem, not per request
            self._reported = message
            logger.error("ctx.state is unusable: %s", message)
        return ConfigurationError(message)

    def _expires(self, ttl: float | None) -> float | None:
        return None if ttl is None else self._clock() + ttl

    def _open(self) -> _LoopEngine:
        """The engine of a loop that has none yet (no I/O)."""
        if self._new_engine is not None:
            spare, self._spare = self._spare, None
            return _LoopEngine(spare or self._new_engine(), True)
        self._one_loop.claim()
        return _LoopEngine(self._given, False)

    @property
    def _engine(self) -> AsyncEngine:
        """The running loop's engine (made now if this loop has none)."""
        return self._loops.get().engine

    @property
    def _auto(self) -> AsyncEngine:
        """The running loop's engine in autocommit mode (one statement, one transaction)."""
        return self._loops.get().auto

    async def check(self) -> None:
        """Connect and verify the schema now (a start-up check); see :meth:`StateBackend.check`.

        Raises:
            ConfigurationError: the schema is missing or not at the revision this code needs;
                the message names ``fastapi-mcp-ctx migrate``.
            StateUnavailableError: the database cannot be reached.
        """
        await self._prepare()

    async def _prepare(self) -> None:
        """First use: create the tables if asked, verify the schema revision. Cheap after
        that; a failed verification runs again on the next call."""
        if self._ready:
            return
        async with self._loops.get().ready_lock:
            if self._ready:
                return
            try:
                async with self._engine.begin() as conn:
                    if self._create_tables:
                        await conn.run_sync(create_schema)
                    problem = await conn.run_sync(schema_problem)
            except (SQLAlchemyError, OSError) as exc:
                raise self._failure(exc) from exc
            if problem is not None:
                raise self._misconfigured(problem)
            self._reported = None
            self._ready = True

    async def _sweep_loop(self, _entry: _LoopEngine) -> None:
        """A loop's keeper work (see :class:`PerLoop`): delete expired rows every ``sweep_interval`` s."""
        while True:
            await asyncio.sleep(self._sweep_interval)
            with contextlib.suppress(Exception):
                await self.sweep()

    @_retry_when_locked
    async def sweep(self) -> int:
        """Delete the rows whose expiry has passed; the number deleted."""
        try:
            async with self._auto.connect() as conn:
                result = await conn.execute(_SWEEP, {"now": self._clock()})
        except (SQLAlchemyError, OSError) as exc:
            raise self._failure(exc) from exc
        return result.rowcount

    # ------------------------------------------------------------------ protocol
    @_retry_when_locked
    async def get(self, key: str) -> str | None:
        """See :meth:`StateBackend.get` (one SELECT)."""
        if not self._ready:
            await self._prepare()
        try:
            async with self._auto.connect() as conn:
                result = await conn.execute(_GET, {"k": key, "now": self._clock()})
                return result.scalar_one_or_none()
        except (SQLAlchemyError, OSError) as exc:
            raise self._failure(exc) from exc

    @_retry_when_locked
    async def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        """See :meth:`StateBackend.get_many` (SELECT … IN, chunked, one connection)."""
        if not keys:
            return {}
        await self._prepare()
        unique = list(dict.fromkeys(keys))
        now = self._clock()
        found: dict[str, str] = {}
        try:
            async with self._engine.connect() as conn:
                for i in range(0, len(unique), _CHUNK):
                    stmt = sa.select(_C.key, _C.value).where(_C.key.in_(unique[i : i + _CHUNK]), _live)
                    for k, v in await conn.execute(stmt, {"now": now}):
                        found[k] = v
        except (SQLAlchemyError, OSError) as exc:
            raise self._failure(exc) from exc
        return found

    @_retry_when_locked
    async def set(self, key: str, value: str, ttl: float | None = None) -> None:
        """See :meth:`StateBackend.set` (one upsert)."""
        if not self._ready:
            await self._prepare()
        try:
            async with self._auto.connect() as conn:
                await conn.execute(self._upsert, {"key": key, "value": value, "expires_at": self._expires(ttl)})
        except (SQLAlchemyError, OSError) as exc:
            raise self._failure(exc) from exc

    @_retry_when_locked
    async def set_many(self, items: Mapping[str, str], ttl: float | None = None) -> None:
        """See :meth:`StateBackend.set_many` (one transaction; all or nothing)."""
        if not items:
            return
        await self._prepare()
        expires_at = self._expires(ttl)
        rows = [{"key": k, "value": v, "expires_at": expires_at} for k, v in items.items()]
        try:
            async with self._engine.begin() as conn:
                for i in range(0, len(rows), _CHUNK):
                    await conn.execute(self._upsert, rows[i : i + _CHUNK])
        except (SQLAlchemyError, OSError) as exc:
            raise self._failure(exc) from exc

    @_retry_when_locked
    async def delete(self, key: str) -> bool:
        """See :meth:`StateBackend.delete` (one DELETE … RETURNING)."""
        await self._prepare()
        now = self._clock()
        try:
            async with self._auto.connect() as conn:
                rows = (await conn.execute(_DELETE, {"k": key})).all()
        except (SQLAlchemyError, OSError) as exc:
            raise self._failure(exc) from exc
        return any(r[0] is None or r[0] > now for r in rows)

    @_retry_when_locked
    async def delete_many(self, keys: Sequence[str]) -> int:
        """See :meth:`StateBackend.delete_many` (one transaction)."""
        unique = list(dict.fromkeys(keys))
        if not unique:
            return 0
        await self._prepare()
        now = self._clock()
        n = 0
        try:
            async with self._engine.begin() as conn:
                for i in range(0, len(unique), _CHUNK):
                    stmt = sa.delete(_T).where(_C.key.in_(unique[i : i + _CHUNK])).returning(_C.expires_at)
                    for (expires_at,) in await conn.execute(stmt):
                        if expires_at is None or expires_at > now:
                            n += 1
        except (SQLAlchemyError, OSError) as exc:
            raise self._failure(exc) from exc
        return n

    @_retry_when_locked
    async def take(self, key: str) -> str | None:
        """See :meth:`StateBackend.take` (one DELETE … RETURNING; atomic)."""
        await self._prepare()
        try:
            async with self._auto.connect() as conn:
                return (await conn.execute(_TAKE, {"k": key, "now": self._clock()})).scalar_one_or_none()
        except (SQLAlchemyError, OSError) as exc:
            raise self._failure(exc) from exc

    @_retry_when_locked
    async def scan(self, prefix: str, after: str | None, limit: int) -> list[tuple[str, str]]:
        """See :meth:`StateBackend.scan` (one keyset SELECT on the primary key)."""
        if limit <= 0:
            return []
        await self._prepare()
        conds: list[sa.ColumnElement[bool]] = [_live]
        if after is not None and after >= prefix:
            conds.append(_C.key > after)
        elif prefix:
            conds.append(_C.key >= prefix)
        if prefix:
            conds.append(_C.key < prefix_upper_bound(prefix))
        stmt = sa.select(_C.key, _C.value).where(*conds).order_by(_C.key).limit(limit)
        try:
            async with self._auto.connect() as conn:
                rows = (await conn.execute(stmt, {"now": self._clock()})).all()
        except (SQLAlchemyError, OSError) as exc:
            raise self._failure(exc) from exc
        return [(k, v) for k, v in rows]

    async def aclose(self) -> None:
        """Cancel the sweepers and dispose of the engines this backend made (not an ``engine=``).

        Idempotent. The data stays in the database; the next call reconnects. Each other
        event loop's engine is closed by that loop (see :mod:`._loops`).
        """
        await self._loops.aclose()


_SQLITE_POOL = 4
_SQLITE_LOCK_WAIT = 30.0  # seconds a SQLite call may wait for the file's write lock or a pooled connection


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
            pool_timeout=_SQLITE_LOCK_WAIT,
            connect_args={"timeout": _SQLITE_LOCK_WAIT},
        )
        event.listen(engine.sync_engine, "connect", _sqlite_on_connect)
        return engine
    raise ValueError(f"unsupported SQL database {backend!r} (sqlite+aiosqlite, postgresql+asyncpg)")


# SQLSTATE classes a retry cannot fix (asyncpg errors reach SQLAlchemy as a bare DBAPIError,
# so the class of the code decides): 0A not supported, 22 data, 23 integrity, 28 invalid
# authorization, 3D no such database, 3F no such schema, 42 syntax or access rule.
_REFUSED_SQLSTATE = {
    "0A": "NotSupportedError",
    "22": "DataError",
    "23": "IntegrityError",
    "28": "InvalidAuthorization",
    "3D": "InvalidCatalogName",
    "3F": "InvalidSchemaName",
    "42": "ProgrammingError",
}
_REFUSED_TYPES = (DataError, IntegrityError, ProgrammingError, NotSupportedError)


def _refused_kind(exc: BaseException) -> str | None:
    """The kind of a refusal a retry cannot fix (``"DataError, SQLSTATE 22001"``), or None."""
    sqlstate = getattr(exc.orig, "sqlstate", None) if isinstance(exc, DBAPIError) else None
    if isinstance(sqlstate, str) and sqlstate[:2] in _REFUSED_SQLSTATE:
        return f"{_REFUSED_SQLSTATE[sqlstate[:2]]}, SQLSTATE {sqlstate}"
    if isinstance(exc, _REFUSED_TYPES):
        return type(exc).__name__
    return None


def _server_text(exc: BaseException) -> str:
    """The database's own error text (the driver's exception, without SQL or bound values)."""
    orig = exc.orig if isinstance(exc, DBAPIError) else None
    return " ".join(str(orig if orig is not None else exc).split())[:500]


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()
