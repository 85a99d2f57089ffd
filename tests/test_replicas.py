"""Every session feature of both eras on two replicas sharing a real Redis (issue 7):
``MCP_SESSION_STORE_URL=redis://…``. Two FastAPI apps in one process, each its own
McpRouter and replica identity, driven over raw ASGI (streams observed while open).
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from conftest import LEGACY, Wire, asgi_exchange, open_client, rpc, sse_events
from notify_app import frames, get_stream, listening, wait_frames
from redis.asyncio import Redis
from replica_app import ASKED, ENDED, redis_url, two_replicas
from resume_wire import call_body, legacy_headers, post_call
from test_redis_stores import age

from fastapi_mcp_ctx._transport.event_ids import StreamKey, new_stream_id, parse_event_id
from fastapi_mcp_ctx._transport.notifications import tenant_scope
from fastapi_mcp_ctx._transport.subscriptions import SessionAddress
from fastapi_mcp_ctx.errors import StateUnavailableError

pytestmark = pytest.mark.redis


async def initialize(app: Any) -> str:
    async with open_client(app) as client:
        return await Wire(client).initialize(LEGACY)


async def call(app: Any, session: str, name: str, arguments: dict[str, Any] | None = None, request_id: Any = 7) -> Any:
    async with open_client(app) as client:
        response = await client.post("/mcp", content=call_body(name, arguments, request_id, None), headers=legacy_headers(session))
    return response


def result_text(response: Any) -> str:
    body = response.text
    message = json.loads(body) if response.headers["content-type"].startswith("application/json") else [
        json.loads(e["data"]) for e in sse_events(body) if e.get("data")
    ][-1]
    return message["result"]["content"][0]["text"]


def ids_of(exchange: Any) -> list[str]:
    return [e["id"] for e in sse_events(exchange.body.decode()) if e.get("data")]


async def note(router: Any, session: str, data: Any) -> bool:
    """``send_notification_to_session`` of a ``notifications/message`` carrying ``data``."""
    return await router.send_notification_to_session(session, "notifications/message", {"level": "info", "data": data}, tenant_id="default")


async def get_stream_with_one_message(app: Any, router: Any) -> tuple[str, list[str]]:
    """A new session whose GET stream, on ``app``, delivered message 1 and closed: (its id, the
    event ids seen)."""
    session = await initialize(app)
    async with get_stream(app, session) as stream:
        await anyio.sleep(0.1)
        assert await note(router, session, 1)
        await wait_frames(stream, 1, 5.0)
        return session, ids_of(stream)


async def test_a_session_made_on_a_serves_on_b_and_its_log_level_follows() -> None:
    async with two_replicas() as (app_a, _, app_b, _):
        session = await initialize(app_a)
        response = await call(app_b, session, "where")
        assert response.status_code == 200, response.text
        assert result_text(response) == "b"
        async with open_client(app_a) as client:
            level = await client.post(
                "/mcp", content=json.dumps(rpc("logging/setLevel", {"level": "error"}, 3)), headers=legacy_headers(session)
            )
            assert level.status_code == 200, level.text
        async with post_call(app_b, session, "noisy", token="t") as exchange:
            await exchange.wait_for(lambda ex: ex.finished.is_set(), 5.0)
        assert not [m for m in frames(exchange) if m.get("method") == "notifications/message"]  # "busy" is info < error


async def test_delete_on_a_ends_the_session_on_b_and_cancels_its_call_there() -> None:
    async with two_replicas() as (app_a, _, app_b, _):
        session = await initialize(app_a)
        ENDED.clear()
        async with post_call(app_b, session, "slow", {"steps": 50, "delay": 0.1}) as running:
            await running.wait_for(lambda ex: len(frames(ex)) >= 1, 5.0)
            async with open_client(app_a) as client:
                deleted = await client.delete("/mcp", headers=legacy_headers(session))
            assert deleted.status_code == 200
            with anyio.fail_after(3.0):
                while not ENDED:
                    await anyio.sleep(0.05)
            assert ENDED == [("b", "cancelled")]  # the call on b was cancelled, not only its stream
        assert len([m for m in frames(running) if m.get("method") == "notifications/progress"]) < 50
        gone = await call(app_b, session, "where")
        assert gone.status_code == 404


async def test_a_change_on_a_reaches_the_get_stream_held_by_b_once() -> None:
    async with two_replicas() as (app_a, router_a, app_b, _):
        session = await initialize(app_a)
        async with get_stream(app_b, session) as stream:
            await anyio.sleep(0.2)
            await router_a.notify_tools_list_changed()
            got = await wait_frames(stream, 1, 5.0)
            await anyio.sleep(0.3)
            assert [m["method"] for m in frames(stream)] == ["notifications/tools/list_changed"]
            assert got[0]["method"] == "notifications/tools/list_changed"
            assert await router_a.active_sessions(tenant_id="default") == [session]
            assert await router_a.send_notification_to_session(session, "notifications/message", {"level": "info", "data": "hi"}, tenant_id="default")
            await wait_frames(stream, 2, 5.0)
            assert not await router_a.send_notification_to_session(session, "notifications/message", {"level": "info", "data": "x"}, tenant_id="other")


async def test_a_server_to_client_ping_from_a_call_on_a_is_answered_through_b() -> None:
    async with two_replicas() as (app_a, _, app_b, _):
        ASKED.clear()
        session = await initialize(app_a)
        async with post_call(app_a, session, "ask", {"method": "ping"}) as running:
            requests = await wait_frames(running, 1, 5.0)
            ping = next(m for m in requests if m.get("method") == "ping")
            assert str(ping["id"]).startswith("a:")
            async with open_client(app_b) as client:
                answer = await client.post(
                    "/mcp", content=json.dumps({"jsonrpc": "2.0", "id": ping["id"], "result": {}}), headers=legacy_headers(session)
                )
                assert answer.status_code == 202
                again = await client.post(  # a duplicate resolves nothing, and is still accepted
                    "/mcp", content=json.dumps({"jsonrpc": "2.0", "id": ping["id"], "result": {}}), headers=legacy_headers(session)
                )
                assert again.status_code == 202
            await running.wait_for(lambda ex: ex.finished.is_set(), 5.0)
        final = frames(running)[-1]
        assert final["result"]["structuredContent"] == {"answer": {}, "asked_from": "a"}
        assert ASKED == [("a", {})]  # ran exactly once


async def test_an_answer_posted_in_another_session_does_not_resolve_the_wait() -> None:
    async with two_replicas() as (app_a, _, app_b, _):
        session, other = await initialize(app_a), await initialize(app_b)
        async with post_call(app_a, session, "ask", {"method": "ping"}) as running:
            ping = next(m for m in await wait_frames(running, 1, 5.0) if m.get("method") == "ping")
            async with open_client(app_b) as client:
                await client.post("/mcp", content=json.dumps({"jsonrpc": "2.0", "id": ping["id"], "result": {}}), headers=legacy_headers(other))
            await anyio.sleep(0.3)
            assert not running.finished.is_set()
            async with open_client(app_b) as client:
                await client.post("/mcp", content=json.dumps({"jsonrpc": "2.0", "id": ping["id"], "result": {}}), headers=legacy_headers(session))
            await running.wait_for(lambda ex: ex.finished.is_set(), 5.0)


async def test_cancelled_on_b_cancels_the_call_running_on_a() -> None:
    async with two_replicas() as (app_a, _, app_b, _):
        session = await initialize(app_a)
        ENDED.clear()
        async with post_call(app_a, session, "slow", {"steps": 50, "delay": 0.1}, request_id="c1") as running:
            await running.wait_for(lambda ex: len(frames(ex)) >= 1, 5.0)
            async with open_client(app_b) as client:
                note = rpc("notifications/cancelled", {"requestId": "c1", "reason": "user"}, None)
                sent = await client.post("/mcp", content=json.dumps(note), headers=legacy_headers(session))
                assert sent.status_code == 202
            await running.wait_for(lambda ex: ex.finished.is_set(), 5.0)
        assert len([m for m in frames(running) if m.get("method") == "notifications/progress"]) < 50
        assert ENDED == [("a", "cancelled")]


async def test_last_event_id_on_b_replays_exactly_the_missed_events_of_a_get_stream_written_on_a() -> None:
    async with two_replicas() as (app_a, router_a, app_b, router_b):
        session = await initialize(app_a)
        async with get_stream(app_a, session) as stream:
            await anyio.sleep(0.1)
            for n in (1, 2):
                await router_a.send_notification_to_session(session, "notifications/message", {"level": "info", "data": n}, tenant_id="default")
            await wait_frames(stream, 2, 5.0)
            seen = ids_of(stream)
        for n in (3, 4):  # missed: no connection is attached; replica a still stores them
            assert await router_a.send_notification_to_session(session, "notifications/message", {"level": "info", "data": n}, tenant_id="default")
        await anyio.sleep(0.3)
        async with get_stream(app_b, session, **{"last-event-id": seen[0]}) as resumed:
            await wait_frames(resumed, 3, 5.0)
            assert [m["params"]["data"] for m in frames(resumed)] == [2, 3, 4]
            with anyio.fail_after(5.0):  # b now holds the session's GET stream; a's retires
                while not router_b.streams.get_stream_attached(session) or router_a.streams.get_stream_attached(session):
                    await anyio.sleep(0.05)
                while session in router_a.streams._gets:  # pyright: ignore[reportPrivateUsage]
                    await anyio.sleep(0.05)
            assert await router_a.send_notification_to_session(session, "notifications/message", {"level": "info", "data": 5}, tenant_id="default")
            await wait_frames(resumed, 4, 5.0)
            await anyio.sleep(0.3)
            assert [m["params"]["data"] for m in frames(resumed)] == [2, 3, 4, 5]  # none twice


async def test_a_call_running_on_a_is_resumed_on_b_with_its_remaining_progress_and_result() -> None:
    async with two_replicas() as (app_a, _, app_b, _):
        session = await initialize(app_a)
        async with post_call(app_a, session, "slow", {"steps": 6, "delay": 0.15}) as running:
            await running.wait_for(lambda ex: len(frames(ex)) >= 2, 5.0)
            last = ids_of(running)[-1]
            before = frames(running)
        async with asgi_exchange(
            app_b, "GET", headers={"accept": "text/event-stream", "mcp-session-id": session, "mcp-protocol-version": LEGACY, "last-event-id": last}
        ) as resumed:
            assert resumed.status == 200, resumed.body
            await resumed.wait_for(lambda ex: ex.finished.is_set(), 5.0)
        after = frames(resumed)
        steps = [m["params"]["progress"] for m in before + after if m.get("method") == "notifications/progress"]
        assert steps == [1, 2, 3, 4, 5, 6]
        assert after[-1]["result"]["content"][0]["text"] == "a done"


async def test_a_listen_stream_on_b_gets_a_change_made_on_a_tagged_and_filtered() -> None:
    async with two_replicas() as (_app_a, router_a, app_b, _):
        async with listening(app_b, "l-1", {"toolsListChanged": True}) as listen:
            await router_a.notify_prompts_list_changed()  # not asked for
            await router_a.notify_tools_list_changed()
            got = await wait_frames(listen, 2, 5.0)
            await anyio.sleep(0.3)
        assert [f.get("method") for f in frames(listen)[:2]] == [None, "notifications/tools/list_changed"] or [
            f.get("method") for f in got[1:2]
        ] == ["notifications/tools/list_changed"]
        tagged = [f for f in frames(listen) if f.get("method") == "notifications/tools/list_changed"]
        assert len(tagged) == 1
        assert tagged[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "l-1"
        assert not [f for f in frames(listen) if f.get("method") == "notifications/prompts/list_changed"]


async def test_one_get_stream_per_session_across_replicas_and_the_lease_expires_after_its_holder() -> None:
    # a 3 s lease renewed every second: 2 s of margin for a renewal a loaded machine delays
    async with two_replicas(session_lease_seconds=3.0) as (app_a, router_a, app_b, _):
        session = await initialize(app_a)
        headers = {"accept": "text/event-stream", "mcp-session-id": session, "mcp-protocol-version": LEGACY}
        async with get_stream(app_a, session):
            await anyio.sleep(3.5)  # renewed past its first lifetime
            async with asgi_exchange(app_b, "GET", headers=headers) as second:
                assert second.status == 409
        async with get_stream(app_b, session):  # released when a's connection ended
            pass
        # A holder that dies (kill -9) leaves its lease behind: refused until it expires.
        leases = router_a.streams.leases
        assert await leases.acquire(session, "dead-replica")
        async with asgi_exchange(app_b, "GET", headers=headers) as refused:
            assert refused.status == 409
        await age(router_a.sessions, session, 3.1)  # its 3 s pass (the test's clock, not a sleep)
        async with get_stream(app_b, session) as reopened:
            assert reopened.status == 200


async def test_an_open_get_stream_on_a_keeps_the_session_alive_for_b() -> None:
    # idle 4 s, the lease (renewed every 2/3 s, each renewal restarting the idle time) 2 s: 3 s of margin
    async with two_replicas(session_idle_seconds=4.0, session_lease_seconds=2.0) as (app_a, _, app_b, router_b):
        session = await initialize(app_a)
        async with get_stream(app_a, session):
            await anyio.sleep(5.0)  # past the idle time, with only the GET stream open
            assert (await call(app_b, session, "where")).status_code == 200
        await age(router_b.sessions, session, 100)  # the stream is gone: its idle time passes (the test's clock)
        assert (await call(app_b, session, "where")).status_code == 404


async def test_max_sessions_and_the_owner_quota_count_across_replicas() -> None:
    async with two_replicas(max_sessions=2) as (app_a, _, app_b, _):
        await initialize(app_a)
        await initialize(app_b)
        async with open_client(app_b) as client:
            params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}
            full = await Wire(client).post(rpc("initialize", params, 0))
        assert full.status_code == 503
        assert full.json()["error"]["data"]["reason"] == "too_many_sessions"


async def test_b16_an_event_id_of_another_session_finds_nothing_on_a_shared_store() -> None:
    async with two_replicas() as (app_a, router_a, app_b, _):
        mine, theirs = await initialize(app_a), await initialize(app_b)
        async with get_stream(app_b, theirs) as stream:
            await anyio.sleep(0.1)
            await router_a.send_notification_to_session(theirs, "notifications/message", {"level": "info", "data": "secret"}, tenant_id="default")
            await wait_frames(stream, 1, 5.0)
            foreign = ids_of(stream)[0]
        headers = {"accept": "text/event-stream", "mcp-session-id": mine, "mcp-protocol-version": LEGACY, "last-event-id": foreign}
        for app in (app_a, app_b):
            async with asgi_exchange(app, "GET", headers=headers) as probe:
                assert probe.status == 400
                assert b"secret" not in probe.body


async def test_ready_reports_every_store_in_use() -> None:
    async with two_replicas() as (_, router_a, _, _):
        report = await router_a.ready()
        assert report == {"ready": True, "checks": {"sessions": "ok", "events": "ok", "bus": "ok", "state": "in-process"}}


async def test_the_relay_subscribes_again_under_a_new_identity_after_a_fork() -> None:
    async with two_replicas() as (app_a, router_a, _, _):
        await initialize(app_a)
        assert router_a.relay.started
        router_a.relay.identity = lambda: "a-forked"  # what replica_id() returns in a forked child
        assert not router_a.relay.started
        await initialize(app_a)  # the next request subscribes replica.a-forked
        assert router_a.relay.started
        assert "replica.a-forked" in await router_a.bus.channels("replica.")
        with anyio.fail_after(3.0):  # the old channel is released in the background
            while "replica.a" in await router_a.bus.channels("replica."):
                await anyio.sleep(0.05)


async def test_a_2025_resource_subscription_made_on_a_gets_the_update_published_on_b() -> None:
    async with two_replicas() as (app_a, router_a, app_b, router_b):
        session, other = await initialize(app_a), await initialize(app_b)
        for app, sid in ((app_a, session), (app_b, other)):
            assert (await call(app, sid, "watch", {"uri": "note://1"})).status_code == 200
        await router_b.subscriptions.unsubscribe(SessionAddress("default", other), "note://1")
        async with get_stream(app_b, session) as stream, get_stream(app_a, other) as quiet:
            await anyio.sleep(0.1)
            await router_b.notify_resource_updated("note://1", tenant_id="default")
            await router_b.notify_resource_updated("note://1", tenant_id="another-tenant")  # not theirs
            got = await wait_frames(stream, 1, 5.0)
            await anyio.sleep(0.3)
        assert [(m["method"], m["params"]["uri"]) for m in got] == [("notifications/resources/updated", "note://1")]
        assert len(frames(stream)) == 1 and frames(quiet) == []
        assert await router_a.subscriptions.uris(session) == ["note://1"]
        async with open_client(app_b) as client:
            await client.delete("/mcp", headers=legacy_headers(session))
        assert await router_a.subscriptions.uris(session) == []  # dropped with the session


async def test_a_notification_sent_while_a_takeover_replays_is_delivered_once() -> None:
    """The GET stream a takeover continues on is opened before the 200 and the replay: a
    notification sent at once (before the new stream is attached) waits in its log."""
    async with two_replicas() as (app_a, router_a, app_b, _):
        session, seen = await get_stream_with_one_message(app_a, router_a)
        assert await router_a.send_notification_to_session(session, "notifications/message", {"level": "info", "data": 2}, tenant_id="default")
        async with get_stream(app_b, session, **{"last-event-id": seen[0]}) as resumed:
            assert await router_a.send_notification_to_session(session, "notifications/message", {"level": "info", "data": 3}, tenant_id="default")
            await wait_frames(resumed, 2, 5.0)
            await anyio.sleep(0.3)
            assert [m["params"]["data"] for m in frames(resumed)] == [2, 3]  # none lost, none twice


async def test_a_notification_sent_while_the_old_holder_still_listens_lands_on_the_stream_that_took_over() -> None:
    """A takeover ends the old GET stream in the store before its holder hears of it (and before
    the new holder's bus subscription is live): a notification sent in that window is appended
    to the new stream, never handed to the old holder, whose ended stream would drop it after
    the sender was told True (the failover run lost two pokes so)."""
    async with two_replicas() as (app_a, router_a, _, router_b):
        session = await initialize(app_a)
        async with get_stream(app_a, session) as stream:
            await anyio.sleep(0.1)
            assert await note(router_a, session, 1)
            await wait_frames(stream, 1, 5.0)
            old = StreamKey(session, parse_event_id(ids_of(stream)[0])[0])
            taken = StreamKey(session, new_stream_id())
            await router_b.event_store.open(taken, get_stream=tenant_scope("default"), follows=old)  # the takeover's store step alone
            assert await note(router_a, session, 2)
            assert await note(router_b, session, 3)
            page = await router_b.event_store.read(taken, 0)
            assert [json.loads(e.data)["params"]["data"] for e in page.events if e.data] == [2, 3]
            assert not page.ended
            await router_b.event_store.end(taken)  # the takeover failed after its store step (its 503 gives the stream up)
            for router in (router_a, router_b):  # no stream runs on: False, never True from a's stale subscription
                assert not await note(router, session, 4)


async def test_a_takeover_that_fails_half_way_leaves_the_session_its_stream() -> None:
    """A resume on b whose opening fails after the store step (b's bus resubscribing after a
    failover: 503) changes nothing: what is sent to the session still goes to a's stream (True),
    and the next resume replays it. (Made the session's stream first, the new one stranded the
    messages sent to it in a stream no client was given, or refused them.)"""
    async with two_replicas() as (app_a, router_a, app_b, router_b):
        session, seen = await get_stream_with_one_message(app_a, router_a)
        real = router_b.notifier.attach_get_stream

        async def bus_down(*args: Any, **kwargs: Any) -> Any:
            raise StateUnavailableError("The replica bus (redis) is unavailable, retry later")

        router_b.notifier.attach_get_stream = bus_down
        async with open_client(app_b) as client:
            refused = await client.get("/mcp", headers={**legacy_headers(session), "accept": "text/event-stream", "last-event-id": seen[0]})
            assert refused.status_code == 503, refused.text
        router_b.notifier.attach_get_stream = real
        assert await note(router_b, session, 2)
        async with get_stream(app_b, session, **{"last-event-id": seen[0]}) as resumed:
            assert await note(router_a, session, 3)
            await wait_frames(resumed, 2, 5.0)
            await anyio.sleep(0.3)
            assert [m["params"]["data"] for m in frames(resumed)] == [2, 3]


async def test_list_changes_sent_at_once_each_reach_the_get_stream_once() -> None:
    """Concurrent list changes reach the bus in any order: the stream takes them from the
    broadcast log in order, none dropped for arriving after a later one."""
    async with two_replicas() as (app_a, router_a, _, router_b):
        session = await initialize(app_a)
        async with get_stream(app_a, session) as stream:
            await anyio.sleep(0.2)
            async with anyio.create_task_group() as tg:
                for router in (router_a, router_b) * 5:
                    tg.start_soon(router.notify_tools_list_changed)
            await wait_frames(stream, 10, 5.0)
            await anyio.sleep(0.3)
            assert [m["method"] for m in frames(stream)] == ["notifications/tools/list_changed"] * 10


@pytest.mark.parametrize("step", ["catch_up", "note_get_stream", "announce"])
async def test_a_takeover_failing_after_its_stream_became_the_sessions_keeps_it(step: str) -> None:
    """A store or bus failure after the promotion keeps the new stream (200): ending it would
    strand what was sent to the session since (True, then never delivered)."""
    async with two_replicas() as (app_a, router_a, app_b, router_b):
        session, seen = await get_stream_with_one_message(app_a, router_a)
        owner: Any = {"catch_up": router_b.event_store, "note_get_stream": router_b.streams.leases, "announce": router_b.streams}[step]
        real = getattr(owner, step)
        sent: list[int] = []

        async def failing(*args: Any, **kwargs: Any) -> Any:
            setattr(owner, step, real)
            if await note(router_a, session, 2):
                sent.append(2)
            raise StateUnavailableError("The session store (redis) is unavailable, retry later")

        setattr(owner, step, failing)
        async with get_stream(app_b, session, **{"last-event-id": seen[0]}) as resumed:
            assert await note(router_a, session, 3)
            await wait_frames(resumed, 2, 5.0)
            await anyio.sleep(0.3)
            assert sent == [2] and [m["params"]["data"] for m in frames(resumed)] == [2, 3]


async def test_a_delete_during_a_takeovers_opening_leaves_no_stream_and_no_keys() -> None:
    """The session ends (DELETE on a) while b opens the stream a resume takes over: the resume
    is refused, the session's stream is not made again in the store (no keys left), and a
    notification to the ended session is False on both replicas."""
    async with two_replicas() as (app_a, router_a, app_b, router_b):
        session, seen = await get_stream_with_one_message(app_a, router_a)
        store = router_b.event_store
        real = store.open

        async def delete_first(*args: Any, **kwargs: Any) -> Any:
            store.open = real
            async with open_client(app_a) as client:
                assert (await client.delete("/mcp", headers=legacy_headers(session))).status_code == 200
            with anyio.fail_after(5.0):
                while router_b.streams.get_stream_attached(session) or session in router_b.streams._gets:  # pyright: ignore[reportPrivateUsage]
                    await anyio.sleep(0.02)
            return await real(*args, **kwargs)

        store.open = delete_first
        async with open_client(app_b) as client:
            refused = await client.get("/mcp", headers={**legacy_headers(session), "accept": "text/event-stream", "last-event-id": seen[0]})
        assert refused.status_code in (404, 409), refused.text
        assert not await note(router_a, session, 2) and not await note(router_b, session, 2)
        assert session not in router_b.notifier._gets  # pyright: ignore[reportPrivateUsage] - no bus subscription left
        redis = Redis.from_url(redis_url())
        try:
            left = {key.decode(): await redis.pttl(key) async for key in redis.scan_iter(match=f"*{session}*", count=1000)}
            # only the event logs the session's drop ended (its readers wake on them), expiring in seconds
            assert all(":ev:" in key and 0 < ttl <= 5000 for key, ttl in left.items()), left
        finally:
            await redis.aclose()
