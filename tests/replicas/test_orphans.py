"""Streams that outlive their replica (issue 24 items 4, 5, 6), end to end in the replicated
topology: a real Redis (restarted in place), two uvicorn replicas (one killed with ``kill -9``),
nginx in front. The logic itself is tested fast in tests/test_orphan_streams.py.

The test replicas run with ``MCP_SESSION_LEASE_SECONDS`` = ``LEASE_SECONDS`` (3 s); the
bounds asserted here are that plus an order of magnitude of margin, never a tight one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import httpx
import pytest
from redis.asyncio import Redis

from .topology import LEASE_SECONDS, SharedRedis, Topology, wait_ready
from .wire import call, call_tool, initialize, legacy_headers, modern_headers, modern_meta, stream

pytestmark = [pytest.mark.replicas, pytest.mark.redis]

PATIENCE = LEASE_SECONDS + 15
"""Seconds a test waits for what must come once a lease lapsed (the lease plus a wide margin)."""



def resume_headers(session: str, last_event_id: str) -> dict[str, str]:
    headers = legacy_headers(session, accept="text/event-stream")
    headers["last-event-id"] = last_event_id
    return headers


async def test_a_resumed_call_whose_replica_died_gets_call_lost_and_its_stream_ends(topo: Topology, http: httpx.AsyncClient) -> None:
    """Item 4: before, the resumed stream sent only ``: keep-alive`` comments for ever."""
    a, b = topo.replica("a"), topo.replica("b")
    session = await initialize(http, topo.url)
    body = call("long_job", {"steps": 20, "delay": 5}, request_id=41, token="lost")  # 95 s to go once it closes
    async with stream(http, "POST", a.url, legacy_headers(session), body) as first:
        assert first.status == 200 and first.headers["x-served-by"] == "a"
        _, progress = await first.message()
        assert progress["params"]["progress"] == 1
        last_id = first.seen[-1].id
        assert await first.next() is None  # the server closed the connection (ctx.close_sse_stream); the call runs on
    assert last_id is not None
    a.kill()
    killed = anyio.current_time()
    async with stream(http, "GET", topo.url, resume_headers(session, last_id)) as resumed:
        assert resumed.status == 200 and resumed.headers["x-served-by"] == "b"
        _, answer = await resumed.message(timeout=PATIENCE)
        assert answer["id"] == 41, answer
        error = answer["error"]
        assert error["code"] == -32603
        assert error["data"]["reason"] == "call_lost" and error["data"]["requestId"] == 41
        assert "retry the call" in error["data"]["recovery"]["hint"].lower()
        assert await resumed.next(timeout=PATIENCE) is None  # and the stream ends
    assert anyio.current_time() - killed < PATIENCE
    # the session itself goes on, on the surviving replica
    assert await call_tool(http, b.url, session, "served_by") == "b"


async def test_a_call_running_longer_than_the_lease_on_a_live_replica_is_never_lost(topo: Topology, http: httpx.AsyncClient) -> None:
    """The running replica renews its call's lease: a reader elsewhere gets the real answer."""
    a, b = topo.replica("a"), topo.replica("b")
    session = await initialize(http, topo.url)
    delay = LEASE_SECONDS  # three steps after the close: three leases' time
    body = call("long_job", {"steps": 4, "delay": delay}, request_id=43, token="kept")
    async with stream(http, "POST", a.url, legacy_headers(session), body) as first:
        _, progress = await first.message()
        assert progress["params"]["progress"] == 1
        last_id = first.seen[-1].id
        assert await first.next() is None
    assert last_id is not None
    async with stream(http, "GET", b.url, resume_headers(session, last_id)) as resumed:
        assert resumed.status == 200 and resumed.headers["x-served-by"] == "b"
        messages = [(await resumed.message(timeout=delay + PATIENCE))[1] for _ in range(4)]
        assert await resumed.next(timeout=PATIENCE) is None
    assert [m["params"]["progress"] for m in messages[:3]] == [2, 3, 4]
    assert messages[3]["id"] == 43 and messages[3]["result"]["structuredContent"]["replica"] == "a", messages[3]


