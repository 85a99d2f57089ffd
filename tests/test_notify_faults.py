"""Known faults of peers around change notifications and ``subscriptions/listen``:
B44 (resource updates to every session), B52 (listen held open for ever, capabilities
advertised unconditionally), B53 (ack not narrowed, missing filter accepted, unlisted types
passed). Each test is named after its case id in the project's catalogue of known faults.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import Wire, assert_error, messages_of, open_client, result_of
from notify_app import SUB, build, frames, get_stream, listen_body, listen_headers, listening, methods, tenant_auth, wait_frames

# -- B44: notifications/resources/updated only to the subscribers of that URI ----------------


async def test_b44_update_reaches_the_subscribed_session_only_2025() -> None:
    app, router = build(authenticate=tenant_auth)
    async with open_client(app, headers={"x-tenant": "a"}) as ca, open_client(app, headers={"x-tenant": "b"}) as cb:
        a, b = Wire(ca), Wire(cb)
        sid_a, sid_b = await a.initialize(), await b.initialize()
        async with get_stream(app, sid_a, **{"x-tenant": "a"}) as stream_a, get_stream(app, sid_b, **{"x-tenant": "b"}) as stream_b:
            await a.call_tool("legacy", "watch", {"uri": "note://a/secret"})
            await router.notify_resource_updated("note://a/secret", tenant_id="a")
            await wait_frames(stream_a, 1)
            await router.notify_tools_list_changed()  # marker: B's stream got everything before it
            await wait_frames(stream_b, 1)
            assert (await a.client.delete("/mcp", headers={"mcp-session-id": sid_a, "x-tenant": "a"})).status_code == 200
            assert await router.subscriptions.subscribers("note://a/secret") == []  # DELETE dropped them
    assert frames(stream_a)[0] == {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "note://a/secret"}}
    assert methods(stream_b) == ["notifications/tools/list_changed"]


async def test_b44_two_sessions_of_one_user_each_get_exactly_one_copy() -> None:
    app, router = build(authenticate=tenant_auth)
    async with open_client(app, headers={"x-tenant": "a"}) as c1, open_client(app, headers={"x-tenant": "a"}) as c2:
        one, two = Wire(c1), Wire(c2)
        sid1, sid2 = await one.initialize(), await two.initialize()
        await one.call_tool("legacy", "watch", {"uri": "note://shared"})
        await two.call_tool("legacy", "watch", {"uri": "note://shared"})
        await two.call_tool("legacy", "watch", {"uri": "note://shared"})  # subscribing twice is one subscription
        async with get_stream(app, sid1, **{"x-tenant": "a"}) as s1, get_stream(app, sid2, **{"x-tenant": "a"}) as s2:
            await router.notify_resource_updated("note://shared", tenant_id="a")
            await router.notify_tools_list_changed()
            await wait_frames(s1, 2)
            await wait_frames(s2, 2)
    for stream in (s1, s2):
        assert methods(stream) == ["notifications/resources/updated", "notifications/tools/list_changed"]


async def test_b44_update_reaches_only_the_listen_stream_naming_the_uri_2026() -> None:
    app, router = build()
    async with (
        listening(app, "A", {"resourceSubscriptions": ["note://a/secret"]}) as a,
        listening(app, "B", {"resourcesListChanged": True}) as b,
    ):
        await router.notify_resource_updated("note://a/secret")
        await router.notify_resources_list_changed()
        await wait_frames(a, 2)
        await wait_frames(b, 2)
    assert frames(a)[1] == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": "note://a/secret", "_meta": {SUB: "A"}},
    }
    assert methods(b) == ["notifications/subscriptions/acknowledged", "notifications/resources/list_changed"]


async def test_b44_subscribe_is_not_advertised_where_it_is_not_served() -> None:
    app, _ = build(list_changed=(), resources_subscribe=True)
    async with open_client(app) as client:
        wire = Wire(client)
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        initialize = await wire.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        wire.session = initialize.headers["mcp-session-id"]
        response = await wire.legacy("resources/subscribe", {"uri": "note://x"}, check=False)
        modern = result_of(await wire.modern("server/discover"))["capabilities"]
    assert "resources" not in result_of(initialize)["capabilities"]  # no resource is registered: resources/subscribe is not served
    assert messages_of(response)[0]["error"]["code"] == -32601
    assert "resources" not in modern  # no resource, no resources/list (B52): nothing under resources is advertised


# -- B52: listen on a server that publishes nothing; an empty honoured set; capacity ---------


async def test_b52_static_server_advertises_no_list_changed_and_refuses_listen() -> None:
    app, _ = build(list_changed=(), resources_subscribe=False)
    async with open_client(app) as client:
        discover = result_of(await Wire(client).modern("server/discover"))
        response = await client.post("/mcp", content=listen_body(9, {"toolsListChanged": True}), headers=listen_headers())
    assert discover["capabilities"] == {"tools": {"listChanged": False}, "logging": {}}
    error = assert_error(response, 404, -32601, request_id=9)
    assert error["data"]["method"] == "subscriptions/listen" and error["data"]["reason"] == "method_not_found"


async def test_b52_empty_honoured_filter_is_acknowledged_and_answered_at_once() -> None:
    app, router = build(list_changed={"tools"}, resources_subscribe=False)
    async with open_client(app) as client:
        asked = {"promptsListChanged": True, "resourceSubscriptions": ["x://y"]}
        response = await client.post("/mcp", content=listen_body("e", asked), headers=listen_headers())
    sent = messages_of(response)
    assert sent[0]["method"] == "notifications/subscriptions/acknowledged"
    assert sent[0]["params"]["notifications"] == {}
    assert sent[1:] == [{"jsonrpc": "2.0", "id": "e", "result": {"resultType": "complete", "_meta": {SUB: "e"}}}]
    assert len(router.notifier.hub) == 0


async def test_b52_capacity_refusal_is_503_not_an_in_band_200() -> None:
    app, _ = build(listen_max_streams=2)
    async with listening(app, 1, {"toolsListChanged": True}), listening(app, 2, {"toolsListChanged": True}), open_client(app) as client:
        refused = await client.post("/mcp", content=listen_body(3, {"toolsListChanged": True}), headers=listen_headers())
    assert_error(refused, 503, -32603, request_id=3)
    assert "retry-after" in refused.headers


async def test_b52_a_publishing_server_delivers_the_change_tagged() -> None:
    app, _ = build(list_changed={"tools"})
    async with listening(app, "t", {"toolsListChanged": True}) as stream, open_client(app) as client:
        await Wire(client).call_tool("modern", "change", {"kind": "tools"})
        sent = await wait_frames(stream, 2)
    assert sent[1] == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": {SUB: "t"}}}


# -- B53: narrowed ack, required typed filter, allow-list delivery ------------------------------


async def test_b53_ack_is_the_intersection_of_asked_and_served() -> None:
    app, _ = build(list_changed={"tools"}, resources_subscribe=False)
    asked = {"toolsListChanged": True, "promptsListChanged": True, "resourceSubscriptions": ["note://x"]}
    async with listening(app, 1, asked) as stream:
        ack = frames(stream)[0]
    assert ack["params"]["notifications"] == {"toolsListChanged": True}


@pytest.mark.parametrize(
    "notifications",
    [
        ...,
        None,
        [],
        {"toolsListChanged": "yes"},
        {"promptsListChanged": 1},
        {"resourceSubscriptions": "note://x"},
        {"resourceSubscriptions": ["note://x", 3]},
        {"resourceSubscriptions": [""]},
        {"resourceSubscriptions": [f"note://{i}" for i in range(1001)]},
    ],
)
async def test_b53_missing_or_malformed_filter_is_invalid_params(notifications: Any) -> None:
    app, _ = build()
    async with open_client(app) as client:
        response = await client.post("/mcp", content=listen_body(3, notifications), headers=listen_headers())
    assert_error(response, 400, -32602, request_id=3)


async def test_b53_unrequested_types_logs_and_progress_never_reach_a_listen_stream() -> None:
    app, router = build()
    async with listening(app, "p", {"promptsListChanged": True}) as stream, open_client(app) as client:
        meta = {"progressToken": 1, "io.modelcontextprotocol/logLevel": "debug"}
        await Wire(client).call_tool("modern", "noisy", meta=meta)  # progress, a log, a tools change
        await router.notify_resource_updated("note://x")
        await router.notify_resources_list_changed()
        await router.notify_prompts_list_changed()  # the only one asked for
        await wait_frames(stream, 2)
    assert methods(stream) == ["notifications/subscriptions/acknowledged", "notifications/prompts/list_changed"]


@pytest.mark.parametrize("request_id", ["sub-1", 1])
async def test_b53_each_frame_carries_the_listen_id_with_its_json_type(request_id: Any) -> None:
    app, router = build()
    async with listening(app, request_id, {"toolsListChanged": True}) as stream:
        await router.notify_tools_list_changed()
        sent = await wait_frames(stream, 2)
    for frame in sent:
        tag = frame["params"]["_meta"][SUB]
        assert tag == request_id and type(tag) is type(request_id)
