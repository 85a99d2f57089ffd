"""Issue 7's replicated topology, end to end: a real Redis, two uvicorn replicas of
``examples.replicated_app`` sharing it (``MCP_SESSION_STORE_URL``), nginx round robin in front,
no session affinity. Through the proxy (and, where a test must aim at one replica, directly),
every 2025 and 2026 session feature works whichever replica a request lands on.

Replicas are named ``a`` and ``b``; ``served_by`` and the ``X-Served-By`` header say which one
answered, so every crossing is proved, not assumed.
"""

from __future__ import annotations

import itertools
import signal
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.subscriptions import ToolsListChanged

from .topology import LEASE_SECONDS, SharedRedis, Topology, wait_ready
from .wire import (
    SUB,
    SseStream,
    call,
    call_tool,
    initialize,
    legacy_headers,
    modern_headers,
    modern_meta,
    result_of,
    stream,
)

pytestmark = [pytest.mark.replicas, pytest.mark.redis]


def job_name() -> str:
    return f"j{uuid.uuid4().hex[:12]}"


async def test_legacy_client_calls_alternate_replicas_each_runs_once(topo: Topology) -> None:
    job = job_name()
    progress: list[str | None] = []
    logs: list[Any] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    served: list[str] = []
    with anyio.fail_after(40):
        async with Client(topo.url, mode="legacy", cache=None, logging_callback=on_log) as client:
            assert client.protocol_version == "2025-11-25"
            for _ in range(20):
                result = await client.call_tool("work", {"job": job, "steps": 2}, progress_callback=on_progress)
                assert result.is_error is False, result.content
                assert isinstance(result.structured_content, dict)
                served.append(result.structured_content["replica"])
            executed = await client.call_tool("runs", {"job": job})
    # Round robin: the calls take turns (the client's own GET stream, opened in the background
    # after initialize, takes one turn somewhere early, so one replica may get two in a row once).
    assert min(Counter(served)["a"], Counter(served)["b"]) >= 9, served
    assert sum(x == y for x, y in itertools.pairwise(served)) <= 1, served
    assert progress == [f"{job}:{i}" for _ in range(20) for i in (1, 2)]  # every progress once, in order
    assert [(log["message"], log["replica"]) for log in logs] == [(f"{job}:{i}", r) for r in served for i in (1, 2)]
    assert isinstance(executed.structured_content, dict)
    assert Counter(executed.structured_content["result"]) == Counter(served)  # each call executed exactly once


async def test_delete_on_one_replica_ends_the_session_on_both(topo: Topology, http: httpx.AsyncClient) -> None:
    a, b = topo.replica("a"), topo.replica("b")
    session = await initialize(http, topo.url)
    assert await call_tool(http, a.url, session, "served_by") == "a"
    assert await call_tool(http, b.url, session, "served_by") == "b"
    deleted = await http.delete(a.url, headers=legacy_headers(session))
    assert deleted.status_code in (200, 204), deleted.text
    for url in (b.url, a.url, topo.url, topo.url):
        gone = await http.post(url, json=call("served_by"), headers=legacy_headers(session))
        assert gone.status_code == 404, (url, gone.status_code, gone.text)


async def test_list_change_on_one_replica_reaches_the_get_stream_held_by_the_other(
    topo: Topology, http: httpx.AsyncClient
) -> None:
    a, b = topo.replica("a"), topo.replica("b")
    session = await initialize(http, topo.url)
    async with stream(http, "GET", a.url, legacy_headers(session, accept="text/event-stream")) as get:
        assert get.status == 200 and get.headers["x-served-by"] == "a"
        await get.next()  # the priming event: the stream is registered
        assert await call_tool(http, b.url, session, "announce", {"kind": "tools"}) == "b"
        _, message = await get.message()
        assert message == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        assert await get.drain(0.5) == []  # once, not once per replica


