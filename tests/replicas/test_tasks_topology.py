"""Tasks across replicas (issue 20): nginx round robin in front of two replicas of
``examples.replicated_app`` sharing one Redis. A task created through the balancer is polled to
``completed`` by requests landing on both replicas; ``tasks/cancel`` sent to the replica that is
not running it stops the handler on the one that is; after ``kill -9`` of the running replica the
task reads ``failed`` from the other within the lease bound; a Redis restart keeps an
acknowledged result."""

from __future__ import annotations

import time
from typing import Any

import anyio
import httpx
import pytest

from .topology import SharedRedis, Topology
from .wire import MODERN, initialize, legacy_headers, modern_headers, result_of

EXT = "io.modelcontextprotocol/tasks"
LEASE_SECONDS = 15.0
"""``MCP_TASK_LEASE_SECONDS`` of the replicas (the default)."""


async def rpc(
    http: httpx.AsyncClient, url: str, method: str, params: dict[str, Any], name: str | None = None
) -> tuple[dict[str, Any], str]:
    """One 2026 request declaring the tasks extension; (its result, the replica that served it)."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "replica-tests", "version": "1"},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    response = await http.post(url, json=body, headers=modern_headers(method, name))
    message = response.json()
    assert "result" in message, message
    return message["result"], response.headers.get("x-served-by", "?")


async def create(http: httpx.AsyncClient, url: str, seconds: float) -> str:
    result, _ = await rpc(http, url, "tools/call", {"name": "report", "arguments": {"seconds": seconds}}, "report")
    assert result["resultType"] == "task", result
    return str(result["taskId"])


async def get(http: httpx.AsyncClient, url: str, task_id: str) -> tuple[dict[str, Any], str]:
    return await rpc(http, url, "tasks/get", {"taskId": task_id}, task_id)


async def events(http: httpx.AsyncClient, url: str, task_id: str) -> dict[str, Any]:
    result, _ = await rpc(http, url, "tools/call", {"name": "report_events", "arguments": {"task": task_id}}, "report_events")
    return result["structuredContent"]


async def runner_of(http: httpx.AsyncClient, url: str, task_id: str) -> str:
    with anyio.fail_after(10):
        while (started := (await events(http, url, task_id))["started"]) is None:
            await anyio.sleep(0.05)
    return str(started)


async def test_a_task_created_through_the_balancer_is_polled_to_completed_on_both_replicas(
    topo: Topology, http: httpx.AsyncClient
) -> None:
    task_id = await create(http, topo.url, 1.0)
    seen: set[str] = set()
    with anyio.fail_after(20):
        while True:
            task, served = await get(http, topo.url, task_id)
            seen.add(served)
            if task["status"] != "working":
                break
            await anyio.sleep(0.05)
    assert task["status"] == "completed", task
    assert task["result"]["structuredContent"]["replica"] in {"a", "b"}
    for _ in range(4):  # round robin: the polls alternate
        seen.add((await get(http, topo.url, task_id))[1])
    assert seen == {"a", "b"}


async def test_cancel_on_the_other_replica_stops_the_handler_where_it_runs(topo: Topology, http: httpx.AsyncClient) -> None:
    task_id = await create(http, topo.url, 120.0)
    running = await runner_of(http, topo.url, task_id)
    other = topo.other(running)
    ack, served = await rpc(http, other.url, "tasks/cancel", {"taskId": task_id}, task_id)
    assert served == other.name and ack["resultType"] == "complete" and "status" not in ack
    assert (await get(http, topo.url, task_id))[0]["status"] == "cancelled"
    with anyio.fail_after(10):  # relayed over the bus: the running replica's handler saw it
        while (await events(http, topo.url, task_id))["cancelled"] is None:
            await anyio.sleep(0.05)
    assert (await events(http, topo.url, task_id))["cancelled"] == running


async def test_kill_9_of_the_running_replica_reads_failed_within_the_lease(topo: Topology, http: httpx.AsyncClient) -> None:
    task_id = await create(http, topo.url, 120.0)
    running = await runner_of(http, topo.url, task_id)
    survivor = topo.other(running)
    topo.replica(running).kill()
    killed = time.monotonic()
    with anyio.fail_after(LEASE_SECONDS * 2 + 10):
        while (task := (await get(http, survivor.url, task_id))[0])["status"] == "working":
            await anyio.sleep(0.25)
    assert time.monotonic() - killed <= LEASE_SECONDS + 5  # the bound: its last renewal + the lease
    assert task["status"] == "failed" and task["error"]["data"]["reason"] == "task_lost", task


async def test_a_redis_restart_keeps_an_acknowledged_result(topo: Topology, http: httpx.AsyncClient) -> None:
    if isinstance(topo.redis, SharedRedis):
        pytest.skip("restarts the whole Redis: the topology's own Redis only (a shard's failover: test_failover.py)")
    task_id = await create(http, topo.url, 0.0)
    with anyio.fail_after(10):
        while (task := (await get(http, topo.url, task_id))[0])["status"] != "completed":
            await anyio.sleep(0.05)
    topo.redis.stop()
    topo.redis.start()
    with anyio.fail_after(20):
        while True:
            try:
                after, _ = await get(http, topo.url, task_id)
                break
            except AssertionError:  # 503 while the replicas reconnect
                await anyio.sleep(0.2)
    assert after["status"] == "completed" and after["result"] == task["result"]


async def test_a_2025_task_in_a_session_is_read_and_awaited_through_the_balancer(topo: Topology, http: httpx.AsyncClient) -> None:
    session = await initialize(http, topo.url)

    async def legacy(method: str, params: dict[str, Any], request_id: int) -> tuple[dict[str, Any], str]:
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        response = await http.post(topo.url, json=body, headers=legacy_headers(session))
        message = await result_of(response)
        assert "result" in message, message
        return message["result"], response.headers.get("x-served-by", "?")

    created, _ = await legacy("tools/call", {"name": "report", "arguments": {"seconds": 0.5}, "task": {"ttl": 60_000}}, 1)
    task_id = created["task"]["taskId"]
    served = {(await legacy("tasks/get", {"taskId": task_id}, 2 + i))[1] for i in range(4)}
    assert served == {"a", "b"}
    result, _ = await legacy("tasks/result", {"taskId": task_id}, 9)  # blocks until completed, on either replica
    assert result["structuredContent"]["seconds"] == 0.5
    assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
    listed, _ = await legacy("tasks/list", {}, 10)
    assert [t["taskId"] for t in listed["tasks"]] == [task_id]
