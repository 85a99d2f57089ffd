"""Resumable 2025 SSE streams on the wire: event ids, priming, storage, replay, live
continuation, ``ctx.close_sse_stream()``, the GET stream, retention, and the switch.

Spec 2025-11-25 ``basic/transports`` §Sending Messages item 6, §Listening for Messages,
§Resumability and Redelivery. Known faults B15, B16, B49 are in test_resume_faults.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from conftest import LEGACY, Wire, assert_error, guide_example, mcp_settings, modern_meta, open_client, rpc, sse_events
from resume_app import ENDED, GATES, build, fresh_gates
from resume_wire import (
    ID_SHAPE,
    answered,
    count,
    events,
    get_stream,
    id_of,
    ids,
    log_texts,
    messages,
    new_session,
    post_call,
)

from fastapi_mcp_ctx import McpSettings
from fastapi_mcp_ctx._transport.events import parse_event_id
from fastapi_mcp_ctx._transport.memory_events import MemoryEventStore


@pytest.fixture
def built() -> Any:
    return build(mcp_settings())


@pytest.fixture
def app(built: Any) -> Any:
    return built[0]


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    with fresh_gates():
        yield


def _progress(m: dict[str, Any]) -> bool:
    return m.get("method") == "notifications/progress"


# -- ids ---------------------------------------------------------------------------------------


async def test_event_ids_name_their_stream_and_are_unique_across_the_sessions_streams(app: Any) -> None:
    sid = await new_session(app)
    async with get_stream(app, sid) as standalone:
        async with post_call(app, sid, "steps", {"n": 3}, request_id=1) as a, post_call(app, sid, "steps", {"n": 2}, request_id=2) as b:
            await a.wait_for(answered(1))
            await b.wait_for(answered(2))
        async with open_client(app) as client:
            wire = Wire(client)
            wire.session = sid
            await wire.legacy("tools/call", {"name": "poke", "arguments": {"session_id": sid}})
        await standalone.wait_for(count(1))
    every = ids(a) + ids(b) + ids(standalone)
    assert all(re.fullmatch(ID_SHAPE, i) for i in every), every
    assert len(set(every)) == len(every), "event ids must be unique across all streams of the session"
    for exchange, expected in ((a, 5), (b, 4), (standalone, 2)):  # priming + messages
        parsed = [parse_event_id(i) for i in ids(exchange)]
        assert {stream for stream, _ in parsed} == {parsed[0][0]}, "one stream id per stream"
        assert [seq for _, seq in parsed] == list(range(1, expected + 1)), "a per-stream sequence from 1"
    assert len({parse_event_id(ids(x)[0])[0] for x in (a, b, standalone)}) == 3


# -- priming -------------------------------------------------------------------------------------


async def test_priming_event_opens_every_sse_stream_of_a_2025_11_25_client(built: Any) -> None:
    app, _ = build(mcp_settings(sse_retry_ms=750))
    sid = await new_session(app)
    async with post_call(app, sid, "steps", {"n": 1}) as post, get_stream(app, sid) as standalone:
        await post.wait_for(answered(1))
        await standalone.wait_for(lambda e: b"data:" in e.body)
    for exchange in (post, standalone):
        first = events(exchange)[0]
        assert first == {"id": first["id"], "retry": "750", "data": ""}, first
        assert exchange.body.startswith(f"id: {first['id']}\r\nretry: 750\r\ndata: \r\n\r\n".encode())


async def test_json_answer_has_no_priming_and_stores_nothing(built: Any) -> None:
    app, router = built
    sid = await new_session(app)
    async with post_call(app, sid, "quick", token=None) as post:
        await post.wait_for(lambda e: e.done.is_set())
    assert post.headers["content-type"] == "application/json"
    assert json.loads(post.body)["result"]["structuredContent"] == {"result": "quick"}
    assert len(router.event_store) == 0


async def test_client_accepting_only_sse_gets_priming_then_the_reply(app: Any) -> None:
    sid = await new_session(app)
    headers = {"content-type": "application/json", "accept": "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": LEGACY}
    async with open_client(app) as client:
        response = await client.post("/mcp", content=json.dumps(rpc("tools/list", {}, 4)).encode(), headers=headers)
    parsed = sse_events(response.text)
    assert response.headers["content-type"].startswith("text/event-stream")
    assert parsed[0]["data"] == "" and "retry" in parsed[0] and re.fullmatch(ID_SHAPE, parsed[0]["id"])
    assert json.loads(parsed[1]["data"])["id"] == 4 and re.fullmatch(ID_SHAPE, parsed[1]["id"])


async def test_modern_sse_has_no_ids_no_priming_and_cannot_be_closed(app: Any) -> None:
    async with open_client(app) as client:
        wire = Wire(client)
        steps = await wire.modern("tools/call", {"name": "steps", "arguments": {"n": 2}}, meta=modern_meta(progressToken="p"))
        polled = await wire.modern("tools/call", {"name": "poll", "arguments": {}})
    assert steps.headers["content-type"].startswith("text/event-stream")
    assert "id:" not in steps.text and "retry:" not in steps.text
    assert all(e.get("data") for e in sse_events(steps.text))
    assert polled.json()["result"]["structuredContent"] == {"closed": False}


# -- replay and live continuation ---------------------------------------------------------------


async def test_resume_replays_what_followed_on_that_stream_then_its_result(app: Any) -> None:
    GATES["a"] = anyio.Event()
    sid = await new_session(app)
    async with post_call(app, sid, "hold", {"gate": "a"}, request_id=7) as post:
        await post.wait_for(lambda e: "holding" in log_texts(e))
        holding_id = id_of(post, lambda m: m.get("method") == "notifications/message")
        post.disconnect.set()  # the connection breaks; the call goes on
        await anyio.sleep(0.05)
        GATES["a"].set()
        await anyio.sleep(0.05)
        async with get_stream(app, sid, holding_id) as resumed:
            await resumed.wait_for(lambda e: e.done.is_set())
    replayed = messages(resumed)
    assert log_texts(resumed) == ["released"]
    assert replayed[-1]["id"] == 7 and replayed[-1]["result"]["structuredContent"] == {"result": "released a"}
    stream, seq = parse_event_id(holding_id)
    assert [parse_event_id(i) for i in ids(resumed)] == [(stream, seq + 1), (stream, seq + 2)]
    assert ENDED == [("a", False, None)], "a 2025 disconnect must not cancel the call"


async def test_resume_continues_live_while_the_call_still_runs(app: Any) -> None:
    GATES["g"] = anyio.Event()
    sid = await new_session(app)
    async with post_call(app, sid, "poll", {"gate": "g"}, request_id=3) as post:
        await post.wait_for(lambda e: e.done.is_set())  # closed by ctx.close_sse_stream()
        assert events(post)[-1] == {"retry": "1000"}, "a retry hint before the connection closes"
        assert messages(post) == []
        async with get_stream(app, sid, ids(post)[-1]) as resumed:
            await resumed.wait_for(lambda e: "after close" in log_texts(e))
            assert not resumed.done.is_set()
            GATES["g"].set()  # the call goes on: its next messages arrive live
            await resumed.wait_for(lambda e: e.done.is_set())
    assert log_texts(resumed) == ["after close", "after gate"]
    assert messages(resumed)[-1]["result"]["structuredContent"] == {"closed": True}
    assert resumed.headers["content-type"] == "text/event-stream" and resumed.headers["mcp-session-id"] == sid


async def test_close_sse_stream_before_any_message_primes_then_closes(app: Any) -> None:
    sid = await new_session(app)
    async with post_call(app, sid, "poll", token=None, request_id=9) as post:
        await post.wait_for(lambda e: e.done.is_set())
    assert post.headers["content-type"] == "text/event-stream"
    first, last = events(post)[0], events(post)[-1]
    assert first["data"] == "" and "retry" in first and last == {"retry": "1000"}
    async with get_stream(app, sid, first["id"]) as resumed:
        await resumed.wait_for(lambda e: e.done.is_set())
    assert messages(resumed)[-1] == {"jsonrpc": "2.0", "id": 9, "result": messages(resumed)[-1]["result"]}
    assert messages(resumed)[-1]["result"]["structuredContent"] == {"closed": True}


async def test_a_resume_takes_the_stream_over_from_an_older_connection(app: Any) -> None:
    GATES["t"] = anyio.Event()
    sid = await new_session(app)
    async with post_call(app, sid, "hold", {"gate": "t"}, request_id=5) as post:
        await post.wait_for(lambda e: "holding" in log_texts(e))
        async with get_stream(app, sid, ids(post)[-1]) as resumed:
            await post.wait_for(lambda e: e.done.is_set())  # the older connection ends
            GATES["t"].set()
            await resumed.wait_for(answered(5))
    assert not any(m.get("id") == 5 for m in messages(post)), "each message goes to one connection only"


async def test_resume_after_the_call_ended_replays_to_the_end(app: Any) -> None:
    sid = await new_session(app)
    async with post_call(app, sid, "steps", {"n": 3}, request_id=2) as post:
        await post.wait_for(answered(2))
    async with get_stream(app, sid, ids(post)[0]) as resumed:  # from the priming event
        await resumed.wait_for(lambda e: e.done.is_set())
    assert messages(resumed) == messages(post)
    assert ids(resumed) == ids(post)[1:]


# -- refused ids ---------------------------------------------------------------------------------

GARBLED = [
    "",
    "abc",
    "zz:1",
    "0123456789abcdef",
    "0123456789abcdef:",
    "0123456789ABCDEF:1",
    "0123456789abcdef:01",
    "0123456789abcdef:-1",
    "0123456789abcdef:1:2",
    "0123456789abcdef:1 x",
    "0123456789abcdef::1",
    "0123456789abcdef:" + "9" * 40,
    "x" * 5000,
    "é",
]


@pytest.mark.parametrize("raw", GARBLED, ids=range(len(GARBLED)))
async def test_garbled_last_event_id_is_400_and_the_session_lives(app: Any, raw: str) -> None:
    sid = await new_session(app)
    headers = [
        (b"accept", b"text/event-stream"),
        (b"mcp-session-id", sid.encode()),
        (b"mcp-protocol-version", LEGACY.encode()),
        (b"last-event-id", raw.encode()),
    ]
    async with open_client(app) as client:
        assert_error(await client.get("/mcp", headers=headers), 400, -32600)
        wire = Wire(client)
        wire.session = sid
        assert (await wire.legacy("ping")).status_code == 200


async def test_unknown_foreign_and_future_ids_are_refused_alike(app: Any) -> None:
    mine, theirs = await new_session(app), await new_session(app)
    async with post_call(app, theirs, "steps", {"n": 1}) as other:
        await other.wait_for(answered(1))
    async with post_call(app, mine, "steps", {"n": 1}) as own:
        await own.wait_for(answered(1))
    stream, last = parse_event_id(ids(own)[-1])
    refused = {
        "never issued": "0123456789abcdef:1",
        "another session's": ids(other)[0],
        "beyond the last event": f"{stream}:{last + 1}",
    }
    async with open_client(app) as client:
        bodies = set()
        for what, raw in refused.items():
            headers = {"accept": "text/event-stream", "mcp-session-id": mine, "mcp-protocol-version": LEGACY, "last-event-id": raw}
            response = await client.get("/mcp", headers=headers)
            error = assert_error(response, 400, -32600)
            bodies.add(error["message"])
            assert what and response.status_code != 404
        assert len(bodies) == 1, "a foreign id must look exactly like one never issued"
        no_session = await client.get("/mcp", headers={"accept": "text/event-stream", "last-event-id": ids(own)[0]})
        assert no_session.status_code == 400


# -- disconnects ---------------------------------------------------------------------------------


async def test_disconnect_before_any_event_does_not_cancel_either(app: Any) -> None:
    GATES["d"] = anyio.Event()
    sid = await new_session(app)
    async with post_call(app, sid, "quiet", {"gate": "d"}, token=None) as post:
        await anyio.sleep(0.1)
        assert post.status is None, "nothing was sent yet: the answer may still go as JSON"
        post.disconnect.set()
        await anyio.sleep(0.1)
        GATES["d"].set()
        with anyio.fail_after(30):
            await post.finished.wait()
    assert ENDED == [("d", False, None)]


@pytest.mark.parametrize("overrides", [{"http_resumability": False}, {"session_mode": "stateless"}], ids=["off", "stateless"])
async def test_without_resumability_a_disconnect_still_cancels(overrides: dict[str, Any]) -> None:
    app, _ = build(mcp_settings(**overrides))
    GATES["c"] = anyio.Event()
    sid = await new_session(app) if overrides.get("session_mode") != "stateless" else None
    async with post_call(app, sid, "hold", {"gate": "c"}, wait_started=True) as post:
        await post.wait_for(lambda e: "holding" in log_texts(e))
        post.disconnect.set()
        with anyio.fail_after(30):
            await post.finished.wait()
    assert ENDED == [("c", True, "disconnected")], "no stream to resume: the result could never be delivered"


# -- the GET stream -------------------------------------------------------------------------------


async def _poke(app: Any, sid: str, text: str) -> bool:
    async with open_client(app) as client:
        wire = Wire(client)
        wire.session = sid
        response = await wire.legacy("tools/call", {"name": "poke", "arguments": {"session_id": sid, "text": text}})
        return response.json()["result"]["structuredContent"]["result"]


async def test_get_stream_keeps_what_is_sent_while_no_connection_is_attached(app: Any) -> None:
    sid = await new_session(app)
    async with get_stream(app, sid) as first:
        assert await _poke(app, sid, "one")
        await first.wait_for(lambda e: "one" in log_texts(e))
        cursor = ids(first)[-1]
    assert await _poke(app, sid, "two"), "the stream is kept (and stored) for a resume"
    assert await _poke(app, sid, "three")
    async with get_stream(app, sid, cursor) as resumed:
        await resumed.wait_for(lambda e: log_texts(e) == ["two", "three"])
        assert await _poke(app, sid, "four")  # then live
        await resumed.wait_for(lambda e: "four" in log_texts(e))
    assert [parse_event_id(i)[0] for i in ids(resumed)] == [parse_event_id(cursor)[0]] * 3


async def test_second_get_is_409_while_one_is_attached_and_a_resume_takes_over(app: Any) -> None:
    sid = await new_session(app)
    async with get_stream(app, sid) as first:
        async with open_client(app) as client:
            headers = {"accept": "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": LEGACY}
            assert (await client.get("/mcp", headers=headers)).status_code == 409
        async with get_stream(app, sid, ids(first)[0]) as resumed:
            await first.wait_for(lambda e: e.done.is_set())
            assert await _poke(app, sid, "to the new one")
            await resumed.wait_for(lambda e: "to the new one" in log_texts(e))
    assert log_texts(first) == []


async def test_close_standalone_sse_stream_sends_retry_and_the_client_resumes(app: Any) -> None:
    sid = await new_session(app)
    async with get_stream(app, sid) as first:
        await first.wait_for(lambda e: b"data:" in e.body)
        async with open_client(app) as client:
            wire = Wire(client)
            wire.session = sid
            closed = await wire.legacy("tools/call", {"name": "close_get", "arguments": {}})
            assert closed.json()["result"]["structuredContent"] == {"result": True}
        await first.wait_for(lambda e: e.done.is_set())
    assert events(first)[-1] == {"retry": "1000"}
    assert await _poke(app, sid, "meanwhile")
    async with get_stream(app, sid, ids(first)[-1]) as resumed:
        await resumed.wait_for(lambda e: "meanwhile" in log_texts(e))


async def test_a_get_stream_nobody_resumes_stops_storing_after_retention() -> None:
    app, _ = build(mcp_settings(event_retention_seconds=0.2))
    sid = await new_session(app)
    async with get_stream(app, sid) as first:
        await first.wait_for(lambda e: b"data:" in e.body)
    await anyio.sleep(0.5)
    assert not await _poke(app, sid, "too late"), "an abandoned GET stream is not kept for ever"
    async with get_stream(app, sid, ids(first)[0]) as resumed:  # the old stream ended: a new one goes on
        await resumed.wait_for(lambda e: len(ids(e)) >= 1)
        assert await _poke(app, sid, "fresh")
        await resumed.wait_for(lambda e: "fresh" in log_texts(e))
    assert parse_event_id(ids(resumed)[0])[0] != parse_event_id(ids(first)[0])[0]
    assert events(resumed)[0]["data"] == "", "the new stream opens with its priming event"


async def test_ending_the_session_ends_its_streams_and_a_resume_is_404(app: Any) -> None:
    sid = await new_session(app)
    async with get_stream(app, sid) as standalone:
        async with open_client(app) as client:
            assert (await client.delete("/mcp", headers={"mcp-session-id": sid, "mcp-protocol-version": LEGACY})).status_code == 200
            await standalone.wait_for(lambda e: e.done.is_set())
            headers = {"accept": "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": LEGACY, "last-event-id": ids(standalone)[0]}
            assert (await client.get("/mcp", headers=headers)).status_code == 404


# -- retention -------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_retention_by_count_keeps_the_newest_events_of_a_stream() -> None:
    store = MemoryEventStore(max_events=3, max_age_seconds=60, clock=Clock())
    app, _ = build(mcp_settings(), event_store=store)
    sid = await new_session(app)
    async with post_call(app, sid, "steps", {"n": 5, "delay_ms": 0}, request_id=1) as post:
        await post.wait_for(answered(1))
    async with get_stream(app, sid, ids(post)[0]) as resumed:  # from the priming event, long trimmed
        await resumed.wait_for(lambda e: e.done.is_set())
    assert ids(resumed) == ids(post)[-3:], "only the newest events stay; the final answer is one of them"


async def test_retention_by_age_forgets_old_events_and_ended_streams() -> None:
    clock = Clock()
    store = MemoryEventStore(max_events=100, max_age_seconds=30, clock=clock)
    app, _ = build(mcp_settings(), event_store=store)
    sid = await new_session(app)
    async with post_call(app, sid, "steps", {"n": 2, "delay_ms": 0}, request_id=1) as post:
        await post.wait_for(answered(1))
    clock.now += 31
    async with get_stream(app, sid, ids(post)[0]) as resumed:
        await resumed.wait_for(lambda e: e.done.is_set())
    assert ids(resumed) == [], "events older than the age limit are gone"
    async with post_call(app, sid, "steps", {"n": 1, "delay_ms": 0}, request_id=2) as later:  # a sweep runs
        await later.wait_for(answered(2))
    async with open_client(app) as client:
        headers = {"accept": "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": LEGACY, "last-event-id": ids(post)[0]}
        assert_error(await client.get("/mcp", headers=headers), 400, -32600)
    assert len(store) == 1


# -- the switch ------------------------------------------------------------------------------------


async def test_resumability_off_means_no_ids_no_priming_no_store() -> None:
    store = MemoryEventStore()
    app, _ = build(mcp_settings(http_resumability=False), event_store=store)
    sid = await new_session(app)
    async with post_call(app, sid, "steps", {"n": 2}) as post, get_stream(app, sid) as standalone:
        await post.wait_for(answered(1))
        assert await _poke(app, sid, "hello")
        await standalone.wait_for(lambda e: "hello" in log_texts(e))
    async with post_call(app, sid, "poll", token=None, request_id=3) as polled:
        await polled.wait_for(answered(3))
    for exchange in (post, standalone, polled):
        assert b"id:" not in exchange.body and b"retry:" not in exchange.body
        assert all(e.get("data") for e in events(exchange))
    assert messages(polled)[-1]["result"]["structuredContent"] == {"closed": False}
    assert len(store) == 0
    async with get_stream(app, sid, "0123456789abcdef:1") as ignored:  # Last-Event-ID is ignored: a plain GET stream
        assert ignored.status == 200


def test_the_switches_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    defaults = McpSettings()
    assert defaults.http_resumability is True
    assert (defaults.event_retention_count, defaults.event_retention_seconds, defaults.sse_retry_ms) == (1000, 300.0, 1000)
    for name, value in {"HTTP_RESUMABILITY": "false", "EVENT_RETENTION_COUNT": "5", "EVENT_RETENTION_SECONDS": "9.5", "SSE_RETRY_MS": "250"}.items():
        monkeypatch.setenv(f"MCP_{name}", value)
    settings = McpSettings()
    assert (settings.http_resumability, settings.event_retention_count, settings.event_retention_seconds, settings.sse_retry_ms) == (
        False,
        5,
        9.5,
        250,
    )


async def test_guide_resumable_example_runs_as_written() -> None:
    app = guide_example("## Resumable streams (2025 era)")["app"]  # the example's own app
    sid = await new_session(app)
    async with post_call(app, sid, "rebuild_index", request_id=1) as post:
        await post.wait_for(lambda e: e.done.is_set())
    assert [m["params"]["message"] for m in messages(post)] == ["started"]
    assert events(post)[-1] == {"retry": "1000"}
    async with get_stream(app, sid, ids(post)[-1]) as resumed:
        await resumed.wait_for(lambda e: e.done.is_set())
    assert messages(resumed)[0]["params"]["message"] == "done"
    assert messages(resumed)[-1]["result"]["structuredContent"] == {"result": "rebuilt"}