@asynccontextmanager
async def get_stream(
    http: httpx.AsyncClient, url: str, session: str, last_event_id: str | None = None, patience: float = 15.0
) -> AsyncIterator[SseStream]:
    """The session's GET stream through ``url``, open for the block; a 409 (a dead holder's
    lease) is retried until ``patience`` seconds have passed, then yielded as it is."""
    headers = legacy_headers(session, accept="text/event-stream")
    if last_event_id is not None:
        headers["last-event-id"] = last_event_id
    deadline = anyio.current_time() + patience
    while True:
        async with stream(http, "GET", url, headers) as opened:
            if opened.status != 409 or anyio.current_time() > deadline:
                yield opened
                return
        await anyio.sleep(0.25)


async def assert_poke_arrives(http: httpx.AsyncClient, url: str, session: str, get: SseStream, text: str) -> None:
    """``poke`` through ``url`` is delivered (True) and is the next message on ``get``."""
    assert await call_tool(http, url, session, "poke", {"text": text}) is True
    _, message = await get.message()
    assert message["params"]["data"] == text


async def test_kill_9_of_the_get_stream_holder_then_resume_through_the_proxy(topo: Topology, http: httpx.AsyncClient) -> None:
    session = await initialize(http, topo.url)
    async with get_stream(http, topo.url, session) as get:
        assert get.status == 200, get.status
        holder = get.headers["x-served-by"]
        await get.next()  # priming
        for i in (1, 2, 3):
            assert await call_tool(http, topo.url, session, "poke", {"text": f"p{i}"}) is True
        received = [await get.message() for _ in range(3)]
        assert [m["params"]["data"] for _, m in received] == ["p1", "p2", "p3"]
        last_id = received[-1][0]
        assert last_id is not None
        for i in (4, 5):  # sent to the stream, never read by this client: missed
            assert await call_tool(http, topo.url, session, "poke", {"text": f"p{i}"}) is True
        await anyio.sleep(0.3)
        topo.replica(holder).kill()
    started = anyio.current_time()
    async with get_stream(http, topo.url, session, last_event_id=last_id) as again:
        assert again.status == 200, again.status
        assert again.headers["x-served-by"] == topo.other(holder).name
        replayed = [(await again.message())[1]["params"]["data"] for _ in range(2)]
        reconnect_seconds = anyio.current_time() - started
        primer = await again.next()  # the dead replica's stream ended: this replica's own GET stream begins
        assert primer is not None and primer.data is None and primer.id is not None, primer
        await assert_poke_arrives(http, topo.url, session, again, "p6")
        rest = await again.drain(0.5)
    assert replayed == ["p4", "p5"] and rest == []  # exactly the missed ones, none twice, then live
    assert reconnect_seconds < 15


async def test_long_call_closed_on_one_replica_resumes_on_the_other(topo: Topology, http: httpx.AsyncClient) -> None:
    a, b = topo.replica("a"), topo.replica("b")
    session = await initialize(http, topo.url)
    body = call("long_job", {"steps": 4, "delay": 0.2}, request_id=7, token="lj")
    async with stream(http, "POST", a.url, legacy_headers(session), body) as first:
        assert first.headers["x-served-by"] == "a"
        _, progress = await first.message()
        assert progress["params"]["progress"] == 1
        last_id = first.seen[-1].id
        assert await first.next() is None  # the server closed the connection (ctx.close_sse_stream)
    assert last_id is not None
    headers = legacy_headers(session, accept="text/event-stream")
    headers["last-event-id"] = last_id
    async with stream(http, "GET", b.url, headers) as resumed:
        assert resumed.status == 200 and resumed.headers["x-served-by"] == "b"
        messages = [(await resumed.message(timeout=10))[1] for _ in range(4)]
    assert [m["params"]["progress"] for m in messages[:3]] == [2, 3, 4]
    assert messages[3]["id"] == 7
    assert messages[3]["result"]["structuredContent"] == {"replica": "a", "closed": True, "steps": 4}


