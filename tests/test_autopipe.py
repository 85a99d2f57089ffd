"""The auto-pipelined Redis session lookups (``_replicas/autopipe.py``, issue 7's benchmark): the
lookups of concurrent requests leave as one script call, each caller gets the answer for its own
session, and a Redis that fails or stops mid-batch fails every caller closed (503), never "valid".

Runs against a Redis server of its own (``own_redis``), which it pauses, kills and restarts.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from conftest import LEGACY, Wire, open_client
from own_redis import OwnRedis, own_redis
from redis.asyncio import Redis
from replica_app import two_replicas
from resume_wire import call_body, legacy_headers

from fastapi_mcp_ctx._replicas.autopipe import KeyBatcher
from fastapi_mcp_ctx._replicas.link import RedisLink
from fastapi_mcp_ctx._replicas.redis_sessions import RedisSessionStore
from fastapi_mcp_ctx._transport.sessions import SessionRecord
from fastapi_mcp_ctx.backends._redis_url import parse_redis_url
from fastapi_mcp_ctx.errors import StateUnavailableError

pytestmark = pytest.mark.redis


def record(session_id: str) -> SessionRecord:
    return SessionRecord(id=session_id, protocol_version=LEGACY, client_capabilities={}, client_info={"name": f"client-{session_id}"})


@asynccontextmanager
async def store_on(redis: OwnRedis, timeout: float = 2.0) -> AsyncIterator[RedisSessionStore]:
    link = RedisLink(redis.url, namespace="ap:", timeout=timeout)
    try:
        yield RedisSessionStore(link, idle_seconds=60, max_sessions=1000)
    finally:
        await link.aclose()


def batcher_of(store: RedisSessionStore) -> KeyBatcher:
    return store._lookups  # pyright: ignore[reportPrivateUsage]


async def commandstats(url: str) -> dict[str, Any]:
    client = Redis.from_url(url, decode_responses=True)
    try:
        return await client.info("commandstats")
    finally:
        await client.aclose()


async def evalsha_calls(url: str) -> int:
    return int((await commandstats(url)).get("cmdstat_evalsha", {}).get("calls", 0))


async def with_sessions(store: RedisSessionStore, *ids: str) -> int:
    """Create the sessions, warm the batcher up (connection open, script cached); its round trips so far."""
    for session_id in ids:
        await store.create(record(session_id))
    await store.get(ids[0])
    return batcher_of(store).round_trips


async def reset_stats(url: str) -> None:
    client = Redis.from_url(url)
    try:
        await client.config_resetstat()
    finally:
        await client.aclose()


async def wait_sent(batcher: KeyBatcher, sent: int, timeout: float = 2.0) -> None:
    deadline = time.monotonic() + timeout
    while batcher.round_trips < sent:
        assert time.monotonic() < deadline, "the batch was not sent"
        await asyncio.sleep(0.01)


async def test_concurrent_lookups_are_one_round_trip_and_each_gets_its_own_record() -> None:
    with own_redis() as redis:
        async with store_on(redis) as store:
            ids = [f"s{i}" for i in range(20)]
            for session_id in ids:
                await store.create(record(session_id))
            await store.get(ids[0])  # the connection is open, the script cached
            await reset_stats(redis.url)
            before = batcher_of(store).round_trips
            got = await asyncio.gather(*(store.get(session_id) for session_id in ids))
            assert batcher_of(store).round_trips == before + 1
            assert await evalsha_calls(redis.url) == 1
            for session_id, rec in zip(ids, got, strict=True):
                assert rec is not None and rec.id == session_id
                assert rec.client_info == {"name": f"client-{session_id}"}


async def test_an_unknown_session_among_valid_ones_is_the_only_one_unknown() -> None:
    with own_redis() as redis:
        async with store_on(redis) as store:
            await store.create(record("a"))
            await store.create(record("b"))
            await store.delete("b")
            got = await asyncio.gather(store.get("a"), store.get("made-up"), store.get("b"), store.get("a"))
            assert [r.id if r else None for r in got] == ["a", None, None, "a"]


async def test_one_session_looked_up_by_many_callers_is_one_key_and_every_caller_gets_it() -> None:
    with own_redis() as redis:
        async with store_on(redis) as store:
            await store.create(record("same"))
            await store.get("same")
            await reset_stats(redis.url)
            got = await asyncio.gather(*(store.get("same") for _ in range(32)))
            assert all(r is not None and r.id == "same" for r in got)
            stats = await commandstats(redis.url)
            assert stats["cmdstat_evalsha"]["calls"] == 1
            assert stats["cmdstat_hget"]["calls"] == 1  # the script read the record once


async def test_lookups_arriving_during_a_round_trip_leave_together_in_the_next() -> None:
    with own_redis() as redis:
        assert redis.proc is not None
        async with store_on(redis) as store:
            sent = await with_sessions(store, "x", "y", "z")
            batcher = batcher_of(store)
            redis.proc.send_signal(signal.SIGSTOP)  # the next round trips wait
            try:
                first = [asyncio.ensure_future(store.get("x"))]
                await wait_sent(batcher, sent + 1)
                second = [asyncio.ensure_future(store.get("y"))]
                await wait_sent(batcher, sent + 2)  # the second connection
                third = [asyncio.ensure_future(store.get(s)) for s in ("x", "y", "z", "z")]
                await asyncio.sleep(0.1)
                assert batcher.round_trips == sent + 2  # both connections busy: the rest waits
            finally:
                redis.proc.send_signal(signal.SIGCONT)
            got = await asyncio.gather(*first, *second, *third)
            assert [r.id if r else None for r in got] == ["x", "y", "x", "y", "z", "z"]
            assert batcher.round_trips == sent + 3  # the four waiting lookups: one round trip


async def test_a_batch_is_bounded_in_keys() -> None:
    with own_redis() as redis:
        async with store_on(redis) as store:
            store._lookups = batcher = KeyBatcher(  # pyright: ignore[reportPrivateUsage]
                parse_redis_url(redis.url),
                batcher_of(store).script,
                fixed_key=batcher_of(store).fixed_key,
                argv=batcher_of(store).argv,
                translate=lambda exc: StateUnavailableError(str(exc)),
                timeout=2.0,
                connections=1,
                max_batch=3,
            )
            try:
                ids = [f"k{i}" for i in range(7)]
                for session_id in ids:
                    await store.create(record(session_id))
                await store.get("k0")  # the script cached (a first EVALSHA answers NOSCRIPT: one more round trip)
                sent = batcher.round_trips
                got = await asyncio.gather(*(store.get(session_id) for session_id in ids))
                assert [r.id if r else None for r in got] == ids
                assert batcher.round_trips == sent + 3  # 3 + 3 + 1 keys
            finally:
                await batcher.aclose()


async def test_redis_killed_mid_batch_fails_every_caller_with_503_then_lookups_recover() -> None:
    with own_redis() as redis:
        assert redis.proc is not None
        async with store_on(redis) as store:
            sent = await with_sessions(store, "a", "b", "c")
            batcher = batcher_of(store)
            redis.proc.send_signal(signal.SIGSTOP)
            tasks = [asyncio.ensure_future(store.get(s)) for s in ("a", "b", "made-up", "c")]
            await wait_sent(batcher, sent + 1)  # the batch is on the wire, unanswered
            redis.proc.kill()  # SIGKILL while stopped: the connection is reset
            redis.proc.wait(timeout=10)
            results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 5.0)
            assert all(isinstance(r, StateUnavailableError) for r in results), results  # never None (404), never a record
            with pytest.raises(StateUnavailableError):
                await store.get("a")  # refused while down: 503 again, no record from anywhere
            redis.start()  # appendfsync always: the sessions are back
            got = await asyncio.gather(store.get("a"), store.get("made-up"))
            assert [r.id if r else None for r in got] == ["a", None]


async def test_a_stopped_redis_fails_the_batch_at_the_deadline() -> None:
    with own_redis() as redis:
        assert redis.proc is not None
        async with store_on(redis, timeout=0.5) as store:
            await store.create(record("a"))
            await store.get("a")
            redis.proc.send_signal(signal.SIGSTOP)
            try:
                started = time.monotonic()
                results = await asyncio.gather(store.get("a"), store.get("a"), store.get("b"), return_exceptions=True)
                took = time.monotonic() - started
            finally:
                redis.proc.send_signal(signal.SIGCONT)
            assert all(isinstance(r, StateUnavailableError) for r in results), results
            assert 0.4 < took < 2.0
            again = await store.get("a")  # a new connection: the timed-out one was dropped, no stale reply read
            assert again is not None and again.id == "a"


async def test_a_cancelled_caller_leaves_the_batch_running_for_the_others() -> None:
    with own_redis() as redis:
        assert redis.proc is not None
        async with store_on(redis) as store:
            sent = await with_sessions(store, "a", "b")
            batcher = batcher_of(store)
            redis.proc.send_signal(signal.SIGSTOP)
            try:
                tasks = [asyncio.ensure_future(store.get(s)) for s in ("a", "a", "b")]
                await wait_sent(batcher, sent + 1)
                tasks[0].cancel()
                await asyncio.sleep(0.05)
            finally:
                redis.proc.send_signal(signal.SIGCONT)
            with pytest.raises(asyncio.CancelledError):
                await tasks[0]
            other_a, b = await asyncio.gather(tasks[1], tasks[2])
            assert other_a is not None and other_a.id == "a"
            assert b is not None and b.id == "b"
            # and the connection serves the next batch
            assert [r.id if r else None for r in await asyncio.gather(store.get("b"), store.get("a"))] == ["b", "a"]


async def test_a_flushed_script_cache_is_reloaded_and_a_restarted_redis_costs_no_503() -> None:
    with own_redis() as redis:
        async with store_on(redis) as store:
            await store.create(record("a"))
            await store.get("a")
            client = Redis.from_url(redis.url)
            try:
                await client.script_flush()
            finally:
                await client.aclose()
            got = await store.get("a")
            assert got is not None and got.id == "a"
            redis.stop()  # the batcher's open connections are now dead
            redis.start()
            got = await store.get("a")  # replaced once on a fresh connection: no 503 for a restart
            assert got is not None and got.id == "a"


async def test_concurrent_calls_through_two_replicas_only_the_unknown_session_is_404() -> None:
    with own_redis() as redis:
        async with two_replicas(redis.url) as (app_a, _, app_b, _):
            sessions: list[str] = []
            for _ in range(3):
                async with open_client(app_a) as client:
                    sessions.append(await Wire(client).initialize(LEGACY))
            order = [sessions[0], "made-up-456", sessions[1], sessions[2], sessions[0]]

            async def call(session: str, request_id: int) -> Any:
                async with open_client(app_b) as client:
                    return await client.post("/mcp", content=call_body("where", request_id=request_id, token=None), headers=legacy_headers(session))

            responses = await asyncio.gather(*(call(s, i) for i, s in enumerate(order)))
            assert [r.status_code for r in responses] == [200, 404, 200, 200, 200]
            for i in (0, 2, 3, 4):
                assert json.loads(responses[i].text)["id"] == i


async def test_the_batch_is_packed_as_redis_py_packs_it() -> None:
    """KeyBatcher writes EVALSHA from parts encoded once: byte for byte redis-py's ``pack_command``
    (one key, several, a key that is not ASCII), with the pool's encoder."""
    link = RedisLink("redis://127.0.0.1:1/0", namespace="ap:", timeout=1.0)  # no I/O: nothing is sent
    store = RedisSessionStore(link, idle_seconds=60, max_sessions=1000)
    batcher = batcher_of(store)
    lane = batcher._lanes.get()  # pyright: ignore[reportPrivateUsage]
    conn = lane.pool.make_connection()
    for keys in (["ap:ses:a"], ["ap:ses:a", "ap:ses:b", "ap:ses:c"], ["ap:ses:é"]):
        expected = b"".join(conn.pack_command("EVALSHA", batcher.script.sha, len(keys) + 1, batcher.fixed_key, *keys, *batcher.argv))
        assert lane._packed(keys) == expected  # pyright: ignore[reportPrivateUsage]
    await link.aclose()


