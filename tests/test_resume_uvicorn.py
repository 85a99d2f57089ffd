"""Resumption and graceful shutdown against a real uvicorn process (tests/resume_app.py).

- the official ``mcp`` 2.3 client (legacy mode) resumes a call whose connection the server
  closed (``ctx.close_sse_stream()``): it reconnects with ``GET`` + ``Last-Event-ID`` by itself
  and receives the progress sent meanwhile and the result; in 2026 nothing is closed; likewise
  its GET stream (``ctx.close_standalone_sse_stream()``): what was sent meanwhile arrives once;
- SIGTERM while a GET stream, an idle official legacy client (it holds its own GET stream), an
  in-flight resumable 2025 call and an in-flight 2026 call are open ends the process within
  5 s, gracefully (uvicorn's "Finished server process", no traceback): the streams end after a ``retry`` hint, the 2026 call is answered
  503 once the grace (``MCP_SHUTDOWN_GRACE_SECONDS``, default 3 s) ran out. Without the
  router's hook uvicorn waits for the clients as long as they stay.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from conftest import ACCEPT_BOTH, LEGACY, MODERN, modern_meta, rpc, sse_events
from mcp import Client
from serving import uvicorn_process

TESTS = Path(__file__).resolve().parent


def _text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def test_official_client_resumes_a_call_whose_connection_the_server_closed() -> None:
    with uvicorn_process("resume_app:app", app_dir=TESTS, env={"MCP_SSE_RETRY_MS": "100"}) as (_, url, log):
        seen: list[tuple[float, str | None]] = []

        async def progress(value: float, total: float | None, message: str | None) -> None:
            seen.append((value, message))

        with anyio.fail_after(20):
            async with Client(url, mode="legacy") as client:
                result = await client.call_tool("poll_progress", {}, progress_callback=progress)
            assert _text(result) == "polled closed=True", log.read_text()
            assert seen == [(1.0, "before close"), (2.0, "after close")], "what was sent after the close arrives on the resumed stream"
            async with Client(url, mode="2026-07-28") as client:
                result = await client.call_tool("poll_progress", {})
            assert _text(result) == "polled closed=False", "2026 streams are not resumable: nothing is closed"


async def test_official_client_resumes_its_get_stream_and_gets_what_was_sent_meanwhile() -> None:
    with uvicorn_process("resume_app:app", app_dir=TESTS, env={"MCP_SSE_RETRY_MS": "100"}) as (_, url, log):
        received: list[Any] = []

        async def on_log(params: types.LoggingMessageNotificationParams) -> None:
            received.append(params.data)

        with anyio.fail_after(20):
            async with Client(url, mode="legacy", logging_callback=on_log) as client:
                while (await client.call_tool("close_get", {})).structured_content != {"result": True}:
                    await anyio.sleep(0.05)  # until the client's GET stream is attached, then it is closed
                assert (await client.call_tool("poke_me", {"text": "while away"})).structured_content == {"result": True}
                while "while away" not in received:
                    await anyio.sleep(0.05)  # delivered once the client resumed with Last-Event-ID
                await client.call_tool("poke_me", {"text": "live again"})
                while "live again" not in received:
                    await anyio.sleep(0.05)
        assert received.count("while away") == 1, log.read_text()


async def _collect(response: httpx.Response, into: bytearray) -> None:
    async for chunk in response.aiter_raw():
        into.extend(chunk)


async def test_sigterm_with_open_streams_and_long_calls_ends_the_server_within_5_seconds() -> None:
    with uvicorn_process("resume_app:app", app_dir=TESTS) as (proc, url, log):
        async with httpx.AsyncClient(timeout=httpx.Timeout(30.0)) as http, anyio.create_task_group() as tg:
            init = rpc("initialize", {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}, 0)
            answer = await http.post(url, json=init, headers={"accept": ACCEPT_BOTH})
            sid = answer.headers["mcp-session-id"]
            legacy = {"accept": ACCEPT_BOTH, "mcp-session-id": sid, "mcp-protocol-version": LEGACY}
            await http.post(url, json=rpc("notifications/initialized", {}, None), headers=legacy)
            bodies: dict[str, bytearray] = {"get": bytearray(), "post": bytearray(), "modern": bytearray()}
            statuses: dict[str, int] = {}

            async def stream(name: str, method: str, **kwargs: Any) -> None:
                async with http.stream(method, url, **kwargs) as response:
                    statuses[name] = response.status_code
                    await _collect(response, bodies[name])

            get_headers = {"accept": "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": LEGACY}
            tg.start_soon(lambda: stream("get", "GET", headers=get_headers))
            long_call = rpc("tools/call", {"name": "hold", "arguments": {"seconds": 60}}, 7)
            tg.start_soon(lambda: stream("post", "POST", json=long_call, headers=legacy))
            modern_call = rpc("tools/call", {"name": "hold", "arguments": {"seconds": 60}, "_meta": modern_meta()}, 8)
            modern_headers = {"accept": ACCEPT_BOTH, "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "hold"}
            tg.start_soon(lambda: stream("modern", "POST", json=modern_call, headers=modern_headers))
            idle_ready, server_gone = anyio.Event(), anyio.Event()

            async def idle_client() -> None:  # an idle official client: it holds its own GET stream
                try:
                    async with Client(url, mode="legacy") as client:
                        await client.list_tools()
                        idle_ready.set()
                        await server_gone.wait()
                except Exception:  # noqa: BLE001 - the server is gone: the client may complain on its way out
                    pass

            tg.start_soon(idle_client)
            with anyio.fail_after(15):
                await idle_ready.wait()
                while b"holding" not in bodies["post"] or b"data:" not in bodies["get"]:
                    await anyio.sleep(0.05)
            await anyio.sleep(0.3)
            started = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            code = await anyio.to_thread.run_sync(lambda: proc.wait(timeout=15))
            elapsed = time.monotonic() - started
            server_gone.set()
            await anyio.sleep(0.2)
            tg.cancel_scope.cancel()
        server_log = log.read_text()
        print(f"SIGTERM to exit: {elapsed:.2f} s")
        assert elapsed < 5, f"SIGTERM took {elapsed:.1f} s:\n{server_log}"
        assert code in (0, -signal.SIGTERM), server_log  # uvicorn re-raises the signal it handled once it is done
        assert "Traceback" not in server_log, server_log
        assert "Finished server process" in server_log
        get_events = sse_events(bodies["get"].decode())
        assert get_events[0]["data"] == "" and get_events[-1] == {"retry": "1000"}, bodies["get"]
        post_events = sse_events(bodies["post"].decode())
        assert post_events[-1] == {"retry": "1000"}, "the resumable call's connection ends after a retry hint"
        assert not any(json.loads(e["data"]).get("id") == 7 for e in post_events if e.get("data"))
        assert statuses["modern"] == 503, bodies["modern"]
        assert json.loads(bytes(bodies["modern"]))["error"]["data"]["reason"] == "server_shutting_down"


@pytest.mark.parametrize("hook", ["true", "false"])
async def test_with_the_hook_off_uvicorn_waits_for_the_client(hook: str) -> None:
    with uvicorn_process("resume_app:app", app_dir=TESTS, env={"MCP_SHUTDOWN_SIGNALS": hook}) as (proc, url, _log):
        async with httpx.AsyncClient(timeout=httpx.Timeout(30.0)) as http, anyio.create_task_group() as tg:
            init = rpc("initialize", {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}, 0)
            sid = (await http.post(url, json=init, headers={"accept": ACCEPT_BOTH})).headers["mcp-session-id"]
            body = bytearray()

            async def get() -> None:
                headers = {"accept": "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": LEGACY}
                async with http.stream("GET", url, headers=headers) as response:
                    await _collect(response, body)

            tg.start_soon(get)
            with anyio.fail_after(10):
                while b"data:" not in body:
                    await anyio.sleep(0.05)
            started = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            try:
                await anyio.to_thread.run_sync(lambda: proc.wait(timeout=2.5))
                stopped = True
            except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired: still waiting for the client
                stopped = False
            tg.cancel_scope.cancel()
        if hook == "true":
            assert stopped and time.monotonic() - started < 2.5
        else:
            assert not stopped, "uvicorn alone waits for an open GET stream (the fault the hook removes)"
