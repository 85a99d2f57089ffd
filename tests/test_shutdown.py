"""Graceful shutdown on the wire: every open stream ends at once (a ``retry`` hint where the
era has one), calls get ``MCP_SHUTDOWN_GRACE_SECONDS`` then a 503, new sessions and streams
get 503, and SIGTERM/SIGINT reach the router by chaining the server's own handler.

The same against a real uvicorn process (SIGTERM, exit within 5 s) is test_shutdown_uvicorn.py.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from types import FrameType
from typing import Any

import anyio
import pytest
from conftest import ACCEPT_BOTH, LEGACY, MODERN, asgi_exchange, assert_error, mcp_settings, modern_meta, open_client, rpc
from notify_app import listening
from resume_app import ENDED, GATES, build, fresh_gates
from resume_wire import events, get_stream, ids, messages, new_session, post_call

from fastapi_mcp_ctx._transport.events import StreamKey, parse_event_id
from fastapi_mcp_ctx._transport.shutdown import SHUTDOWN_REASON, ShutdownCoordinator, install_signal_hook
from fastapi_mcp_ctx.context import CancelSignal


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    with fresh_gates():
        yield


def _modern_call(name: str, arguments: dict[str, Any], request_id: int) -> tuple[dict[str, str], bytes]:
    headers = {
        "content-type": "application/json",
        "accept": ACCEPT_BOTH,
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": name,
    }
    body = json.dumps(rpc("tools/call", {"name": name, "arguments": arguments, "_meta": modern_meta()}, request_id)).encode()
    return headers, body


async def test_shutdown_ends_every_stream_at_once_and_bounds_the_calls() -> None:
    app, router = build(mcp_settings(shutdown_grace_seconds=0.5), list_changed={"tools"})
    new, old = await new_session(app), await new_session(app, "2025-06-18")
    GATES["r"], GATES["m"] = anyio.Event(), anyio.Event()
    modern_headers, modern_body = _modern_call("quiet", {"gate": "m"}, 21)
    async with (
        get_stream(app, new) as get_new,
        get_stream(app, old, version="2025-06-18") as get_old,
        listening(app, "sub-1", {"toolsListChanged": True}) as listen,
        post_call(app, new, "quiet", {"gate": "r"}, request_id=11, token=None) as resumable,
        asgi_exchange(app, "POST", headers=modern_headers, body_chunks=[modern_body], wait_started=False) as modern,
    ):
        await get_new.wait_for(lambda e: b"data:" in e.body)
        with anyio.fail_after(30):  # both calls are running (tracked), nothing sent on them yet
            while len(router.shutdown_coordinator._calls) < 2:  # pyright: ignore[reportPrivateUsage]
                await anyio.sleep(0.01)
        started = anyio.current_time()
        with anyio.fail_after(30):  # the calls wait on gates never set: only the 0.5 s grace ends them
            await router.shutdown()
        assert 0.5 <= anyio.current_time() - started < 20  # the grace, not a longer bound (margins for a loaded machine)
        for exchange in (get_new, get_old, listen, resumable, modern):
            await exchange.wait_for(lambda e: e.done.is_set())
        async with open_client(app) as client:  # a stopping replica takes no new sessions or streams
            init = rpc("initialize", {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}, 1)
            late = await client.post("/mcp", json=init, headers={"accept": ACCEPT_BOTH})
            assert_error(late, 503, -32603)
            assert late.headers["retry-after"] == "1"
            get = await client.get("/mcp", headers={"accept": "text/event-stream", "mcp-session-id": new, "mcp-protocol-version": LEGACY})
            assert_error(get, 503, -32603)
    assert events(get_new)[-1] == {"retry": "1000"}, "a 2025-11-25 GET stream ends after a retry hint"
    assert b"retry:" not in get_old.body, "a client before 2025-11-25 is told nothing it cannot use"
    assert messages(listen)[-1]["result"]["resultType"] == "complete"
    assert resumable.headers["content-type"] == "text/event-stream"
    assert events(resumable)[0]["data"] == "" and events(resumable)[-1] == {"retry": "1000"}, "primed, then closed"
    assert messages(resumable) == []
    assert modern.status == 503 and modern.headers["retry-after"] == "1"
    error = json.loads(modern.body)["error"]
    assert error["code"] == -32603 and error["data"]["reason"] == "server_shutting_down"
    assert sorted(ENDED) == [("m", True, SHUTDOWN_REASON), ("r", True, SHUTDOWN_REASON)]
    stream, _ = parse_event_id(ids(resumable)[0])  # what a resume (on another replica) would replay
    page = await router.event_store.read(StreamKey(new, stream), 1)
    final = json.loads(page.events[-1].data or b"")
    assert page.ended and final["id"] == 11 and final["error"]["data"]["reason"] == "server_shutting_down"


async def test_a_call_that_finishes_within_the_grace_answers_normally() -> None:
    app, router = build(mcp_settings(shutdown_grace_seconds=120))  # far beyond any delay of a loaded machine
    GATES["q"] = anyio.Event()
    headers, body = _modern_call("quiet", {"gate": "q"}, 4)
    async with asgi_exchange(app, "POST", headers=headers, body_chunks=[body], wait_started=False) as call:
        with anyio.fail_after(30):  # the call is running (tracked), however long that took
            while not router.shutdown_coordinator._calls:  # pyright: ignore[reportPrivateUsage]
                await anyio.sleep(0.01)
        router.begin_shutdown()
        await anyio.sleep(0.05)
        assert router.shutting_down
        GATES["q"].set()
        await call.wait_for(lambda e: e.done.is_set(), 30)
        with anyio.fail_after(30):
            await router.shutdown()  # already begun: waits for the same work
    assert call.status == 200 and json.loads(call.body)["result"]["structuredContent"] == {"result": "quiet q"}


async def test_shutdown_with_nothing_open_returns_at_once() -> None:
    _, router = build(mcp_settings(shutdown_grace_seconds=120))
    with anyio.fail_after(30):  # at once: not the 120 s grace
        await router.shutdown()
    assert router.shutting_down


async def test_the_shutdown_log_counts_open_streams_only(caplog: pytest.LogCaptureFixture) -> None:
    """The log line counts streams, not the notifier's closer: 0 with none open, 1 with a
    stream group (the notifier's) holding one; the group's closer runs either way."""
    closed: list[str] = []

    async def close() -> None:
        closed.append("group")

    open_now = [0]
    coordinator = ShutdownCoordinator(grace_seconds=1.0, signals=False)
    coordinator.add_stream_group(close, lambda: open_now[0])
    with caplog.at_level("INFO", logger="fastapi_mcp_ctx"):
        await coordinator.shutdown()
    assert "closing 0 open stream(s)" in caplog.text and closed == ["group"]
    coordinator.reopen()
    open_now[0] = 1
    caplog.clear()
    with caplog.at_level("INFO", logger="fastapi_mcp_ctx"):
        await coordinator.shutdown()
    assert "closing 1 open stream(s)" in caplog.text and closed == ["group", "group"]


async def test_streams_opened_after_shutdown_began_are_closed_too() -> None:
    coordinator = ShutdownCoordinator(grace_seconds=0)
    await coordinator.shutdown()
    closed = anyio.Event()

    async def close() -> None:
        closed.set()

    remove = coordinator.add_stream(close)
    with anyio.fail_after(30):
        await closed.wait()
    remove()


async def test_calls_get_the_grace_then_are_cancelled_and_later_ones_at_once() -> None:
    coordinator = ShutdownCoordinator(grace_seconds=0.2)
    running = CancelSignal()
    untrack = coordinator.track_call(running)
    unwound: list[float] = []

    async def call() -> None:
        await running.wait()
        await anyio.sleep(0.05)  # a call takes a moment to unwind
        unwound.append(anyio.current_time())
        untrack()

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        started = anyio.current_time()
        await coordinator.shutdown()
        returned = anyio.current_time()
    assert running.reason == SHUTDOWN_REASON
    assert 0.2 <= unwound[0] - started < 10 and returned >= unwound[0], "shutdown() waits for the call to unwind"
    late = CancelSignal()
    coordinator.track_call(late)
    assert late.reason == SHUTDOWN_REASON, "past the grace, a new call is cancelled at once"


# -- the signal hook -------------------------------------------------------------------------------


@pytest.fixture
def server_handlers() -> Iterator[list[int]]:
    """Install Python handlers for SIGTERM/SIGINT, as uvicorn does; restore the originals after."""
    seen: list[int] = []

    def server(signum: int, frame: FrameType | None) -> None:
        seen.append(signum)

    originals = {sig: signal.signal(sig, server) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield seen
    finally:
        for sig, handler in originals.items():
            signal.signal(sig, handler)


async def _first_request(app: Any) -> None:
    async with open_client(app) as client:
        await client.get("/mcp", headers={"accept": "text/event-stream"})  # any request is a first use


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_signal_begins_shutdown_and_still_reaches_the_servers_handler(server_handlers: list[int], signum: int) -> None:
    app, router = build(mcp_settings())
    await _first_request(app)
    assert getattr(signal.getsignal(signum), "_fastapi_mcp_ctx_previous", None) is not None
    signal.raise_signal(signum)
    assert server_handlers == [signum], "the server's own handler runs, so its shutdown proceeds"
    with anyio.fail_after(30):
        while not router.shutting_down:
            await anyio.sleep(0.01)
    await _first_request(app)  # installed once: no second link in the chain
    assert getattr(getattr(signal.getsignal(signum), "_fastapi_mcp_ctx_previous"), "_fastapi_mcp_ctx_previous", None) is None


async def test_the_hook_can_be_switched_off(server_handlers: list[int]) -> None:
    app, router = build(mcp_settings(shutdown_signals=False))
    await _first_request(app)
    assert getattr(signal.getsignal(signal.SIGTERM), "_fastapi_mcp_ctx_previous", None) is None
    signal.raise_signal(signal.SIGTERM)
    await anyio.sleep(0.05)
    assert server_handlers == [signal.SIGTERM] and not router.shutting_down


def test_default_dispositions_are_left_alone() -> None:
    originals = {sig: signal.signal(sig, handler) for sig, handler in ((signal.SIGTERM, signal.SIG_DFL), (signal.SIGINT, signal.default_int_handler))}
    try:
        assert install_signal_hook(ShutdownCoordinator(grace_seconds=0)) is False
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        for sig, handler in originals.items():
            signal.signal(sig, handler)


async def test_a_signal_cancelled_before_its_scope_is_bound_cancels_the_scope_at_once() -> None:
    import anyio

    from fastapi_mcp_ctx.context import CancelSignal

    signal = CancelSignal()
    signal.cancel("cancelled by the client")
    reached = False
    with anyio.CancelScope() as scope:
        signal.bind(scope)
        await anyio.sleep(5)
        reached = True
    signal.bind(None)
    assert scope.cancelled_caught and not reached


async def test_a_lifespan_run_again_after_a_finished_shutdown_serves_again() -> None:
    """One app object served twice in a process (a ``with TestClient(app)`` per test): a call still
    running when the first lifespan ended made it shut down; the second lifespan serves again."""
    from fastapi import FastAPI

    from fastapi_mcp_ctx import McpRouter

    router = McpRouter(settings=mcp_settings(shutdown_grace_seconds=0.01))
    app = FastAPI()
    app.include_router(router)
    running = CancelSignal()
    async with app.router.lifespan_context(app):
        router.shutdown_coordinator.call_started(running)
    assert router.shutting_down and running.reason == SHUTDOWN_REASON  # its grace ran out at exit
    router.shutdown_coordinator.call_ended(running)
    async with app.router.lifespan_context(app):
        assert not router.shutting_down
        async with open_client(app) as client:
            response = await client.post("/mcp", json=rpc("ping"), headers={"Accept": ACCEPT_BOTH, "MCP-Protocol-Version": LEGACY})
            assert response.status_code != 503, response.text
