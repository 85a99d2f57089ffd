"""Backend lifecycle: ``aclose`` then reuse, and one backend across event loops.

Found by a user testing a module-level app: after ``await mcp_router.aclose()`` (the
documented shutdown) the SQL backend answered "State backend is closed" (a retryable 503)
forever and the memory backend dropped its data; and a Redis or SQL backend first used on one
event loop failed obscurely ("Event loop is closed", "bound to a different event loop") on the
next, which pytest-asyncio gives every test. Now ``aclose`` releases the pools and the next call
reconnects; each running loop gets its own pool, closed on that loop when the loop ends.

These tests drive their own loops (``asyncio.run`` in a row, threads), so they are sync.
"""

from __future__ import annotations

import asyncio
import gc
import secrets
import threading
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import fakeredis
import pytest
from fastapi import Depends, FastAPI
from sqlalchemy.ext.asyncio import create_async_engine
from starlette.testclient import TestClient

from fastapi_mcp_ctx import Context, McpRouter, McpSettings, mcp_context
from fastapi_mcp_ctx._wire.envelope import META_CAPABILITIES, META_CLIENT_INFO, META_VERSION
from fastapi_mcp_ctx.backends._loops import PerLoop
from fastapi_mcp_ctx.backends.base import StateBackend
from fastapi_mcp_ctx.backends.redis import RedisBackend
from fastapi_mcp_ctx.backends.sql import SqlBackend
from fastapi_mcp_ctx.state import ContextState
from fastapi_mcp_ctx.testing import McpTestClient

from .conftest import Env, build_env, close_env, fake_client, service_url, truncate_postgres

T = TypeVar("T")


def run(make: Callable[[], Awaitable[T]]) -> T:
    """One coroutine on a fresh event loop, as one pytest-asyncio test (or one asyncio.run) gets."""

    async def main() -> T:
        return await make()

    return asyncio.run(main())


@pytest.fixture
def fresh(kind: str, tmp_path: Path) -> Any:
    """An Env for ``kind`` (empty store), closed after the test on a loop of its own."""
    env = build_env(kind, tmp_path)
    if kind == "postgres":
        run(lambda: truncate_postgres(env.backend))
    yield env
    run(lambda: close_env(env))


async def exercise(state: ContextState, run_no: int, concurrency: int) -> None:
    """Every operation, plus enough concurrent calls to wait on the pool (locks, queues, slots)."""
    await state.set(f"run/{run_no}", {"n": run_no}, ttl=600)
    await state.set_many({f"batch/{run_no}/{i}": i for i in range(5)})
    assert await state.get_many([f"batch/{run_no}/{i}" for i in range(5)]) == {f"batch/{run_no}/{i}": i for i in range(5)}
    assert await state.delete_many([f"batch/{run_no}/0", f"batch/{run_no}/1"]) == 2
    await state.set(f"once/{run_no}", "token")
    takes = await asyncio.gather(*(state.take(f"once/{run_no}") for _ in range(8)))
    assert takes.count("token") == 1 and takes.count(None) == 7  # one taker wins
    gets = await asyncio.gather(*(state.get(f"run/{run_no}") for _ in range(concurrency)))
    assert gets == [{"n": run_no}] * concurrency
    page = await state.list("run/")
    assert [item.key for item in page.items] == [f"run/{i}" for i in range(1, run_no + 1)]


def test_one_backend_serves_one_event_loop_after_another(fresh: Env) -> None:
    state = fresh.state("acme")
    concurrency = 40 if fresh.kind == "postgres" else 100  # above every pool size (SQLite 4, Redis 64)
    for run_no in (1, 2, 3):
        run(lambda: exercise(state, run_no, concurrency))
    assert run(lambda: state.get("run/1")) == {"n": 1}


def test_aclose_then_reuse_reconnects_and_keeps_the_data(fresh: Env) -> None:
    backend, state = fresh.backend, fresh.state("acme")

    async def same_loop() -> None:
        await state.set("kept", "before close")
        await backend.aclose()
        assert await state.get("kept") == "before close"  # reconnected; the data stayed (memory too)
        await backend.aclose()
        await backend.aclose()  # idempotent
        await state.set("after", 2)
        await backend.aclose()

    async def next_loop() -> None:
        assert await state.get_many(["kept", "after"]) == {"kept": "before close", "after": 2}
        await exercise(state, 1, 10)
        await backend.aclose()

    run(same_loop)
    run(next_loop)
    run(lambda: exercise(state, 2, 10))  # closed on the last loop, reused on a new one


