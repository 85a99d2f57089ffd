"""Known faults of peers on streams, priming, resumption and shutdown, each held right here.

B15 (a resume replays other streams; an unknown id replays everything; the GET stream cannot
be resumed), B16 (events leak across sessions and tenants; an existence oracle), B49 (priming
for clients older than 2025-11-25, gated by comparing version strings), B34 (a stream cut by
shutdown without an answer; 500 instead of 503 while stopping).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from conftest import ACCEPT_BOTH, LEGACY, MODERN, Wire, asgi_exchange, assert_error, mcp_settings, modern_meta, open_client, rpc
from fastapi import Header
from resume_app import ENDED, GATES, build, fresh_gates
from resume_wire import answered, call_body, events, get_stream, id_of, ids, log_texts, messages, new_session, post_call

from fastapi_mcp_ctx import Principal
from fastapi_mcp_ctx._transport.events import parse_event_id


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    with fresh_gates():
        yield


@pytest.fixture
def app() -> Any:
    return build(mcp_settings())[0]


def _progress(message: dict[str, Any]) -> bool:
    return message.get("method") == "notifications/progress"


# -- B15 ---------------------------------------------------------------------------------------


async def test_b15_a_resume_replays_only_the_stream_that_was_disconnected(app: Any) -> None:
    GATES["a"] = anyio.Event()
    sid = await new_session(app)
    async with post_call(app, sid, "hold", {"gate": "a"}, request_id="A") as a:
        await a.wait_for(lambda e: "holding" in log_texts(e))
        a1 = id_of(a, lambda m: m.get("method") == "notifications/message")
        a.disconnect.set()
        async with post_call(app, sid, "steps", {"n": 2}, request_id="B") as b:  # another stream of the session
            await b.wait_for(answered("B"))
        GATES["a"].set()
        async with get_stream(app, sid, a1) as resumed:
            await resumed.wait_for(lambda e: e.done.is_set())
    replay = messages(resumed)
    assert [m.get("id") for m in replay if "id" in m] == ["A"]
    assert not any(_progress(m) for m in replay), "B's progress never shows up on A's resume"
    assert {parse_event_id(i)[0] for i in ids(resumed)} == {parse_event_id(a1)[0]}


async def test_b15_an_unknown_id_replays_nothing_and_keeps_the_session(app: Any) -> None:
    sid = await new_session(app)
    async with post_call(app, sid, "steps", {"n": 2}) as post:
        await post.wait_for(answered(1))
    async with open_client(app) as client:
        for raw in ("not-a-real-id", "0000000000000000:1", "_GET_stream"):
            response = await client.get(
                "/mcp", headers={"accept": "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": LEGACY, "last-event-id": raw}
            )
            assert_error(response, 400, -32600)  # not 404, which would end the session for the client
            assert b"progress" not in response.content
        wire = Wire(client)
        wire.session = sid
        assert (await wire.legacy("ping")).status_code == 200


async def test_b15_the_get_stream_itself_resumes_and_loses_nothing_later(app: Any) -> None:
    sid = await new_session(app)
    async with open_client(app) as client:
        wire = Wire(client)
        wire.session = sid

        async def poke(text: str) -> None:
            await wire.legacy("tools/call", {"name": "poke", "arguments": {"session_id": sid, "text": text}})

        async with get_stream(app, sid) as first:
            await poke("e1")
            await first.wait_for(lambda e: "e1" in log_texts(e))
        await poke("e2")
        async with get_stream(app, sid, ids(first)[-1]) as resumed:
            await resumed.wait_for(lambda e: "e2" in log_texts(e))
            await poke("e3")
            await resumed.wait_for(lambda e: "e3" in log_texts(e))
    assert log_texts(resumed) == ["e2", "e3"]


# -- B16 ---------------------------------------------------------------------------------------


def tenant_auth(x_tenant: str | None = Header(default=None), x_user: str | None = Header(default=None)) -> Principal | None:
    return Principal(subject=x_user or "anon", tenant_id=x_tenant) if x_tenant else None


async def test_b16_events_never_cross_sessions_or_tenants_and_leave_no_oracle() -> None:
    app, router = build(mcp_settings(), authenticate=tenant_auth)
    alice = {"x-tenant": "t1", "x-user": "alice"}
    bob = {"x-tenant": "t2", "x-user": "bob"}
    sid_a, sid_b = await new_session(app, headers=alice), await new_session(app, headers=bob)
    async with get_stream(app, sid_a, headers=alice) as a_stream:
        await router.send_notification_to_session(sid_a, "notifications/message", {"level": "info", "data": "e1"}, tenant_id="t1")
        await a_stream.wait_for(lambda e: "e1" in log_texts(e))
        e1 = ids(a_stream)[-1]
    async with get_stream(app, sid_b, headers=bob) as b_stream:
        await router.send_notification_to_session(sid_b, "notifications/message", {"level": "info", "data": "e2"}, tenant_id="t2")
        await b_stream.wait_for(lambda e: "e2" in log_texts(e))
        e2 = ids(b_stream)[-1]
    assert await router.send_notification_to_session(sid_b, "notifications/message", tenant_id="t1") is False
    async with get_stream(app, sid_a, e1, headers=alice) as resumed:
        await router.send_notification_to_session(sid_a, "notifications/message", {"level": "info", "data": "e3"}, tenant_id="t1")
        await resumed.wait_for(lambda e: "e3" in log_texts(e))
    assert log_texts(resumed) == ["e3"], "A's resume never carries B's notifications"
    base = {"accept": "text/event-stream", "mcp-protocol-version": LEGACY}
    async with open_client(app) as client:
        foreign = await client.get("/mcp", headers={**base, **alice, "mcp-session-id": sid_a, "last-event-id": e2})
        never = await client.get("/mcp", headers={**base, **alice, "mcp-session-id": sid_a, "last-event-id": "0123456789abcdef:1"})
        assert foreign.status_code == never.status_code == 400
        assert foreign.json()["error"] == never.json()["error"], "B's stream must be indistinguishable from none"
        hijack = await client.get("/mcp", headers={**base, **alice, "mcp-session-id": sid_b, "last-event-id": e2})
        assert hijack.status_code == 404, "B's session is not A's, whatever id A names"


# -- B49 ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26"])
async def test_b49_no_priming_no_retry_and_no_early_close_before_2025_11_25(app: Any, version: str) -> None:
    sid = await new_session(app, version)
    async with post_call(app, sid, "steps", {"n": 2}, version=version) as post:
        await post.wait_for(answered(1))
    assert all(e.get("data") for e in events(post)), "no empty-data event an old client would choke on"
    assert b"retry:" not in post.body
    assert ids(post), "events still carry ids (2025-03-26 clients can resume with Last-Event-ID)"
    async with post_call(app, sid, "poll", token=None, request_id=2, version=version) as polled:
        await polled.wait_for(answered(2))
    assert messages(polled)[-1]["result"]["structuredContent"] == {"closed": False}, "never closed before the answer"
    async with get_stream(app, sid, version=version) as standalone:
        await anyio.sleep(0.05)
    assert b"data: \r\n" not in standalone.body and b"retry:" not in standalone.body


@pytest.mark.parametrize("offered", ["2025-11-25", "draft", "latest", "2026-01-01", "9999-99-99"])
async def test_b49_the_gate_uses_the_negotiated_version_from_the_registry(app: Any, offered: str) -> None:
    async with open_client(app) as client:
        init = rpc("initialize", {"protocolVersion": offered, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}, 0)
        answer = await client.post("/mcp", json=init, headers={"accept": ACCEPT_BOTH})
    negotiated = answer.json()["result"]["protocolVersion"]
    assert negotiated == "2025-11-25"  # anything unknown gets the latest handshake version
    sid = answer.headers["mcp-session-id"]
    # The header does not decide: an absent one means the negotiated version (not the 2025-03-26
    # fallback), so the stream is primed; another version is refused in this session (400).
    headers = {"content-type": "application/json", "accept": ACCEPT_BOTH, "mcp-session-id": sid}
    async with asgi_exchange(app, "POST", headers=headers, body_chunks=[call_body("steps", {"n": 1}, 1)]) as post:
        await post.wait_for(answered(1))
    assert events(post)[0]["data"] == "" and "retry" in events(post)[0]
    async with open_client(app) as client:
        refused = await client.post("/mcp", content=call_body("steps", {"n": 1}, 2), headers={**headers, "mcp-protocol-version": "2025-03-26"})
    assert refused.status_code == 400 and refused.json()["error"]["data"]["reason"] == "protocol_version_mismatch"


async def test_b49_version_ordering_goes_through_the_registry() -> None:
    _, router = build(mcp_settings(sse_retry_ms=321))
    streams = router.streams
    assert streams.retry_ms("2025-11-25") == 321
    for version in ("2025-06-18", "2025-03-26", "2024-11-05", "2026-07-28", "2025-12-01", "zzz", "latest", ""):
        assert streams.retry_ms(version) is None, version


async def test_b49_a_2026_sse_answer_has_no_ids_and_no_priming(app: Any) -> None:
    async with open_client(app) as client:
        response = await Wire(client).modern("tools/call", {"name": "steps", "arguments": {"n": 2}}, meta=modern_meta(progressToken=1))
    assert response.headers["content-type"].startswith("text/event-stream")
    assert "id:" not in response.text and "retry:" not in response.text and "data: \r\n" not in response.text


# -- B34 ---------------------------------------------------------------------------------------


async def test_b34_shutdown_answers_a_streaming_call_instead_of_cutting_it() -> None:
    app, router = build(mcp_settings(shutdown_grace_seconds=0.3))
    GATES["s"] = anyio.Event()
    headers = {"content-type": "application/json", "accept": ACCEPT_BOTH, "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "hold"}
    body = rpc("tools/call", {"name": "hold", "arguments": {"gate": "s"}, "_meta": modern_meta(**{"io.modelcontextprotocol/logLevel": "info"})}, 3)
    async with asgi_exchange(app, "POST", headers=headers, body_chunks=[json.dumps(body).encode()]) as call:
        await call.wait_for(lambda e: "holding" in log_texts(e))  # the SSE answer has begun
        await router.shutdown()
        await call.wait_for(lambda e: e.done.is_set())
    final = messages(call)[-1]
    assert final["id"] == 3 and final["error"]["code"] == -32603 and final["error"]["data"]["reason"] == "server_shutting_down"
    assert ENDED == [("s", True, "server shutting down")]


async def test_b34_a_stopping_server_answers_503_not_500() -> None:
    app, router = build(mcp_settings())
    sid = await new_session(app)
    router.begin_shutdown()
    await anyio.sleep(0)
    async with open_client(app) as client:
        init = rpc("initialize", {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}, 0)
        assert_error(await client.post("/mcp", json=init, headers={"accept": ACCEPT_BOTH}), 503, -32603)
        stream = await client.get("/mcp", headers={"accept": "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": LEGACY})
        assert_error(stream, 503, -32603)
        assert stream.headers["retry-after"] == "1"
        wire = Wire(client)
        wire.session = sid
        assert (await wire.legacy("tools/call", {"name": "quick", "arguments": {}})).status_code == 200, "short calls are still served"
