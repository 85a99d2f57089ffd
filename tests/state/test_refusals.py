"""A backend that refuses for good is a configuration error, not a retryable outage.

Connection-level failures (refused, reset, timed out, pool exhausted) stay
``StateUnavailableError`` (503, ``Retry-After``); a server that answers every attempt with the
same error (Redis ``DB index is out of range``, a PostgreSQL ``DataError`` after a manual
``ALTER``, an SQLite ``CHECK`` the schema does not have) is ``ConfigurationError`` (-32603,
HTTP 500, not retryable), from ``check()`` as from a call, and the server log carries the
server's own error text.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import redis.exceptions as rex
import sqlalchemy as sa

from fastapi_mcp_ctx.backends import redis as redis_backend
from fastapi_mcp_ctx.backends import sql_migrations
from fastapi_mcp_ctx.backends.redis import RedisBackend
from fastapi_mcp_ctx.backends.sql import SqlBackend
from fastapi_mcp_ctx.errors import ConfigurationError, StateUnavailableError
from fastapi_mcp_ctx.state import ContextState

from .conftest import service_url, temporary_postgres_database
from .test_schema_check import _execute  # pyright: ignore[reportPrivateUsage]


def _assert_permanent(error: BaseException, needle: str) -> None:
    assert isinstance(error, ConfigurationError) and not isinstance(error, StateUnavailableError)
    assert (error.code, error.http_status, error.retryable) == (-32603, 500, False)
    assert "retry later" not in error.message and "Retry-After" not in error.headers
    assert needle in error.message, error.message


@pytest.mark.parametrize(
    ("exc", "permanent"),
    [
        (rex.ResponseError("DB index is out of range"), True),
        (rex.ResponseError("ERR unknown command 'GETDEL'"), True),
        (rex.NoPermissionError("NOPERM this user has no permissions to run the 'eval' command"), True),
        (rex.AuthenticationError("WRONGPASS invalid username-password pair"), True),
        (rex.ResponseError("LOADING Redis is loading the dataset in memory"), False),
        (rex.ResponseError("BUSY Redis is busy running a script"), False),
        (rex.ResponseError("TRYAGAIN Multiple keys request during rehashing of slot"), False),
        (rex.ResponseError("CLUSTERDOWN The cluster is down"), False),
        (rex.ResponseError("OOM command not allowed when used memory > 'maxmemory'"), False),
        # what redis-py really raises for a full Redis (noeviction) and a replica: the prefix stripped
        (rex.OutOfMemoryError("command not allowed when used memory > 'maxmemory'. script: 219b, on @user_script:1."), False),
        (rex.ReadOnlyError("You can't write against a read only replica."), False),
        (rex.BusyLoadingError("Redis is loading the dataset in memory"), False),
        (rex.ConnectionError("Error 111 connecting to 127.0.0.1:1. Connection refused."), False),
        (rex.TimeoutError("Timeout reading from socket"), False),
        (ConnectionResetError(104, "Connection reset by peer"), False),
    ],
)
def test_redis_classification(exc: BaseException, permanent: bool) -> None:
    error = RedisBackend._unavailable(exc)  # pyright: ignore[reportPrivateUsage]
    assert isinstance(error, ConfigurationError) is permanent
    assert isinstance(error, StateUnavailableError) is not permanent
    assert (redis_backend._refusal(exc) is not None) is permanent  # pyright: ignore[reportPrivateUsage]


@pytest.mark.redis
async def test_redis_database_index_out_of_range(caplog: pytest.LogCaptureFixture) -> None:
    url = sa.make_url(service_url("redis").replace("redis://", "sqlite://", 1))  # parse only
    backend = RedisBackend(f"redis://{url.host}:{url.port}/99")
    try:
        with caplog.at_level(logging.WARNING, logger="fastapi_mcp_ctx.backends.redis"):
            for call in (backend.check, lambda: ContextState(backend, "t").get("k")):
                with pytest.raises(ConfigurationError) as info:
                    await call()
                _assert_permanent(info.value, "databases")
        assert any("DB index is out of range" in r.getMessage() for r in caplog.records)
    finally:
        await backend.aclose()


async def test_sqlite_statement_refused_by_a_foreign_constraint(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'state.db'}"
    await sql_migrations.upgrade(url)
    await _execute(
        url,
        "DROP TABLE mcp_state",
        "CREATE TABLE mcp_state (key TEXT PRIMARY KEY, value TEXT NOT NULL CHECK (length(value) < 8), expires_at REAL)",
    )
    backend = SqlBackend(url)
    try:
        s = ContextState(backend, "acme")
        await s.set("short", 1)  # the schema check passes; short values fit
        with caplog.at_level(logging.WARNING, logger="fastapi_mcp_ctx.backends.sql"):
            with pytest.raises(ConfigurationError) as info:
                await s.set("long", "x" * 100)
        _assert_permanent(info.value, "migrate --check")
        assert "IntegrityError" in info.value.message
        assert any("CHECK constraint failed" in r.getMessage() for r in caplog.records)
        assert await s.get("short") == 1  # the backend keeps serving what it can
    finally:
        await backend.aclose()


@pytest.mark.postgres
async def test_postgres_value_too_long_after_alter(caplog: pytest.LogCaptureFixture) -> None:
    async with temporary_postgres_database("mcp_refusal") as url:
        await sql_migrations.upgrade(url)
        await _execute(url, "ALTER TABLE mcp_state ALTER COLUMN value TYPE varchar(10)")
        backend = SqlBackend(url)
        try:
            s = ContextState(backend, "acme")
            await backend.check()
            with caplog.at_level(logging.WARNING, logger="fastapi_mcp_ctx.backends.sql"):
                for _ in range(2):  # the same answer every time: not an outage
                    with pytest.raises(ConfigurationError) as info:
                        await s.set("k", "x" * 100)
                    _assert_permanent(info.value, "migrate --check")
            assert "DataError" in info.value.message
            assert any("value too long" in r.getMessage() for r in caplog.records)
            await _execute(url, "ALTER TABLE mcp_state RENAME COLUMN expires_at TO gone")
            with pytest.raises(ConfigurationError, match="ProgrammingError"):
                await s.get("k")
        finally:
            await backend.aclose()
