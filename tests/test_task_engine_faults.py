"""The task engine's faults found by the review and the new-user trial (each test failed before
its fix): SIGTERM under uvicorn, a Redis outage at a task's end or during its question, an
outage longer than the lease, a 2025 question before ``ctx.start_task()``, ``start_task()`` of an
optional tool for a client that did not opt in, ``ctx.task.status`` from a sync tool or never
awaited. Real uvicorn and Redis where they are the point (an outage on a Redis of the test's own,
``own_redis``); controlled clocks and sleeps elsewhere."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import httpx
import pytest
from conftest import TEST_REQUEST_STATE_KEY, mcp_settings, modern_meta
from fastapi import Depends, FastAPI
from own_redis import OwnRedis, own_redis
from redis.asyncio import Redis
from replica_app import redis_url
from serving import ROOT, uvicorn_process
from tasks_app import Confirmation

from fastapi_mcp_ctx import Context, McpRouter, McpSettings, mcp_context
from fastapi_mcp_ctx._tasks.memory_store import MemoryTaskStore
from fastapi_mcp_ctx._tasks.records import TaskStore, owner_hash, owner_key
from fastapi_mcp_ctx._tasks.redis_store import RedisTaskStore
from fastapi_mcp_ctx._tasks.retry import StoreRetry
from fastapi_mcp_ctx.errors import StateUnavailableError
from fastapi_mcp_ctx.testing import TASKS_CAPABILITY, McpTestClient

CAPS = {"elicitation": {}, **TASKS_CAPABILITY}
ANONYMOUS = owner_key(None, None, None)
RELEASE: dict[str, asyncio.Event] = {}
"""Per test: the event a ``held`` task waits for."""


def build(settings: McpSettings) -> tuple[FastAPI, McpRouter]:
    router = McpRouter(settings=settings)

    @router.tool(task="optional")
    async def held(name: str) -> str:
        """Waits until the test releases ``name``."""
        await RELEASE[name].wait()
        return f"released {name}"

    @router.tool(task="optional")
    async def asks(ctx: Context = Depends(mcp_context)) -> str:
        answer = await ctx.elicit("Go on?", Confirmation)
        return "confirmed" if answer.data is not None and answer.data.confirm else "declined"

    @router.tool(task="optional", task_start="handler")
    async def ask_then_start(ctx: Context = Depends(mcp_context)) -> str:
        """Gathers its input first (a question), then goes long as a task."""
        answer = await ctx.elicit("Which way?", Confirmation)
        task = await ctx.start_task()
        return f"{'yes' if answer.data and answer.data.confirm else 'no'} as {'a task' if task is not None else 'a plain call'}"

    @router.tool(task="optional", task_start="handler")
    async def start_if_asked(ctx: Context = Depends(mcp_context)) -> str:
        task = await ctx.start_task()
        return f"task {task is not None} {ctx.task is not None}"

    @router.tool(task="optional", task_start="handler")
    def sync_task(ctx: Context = Depends(mcp_context)) -> str:
        """A plain def tool: ctx.start_task() and ctx.task.status() run without await (_bridge)."""
        task = ctx.start_task()
        if task is not None:
            task.status("halfway, from a thread")  # pyright: ignore[reportUnusedCoroutine]
        return f"sync in {threading.current_thread().name != 'MainThread'}"

    @router.tool(task="optional")
    async def forgets(ctx: Context = Depends(mcp_context)) -> str:
        assert ctx.task is not None
        ctx.task.status("never published")  # pyright: ignore[reportUnusedCoroutine]
        return "forgot"

    app = FastAPI()
    app.include_router(router)
    return app, router


def modern(app: Any) -> McpTestClient:
    return McpTestClient(app, era="modern", client_capabilities=CAPS)


async def until(check: Callable[[], Awaitable[bool]] | Callable[[], bool], seconds: float = 30.0) -> None:
    """Wait until ``check()`` holds (a bound an order of magnitude beyond the need: a hang fails)."""
    with anyio.fail_after(seconds):
        while True:
            value = check()
            if not isinstance(value, bool):
                value = await value
            if value:
                return
            await anyio.sleep(0.02)


@pytest.fixture
def release() -> dict[str, asyncio.Event]:
    RELEASE.clear()
    RELEASE["a"] = asyncio.Event()
    return RELEASE


# -- 1. SIGTERM under uvicorn: running tasks get the grace, then end failed, in the store ---------
async def test_sigterm_under_uvicorn_lets_tasks_finish_in_the_grace_then_fails_the_rest() -> None:
    url, namespace = redis_url(), f"t{uuid.uuid4().hex[:10]}:"
    env = {
        "MCP_SESSION_STORE_URL": url,
        "MCP_SESSION_STORE_NAMESPACE": namespace,
        "MCP_SHUTDOWN_GRACE_SECONDS": "10",
        "MCP_REQUEST_STATE_KEY": TEST_REQUEST_STATE_KEY,
        "PYTHONPATH": str(ROOT),
    }
    meta = modern_meta(capabilities=TASKS_CAPABILITY)
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call"}
    redis = Redis.from_url(url, decode_responses=True)
    try:
        with uvicorn_process("tasks_app:app", env=env, app_dir=ROOT / "tests") as (proc, endpoint, log):
            ids: list[str] = []
            async with httpx.AsyncClient(timeout=30) as http:
                for seconds in (1, 600):  # one ends within the grace, one never does
                    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
                    body["params"] = {"name": "sleeper", "arguments": {"seconds": seconds}, "_meta": meta}
                    answer = (await http.post(endpoint, json=body, headers={**headers, "mcp-name": "sleeper"})).json()
                    assert answer["result"]["resultType"] == "task", answer
                    ids.append(answer["result"]["taskId"])
            proc.send_signal(signal.SIGTERM)
            code = await anyio.to_thread.run_sync(lambda: proc.wait(timeout=60))
            assert code in (0, -signal.SIGTERM), log.read_text()[-3000:]  # uvicorn re-raises the signal it caught
        done, cut = [await redis.hgetall(f"{namespace}task:{{{owner_hash(ANONYMOUS)}}}:{i}") for i in ids]
        assert done["status"] == "completed" and "slept 1 s" in done["result"], done
        assert cut["status"] == "failed" and '"server_shut_down"' in cut["error"], cut
    finally:
        keys = [key async for key in redis.scan_iter(match=f"{namespace}*")]
        if keys:
            await redis.delete(*keys)
        await redis.aclose()


# -- 2/3. the runner's own steps: no lapse, idempotent, retried through an outage ----------------
@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[tuple[TaskStore, Callable[[int], None]]]:
    """A task store and ``advance(ms)`` of its clock (Redis: its own, so a real wait)."""
    if request.param == "memory":
        clock = [1_800_000_000_000]
        memory = MemoryTaskStore(lambda: clock[0])

        def advance(ms: int) -> None:
            clock[0] += ms

        yield memory, advance
        return
    from fastapi_mcp_ctx._replicas.link import RedisLink

    namespace = f"t{uuid.uuid4().hex[:10]}:"
    link = RedisLink(redis_url(), namespace=namespace)
    yield RedisTaskStore(link), lambda ms: time.sleep(ms / 1000)
    redis = Redis.from_url(redis_url())
    keys = [key async for key in redis.scan_iter(match=f"{namespace}*")]
    if keys:
        await redis.delete(*keys)
    await redis.aclose()
    await link.aclose()


async def test_the_runners_own_steps_never_lapse_its_lease_readers_do(store: tuple[TaskStore, Callable[[int], None]]) -> None:
    tasks, advance = store
    for task_id in ("mine", "read"):
        await tasks.create(task_id, "o", 600_000, 1000, 300, 10)
    advance(400)  # both leases lapsed (an outage longer than the lease)
    assert await tasks.renew("o", "mine", 300)  # the runner renews its live task: not lost
    assert await tasks.ask("o", "mine", "elicit-1", '{"method":"elicitation/create","params":{}}')
    read = await tasks.get("o", "read")  # a reader lapses an expired lease
    assert read is not None and read.status == "failed" and read.error is not None
    assert read.error["data"]["reason"] == "task_lost"
    advance(400)
    assert await tasks.finish("o", "mine", "completed", None, '{"content":[]}')
    mine = await tasks.get("o", "mine")
    assert mine is not None and mine.status == "completed"


async def test_ask_and_take_are_idempotent_and_answers_end_with_the_task(store: tuple[TaskStore, Callable[[int], None]]) -> None:
    tasks, _ = store
    await tasks.create("t", "o", 600_000, 1000, 60_000, 10)
    entry = '{"method":"elicitation/create","params":{}}'
    assert await tasks.ask("o", "t", "elicit-1", entry) and await tasks.ask("o", "t", "elicit-1", entry)
    assert await tasks.answer("o", "t", {"elicit-1": '{"action":"accept"}'}) == ["elicit-1"]
    assert await tasks.take("o", "t", "elicit-1") == '{"action":"accept"}'
    assert await tasks.take("o", "t", "elicit-1") == '{"action":"accept"}'  # a retried take reads it again
    assert await tasks.ask("o", "t", "elicit-1", entry)  # a retried ask after the answer: nothing changes
    record = await tasks.get("o", "t")
    assert record is not None and record.status == "working" and record.input_requests == {}
    assert await tasks.finish("o", "t", "completed", None, '{"content":[]}')
    assert await tasks.take("o", "t", "elicit-1") is None  # the answers ended with the task


class Flaky:
    """A memory store whose ``finish`` / ``renew`` raise ``StateUnavailableError`` the first
    ``fail`` times (None: always)."""

    def __init__(self, inner: MemoryTaskStore, method: str, fail: int | None) -> None:
        self.inner, self.method, self.left, self.calls = inner, method, fail, 0

    def __getattr__(self, name: str) -> Any:
        step = getattr(self.inner, name)
        if name != self.method:
            return step

        async def flaky(*args: Any) -> Any:
            self.calls += 1
            if self.left is None or self.left > 0:
                if self.left is not None:
                    self.left -= 1
                raise StateUnavailableError("task store down (test)")
            return await step(*args)

        return flaky


class Steps:
    """A controlled clock and sleep for :class:`StoreRetry`: each sleep advances the clock and
    records its length; after ``blocking_after`` sleeps, a sleep waits for ever."""

    def __init__(self, blocking_after: int = 10_000) -> None:
        self.now, self.slept, self.blocking_after = 0.0, list[float](), blocking_after

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        if len(self.slept) > self.blocking_after:
            await asyncio.Event().wait()
        await asyncio.sleep(0)


def flaky_app(method: str, fail: int | None, steps: Steps, **settings: Any) -> tuple[FastAPI, McpRouter, Flaky]:
    """An app whose task store fails ``method``; ``steps`` drives the renewals (``renew``) or the retries."""
    app, router = build(mcp_settings(**settings))
    flaky = Flaky(MemoryTaskStore(), method, fail)
    router.tasks.store = flaky  # type: ignore[assignment]
    if method == "renew":
        router.tasks.lease_sleep = steps.sleep
    else:
        router.tasks.retry = StoreRetry(sleep=steps.sleep, clock=steps.clock)
    return app, router, flaky


async def test_the_end_of_a_task_is_written_again_while_the_store_is_unavailable(release: dict[str, asyncio.Event]) -> None:
    steps = Steps()
    app, router, flaky = flaky_app("finish", 5, steps)
    async with modern(app) as client:
        task_id = (await client.call_tool_as_task("held", {"name": "a"}))["taskId"]
        release["a"].set()
        await until(lambda: flaky.calls == 6)
        done = await client.wait_task(task_id)
        assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "released a"
        assert steps.slept[:5] == [0.1, 0.2, 0.4, 0.8, 1.6]  # backoff, doubling
    await router.tasks.aclose()


async def test_an_end_the_store_never_takes_is_bounded_logged_and_raises_nothing(
    release: dict[str, asyncio.Event], caplog: pytest.LogCaptureFixture
) -> None:
    steps = Steps()
    app, router, flaky = flaky_app("finish", None, steps, task_ttl_ms=60_000)
    loop = asyncio.get_running_loop()
    unhandled: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: unhandled.append(context))
    try:
        async with modern(app) as client:
            await client.call_tool_as_task("held", {"name": "a"})
            running = router.tasks._tasks  # pyright: ignore[reportPrivateUsage]
            (body,) = [t for t in running if t.get_coro().__qualname__ == "TaskEngine._body"]  # pyright: ignore[reportOptionalMemberAccess, reportAttributeAccessIssue]
            release["a"].set()
            with anyio.fail_after(30):
                await asyncio.wait({body})
            assert body.exception() is None  # never "Task exception was never retrieved"
            assert 60 - 2.0 <= steps.now <= 60 + 1e-6  # bounded by the task's TTL (its own clock here)
            assert flaky.calls == len(steps.slept) + 1
        assert any("stayed unavailable" in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)
        assert unhandled == []
    finally:
        loop.set_exception_handler(None)


async def test_a_failed_renewal_is_tried_again_sooner(release: dict[str, asyncio.Event]) -> None:
    steps = Steps(blocking_after=4)
    app, router, flaky = flaky_app("renew", 2, steps, task_lease_seconds=3)
    async with modern(app) as client:
        task_id = (await client.call_tool_as_task("held", {"name": "a"}))["taskId"]
        await until(lambda: len(steps.slept) == 5)
        assert steps.slept == [1.0, 0.25, 0.5, 1.0, 1.0]  # the period, then sooner after each failure
        assert flaky.calls == 4 and (await client.get_task(task_id))["status"] == "working"
        release["a"].set()
        assert (await client.wait_task(task_id))["status"] == "completed"
    await router.tasks.aclose()


async def _lease_renewed(redis: Redis, key: str) -> bool:
    lease = await redis.hget(key, "lease")  # pyright: ignore[reportUnknownMemberType, reportGeneralTypeIssues]
    seconds, micros = await redis.time()
    return lease is not None and int(lease) > seconds * 1000 + micros // 1000 + 500


@pytest.fixture
async def outage() -> AsyncIterator[tuple[OwnRedis, FastAPI, McpRouter, str]]:
    """An app on a Redis of the test's own (lease 1 s), which the test stops and starts."""
    with own_redis() as server:
        namespace = f"t{uuid.uuid4().hex[:10]}:"
        settings = mcp_settings(session_store_url=server.url, session_store_namespace=namespace, task_lease_seconds=1)
        app, router = build(settings)
        yield server, app, router, namespace
        if server.proc is None:
            server.start()
        await router.tasks.aclose()
        await router.aclose()


