"""The Redis session store, leases and event store against a real Redis (the contract the
in-memory twins keep, plus what only a shared store has: counting across replicas, server-side
expiry, trimming by Redis's clock). The wire-level behaviour is tests/test_replicas.py."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import anyio
import pytest
from replica_app import DEPLOYMENTS, deployment_url

from fastapi_mcp_ctx._replicas.link import RedisLink
from fastapi_mcp_ctx._replicas.redis_events import RedisEventStore
from fastapi_mcp_ctx._replicas.redis_sessions import RedisLeases, RedisSessionStore
from fastapi_mcp_ctx._replicas.redis_subscriptions import RedisResourceSubscriptions
from fastapi_mcp_ctx._replicas.stores import replica_stores
from fastapi_mcp_ctx._transport.events import StreamKey, UnknownStreamError, new_stream_id
from fastapi_mcp_ctx._transport.sessions import OwnerQuotaExceeded, SessionRecord
from fastapi_mcp_ctx._transport.subscriptions import SessionAddress
from fastapi_mcp_ctx.errors import ConfigurationError, StateUnavailableError
from fastapi_mcp_ctx.settings import McpSettings

pytestmark = pytest.mark.redis


@pytest.fixture(params=DEPLOYMENTS)
async def link(request: pytest.FixtureRequest) -> AsyncIterator[RedisLink]:
    """A link to one Redis, to the cluster and to the sentinel group (issue 21): the same
    contract on each, so a key layout that crosses slots fails here (CROSSSLOT), not in production."""
    namespace = f"u{uuid.uuid4().hex[:10]}:"
    link = RedisLink(deployment_url(str(request.param)), namespace=namespace)
    yield link
    keys = [k async for k in link.commands().redis.scan_iter(match=f"{namespace}*")]
    for key in keys:  # one by one: on a cluster they are on several slots
        await link.call("test", "DEL", key)
    await link.aclose()


def record(owner: str | None = None) -> SessionRecord:
    return SessionRecord.from_initialize({"capabilities": {"roots": {}}, "clientInfo": {"name": "c", "version": "1"}}, "2025-11-25", owner)


async def test_records_round_trip_update_and_delete(link: RedisLink) -> None:
    store = RedisSessionStore(link, idle_seconds=60, max_sessions=10)
    rec = record("alice")
    await store.create(rec)
    got = await store.get(rec.id)
    assert got is not None and (got.owner, got.client_capabilities, got.client_info) == ("alice", {"roots": {}}, {"name": "c", "version": "1"})
    got.log_level = "error"
    await store.update(got)
    assert (await store.get(rec.id)).log_level == "error"  # type: ignore[union-attr]
    assert await store.delete(rec.id) and not await store.delete(rec.id)
    assert await store.get(rec.id) is None
    await store.update(got)  # a gone record stays gone
    assert await store.get(rec.id) is None


# Time is the test's: age() moves a session's (and its lease's) Redis expiries ms milliseconds
# closer, as if that much time had passed, so no assertion rests on how long a sleep really took
# on a loaded machine (issue 24 item 14). Redis keeps its own clock (TIME) for the scripts; the
# margins against it (tens of seconds) are far beyond any scheduling delay.
# One key per call: on a cluster the record and lease share a slot, the counting sets do not.
_AGE = """
local ms = tonumber(ARGV[1])
if ARGV[3] == 'ttl' then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then
    if ttl - ms > 0 then redis.call('PEXPIRE', KEYS[1], ttl - ms) else redis.call('DEL', KEYS[1]) end
  end
elseif redis.call('ZSCORE', KEYS[1], ARGV[2]) then
  redis.call('ZINCRBY', KEYS[1], -ms, ARGV[2])
end
return 1
"""


async def age(store: RedisSessionStore, session_id: str, seconds: float, owner: str | None = None) -> None:
    """Make ``seconds`` pass for ``session_id``'s record, its GET lease and its expiry scores."""
    k, ms = store.keys, round(seconds * 1000)
    for key in (k.record(session_id), k.lease_of(session_id)):
        await store.link.call("test", "EVAL", _AGE, 1, key, ms, session_id, "ttl")
    for key in [k.all] + ([k.owner(owner)] if owner else []):
        await store.link.call("test", "EVAL", _AGE, 1, key, ms, session_id, "score")


