"""Fixtures of the ctx.state contract suite: one `env` fixture parametrized over every backend.

Real services come from the environment (see ``scripts/services.sh env``)::

    MCP_TEST_REDIS_URL=redis://127.0.0.1:56379/0
    MCP_TEST_POSTGRES_URL=postgresql+asyncpg://postgres@127.0.0.1:55432/mcp_test

Unset → those parameters are skipped with the reason, unless ``MCP_REQUIRE_SERVICES=1``,
which turns the skip into a failure (CI must not pass silently without its services).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fastapi_mcp_ctx.backends.base import StateBackend
from fastapi_mcp_ctx.backends.memory import MemoryBackend
from fastapi_mcp_ctx.backends.redis import RedisBackend
from fastapi_mcp_ctx.backends.sql import SqlBackend
from fastapi_mcp_ctx.state import ContextState

REPO = Path(__file__).resolve().parents[2]
SERVICES_SH = REPO / "scripts" / "services.sh"
SERVICE_ENV = {
    "redis": "MCP_TEST_REDIS_URL",
    "postgres": "MCP_TEST_POSTGRES_URL",
    "redis-cluster": "MCP_TEST_REDIS_CLUSTER_URL",
    "redis-sentinel": "MCP_TEST_REDIS_SENTINEL_URL",
}

ALL_KINDS = [
    pytest.param("memory", id="memory"),
    pytest.param("fakeredis", id="fakeredis"),
    pytest.param("sqlite", id="sqlite"),
    pytest.param("redis", id="redis", marks=pytest.mark.redis),
    pytest.param("redis-cluster", id="redis-cluster", marks=pytest.mark.redis),  # issue 21: a tenant per slot
    pytest.param("redis-sentinel", id="redis-sentinel", marks=pytest.mark.redis),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]
FAKE_CLOCK_KINDS = {"memory", "sqlite", "postgres"}  # TTLs follow an injected clock


def service_url(service: str) -> str:
    """The URL of a real service, or skip (fail under MCP_REQUIRE_SERVICES=1)."""
    var = SERVICE_ENV[service]
    url = os.environ.get(var)
    if not url:
        msg = f"{var} is not set: run `scripts/services.sh start` and `eval \"$(scripts/services.sh env)\"`"
        if os.environ.get("MCP_REQUIRE_SERVICES") == "1":
            pytest.fail(f"MCP_REQUIRE_SERVICES=1 but {msg}")
        pytest.skip(msg)
    return url


def services(*args: str) -> None:
    """Run ``scripts/services.sh`` (start/stop a service) and fail loudly if it fails."""
    proc = subprocess.run(
        ["bash", str(SERVICES_SH), *args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    assert proc.returncode == 0, f"services.sh {' '.join(args)} failed: {proc.stderr}"


class FakeClock:
    """A settable wall clock (seconds)."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def alembic(url: str, command: str, revision: str = "head") -> None:
    """Run an Alembic command programmatically on the packaged migrations (the ``Config``
    ``fastapi-mcp-ctx migrate`` builds), with no shared connection: env.py's own path.

    env.py then runs its own event loop (``asyncio.run``), so the command runs in a worker
    thread; this call blocks until it is done and re-raises its error.
    """
    from concurrent.futures import ThreadPoolExecutor

    from alembic import command as commands

    from fastapi_mcp_ctx.backends.sql_migrations import alembic_config

    with ThreadPoolExecutor(1) as pool:
        pool.submit(getattr(commands, command), alembic_config(url), revision).result()


