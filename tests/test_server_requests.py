"""``ctx.send_request`` on the 2025 Streamable HTTP wire: a request on the call's own SSE
stream, the answer POSTed on another HTTP request and matched by session and typed id.

Spec 2025-11-25 ``basic/transports`` §Sending Messages items 4 and 6, ``basic/lifecycle``
§Timeouts and §Capability Negotiation, ``client/roots``, ``client/sampling``,
``client/elicitation`` §Capabilities. Every wait is bounded; "at once" means well under the
request's timeout, with nothing sent but the call's own JSON result.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import anyio
import pytest
from conftest import Wire, make_app, make_router, open_client, result_of, rpc, tool_text
from fastapi import Depends
from s2c_wire import RAISED, answer, build, calling, finished, frames, in_session, wait_frames

from fastapi_mcp_ctx import Context, mcp_context
from fastapi_mcp_ctx._transport.bus import replica_id
from fastapi_mcp_ctx._transport.pending import PendingRequests, origin_of
from fastapi_mcp_ctx._transport.requests import required_capabilities
from fastapi_mcp_ctx._wire.jsonrpc import JsonRpcResponse
from fastapi_mcp_ctx.errors import (
    ClientResponseError,
    MissingCapabilityError,
    NoBackChannelError,
    ServerRequestError,
    ServerRequestTimeoutError,
)

ID_SHAPE = re.compile(r"[0-9a-f]{16}:[0-9]+")


@pytest.fixture(autouse=True)
def _reset() -> None:
    RAISED.clear()


# -- the round trip --------------------------------------------------------------------------------


async def test_ping_round_trip_on_the_calls_own_stream() -> None:
    app, router = build()
    async with in_session(app) as (wire, session):
        async with calling(app, session, {"method": "ping"}) as exchange:
            (request,) = await wait_frames(exchange, 1)
            assert exchange.headers["content-type"] == "text/event-stream"  # the POST response switched to SSE
            assert exchange.headers["mcp-session-id"] == session
            assert request["method"] == "ping" and "params" not in request
            assert isinstance(request["id"], str) and ID_SHAPE.fullmatch(request["id"])
            assert origin_of(request["id"]) == replica_id()
            assert router.pending.count(session) == 1
            await answer(wire, {"id": request["id"], "result": {}})
            await finished(exchange)
        final = frames(exchange)[-1]
        assert final["id"] == 7 and final["result"]["structuredContent"] == {"answer": {}}
        assert len(router.pending) == 0 and not RAISED


async def test_auto_mode_sends_requests_in_a_session() -> None:
    app, router = build(session_mode="auto")
    async with in_session(app) as (wire, session):
        async with calling(app, session, {"method": "ping"}) as exchange:
            (request,) = await wait_frames(exchange, 1)
            await answer(wire, {"id": request["id"], "result": {}})
            await finished(exchange)
    assert frames(exchange)[-1]["result"]["structuredContent"] == {"answer": {}}
    assert len(router.pending) == 0


async def test_params_and_result_pass_through_unchanged() -> None:
    app, _ = build()
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    params = {"message": "Your name?", "requestedSchema": schema}
    async with in_session(app, {"elicitation": {}}) as (wire, session):
        async with calling(app, session, {"method": "elicitation/create", "params": params}) as exchange:
            (request,) = await wait_frames(exchange, 1)
            assert request["method"] == "elicitation/create" and request["params"] == params
            await answer(wire, {"id": request["id"], "result": {"action": "accept", "content": {"name": "Ada"}}})
            await finished(exchange)
    assert frames(exchange)[-1]["result"]["structuredContent"] == {"answer": {"action": "accept", "content": {"name": "Ada"}}}


async def test_error_answer_is_a_typed_exception() -> None:
    app, router = build()
    async with in_session(app, {"roots": {}}) as (wire, session):
        async with calling(app, session, {"method": "roots/list"}) as exchange:
            (request,) = await wait_frames(exchange, 1)
            error = {"code": -32601, "message": "Roots are private", "data": {"why": ["policy"]}}
            await answer(wire, {"id": request["id"], "error": error})
            await finished(exchange)
    (exc,) = RAISED
    assert isinstance(exc, ClientResponseError) and isinstance(exc, ServerRequestError)
    assert (exc.code, exc.client_message, exc.client_data, exc.method) == (-32601, "Roots are private", {"why": ["policy"]}, "roots/list")
    result = frames(exchange)[-1]["result"]
    assert result["isError"] is True
    assert tool_text(result) == "The client answered roots/list with error -32601: Roots are private"
    envelope = result["_meta"]["fastapi-mcp-ctx/error"]
    assert envelope["code"] == -32601 and envelope["data"]["reason"] == "client_error"
    assert envelope["data"]["method"] == "roots/list" and envelope["data"]["requestId"] == 7
    assert envelope["data"]["clientError"] == {"code": -32601, "message": "Roots are private", "data": {"why": ["policy"]}}
    assert len(router.pending) == 0


async def test_a_result_outside_the_schema_is_refused() -> None:
    app, _ = build()
    async with in_session(app, {"roots": {}}) as (wire, session):
        async with calling(app, session, {"method": "roots/list"}) as exchange:
            (request,) = await wait_frames(exchange, 1)
            await answer(wire, {"id": request["id"], "result": {"roots": "not a list"}})
            await finished(exchange)
    (exc,) = RAISED
    assert type(exc) is ServerRequestError and "does not fit the 2025-11-25 schema" in exc.message
    assert frames(exchange)[-1]["result"]["isError"] is True


async def test_timeout_raises_and_cancels_the_request_on_the_stream() -> None:
    app, router = build()
    async with in_session(app) as (wire, session):
        started = time.monotonic()
        async with calling(app, session, {"method": "ping", "timeout": 0.2}) as exchange:
            await finished(exchange)
        elapsed = time.monotonic() - started
        request, cancelled, final = frames(exchange)
        assert 0.2 <= elapsed < 15  # its 0.2 s timeout (margins for a loaded machine)
        assert request["method"] == "ping"
        assert cancelled == {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request["id"], "reason": "no answer within 0.2 s"},
        }
        assert final["result"]["isError"] is True
        assert tool_text(final["result"]) == "The client did not answer ping within 0.2 s"
        envelope = final["result"]["_meta"]["fastapi-mcp-ctx/error"]["data"]
        assert (envelope["reason"], envelope["method"], envelope["timeoutSeconds"]) == ("server_request_timeout", "ping", 0.2)
        (exc,) = RAISED
        assert isinstance(exc, ServerRequestTimeoutError) and exc.timeout == 0.2
        assert len(router.pending) == 0
        await answer(wire, {"id": request["id"], "result": {}})  # late: 202, nothing to resolve
        assert len(router.pending) == 0


async def test_default_timeout_comes_from_the_setting() -> None:
    app, _ = build(server_request_timeout_seconds=0.1)
    async with in_session(app) as (_wire, session):
        async with calling(app, session, {"method": "ping"}) as exchange:
            await finished(exchange)
    (exc,) = RAISED
    assert isinstance(exc, ServerRequestTimeoutError) and exc.timeout == 0.1


# -- refused at once -------------------------------------------------------------------------------

CAPABILITY_CASES = [
    ("roots/list", None, {}, {"roots": {}}),
    ("roots/list", None, {"sampling": {}, "elicitation": {}}, {"roots": {}}),
    ("sampling/createMessage", {"messages": [], "maxTokens": 5}, {"roots": {}}, {"sampling": {}}),
    (
        "sampling/createMessage",
        {"messages": [], "maxTokens": 5, "tools": [{"name": "t", "inputSchema": {"type": "object"}}]},
        {"sampling": {}},
        {"sampling": {"tools": {}}},
    ),
    ("sampling/createMessage", {"messages": [], "maxTokens": 5, "includeContext": "thisServer"}, {"sampling": {}}, {"sampling": {"context": {}}}),
    ("elicitation/create", {"message": "m", "requestedSchema": {"type": "object", "properties": {}}}, {}, {"elicitation": {"form": {}}}),
    (
        "elicitation/create",
        {"mode": "form", "message": "m", "requestedSchema": {"type": "object", "properties": {}}},
        {"elicitation": {"url": {}}},
        {"elicitation": {"form": {}}},
    ),
    (
        "elicitation/create",
        {"mode": "url", "message": "m", "url": "https://example.test/k", "elicitationId": "e1"},
        {"elicitation": {}},  # bare: form mode only
        {"elicitation": {"url": {}}},
    ),
]


@pytest.mark.parametrize(("method", "params", "declared", "required"), CAPABILITY_CASES)
async def test_an_undeclared_capability_fails_at_once_with_nothing_sent(
    method: str, params: dict[str, Any] | None, declared: dict[str, Any], required: dict[str, Any]
) -> None:
    app, router = build()
    async with in_session(app, declared) as (_wire, session):
        started = time.monotonic()
        async with calling(app, session, {"method": method, "params": params, "timeout": 30}) as exchange:
            await finished(exchange)
    assert time.monotonic() - started < 15  # not the 30 s timeout
    assert exchange.headers["content-type"] == "application/json"  # nothing preceded the result
    result = json.loads(exchange.body)["result"]
    assert result["isError"] is True and "Reconnect with a client that declares it" in tool_text(result)
    (exc,) = RAISED
    assert isinstance(exc, MissingCapabilityError) and exc.required == required
    assert method in exc.message
    assert len(router.pending) == 0


@pytest.mark.parametrize(("method", "params", "declared", "required"), CAPABILITY_CASES)
async def test_a_declared_capability_lets_the_request_out(
    method: str, params: dict[str, Any] | None, declared: dict[str, Any], required: dict[str, Any]
) -> None:
    granted = {**declared, **required}
    for key, value in required.items():
        granted[key] = {**declared.get(key, {}), **value}
    app, _ = build()
    async with in_session(app, granted) as (_wire, session):
        async with calling(app, session, {"method": method, "params": params, "timeout": 0.05}) as exchange:
            await finished(exchange)
    assert frames(exchange)[0]["method"] == method
    assert isinstance(RAISED[0], ServerRequestTimeoutError)


def test_required_capabilities_table() -> None:
    assert required_capabilities("ping", None) == ()
    assert required_capabilities("roots/list", None) == ("roots",)
    assert required_capabilities("sampling/createMessage", {"toolChoice": {"mode": "auto"}, "includeContext": "allServers"}) == (
        "sampling",
        "sampling.tools",
        "sampling.context",
    )
    assert required_capabilities("sampling/createMessage", {"includeContext": "none"}) == ("sampling",)
    assert required_capabilities("elicitation/create", {"mode": "url"}) == ("elicitation.url",)
    assert required_capabilities("elicitation/create", {}) == ("elicitation.form",)


async def test_a_json_only_client_fails_at_once() -> None:
    app, router = build()
    async with in_session(app) as (_wire, session):
        started = time.monotonic()
        async with calling(app, session, {"method": "ping", "timeout": 30}, accept="application/json") as exchange:
            await finished(exchange)
    assert time.monotonic() - started < 15  # not the 30 s timeout
    assert exchange.headers["content-type"] == "application/json"
    (exc,) = RAISED
    assert isinstance(exc, NoBackChannelError) and exc.code == -32600
    assert "accepts only application/json" in exc.message and "text/event-stream" in exc.message
    result = json.loads(exchange.body)["result"]
    assert "Cannot send ping to the client" in tool_text(result)
    assert result["_meta"]["fastapi-mcp-ctx/error"]["data"]["reason"] == "no_back_channel"
    assert len(router.pending) == 0


async def test_the_2026_era_fails_at_once() -> None:
    app, router = build()
    async with open_client(app) as client:
        wire = Wire(client)
        started = time.monotonic()
        response = await wire.modern("tools/call", {"name": "ask", "arguments": {"method": "ping", "timeout": 30}})
    assert time.monotonic() - started < 15  # not the 30 s timeout
    result = result_of(response)
    assert result["isError"] is True and "2026-07-28 era has no server→client requests" in tool_text(result)
    assert isinstance(RAISED[0], NoBackChannelError) and len(router.pending) == 0


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"method": "tools/list"}, "is not a server→client request"),
        ({"method": "ping", "timeout": 0}, "timeout must be a positive number"),
        ({"method": "ping", "timeout": -1}, "timeout must be a positive number"),
        ({"method": "elicitation/create", "params": {"message": 5}}, "params of elicitation/create do not fit"),
    ],
)
async def test_a_handler_bug_is_a_value_error_before_anything_is_sent(arguments: dict[str, Any], message: str) -> None:
    app, router = build()
    async with open_client(app) as client:
        wire = Wire(client)
        await wire.initialize(capabilities={"elicitation": {}})
        response = await wire.legacy("tools/call", {"name": "ask", "arguments": arguments})
    assert response.headers["content-type"] == "application/json"
    assert result_of(response)["isError"] is True  # a crash: generic message, traceback in the server log
    (exc,) = RAISED
    assert type(exc) is ValueError and message in str(exc)
    assert len(router.pending) == 0


async def test_a_method_newer_than_the_session_is_refused() -> None:
    app, _ = build()
    async with open_client(app) as client:
        wire = Wire(client)
        await wire.initialize(version="2025-03-26", capabilities={"elicitation": {}})
        params = {"message": "m", "requestedSchema": {"type": "object", "properties": {}}}
        response = await wire.legacy("tools/call", {"name": "ask", "arguments": {"method": "elicitation/create", "params": params}}, version="2025-03-26")
    (exc,) = RAISED
    assert type(exc) is ServerRequestError and "not defined at protocol version 2025-03-26" in exc.message
    assert result_of(response)["isError"] is True


# -- matching answers ------------------------------------------------------------------------------


async def test_answers_match_by_typed_id() -> None:
    app, router = build()
    async with in_session(app) as (wire, session):
        async with calling(app, session, {"method": "ping"}) as exchange:
            (request,) = await wait_frames(exchange, 1)
            rid: str = request["id"]
            number = int(rid.rsplit(":", 1)[1])
            for wrong in (number, str(number), rid.upper() if rid.upper() != rid else rid + "0", "x" + rid, [rid], {"id": rid}):
                if isinstance(wrong, (list, dict)):
                    response = await wire.post({"jsonrpc": "2.0", "id": wrong, "result": {}}, wire.legacy_headers())
                    assert response.status_code == 400  # not a JSON-RPC id at all
                    continue
                await answer(wire, {"id": wrong, "result": {"wrong": True}})
                assert router.pending.count(session) == 1, wrong
            await answer(wire, {"id": rid, "result": {}})
            await finished(exchange)
    assert frames(exchange)[-1]["result"]["structuredContent"] == {"answer": {}}


async def test_an_answer_from_another_session_never_resolves() -> None:
    app, router = build()
    async with open_client(app) as client:
        wire = Wire(client)
        other = await wire.initialize()
        session = await wire.initialize()
        async with calling(app, session, {"method": "ping"}) as exchange:
            (request,) = await wait_frames(exchange, 1)
            await answer(wire, {"id": request["id"], "result": {"from": "other"}}, session=other)
            assert router.pending.count(session) == 1
            await answer(wire, {"id": request["id"], "result": {}}, session=session)
            await finished(exchange)
    assert frames(exchange)[-1]["result"]["structuredContent"] == {"answer": {}}


async def test_an_answer_needs_a_valid_session() -> None:
    app, router = build()
    async with in_session(app) as (wire, session):
        async with calling(app, session, {"method": "ping"}) as exchange:
            (request,) = await wait_frames(exchange, 1)
            body = {"jsonrpc": "2.0", "id": request["id"], "result": {}}
            assert (await wire.post(body, wire.legacy_headers(None))).status_code == 400  # no session id
            assert (await wire.post(body, wire.legacy_headers("f" * 32))).status_code == 404  # unknown
            assert router.pending.count(session) == 1
            await answer(wire, {"id": request["id"], "result": {}})
            await finished(exchange)


async def test_unknown_ids_get_202_and_a_debug_log(caplog: pytest.LogCaptureFixture) -> None:
    app, _ = build()
    async with open_client(app) as client:
        wire = Wire(client)
        await wire.initialize()
        with caplog.at_level("DEBUG", logger="fastapi_mcp_ctx"):
            await answer(wire, {"id": "never-sent", "result": {}})
            await answer(wire, {"id": 41, "error": {"code": -1, "message": "x"}})
    assert "unknown request id 'never-sent'" in caplog.text and "unknown request id 41" in caplog.text


async def test_concurrent_requests_of_one_call_each_get_their_own_answer() -> None:
    router = make_router()

    @router.tool()
    async def both(ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """Ask two things at once."""
        results: dict[str, Any] = {}

        async def one(key: str, method: str) -> None:
            results[key] = await ctx.send_request(method, timeout=5)

        async with anyio.create_task_group() as tg:
            tg.start_soon(one, "roots", "roots/list")
            tg.start_soon(one, "ping", "ping")
        return results

    app = make_app(router)
    async with in_session(app, {"roots": {}}) as (wire, session):
        async with calling(app, session, {}, tool="both") as exchange:
            requests = await wait_frames(exchange, 2)
            by_method = {r["method"]: r["id"] for r in requests}
            assert len(set(by_method.values())) == 2
            await answer(wire, {"id": by_method["ping"], "result": {}})
            await answer(wire, {"id": by_method["roots/list"], "result": {"roots": [{"uri": "file:///tmp"}]}})
            await finished(exchange)
    assert frames(exchange)[-1]["result"]["structuredContent"] == {"roots": {"roots": [{"uri": "file:///tmp"}]}, "ping": {}}
    assert len(router.pending) == 0


# -- cleanup ---------------------------------------------------------------------------------------


async def test_delete_ends_the_wait_and_the_entry() -> None:
    app, router = build()
    async with in_session(app) as (wire, session):
        async with calling(app, session, {"method": "ping", "timeout": 30}) as exchange:
            await wait_frames(exchange, 1)
            assert router.pending.count(session) == 1
            response = await wire.client.delete("/mcp", headers=wire.legacy_headers())
            assert response.status_code == 200
            await finished(exchange)
    assert len(router.pending) == 0
    assert frames(exchange)[-1]["error"]["code"] == -32800  # the call was cancelled with its session


async def test_an_expired_session_ends_its_waits() -> None:
    clock = [1000.0]
    router_app, router = build(session_idle_seconds=60)
    router.sessions.clock = lambda: clock[0]  # type: ignore[attr-defined]
    async with in_session(router_app) as (wire, session):
        async with calling(router_app, session, {"method": "ping", "timeout": 30}) as exchange:
            await wait_frames(exchange, 1)
            clock[0] += 61
            assert (await wire.legacy("tools/list", check=False)).status_code == 404
            await finished(exchange)
    assert len(router.pending) == 0


async def test_cancelling_the_call_removes_its_entry() -> None:
    app, router = build()
    async with in_session(app) as (wire, session):
        async with calling(app, session, {"method": "ping", "timeout": 30}, request_id="call-1") as exchange:
            await wait_frames(exchange, 1)
            note = await wire.post(rpc("notifications/cancelled", {"requestId": "call-1", "reason": "user"}, None), wire.legacy_headers())
            assert note.status_code == 202
            await finished(exchange)
    assert len(router.pending) == 0 and not RAISED  # cancellation, not a send_request error
    final = frames(exchange)[-1]
    assert final["id"] == "call-1" and final["error"]["code"] == -32800


async def test_a_disconnect_removes_the_entry_when_it_cancels_the_call() -> None:
    """Without resumability a 2025 disconnect cancels the call, and its pending request goes."""
    app, router = build(http_resumability=False)
    async with in_session(app) as (_wire, session):
        async with calling(app, session, {"method": "ping", "timeout": 30}) as exchange:
            await wait_frames(exchange, 1)
            exchange.disconnect.set()
            with anyio.fail_after(30):
                await exchange.finished.wait()
    assert len(router.pending) == 0


async def test_a_disconnect_of_a_resumable_call_keeps_the_entry_for_the_resumed_client() -> None:
    """With resumability (the default) a 2025 disconnect is not a cancel: the request stays
    pending, and an answer POSTed after the disconnect still reaches the call."""
    app, router = build()
    async with in_session(app) as (wire, session):
        async with calling(app, session, {"method": "ping", "timeout": 30}) as exchange:
            (request,) = await wait_frames(exchange, 1)
            exchange.disconnect.set()
            await anyio.sleep(0.2)
            assert router.pending.count(session) == 1
            await answer(wire, {"id": request["id"], "result": {}})
            with anyio.fail_after(5):
                while router.pending.count(session):
                    await anyio.sleep(0.02)
    assert len(router.pending) == 0


# -- the table -------------------------------------------------------------------------------------


async def test_table_scopes_and_string_ids() -> None:
    table = PendingRequests(origin=lambda: "abc")
    first, second = table.open("s1"), table.open("s2")
    assert (first, second) == ("abc:1", "abc:2") and origin_of(first) == "abc"
    assert not table.resolve(JsonRpcResponse(first, {}, None), "s2")  # another scope
    assert not table.resolve(JsonRpcResponse(first, {}, None))  # no scope
    assert not table.resolve(JsonRpcResponse(1, {}, None), "s1")
    assert table.resolve(JsonRpcResponse(first, {"ok": 1}, None), "s1")
    assert (await table.wait(first, 1)).result == {"ok": 1}
    assert table.close_scope("s2") == 1
    with pytest.raises(anyio.ClosedResourceError):
        await table.wait(second, 1)
    assert len(table) == 0
    doomed = table.open("s1")
    table.discard(doomed)
    assert len(table) == 0 and not table.resolve(JsonRpcResponse(doomed, {}, None), "s1")


def test_origin_of_reads_only_our_shape() -> None:
    assert origin_of("a1:7") == "a1" and origin_of("a:b:9") == "a:b"
    for other in (7, "7", ":7", "a1:", "a1:x", "a1-7", None):
        assert origin_of(other) is None, other


@pytest.mark.parametrize("body", [{"error": "boom"}, {"result": {}, "error": {"code": 1, "message": "x"}}])
async def test_a_malformed_answer_fails_the_waiting_request_at_once(body: dict[str, Any]) -> None:
    """The POST is refused (400 -32600) and the call waiting for that id ends now, not at its timeout."""
    app, _router = build()
    async with in_session(app, {"roots": {}}) as (wire, session):
        async with calling(app, session, {"method": "roots/list", "timeout": 30}) as exchange:
            (request,) = await wait_frames(exchange, 1)
            started = time.monotonic()
            response = await wire.post({"jsonrpc": "2.0", "id": request["id"], **body}, wire.legacy_headers(...))
            assert response.status_code == 400 and response.json()["error"]["code"] == -32600
            await finished(exchange)
            assert time.monotonic() - started < 15  # not the 30 s timeout
    (exc,) = RAISED
    assert isinstance(exc, ClientResponseError) and exc.code == -32600 and "malformed" in exc.client_message