async def test_the_direct_reply_path_finds_redis_py_s_hiredis_reader() -> None:
    """The lone lookup writes into the connection's transport and reads into its hiredis reader
    (redis-py's private ``_writer``, ``_parser._stream`` / ``_reader`` / ``_read_size`` /
    ``_connected``): with the ``redis`` extra installed (hiredis) a connected lookup connection
    must qualify and have them, so a redis-py release that renamed them fails here instead of
    silently taking the slower path or failing lookups."""
    from fastapi_mcp_ctx._replicas import resp_io

    with own_redis() as redis:
        async with store_on(redis) as store:
            await store.create(record("direct"))
            got = await store.get("direct")  # the lookup connection is open now
            assert got is not None and got.id == "direct"
            lane = batcher_of(store)._lanes.get()  # pyright: ignore[reportPrivateUsage]
            conn = next(c for c in lane.idle if c.is_connected)
            assert resp_io.reads_with_hiredis(conn)
            parser = conn._parser  # pyright: ignore[reportPrivateUsage]
            for name in ("_stream", "_reader", "_read_size", "_connected"):
                assert hasattr(parser, name), name
            assert parser._connected  # pyright: ignore[reportPrivateUsage]
            for name in ("_writer", "_host_error"):
                assert hasattr(conn, name), name
