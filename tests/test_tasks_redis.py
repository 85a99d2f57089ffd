"""Tasks on the Redis store (``MCP_SESSION_STORE_URL=redis://``), two in-process replicas sharing
one namespace: created on one, polled, answered and cancelled through the other (the relay wakes
or stops the runner), the per-owner bound and the owner check on Redis, and every script's keys
in one Redis Cluster slot."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from conftest import mcp_settings
from redis.asyncio import Redis
from replica_app import redis_url
from tasks_app import build_app, events, ready

from fastapi_mcp_ctx._tasks.redis_store import RedisTaskStore
from fastapi_mcp_ctx.errors import McpResponseError
from fastapi_mcp_ctx.testing import TASKS_CAPABILITY, McpTestClient

CAPS = {"elicitation": {}, **TASKS_CAPABILITY}


@pytest.fixture
async def pair() -> AsyncIterator[tuple[Any, Any, str]]:
    url, namespace = redis_url(), f"t{uuid.uuid4().hex[:10]}:"
    apps = []
    for name in ("a", "b"):
        app = build_app(
            mcp_settings(session_store_url=url, session_store_namespace=namespace, max_tasks_per_owner=3), authenticated=True
        )
        ready(app).relay.identity = lambda name=name: name
        apps.append(app)
    yield apps[0], apps[1], namespace
    for app in apps:
        await ready(app).tasks.aclose()
        await ready(app).aclose()
    redis = Redis.from_url(url)
    keys = [key async for key in redis.scan_iter(match=f"{namespace}*")]
    if keys:
        await redis.delete(*keys)
    await redis.aclose()


def client(app: Any, user: str = "alice") -> McpTestClient:
    return McpTestClient(app, era="modern", client_capabilities=CAPS, headers={"X-User": user, "X-Tenant": "acme"})


async def test_created_on_one_replica_answered_and_completed_through_the_other(pair: tuple[Any, Any, str]) -> None:
    a, b, _ = pair
    async with client(a) as on_a, client(b) as on_b:
        await on_b.request("tools/list")  # b's relay subscribes at its first request
        task_id = (await on_a.call_tool_as_task("asks_two"))["taskId"]
        waiting = await on_b.wait_task(task_id, until="input_required")
        with anyio.fail_after(5):
            while len(waiting.get("inputRequests", {})) < 2:
                waiting = await on_b.get_task(task_id)
        first, second = sorted(waiting["inputRequests"])
        await on_b.update_task(task_id, {first: {"action": "accept", "content": {"confirm": True}}})
        partial = await on_b.get_task(task_id)
        assert partial["status"] == "input_required" and list(partial["inputRequests"]) == [second]
        await on_b.update_task(task_id, {second: {"action": "accept", "content": {"confirm": False}}})
        done = await on_a.wait_task(task_id)
        assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "True False"


async def test_cancel_through_the_other_replica_stops_the_handler(pair: tuple[Any, Any, str]) -> None:
    a, b, _ = pair
    async with client(a) as on_a, client(b) as on_b:
        await on_a.request("tools/list")  # a's relay subscribes: it runs the task
        task_id = (await on_a.call_tool_as_task("sleeper", {"seconds": 60}))["taskId"]
        with anyio.fail_after(5):
            while f"started {task_id}" not in events():
                await anyio.sleep(0.01)
        await on_b.cancel_task(task_id)
        assert (await on_a.get_task(task_id))["status"] == "cancelled"
        with anyio.fail_after(5):
            while f"cancelled {task_id}" not in events():
                await anyio.sleep(0.01)


async def test_owner_check_and_bound_on_redis(pair: tuple[Any, Any, str]) -> None:
    a, b, _ = pair
    async with client(a) as alice, client(b, "bob") as bob:
        ids = [(await alice.call_tool_as_task("only_task"))["taskId"] for _ in range(3)]
        with pytest.raises(McpResponseError) as bounded:
            await alice.call_tool_as_task("only_task")
        assert bounded.value.http_status == 429
        assert (await bob.call_tool_as_task("only_task"))["status"] == "working"  # bob's own bound
        for task_id in ids:
            with pytest.raises(McpResponseError) as hidden:
                await bob.get_task(task_id)
            assert hidden.value.code == -32602
            assert (await alice.wait_task(task_id))["status"] == "completed"


def test_every_key_of_a_task_shares_its_owners_hash_tag() -> None:
    store = RedisTaskStore.__new__(RedisTaskStore)
    store._ns = "mcp:"  # pyright: ignore[reportPrivateUsage]
    record, index = store._rec("owner", "id-1"), store._index("owner")  # pyright: ignore[reportPrivateUsage]
    tag = record[record.index("{") : record.index("}") + 1]
    assert tag == index[index.index("{") : index.index("}") + 1] and len(tag) == 34
    assert store._rec("another owner", "id-1") != record  # pyright: ignore[reportPrivateUsage]


def test_the_ended_records_kept_per_replica_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi_mcp_ctx._tasks.records import TaskRecord
    from fastapi_mcp_ctx._tasks.redis_store import _Ended  # pyright: ignore[reportPrivateUsage]

    now = [1_800_000_000.0]
    monkeypatch.setattr("fastapi_mcp_ctx._tasks.redis_store.time.time", lambda: now[0])
    ended = _Ended(max_records=2, max_bytes=1600)

    def done(task_id: str) -> TaskRecord:
        return TaskRecord(task_id, "o", "completed", 1_800_000_000_000, 1_800_000_000_000, 60_000, 1000, result={"content": []})

    for task_id in ("t1", "t2", "t3"):
        ended.put(done(task_id), 10)
    assert ended.get("o", "t1") is None and ended.get("o", "t3") is not None  # the oldest went first
    assert ended.get("other owner", "t3") is None
    ended.put(done("big"), 101)  # over a sixteenth of the byte budget: read from Redis each time
    assert ended.get("o", "big") is None
    now[0] += 60.0  # createdAt + ttlMs reached
    assert ended.get("o", "t3") is None
