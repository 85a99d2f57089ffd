"""The one error envelope (DESIGN.md decision 11), in both eras.

As a tool result: ``isError: true``, the message as a text block, and the envelope
``{code, message, data}`` in ``_meta["fastapi-mcp-ctx/error"]``, also as
``structuredContent.error`` when the tool has no ``outputSchema`` (clients such as the
TypeScript SDK v1 check any ``structuredContent`` against it, error results included); as a
JSON-RPC error ``{code, message, data}``. ``data`` is an object: ``requestId`` always, ``reason`` / ``recovery.hint`` when known,
the raiser's fields, never overwriting those; a retryable backend outage is
``reason: "backend_unavailable"`` with ``retryAfter`` beside HTTP 503 + ``Retry-After``.
Known faults B02 (a backend outage fails closed with a retryable 503), B35/B36 (tool error
semantics).
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import (
    ACCEPT_BOTH,
    LEGACY,
    MODERN,
    Wire,
    assert_error,
    final_message,
    make_app,
    make_router,
    mcp_settings,
    messages_of,
    open_client,
    result_of,
    rpc,
    tool_text,
)
from fastapi import Depends, HTTPException
from pydantic import BaseModel

from fastapi_mcp_ctx import Context, McpRouter, ToolError, mcp_context
from fastapi_mcp_ctx.backends.redis import RedisBackend
from fastapi_mcp_ctx.errors import RESERVED_DATA_KEYS, InvalidParamsError, McpError, StateUnavailableError

DEAD_REDIS = "redis://127.0.0.1:9/0"  # the discard port: nothing listens, connect is refused at once


class Note(BaseModel):
    id: int
    text: str


def build_router(router: McpRouter) -> McpRouter:

    @router.tool()
    async def find_note(note_id: int) -> Note:
        """Structured output; a missing note is an anticipated error with data."""
        raise ToolError(
            f"No note {note_id}",
            reason="not_found",
            recovery_hint="List the notes first.",
            data={"noteId": note_id, "nested": {"known": [1, 2]}},
        )

    @router.tool()
    async def plain_failure():  # type: ignore[no-untyped-def]  # no annotation: no outputSchema
        """No outputSchema: still the same envelope."""
        raise ToolError("plain failure")

    @router.tool()
    async def coded_failure() -> str:
        """A subclass-style code."""
        raise ToolError("quota exceeded", code=4029, reason="quota", data={"limit": 10})

    @router.tool()
    async def crash() -> str:
        """Unexpected exception."""
        raise RuntimeError("secret internals")

    @router.tool()
    async def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    @router.tool()
    async def rejected(_: None = Depends(lambda: (_ for _ in ()).throw(HTTPException(409, "busy")))) -> str:
        """A dependency answering 409."""
        return "never"

    @router.tool()
    async def needs_sampling(ctx: Context = Depends(mcp_context)) -> str:
        """Requires the sampling capability."""
        ctx.client.require("sampling")
        return "sampled"

    @router.tool()
    async def remember(value: str, ctx: Context = Depends(mcp_context)) -> str:
        """Writes ctx.state."""
        await ctx.state.set("k", value)
        return "ok"

    @router.tool()
    async def remember_after_log(value: str, ctx: Context = Depends(mcp_context)) -> str:
        """Logs first (the response becomes SSE, status 200), then writes ctx.state."""
        await ctx.log.info("about to write")
        await ctx.state.set("k", value)
        return "ok"

    return router


@pytest.fixture
def app() -> Any:
    return make_app(build_router(make_router()))


def envelope_of(result: dict[str, Any], *, output_schema: bool = True) -> dict[str, Any]:
    assert result["isError"] is True, result
    error = result["_meta"]["fastapi-mcp-ctx/error"]
    if output_schema:
        assert "structuredContent" not in result, "an error must not carry structuredContent that breaks the outputSchema"
    else:
        assert result["structuredContent"] == {"error": error}
    assert set(error) == {"code", "message", "data"}, error
    assert isinstance(error["code"], int) and isinstance(error["data"], dict)
    assert next(b for b in result["content"] if b["type"] == "text")["text"] == error["message"]
    return error


# -- (a) ToolError(data=...) reaches the envelope's data --------------------------------------------


async def test_tool_error_data_reaches_the_envelope(wire: Wire, era: str) -> None:
    result = result_of(await wire.call_tool(era, "find_note", {"note_id": 7}, request_id="r-7"))
    error = envelope_of(result)
    assert error == {
        "code": 1,
        "message": "No note 7",
        "data": {
            "requestId": "r-7",
            "reason": "not_found",
            "recovery": {"hint": "List the notes first."},
            "noteId": 7,
            "nested": {"known": [1, 2]},
        },
    }
    assert tool_text(result) == "No note 7\nRecovery: List the notes first."


async def test_tool_without_output_schema_also_gets_structured_content(wire: Wire, era: str) -> None:
    listing = result_of(await wire.request(era, "tools/list"))
    plain = next(t for t in listing["tools"] if t["name"] == "plain_failure")
    result = result_of(await wire.call_tool(era, "plain_failure", request_id=0))
    error = envelope_of(result, output_schema=False)
    assert error == {"code": 1, "message": "plain failure", "data": {"requestId": 0, "reason": "tool_error"}}
    assert "outputSchema" not in plain


async def test_tool_error_code_is_the_raisers(wire: Wire, era: str) -> None:
    error = envelope_of(result_of(await wire.call_tool(era, "coded_failure", request_id=3)))
    assert error["code"] == 4029
    assert error["data"] == {"requestId": 3, "reason": "quota", "limit": 10}


@pytest.mark.parametrize("data", [[1, 2], "text", 5, ("a", 1)], ids=["list", "str", "int", "tuple"])
def test_non_mapping_data_is_a_type_error_at_raise_time(data: Any) -> None:
    with pytest.raises(TypeError, match="mapping"):
        ToolError("x", data=data)
    with pytest.raises(TypeError, match="mapping"):
        InvalidParamsError("x", data=data)


def test_non_string_keys_are_a_type_error() -> None:
    with pytest.raises(TypeError, match="keys"):
        ToolError("x", data={1: "one"})  # type: ignore[dict-item]


@pytest.mark.parametrize("key", sorted(RESERVED_DATA_KEYS))
def test_reserved_keys_cannot_be_overwritten(key: str) -> None:
    with pytest.raises(ValueError, match=key):
        ToolError("x", data={key: "mine"})
    with pytest.raises(ValueError, match=key):
        McpError("x", data={key: "mine"})


def test_non_json_values_become_text_at_raise_time() -> None:
    class Opaque:
        def __str__(self) -> str:
            return "opaque!"

    error = ToolError("x", data={"thing": Opaque(), "when": b"\xff"})
    wire = error.to_error(9)
    assert wire["data"]["thing"] == "opaque!" and wire["data"]["when"] == "_w=="
    assert wire["data"]["requestId"] == 9


# -- the framework's own tool failures --------------------------------------------------------------


async def test_invalid_arguments_envelope(wire: Wire, era: str) -> None:
    result = result_of(await wire.call_tool(era, "add", {"a": "x", "b": 1}, request_id=11))
    error = envelope_of(result)
    assert error["code"] == -32602
    assert error["data"]["reason"] == "invalid_arguments"
    assert error["data"]["requestId"] == 11
    assert "a" in error["message"] and error["data"]["recovery"]["hint"]


async def test_crash_envelope_withholds_the_cause(wire: Wire, era: str) -> None:
    result = result_of(await wire.call_tool(era, "crash", request_id=12))
    error = envelope_of(result)
    assert error["code"] == -32603 and error["data"] == {"requestId": 12, "reason": "internal_error"}
    assert "secret internals" not in str(result)


async def test_dependency_4xx_envelope(wire: Wire, era: str) -> None:
    error = envelope_of(result_of(await wire.call_tool(era, "rejected", request_id=13)))
    assert error == {"code": -32600, "message": "busy", "data": {"requestId": 13, "reason": "rejected", "status": 409}}


async def test_missing_capability_legacy_is_an_envelope_with_required_capabilities(wire: Wire) -> None:
    result = result_of(await wire.call_tool("legacy", "needs_sampling", request_id=14))
    error = envelope_of(result)
    assert error["code"] == -32021
    assert error["data"]["requiredCapabilities"] == {"sampling": {}}
    assert error["data"]["requestId"] == 14 and error["data"]["recovery"]["hint"]


# -- JSON-RPC errors: {code, message, data} with data.requestId ---------------------------------------


async def test_missing_capability_modern_keeps_the_spec_data(wire: Wire) -> None:
    response = await wire.call_tool("modern", "needs_sampling", request_id=15)
    error = assert_error(response, 400, -32021, request_id=15)
    assert error["data"]["requiredCapabilities"] == {"sampling": {}}
    assert error["data"]["requestId"] == 15 and error["data"]["reason"] == "missing_capability"


async def test_unsupported_version_keeps_supported_and_requested(wire: Wire) -> None:
    response = await wire.modern("tools/list", meta={"io.modelcontextprotocol/protocolVersion": "2099-01-01"},
                                 headers={"mcp-protocol-version": "2099-01-01"}, request_id=16)
    error = assert_error(response, 400, -32022, request_id=16)
    assert error["data"]["supported"] == [MODERN] and error["data"]["requested"] == "2099-01-01"
    assert error["data"]["requestId"] == 16 and error["data"]["reason"] == "unsupported_version"


async def test_unknown_tool_data(wire: Wire, era: str) -> None:
    if era == "legacy":
        await wire.initialize()
    response = await wire.call_tool(era, "ghost", request_id="g")
    error = assert_error(response, 200 if era == "legacy" else 400, -32602, request_id="g")
    assert error["data"] == {"requestId": "g", "reason": "unknown_tool", "name": "ghost",
                             "recovery": {"hint": "Call tools/list for the tool names this server serves."}}


async def test_method_not_found_data_is_an_object(wire: Wire, era: str) -> None:
    if era == "legacy":
        await wire.initialize()
        response = await wire.legacy("nope/nope", request_id=17)
        error = assert_error(response, 200, -32601, request_id=17)
    else:
        response = await wire.modern("nope/nope", request_id=17)
        error = assert_error(response, 404, -32601, request_id=17)
    assert error["data"] == {"requestId": 17, "reason": "method_not_found", "method": "nope/nope"}


async def test_early_errors_carry_request_id_null(wire: Wire) -> None:
    response = await wire.post(None, {}, content=b"{not json")
    error = assert_error(response, 400, -32700, request_id=None)
    assert error["data"] == {"requestId": None, "reason": "parse_error"}
    response = await wire.post(None, {"accept": "text/html"}, content=b"{}")
    error = assert_error(response, 406, -32600, request_id=None)
    assert error["data"]["reason"] == "not_acceptable" and error["data"]["recovery"]["hint"]


@pytest.mark.parametrize(
    "case",
    ["missing-session", "unknown-session", "bad-cursor", "bad-log-level", "missing-meta", "batch"],
)
async def test_every_json_rpc_error_has_the_envelope(wire: Wire, case: str) -> None:
    sid = await wire.initialize()
    if case == "missing-session":
        response = await wire.legacy("tools/list", session=None, request_id=21)
    elif case == "unknown-session":
        response = await wire.legacy("tools/list", session="f" * 32, request_id=21)
    elif case == "bad-cursor":
        response = await wire.legacy("tools/list", {"cursor": "bogus"}, request_id=21)
    elif case == "bad-log-level":
        response = await wire.legacy("logging/setLevel", {"level": "loud"}, request_id=21)
    elif case == "missing-meta":
        response = await wire.post(rpc("tools/list", {}, 21), {"mcp-protocol-version": MODERN, "mcp-method": "tools/list"})
    else:
        response = await wire.post([rpc("tools/list", None, 21)], {"mcp-session-id": sid, "mcp-protocol-version": LEGACY})
    message = final_message(response)
    error = message["error"]
    assert set(error) == {"code", "message", "data"}
    assert error["data"]["requestId"] == message["id"]
    assert isinstance(error["data"]["reason"], str) and error["data"]["reason"]


# -- (f) a backend outage: reason backend_unavailable, retryAfter beside 503 + Retry-After -------------


@pytest.fixture
async def outage_app() -> Any:
    backend = RedisBackend(DEAD_REDIS)  # a real client against a port nobody listens on
    yield make_app(build_router(McpRouter(settings=mcp_settings(), state_backend=backend)))
    await backend.aclose()


async def test_b02_backend_outage_is_a_retryable_503_with_retry_after(outage_app: Any, era: str) -> None:
    async with open_client(outage_app) as client:
        wire = Wire(client)
        response = await wire.call_tool(era, "remember", {"value": "x"}, request_id=31)
        error = assert_error(response, 503, -32603, request_id=31)
        assert response.headers["retry-after"] == "1"
        assert error["data"]["reason"] == "backend_unavailable"
        assert error["data"]["retryAfter"] == 1
        assert error["data"]["requestId"] == 31
        assert "retry" in error["data"]["recovery"]["hint"].lower()
        assert "127.0.0.1" not in response.text  # no internals


async def test_b02_outage_after_the_stream_started_still_says_when_to_retry(outage_app: Any) -> None:
    """Once SSE started the status is 200 and headers are gone: data.retryAfter carries it."""
    async with open_client(outage_app) as client:
        wire = Wire(client)
        await wire.initialize()
        response = await wire.legacy("tools/call", {"name": "remember_after_log", "arguments": {"value": "x"}}, request_id=32)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        messages = messages_of(response)
        assert messages[0]["method"] == "notifications/message"
        error = messages[-1]["error"]
        assert error["code"] == -32603
        assert error["data"]["reason"] == "backend_unavailable" and error["data"]["retryAfter"] == 1


def test_state_unavailable_reason_can_be_more_precise() -> None:
    error = StateUnavailableError("Too many open sessions", retry_after=5, reason="too_many_sessions")
    wire = error.to_error(1)
    assert wire["data"] == {"requestId": 1, "reason": "too_many_sessions", "recovery": {"hint": "Retry after 5 s."}, "retryAfter": 5}
    assert error.headers == {"Retry-After": "5"} and error.http_status == 503


async def test_session_cap_envelope() -> None:
    router = make_router(max_sessions=1)
    async with open_client(make_app(router)) as client:
        wire = Wire(client)
        await wire.initialize()
        body = rpc("initialize", {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}, 41)
        response = await wire.post(body, {"accept": ACCEPT_BOTH})
        error = assert_error(response, 503, -32603, request_id=41)
        assert error["data"]["reason"] == "too_many_sessions" and error["data"]["retryAfter"] == 5

