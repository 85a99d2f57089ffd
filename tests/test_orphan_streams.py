"""Streams that outlive their replica (issue 24 items 4, 5, 6), fast: the event-store logic on
the in-process twin with a clock the test controls and on Redis (the same assertions), the
reader that ends a lost call's stream, and a GET open that fails keeping nothing claimed.

The replica topology (kill -9, a Redis restart, nginx) runs the same cases end to end in
tests/replicas/test_orphans.py.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from conftest import LEGACY, mcp_settings, open_client
from replica_app import redis_url
from resume_app import build
from resume_wire import events, get_stream, new_session

from fastapi_mcp_ctx._replicas.link import RedisLink
from fastapi_mcp_ctx._replicas.redis_events import RedisEventStore
from fastapi_mcp_ctx._transport.events import EventStore, StreamKey, UnknownStreamError, new_stream_id
from fastapi_mcp_ctx._transport.memory_events import MemoryEventStore
from fastapi_mcp_ctx._transport.sse import KEEPALIVE, Connection, tail
from fastapi_mcp_ctx.errors import StateUnavailableError

LOST = b'{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"lost","data":{"requestId":7,"reason":"call_lost"}}}'


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def redis_store() -> AsyncIterator[RedisEventStore]:
    namespace = f"t{uuid.uuid4().hex[:10]}:"
    link = RedisLink(redis_url(), namespace=namespace)
    try:
        yield RedisEventStore(link, max_events=100, max_age_seconds=60)
    finally:
        redis = link.commands().redis
        keys = [k async for k in redis.scan_iter(match=f"{namespace}*", count=500)]
        if keys:
            await redis.delete(*keys)
        await link.aclose()


async def read_all(store: EventStore, key: StreamKey, after: int = 0) -> tuple[list[bytes | None], bool]:
    page = await store.read(key, after)
    return [e.data for e in page.events], page.ended


# -- item 4: a call's stream ends with call_lost once its producer's lease lapses ------------------


async def test_a_call_stream_whose_lease_lapses_ends_with_its_lost_event_once() -> None:
    clock = Clock()
    store = MemoryEventStore(clock=clock)
    k = StreamKey("s1", new_stream_id())
    await store.open(k, lost=LOST, lease_seconds=3.0)
    await store.append(k, b'{"p":1}')
    assert await store.end_lapsed(k) == pytest.approx(3.0)  # alive: how long before it lapses
    clock.now += 2.0
    await store.hold(k, 3.0)  # renewed by the running replica
    clock.now += 2.5
    assert await store.end_lapsed(k) == pytest.approx(0.5)
    clock.now += 0.6
    assert await store.end_lapsed(k) == 0.0  # lapsed: ended now, with the lost event
    assert await read_all(store, k) == ([b'{"p":1}', LOST], True)
    assert await store.end_lapsed(k) is None  # once
    with pytest.raises(UnknownStreamError):  # a late answer of a replica that was only cut off is refused
        await store.append(k, b'{"late":1}', last=True)


async def test_streams_without_a_producer_lease_never_lapse() -> None:
    clock = Clock()
    store = MemoryEventStore(clock=clock)
    get_key, call_key = StreamKey("s1", new_stream_id()), StreamKey("s1", new_stream_id())
    await store.open(get_key, get_stream="")
    await store.open(call_key, lost=LOST, lease_seconds=1.0)
    await store.append(call_key, b'{"r":1}', last=True)  # answered before the lease lapsed
    clock.now += 100  # long past the lease, within the retention
    assert await store.end_lapsed(get_key) is None
    assert await store.end_lapsed(call_key) is None
    assert await read_all(store, call_key) == ([b'{"r":1}'], True)


async def test_on_redis_the_lease_is_renewed_lapses_and_ends_the_stream_once(redis_store: RedisEventStore) -> None:
    store = redis_store
    k = StreamKey("s1", new_stream_id())
    await store.open(k, lost=LOST, lease_seconds=60.0)
    await store.append(k, b'{"p":1}')
    left = await store.end_lapsed(k)
    assert left is not None and 50 < left <= 60
    await store.hold(k, 0.001)  # the lease of a replica that stopped renewing: lapsed 1 ms later
    await asyncio.sleep(0.05)  # past it on Redis's millisecond clock (a PING could land in the same ms)
    assert await store.end_lapsed(k) == 0.0
    assert await read_all(store, k) == ([b'{"p":1}', LOST], True)
    assert await store.end_lapsed(k) is None
    with pytest.raises(UnknownStreamError):
        await store.append(k, b'{"late":1}', last=True)
    other = StreamKey("s1", new_stream_id())
    await store.open(other)  # no lease: a GET stream, or a single-process router's call
    assert await store.end_lapsed(other) is None


class Sent:
    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.ended = False

    async def __call__(self, message: Any) -> None:
        self.bodies.append(message.get("body", b""))
        self.ended = self.ended or not message.get("more_body", False)


async def test_a_reader_of_a_lost_call_gets_call_lost_and_the_end_not_keep_alives() -> None:
    """Before the fix the reader wrote ``: keep-alive`` for ever (issue 24 item 4)."""
    clock = Clock()
    store = MemoryEventStore(clock=clock)
    k = StreamKey("s1", new_stream_id())
    await store.open(k, lost=LOST, lease_seconds=3.0)
    await store.append(k, None)  # priming
    await store.append(k, b'{"p":1}')
    clock.now += 10  # the running replica died: nobody renews
    sent = Sent()
    reason = await tail(store, Connection(k, 1000), sent, 1, keepalive=3600.0)  # a keep-alive would take an hour
    assert reason == "ended" and sent.ended
    body = b"".join(sent.bodies)
    assert KEEPALIVE not in body
    data = [json.loads(line[5:]) for line in body.decode().split("\r\n") if line.startswith("data:") and line[5:].strip()]
    assert data == [{"p": 1}, json.loads(LOST)]


# -- item 5: what is sent to a GET stream is recorded whether or not a replica holds it -------------


async def _check_broadcasts_and_session_messages(store: EventStore) -> None:
    x = StreamKey("s1", new_stream_id())
    await store.open(x, get_stream="t:alpha")
    first = await store.broadcast(b'{"m":"lc1"}')
    assert await store.append(x, b'{"m":"lc1"}', broadcast=first) > 0  # its holder took it from the bus
    # the holder dies; more is sent to the session's GET stream
    second = await store.broadcast(b'{"m":"lc2"}')
    assert await store.to_get_stream("s1", b'{"m":"poke"}', tenant="t:alpha")
    assert not await store.to_get_stream("s1", b'{"m":"foreign"}', tenant="t:beta")  # another tenant finds nothing (B16)
    assert not await store.to_get_stream("s2", b'{"m":"none"}', tenant="t:alpha")  # a session without a GET stream
    third = await store.broadcast(b'{"m":"lc3"}')
    assert first < second < third
    # a resume on another replica: its GET stream follows the dead one's, which takes what it missed and ends
    y = StreamKey("s1", new_stream_id())
    await store.open(y, get_stream="t:alpha", follows=x)
    assert await read_all(store, x) == ([b'{"m":"lc1"}', b'{"m":"lc2"}', b'{"m":"poke"}', b'{"m":"lc3"}'], True)
    assert await store.append(y, b'{"m":"lc3"}', broadcast=third) == 0  # taken already: never twice
    fourth = await store.broadcast(b'{"m":"lc4"}')
    assert await store.catch_up(y) == 1
    assert await store.append(y, b'{"m":"lc4"}', broadcast=fourth) == 0  # the pump's copy of it is dropped
    assert await store.to_get_stream("s1", b'{"m":"poke2"}', tenant="t:alpha")
    assert await read_all(store, y) == ([b'{"m":"lc4"}', b'{"m":"poke2"}'], False)
    await store.drop_session("s1")
    assert not await store.to_get_stream("s1", b'{"m":"after"}', tenant="t:alpha")


async def test_messages_for_a_dead_holders_get_stream_are_recorded_once_in_order_memory() -> None:
    await _check_broadcasts_and_session_messages(MemoryEventStore(clock=Clock()))


async def test_messages_for_a_dead_holders_get_stream_are_recorded_once_in_order_redis(redis_store: RedisEventStore) -> None:
    await _check_broadcasts_and_session_messages(redis_store)


async def test_the_broadcast_log_is_bounded_by_the_retention_settings() -> None:
    clock = Clock()
    store = MemoryEventStore(max_events=3, max_age_seconds=10, clock=clock)
    x = StreamKey("s1", new_stream_id())
    await store.open(x, get_stream="")
    for i in range(5):
        await store.broadcast(f'{{"n":{i}}}'.encode())
    assert await store.catch_up(x) == 3  # only the kept ones: the log holds max_events
    clock.now += 11
    await store.broadcast(b'{"n":5}')
    y = StreamKey("s1", new_stream_id())
    await store.open(y, get_stream="")
    clock.now += 11  # older than the age bound before anyone took it
    assert await store.catch_up(y) == 0


async def test_on_redis_the_broadcast_log_is_trimmed_by_count(redis_store: RedisEventStore) -> None:
    for i in range(300):
        await redis_store.broadcast(f'{{"n":{i}}}'.encode())
    length = await redis_store.link.call("test", "XLEN", f"{redis_store.link.namespace}eb")
    assert length <= 200  # MAXLEN ~ 100: Redis trims by whole nodes, never grows without bound


# -- item 6: a GET open that fails keeps nothing claimed ------------------------------------------


async def test_a_get_that_fails_on_the_bus_releases_its_claim_and_the_retry_gets_the_stream() -> None:
    app, router = build(mcp_settings())
    sid = await new_session(app)
    real = router.notifier.attach_get_stream
    failures = 0

    async def bus_down(*args: Any, **kwargs: Any) -> Any:
        nonlocal failures
        failures += 1
        raise StateUnavailableError("The replica bus (redis) is unavailable, retry later")

    router.notifier.attach_get_stream = bus_down  # the bus resubscribing after a Redis outage
    headers = {"accept": "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": LEGACY}
    async with open_client(app) as client:
        for _ in range(2):
            refused = await client.get("/mcp", headers=headers)
            assert refused.status_code == 503, refused.text  # never 409: the failed attempt kept no slot
    assert failures == 2
    router.notifier.attach_get_stream = real
    async with get_stream(app, sid) as opened:
        await opened.wait_for(lambda e: len(events(e)) >= 1)
        assert opened.status == 200
    assert not router.streams.get_stream_attached(sid)
