"""The Context from sync tools and sync dependencies (issue 22, point 2).

A plain ``def`` tool or dependency runs in a worker thread, as FastAPI runs a sync path
operation; there every awaitable member of the Context runs to completion on the call's event
loop and returns its result (``fastapi_mcp_ctx._bridge``). Over real HTTP (uvicorn) with the
official MCP client in both modes: the log line reaches the client, the progress notifications
arrive, the state is written and read back, and ``ctx.elicit`` works (2025: a server→client
request on the call's stream; 2026-07-28: ``input_required``, the handler run again on the
retry). A Context coroutine an async handler never awaits is reported once, naming the tool
and the call, in the server log and (development mode) in the tool's result.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from conftest import BASE_URL, Wire, final_message, make_app, make_router
from fastapi import Depends, FastAPI
from mcp import Client
from mcp.client.session import ClientRequestContext
from pydantic import BaseModel
from serving import uvicorn_thread

from fastapi_mcp_ctx import Context, McpRouter, mcp_context
from fastapi_mcp_ctx.testing import McpTestClient

MODES = ["legacy", "2026-07-28"]
RUNS: list[str] = []
STORED: dict[str, Any] = {}


class Name(BaseModel):
    name: str


def audited(ctx: Context = Depends(mcp_context)) -> str:
    """A sync dependency: writes and reads ``ctx.state`` and logs, in FastAPI's thread pool."""
    ctx.state.set("audit", "written by a sync dependency")
    ctx.log.info("dependency ran")
    value: str = ctx.state.get("audit")
    return value