async def test_a_redis_outage_longer_than_the_lease_while_a_task_ends_keeps_its_result(
    outage: tuple[OwnRedis, FastAPI, McpRouter, str], release: dict[str, asyncio.Event], caplog: pytest.LogCaptureFixture
) -> None:
    server, app, _, _ = outage
    caplog.set_level(logging.INFO, "fastapi_mcp_ctx")
    async with modern(app) as client:
        task_id = (await client.call_tool_as_task("held", {"name": "a"}))["taskId"]
        assert (await client.get_task(task_id))["status"] == "working"
        server.stop()
        release["a"].set()  # the handler ends while Redis is down
        await until(lambda: any("ending completed" in r.getMessage() for r in caplog.records))
        gone = time.monotonic()
        await until(lambda: time.monotonic() - gone > 1.5)  # longer than the lease (1 s) on Redis's clock too
        server.start()
        await until(lambda: any("ending completed: done after" in r.getMessage() for r in caplog.records))
        done = await client.wait_task(task_id)  # (read before the retried end: task_lost, the race docs/tasks.md states)
        assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "released a", done


async def test_a_redis_restart_while_a_task_asks_and_longer_than_the_lease_loses_nothing(
    outage: tuple[OwnRedis, FastAPI, McpRouter, str], caplog: pytest.LogCaptureFixture
) -> None:
    server, app, router, namespace = outage
    caplog.set_level(logging.WARNING, "fastapi_mcp_ctx")
    redis = Redis.from_url(server.url)
    async with modern(app) as client:
        task_id = (await client.call_tool_as_task("asks"))["taskId"]
        await client.wait_task(task_id, until="input_required")
        await redis.aclose()
        server.stop()
        router.tasks.on_relay({"t": task_id, "op": "wake"})  # its question reads the store now: unavailable
        await until(lambda: any("asking elicitation/create" in r.getMessage() for r in caplog.records))
        await until(lambda: any("could not renew the lease" in r.getMessage() for r in caplog.records))
        gone = time.monotonic()
        await until(lambda: time.monotonic() - gone > 1.5)  # the lease (1 s) lapsed meanwhile
        server.start()
        redis = Redis.from_url(server.url)
        key = f"{namespace}task:{{{owner_hash(ANONYMOUS)}}}:{task_id}"
        await until(lambda: _lease_renewed(redis, key))  # the runner renewed its live task (not lost)
        assert (await client.get_task(task_id))["status"] == "input_required"
        await client.update_task(task_id, {"elicit-1": {"action": "accept", "content": {"confirm": True}}})
        done = await client.wait_task(task_id)
        assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "confirmed", done
    await redis.aclose()


