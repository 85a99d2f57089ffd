"""Known faults that cut across modules: B05 (state within a session), B07 (stale request),
B08 (per-session log level), B13 (cancellation), B34 (lifespan).

Each test is named after its case id in the project's catalogue of peers' known faults.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from conftest import (
    LEGACY,
    Wire,
    final_message,
    make_app,
    make_router,
    messages_of,
    open_client,
    result_of,
    rpc,
    tool_text,
)
from fastapi import Depends, FastAPI, Request

from fastapi_mcp_ctx import Context, mcp_context

EVENTS: list[Any] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    EVENTS.clear()


def build_app() -> FastAPI:
    router = make_router()

    @router.tool()
    async def remember(value: str, ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """Store value under k."""
        await ctx.state.set("k", value)
        return {"session": ctx.session_id}

    @router.tool()
    async def recall(ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """Read k back."""
        return {"value": await ctx.state.get("k"), "session": ctx.session_id}

    @router.tool()
    async def echo_headers(delay_ms: int = 0, request: Request = None, ctx: Context = Depends(mcp_context)) -> dict[str, Any]:  # type: ignore[assignment]
        """Return the headers of the HTTP request carrying this call."""
        await anyio.sleep(delay_ms / 1000)
        return {
            "x_trace": request.headers.get("x-trace"),
            "authorization": request.headers.get("authorization"),
            "ctx_x_trace": ctx.request.headers.get("x-trace"),
        }

    @router.tool()
    async def noisy(delay_ms: int = 0, ctx: Context = Depends(mcp_context)) -> str:
        """Log at debug, info and error."""
        await ctx.log.debug("debug-line")
        await anyio.sleep(delay_ms / 1000)
        await ctx.log.info("info-line")
        await ctx.log.error("error-line")
        return "done"

    @router.tool()
    async def sleepy(ctx: Context = Depends(mcp_context)) -> str:
        """Sleep until cancelled."""
        EVENTS.append("started")
        try:
            await anyio.sleep(3)
        finally:
            EVENTS.append(("stopped", ctx.signal.cancelled))
        EVENTS.append("finished")
        return "slept"

    return make_app(router)


@pytest.fixture
def app() -> FastAPI:
    return build_app()


# -- B05 ---------------------------------------------------------------------------------------------


async def test_b05_session_id_stable_and_state_persists(wire: Wire) -> None:
    sid = await wire.initialize()
    first = result_of(await wire.legacy("tools/call", {"name": "remember", "arguments": {"value": "x"}}))
    assert first["isError"] is False, first
    second = result_of(await wire.legacy("tools/call", {"name": "recall", "arguments": {}}))
    assert second["isError"] is False, second
    assert first["structuredContent"]["session"] == sid
    assert second["structuredContent"] == {"value": "x", "session": sid}


# -- B07 ---------------------------------------------------------------------------------------------


async def test_b07_tool_sees_the_current_request_not_the_first(wire: Wire) -> None:
    await wire.initialize(headers={"authorization": "Bearer A", "x-trace": "t1"})
    response = await wire.legacy(
        "tools/call", {"name": "echo_headers", "arguments": {}}, headers={"authorization": "Bearer A2", "x-trace": "t2"}
    )
    assert result_of(response)["structuredContent"] == {"x_trace": "t2", "authorization": "Bearer A2", "ctx_x_trace": "t2"}


async def test_b07_concurrent_calls_each_see_their_own_headers(wire: Wire) -> None:
    await wire.initialize(headers={"x-trace": "t0"})
    seen: dict[str, Any] = {}

    async def one(trace: str, delay: int) -> None:
        response = await wire.legacy(
            "tools/call", {"name": "echo_headers", "arguments": {"delay_ms": delay}}, headers={"x-trace": trace}
        )
        seen[trace] = result_of(response)["structuredContent"]

    async with anyio.create_task_group() as tg:
        for i in range(10):
            tg.start_soon(one, f"t-{i}", (10 - i) * 5)
    for trace, out in seen.items():
        assert out["x_trace"] == trace
        assert out["ctx_x_trace"] == trace
    assert len(seen) == 10


async def test_b07_modern_calls_see_their_own_headers(wire: Wire) -> None:
    for trace in ("m1", "m2"):
        response = await wire.modern("tools/call", {"name": "echo_headers", "arguments": {}}, headers={"x-trace": trace})
        assert result_of(response)["structuredContent"]["x_trace"] == trace


# -- B08 ---------------------------------------------------------------------------------------------


def log_levels(response: Any) -> list[str]:
    return [m["params"]["level"] for m in messages_of(response) if m.get("method") == "notifications/message"]


async def test_b08_log_level_is_per_session(app: FastAPI) -> None:
    async with open_client(app) as client:
        a, b = Wire(client), Wire(client)
        await a.initialize()
        await b.initialize()
        assert final_message(await a.legacy("logging/setLevel", {"level": "error"}))["result"] == {}
        assert final_message(await b.legacy("logging/setLevel", {"level": "debug"}))["result"] == {}
        results: dict[str, list[Any]] = {"a": [], "b": []}

        async def call(name: str, wire: Wire, delay: int) -> None:
            response = await wire.legacy("tools/call", {"name": "noisy", "arguments": {"delay_ms": delay}})
            results[name].append(response)

        for _ in range(2):  # the level must survive the first call
            async with anyio.create_task_group() as tg:
                tg.start_soon(call, "a", a, 20)
                tg.start_soon(call, "b", b, 5)
        for response in results["a"]:
            assert log_levels(response) == ["error"]
            assert tool_text(final_message(response)["result"]) == "done"
        for response in results["b"]:
            assert log_levels(response) == ["debug", "info", "error"]


async def test_b08_log_messages_stay_on_their_own_request(app: FastAPI) -> None:
    async with open_client(app) as client:
        a = Wire(client)
        await a.initialize()
        plain = await a.legacy("tools/list")
        assert log_levels(plain) == []
        noisy = await a.legacy("tools/call", {"name": "noisy", "arguments": {}})
        payloads = [m["params"]["data"] for m in messages_of(noisy) if m.get("method") == "notifications/message"]
        assert [p["message"] for p in payloads] == ["debug-line", "info-line", "error-line"]


# -- B13 ---------------------------------------------------------------------------------------------


async def test_b13_cancelled_call_answers_at_most_once_and_session_keeps_serving(wire: Wire) -> None:
    sid = await wire.initialize()
    headers = {"mcp-session-id": sid, "mcp-protocol-version": LEGACY}
    responses: list[Any] = []

    async def call() -> None:
        responses.append(await wire.post(rpc("tools/call", {"name": "sleepy", "arguments": {}}, 5), headers))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            while "started" not in EVENTS:
                await anyio.sleep(0.01)
            cancel = await wire.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5, "reason": "user"}}, headers)
            assert cancel.status_code == 202
    assert ("stopped", True) in EVENTS
    assert "finished" not in EVENTS
    messages = [m for m in messages_of(responses[0]) if m.get("id") == 5]
    assert len(messages) <= 1
    assert all("result" not in m for m in messages), "a cancelled request must not get a result"
    listing = await wire.legacy("tools/list", request_id=6)
    assert final_message(listing)["id"] == 6 and "tools" in final_message(listing)["result"]


@pytest.mark.parametrize("request_id", [999, "5", 0])
async def test_b13_cancel_for_unknown_id_is_ignored(wire: Wire, request_id: Any) -> None:
    sid = await wire.initialize()
    headers = {"mcp-session-id": sid, "mcp-protocol-version": LEGACY}
    cancel = await wire.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}, headers)
    assert cancel.status_code == 202
    assert (await wire.legacy("tools/list")).status_code == 200


# -- B34 ---------------------------------------------------------------------------------------------


@asynccontextmanager
async def lifespan_running(app: Any) -> AsyncIterator[None]:
    """Run ``app``'s lifespan around the block, as an ASGI server does."""
    to_app_send, to_app_receive = anyio.create_memory_object_stream[dict[str, Any]](10)
    from_app_send, from_app_receive = anyio.create_memory_object_stream[dict[str, Any]](10)

    async def receive() -> dict[str, Any]:
        return await to_app_receive.receive()

    async def send(message: dict[str, Any]) -> None:
        await from_app_send.send(message)

    scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}
    async with anyio.create_task_group() as tg:
        tg.start_soon(app, scope, receive, send)
        await to_app_send.send({"type": "lifespan.startup"})
        with anyio.fail_after(30):
            started = await from_app_receive.receive()
        assert started["type"] == "lifespan.startup.complete", started
        try:
            yield
        finally:
            await to_app_send.send({"type": "lifespan.shutdown"})
            with anyio.fail_after(30):
                stopped = await from_app_receive.receive()
            assert stopped["type"] == "lifespan.shutdown.complete", stopped