def test_a_backend_never_used_closes_cleanly(fresh: Env) -> None:
    run(fresh.backend.aclose)
    run(fresh.backend.aclose)


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("redis", marks=pytest.mark.redis), pytest.param("postgres", marks=pytest.mark.postgres)])
def test_threads_with_their_own_loops_share_one_backend(fresh: Env) -> None:
    """Side by side, not one after another: each thread's loop gets its own pool."""
    state = fresh.state("acme")
    barrier = threading.Barrier(2, timeout=10)
    errors: list[BaseException] = []

    async def work(worker: int) -> None:
        await state.set(f"w/{worker}/start", worker)
        await asyncio.to_thread(barrier.wait)  # both loops hold a pool now
        for i in range(25):
            await state.set(f"w/{worker}/{i}", i)
            assert await state.get(f"w/{worker}/{i}") == i
        assert await state.get(f"w/{1 - worker}/start") == 1 - worker

    def thread_main(worker: int) -> None:
        try:
            run(lambda: work(worker))
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=thread_main, args=(w,)) for w in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    assert len(run(lambda: state.list("w/", limit=100)).items) == 52


@pytest.mark.filterwarnings("ignore::RuntimeWarning", "ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_loop_closed_without_cancelling_its_tasks_is_left_behind(fresh: Env) -> None:
    """A bare ``loop.close()`` (no task cancelled, so no keeper ran): the next loop drops that pool.

    Its connections are then the garbage collector's, whose finalizers complain (redis-py's
    ``__del__`` cannot schedule a disconnect on a closed loop): hence the filters.
    """
    state = fresh.state("acme")
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(state.set("k", 1))
    finally:
        loop.close()
    assert run(lambda: state.get("k")) == 1
    gc.collect()  # the dropped pool's connections close as they are collected


def test_aclose_from_one_loop_closes_each_pool_on_its_own_loop() -> None:
    closed_on: list[asyncio.AbstractEventLoop] = []

    async def close(value: object) -> None:
        closed_on.append(asyncio.get_running_loop())

    pools: PerLoop[object] = PerLoop(object, close)
    other_ready, release = threading.Event(), threading.Event()
    other: list[asyncio.AbstractEventLoop] = []

    async def other_thread() -> None:
        pools.get()
        other.append(asyncio.get_running_loop())
        other_ready.set()
        await asyncio.to_thread(release.wait, 10)

    thread = threading.Thread(target=lambda: run(other_thread))
    thread.start()
    assert other_ready.wait(10)

    async def here() -> asyncio.AbstractEventLoop:
        pools.get()
        await pools.aclose()
        await pools.aclose()
        return asyncio.get_running_loop()

    mine = run(here)
    for _ in range(200):  # the other loop closes its own pool, soon
        if len(closed_on) == 2:
            break
        threading.Event().wait(0.01)
    release.set()
    thread.join(10)
    # each on its own loop (in either order), once: the other loop's end closed nothing more
    assert len(closed_on) == 2 and set(closed_on) == {mine, other[0]}


# -- a loop that ends closes its pool ------------------------------------------------------


async def _postgres_connections(url: str) -> int:
    import asyncpg  # pyright: ignore[reportMissingTypeStubs]

    conn: Any = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))  # pyright: ignore[reportUnknownMemberType]
    try:
        sql = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        return int(await conn.fetchval(sql))
    finally:
        await conn.close()


async def _redis_clients(url: str, name: str) -> int:
    from redis.asyncio import Redis

    client = Redis.from_url(url, decode_responses=True)
    try:
        return sum(1 for c in await client.client_list() if c.get("name") == name)
    finally:
        await client.aclose()


def _aiosqlite_threads(known: set[threading.Thread]) -> int:
    """aiosqlite's worker threads (one per open connection) started since ``known`` and still alive."""
    new = [t for t in threading.enumerate() if "_connection_worker_thread" in t.name and t not in known]
    for t in new:
        t.join(2)  # a closed connection's thread ends just after close() returns
    return sum(1 for t in new if t.is_alive())


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("redis", marks=pytest.mark.redis), pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_loop_that_ends_without_aclose_closes_its_pool(kind: str, tmp_path: Path) -> None:
    """asyncio.run cancels pending tasks before closing its loop: the pool's keeper closes it there."""
    backend: StateBackend
    if kind == "sqlite":
        backend = SqlBackend(f"sqlite+aiosqlite:///{tmp_path / 'state.db'}", create_tables=True)
        known = set(threading.enumerate())
        count: Callable[[], int] = lambda: _aiosqlite_threads(known)  # noqa: E731
    elif kind == "redis":
        url, name = service_url("redis"), f"lifecycle-{uuid.uuid4().hex[:12]}"
        backend = RedisBackend(f"{url}{'&' if '?' in url else '?'}client_name={name}", namespace=f"mcp-test:{name}:")
        count = lambda: run(lambda: _redis_clients(url, name))  # noqa: E731
    else:
        url = service_url("postgres")
        backend = SqlBackend(url)
        count = lambda: run(lambda: _postgres_connections(url))  # noqa: E731
    state = ContextState(backend, f"t-{uuid.uuid4().hex[:8]}")
    before = count()
    try:
        for run_no in (1, 2, 3):
            run(lambda: exercise(state, run_no, 20))  # opens several connections, never calls aclose
            assert count() == before, f"run {run_no} left connections open"
    finally:
        run(lambda: state.delete_many([f"run/{i}" for i in (1, 2, 3)]))
        run(backend.aclose)