# -- 4. 2025, task_start="handler": a question before ctx.start_task() goes on the call's stream --
async def test_legacy_handler_start_asks_on_the_calls_stream_before_the_task_starts() -> None:
    app, router = build(mcp_settings(server_request_timeout_seconds=20))
    asked: list[dict[str, Any]] = []

    def answer(params: dict[str, Any]) -> Confirmation:
        asked.append(params)
        return Confirmation(confirm=True)

    async with McpTestClient(app, elicitation=answer) as client:
        with anyio.fail_after(15):
            task = await client.call_tool_as_task("ask_then_start", ttl_ms=60_000)
            assert task["status"] == "working" and [p["message"] for p in asked] == ["Which way?"]
            result = await client.task_result(task["taskId"])
        assert result["content"][0]["text"] == "yes as a task"
    await router.tasks.aclose()


# -- 5. start_task() of an optional tool for a client that did not opt in: nothing happens -------
@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_start_task_without_the_opt_in_goes_on_as_a_plain_call(era: str) -> None:
    app, router = build(mcp_settings())
    async with McpTestClient(app, era=era) as client:
        result = await client.call_tool("start_if_asked", {})
        assert result.text == "task False False" and not result.is_error
    async with McpTestClient(app, era=era, client_capabilities=CAPS) as opted:
        created = await opted.call_tool_as_task("start_if_asked")
        result = (await opted.wait_task(created["taskId"]))["result"] if era == "modern" else await opted.task_result(created["taskId"])
        assert result["content"][0]["text"] == "task True True"
    await router.tasks.aclose()


# -- 6. ctx.task's awaitables are bridged: a sync tool runs them, a forgotten await is named -----
async def test_a_sync_tool_starts_its_task_and_publishes_its_status_without_await() -> None:
    app, router = build(mcp_settings())
    async with modern(app) as client:
        done = await client.wait_task((await client.call_tool_as_task("sync_task"))["taskId"])
        assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "sync in True"
        assert done["statusMessage"] == "halfway, from a thread"
    await router.tasks.aclose()


async def test_a_never_awaited_task_status_is_named_by_the_report(caplog: pytest.LogCaptureFixture) -> None:
    app, router = build(mcp_settings())
    caplog.set_level(logging.WARNING, "fastapi_mcp_ctx")
    async with modern(app) as client:
        done = await client.wait_task((await client.call_tool_as_task("forgets"))["taskId"])
        assert done["status"] == "completed" and "statusMessage" not in done
    reports = [r.getMessage() for r in caplog.records if "never awaited" in r.getMessage()]
    assert len(reports) == 1 and "ctx.task.status()" in reports[0] and os.path.basename(__file__) in reports[0]
    await router.tasks.aclose()