def lifespan_app() -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        EVENTS.append("startup")
        app.state.pool = "ready"
        yield
        app.state.pool = None
        EVENTS.append("shutdown")

    router = make_router()

    @router.tool()
    async def uses_db(request: Request = None) -> str:  # type: ignore[assignment]
        """Read the pool the app's lifespan opened."""
        return str(getattr(request.app.state, "pool", None))

    app = FastAPI(lifespan=lifespan)
    app.include_router(router)
    return app


async def test_b34_app_lifespan_still_runs_with_router(wire_factory: Any) -> None:
    app = lifespan_app()
    async with lifespan_running(app):
        assert EVENTS == ["startup"]
        async with open_client(app) as client:
            wire = wire_factory(client)
            await wire.initialize()
            legacy = result_of(await wire.legacy("tools/call", {"name": "uses_db", "arguments": {}}))
            modern = result_of(await wire.modern("tools/call", {"name": "uses_db", "arguments": {}}))
            assert tool_text(legacy) == tool_text(modern) == "ready"
    assert EVENTS == ["startup", "shutdown"]


async def test_b34_router_works_without_any_lifespan() -> None:
    router = make_router()

    @router.tool()
    async def hello() -> str:
        """Hi."""
        return "hi"

    app = FastAPI()
    app.include_router(router)
    async with open_client(app) as client:  # no lifespan is run at all
        wire = Wire(client)
        await wire.initialize()
        assert tool_text(result_of(await wire.legacy("tools/call", {"name": "hello", "arguments": {}}))) == "hi"
        assert tool_text(result_of(await wire.modern("tools/call", {"name": "hello", "arguments": {}}))) == "hi"
    async with lifespan_running(app):  # and the default lifespan starts and stops cleanly
        pass


async def test_b34_router_included_with_prefix_and_lifespan(wire_factory: Any) -> None:
    app = lifespan_app()
    router = make_router(path="/other")

    @router.tool()
    async def ping_tool() -> str:
        """Pong."""
        return "pong"

    app.include_router(router, prefix="/v2")
    async with lifespan_running(app):
        async with open_client(app) as client:
            wire = wire_factory(client)
            wire.path = "/v2/other"
            response = await wire.modern("tools/call", {"name": "ping_tool", "arguments": {}})
            assert tool_text(result_of(response)) == "pong"
            assert json.loads(response.content)["result"]["resultType"] == "complete"
