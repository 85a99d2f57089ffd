"""A backend that is down: every call raises StateUnavailableError within a bounded time
(never a silent miss, never a partial batch), and acknowledged data is there after restart.

The real-service tests stop the Redis / PostgreSQL started by ``scripts/services.sh`` and
start it again in ``finally``, so the suite leaves the services running.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from fastapi_mcp_ctx.backends.redis import RedisBackend
from fastapi_mcp_ctx.backends.sql import SqlBackend
from fastapi_mcp_ctx.errors import StateUnavailableError
from fastapi_mcp_ctx.state import ContextState

from .conftest import SERVICES_SH, alembic, fake_client, service_url

BOUND = 10.0  # seconds a failing call may take at most


def every_call(s: ContextState) -> list[Callable[[], Awaitable[Any]]]:
    return [
        lambda: s.get("k/0"),
        lambda: s.get_many(["k/0", "k/1"]),
        lambda: s.set("k/new", 1),
        lambda: s.set("k/new", 1, ttl=5),
        lambda: s.set_many({"k/new1": 1, "k/new2": 2}),
        lambda: s.delete("k/1"),
        lambda: s.delete_many(["k/1", "k/2"]),
        lambda: s.take("k/3"),
        lambda: s.list("k/"),
    ]


async def assert_all_unavailable(s: ContextState) -> None:
    for call in every_call(s):
        started = time.monotonic()
        with pytest.raises(StateUnavailableError) as info:
            await asyncio.wait_for(call(), timeout=BOUND + 5)
        assert time.monotonic() - started < BOUND
        assert info.value.retryable and info.value.http_status == 503
        assert info.value.headers["Retry-After"] == str(info.value.retry_after)


async def wait_until_available(s: ContextState, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            await s.get("k/0")
            return
        except StateUnavailableError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def write_acknowledged(s: ContextState) -> dict[str, Any]:
    data = {f"k/{i:03d}": {"i": i, "text": "x" * (i % 7)} for i in range(200)}
    for key in list(data)[:100]:
        await s.set(key, data[key])
    await s.set_many(dict(list(data.items())[100:]))
    return data


async def assert_all_there(s: ContextState, data: dict[str, Any]) -> None:
    assert await s.get_many(list(data)) == data
    walked: list[str] = []
    cursor: str | None = None
    while True:
        page = await s.list("k/", cursor=cursor, limit=64)
        walked.extend(i.key for i in page.items)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert walked == sorted(data)


# ------------------------------------------------------------------ embedded / fake
async def test_fakeredis_down_then_back() -> None:
    import fakeredis

    server = fakeredis.FakeServer()
    backend = RedisBackend(client=fake_client(server), owns_client=True)
    s = ContextState(backend, "acme")
    try:
        data = await write_acknowledged(s)
        server.connected = False
        await assert_all_unavailable(s)
        server.connected = True
        await assert_all_there(s, data)
    finally:
        await backend.aclose()


async def test_sqlite_unreachable_file(tmp_path: Path) -> None:
    backend = SqlBackend(f"sqlite+aiosqlite:///{tmp_path / 'missing-dir' / 'state.db'}", create_tables=True)
    try:
        await assert_all_unavailable(ContextState(backend, "acme"))
    finally:
        await backend.aclose()


async def test_redis_nothing_listening() -> None:
    backend = RedisBackend("redis://127.0.0.1:1/0")
    try:
        await assert_all_unavailable(ContextState(backend, "acme"))
    finally:
        await backend.aclose()


async def test_postgres_nothing_listening() -> None:
    backend = SqlBackend("postgresql+asyncpg://postgres@127.0.0.1:1/none")
    try:
        await assert_all_unavailable(ContextState(backend, "acme"))
    finally:
        await backend.aclose()


# ----------------------------------------------------------------------- real services
def _run(*args: str, env: dict[str, str] | None = None) -> None:
    import os

    proc = subprocess.run(
        list(args),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
    assert proc.returncode == 0, f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr}"


@pytest.mark.redis
async def test_real_redis_stopped_mid_test_then_restarted() -> None:
    url = service_url("redis")
    port = str(urlsplit(url).port or 6379)
    svc_env = {"MCP_REDIS_PORT": port}
    backend = RedisBackend(url, namespace=f"mcp-test-failure:{time.time_ns()}:")
    s = ContextState(backend, "acme")
    try:
        data = await write_acknowledged(s)
        # Kill without a final save: AOF (appendfsync always) must already hold every write.
        _run("redis-cli", "-h", "127.0.0.1", "-p", port, "shutdown", "nosave")
        await assert_all_unavailable(s)
    finally:
        _run("bash", str(SERVICES_SH), "start", "redis", env=svc_env)
    try:
        await wait_until_available(s)
        await assert_all_there(s, data)
        await s.delete_many(list(data))
    finally:
        await backend.aclose()


@pytest.mark.postgres
async def test_real_postgres_stopped_mid_test_then_restarted() -> None:
    url = service_url("postgres")
    port = str(urlsplit(url.replace("postgresql+asyncpg", "postgresql")).port or 5432)
    svc_env = {"MCP_PG_PORT": port}
    await asyncio.to_thread(alembic, url, "upgrade")
    backend = SqlBackend(url)
    s = ContextState(backend, f"failure-{time.time_ns()}")
    try:
        data = await write_acknowledged(s)
        _run("bash", str(SERVICES_SH), "stop", "postgres", env=svc_env)  # pg_ctl stop -m fast
        await assert_all_unavailable(s)
    finally:
        _run("bash", str(SERVICES_SH), "start", "postgres", env=svc_env)
    try:
        await wait_until_available(s)
        await assert_all_there(s, data)
        await s.delete_many(list(data))
    finally:
        await backend.aclose()


@pytest.mark.parametrize("scheme", ["redis", "postgres"])
async def test_a_server_that_never_answers_times_out(scheme: str) -> None:
    """A black hole (accepts, never replies): the socket timeouts bound every call."""
    held: list[asyncio.StreamWriter] = []

    async def accept(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        held.append(w)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    backend = (
        RedisBackend(f"redis://127.0.0.1:{port}/0")
        if scheme == "redis"
        else SqlBackend(f"postgresql+asyncpg://u@127.0.0.1:{port}/db")
    )
    s = ContextState(backend, "acme")
    try:
        for call in (lambda: s.get("k"), lambda: s.set("k", 1)):
            started = time.monotonic()
            with pytest.raises(StateUnavailableError):
                await asyncio.wait_for(call(), timeout=BOUND + 5)
            assert time.monotonic() - started < BOUND
    finally:
        await backend.aclose()
        for w in held:
            w.close()
        server.close()
        await server.wait_closed()
