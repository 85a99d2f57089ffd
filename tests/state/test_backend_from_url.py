"""backend_from_url: scheme dispatch, no I/O at construction, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from fastapi_mcp_ctx.backends import MemoryBackend, StateBackend, backend_from_url
from fastapi_mcp_ctx.backends.redis import RedisBackend
from fastapi_mcp_ctx.backends.sql import SqlBackend
from fastapi_mcp_ctx.state import ContextState

from .conftest import FakeClock


@pytest.mark.parametrize(
    ("url", "cls"),
    [
        ("memory://", MemoryBackend),
        ("redis://127.0.0.1:1/0", RedisBackend),  # nothing listens: construction must not connect
        ("rediss://user:pw@127.0.0.1:1/0", RedisBackend),
        ("sqlite+aiosqlite:////nonexistent/dir/state.db", SqlBackend),
        ("postgresql+asyncpg://u:p@127.0.0.1:1/db", SqlBackend),
    ],
)
async def test_dispatch_without_io(url: str, cls: type) -> None:
    backend = backend_from_url(url)
    assert isinstance(backend, cls)
    assert isinstance(backend, StateBackend)
    await backend.aclose()


@pytest.mark.parametrize(
    "url",
    ["", "memory", "http://x", "mysql+aiomysql://u@h/db", "postgresql://u@h/db", "sqlite:///x.db", "postgresql+psycopg://u@h/db"],
)
def test_unknown_scheme_is_a_clear_value_error(url: str) -> None:
    with pytest.raises(ValueError, match="unsupported"):
        backend_from_url(url)


def test_error_message_does_not_leak_credentials() -> None:
    with pytest.raises(ValueError) as info:
        backend_from_url("user:secret@host")
    assert "secret" not in str(info.value)


async def test_sqlite_create_tables_and_clock(tmp_path: Path) -> None:
    clock = FakeClock()
    backend = backend_from_url(f"sqlite+aiosqlite:///{tmp_path / 's.db'}", create_tables=True, clock=clock)
    s = ContextState(backend, "acme")
    try:
        await s.set("k", 1, ttl=10)
        assert await s.get("k") == 1
        clock.advance(10)
        assert await s.get("k") is None
        assert isinstance(backend, SqlBackend)
        assert await backend.sweep() == 1  # the background sweeper's statement
    finally:
        await backend.aclose()


async def test_memory_clock() -> None:
    clock = FakeClock()
    s = ContextState(backend_from_url("memory://", clock=clock), "acme")
    await s.set("k", 1, ttl=1)
    clock.advance(0.999)
    assert await s.get("k") == 1
    clock.advance(0.001)
    assert await s.get("k") is None