async def test_a_2026_call_stream_ends_with_its_replica_it_is_not_resumable(topo: Topology, http: httpx.AsyncClient) -> None:
    """Item 4 in the 2026 era: its SSE response is the running replica's own connection (not
    stored, ``Last-Event-ID`` ignored), so a ``kill -9`` ends it at once through the proxy; the
    client sees a cut stream, never keep-alives, and retries the call."""
    params = {"name": "long_job", "arguments": {"steps": 20, "delay": 5}, "_meta": {**modern_meta(), "progressToken": "m"}}
    body = {"jsonrpc": "2.0", "id": 42, "method": "tools/call", "params": params}
    async with stream(http, "POST", topo.url, modern_headers("tools/call", "long_job"), body) as running:
        assert running.status == 200
        _, progress = await running.message()
        assert progress["params"]["progress"] == 1
        topo.replica(running.headers["x-served-by"]).kill()
        killed = anyio.current_time()
        try:
            ended = await running.next(timeout=PATIENCE)
        except httpx.RemoteProtocolError:  # nginx cut the chunked body: the upstream died
            ended = None
    assert ended is None and anyio.current_time() - killed < PATIENCE


async def test_notifications_for_a_get_stream_whose_holder_died_are_replayed_on_resume(topo: Topology, http: httpx.AsyncClient) -> None:
    """Item 5: before, a resume through the balancer replayed none of what B published."""
    a, b = topo.replica("a"), topo.replica("b")
    session = await initialize(http, topo.url)
    async with stream(http, "GET", a.url, legacy_headers(session, accept="text/event-stream")) as held:
        assert held.status == 200 and held.headers["x-served-by"] == "a"
        await held.next()  # priming
        assert await call_tool(http, b.url, session, "poke", {"text": "live"}) is True
        cursor, message = await held.message()
        assert message["params"]["data"] == "live" and cursor is not None
        a.kill()
    for _ in range(2):
        assert await call_tool(http, b.url, session, "announce", {"kind": "tools"}) == "b"
    assert await call_tool(http, b.url, session, "poke", {"text": "while dead"}) is True  # recorded for the resume
    async with stream(http, "GET", topo.url, resume_headers(session, cursor)) as resumed:
        assert resumed.status == 200 and resumed.headers["x-served-by"] == "b"
        replayed = [(await resumed.message(timeout=10))[1] for _ in range(3)]
        primer = await resumed.next()  # the dead replica's stream ended: this replica's GET stream begins
        assert primer is not None and primer.data is None and primer.id is not None, primer
        assert await call_tool(http, b.url, session, "poke", {"text": "after"}) is True
        _, live = await resumed.message()
        rest = await resumed.drain(0.5)
    assert [m["method"] for m in replayed] == ["notifications/tools/list_changed"] * 2 + ["notifications/message"]
    assert replayed[2]["params"]["data"] == "while dead"
    assert live["params"]["data"] == "after" and rest == []  # each once, in order, then live


@asynccontextmanager
async def bus_refused(topo: Topology) -> AsyncIterator[Redis]:
    """Redis answers commands but refuses SUBSCRIBE (the replicas' bus stays down, as while it
    resubscribes after an outage) until the block ends."""
    redis = Redis.from_url(topo.redis.url(0), socket_timeout=5.0)
    try:
        await redis.execute_command("ACL", "SETUSER", "default", "-subscribe", "-psubscribe", "-ssubscribe")
        await redis.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
        yield redis
    finally:
        await redis.execute_command("ACL", "SETUSER", "default", "+@all")
        await redis.aclose()


async def test_a_get_that_fails_after_a_redis_restart_keeps_no_claim_and_the_retry_gets_the_stream(
    topo: Topology, http: httpx.AsyncClient
) -> None:
    """Item 6: before, every retry after the first 503 answered 409 "Only one SSE stream"."""
    if isinstance(topo.redis, SharedRedis):
        pytest.skip("restarts the whole Redis and changes its ACL: the topology's own Redis only")
    a = topo.replica("a")
    session = await initialize(http, topo.url)
    headers = legacy_headers(session, accept="text/event-stream")
    topo.redis.stop()
    topo.redis.start()  # the session survives (append-only file)
    async with bus_refused(topo):
        for _ in range(3):
            refused = await http.get(a.url, headers=headers)
            assert refused.status_code == 503, (refused.status_code, refused.text)
            assert refused.headers["retry-after"]
    await anyio.to_thread.run_sync(wait_ready, a.base)
    statuses: list[int] = []
    deadline = anyio.current_time() + PATIENCE
    while True:
        async with stream(http, "GET", a.url, headers) as opened:
            statuses.append(opened.status)
            if opened.status == 200:
                assert (await opened.next()) is not None  # the priming event: the stream is ours
                assert await call_tool(http, topo.other("a").url, session, "poke", {"text": "back"}) is True
                _, message = await opened.message(timeout=10)
                assert message["params"]["data"] == "back"
                break
        assert anyio.current_time() < deadline, statuses
        await anyio.sleep(0.2)
    assert 409 not in statuses, statuses