async def test_idle_expiry_is_restarted_by_use_and_frees_its_place(link: RedisLink) -> None:
    store = RedisSessionStore(link, idle_seconds=60, max_sessions=1)
    rec = record()
    await store.create(rec)
    for _ in range(3):
        await age(store, rec.id, 40)
        assert await store.get(rec.id) is not None  # used within its 60 s: not idle, and restarted
    with pytest.raises(OverflowError):
        await store.create(record())
    await age(store, rec.id, 61)
    assert await store.get(rec.id) is None
    await store.create(record())  # the expired one no longer counts


async def test_the_owner_quota_and_the_cap_count_every_replica(link: RedisLink) -> None:
    one = RedisSessionStore(link, idle_seconds=60, max_sessions=3, max_per_owner=1)
    two = RedisSessionStore(link, idle_seconds=60, max_sessions=3, max_per_owner=1)  # another replica
    await one.create(record("alice"))
    with pytest.raises(OwnerQuotaExceeded):
        await two.create(record("alice"))
    await two.create(record("bob"))
    await one.create(record(None))  # anonymous: only the cap applies
    with pytest.raises(OverflowError):
        await two.create(record("carol"))


async def test_leases_are_exclusive_renewed_released_and_expire(link: RedisLink) -> None:
    # a 30 s lease and a 60 s idle time; age() makes time pass, leaving 10 s or more of margin
    store = RedisSessionStore(link, idle_seconds=60, max_sessions=10)
    leases = RedisLeases(store, lease_seconds=30)
    rec = record()
    await store.create(rec)
    assert await leases.acquire(rec.id, "a") and not await leases.acquire(rec.id, "b")
    for _ in range(5):  # renewing also keeps the session from idling out (100 s > its 60 s idle time)
        await age(store, rec.id, 20)
        assert await leases.renew(rec.id, "a")
    assert await store.get(rec.id) is not None
    await leases.release(rec.id, "b")  # not b's: nothing happens
    assert not await leases.acquire(rec.id, "b")
    await leases.release(rec.id, "a")
    assert await leases.acquire(rec.id, "b")
    await age(store, rec.id, 31)  # b died without releasing: its lease lapses
    assert await leases.acquire(rec.id, "c")
    assert await leases.acquire(rec.id, "d", force=True)  # a resume takes it over
    assert not await leases.renew(rec.id, "c")
    assert not await leases.acquire("no-such-session", "x")
    await leases.note_get_stream(rec.id, "0123456789abcdef")
    assert await leases.is_get_stream(rec.id, "0123456789abcdef") and not await leases.is_get_stream(rec.id, "fedcba9876543210")


