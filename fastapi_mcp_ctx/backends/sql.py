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
one sweeper) per running loop, made on first use there (see :mod:`._loops`). The engines and
SQLite's lock retry are in ``_sql_engine``; which failures a retry cannot fix, in ``_sql_refusals``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from ..errors import ConfigurationError, StateUnavailableError
from ._loops import OneLoop, PerLoop
from ._sql_engine import LoopEngine, make_engine, retry_when_locked
from ._sql_models import state_table
from ._sql_refusals import refused_kind, server_text
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
        self._loops: PerLoop[LoopEngine] = PerLoop(
            self._open, LoopEngine.aclose, self._sweep_loop if sweep_interval > 0 else None
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
        kind = refused_kind(exc)
        if kind is not None:
            logger.error("sql state backend: the database refused a statement (%s): %s", kind, server_text(exc))
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

    def _open(self) -> LoopEngine:
        """The engine of a loop that has none yet (no I/O)."""
        if self._new_engine is not None:
            spare, self._spare = self._spare, None
            return LoopEngine(spare or self._new_engine(), True)
        self._one_loop.claim()
        return LoopEngine(self._given, False)

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

    async def _sweep_loop(self, _entry: LoopEngine) -> None:
        """A loop's keeper work (see :class:`PerLoop`): delete expired rows every ``sweep_interval`` s."""
        while True:
            await asyncio.sleep(self._sweep_interval)
            with contextlib.suppress(Exception):
                await self.sweep()

    @retry_when_locked
    async def sweep(self) -> int:
        """Delete the rows whose expiry has passed; the number deleted."""
        try:
            async with self._auto.connect() as conn:
                result = await conn.execute(_SWEEP, {"now": self._clock()})
        except (SQLAlchemyError, OSError) as exc:
            raise self._failure(exc) from exc
        return result.rowcount

    # ------------------------------------------------------------------ protocol
    @retry_when_locked
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

    @retry_when_locked
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

    @retry_when_locked
    async def set(self, key: str, value: str, ttl: float | None = None) -> None:
        """See :meth:`StateBackend.set` (one upsert)."""
        if not self._ready:
            await self._prepare()
        try:
            async with self._auto.connect() as conn:
                await conn.execute(self._upsert, {"key": key, "value": value, "expires_at": self._expires(ttl)})
        except (SQLAlchemyError, OSError) as exc:
            raise self._failure(exc) from exc

    @retry_when_locked
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

    @retry_when_locked
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

    @retry_when_locked
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

    @retry_when_locked
    async def take(self, key: str) -> str | None:
        """See :meth:`StateBackend.take` (one DELETE … RETURNING; atomic)."""
        await self._prepare()
        try:
            async with self._auto.connect() as conn:
                return (await conn.execute(_TAKE, {"k": key, "now": self._clock()})).scalar_one_or_none()
        except (SQLAlchemyError, OSError) as exc:
            raise self._failure(exc) from exc

    @retry_when_locked
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