async def test_official_client_resumes_a_closed_call_through_the_proxy(topo: Topology) -> None:
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    with anyio.fail_after(30):
        async with Client(topo.url, mode="legacy", cache=None) as client:
            result = await client.call_tool("long_job", {"steps": 3, "delay": 0.2}, progress_callback=on_progress)
    assert result.is_error is False, result.content
    assert isinstance(result.structured_content, dict) and result.structured_content["closed"] is True
    assert progress == [1, 2, 3]


async def test_ping_from_a_call_on_one_replica_answered_through_the_other(topo: Topology, http: httpx.AsyncClient) -> None:
    a, b = topo.replica("a"), topo.replica("b")
    session = await initialize(http, topo.url)
    async with stream(http, "POST", a.url, legacy_headers(session), call("ping_client", request_id=11)) as calling:
        _, ping = await calling.message()
        assert ping["method"] == "ping" and isinstance(ping["id"], str)
        answer = await http.post(b.url, json={"jsonrpc": "2.0", "id": ping["id"], "result": {}}, headers=legacy_headers(session))
        assert answer.status_code == 202 and answer.headers["x-served-by"] == "b", answer.text
        _, final = await calling.message(timeout=10)
    assert final["id"] == 11
    assert final["result"]["structuredContent"] == {"replica": "a", "answer": {}}


async def test_an_elicitation_from_a_call_on_one_replica_answered_through_the_other(topo: Topology, http: httpx.AsyncClient) -> None:
    a, b = topo.replica("a"), topo.replica("b")
    session = await initialize(http, topo.url, {"elicitation": {}})
    async with stream(http, "POST", a.url, legacy_headers(session), call("ask_name", request_id=12)) as calling:
        _, asked = await calling.message()
        assert asked["method"] == "elicitation/create" and asked["params"]["message"] == "What is your name?"
        reply = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"name": "Ada"}}}
        answer = await http.post(b.url, json=reply, headers=legacy_headers(session))
        assert answer.status_code == 202 and answer.headers["x-served-by"] == "b", answer.text
        _, final = await calling.message(timeout=10)
    assert final["id"] == 12
    assert final["result"]["structuredContent"] == {"replica": "a", "action": "accept", "name": "Ada"}


async def test_listen_on_one_replica_gets_a_change_made_on_the_other_tagged_and_filtered(
    topo: Topology, http: httpx.AsyncClient
) -> None:
    a, b = topo.replica("a"), topo.replica("b")
    body = {
        "jsonrpc": "2.0",
        "id": "watch",
        "method": "subscriptions/listen",
        "params": {"_meta": modern_meta(), "notifications": {"toolsListChanged": True}},
    }
    async with stream(http, "POST", a.url, modern_headers("subscriptions/listen"), body) as listen:
        assert listen.status == 200 and listen.headers["x-served-by"] == "a"
        _, ack = await listen.message()
        assert ack["method"] == "notifications/subscriptions/acknowledged" and ack["params"]["_meta"][SUB] == "watch"
        for kind in ("prompts", "tools"):  # the prompts change is outside the filter
            params = {"name": "announce", "arguments": {"kind": kind}, "_meta": modern_meta()}
            response = await http.post(
                b.url,
                json={"jsonrpc": "2.0", "id": kind, "method": "tools/call", "params": params},
                headers=modern_headers("tools/call", "announce"),
            )
            assert (await result_of(response))["result"]["structuredContent"] == {"result": "b"}
        _, change = await listen.message()
        assert change == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": {SUB: "watch"}}}
        assert await listen.drain(0.5) == []


