"""2026-07-28 ``subscriptions/listen`` on the wire (spec ``basic/patterns/subscriptions``;
checklist §4.5 step 7, §4.7, §4.8, Appendix A.2)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from conftest import Wire, asgi_exchange, assert_error, mcp_settings, messages_of, open_client, result_of
from notify_app import SUB, build, frames, listen_body, listen_headers, listening, methods, wait_frames

from fastapi_mcp_ctx._transport.listen import Served, parse_filter


@pytest.fixture
def built() -> Any:
    return build()


@pytest.fixture
def app(built: Any) -> Any:
    return built[0]


async def test_ack_is_first_and_carries_the_honoured_filter(app: Any) -> None:
    asked = {"toolsListChanged": True, "resourceSubscriptions": ["test://a", "test://a", "test://b"]}
    async with listening(app, "sub-1", asked) as ex:
        assert ex.status == 200
        assert ex.headers["content-type"].startswith("text/event-stream")
        assert ex.headers["x-accel-buffering"] == "no"
        first = frames(ex)[0]
    assert first == {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {"_meta": {SUB: "sub-1"}, "notifications": {"toolsListChanged": True, "resourceSubscriptions": ["test://a", "test://b"]}},
    }


@pytest.mark.parametrize("request_id", ["sub-1", 7, 0])
async def test_every_frame_is_tagged_with_the_listen_id_of_the_same_json_type(built: Any, request_id: Any) -> None:
    app, router = built
    async with listening(app, request_id, {"toolsListChanged": True, "resourceSubscriptions": ["test://a"]}) as ex:
        await router.notify_tools_list_changed()
        await router.notify_resource_updated("test://a")
        await wait_frames(ex, 3)
        await router.aclose()
        await ex.wait_for(lambda e: e.done.is_set())
    sent = frames(ex)
    assert [f.get("method") for f in sent] == [
        "notifications/subscriptions/acknowledged",
        "notifications/tools/list_changed",
        "notifications/resources/updated",
        None,
    ]
    for frame in sent[:-1]:
        tag = frame["params"]["_meta"][SUB]
        assert tag == request_id and type(tag) is type(request_id)
    assert sent[2]["params"]["uri"] == "test://a"
    final = sent[-1]
    assert final["id"] == request_id and type(final["id"]) is type(request_id)
    assert final["result"] == {"resultType": "complete", "_meta": {SUB: request_id}}


async def test_filter_is_honoured_prompts_only_stream_gets_no_tools_change(built: Any) -> None:
    app, router = built
    async with listening(app, 1, {"promptsListChanged": True}) as prompts, listening(app, 2, {"toolsListChanged": True}) as tools:
        await router.notify_tools_list_changed()
        await router.notify_resources_list_changed()
        await router.notify_prompts_list_changed()
        await wait_frames(prompts, 2)
        await wait_frames(tools, 2)
    assert methods(prompts) == ["notifications/subscriptions/acknowledged", "notifications/prompts/list_changed"]
    assert methods(tools) == ["notifications/subscriptions/acknowledged", "notifications/tools/list_changed"]


async def test_resource_updates_reach_only_streams_naming_the_uri(built: Any) -> None:
    app, router = built
    async with (
        listening(app, "a", {"resourceSubscriptions": ["note://a/secret"]}) as a,
        listening(app, "b", {"resourcesListChanged": True, "resourceSubscriptions": ["note://b"]}) as b,
    ):
        await router.notify_resource_updated("note://a/secret")
        await router.notify_resource_updated("note://b")
        await wait_frames(a, 2)
        await wait_frames(b, 2)
    assert [f["params"]["uri"] for f in frames(a)[1:]] == ["note://a/secret"]
    assert [f["params"]["uri"] for f in frames(b)[1:]] == ["note://b"]
    assert frames(a)[1]["params"]["_meta"][SUB] == "a"


async def test_listen_never_carries_progress_or_logs(app: Any) -> None:
    async with listening(app, "l", {"toolsListChanged": True, "promptsListChanged": True}) as ex, open_client(app) as client:
        wire = Wire(client)
        meta = {"progressToken": "p-1", "io.modelcontextprotocol/logLevel": "debug"}
        call = await wire.call_tool("modern", "noisy", meta=meta)
        await wait_frames(ex, 2)
    own = [m.get("method") for m in messages_of(call)]
    assert own == ["notifications/progress", "notifications/message", "notifications/progress", None]
    assert methods(ex) == ["notifications/subscriptions/acknowledged", "notifications/tools/list_changed"]


async def test_listen_without_event_stream_accept_is_406(client: Any) -> None:
    response = await client.post("/mcp", content=listen_body(5, {"toolsListChanged": True}), headers=listen_headers(accept="application/json"))
    assert_error(response, 406, -32600, request_id=5)


async def test_slow_client_buffer_overflow_ends_the_stream_with_an_error() -> None:
    app, router = build(stream_buffer_size=3)
    async with listening(app, "slow", {"toolsListChanged": True}) as ex:
        for _ in range(10):  # the memory bus delivers synchronously: no chance for the stream to drain
            await router.notify_tools_list_changed()
        await ex.wait_for(lambda e: e.done.is_set())
        assert len(router.notifier.hub) == 0
    final = frames(ex)[-1]
    assert final["id"] == "slow"
    assert final["error"]["code"] == -32603
    assert final["error"]["data"]["reason"] == "listen_buffer_overflow"
    assert len(frames(ex)) <= 1 + 3 + 1  # ack, at most a buffer's worth, the error


async def test_router_close_ends_listen_streams_gracefully_and_refuses_new_ones(built: Any) -> None:
    app, router = built
    async with listening(app, 1, {"toolsListChanged": True}) as one, listening(app, "two", {"promptsListChanged": True}) as two:
        await router.notify_tools_list_changed()
        await wait_frames(one, 2)
        await router.aclose()
        await one.wait_for(lambda e: e.done.is_set())
        await two.wait_for(lambda e: e.done.is_set())
    assert frames(one)[-1] == {"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete", "_meta": {SUB: 1}}}
    assert methods(one) == ["notifications/subscriptions/acknowledged", "notifications/tools/list_changed", None]
    assert frames(two)[-1]["result"] == {"resultType": "complete", "_meta": {SUB: "two"}}
    async with open_client(app) as client:
        late = await client.post("/mcp", content=listen_body(4, {"toolsListChanged": True}), headers=listen_headers())
    assert_error(late, 503, -32603, request_id=4)
    assert late.headers["retry-after"] == "1"


async def test_listen_streams_are_bounded_in_number() -> None:
    app, router = build(listen_max_streams=1)
    async with listening(app, 1, {"toolsListChanged": True}), open_client(app) as client:
        refused = await client.post("/mcp", content=listen_body(2, {"toolsListChanged": True}), headers=listen_headers())
        assert_error(refused, 503, -32603, request_id=2)
        assert refused.headers["retry-after"] == "5"
        assert "Too many open subscriptions/listen streams" in refused.json()["error"]["message"]
    with anyio.fail_after(30):
        while len(router.notifier.hub):
            await anyio.sleep(0.01)
    async with listening(app, 3, {"toolsListChanged": True}) as again:  # the slot came back on disconnect
        assert frames(again)[0]["params"]["_meta"][SUB] == 3


async def test_idle_listen_stream_gets_keepalive_comments() -> None:
    app, _ = build(keepalive_seconds=0.05)
    async with listening(app, 1, {"toolsListChanged": True}) as ex:
        await ex.wait_for(lambda e: b": keep-alive" in e.body)
    assert len(frames(ex)) == 1


async def test_client_disconnect_ends_the_stream_without_an_answer(built: Any) -> None:
    app, router = built
    async with asgi_exchange(app, "POST", headers=listen_headers(), body_chunks=[listen_body(1, {"toolsListChanged": True})]) as ex:
        await wait_frames(ex, 1)
        ex.disconnect.set()
        await ex.finished.wait()
    assert len(router.notifier.hub) == 0
    assert methods(ex) == ["notifications/subscriptions/acknowledged"]
    await router.notify_tools_list_changed()  # nobody left: nothing breaks


async def test_discover_advertises_what_the_application_declared_and_serves() -> None:
    """B52: ``resources`` (its ``listChanged`` and ``subscribe``) is advertised only once
    ``resources/list`` is served; the declared kinds are still honoured by a listen stream."""
    app, _ = build(list_changed={"tools", "resources"}, resources_subscribe=True)
    async with open_client(app) as client:
        wire = Wire(client)
        modern = result_of(await wire.modern("server/discover"))["capabilities"]
        for method in ("resources/list", "resources/read"):
            assert_error(await wire.modern(method, {"uri": "test://a"}), 404, -32601)
    assert modern == {"tools": {"listChanged": True}, "logging": {}}
    async with listening(app, "s", {"resourcesListChanged": True, "resourceSubscriptions": ["test://a"]}) as ex:
        await wait_frames(ex, 1)
    assert frames(ex)[0]["params"]["notifications"] == {"resourcesListChanged": True, "resourceSubscriptions": ["test://a"]}


async def test_initialize_advertises_subscribe_only_once_resources_subscribe_is_served() -> None:
    app, _ = build(list_changed={"prompts"}, resources_subscribe=True)
    async with open_client(app) as client:
        response = await client.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
            headers={"accept": "application/json, text/event-stream"},
        )
    caps = result_of(response)["capabilities"]
    assert caps["tools"] == {"listChanged": False}
    assert "prompts" not in caps  # prompts/list is not served by this release (B52)
    assert "resources" not in caps  # resources/subscribe is not a 2025 method of this server yet (B44)


def test_list_changed_declaration_is_validated() -> None:
    with pytest.raises(ValueError, match=r"list_changed=\{'tools'\}"):
        build(list_changed="tools")
    with pytest.raises(ValueError, match="unknown kind"):
        build(list_changed={"tool"})


async def test_publishing_an_undeclared_kind_says_what_to_declare() -> None:
    _, router = build(list_changed={"tools"}, resources_subscribe=False)
    with pytest.raises(RuntimeError, match=r"list_changed=\{'prompts'"):
        await router.notify_prompts_list_changed()
    with pytest.raises(RuntimeError, match=r"resources_subscribe=True"):
        await router.notify_resource_updated("x://y")
    with pytest.raises(TypeError):
        await build()[1].notify_resource_updated(3)  # type: ignore[arg-type]


def test_settings_bound_the_listen_machinery() -> None:
    settings = mcp_settings(listen_max_streams=7, stream_buffer_size=9, keepalive_seconds=1.5)
    assert (settings.listen_max_streams, settings.stream_buffer_size, settings.keepalive_seconds) == (7, 9, 1.5)
    with pytest.raises(ValueError):
        mcp_settings(stream_buffer_size=0)


def test_a_closed_router_serves_listen_again_on_the_next_server_run() -> None:
    """aclose() refuses listens for the rest of that run only (its event loop); the next run
    (a new lifespan, the next test's loop) opens streams again instead of 503 forever."""
    import asyncio

    app, router = build()

    async def run(request_id: int) -> list[str | None]:
        async with listening(app, request_id, {"toolsListChanged": True}) as ex:
            await wait_frames(ex, 1)
            await router.notify_tools_list_changed()
            await wait_frames(ex, 2)
            await router.aclose()
            await ex.wait_for(lambda e: e.done.is_set())
        return methods(ex)

    expected = ["notifications/subscriptions/acknowledged", "notifications/tools/list_changed", None]
    assert asyncio.run(run(1)) == expected
    assert asyncio.run(run(2)) == expected


def test_a_listen_filter_matches_escaped_forms_of_one_uri() -> None:
    """RFC 3986 §6.2.2: ``books/%31`` and ``books/1`` are one URI for the filter; ``books/01`` is not."""
    honoured = parse_filter({"notifications": {"resourceSubscriptions": ["lib://books/%31"]}}, Served(resources_subscribe=True))
    assert honoured.acknowledged()["resourceSubscriptions"] == ["lib://books/%31"]  # echoed as asked

    def update(uri: str) -> dict[str, Any]:
        return {"method": "notifications/resources/updated", "params": {"uri": uri}}

    assert honoured.admits(update("lib://books/1")) and honoured.admits(update("lib://books/%31"))
    assert not honoured.admits(update("lib://books/01")) and not honoured.admits(update("lib://books/2"))