@contextlib.asynccontextmanager
async def temporary_postgres_database(prefix: str) -> AsyncIterator[str]:
    """A fresh, empty PostgreSQL database on the server of ``MCP_TEST_POSTGRES_URL`` (skip
    when unset), dropped afterwards: tests that need an unmigrated schema never touch the
    shared ``mcp_test`` database. Yields its ``postgresql+asyncpg://`` URL."""
    import sqlalchemy as sa
    from sqlalchemy.ext.asyncio import create_async_engine

    base = sa.make_url(service_url("postgres"))
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = create_async_engine(base, isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as conn:
            await conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        try:
            yield base.set(database=name).render_as_string(hide_password=False)
        finally:
            async with admin.connect() as conn:
                await conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        await admin.dispose()


_pg_migrated = False


@dataclass
class Env:
    """One backend under test plus the means to build more of it (same store) and move time."""

    kind: str
    make: Callable[[], StateBackend]
    clock: FakeClock | None
    backend: StateBackend = field(init=False)
    created: list[StateBackend] = field(default_factory=lambda: [])

    def __post_init__(self) -> None:
        self.backend = self.new_backend()

    def new_backend(self) -> StateBackend:
        """Another client of the same store (another "process")."""
        backend = self.make()
        self.created.append(backend)
        return backend

    def clients(self, n: int) -> list[StateBackend]:
        """``n`` clients of one store (memory: the one backend; others: distinct pools)."""
        if self.kind == "memory":
            return [self.backend] * n
        return [self.backend, *(self.new_backend() for _ in range(n - 1))]

    def state(self, tenant: str | None = None) -> ContextState:
        return ContextState(self.backend, tenant if tenant is not None else "t-" + uuid.uuid4().hex[:8])

    async def advance(self, seconds: float) -> None:
        """Move time forward: the fake clock when the backend has one, else real sleep."""
        if self.clock is not None:
            self.clock.advance(seconds)
        else:
            await asyncio.sleep(seconds)


def fake_client(server: Any) -> Any:
    """A fakeredis client shaped like the one RedisBackend builds (str replies, 64 connections)."""
    import fakeredis

    return fakeredis.FakeAsyncRedis(server=server, decode_responses=True, max_connections=64)


def build_env(kind: str, tmp_path: Path) -> Env:
    """An Env for ``kind``; real services resolved from the environment (skip/fail if absent)."""
    if kind == "memory":
        clock = FakeClock()
        return Env(kind, lambda: MemoryBackend(clock=clock), clock)
    if kind == "fakeredis":
        import fakeredis

        server = fakeredis.FakeServer()
        return Env(kind, lambda: RedisBackend(client_factory=lambda: fake_client(server)), None)
    if kind == "sqlite":
        clock = FakeClock()
        url = f"sqlite+aiosqlite:///{tmp_path / 'state.db'}"
        return Env(kind, lambda: SqlBackend(url, create_tables=True, clock=clock), clock)
    if kind in ("redis", "redis-cluster", "redis-sentinel"):
        url = service_url(kind)
        ns = f"mcp-test:{uuid.uuid4().hex}:"
        return Env(kind, lambda: RedisBackend(url, namespace=ns), None)
    if kind == "postgres":
        global _pg_migrated
        url = service_url("postgres")
        if not _pg_migrated:
            alembic(url, "upgrade")
            _pg_migrated = True
        clock = FakeClock()
        return Env(kind, lambda: SqlBackend(url, clock=clock), clock)
    raise AssertionError(kind)


async def truncate_postgres(backend: StateBackend) -> None:
    """The PostgreSQL database is shared by every test: start each from an empty table."""
    import sqlalchemy as sa

    assert isinstance(backend, SqlBackend)
    async with backend._engine.begin() as conn:  # pyright: ignore[reportPrivateUsage]
        await conn.execute(sa.text("DELETE FROM mcp_state"))


async def close_env(env: Env) -> None:
    for backend in env.created:
        if env.kind.startswith("redis") and isinstance(backend, RedisBackend):
            await _redis_cleanup(backend)
        await backend.aclose()


async def _redis_cleanup(backend: RedisBackend) -> None:
    client: Any = backend.client
    prefix = backend._idx[: -len("idx")]  # pyright: ignore[reportPrivateUsage]
    try:
        keys = [k async for k in client.scan_iter(match=prefix + "*", count=1000)]
        for key in keys:  # one by one: on a cluster they are on several slots
            await client.delete(key)
    except Exception:  # the failure tests may leave the server restarting
        pass


@pytest.fixture(params=ALL_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def env(kind: str, tmp_path: Path) -> AsyncIterator[Env]:
    e = build_env(kind, tmp_path)
    if kind == "postgres":
        await truncate_postgres(e.backend)
    try:
        yield e
    finally:
        await close_env(e)


@pytest.fixture
def sync_env_factory(tmp_path: Path) -> Iterator[Callable[[str], Env]]:
    """For sync tests driving their own loop (hypothesis): build Envs, closed by the caller."""
    yield lambda k: build_env(k, tmp_path)