async def test_official_client_listen_through_the_proxy_hears_both_replicas(topo: Topology) -> None:
    """The official client in the 2026 era: a listen stream (held by one replica) hears the
    announcement of each replica (tool calls land on both, round robin); one outside the filter
    never arrives. (The client coalesces events it has not consumed yet, so each is awaited.)"""
    announcers: list[str] = []
    extra: list[Any] = []
    with anyio.fail_after(30):
        async with Client(topo.url, mode="2026-07-28", cache=None) as client:
            async with client.listen(tools_list_changed=True) as sub:
                assert sub.honored.tools_list_changed is True and not sub.honored.prompts_list_changed
                while set(announcers) != {"a", "b"} and len(announcers) < 6:  # until each replica announced
                    result = await client.call_tool("announce", {"kind": "tools"})
                    assert isinstance(result.structured_content, dict)
                    announcers.append(result.structured_content["result"])
                    with anyio.fail_after(5):
                        assert isinstance(await sub.__anext__(), ToolsListChanged)
                await client.call_tool("announce", {"kind": "prompts"})  # outside the filter
                with anyio.move_on_after(1.0):
                    async for event in sub:
                        extra.append(event)
    assert set(announcers) == {"a", "b"}, announcers  # so one came from the replica not holding the listen
    assert extra == []


async def test_redis_outage_fails_closed_then_everything_recovers(topo: Topology, http: httpx.AsyncClient) -> None:
    if isinstance(topo.redis, SharedRedis):
        pytest.skip("the shared cluster / sentinel group is not stopped whole: test_failover.py kills one of its masters")
    a, b = topo.replica("a"), topo.replica("b")
    session = await initialize(http, topo.url)
    assert await call_tool(http, topo.url, session, "served_by") in ("a", "b")
    topo.redis.stop()
    try:
        for replica in (a, b):
            refused = await http.post(replica.url, json=call("served_by"), headers=legacy_headers(session))
            assert refused.status_code == 503, (replica.name, refused.status_code, refused.text)
            assert int(refused.headers["retry-after"]) >= 1
            assert refused.json()["error"]["data"]["reason"] == "backend_unavailable"
            ready = await http.get(f"{replica.base}/mcp/ready")
            assert ready.status_code == 503 and ready.headers["retry-after"] and ready.json()["ready"] is False
            # known fault B02: fail closed and consistently, never "valid", never 404, never a 500
            made_up = await http.post(replica.url, json=call("served_by"), headers=legacy_headers("made-up-123"))
            assert made_up.status_code == 503 and "retry-after" in made_up.headers, made_up.text
            opened = await http.post(
                replica.url,
                json={
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}},
                },
                headers=legacy_headers(),
            )
            assert opened.status_code == 503 and "Traceback" not in opened.text, opened.text
            deleted = await http.delete(replica.url, headers=legacy_headers(session))
            assert deleted.status_code == 503, deleted.text
    finally:
        topo.redis.start()
    for replica in (a, b):
        await anyio.to_thread.run_sync(wait_ready, replica.base)
        assert await call_tool(http, replica.url, session, "served_by") == replica.name  # the earlier session, on both
        made_up = await http.post(replica.url, json=call("served_by"), headers=legacy_headers("made-up-123"))
        assert made_up.status_code == 404  # verifiable again: an id never issued is unknown
    async with stream(http, "GET", a.url, legacy_headers(session, accept="text/event-stream")) as get:
        assert get.status == 200, get.status
        await get.next()
        assert await call_tool(http, b.url, session, "announce", {"kind": "tools"}) == "b"
        _, message = await get.message(timeout=10)  # the bus delivers again, no reconnect needed by the replicas
        assert message["method"] == "notifications/tools/list_changed"


async def test_readiness_reports_every_store_in_use(topo: Topology, http: httpx.AsyncClient) -> None:
    for replica in topo.replicas:
        ready = await http.get(f"{replica.base}/mcp/ready")
        assert ready.status_code == 200 and ready.headers["cache-control"] == "no-store"
        report = ready.json()
        assert report["ready"] is True and report["shuttingDown"] is False
        assert report["checks"] == {"sessions": "ok", "events": "ok", "bus": "ok", "state": "ok"}  # all on Redis


