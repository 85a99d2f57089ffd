"""Storage backends for ``ctx.state`` (and the other shared stores), chosen by URL.

=============================================  ===========================================
URL                                            backend
=============================================  ===========================================
``memory://``                                  :class:`~.memory.MemoryBackend` (one process)
``redis://host:port/db``, ``rediss://…``       :class:`~.redis.RedisBackend` (redis-py asyncio)
``sqlite+aiosqlite:///path/state.db``          :class:`~.sql.SqlBackend` (SQLite ≥ 3.35)
``postgresql+asyncpg://user:pw@host:port/db``  :class:`~.sql.SqlBackend` (PostgreSQL)
=============================================  ===========================================

Lifecycle: :func:`backend_from_url` does no I/O (and imports redis / SQLAlchemy only for
their schemes: without the extra, a :class:`~fastapi_mcp_ctx.errors.ConfigurationError` says
which ``pip install`` to run). The backend connects on first use, one pool per event loop
that uses it, and holds its pools (and, for SQL, an expiry sweeper task per loop) until
``await backend.aclose()``, which the application calls at shutdown; a call after that
reconnects. ``aclose`` never deletes data (the memory backend's included).

The package imports only ``settings``, ``_extras`` and ``errors``; ``state``, ``consent``, ``_auth``,
``_replicas``, ``router``, ``cli`` and ``testing`` import it.
"""

from __future__ import annotations

from collections.abc import Callable

from .._extras import missing_extra
from .base import StateBackend
from .memory import MemoryBackend

__all__ = ["MemoryBackend", "StateBackend", "backend_from_url"]

REDIS_SCHEMES = ("redis", "rediss", "redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel")
"""The URL schemes of the Redis stores: one server, a cluster, a sentinel group (``._redis_url``)."""


def backend_from_url(
    url: str,
    *,
    create_tables: bool = False,
    clock: Callable[[], float] | None = None,
) -> StateBackend:
    """Build the backend named by ``url`` (``McpSettings.storage_url``) without connecting.

    Args:
        url: ``memory://``, ``redis://…`` / ``rediss://…`` / ``redis+cluster://…`` /
            ``redis+sentinel://…`` (:mod:`._redis_url`), ``sqlite+aiosqlite:///…`` or
            ``postgresql+asyncpg://…``.
        create_tables: SQL only: create the ``mcp_state`` table on first use instead of
            relying on ``fastapi-mcp-ctx migrate`` (``McpSettings.storage_create_tables``).
        clock: wall clock in seconds for TTLs (memory and SQL; Redis expires natively).

    Returns:
        A :class:`StateBackend`; call ``await backend.aclose()`` at shutdown.

    Raises:
        ValueError: unknown scheme or unsupported driver.
        ConfigurationError: the package extra the scheme needs is not installed; the message
            says ``pip install "fastapi-mcp-ctx[redis]"`` (or ``[sql]``).
    """
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme == "memory":
        return MemoryBackend(clock=clock)
    try:
        if scheme in REDIS_SCHEMES:
            from .redis import RedisBackend

            return RedisBackend(url)
        if scheme in ("sqlite+aiosqlite", "postgresql+asyncpg"):
            from .sql import SqlBackend  # the driver itself is imported when the engine is made

            return SqlBackend(url, create_tables=create_tables, clock=clock)
    except ModuleNotFoundError as exc:
        raise missing_extra(exc, f"the storage URL {scheme}://") from exc
    raise ValueError(
        f"unsupported storage URL scheme {scheme or '(none)'!r}: expected memory://, redis://, rediss://, redis+cluster://, "
        "redis+sentinel://, "
        "sqlite+aiosqlite:///path or postgresql+asyncpg://…"
    )