def build_router() -> McpRouter:
    router = make_router()

    @router.tool()
    def record(text: str, ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """A sync tool using the Context without await."""
        off_loop = asyncio._get_running_loop() is None  # pyright: ignore[reportPrivateUsage]
        ctx.log.info("recorded", text=text)
        first = ctx.report_progress(1, 2, "half")
        ctx.state.set("last", {"text": text})
        back = ctx.state.get("last")
        ctx.report_progress(2, 2, "done")
        return {"off_loop": off_loop, "first_progress_sent": first, "back": back}

    @router.tool()
    async def read_back(ctx: Context = Depends(mcp_context)) -> Any:
        """Read what the sync tool stored, from an async tool."""
        return await ctx.state.get("last")

    @router.tool()
    async def via_dependency(audit: str = Depends(audited), ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """An async tool whose sync dependency used the Context."""
        return {"dependency": audit, "stored": await ctx.state.get("audit")}

    @router.tool()
    def greet_user(ctx: Context = Depends(mcp_context)) -> str:
        """A sync tool asking the user (both eras)."""
        RUNS.append("greet_user")
        answer = ctx.elicit("Your name?", Name)
        return f"Hello, {answer.data.name}" if answer.data is not None else f"no name ({answer.action})"

    return router


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with uvicorn_thread(make_app(build_router())) as url:
        yield url


@pytest.fixture(autouse=True)
def _clear() -> None:
    RUNS.clear()


def client(url: str, mode: str, **options: Any) -> Client:
    extra: dict[str, Any] = {"log_level": "info"} if mode != "legacy" else {}
    return Client(url, mode=mode, cache=None, **extra, **options)  # pyright: ignore[reportArgumentType]


@pytest.mark.parametrize("mode", MODES)
async def test_sync_tool_logs_reports_progress_and_writes_state(server_url: str, mode: str) -> None:
    logs: list[types.LoggingMessageNotificationParams] = []
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    with anyio.fail_after(30):
        async with client(server_url, mode, logging_callback=on_log) as c:
            result = await c.call_tool("record", {"text": f"hi {mode}"}, progress_callback=on_progress)
            again = await c.call_tool("read_back", {})
    assert result.is_error is False, result.content
    assert result.structured_content == {"off_loop": True, "first_progress_sent": True, "back": {"text": f"hi {mode}"}}
    assert [(entry.level, entry.data) for entry in logs] == [("info", {"text": f"hi {mode}", "message": "recorded"})]
    assert progress == [(1, 2, "half"), (2, 2, "done")]
    assert again.structured_content == {"result": {"text": f"hi {mode}"}}  # written for real, read back by another call


@pytest.mark.parametrize("mode", MODES)
async def test_sync_dependency_uses_the_context(server_url: str, mode: str) -> None:
    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    with anyio.fail_after(30):
        async with client(server_url, mode, logging_callback=on_log) as c:
            result = await c.call_tool("via_dependency", {})
    assert result.is_error is False, result.content
    assert result.structured_content == {"dependency": "written by a sync dependency", "stored": "written by a sync dependency"}
    assert [entry.data for entry in logs] == [{"message": "dependency ran"}]


async def on_elicit(ctx: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    assert isinstance(params, types.ElicitRequestFormParams)
    RUNS.append(f"asked: {params.message}")
    return types.ElicitResult(action="accept", content={"name": "Ada"})


@pytest.mark.parametrize("mode", MODES)
async def test_sync_tool_elicits_in_both_eras(server_url: str, mode: str) -> None:
    with anyio.fail_after(30):
        async with client(server_url, mode, elicitation_callback=on_elicit) as c:
            result = await c.call_tool("greet_user", {})
    assert result.is_error is False, result.content
    assert result.structured_content == {"result": "Hello, Ada"}
    if mode == "legacy":  # a live elicitation/create on the call's stream, the thread waiting for the answer
        assert RUNS == ["greet_user", "asked: Your name?"]
    else:  # input_required, then the retry runs the sync tool again and ctx.elicit returns the answer
        assert RUNS == ["greet_user", "asked: Your name?", "greet_user"]


# -- threads the event loop did not start, loops of a sync tool's own, outside a call ----------


async def test_a_thread_of_the_tools_own_uses_the_calls_loop(era: str) -> None:
    router = make_router()

    @router.tool()
    def fan_out(ctx: Context = Depends(mcp_context)) -> list[Any]:
        """Writes from threads it starts, then reads back through asyncio.run in one more."""
        workers = [threading.Thread(target=ctx.state.set, args=(f"k{i}", i)) for i in range(3)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        found: list[Any] = []

        async def read() -> dict[str, Any]:  # on a loop of the thread's own: awaited there, run on the call's loop
            return await ctx.state.get_many(["k0", "k1", "k2"])

        reader = threading.Thread(target=lambda: found.append(asyncio.run(read())))
        reader.start()
        reader.join()
        return found

    async with McpTestClient(make_app(router), era=era) as c:  # type: ignore[arg-type]
        result = await c.call_tool("fan_out", {})
    assert result.is_error is False, result.content
    assert result.structured == {"result": [{"k0": 0, "k1": 1, "k2": 2}]}


def test_outside_a_call_the_coroutine_is_returned_as_before() -> None:
    from fastapi_mcp_ctx.backends.memory import MemoryBackend  # noqa: PLC0415
    from fastapi_mcp_ctx.state import ContextState  # noqa: PLC0415

    state = ContextState(MemoryBackend(), "t1")
    asyncio.run(state.set("k", 1))  # no loop yet when ctx.state.set(...) is evaluated: asyncio.run runs it
    assert asyncio.run(state.get("k")) == 1


# -- a coroutine an async handler never awaits --------------------------------------------------


def forgetful_router(**settings: Any) -> McpRouter:
    router = make_router(**settings)

    @router.tool()
    async def forgetful(ctx: Context = Depends(mcp_context)) -> str:
        """Forgets two awaits, keeps the others."""
        await ctx.log.info("kept")
        ctx.log.info("lost")  # pyright: ignore[reportUnusedCoroutine]
        ctx.state.set("lost_key", 1)  # pyright: ignore[reportUnusedCoroutine]
        await ctx.state.set("awaited", 2)
        STORED["task"] = asyncio.create_task(ctx.state.set("by_task", 3))  # a task runs it: not reported
        return "done"

    @router.tool()
    async def careful(ctx: Context = Depends(mcp_context)) -> Any:
        """Awaits everything: nothing is reported."""
        await ctx.log.info("kept")
        await ctx.state.set("k", 1)
        await ctx.report_progress(1)
        return await ctx.state.get_many(["lost_key", "awaited", "by_task"])

    return router


def _reports(records: list[logging.LogRecord]) -> list[str]:
    return [r.getMessage() for r in records if r.name == "fastapi_mcp_ctx" and "never awaited" in r.getMessage()]


@pytest.mark.parametrize("development", [False, True])
async def test_an_unawaited_context_coroutine_is_reported_once(era: str, development: bool, caplog: pytest.LogCaptureFixture) -> None:
    app = make_app(forgetful_router(debug=development))
    caplog.set_level(logging.WARNING, logger="fastapi_mcp_ctx")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with McpTestClient(app, era=era) as c:  # type: ignore[arg-type]
            result = await c.call_tool("forgetful", {})
            await asyncio.sleep(0)  # let the task started by the tool finish
            checked = await c.call_tool("careful", {})
        gc.collect()
    reports = _reports(caplog.records)
    assert len(reports) == 1, reports  # one line for the call; careful is not reported
    report = reports[0]
    assert report.startswith("tool 'forgetful' (request id ")
    assert "ctx.log.info() at " in report and "ctx.state.set() at " in report and "test_sync_context.py:" in report
    assert report.count("() at ") == 2  # the awaited calls and the task's coroutine are not named
    assert "write `await` before it" in report
    assert not [w for w in caught if "never awaited" in str(w.message)]  # closed by the report: Python's warning is not a second one
    assert checked.structured == {"result": {"awaited": 2, "by_task": 3}}  # the unawaited ctx.state.set wrote nothing
    notices = [block["text"] for block in result.content if block.get("type") == "text" and block["text"].startswith("[development]")]
    assert result.is_error is False and result.structured == {"result": "done"}
    if development:
        assert notices == [f"[development] {report}"]
    else:
        assert notices == []


async def test_fastapi_debug_is_development_mode() -> None:
    app: FastAPI = make_app(forgetful_router(), debug=True)
    async with McpTestClient(app) as c:
        result = await c.call_tool("forgetful", {})
    assert any(block.get("text", "").startswith("[development] tool 'forgetful'") for block in result.content)


async def test_a_plain_function_called_from_async_code_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    router = make_router()

    def helper(ctx: Context) -> None:
        ctx.log.info("from a helper")  # pyright: ignore[reportUnusedCoroutine]  # on the loop's thread: cannot block

    @router.tool()
    async def calls_helper(ctx: Context = Depends(mcp_context)) -> str:
        """Calls a plain function that forgets it runs on the loop."""
        helper(ctx)
        return "ok"

    caplog.set_level(logging.WARNING, logger="fastapi_mcp_ctx")
    async with McpTestClient(make_app(router)) as c:
        await c.call_tool("calls_helper", {})
    assert len(_reports(caplog.records)) == 1
    assert "ctx.log.info() at " in _reports(caplog.records)[0]


# -- the guide's example -------------------------------------------------------------------------


async def test_the_guides_sync_example_runs_in_both_eras(era: str) -> None:
    from conftest import guide_example  # noqa: PLC0415

    namespace = guide_example("## Sync tools and dependencies")
    asked: list[str] = []

    def confirm(params: dict[str, Any]) -> Any:
        asked.append(params["message"])
        return namespace["Confirm"](ok=True)

    async with McpTestClient(namespace["app"], era=era, log_level="info", elicitation=confirm) as c:  # type: ignore[arg-type]
        result = await c.call_tool("archive", {"folder": "2024"}, progress_token="p1")
    assert result.is_error is False, result.content
    assert result.structured == {"result": "archived 2024"}
    assert asked == ["Archive 2024?"]
    assert [p["progress"] for p in result.progress] == [1, 2]
    calls = 1 if era == "legacy" else 2  # 2026: the retry ran the dependency again, as the guide says
    assert [entry["data"] for entry in result.logs] == [{"folder": "2024", "calls": calls, "message": "archived"}]


async def test_consent_sampling_and_roots_from_a_sync_tool(era: str) -> None:
    router = make_router()
    runs: list[str] = []

    @router.tool()
    def void_invoice(invoice: str, ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """Ask the model, read the roots, then void behind a consent gate (all without await)."""
        runs.append(invoice)
        reason = ctx.sample("Why void it?", max_tokens=5)
        roots = ctx.list_roots()
        ctx.consent.require(operation="void_invoice", target=invoice, message=f"Void {invoice}?")
        return {"reason": getattr(reason.content, "text", None), "roots": [str(root.uri) for root in roots]}

    def confirm(params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": {"confirm": True}}

    async with McpTestClient(
        make_app(router), era=era, elicitation=confirm, sampling=lambda params: "duplicate", roots=["file:///books"]  # type: ignore[arg-type]
    ) as c:
        result = await c.call_tool("void_invoice", {"invoice": "A-1"})
    assert result.is_error is False, result.content
    assert result.structured == {"reason": "duplicate", "roots": ["file:///books"]}
    assert runs == ["A-1"] * (2 if era == "legacy" else 4), runs  # 2025: sample and roots asked live, the gate re-enters once; 2026: a round per question


async def test_cancelling_the_call_cuts_short_the_context_calls_of_its_threads() -> None:
    """The Context work a sync tool's threads run on the call's loop belongs to the call:
    ``notifications/cancelled`` cancels a question awaited on a loop of the thread's own
    (``asyncio.run``: a CancelledError there, not the 30 s server-request timeout), and a Context
    call made once the call is cancelled raises ``CallCancelled`` without running; re-raised,
    the call is answered -32800 (no internal error)."""
    from fastapi_mcp_ctx._bridge import CallCancelled  # noqa: PLC0415

    seen: list[str] = []
    started = threading.Event()
    router = make_router(server_request_timeout_seconds=30.0)

    @router.tool()
    def ask_on_own_loop(ctx: Context = Depends(mcp_context)) -> str:
        """Asks through asyncio.run, then logs."""

        async def ask() -> None:
            await ctx.elicit("Your name?", Name)

        started.set()
        try:
            asyncio.run(ask())
        except asyncio.CancelledError:
            seen.append("question cancelled")
        try:
            ctx.log.info("after the cancellation")
        except CallCancelled:
            seen.append("log refused")
            raise
        return "answered"

    replies: list[httpx.Response] = []
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=make_app(router)), base_url=BASE_URL, timeout=60.0) as client:
        wire = Wire(client)
        await wire.initialize(capabilities={"elicitation": {"form": {}}})

        async def call() -> None:
            replies.append(await wire.legacy("tools/call", {"name": "ask_on_own_loop", "arguments": {}}, request_id=9, check=False))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            while not started.is_set():  # the tool runs (asking or about to): cancelled either way
                await anyio.sleep(0.05)
            note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}
            assert (await wire.post(note, wire.legacy_headers())).status_code == 202
    assert seen == ["question cancelled", "log refused"]
    assert final_message(replies[0]).get("error", {}).get("code") == -32800


async def test_a_signal_wait_after_its_call_ended_raises_at_once_on_the_loop_and_from_a_thread() -> None:
    """No ``ctx.signal.wait()`` outlives its call: once the call ended uncancelled nothing can
    cancel it any more, so a wait begun then (on the loop, or from a thread the tool started)
    raises ``CallCancelled`` at once instead of blocking for ever (a hostile run)."""
    import asyncio  # noqa: PLC0415

    from fastapi_mcp_ctx._bridge import CallCancelled  # noqa: PLC0415
    from fastapi_mcp_ctx._context.cancel_signal import CancelSignal  # noqa: PLC0415

    signal = CancelSignal()
    signal.loop = asyncio.get_running_loop()
    waiting = asyncio.ensure_future(signal.wait())
    await asyncio.sleep(0)
    signal.release()  # the call ended while one waited on the loop
    with pytest.raises(CallCancelled):
        await asyncio.wait_for(waiting, 30)
    with pytest.raises(CallCancelled):
        await signal.wait()

    def from_a_thread() -> None:
        signal.wait()  # bridged: runs on the call's loop, returns or raises

    with pytest.raises(CallCancelled):
        await asyncio.wait_for(asyncio.to_thread(from_a_thread), 30)

    cancelled = CancelSignal()
    cancelled.cancel("user")
    cancelled.release()
    await cancelled.wait()  # a cancelled call's wait returns, before and after its end