async def test_resuming_replays_only_the_callers_own_session(topo: Topology, http: httpx.AsyncClient) -> None:
    """Known fault B16: one shared event log for every session; a resume on another replica
    replays nothing of another session, and another session's event id is refused exactly like
    an id that never existed (no oracle)."""
    a, b = topo.replica("a"), topo.replica("b")
    alice, bob = await initialize(http, topo.url), await initialize(http, topo.url)
    async with stream(http, "GET", a.url, legacy_headers(alice, accept="text/event-stream")) as get:
        first = await get.next()
        assert first is not None and first.id is not None
        alice_last = first.id
    async with stream(http, "GET", b.url, legacy_headers(bob, accept="text/event-stream")) as bob_get:
        await bob_get.next()
        assert await call_tool(http, b.url, bob, "poke", {"text": "for bob only"}) is True
        bob_event, message = await bob_get.message()
        assert message["params"]["data"] == "for bob only" and bob_event is not None
    headers = legacy_headers(alice, accept="text/event-stream")
    async with stream(http, "GET", b.url, {**headers, "last-event-id": alice_last}) as resumed:
        assert resumed.status == 200
        assert await resumed.drain(0.5) == []  # nothing of bob's
    statuses = []
    for foreign in (bob_event, f"{bob_event.split(':')[0][::-1]}:1"):
        refused = await http.get(a.url, headers={**headers, "last-event-id": foreign})
        statuses.append((refused.status_code, refused.json()["error"]["message"]))
    assert statuses[0] == statuses[1] and statuses[0][0] == 400, statuses


async def test_one_get_stream_per_session_across_replicas_and_the_lease_dies_with_its_holder(
    topo: Topology, http: httpx.AsyncClient
) -> None:
    a, b = topo.replica("a"), topo.replica("b")
    session = await initialize(http, topo.url)
    headers = legacy_headers(session, accept="text/event-stream")
    async with stream(http, "GET", a.url, headers) as held:
        await held.next()
        second = await http.get(b.url, headers=headers)
        assert second.status_code == 409, second.text  # the rule holds across replicas
        a.kill()
    started = anyio.current_time()
    async with get_stream(http, b.url, session, patience=LEASE_SECONDS + 5) as reopened:
        waited = anyio.current_time() - started
        assert reopened.status == 200, reopened.status
        await reopened.next()
        await assert_poke_arrives(http, b.url, session, reopened, "after")
    assert waited <= LEASE_SECONDS + 2, f"a fresh GET after kill -9 was refused for {waited:.1f} s"


async def test_rolling_restart_sigterm_hands_the_get_stream_to_the_other_replica(topo: Topology, http: httpx.AsyncClient) -> None:
    """docs/deployment.md "Rolling restarts": SIGTERM ends the replica's streams with a retry
    hint, it shuts down cleanly, and the client resumes through the proxy on the other one."""
    session = await initialize(http, topo.url)
    async with get_stream(http, topo.url, session) as get:
        holder = topo.replica(get.headers["x-served-by"])
        await get.next()
        assert await call_tool(http, topo.url, session, "poke", {"text": "before"}) is True
        last_id, _ = await get.message()
        assert holder.proc is not None
        holder.proc.send_signal(signal.SIGTERM)
        assert await get.next(timeout=10) is None  # the replica closed the stream at once
    await anyio.to_thread.run_sync(holder.proc.wait, 15)  # uvicorn re-raises SIGTERM once it is done
    assert "Application shutdown complete" in holder.log.read_text(errors="replace").rsplit("Started server process", 1)[-1]
    async with get_stream(http, topo.url, session, last_event_id=last_id, patience=0) as again:
        assert again.status == 200 and again.headers["x-served-by"] == topo.other(holder.name).name
        primer = await again.next()  # nothing was missed: the new replica's own GET stream begins
        assert primer is not None and primer.data is None
        await assert_poke_arrives(http, topo.url, session, again, "after")
