"""Redis Cluster and Sentinel for the Redis stores (issue 21): the URL forms, the cross-slot
check of every script (tests/cluster_slots.py), the broadcast log across slots, per-shard
readiness, and the misconfiguration a plain redis:// URL to a cluster node is.

The store contracts themselves run on the cluster and the sentinel group in
tests/test_redis_stores.py and tests/state/ (their fixtures are parametrised over the
deployments of scripts/services.sh); the replicas on them in tests/replicas/."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from cluster_slots import one_slot, scripts_of
from redis.crc import key_slot
from replica_app import deployment_url

from fastapi_mcp_ctx._replicas import event_scripts, redis_subscriptions, session_scripts
from fastapi_mcp_ctx._replicas.link import RedisLink
from fastapi_mcp_ctx._replicas.redis_events import RedisEventStore
from fastapi_mcp_ctx._replicas.redis_sessions import RedisLeases, RedisSessionStore
from fastapi_mcp_ctx._replicas.redis_subscriptions import RedisResourceSubscriptions
from fastapi_mcp_ctx._tasks import redis_store as task_scripts
from fastapi_mcp_ctx._tasks.redis_store import RedisTaskStore
from fastapi_mcp_ctx._transport.events import StreamKey, new_stream_id
from fastapi_mcp_ctx._transport.sessions import SessionRecord
from fastapi_mcp_ctx._transport.subscriptions import SessionAddress
from fastapi_mcp_ctx.backends import _redis_scripts
from fastapi_mcp_ctx.backends._redis_url import parse_redis_url
from fastapi_mcp_ctx.backends.redis import RedisBackend
from fastapi_mcp_ctx.errors import ConfigurationError
from fastapi_mcp_ctx.state import ContextState, clear_state

# ------------------------------------------------------------------ the URL forms (no I/O)


def test_the_cluster_url_names_its_startup_nodes_and_database_zero_only() -> None:
    t = parse_redis_url("redis+cluster://u:p%40ss@10.0.0.1:7000,10.0.0.2,[::1]:7002")
    assert (t.kind, t.nodes, t.username, t.password, t.ssl) == (
        "cluster",
        (("10.0.0.1", 7000), ("10.0.0.2", 6379), ("::1", 7002)),
        "u",
        "p@ss",
        False,
    )
    assert parse_redis_url("rediss+cluster://h:1/0").ssl
    assert t.tag("abc") == "{abc}" and parse_redis_url("redis://h:1/0").tag("abc") == "abc"
    for bad in ("redis+cluster://h:1/2", "redis+cluster://", "redis+cluster://h:port", "redis+cluster://h:1,,h:2"):
        with pytest.raises(ValueError):
            parse_redis_url(bad)


def test_the_sentinel_url_names_the_sentinels_the_master_and_the_database() -> None:
    t = parse_redis_url("redis+sentinel://:secret@s1:26000,s2/mymaster/3?sentinel_password=other")
    assert (t.kind, t.nodes, t.service, t.db, t.password, t.sentinel_password) == (
        "sentinel",
        (("s1", 26000), ("s2", 26379)),
        "mymaster",
        3,
        "secret",
        "other",
    )
    assert parse_redis_url("redis+sentinel://s1:1/m").db == 0
    for bad in ("redis+sentinel://s1:1", "redis+sentinel://s1:1/m/x", "redis+sentinel://s1:1/m/1/2", "redis+nope://h:1"):
        with pytest.raises(ValueError):
            parse_redis_url(bad)


def test_a_bad_cluster_or_sentinel_url_is_a_configuration_error_at_construction() -> None:
    from fastapi_mcp_ctx._replicas.stores import replica_stores
    from fastapi_mcp_ctx.settings import McpSettings

    for url in ("redis+cluster://h:1/5", "redis+sentinel://h:1"):
        with pytest.raises(ConfigurationError, match="not a valid Redis URL"):
            replica_stores(McpSettings(session_store_url=url), pinned=lambda _: False)
        with pytest.raises(ValueError):
            RedisBackend(url)


# ------------------------------------------------------------------ on the real cluster


# Scripts that only one Redis (or a sentinel group's master) runs: on a cluster their work is
# split into the scripts the exercise below runs (the counting sets, the broadcast log, a URI's
# subscribers are on slots of their own).
SINGLE_ONLY = {
    "fastapi_mcp_ctx._replicas.session_scripts.CREATE",
    "fastapi_mcp_ctx._replicas.session_scripts.GET",
    "fastapi_mcp_ctx._replicas.session_scripts.DELETE",
    "fastapi_mcp_ctx._replicas.session_scripts.RENEW",
    "fastapi_mcp_ctx._replicas.event_scripts.OPEN",
    "fastapi_mcp_ctx._replicas.event_scripts.CATCH_UP",
    "fastapi_mcp_ctx._replicas.event_scripts.PROMOTE",
    "fastapi_mcp_ctx._replicas.event_scripts.TO_GET",
    "fastapi_mcp_ctx._replicas.redis_subscriptions._SUBSCRIBE",
    "fastapi_mcp_ctx._replicas.redis_subscriptions._UNSUBSCRIBE",
    "fastapi_mcp_ctx._replicas.redis_subscriptions._DROP",
}


@pytest.fixture
async def cluster() -> AsyncIterator[RedisLink]:
    namespace = f"c{uuid.uuid4().hex[:10]}:"
    link = RedisLink(deployment_url("cluster"), namespace=namespace)
    yield link
    async for key in link.commands().redis.scan_iter(match=f"{namespace}*"):
        await link.call("test", "DEL", key)
    await link.aclose()


@pytest.mark.redis
async def test_every_script_of_the_task_store_runs_on_one_slot_of_the_cluster(cluster: RedisLink) -> None:
    defined = scripts_of(task_scripts)
    with one_slot() as sent:
        tasks = RedisTaskStore(cluster)
        owner = '["acme","alice","client"]'
        await tasks.create("t1", owner, ttl_ms=60_000, poll_ms=100, lease_ms=30_000, max_per_owner=10)
        assert (await tasks.get(owner, "t1")) is not None
        assert await tasks.renew(owner, "t1", 30_000, "halfway")
        assert await tasks.ask(owner, "t1", "q1", '{"method":"elicitation/create"}')
        assert await tasks.answer(owner, "t1", {"q1": '{"action":"accept"}'}) == ["q1"]
        assert await tasks.take(owner, "t1", "q1") == '{"action":"accept"}'
        assert [r.task_id for r in await tasks.list(owner)] == ["t1"]
        assert await tasks.finish(owner, "t1", "completed", None, '{"content":[]}')
        await tasks.create("t2", owner, ttl_ms=60_000, poll_ms=100, lease_ms=30_000, max_per_owner=10)
        assert await tasks.cancel(owner, "t2") is True
    assert sent.crossing == [], "a task script's keys cross slots"
    missing = set(defined.values()) - {defined[sha] for sha in sent.shas if sha in defined}
    assert missing == set(), f"task scripts not run on the cluster here: {sorted(missing)}"


def _record(owner: str | None = None) -> SessionRecord:
    return SessionRecord.from_initialize({"capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}, "2025-11-25", owner)


@pytest.mark.redis
async def test_every_script_of_every_store_runs_on_one_slot_of_the_cluster(cluster: RedisLink) -> None:
    defined = scripts_of(session_scripts, event_scripts, redis_subscriptions, _redis_scripts)
    state_backend = RedisBackend(deployment_url("cluster"), namespace=cluster.namespace)
    with one_slot() as sent:
        store = RedisSessionStore(cluster, idle_seconds=60, max_sessions=100, max_per_owner=5)
        store.slack_ms = store.idle_ms  # every lookup refreshes: the refresh path runs too
        leases = RedisLeases(store, lease_seconds=30)
        rec = _record("alice")
        await store.create(rec)
        assert await store.get(rec.id) is not None
        await store.update(rec)
        assert await leases.acquire(rec.id, "t") and await leases.renew(rec.id, "t")
        await leases.note_get_stream(rec.id, "0123456789abcdef")
        await leases.release(rec.id, "t")

        events = RedisEventStore(cluster)
        call = StreamKey(rec.id, new_stream_id())
        await events.open(call, lost=b'{"lost":1}', lease_seconds=30)
        await events.append(call, b"{}")
        await events.hold(call, 30)
        assert await events.end_lapsed(call) is not None
        await events.end(call)
        await events.read(call, 0)
        assert await events.broadcast(b'{"b":1}') == 1
        first = StreamKey(rec.id, new_stream_id())
        await events.open(first, get_stream="t1")
        await events.append(first, b'{"b":1}', broadcast=1)
        second = StreamKey(rec.id, new_stream_id())
        await events.open(second, get_stream="t1", follows=first)
        assert await events.broadcast(b'{"b":2}') == 2
        assert await events.catch_up(second) == 1
        assert await events.to_get_stream(rec.id, b'{"x":1}', tenant="t1")
        page = await events.read(second, 0)
        assert [e.data for e in page.events] == [b'{"b":2}', b'{"x":1}']  # the broadcast once, before the message
        third = StreamKey(rec.id, new_stream_id())  # opened, then made the session's (a takeover)
        await events.open(third, get_stream="t1", current=False)
        assert await events.broadcast(b'{"b":3}') == 3
        assert await events.to_get_stream(rec.id, b'{"x":2}', tenant="t1")  # still the second's
        assert await events.promote(third, get_stream="t1", follows=second)
        assert await events.to_get_stream(rec.id, b'{"x":3}', tenant="t1")
        page = await events.read(second, 0)
        assert [e.data for e in page.events][2:] == [b'{"b":3}', b'{"x":2}'] and page.ended
        assert [e.data for e in (await events.read(third, 0)).events] == [b'{"x":3}']  # the broadcast once, in the second
        await events.drop_session(rec.id)

        subs = RedisResourceSubscriptions(cluster)
        address = SessionAddress("t1", rec.id)
        await subs.subscribe(address, "file:///a")
        assert await subs.subscribers("file:///a") == [address]
        assert await subs.unsubscribe(address, "file:///a")
        await subs.subscribe(address, "file:///b")
        await subs.drop_session(rec.id)
        assert await subs.subscribers("file:///b") == []
        assert await store.delete(rec.id)

        state = ContextState(state_backend, "acme")
        await state.set("a", 1)
        await state.set_many({"b": 2, "c": 3})
        assert await state.get_many(["a", "b", "zz"]) == {"a": 1, "b": 2}
        assert [i.key for i in (await state.list()).items] == ["a", "b", "c"]
        assert await state.take("a") == 1
        assert await state.delete("b")
        await ContextState(state_backend, "globex").set("g", 1)
        assert await clear_state(state_backend) == 2  # every tenant: each group's index, merged
    await state_backend.aclose()
    assert sent.crossing == [], "a script's keys cross slots"
    names = {defined[sha] for sha in sent.shas if sha in defined}
    missing = set(defined.values()) - names - SINGLE_ONLY
    assert missing == set(), f"scripts neither run on the cluster here nor declared one-Redis-only: {sorted(missing)}"


@pytest.mark.redis
async def test_a_tenant_is_one_slot_and_tenants_spread_over_the_masters(cluster: RedisLink) -> None:
    backend = RedisBackend(deployment_url("cluster"), namespace=cluster.namespace)
    slots = {key_slot(backend._vkey(f"t/tenant{i}/k").encode()) for i in range(30)}  # pyright: ignore[reportPrivateUsage]
    assert len(slots) > 10
    one = {key_slot(k.encode()) for k in (backend._vkey("t/acme/a"), backend._vkey("t/acme/b/c"), backend._idx_of("t/acme/"))}  # pyright: ignore[reportPrivateUsage]
    assert len(one) == 1
    consent = {key_slot(backend._vkey(f"x/consent/acme/{i}").encode()) for i in range(5)}  # pyright: ignore[reportPrivateUsage]
    assert len(consent) == 1
    await backend.aclose()


@pytest.mark.redis
async def test_readiness_of_the_cluster_names_every_master_and_its_slots(cluster: RedisLink) -> None:
    shards = await cluster.shards()
    assert len(shards) == 3 and all(v.startswith("ok, slots ") for v in shards.values())
    await cluster.ping()


@pytest.mark.redis
@pytest.mark.parametrize("store", ["state", "sessions"])
async def test_a_plain_redis_url_to_a_cluster_node_is_refused_by_check(store: str) -> None:
    host, port = parse_redis_url(deployment_url("cluster")).nodes[0]
    url = f"redis://{host}:{port}/0"
    if store == "state":
        backend = RedisBackend(url)
        with pytest.raises(ConfigurationError, match=r"redis\+cluster://"):
            await backend.check()
        await backend.aclose()
    else:
        link = RedisLink(url)
        with pytest.raises(ConfigurationError, match=r"MCP_SESSION_STORE_URL: .*redis\+cluster://"):
            await link.check()
        await link.aclose()


@pytest.mark.redis
async def test_the_sentinel_form_and_one_redis_pass_the_check() -> None:
    for kind in ("single", "sentinel"):
        link = RedisLink(deployment_url(kind))
        await link.check()
        assert await link.shards() == {}
        await link.aclose()


# ------------------------------------------------------------------ nothing applied twice (no server)


async def test_an_idempotent_command_is_retried_once_any_other_never() -> None:
    """A broken connection after the command was sent: the reply is lost, the command may have
    run. Only an idempotent one is sent again (once); an append, a creation or a take answers 503."""
    import asyncio
    from types import SimpleNamespace

    from redis.exceptions import ConnectionError as RedisConnectionError

    from fastapi_mcp_ctx.backends._redis_client import LoopClient, Slots
    from fastapi_mcp_ctx.errors import StateUnavailableError

    client = LoopClient(SimpleNamespace(execute_command=None), False, Slots(4, 1.0))  # type: ignore[arg-type]
    sent: list[str] = []

    async def breaks(name: str) -> str:
        sent.append(name)
        raise RedisConnectionError("Connection closed by server.")

    def unavailable(exc: BaseException) -> Exception:
        return StateUnavailableError(str(exc))

    for idempotent, times in ((True, 2), (False, 1)):
        sent.clear()
        with pytest.raises(StateUnavailableError):
            await client.attempt(lambda _c: breaks("cmd"), unavailable, idempotent=idempotent)
        assert sent == ["cmd"] * times

    async def breaks_once() -> str:
        sent.append("x")
        if len(sent) == 1:
            raise RedisConnectionError("reset")
        return "ok"

    sent.clear()
    assert await client.attempt(lambda _c: breaks_once(), unavailable, idempotent=True) == "ok"
    assert sent == ["x", "x"]
    await asyncio.sleep(0)


def test_which_failures_a_retry_can_outlive() -> None:
    from redis.exceptions import AuthenticationError, ClusterDownError, ReadOnlyError, ResponseError, TryAgainError
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    from fastapi_mcp_ctx.backends._redis_url import retryable

    for exc in (RedisConnectionError(), RedisTimeoutError(), ClusterDownError("x"), TryAgainError(), ReadOnlyError(), ResponseError("MASTERDOWN x")):
        assert retryable(exc), exc
    for exc in (AuthenticationError(), ResponseError("ERR unknown command"), ResponseError("CROSSSLOT Keys")):
        assert not retryable(exc), exc
