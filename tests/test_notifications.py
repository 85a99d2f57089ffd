"""Change notifications in the 2025 era (on each session's GET stream, one copy per session,
never on a POST stream), per-session resource subscriptions, notifications to one session,
the reachable sessions of a tenant, and delivery across replicas sharing a bus.

Spec 2025-11-25 ``basic/transports`` §Listening for Messages, §Multiple Connections;
``server/tools`` §List Changed Notification; ``server/resources`` §Subscriptions.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import Wire, guide_example, messages_of, open_client, result_of
from notify_app import SUB, build, frames, get_stream, listening, methods, tenant_auth, wait_frames

from fastapi_mcp_ctx._transport.bus import MemoryBus
from fastapi_mcp_ctx._transport.memory_sessions import MemorySessionStore
from fastapi_mcp_ctx._transport.subscriptions import MemoryResourceSubscriptions, SessionAddress


@pytest.fixture
def built() -> Any:
    return build()


@pytest.fixture
def app(built: Any) -> Any:
    return built[0]


def _structured(response: Any) -> Any:
    return result_of(response)["structuredContent"]


async def test_list_change_goes_once_on_each_session_get_stream_and_never_on_post(app: Any) -> None:
    async with open_client(app) as c1, open_client(app) as c2:
        a, b = Wire(c1), Wire(c2)
        sid_a, sid_b = await a.initialize(), await b.initialize()
        async with get_stream(app, sid_a) as stream_a, get_stream(app, sid_b) as stream_b:
            post = await a.call_tool("legacy", "change", {"kind": "tools"})
            await wait_frames(stream_a, 1)
            await wait_frames(stream_b, 1)
            await a.call_tool("legacy", "change", {"kind": "prompts"})
            await wait_frames(stream_a, 2)
            await wait_frames(stream_b, 2)
    assert [m.get("method") for m in messages_of(post)] == [None]  # only the result on the POST stream
    for stream in (stream_a, stream_b):
        assert frames(stream) == [
            {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
            {"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"},
        ]


async def test_list_change_from_outside_a_request_reaches_the_get_stream(built: Any) -> None:
    app, router = built
    async with open_client(app) as client:
        sid = await Wire(client).initialize()
        async with get_stream(app, sid) as stream:
            await router.notify_resources_list_changed()
            assert (await wait_frames(stream, 1))[0]["method"] == "notifications/resources/list_changed"


async def test_resource_updated_goes_only_to_sessions_subscribed_to_that_uri(built: Any) -> None:
    app, router = built
    async with open_client(app) as c1, open_client(app) as c2:
        a, b = Wire(c1), Wire(c2)
        sid_a, sid_b = await a.initialize(), await b.initialize()
        await a.call_tool("legacy", "watch", {"uri": "note://a/secret"})
        await b.call_tool("legacy", "watch", {"uri": "note://b"})
        assert await router.subscriptions.uris(sid_a) == ["note://a/secret"]
        async with get_stream(app, sid_a) as stream_a, get_stream(app, sid_b) as stream_b:
            await b.call_tool("legacy", "touch", {"uri": "note://a/secret"})
            await router.notify_resource_updated("note://b")
            await wait_frames(stream_a, 1)
            await wait_frames(stream_b, 1)
            await router.subscriptions.unsubscribe(SessionAddress("default", sid_a), "note://a/secret")
            await router.notify_resource_updated("note://a/secret")
            await router.notify_resources_list_changed()  # a marker: everything before it was delivered
            await wait_frames(stream_a, 2)
    assert frames(stream_a) == [
        {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "note://a/secret"}},
        {"jsonrpc": "2.0", "method": "notifications/resources/list_changed"},
    ]
    assert frames(stream_b)[0] == {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "note://b"}}
    assert methods(stream_b)[1:] in ([], ["notifications/resources/list_changed"])  # never note://a/secret


async def test_ending_a_session_drops_its_resource_subscriptions(built: Any) -> None:
    app, router = built
    async with open_client(app) as client:
        wire = Wire(client)
        sid = await wire.initialize()
        await wire.call_tool("legacy", "watch", {"uri": "note://x"})
        assert [a.session_id for a in await router.subscriptions.subscribers("note://x")] == [sid]
        assert (await client.delete("/mcp", headers={"mcp-session-id": sid})).status_code == 200
    assert await router.subscriptions.subscribers("note://x") == []
    assert await router.subscriptions.uris(sid) == []


async def test_expired_session_drops_its_resource_subscriptions() -> None:
    now = [1000.0]
    store = MemorySessionStore(idle_seconds=10, max_sessions=10, clock=lambda: now[0])
    app, router = build(session_store=store)
    async with open_client(app) as client:
        wire = Wire(client)
        sid = await wire.initialize()
        await wire.call_tool("legacy", "watch", {"uri": "note://x"})
        now[0] += 60
        assert (await wire.legacy("tools/list", check=False)).status_code == 404
    assert await router.subscriptions.uris(sid) == []


async def test_send_notification_to_session_true_only_when_its_stream_is_open() -> None:
    # Without resumability a GET stream ends with its connection; with it (the default) the
    # stream is kept for a resume: tests/test_resumable.py checks that side.
    app, router = build(http_resumability=False)
    async with open_client(app) as c1, open_client(app) as c2:
        a, b = Wire(c1), Wire(c2)
        sid_a, sid_b = await a.initialize(), await b.initialize()
        assert _structured(await b.call_tool("legacy", "poke", {"session_id": sid_a})) == {"result": False}  # no GET stream yet
        async with get_stream(app, sid_a) as stream_a:
            assert _structured(await b.call_tool("legacy", "poke", {"session_id": sid_a, "text": "hi"})) == {"result": True}
            assert await router.send_notification_to_session(sid_a, "custom/ping", {"n": 1}) is True
            assert await router.send_notification_to_session(sid_a, "custom/ping", tenant_id="other") is False
            assert await router.send_notification_to_session("0" * 32, "custom/ping") is False
            assert await router.send_notification_to_session(sid_b, "custom/ping") is False
            await wait_frames(stream_a, 2)
        assert await router.send_notification_to_session(sid_a, "custom/ping") is False  # closed again
    assert frames(stream_a) == [
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hi"}},
        {"jsonrpc": "2.0", "method": "custom/ping", "params": {"n": 1}},
    ]


async def test_send_notification_to_session_refuses_bad_arguments(built: Any) -> None:
    _, router = built
    with pytest.raises(TypeError, match="JSON-serializable"):
        await router.send_notification_to_session("s", "custom/x", {"when": object()})
    with pytest.raises(TypeError):
        await router.send_notification_to_session("s", 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await router.send_notification_to_session("s", "custom/x", [1])  # type: ignore[arg-type]


async def test_active_sessions_lists_the_callers_tenant_only() -> None:
    app, router = build(authenticate=tenant_auth)
    async with (
        open_client(app, headers={"x-tenant": "acme"}) as c1,
        open_client(app, headers={"x-tenant": "acme"}) as c2,
        open_client(app, headers={"x-tenant": "globex"}) as c3,
    ):
        a1, a2, g = Wire(c1), Wire(c2), Wire(c3)
        sid_a1, sid_a2, sid_g = await a1.initialize(), await a2.initialize(), await g.initialize()
        async with get_stream(app, sid_a1, **{"x-tenant": "acme"}), get_stream(app, sid_g, **{"x-tenant": "globex"}):
            assert _structured(await a2.call_tool("legacy", "sessions")) == {"result": [sid_a1]}  # a2 has no stream
            assert _structured(await g.call_tool("legacy", "sessions")) == {"result": [sid_g]}
            assert await router.active_sessions(tenant_id="acme") == [sid_a1]
            assert await router.active_sessions(tenant_id="initech") == []
            with pytest.raises(ValueError, match="pass tenant_id="):
                await router.active_sessions()
            # another tenant's session is unreachable even with its id
            assert _structured(await g.call_tool("legacy", "poke", {"session_id": sid_a1})) == {"result": False}
            assert await router.send_notification_to_session(sid_a1, "custom/x", tenant_id="acme") is True
        assert sid_a2 not in await router.active_sessions(tenant_id="acme")


async def test_active_sessions_without_authentication_is_the_default_tenant(built: Any) -> None:
    app, router = built
    async with open_client(app) as client:
        sid = await Wire(client).initialize()
        assert await router.active_sessions() == []
        async with get_stream(app, sid):
            assert await router.active_sessions() == [sid]
            assert await router.active_sessions(tenant_id="default") == [sid]


async def test_slow_get_stream_is_ended_not_grown() -> None:
    app, router = build(stream_buffer_size=2)
    async with open_client(app) as client:
        sid = await Wire(client).initialize()
        async with get_stream(app, sid) as stream:
            for _ in range(10):
                await router.notify_tools_list_changed()
            await stream.wait_for(lambda e: e.done.is_set())
            assert await router.active_sessions() == []
        async with get_stream(app, sid) as again:  # the client reconnects
            await router.notify_tools_list_changed()
            await wait_frames(again, 1)
    assert len(frames(stream)) <= 3


async def test_router_close_ends_get_streams(built: Any) -> None:
    app, router = built
    async with open_client(app) as client:
        sid = await Wire(client).initialize()
        async with get_stream(app, sid) as stream:
            await router.aclose()
            await stream.wait_for(lambda e: e.done.is_set())


async def test_replicas_sharing_a_bus_deliver_where_the_stream_is() -> None:
    """Two routers (two replicas) share the session store and the bus: a notification published
    on one reaches the streams the other holds, exactly once each."""
    bus, store, registry = MemoryBus(), MemorySessionStore(idle_seconds=60, max_sessions=100), MemoryResourceSubscriptions()
    app_a, router_a = build(bus=bus, session_store=store, subscription_registry=registry)
    app_b, router_b = build(bus=bus, session_store=store, subscription_registry=registry)
    async with open_client(app_a) as on_a, open_client(app_b) as on_b:
        sid = await Wire(on_a).initialize()
        wire_b = Wire(on_b)
        wire_b.session = sid  # the load balancer sends this session's next POST to replica B
        async with get_stream(app_a, sid) as stream, listening(app_a, "L", {"toolsListChanged": True}) as listen:
            await wire_b.call_tool("legacy", "change", {"kind": "tools"})
            assert await router_b.send_notification_to_session(sid, "custom/x") is True
            assert await router_b.active_sessions() == [sid]
            await wire_b.call_tool("legacy", "watch", {"uri": "note://r"})
            await router_b.notify_resource_updated("note://r")
            await wait_frames(stream, 3)
            await wait_frames(listen, 2)
            await router_a.aclose()  # replica A shuts down: its streams end, the listen one gracefully
            await listen.wait_for(lambda e: e.done.is_set())
            await stream.wait_for(lambda e: e.done.is_set())
            assert await router_b.active_sessions() == []
    assert methods(stream) == ["notifications/tools/list_changed", "custom/x", "notifications/resources/updated"]
    assert methods(listen) == ["notifications/subscriptions/acknowledged", "notifications/tools/list_changed", None]
    assert frames(listen)[1]["params"]["_meta"][SUB] == "L"


async def test_legacy_session_without_get_stream_loses_nothing_else(built: Any) -> None:
    """A list change while no GET stream is open is simply not delivered: no error, no POST copy."""
    app, _ = built
    async with open_client(app) as client:
        wire = Wire(client)
        await wire.initialize()
        response = await wire.call_tool("legacy", "change", {"kind": "tools"})
    assert [m.get("method") for m in messages_of(response)] == [None]
    assert response.headers["content-type"].startswith("application/json")


async def test_guide_change_notifications_example_runs_as_written() -> None:
    example = guide_example("## Change notifications")
    router = example["mcp_router"]
    app = example["app"]  # the example's own app (`uvicorn module:app`)
    async with open_client(app) as client:
        legacy = Wire(client)
        sid = await legacy.initialize()
        await router.subscriptions.subscribe(SessionAddress("default", sid), "plugin://x")
        async with get_stream(app, sid) as stream, listening(app, "L", {"toolsListChanged": True, "resourceSubscriptions": ["plugin://y"]}) as listen:
            result = await Wire(client).call_tool("modern", "install_plugin", {"name": "x"})
            assert result_of(result)["structuredContent"] == {"result": "x"}
            await example["nightly_job"]()
            await wait_frames(stream, 4)
            await wait_frames(listen, 3)
    assert methods(stream) == [
        "notifications/tools/list_changed",
        "notifications/resources/updated",
        "notifications/tools/list_changed",
        "notifications/message",
    ]
    assert methods(listen) == ["notifications/subscriptions/acknowledged", "notifications/tools/list_changed", "notifications/tools/list_changed"]
