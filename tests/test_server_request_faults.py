"""Known faults of peers about server→client requests and sessions: B01 and B05 in ``auto``
session mode (unknown session 404, stable session id), B06 (stateless sampling or elicitation
hangs) and B45 (pending requests leak; requests no stream can carry wait out their timeout).
Each test is named after its case id in the project's catalogue of known faults.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from conftest import LEGACY, Wire, asgi_exchange, open_client, result_of, tool_text
from s2c_wire import RAISED, answer, build, calling, finished, frames, in_session, wait_frames

from fastapi_mcp_ctx.errors import MissingCapabilityError, NoBackChannelError, ServerRequestTimeoutError

SAMPLE = {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 10}
ELICIT = {"message": "Confirm?", "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}


@pytest.fixture(autouse=True)
def _reset() -> None:
    RAISED.clear()


# -- B01 / B05 in auto mode ------------------------------------------------------------------------


async def test_b01_auto_mode_unknown_session_is_404_and_a_new_initialize_works() -> None:
    app, _ = build(session_mode="auto")
    async with open_client(app) as client:
        wire = Wire(client)
        never_issued = await wire.legacy("tools/list", session="0f0f0f0f-dead-beef-0000-000000000000", check=False)
        assert never_issued.status_code == 404 and never_issued.json()["error"]["code"] == -32600
        assert (await wire.legacy("tools/list", session=None, check=False)).status_code == 200  # auto: served alone
        session = await wire.initialize()
        assert (await client.delete("/mcp", headers=wire.legacy_headers(session))).status_code == 200
        assert (await wire.legacy("tools/list", session=session, check=False)).status_code == 404  # ended
        assert await wire.initialize() != session


async def test_b05_auto_mode_session_id_is_stable_across_calls() -> None:
    app, _ = build(session_mode="auto")
    async with in_session(app) as (wire, session):
        seen = []
        for _ in range(3):
            async with calling(app, session, {"method": "ping"}) as exchange:
                (request,) = await wait_frames(exchange, 1)
                await answer(wire, {"id": request["id"], "result": {}})
                await finished(exchange)
            seen.append(exchange.headers["mcp-session-id"])
    assert seen == [session] * 3


# -- B06: stateless server→client requests fail fast ------------------------------------------------


@pytest.mark.parametrize("mode", ["stateless", "auto"])
@pytest.mark.parametrize(("method", "params"), [("sampling/createMessage", SAMPLE), ("elicitation/create", ELICIT)])
async def test_b06_stateless_request_fails_fast_with_a_reason(mode: str, method: str, params: dict[str, Any]) -> None:
    app, router = build(session_mode=mode)
    started = time.monotonic()
    async with calling(app, None, {"method": method, "params": params, "timeout": 30}) as exchange:
        await finished(exchange)
    assert time.monotonic() - started < 15  # never waits out the 30 s timeout (margins for a loaded machine)
    assert exchange.headers["content-type"] == "application/json"  # no SSE stream, no request on the wire
    result = json.loads(exchange.body)["result"]
    assert result["isError"] is True
    assert "has no session" in tool_text(result) and "could not be routed back" in tool_text(result)
    assert isinstance(RAISED[0], NoBackChannelError) and len(router.pending) == 0


async def test_b06_2026_request_is_never_sent_on_a_stream() -> None:
    app, router = build()
    async with open_client(app) as client:
        wire = Wire(client)
        capabilities = {"sampling": {}, "elicitation": {}}
        response = await wire.modern(
            "tools/call",
            {"name": "ask", "arguments": {"method": "sampling/createMessage", "params": SAMPLE, "timeout": 30}},
            meta={"io.modelcontextprotocol/clientCapabilities": capabilities},
        )
    assert response.headers["content-type"] == "application/json"
    assert result_of(response)["isError"] is True and isinstance(RAISED[0], NoBackChannelError)
    assert len(router.pending) == 0


async def test_b06_only_declared_kinds_are_sent() -> None:
    app, _ = build()
    async with in_session(app, {"elicitation": {}}) as (_wire, session):
        async with calling(app, session, {"method": "sampling/createMessage", "params": SAMPLE, "timeout": 30}) as exchange:
            await finished(exchange)
    assert exchange.headers["content-type"] == "application/json"
    assert isinstance(RAISED[0], MissingCapabilityError) and RAISED[0].required == {"sampling": {}}


# -- B45: the pending table's lifecycle ------------------------------------------------------------


async def test_b45_timeouts_leave_nothing_behind() -> None:
    app, router = build()
    async with in_session(app, {"elicitation": {}}) as (_wire, session):
        for round_ in range(40):
            async with calling(app, session, {"method": "elicitation/create", "params": ELICIT, "timeout": 0.01}, request_id=round_) as ex:
                await finished(ex)
            request, cancelled, final = frames(ex)
            assert cancelled["params"]["requestId"] == request["id"]
            assert final["result"]["isError"] is True and "did not answer elicitation/create" in tool_text(final["result"])
            assert len(router.pending) == 0
            assert len(router.live._live) == 0  # pyright: ignore[reportPrivateUsage]  # no companion left per call
    assert all(isinstance(exc, ServerRequestTimeoutError) for exc in RAISED) and len(RAISED) == 40


async def test_b45_a_late_answer_is_accepted_and_applied_to_nothing() -> None:
    app, router = build()
    async with in_session(app, {"elicitation": {}}) as (wire, session):
        async with calling(app, session, {"method": "elicitation/create", "params": ELICIT, "timeout": 0.05}, request_id=1) as first:
            await finished(first)
        late_id = frames(first)[0]["id"]
        async with calling(app, session, {"method": "elicitation/create", "params": ELICIT, "timeout": 5}, request_id=2) as second:
            (current,) = await wait_frames(second, 1)
            await answer(wire, {"id": late_id, "result": {"action": "accept", "content": {"ok": True}}})
            assert router.pending.count(session) == 1  # the late answer resolved nothing
            await answer(wire, {"id": current["id"], "result": {"action": "decline"}})
            await finished(second)
    assert frames(second)[-1]["result"]["structuredContent"] == {"answer": {"action": "decline"}}


async def test_b45_an_undeclared_roots_request_fails_with_nothing_on_the_wire() -> None:
    app, router = build()
    async with in_session(app, {"elicitation": {}}) as (_wire, session):
        started = time.monotonic()
        async with calling(app, session, {"method": "roots/list", "timeout": 30}) as exchange:
            await finished(exchange)
    assert time.monotonic() - started < 15  # not the 30 s timeout
    assert exchange.headers["content-type"] == "application/json"
    assert isinstance(RAISED[0], MissingCapabilityError) and RAISED[0].required == {"roots": {}}
    assert len(router.pending) == 0


async def test_b45_requests_go_on_the_calls_stream_never_the_get_stream() -> None:
    app, router = build()
    async with in_session(app) as (wire, session):
        get_headers = {"accept": "text/event-stream", "mcp-session-id": session, "mcp-protocol-version": LEGACY}
        async with asgi_exchange(app, "GET", headers=get_headers, disconnect_after_response=False) as standalone:
            async with calling(app, session, {"method": "ping", "timeout": 5}) as exchange:
                (request,) = await wait_frames(exchange, 1)
                await answer(wire, {"id": request["id"], "result": {}})
                await finished(exchange)
            assert standalone.body and b'"jsonrpc"' not in standalone.body  # opened (priming or comment), no message on it
    assert frames(exchange)[-1]["result"]["structuredContent"] == {"answer": {}}
    assert len(router.pending) == 0