async def test_event_log_sequences_cursors_end_and_wait(link: RedisLink) -> None:
    store = RedisEventStore(link)
    key = StreamKey("s1", new_stream_id())
    await store.open(key)
    assert [await store.append(key, d) for d in (None, b'{"a":1}', b'{"b":2}')] == [1, 2, 3]
    page = await store.read(key, 1)
    assert [(e.seq, e.data) for e in page.events] == [(2, b'{"a":1}'), (3, b'{"b":2}')] and not page.ended
    assert (await store.read(key, 0)).events[0].data is None
    with pytest.raises(UnknownStreamError):
        await store.read(key, 4)
    with pytest.raises(UnknownStreamError):
        await store.read(StreamKey("s2", key.stream_id), 0)  # another session's id finds nothing (B16)

    async def later() -> None:
        await anyio.sleep(0.2)
        await store.append(key, b'{"c":3}', last=True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(later)
        waited = await store.read(key, 3, wait=60.0)  # woken by the append, long before
    assert [e.seq for e in waited.events] == [4] and waited.ended
    with pytest.raises(UnknownStreamError):
        await store.append(key, b"{}")
    assert (await store.read(key, 0, wait=0.1)).ended


async def test_end_and_drop_wake_a_blocked_reader(link: RedisLink) -> None:
    store = RedisEventStore(link)
    ended, dropped = StreamKey("s3", new_stream_id()), StreamKey("s4", new_stream_id())
    await store.open(ended)
    await store.open(dropped)
    results: dict[str, object] = {}

    async def read(name: str, key: StreamKey) -> None:
        try:
            results[name] = await store.read(key, 0, wait=120.0)
        except UnknownStreamError as exc:
            results[name] = exc

    with anyio.fail_after(60):  # the readers wait 120 s unless woken: only a wake-up passes
        async with anyio.create_task_group() as tg:
            tg.start_soon(read, "ended", ended)
            tg.start_soon(read, "dropped", dropped)
            await anyio.sleep(0.2)
            await store.end(ended)
            await store.drop_session("s4")
    assert getattr(results["ended"], "ended", False) is True
    assert isinstance(results["dropped"], UnknownStreamError)


async def test_retention_by_count_and_by_age(link: RedisLink) -> None:
    store = RedisEventStore(link, max_events=100, max_age_seconds=0.5)
    key = StreamKey("s5", new_stream_id())
    await store.open(key)
    for n in range(400):
        await store.append(key, b'{"n":%d}' % n)
    kept = (await store.read(key, 0)).events
    assert kept[0].seq > 1 and len(await link.call("t", "XRANGE", f"{link.namespace}ev:s5:{key.stream_id}", "-", "+")) <= 300
    await anyio.sleep(0.7)
    await store.append(key, b'{"n":"new"}')
    page = await store.read(key, 0)
    assert [e.seq for e in page.events] == [401]  # older than the age limit: trimmed
    assert (await store.read(key, 3)).events[0].seq == 401  # a reader past the gap continues


async def test_an_unreachable_redis_is_unavailable_never_unknown() -> None:
    link = RedisLink("redis://127.0.0.1:1/0", timeout=0.5)
    store = RedisSessionStore(link, idle_seconds=60, max_sessions=10)
    with pytest.raises(StateUnavailableError):
        await store.get("made-up-123")
    with pytest.raises(StateUnavailableError):
        await RedisEventStore(link).read(StreamKey("s", new_stream_id()), 0)
    await link.aclose()


def test_store_urls_are_checked_at_construction() -> None:
    with pytest.raises(ConfigurationError, match="MCP_SESSION_STORE_URL"):
        replica_stores(McpSettings(session_store_url="postgres://x"), pinned=lambda _: False)
    with pytest.raises(ConfigurationError, match="not a valid Redis URL"):
        replica_stores(McpSettings(session_store_url="redis://host:notaport/0"), pinned=lambda _: False)
    stores = replica_stores(McpSettings(session_store_url="redis://127.0.0.1:1/3"), pinned=lambda _: False)
    assert type(stores.sessions).__name__ == "RedisSessionStore"


async def test_the_subscription_registry_contract(link: RedisLink) -> None:
    registry = RedisResourceSubscriptions(link, max_per_session=2)
    alice, bob = SessionAddress("t1", "s-alice"), SessionAddress(None, "s-bob")
    await registry.subscribe(alice, "note://b")
    await registry.subscribe(alice, "note://a")
    await registry.subscribe(alice, "note://a")  # idempotent
    with pytest.raises(OverflowError):
        await registry.subscribe(alice, "note://c")
    await registry.subscribe(bob, "note://a")
    assert await registry.uris("s-alice") == ["note://b", "note://a"]  # subscription order
    assert await registry.subscribers("note://a") == [alice, bob]  # tenants kept, None included
    assert await registry.unsubscribe(alice, "note://a") and not await registry.unsubscribe(alice, "note://a")
    await registry.drop_session("s-bob")
    assert await registry.subscribers("note://a") == []
    assert await registry.uris("s-bob") == []


async def test_an_append_sent_again_after_its_reply_was_lost_is_stored_once(link: RedisLink, monkeypatch: pytest.MonkeyPatch) -> None:
    """An append is retried once after a broken connection (issue 21): its nonce makes the second
    attempt answer the first one's sequence instead of storing the event twice."""
    from fastapi_mcp_ctx._replicas import redis_events

    store = RedisEventStore(link)
    key = StreamKey("s1", new_stream_id())
    await store.open(key)
    monkeypatch.setattr(redis_events.secrets, "token_hex", lambda _n: "0123456789abcdef")
    assert [await store.append(key, b'{"a":1}') for _ in range(2)] == [1, 1]  # the same append twice: stored once
    monkeypatch.setattr(redis_events.secrets, "token_hex", lambda _n: "fedcba9876543210")
    assert await store.append(key, b'{"b":2}', last=True) == 2
    assert await store.append(key, b'{"b":2}', last=True) == 2  # even once it ended the stream
    page = await store.read(key, 0)
    assert [(e.seq, e.data) for e in page.events] == [(1, b'{"a":1}'), (2, b'{"b":2}')] and page.ended
