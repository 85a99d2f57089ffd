"""The request ``Context`` in both eras: identity, trace, progress, capabilities, concurrency.

Known faults B05 (stable session id), B11 (progress on the call's own stream) and the
CTX-LEAK kind (get_request_context under concurrency and in worker threads).
"""

from __future__ import annotations

import json
import random
import re
from datetime import datetime
from typing import Any

import anyio
import pytest
from conftest import (
    ACCEPT_BOTH,
    LEGACY,
    MODERN,
    Wire,
    asgi_exchange,
    final_message,
    make_app,
    make_router,
    messages_of,
    modern_meta,
    open_client,
    result_of,
    rpc,
    tool_text,
)
from fastapi import Depends

from fastapi_mcp_ctx import Context, get_request_context, mcp_context

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
EVENTS: list[Any] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    EVENTS.clear()


def build_app() -> Any:
    router = make_router()

    @router.tool()
    async def identity(ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """Everything the context says about the call."""
        return {
            "request_id": ctx.request_id,
            "timestamp": ctx.timestamp,
            "tenant": ctx.tenant_id,
            "session": ctx.session_id,
            "trace_id": ctx.trace_id,
            "span_id": ctx.span_id,
            "progress_token": ctx.progress_token,
            "era": ctx.era,
            "version": ctx.protocol_version,
            "method": ctx.method,
            "operation": ctx.operation,
            "can_form": ctx.client.can("elicitation.form"),
            "can_url": ctx.client.can("elicitation.url"),
            "can_sampling": ctx.client.can("sampling"),
            "client_name": (ctx.client_info or {}).get("name"),
        }

    @router.tool()
    async def extras(ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """with_extra merges into a copy; the original context is unchanged."""
        first = ctx.with_extra(item="a", attempt=1)
        second = first.with_extra(attempt=2)
        return {
            "original": dict(ctx.extra),
            "first": dict(first.extra),
            "second": dict(second.extra),
            "same_request": second.request_id == ctx.request_id and second.span_id == second.span_id,
        }

    @router.tool()
    async def current(delay_ms: int, ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """Sleep a bit, then report the current context's id from the contextvar."""
        await anyio.sleep(delay_ms / 1000)
        found = get_request_context()
        return {"from_var": found.request_id if found else None, "from_dep": ctx.request_id, "same": found is ctx}

    @router.tool()
    def current_sync(delay_ms: int) -> dict[str, Any]:
        """A sync tool (worker thread) reading the contextvar."""
        import time

        time.sleep(delay_ms / 1000)
        found = get_request_context()
        return {"from_var": found.request_id if found else None}

    @router.tool()
    async def count(n: int, ctx: Context = Depends(mcp_context)) -> str:
        """Report progress n times."""
        for i in range(1, n + 1):
            await ctx.report_progress(i, n, f"step {i}")
        return f"counted {n}"

    @router.tool()
    async def progress_rules(ctx: Context = Depends(mcp_context)) -> list[bool]:
        """Progress must increase."""
        return [await ctx.report_progress(1), await ctx.report_progress(1), await ctx.report_progress(0.5), await ctx.report_progress(2)]

    @router.tool()
    async def noisy(ctx: Context = Depends(mcp_context)) -> str:
        """Log at three levels."""
        await ctx.log.debug("d-msg")
        await ctx.log.info("i-msg")
        await ctx.log.error("e-msg")
        return "logged"

    @router.tool()
    async def wait_for_cancel(ctx: Context = Depends(mcp_context)) -> str:
        """Block until cancelled; record what the signal said."""
        EVENTS.append("started")
        try:
            await anyio.sleep(5)
        finally:
            EVENTS.append(("finally", ctx.signal.cancelled, ctx.signal.reason))
        EVENTS.append("not-cancelled")
        return "finished"

    return make_app(router)


@pytest.fixture
def app() -> Any:
    return build_app()


async def identity_of(wire: Wire, era: str, **kwargs: Any) -> dict[str, Any]:
    result = result_of(await wire.call_tool(era, "identity", **kwargs))
    assert result["isError"] is False, result
    return result["structuredContent"]


# -- identity ------------------------------------------------------------------------------------


@pytest.mark.parametrize("request_id", [0, "0", "abc", 7, "7", -3], ids=repr)
async def test_request_id_exact(wire: Wire, era: str, request_id: Any) -> None:
    out = await identity_of(wire, era, request_id=request_id)
    assert out["request_id"] == request_id
    assert type(out["request_id"]) is type(request_id)


async def test_timestamp_is_iso8601_utc(wire: Wire, era: str) -> None:
    out = await identity_of(wire, era)
    parsed = datetime.fromisoformat(out["timestamp"])
    assert parsed.tzinfo is not None
    assert parsed.utcoffset().total_seconds() == 0  # type: ignore[union-attr]


async def test_tenant_is_default_without_auth(wire: Wire, era: str) -> None:
    assert (await identity_of(wire, era))["tenant"] == "default"


async def test_era_version_method_operation(wire: Wire, era: str) -> None:
    out = await identity_of(wire, era)
    assert out["era"] == era
    assert out["version"] == (LEGACY if era == "legacy" else MODERN)
    assert out["method"] == "tools/call"
    assert out["operation"] == "tools/call:identity"
    assert out["client_name"] == "pytest"


async def test_b05_session_id_stable_across_calls(wire: Wire) -> None:
    sid = await wire.initialize()
    first = await identity_of(wire, "legacy")
    second = await identity_of(wire, "legacy")
    assert first["session"] == second["session"] == sid


async def test_b05_two_sessions_have_distinct_ids(wire: Wire) -> None:
    sid_a = await wire.initialize()
    a = await identity_of(wire, "legacy")
    sid_b = await wire.initialize()
    b = await identity_of(wire, "legacy")
    assert a["session"] == sid_a != sid_b == b["session"]


async def test_session_id_is_none_in_2026(wire: Wire) -> None:
    out = await identity_of(wire, "modern", headers={"mcp-session-id": "ignored"})
    assert out["session"] is None


# -- trace -----------------------------------------------------------------------------------------


async def test_trace_from_traceparent_header(wire: Wire, era: str) -> None:
    out = await identity_of(wire, era, headers={"traceparent": TRACEPARENT})
    assert out["trace_id"] == TRACE_ID
    assert re.fullmatch(r"[0-9a-f]{16}", out["span_id"])
    assert out["span_id"] != PARENT_ID


async def test_trace_from_meta_traceparent(wire: Wire, era: str) -> None:
    out = await identity_of(wire, era, meta={"traceparent": TRACEPARENT} if era == "legacy" else modern_meta(traceparent=TRACEPARENT))
    assert out["trace_id"] == TRACE_ID
    assert re.fullmatch(r"[0-9a-f]{16}", out["span_id"])


@pytest.mark.parametrize("value", ["garbage", f"ff-{TRACE_ID}-{PARENT_ID}-01", f"00-{'0' * 32}-{PARENT_ID}-01"], ids=["garbage", "version-ff", "zero-trace"])
async def test_malformed_traceparent_gives_no_trace_id(wire: Wire, era: str, value: str) -> None:
    out = await identity_of(wire, era, headers={"traceparent": value})
    assert out["trace_id"] is None
    assert re.fullmatch(r"[0-9a-f]{16}", out["span_id"])


async def test_span_ids_differ_per_call(wire: Wire, era: str) -> None:
    a = await identity_of(wire, era, headers={"traceparent": TRACEPARENT})
    b = await identity_of(wire, era, headers={"traceparent": TRACEPARENT})
    assert a["span_id"] != b["span_id"]


# -- progress token ------------------------------------------------------------------------------


@pytest.mark.parametrize("token", [0, "0", "p-1", 42, ""], ids=repr)
async def test_progress_token_kept_as_sent(wire: Wire, era: str, token: Any) -> None:
    meta = {"progressToken": token}
    out = await identity_of(wire, era, meta=meta if era == "legacy" else {**modern_meta(), **meta})
    assert out["progress_token"] == token
    assert type(out["progress_token"]) is type(token)


async def test_progress_token_absent_is_none(wire: Wire, era: str) -> None:
    assert (await identity_of(wire, era))["progress_token"] is None


# -- capabilities ----------------------------------------------------------------------------------


async def test_bare_elicitation_means_form_legacy(wire: Wire) -> None:
    await wire.initialize(capabilities={"elicitation": {}})
    out = await identity_of(wire, "legacy")
    assert out["can_form"] is True
    assert out["can_url"] is False
    assert out["can_sampling"] is False


async def test_bare_elicitation_means_form_modern(wire: Wire) -> None:
    out = await identity_of(wire, "modern", meta={"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "sampling": {}}})
    assert out["can_form"] is True
    assert out["can_url"] is False
    assert out["can_sampling"] is True


async def test_capabilities_are_per_request_in_2026(wire: Wire) -> None:
    with_cap = await identity_of(wire, "modern", meta={"io.modelcontextprotocol/clientCapabilities": {"elicitation": {"url": {}}}})
    without = await identity_of(wire, "modern")
    assert with_cap["can_url"] is True and with_cap["can_form"] is False
    assert without["can_url"] is False


# -- get_request_context under concurrency --------------------------------------------------------


@pytest.mark.parametrize("tool", ["current", "current_sync"])
async def test_get_request_context_under_50_concurrent_calls(app: Any, era: str, tool: str) -> None:
    async with open_client(app) as client:
        wire = Wire(client)
        if era == "legacy":
            await wire.initialize()
        results: dict[int, dict[str, Any]] = {}

        async def one(i: int) -> None:
            response = await wire.call_tool(era, tool, {"delay_ms": random.randint(0, 30)}, request_id=1000 + i)
            message = final_message(response)
            assert message["id"] == 1000 + i
            results[i] = message["result"]["structuredContent"]

        async with anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(one, i)
    assert len(results) == 50
    for i, out in results.items():
        assert out["from_var"] == 1000 + i, out
        if tool == "current":
            assert out["from_dep"] == 1000 + i
            assert out["same"] is True


async def test_get_request_context_is_none_outside_calls() -> None:
    assert get_request_context() is None


# -- progress (B11) ----------------------------------------------------------------------------------


async def test_b11_progress_on_the_calls_own_sse_stream(wire: Wire, era: str) -> None:
    meta = {"progressToken": "p-3"}
    response = await wire.call_tool(era, "count", {"n": 3}, meta=meta if era == "legacy" else {**modern_meta(), **meta}, request_id=3)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    messages = messages_of(response)
    progress = [m for m in messages if m.get("method") == "notifications/progress"]
    assert [p["params"]["progress"] for p in progress] == [1, 2, 3]
    assert all(p["params"]["progressToken"] == "p-3" for p in progress)
    assert all(p["params"]["total"] == 3 for p in progress)
    assert [p["params"]["message"] for p in progress] == ["step 1", "step 2", "step 3"]
    assert messages[-1]["id"] == 3 and tool_text(messages[-1]["result"]) == "counted 3"
    assert all("id" not in m for m in messages[:-1])


async def test_progress_token_zero_gets_progress(wire: Wire, era: str) -> None:
    meta = {"progressToken": 0}
    response = await wire.call_tool(era, "count", {"n": 2}, meta=meta if era == "legacy" else {**modern_meta(), **meta})
    progress = [m for m in messages_of(response) if m.get("method") == "notifications/progress"]
    assert [p["params"]["progressToken"] for p in progress] == [0, 0]


async def test_no_progress_without_token_is_plain_json(wire: Wire, era: str) -> None:
    response = await wire.call_tool(era, "count", {"n": 3})
    assert response.headers["content-type"].startswith("application/json")
    messages = messages_of(response)
    assert len(messages) == 1
    assert tool_text(messages[0]["result"]) == "counted 3"


async def test_progress_must_increase(wire: Wire, era: str) -> None:
    meta = {"progressToken": "t"}
    response = await wire.call_tool(era, "progress_rules", meta=meta if era == "legacy" else {**modern_meta(), **meta})
    progress = [m["params"]["progress"] for m in messages_of(response) if m.get("method") == "notifications/progress"]
    assert progress == [1, 2]
    assert final_message(response)["result"]["structuredContent"] == {"result": [True, False, False, True]}


async def test_no_sse_when_client_accepts_only_json(wire: Wire) -> None:
    await wire.initialize()
    headers = {**wire.legacy_headers(), "accept": "application/json"}
    body = rpc("tools/call", {"name": "count", "arguments": {"n": 2}, "_meta": {"progressToken": "p"}}, 5)
    response = await wire.post(body, headers)
    assert response.headers["content-type"].startswith("application/json")
    assert tool_text(response.json()["result"]) == "counted 2"


# -- logging ------------------------------------------------------------------------------------------


async def test_modern_logs_need_opt_in(wire: Wire) -> None:
    silent = await wire.modern("tools/call", {"name": "noisy", "arguments": {}})
    assert not [m for m in messages_of(silent) if m.get("method") == "notifications/message"]
    loud = await wire.modern("tools/call", {"name": "noisy", "arguments": {}}, meta={"io.modelcontextprotocol/logLevel": "info"})
    levels = [m["params"]["level"] for m in messages_of(loud) if m.get("method") == "notifications/message"]
    assert levels == ["info", "error"]
    assert "resultType" in final_message(loud)["result"]


# -- cancellation on disconnect (2026) ---------------------------------------------------------------


async def test_signal_set_on_client_disconnect_modern(app: Any) -> None:
    params = {"name": "wait_for_cancel", "arguments": {}, "_meta": modern_meta()}
    headers = {
        "content-type": "application/json",
        "accept": ACCEPT_BOTH,
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": "wait_for_cancel",
    }
    body = json.dumps(rpc("tools/call", params, 1)).encode()
    with anyio.fail_after(30):
        async with asgi_exchange(app, "POST", headers=headers, body_chunks=[body], wait_started=False) as exchange:
            while "started" not in EVENTS:
                await anyio.sleep(0.01)
            exchange.disconnect.set()
            await exchange.finished.wait()
    assert EVENTS == ["started", ("finally", True, "disconnected")]
    assert exchange.body == b"", "nothing may be sent for a cancelled 2026 request"


async def test_with_extra_merges_into_a_copy(wire: Wire, era: str) -> None:
    result = result_of(await wire.call_tool(era, "extras"))["structuredContent"]
    assert result == {
        "original": {},
        "first": {"item": "a", "attempt": 1},
        "second": {"item": "a", "attempt": 2},
        "same_request": True,
    }
