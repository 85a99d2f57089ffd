"""Bounds and tenant rules found by the adversarial tester: what one session or one tenant may
hold (client metadata, sessions and listen streams per owner), tenant-scoped resource updates,
capabilities advertised only where delivered (B52), stateless GET/DELETE, and GET streams
versus session expiry."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from conftest import (
    LEGACY,
    SessionClock,
    Wire,
    asgi_exchange,
    assert_error,
    make_app,
    mcp_settings,
    modern_meta,
    open_client,
    result_of,
    rpc,
)
from notify_app import build, frames, get_stream, listen_body, listen_headers, listening, methods, tenant_auth, wait_frames

from fastapi_mcp_ctx import McpRouter
from fastapi_mcp_ctx._stdio.session import StdioSession
from fastapi_mcp_ctx._transport.memory_sessions import MemorySessionStore
from fastapi_mcp_ctx._transport.sessions import SessionRecord
from fastapi_mcp_ctx._wire.jsonrpc import JsonRpcRequest, parse_message
from fastapi_mcp_ctx.errors import InvalidParamsError

INIT = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


def _initialize(capabilities: dict[str, Any], client_info: dict[str, Any] | None = None) -> dict[str, Any]:
    return rpc("initialize", {**INIT, "capabilities": capabilities, "clientInfo": client_info or INIT["clientInfo"]}, 0)


# -- 1. client metadata a session keeps ------------------------------------------------------


async def test_initialize_with_oversized_capabilities_is_refused_and_keeps_nothing() -> None:
    app, router = build(max_client_metadata_bytes=4096)
    store = router.sessions
    assert isinstance(store, MemorySessionStore)
    async with open_client(app) as client:
        wire = Wire(client)
        fat = {"experimental": {f"k{i}": "v" * 100 for i in range(100)}}  # ~11 kB of JSON
        response = await wire.post(_initialize(fat))
        error = assert_error(response, 400, -32602, request_id=0)
        assert "4096" in error["message"] and "MCP_MAX_CLIENT_METADATA_BYTES" in error["message"]
        assert "mcp-session-id" not in response.headers
        assert_error(await wire.post(_initialize({}, {"name": "n" * 5000, "version": "1"})), 400, -32602)  # clientInfo counts too
        assert len(store._records) == 0  # pyright: ignore[reportPrivateUsage]
        await wire.initialize(capabilities={"experimental": {"k": "v" * 3000}})  # under the limit: served
    assert len(store._records) == 1  # pyright: ignore[reportPrivateUsage]


async def test_metadata_limit_applies_on_stdio_too() -> None:
    router = McpRouter(settings=mcp_settings(max_client_metadata_bytes=1024))
    session = StdioSession(router, app=make_app(router), path="/mcp", read_fd=-1, write_fd=-1)
    message = parse_message(_dumps(_initialize({"experimental": {"x": "y" * 2000}})))
    assert isinstance(message, JsonRpcRequest)
    with pytest.raises(InvalidParamsError, match="1024"):
        session._initialize(message)  # pyright: ignore[reportPrivateUsage]


def test_default_metadata_limit_is_64_kib() -> None:
    assert mcp_settings().max_client_metadata_bytes == 64 * 1024


# -- 2. per-owner quotas -----------------------------------------------------------------------


async def test_one_owner_cannot_take_every_session() -> None:
    app, _ = build(authenticate=tenant_auth, max_sessions=20)  # quota: max(1, 20 // 10) = 2
    async with open_client(app, headers={"x-tenant": "b"}) as cb, open_client(app, headers={"x-tenant": "a"}) as ca:
        b = Wire(cb)
        await b.initialize()
        await b.initialize()
        refused = await b.post(_initialize({}))
        error = assert_error(refused, 503, -32603, request_id=0)
        assert error["data"]["reason"] == "too_many_sessions"
        assert "user-b" in error["message"] and "quota of 2" in error["message"]
        assert refused.headers["retry-after"] == "5"
        await Wire(ca).initialize()  # another tenant still gets in


async def test_anonymous_sessions_only_meet_the_global_cap() -> None:
    app, _ = build(max_sessions=3)  # no authenticate: one anonymous owner, no per-owner quota
    async with open_client(app) as client:
        wire = Wire(client)
        for _ in range(3):
            await wire.initialize()
        error = assert_error(await wire.post(_initialize({})), 503, -32603)
        assert error["message"] == "Too many open sessions"


async def test_listen_streams_have_a_per_owner_quota() -> None:
    app, _ = build(authenticate=tenant_auth, listen_max_streams_per_owner=1)
    async with listening(app, "b1", {"toolsListChanged": True}, **{"x-tenant": "b"}):
        async with asgi_exchange(
            app, "POST", headers=listen_headers(**{"x-tenant": "b"}), body_chunks=[listen_body("b2", {"toolsListChanged": True})]
        ) as second:
            await second.finished.wait()
        assert second.status == 503
        assert "quota of 1" in json.loads(second.body)["error"]["message"]
        async with listening(app, "a1", {"toolsListChanged": True}, **{"x-tenant": "a"}) as other:
            assert other.status == 200


def test_quota_defaults_follow_the_global_caps() -> None:
    settings = mcp_settings(max_sessions=20, listen_max_streams=5)
    assert (settings.session_owner_quota, settings.listen_owner_quota) == (2, 1)
    assert mcp_settings(max_sessions_per_owner=7).session_owner_quota == 7


# -- 3. resource updates stay within their tenant ---------------------------------------------


async def test_resource_update_on_listen_reaches_the_same_tenant_only() -> None:
    app, router = build(authenticate=tenant_auth)
    uri = "note://alice/secret"
    async with (
        open_client(app, headers={"x-tenant": "t1"}) as alice,
        listening(app, "bob", {"toolsListChanged": True, "resourceSubscriptions": [uri]}, **{"x-tenant": "t2"}) as bob,
        listening(app, "al", {"resourceSubscriptions": [uri]}, **{"x-tenant": "t1"}) as own,
    ):
        await Wire(alice).call_tool("modern", "touch", {"uri": uri})
        await wait_frames(own, 2)
        await router.notify_tools_list_changed()  # marker: bob got everything published before it
        await wait_frames(bob, 2)
        await router.notify_resource_updated(uri, tenant_id="t2")  # explicitly bob's tenant: his
        await wait_frames(bob, 3)
    assert methods(own)[1] == "notifications/resources/updated"
    assert methods(bob) == [
        "notifications/subscriptions/acknowledged",
        "notifications/tools/list_changed",
        "notifications/resources/updated",
    ]
    assert all("fastapi_mcp_ctx.tenant" not in f for f in frames(bob) + frames(own))  # the bus-only key stays off the wire


async def test_resource_update_through_the_2025_registry_stays_in_its_tenant() -> None:
    app, router = build(authenticate=tenant_auth)
    uri = "note://alice/secret"
    async with open_client(app, headers={"x-tenant": "t1"}) as ca, open_client(app, headers={"x-tenant": "t2"}) as cb:
        alice, bob = Wire(ca), Wire(cb)
        sid_b = await bob.initialize()
        await alice.initialize()
        await bob.call_tool("legacy", "watch", {"uri": uri})
        async with get_stream(app, sid_b, **{"x-tenant": "t2"}) as stream_b:
            await alice.call_tool("legacy", "touch", {"uri": uri})
            await router.notify_tools_list_changed()
            await wait_frames(stream_b, 1)
    assert methods(stream_b) == ["notifications/tools/list_changed"]


async def test_outside_a_request_an_authenticating_router_needs_the_tenant() -> None:
    _, router = build(authenticate=tenant_auth)
    with pytest.raises(ValueError, match="tenant_id"):
        await router.notify_resource_updated("note://x")
    await router.notify_resource_updated("note://x", tenant_id="t1")


# -- 4. capabilities only where delivered (B52) -------------------------------------------------


def _stdio(router: McpRouter) -> StdioSession:
    return StdioSession(router, app=make_app(router), path="/mcp", read_fd=-1, write_fd=-1)


async def test_b52_stdio_advertises_what_its_connection_delivers() -> None:
    _, router = build(list_changed={"tools"}, resources_subscribe=True)
    message = parse_message(_dumps(_initialize({})))
    assert isinstance(message, JsonRpcRequest)
    caps = _stdio(router)._initialize(message)["result"]["capabilities"]  # pyright: ignore[reportPrivateUsage]
    assert caps == {"tools": {"listChanged": True}, "logging": {}}  # declared, and stdout carries it
    stdio = _stdio(router)
    body = _dumps(rpc("server/discover", {"_meta": modern_meta()}, 1))
    discover = parse_message(body)
    assert isinstance(discover, JsonRpcRequest)
    envelope = stdio._envelope(discover)  # pyright: ignore[reportPrivateUsage]
    reply = await router.dispatcher.serve(discover, envelope, stdio._request(body), None, http_headers=False)  # pyright: ignore[reportPrivateUsage]
    assert reply.message["result"]["capabilities"] == {"tools": {"listChanged": True}, "logging": {}}  # type: ignore[union-attr]
    _, undeclared = build(list_changed=(), resources_subscribe=False)
    caps = _stdio(undeclared)._initialize(message)["result"]["capabilities"]  # pyright: ignore[reportPrivateUsage]
    assert caps == {"tools": {"listChanged": False}, "logging": {}}  # nothing declared: nothing advertised


async def test_b52_stateless_2025_advertises_no_list_changed_but_2026_listen_does() -> None:
    app, _ = build(list_changed={"tools"}, session_mode="stateless")
    async with open_client(app) as client:
        wire = Wire(client)
        legacy = result_of(await wire.post(_initialize({})))["capabilities"]
        modern = result_of(await wire.modern("server/discover"))["capabilities"]
    assert legacy["tools"] == {"listChanged": False}  # no GET stream to carry it
    assert modern["tools"] == {"listChanged": True}  # subscriptions/listen carries it


# -- 5. stateless GET / DELETE --------------------------------------------------------------------


async def test_stateless_get_and_delete_answer_405_allow_post() -> None:
    app, _ = build(session_mode="stateless")
    async with open_client(app) as client:
        for method in ("GET", "DELETE"):
            response = await client.request(
                method, "/mcp", headers={"accept": "text/event-stream", "mcp-session-id": "x", "mcp-protocol-version": LEGACY}
            )
            assert response.status_code == 405, response.text
            assert response.headers["allow"] == "POST"


# -- 6. an open GET stream keeps its session alive; DELETE ends the stream -----------------------


def test_a_pinned_session_does_not_expire_and_its_idle_time_restarts_when_unpinned() -> None:
    now = [1000.0]
    pinned = {"s"}
    store = MemorySessionStore(idle_seconds=10, max_sessions=1, pinned=lambda sid: sid in pinned, clock=lambda: now[0])
    anyio.run(store.create, SessionRecord(id="s", protocol_version=LEGACY))
    now[0] += 100
    assert anyio.run(store.get, "s") is not None  # pinned: alive (and its idle time restarted)
    pinned.clear()
    now[0] += 5
    assert anyio.run(store.get, "s") is not None
    now[0] += 11
    assert anyio.run(store.get, "s") is None
    with pytest.raises(OverflowError):  # pinned sessions still count towards the cap
        pinned.add("t")
        anyio.run(store.create, SessionRecord(id="t", protocol_version=LEGACY))
        anyio.run(store.create, SessionRecord(id="u", protocol_version=LEGACY))


async def test_open_get_stream_keeps_the_session_and_delete_ends_the_stream() -> None:
    app, router = build(session_idle_seconds=60)
    clock = SessionClock(router)
    async with open_client(app) as client:
        wire = Wire(client)
        sid = await wire.initialize()
        async with get_stream(app, sid) as stream:
            clock.advance(120)  # twice the idle time, with only the GET stream open
            assert (await wire.legacy("ping")).status_code == 200
            assert await router.active_sessions(tenant_id="default") == [sid]
            assert (await client.delete("/mcp", headers={"mcp-session-id": sid, "mcp-protocol-version": LEGACY})).status_code == 200
            with anyio.fail_after(30):
                await stream.done.wait()  # DELETE ended the stream
        assert await router.active_sessions(tenant_id="default") == []
        sid = await wire.initialize()
        async with get_stream(app, sid):
            clock.advance(120)
        clock.advance(61)  # the stream is gone: the idle timer runs again
        assert (await wire.legacy("ping", check=False)).status_code == 404


def _dumps(value: Any) -> bytes:
    return json.dumps(value).encode()
