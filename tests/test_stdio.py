"""The stdio transport end to end: a real server process on ``tests/stdio_app.py``.

The official ``mcp`` client (2.3) drives it in every mode (``legacy``, ``2026-07-28``,
``auto``); raw pipes check the wire rules the client cannot show: stdout purity (known
fault B59), bad lines, cancellation without an answer (B13, B14), a slow call that does not
block reading (B61), notifications before the result, and the end of the process on stdin
EOF or SIGTERM within 2 seconds, teardown included (B60). Spec 2025-11-25
``basic/transports`` §stdio; every wait is bounded.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from stdio_wire import APP, MODERN, STDIO_COMMAND, TESTS_DIR, envelope, notification, rpc, server_env, spawn

MODES = ["legacy", "2026-07-28", "auto"]


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def _markers(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split() if path.exists() else []


# -- the official client ------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # ping and logging/setLevel, deprecated at 2026-07-28
@pytest.mark.parametrize("mode", MODES)
async def test_official_client_lists_and_calls_tools(mode: str, tmp_path: Path) -> None:
    marker = tmp_path / "marker.txt"
    params = StdioServerParameters(command=STDIO_COMMAND[0], args=[*STDIO_COMMAND[1:], APP], cwd=TESTS_DIR, env=server_env(marker))
    progress: list[tuple[float, float | None, str | None]] = []
    logs: list[Any] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    with (tmp_path / "client-stderr.txt").open("w") as errlog:
        with anyio.fail_after(30):
            client = Client(stdio_client(params, errlog=errlog), mode=mode, cache=None, log_level="info", logging_callback=on_log)
            async with client:
                modern = mode != "legacy"
                assert client.protocol_version == (MODERN if modern else "2025-11-25")
                if not modern:
                    await client.send_ping()
                    await client.set_logging_level("info")
                names = {tool.name for tool in (await client.list_tools()).tools}
                assert {"shout", "with_db", "count", "slow", "later", "remember"} <= names

                assert _text(await client.call_tool("shout", {"text": "hi"})) == "HI"  # its stdout noise went elsewhere

                seen = (await client.call_tool("with_db", {})).structured_content
                assert seen is not None
                assert seen == {
                    "db": "db",
                    "greeting": "overridden greeting",  # app.dependency_overrides apply
                    "author": "anonymous",  # no headers on stdio: the default
                    "client": ["stdio", 0],
                    "method": "POST",
                    "path": "/mcp",
                    "app_is_app": True,
                    "pool": "pool-1",  # lifespan state reaches request.state
                    "body_method": "tools/call",  # the request body is the message
                    "tenant": "default",
                    "era": "modern" if modern else "legacy",
                    "session_id": None if modern else seen["session_id"],
                    "auth": None,
                }
                if not modern:
                    assert isinstance(seen["session_id"], str) and len(seen["session_id"]) == 32

                result = await client.call_tool("count", {"n": 3}, progress_callback=on_progress)
                assert _text(result) == "counted to 3"
                assert progress == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
                assert [entry["value"] for entry in logs] == [1, 2, 3]

                assert _text(await client.call_tool("later", {})) == "scheduled"
                assert _text(await client.call_tool("remember", {"key": "k", "value": "v"})) == "v"
                recorded = (await client.call_tool("events", {})).structured_content
                assert recorded == {"result": ["db:open", "tool:with_db", "db:close", "background"]}
    assert _markers(marker) == ["startup", "shutdown"]


# -- raw wire: stdout purity, bad lines ---------------------------------------------------
async def test_stdout_carries_only_json_rpc(tmp_path: Path) -> None:
    async with spawn(tmp_path) as server:
        assert (await server.initialize("1999-01-01"))["protocolVersion"] == "2025-11-25"  # counter-offers the latest
        reply = await server.request("tools/call", {"name": "shout", "arguments": {"text": "x"}}, 1)
        assert reply["result"]["content"][0]["text"] == "X"
        reply = await server.request("tools/call", {"name": "read_stdin", "arguments": {}}, 2)
        assert reply["result"]["structuredContent"] == {"own": "", "child": ""}  # stdin is the transport's alone
        await server.request("ping", None, 3)  # the transport still reads its own stdin
        size = 300_000  # 600 kB of UTF-8 in one line
        reply = await server.request("tools/call", {"name": "big", "arguments": {"size": size}}, 4)
        assert reply["result"]["content"][0]["text"] == "é" * size
        await server.close_stdin()
        assert await server.rest_of_stdout() == []
        assert await server.wait() == 0
    stderr = server.stderr()
    for noise in ("import-time noise", "print() noise", "sys.stdout noise", "fd 1 noise", "logging-handler noise", "child-process noise"):
        assert noise in stderr


async def test_bad_lines_get_errors_and_the_session_goes_on(tmp_path: Path) -> None:
    async with spawn(tmp_path, env=server_env(MCP_MAX_BODY_BYTES="2048")) as server:
        early = await server.request("tools/list", None, "early")
        assert early["error"]["code"] == -32600 and "initialize" in early["error"]["message"]
        assert (await server.request("ping", None, "early-ping"))["result"] == {}  # ping is allowed before initialize
        await server.initialize()
        await server.send(b"\n   \n\r\n")  # blank lines are ignored
        cases: list[tuple[bytes, int, Any]] = [
            (b"not json\n", -32700, None),
            (b"\xff\xfe{}\n", -32700, None),
            (b"[]\n", -32600, None),
            (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]\n', -32600, None),
            (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}\n', -32600, None),
            (b'{"jsonrpc":"1.0","id":7,"method":"ping"}\n', -32600, 7),
            (b'{"jsonrpc":"2.0","id":8,"method":"nope/nope"}\n', -32601, 8),
            (b'{"jsonrpc":"2.0","id":9,"method":"ping","params":{"pad":"' + b"x" * 5000 + b'"}}\n', -32600, None),
        ]
        for line, code, request_id in cases:
            await server.send(line)
            reply = await server.recv()
            assert reply["error"]["code"] == code, (line[:40], reply)
            assert "id" in reply and reply["id"] == request_id
        assert "exceeds 2048 bytes" in reply["error"]["message"]
        await server.send(b'{"jsonrpc":"2.0","id":42,"result":{}}\n')  # a response nobody asked for: ignored
        enveloped = await server.request("tools/list", {"_meta": envelope()}, 10)
        assert enveloped["error"]["code"] == -32600 and "2025 handshake era" in enveloped["error"]["message"]
        again = await server.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}}, 11)
        assert again["error"]["code"] == -32600
        assert (await server.request("ping", None, 12))["result"] == {}
        await server.send(b'{"jsonrpc":"2.0","id":13,"method":"ping"}')  # no newline: still read at EOF
        await server.close_stdin()
        assert [m.get("id") for m in await server.rest_of_stdout()] == [13]
        assert await server.wait() == 0


async def test_a_client_that_reads_late_does_not_deadlock_the_pipes(tmp_path: Path) -> None:
    async with spawn(tmp_path) as server:
        await server.initialize()
        size = 2_500_000  # a 5 MB line: far beyond the pipe buffer, so the server's write blocks
        await server.send(rpc("tools/call", {"name": "big", "arguments": {"size": size}}, "big"))
        pings = 2000  # about 100 kB more on stdin while nobody reads stdout
        with anyio.fail_after(10):  # the server keeps reading stdin although its stdout is full
            await server.send(b"".join(json.dumps(rpc("ping", None, i)).encode() + b"\n" for i in range(pings)))
        first = await server.recv(timeout=60)
        assert first["id"] == "big" and first["result"]["content"][0]["text"] == "é" * size
        ids = [(await server.recv(timeout=60))["id"] for _ in range(pings)]
        assert sorted(ids) == list(range(pings))


# -- raw wire: concurrency, cancellation, notifications -----------------------------------
async def test_slow_call_does_not_block_reading_and_results_come_out_of_order(tmp_path: Path) -> None:
    async with spawn(tmp_path) as server:
        await server.initialize()
        await server.send(rpc("tools/call", {"name": "slow", "arguments": {"seconds": 2.0}}, 10))
        await server.send(rpc("tools/call", {"name": "slow", "arguments": {"seconds": 0.0, "label": "fast"}}, 11))
        await server.send(rpc("ping", None, 12))
        first, second = await server.recv(), await server.recv()
        assert {first["id"], second["id"]} == {11, 12}  # answered before the slow call sent first: neither waited for it
        last = await server.recv()
        assert last["id"] == 10 and last["result"]["content"][0]["text"] == "slow done"
        await server.send(rpc("tools/call", {"name": "slow", "arguments": {"seconds": 3.0}}, 20))  # in flight while the duplicate comes
        duplicate = await server.request("tools/call", {"name": "slow", "arguments": {"seconds": 0}}, 20)
        assert duplicate["error"]["code"] == -32600 and "in flight" in duplicate["error"]["message"]
        assert (await server.recv())["id"] == 20


async def test_cancelled_call_is_interrupted_and_never_answered(tmp_path: Path) -> None:
    async with spawn(tmp_path) as server:
        await server.initialize()
        await server.send(rpc("tools/call", {"name": "slow", "arguments": {"seconds": 30}}, 5))
        await server.send(rpc("tools/list", None, 6))
        assert (await server.recv())["id"] == 6  # the call is running
        await server.send(notification("notifications/cancelled", {"requestId": 5, "reason": "user"}))
        await server.send(notification("notifications/cancelled", {"requestId": 5}))  # twice: ignored
        await server.send(notification("notifications/cancelled", {"requestId": 999}))  # unknown: ignored
        await server.send(notification("notifications/cancelled", {"requestId": "5"}))  # "5" is not 5
        await server.expect_silence(0.3)
        reply = await server.request("tools/call", {"name": "events", "arguments": {}}, 7)
        assert reply["result"]["structuredContent"] == {"result": ["slow:cancelled"]}
        await server.send(rpc("tools/call", {"name": "slow", "arguments": {"seconds": 0}}, 5))  # the id is free again
        assert (await server.recv())["id"] == 5
        await server.close_stdin()
        assert await server.rest_of_stdout() == []
        assert await server.wait() == 0


async def test_notifications_precede_the_result_and_follow_the_log_level(tmp_path: Path) -> None:
    async with spawn(tmp_path) as server:
        await server.initialize()
        await server.request("logging/setLevel", {"level": "info"}, 1)
        await server.send(rpc("tools/call", {"name": "count", "arguments": {"n": 3}, "_meta": {"progressToken": 0}}, 2))
        messages = [await server.recv() for _ in range(7)]
        assert [m.get("method") for m in messages] == ["notifications/progress", "notifications/message"] * 3 + [None]
        assert [m["params"]["progress"] for m in messages[0:6:2]] == [1, 2, 3]
        assert all(m["params"]["progressToken"] == 0 for m in messages[0:6:2])
        assert messages[-1]["id"] == 2 and messages[-1]["result"]["content"][0]["text"] == "counted to 3"
        await server.request("logging/setLevel", {"level": "error"}, 3)
        await server.send(rpc("tools/call", {"name": "count", "arguments": {"n": 2}, "_meta": {"progressToken": "p"}}, 4))
        messages = [await server.recv() for _ in range(3)]
        assert [m.get("method") for m in messages] == ["notifications/progress", "notifications/progress", None]


async def test_2026_requests_on_stdio(tmp_path: Path) -> None:
    async with spawn(tmp_path) as server:
        discovered = await server.request("server/discover", {"_meta": envelope()}, 1)
        assert MODERN in discovered["result"]["supportedVersions"]
        assert discovered["result"]["resultType"] == "complete"
        called = await server.request("tools/call", {"name": "shout", "arguments": {"text": "a"}, "_meta": envelope()}, 2)
        assert called["result"]["content"][0]["text"] == "A"  # no Mcp-Name header needed: stdio has none
        meta = envelope(progressToken="t", **{"io.modelcontextprotocol/logLevel": "info"})
        await server.send(rpc("tools/call", {"name": "count", "arguments": {"n": 1}, "_meta": meta}, 3))
        messages = [await server.recv() for _ in range(3)]
        assert [m.get("method") for m in messages] == ["notifications/progress", "notifications/message", None]
        assert messages[-1]["result"]["resultType"] == "complete"
        await server.send(rpc("tools/call", {"name": "count", "arguments": {"n": 1}, "_meta": envelope()}, 4))
        assert "result" in await server.recv()  # without logLevel: no notifications/message (and no token: no progress)
        bare = await server.request("tools/list", None, 5)
        assert bare["error"]["code"] == -32602  # a 2026 connection: every request carries the envelope
        handshake = await server.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}}, 6)
        assert handshake["error"]["code"] == -32022 and MODERN in handshake["error"]["data"]["supported"]
        removed = await server.request("ping", {"_meta": envelope()}, 7)
        assert removed["error"]["code"] == -32601
        await server.send(rpc("tools/call", {"name": "slow", "arguments": {"seconds": 30}, "_meta": envelope()}, 8))
        await server.send(notification("notifications/cancelled", {"requestId": 8}))
        await server.expect_silence(0.3)  # 2026: a cancelled request MUST NOT be answered
        events = await server.request("tools/call", {"name": "events", "arguments": {}, "_meta": envelope()}, 9)
        assert events["result"]["structuredContent"] == {"result": ["slow:cancelled"]}


# -- the end of the process ---------------------------------------------------------------
ENDINGS = ["stdin-eof", pytest.param("sigterm", marks=pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"))]


@pytest.mark.parametrize("ending", ENDINGS)
async def test_the_end_comes_within_2s_cancelling_calls_and_running_teardown(ending: str, tmp_path: Path) -> None:
    marker = tmp_path / "marker.txt"
    async with spawn(tmp_path, env=server_env(marker)) as server:
        await server.initialize()
        await server.send(rpc("tools/call", {"name": "slow", "arguments": {"seconds": 30}}, 1))
        await server.request("ping", None, 2)
        if ending == "sigterm":
            server.process.send_signal(signal.SIGTERM)
            began = time.monotonic()
        else:
            began = await server.close_stdin()
        assert await server.wait(timeout=60) == 0
        assert time.monotonic() - began < 20  # not the 30 s call (the drain is 0.5 s; margins for a loaded machine)
        assert await server.rest_of_stdout() == []  # the cancelled call is not answered
    assert _markers(marker) == ["startup", "slow:cancelled", "shutdown"]


async def test_stdin_closed_from_the_start(tmp_path: Path) -> None:
    marker = tmp_path / "marker.txt"
    async with spawn(tmp_path, env=server_env(marker)) as server:
        await server.close_stdin()
        assert await server.wait(timeout=60) == 0
    assert _markers(marker) == ["startup", "shutdown"]


async def test_eof_lets_a_quick_call_finish(tmp_path: Path) -> None:
    async with spawn(tmp_path) as server:  # a one-shot pipe: write everything, close, read
        await server.initialize()
        await server.send(rpc("tools/call", {"name": "slow", "arguments": {"seconds": 0.1}}, 1))
        await server.close_stdin()
        rest = await server.rest_of_stdout()
        assert [m["id"] for m in rest] == [1] and rest[0]["result"]["content"][0]["text"] == "slow done"
        assert await server.wait() == 0


async def test_a_handler_that_ignores_cancellation_cannot_keep_the_process_alive(tmp_path: Path) -> None:
    async with spawn(tmp_path) as server:
        await server.initialize()
        await server.send(rpc("tools/call", {"name": "stubborn", "arguments": {"seconds": 30}}, 1))
        await server.expect_silence(0.2)
        closed = await server.close_stdin()
        await server.wait(timeout=60)
        assert time.monotonic() - closed < 20  # not the 30 s call (margins for a loaded machine)
    assert "did not finish" in server.stderr()


async def test_a_closed_stdout_ends_the_process(tmp_path: Path) -> None:
    marker = tmp_path / "marker.txt"
    with (tmp_path / "stderr.txt").open("wb") as stderr:  # Popen: the test must close the pipe's fd itself
        process = subprocess.Popen(
            [*STDIO_COMMAND, APP], cwd=TESTS_DIR, env=server_env(marker), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr
        )
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(json.dumps(rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}}, 1)).encode() + b"\n")
        process.stdin.flush()
        with anyio.fail_after(10):
            assert json.loads(await anyio.to_thread.run_sync(process.stdout.readline, abandon_on_cancel=True))["id"] == 1
        process.stdout.close()  # the client stops reading; its end of stdin stays open
        process.stdin.write(json.dumps(rpc("ping", None, 2)).encode() + b"\n")  # the answer meets a broken pipe
        process.stdin.flush()
        with anyio.fail_after(5):
            assert await anyio.to_thread.run_sync(process.wait, abandon_on_cancel=True) == 0
    finally:
        process.kill()
        process.wait(timeout=60)
        process.stdin.close()
    assert _markers(marker) == ["startup", "shutdown"]
    assert "output is closed" in (tmp_path / "stderr.txt").read_text()


async def test_an_app_spec_that_names_nothing_servable_exits_2(tmp_path: Path) -> None:
    for app, expected in (("no_such_module:app", "Cannot import module"), ("stdio_app:EVENTS", "not a FastAPI")):
        async with spawn(tmp_path, app=app) as server:
            assert await server.wait(timeout=60) == 2
            assert await server.rest_of_stdout() == []
        assert expected in server.stderr()


async def test_the_examples_of_docs_stdio_md(tmp_path: Path) -> None:
    text = (TESTS_DIR.parent / "docs" / "stdio.md").read_text(encoding="utf-8")
    config = json.loads(re.findall(r"```json\n(.*?)```", text, re.DOTALL)[0])
    server = config["mcpServers"]["notes"]
    assert server["command"].endswith("/fastapi-mcp-ctx") and server["args"] == ["stdio", "notes.main:app"]
    shell = next(block for block in re.findall(r"```bash\n(.*?)```", text, re.DOTALL) if "printf" in block)
    lines = re.findall(r"'(\{.*?\})'", shell)
    assert shell.rstrip().endswith("| fastapi-mcp-ctx stdio examples.quickstart:app") and len(lines) == 3
    async with spawn(tmp_path, app="examples.quickstart:app", cwd=TESTS_DIR.parent) as quickstart:
        for line in lines:
            await quickstart.send(line.encode() + b"\n")
        await quickstart.close_stdin()
        replies = await quickstart.rest_of_stdout()
        assert [r["id"] for r in replies] == [1, 2] and replies[1]["result"]["structuredContent"] == {"result": 5}
        assert await quickstart.wait() == 0
