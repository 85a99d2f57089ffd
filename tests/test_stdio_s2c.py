"""``ctx.send_request`` over stdio: the request is a line on stdout, the client's answer a line
on stdin, matched in the connection's pending table by typed id (integers 1, 2, 3…: ``"1"``
is not ``1``). The official client (``mcp`` 2.3, its stdio transport) answers through its
callbacks; raw pipes check id typing, the timeout's ``notifications/cancelled`` and the end
of input while a request waits. Spec 2025-11-25 ``basic/transports`` §stdio.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters, stdio_client
from stdio_wire import APP, LEGACY, STDIO_COMMAND, TESTS_DIR, notification, rpc, server_env, spawn

FORM = {"message": "Your name?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}


async def on_roots(ctx: ClientRequestContext) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///home/ada", name="home")])


async def on_elicit(ctx: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "Ada"})


def _structured(result: types.CallToolResult) -> Any:
    assert result.is_error is False, result.content
    return result.structured_content


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_official_client_answers_over_stdio(mode: str, tmp_path: Path) -> None:
    params = StdioServerParameters(command=STDIO_COMMAND[0], args=[*STDIO_COMMAND[1:], APP], cwd=TESTS_DIR, env=server_env())
    with (tmp_path / "client-stderr.txt").open("w") as errlog, anyio.fail_after(30):
        client = Client(stdio_client(params, errlog=errlog), mode=mode, cache=None, list_roots_callback=on_roots, elicitation_callback=on_elicit)
        async with client:
            if mode != "legacy":
                result = await client.call_tool("ask_client", {"method": "roots/list"})
                assert result.is_error is True
                block = result.content[0]
                assert isinstance(block, types.TextContent) and "2026-07-28 era has no server→client requests" in block.text
                return
            assert _structured(await client.call_tool("ask_client", {"method": "ping"})) == {"answer": {}}
            roots = _structured(await client.call_tool("ask_client", {"method": "roots/list"}))
            assert roots == {"answer": {"roots": [{"uri": "file:///home/ada", "name": "home"}]}}
            named = _structured(await client.call_tool("ask_client", {"method": "elicitation/create", "params": FORM}))
            assert named == {"answer": {"action": "accept", "content": {"name": "Ada"}}}


async def _initialize(server: Any, capabilities: dict[str, Any]) -> None:
    params = {"protocolVersion": LEGACY, "capabilities": capabilities, "clientInfo": {"name": "pytest", "version": "1"}}
    await server.request("initialize", params, "init")
    await server.send(notification("notifications/initialized"))


async def test_answers_match_by_typed_integer_id(tmp_path: Path) -> None:
    async with spawn(tmp_path) as server:
        await _initialize(server, {"roots": {}})
        await server.send(rpc("tools/call", {"name": "ask_client", "arguments": {"method": "roots/list"}}, "call"))
        request = await server.recv()
        assert request["method"] == "roots/list" and type(request["id"]) is int
        rid = request["id"]
        await server.send({"jsonrpc": "2.0", "id": str(rid), "result": {"roots": []}})  # "1" is not 1
        await server.send({"jsonrpc": "2.0", "id": rid + 1000, "result": {"roots": []}})  # never sent
        await server.expect_silence(0.3)
        await server.send({"jsonrpc": "2.0", "id": rid, "result": {"roots": [{"uri": "file:///x"}]}})
        reply = await server.recv()
        assert reply["id"] == "call" and reply["result"]["structuredContent"] == {"answer": {"roots": [{"uri": "file:///x"}]}}
        await server.send({"jsonrpc": "2.0", "id": rid, "result": {"roots": []}})  # a duplicate: ignored
        assert (await server.request("ping", None, 9))["result"] == {}


async def test_timeout_cancels_the_request_on_the_connection(tmp_path: Path) -> None:
    async with spawn(tmp_path) as server:
        await _initialize(server, {})
        await server.send(rpc("tools/call", {"name": "ask_client", "arguments": {"method": "ping", "timeout": 0.2}}, 4))
        request = await server.recv()
        cancelled = await server.recv()
        assert cancelled == {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request["id"], "reason": "no answer within 0.2 s"},
        }
        reply = await server.recv()
        assert reply["id"] == 4 and reply["result"]["isError"] is True
        assert reply["result"]["content"][0]["text"] == "The client did not answer ping within 0.2 s"


async def test_undeclared_capability_sends_nothing(tmp_path: Path) -> None:
    async with spawn(tmp_path) as server:
        await _initialize(server, {})
        reply = await server.request("tools/call", {"name": "ask_client", "arguments": {"method": "roots/list"}}, 5)
        assert reply["result"]["isError"] is True and "roots" in reply["result"]["content"][0]["text"]


async def test_end_of_input_while_waiting_ends_the_process(tmp_path: Path) -> None:
    async with spawn(tmp_path) as server:
        await _initialize(server, {})
        await server.send(rpc("tools/call", {"name": "ask_client", "arguments": {"method": "ping", "timeout": 30}}, 6))
        assert (await server.recv())["method"] == "ping"
        closed = await server.close_stdin()
        await server.rest_of_stdout()
        assert await server.wait() == 0
        assert time.monotonic() - closed < 15  # not the 30 s timeout