# -- a client or engine the caller made serves one loop --------------------------------------


def test_a_callers_redis_client_serves_its_first_loop_only() -> None:
    backend = RedisBackend(client=fake_client(fakeredis.FakeServer()), owns_client=True)

    async def first_loop() -> None:
        await backend.set("t/x/k", '"v"')
        await backend.aclose()  # owned: closed; redis-py reconnects on the next command
        assert await backend.get("t/x/k") == '"v"'

    run(first_loop)
    with pytest.raises(RuntimeError, match="client_factory"):
        run(lambda: backend.get("t/x/k"))


def test_a_redis_client_factory_is_called_once_per_loop() -> None:
    server, made = fakeredis.FakeServer(), 0

    def factory() -> Any:
        nonlocal made
        made += 1
        return fake_client(server)

    backend = RedisBackend(client_factory=factory)
    run(lambda: backend.set("t/x/k", '"v"'))
    assert run(lambda: backend.get("t/x/k")) == '"v"'
    assert made == 2
    run(backend.aclose)
    with pytest.raises(ValueError, match="exactly one of url, client or client_factory"):
        RedisBackend("redis://127.0.0.1:1/0", client_factory=factory)


def test_a_callers_sql_engine_serves_its_first_loop_only(tmp_path: Path) -> None:
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'state.db'}")
    backend = SqlBackend(engine=engine, create_tables=True)

    async def first_loop() -> None:
        await backend.set("t/x/k", '"v"')
        await backend.aclose()  # not ours: the engine stays open for its owner
        assert await backend.get("t/x/k") == '"v"'
        await backend.aclose()
        await engine.dispose()

    run(first_loop)
    with pytest.raises(RuntimeError, match=r"SqlBackend\(url\)"):
        run(lambda: backend.get("t/x/k"))


# -- the user's case: a module-level app, one lifespan per test ------------------------------


def _counting_app(backend: StateBackend) -> FastAPI:
    router = McpRouter(settings=McpSettings(request_state_key=secrets.token_urlsafe(32)), state_backend=backend)

    @router.tool()
    async def count_visit(ctx: Context = Depends(mcp_context)) -> int:
        """Count the calls (kept in ctx.state)."""
        visits = (await ctx.state.get("visits", int) or 0) + 1
        await ctx.state.set("visits", visits)
        return visits

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncGenerator[None]:
        yield
        await router.aclose()  # the shutdown docs/state.md recommends

    app = FastAPI(lifespan=lifespan)
    app.include_router(router)
    return app


def test_a_module_level_app_under_one_lifespan_per_test(fresh: Env) -> None:
    app = _counting_app(fresh.backend)

    async def one_test(era: Any) -> int:  # what each pytest-asyncio test does, on its own loop
        async with McpTestClient(app, era=era, lifespan=True) as client:
            result = await client.call_tool("count_visit")
            assert not result.is_error, result.text
            return int(result.structured["result"])

    assert [run(lambda: one_test(era)) for era in ("legacy", "modern", "legacy")] == [1, 2, 3]

    meta = {META_VERSION: "2026-07-28", META_CAPABILITIES: {}, META_CLIENT_INFO: {"name": "pytest", "version": "1"}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "count_visit", "_meta": meta}}
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "count_visit",
    }
    for expected in (4, 5):  # Starlette's TestClient: its own loop in a portal thread per block
        # a loopback peer: with no MCP_AUTH_MODE only local callers are served (TestClient's default is "testclient")
        with TestClient(app, base_url="http://127.0.0.1", client=("127.0.0.1", 50000)) as client:
            response = client.post("/mcp", json=body, headers=headers)
        assert response.status_code == 200, response.text
        assert response.json()["result"]["structuredContent"] == {"result": expected}
