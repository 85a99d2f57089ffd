"""Faults of what goes out, found by an adversarial tester, each held by a test here.

- (a) ``NaN``/``Infinity`` went out as invalid JSON (RFC 8259 §6): a ``-> float`` tool returning
  ``nan``, ``ctx.report_progress(1, nan)``, ``ctx.log.info("v", v=inf)``; an ``Any``-typed ``nan``
  became ``null`` silently. Now: a non-finite output is an ``invalid_output`` ``isError``
  result, non-finite progress a ``ValueError`` to the handler, log data the strings ``"NaN"`` /
  ``"Infinity"`` / ``"-Infinity"``; ``_wire.jsonrpc.dumps`` never writes a bare ``NaN`` token.
- (b) argument errors were unbounded (500 000 bad list items: an 80 MB answer, twice).
- (c) an integer of more than 4300 digits (Python's int-str limit) was a ``-32700`` parse error.
- (d) duplicate keys were accepted, last one winning (a parser differential with proxies).
- (e) a cancelled sync (thread-pool) tool was still answered with its full result.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from conftest import LEGACY, MODERN, Wire, assert_error, final_message, make_app, make_router, messages_of, result_of, tool_text
from fastapi import Depends
from stdio_wire import notification, rpc, spawn

from fastapi_mcp_ctx import Context, mcp_context
from fastapi_mcp_ctx._context.logger import redact
from fastapi_mcp_ctx._wire.jsonrpc import dumps, parse_message
from fastapi_mcp_ctx.errors import InvalidRequestError

PROGRESS: list[str] = []
FINISHED: list[str] = []
STARTED: list[str] = []


def build_app() -> Any:
    router = make_router()

    @router.tool()
    async def as_float(kind: str) -> float:
        """float(kind): nan, inf, -inf or a number."""
        return float(kind)

    @router.tool()
    async def as_any(kind: str) -> Any:
        """An Any-typed output holding float(kind)."""
        return {"v": [1.0, float(kind)]}

    @router.tool()
    async def untyped(kind: str):  # noqa: ANN202 - no return annotation on purpose: no outputSchema
        """A dict without an output schema."""
        return {"v": float(kind)}

    @router.tool()
    async def raw_result(kind: str) -> types.CallToolResult:
        """A CallToolResult built by the handler itself."""
        return types.CallToolResult(content=[], structuredContent={"v": float(kind)})

    @router.tool()
    async def nan_text() -> str:
        """Strings that merely spell NaN are fine."""
        return "NaN and Infinity"

    @router.tool()
    async def progress(kind: str, ctx: Context = Depends(mcp_context)) -> str:
        """Report progress with total float(kind)."""
        try:
            await ctx.report_progress(1, float(kind))
        except ValueError as exc:
            PROGRESS.append(str(exc))
            return "refused"
        return "sent"

    @router.tool()
    async def log_value(kind: str, ctx: Context = Depends(mcp_context)) -> str:
        """Log float(kind) as data."""
        await ctx.log.info("value", v=float(kind), nested={"xs": [float(kind)]})
        return "logged"

    @router.tool()
    async def ints(xs: list[int]) -> int:
        """Sum ints."""
        return sum(xs)

    @router.tool()
    async def echo(name: str = "", x: int = 0, tags: dict[str, int] | None = None) -> str:
        """Echo."""
        return f"{name}:{x}:{tags}"

    @router.tool()
    def block(seconds: float) -> str:
        """A sync tool: its thread cannot be interrupted."""
        STARTED.append("block")
        time.sleep(seconds)
        FINISHED.append("block")
        return "full result"

    return make_app(router)


async def _running() -> None:
    with anyio.fail_after(30):
        while not STARTED:
            await anyio.sleep(0.01)


@pytest.fixture
def app() -> Any:
    PROGRESS.clear()
    FINISHED.clear()
    STARTED.clear()
    return build_app()


def strict_json(response: httpx.Response) -> list[dict[str, Any]]:
    """Every message of the response, parsed by a parser that refuses NaN/Infinity tokens."""

    def refuse(token: str) -> Any:
        raise AssertionError(f"{token} is not JSON (RFC 8259 §6): {response.text[:300]}")

    if "text/event-stream" in response.headers.get("content-type", ""):
        lines = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        return [json.loads(line, parse_constant=refuse) for line in lines if line]
    return [json.loads(response.text, parse_constant=refuse)]


# -- (a) non-finite numbers never go out ------------------------------------------------------------


@pytest.mark.parametrize("kind", ["nan", "inf", "-inf"])
@pytest.mark.parametrize("tool", ["as_float", "as_any", "untyped", "raw_result"])
async def test_non_finite_output_is_an_invalid_output_error(wire: Wire, era: str, tool: str, kind: str) -> None:
    response = await wire.call_tool(era, tool, {"kind": kind}, check=False)
    message = strict_json(response)[-1]
    result = message["result"]
    assert result["isError"] is True, f"nan must not go out as a result: {result}"
    assert "non-finite number" in tool_text(result)
    envelope = result["_meta"]["fastapi-mcp-ctx/error"]
    assert envelope["code"] == -32603 and envelope["data"]["reason"] == "invalid_output"
    assert "null" not in json.dumps(result.get("structuredContent", {}).get("result", "")), "never a silent null"


async def test_finite_output_and_strings_spelling_nan_are_untouched(wire: Wire, era: str) -> None:
    result = result_of(await wire.call_tool(era, "as_any", {"kind": "2.5"}))
    assert result["isError"] is False and result["structuredContent"] == {"result": {"v": [1.0, 2.5]}}
    result = result_of(await wire.call_tool(era, "nan_text"))
    assert result["isError"] is False and tool_text(result) == "NaN and Infinity"


@pytest.mark.parametrize("kind", ["nan", "inf"])
async def test_non_finite_progress_is_a_value_error_to_the_handler(wire: Wire, era: str, kind: str) -> None:
    response = await wire.call_tool(era, "progress", {"kind": kind}, meta={"progressToken": "pt"}, check=False)
    messages = strict_json(response)
    assert [m for m in messages if m.get("method") == "notifications/progress"] == []
    assert messages[-1]["result"]["content"][0]["text"] == "refused"
    assert PROGRESS and "finite" in PROGRESS[0]


@pytest.mark.parametrize(("kind", "spelled"), [("nan", "NaN"), ("inf", "Infinity"), ("-inf", "-Infinity")])
async def test_non_finite_log_data_goes_out_as_a_string(wire: Wire, kind: str, spelled: str) -> None:
    await wire.initialize()
    assert (await wire.legacy("logging/setLevel", {"level": "debug"})).status_code == 200
    response = await wire.legacy("tools/call", {"name": "log_value", "arguments": {"kind": kind}})
    logs = [m for m in strict_json(response) if m.get("method") == "notifications/message"]
    assert logs and logs[0]["params"]["data"]["v"] == spelled
    assert logs[0]["params"]["data"]["nested"] == {"xs": [spelled]}
    modern = await wire.modern(
        "tools/call", {"name": "log_value", "arguments": {"kind": kind}}, meta={"io.modelcontextprotocol/logLevel": "debug"}
    )
    assert [m["params"]["data"]["v"] for m in strict_json(modern) if m.get("method") == "notifications/message"] == [spelled]


def test_redact_spells_non_finite_floats_and_keeps_finite_ones() -> None:
    assert redact({"a": math.nan, "b": [math.inf, -math.inf, 1.5], "password": math.nan}) == {
        "a": "NaN",
        "b": ["Infinity", "-Infinity", 1.5],
        "password": "[REDACTED]",
    }


def test_dumps_never_writes_a_bare_nan_token() -> None:
    """The one encoder of messages: a non-finite float that slipped past the entry points is a
    string, never ``NaN`` (invalid JSON) nor ``null``."""
    encoded = dumps({"jsonrpc": "2.0", "id": 1, "result": {"a": math.nan, "b": [math.inf, -math.inf], "c": 1.5}})
    assert json.loads(encoded, parse_constant=lambda token: pytest.fail(token)) == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"a": "NaN", "b": ["Infinity", "-Infinity"], "c": 1.5},
    }


# -- (b) argument errors are bounded ---------------------------------------------------------------


@pytest.mark.parametrize(("item", "expect"), [(b'"x"', "Input should be a valid integer"), (b"1e999", "number out of range")])
async def test_argument_errors_are_capped(wire: Wire, item: bytes, expect: str) -> None:
    await wire.initialize()
    count = 20_000
    body = (
        b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"ints","arguments":{"xs":['
        + b",".join([item] * count)
        + b"]}}}"
    )
    response = await wire.post(None, wire.legacy_headers(), content=body)
    result = result_of(response)
    assert result["isError"] is True
    text = tool_text(result)
    assert text.count(expect) == 10 and f"…and {count - 10} more" in text
    assert len(response.content) < 10_000, f"{len(response.content)} bytes for one argument error"
    assert result["_meta"]["fastapi-mcp-ctx/error"]["message"] == result["content"][0]["text"]


async def test_a_long_argument_problem_is_cut(wire: Wire, era: str) -> None:
    result = result_of(await wire.call_tool(era, "echo", {"tags": {"k" * 5000: "z"}}, check=False))
    assert result["isError"] is True and "kkkk" in tool_text(result)
    message = result["content"][0]["text"]
    assert len(message) < 300 and message.endswith("…")


# -- (c) an integer beyond Python's int-str limit is a value fault, not a parse error ----------------


async def test_int_over_4300_digits_in_arguments_is_an_argument_error(wire: Wire, era: str) -> None:
    big = b"9" * 5000
    if era == "legacy":
        await wire.initialize()
        headers = wire.legacy_headers()
        meta = b""
    else:
        headers = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "echo"}
        meta = b',"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
    body = b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"x":' + big + b"}" + meta + b"}}"
    result = result_of(await wire.post(None, headers, content=body))
    assert result["isError"] is True and "x: number out of range" in tool_text(result)
    assert result["_meta"]["fastapi-mcp-ctx/error"]["code"] == -32602


async def test_int_over_4300_digits_elsewhere_is_invalid_params_or_request(wire: Wire) -> None:
    await wire.initialize()
    body = b'{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"cursor":-' + b"1" * 5000 + b"}}"
    error = assert_error(await wire.post(None, wire.legacy_headers(), content=body), 400, -32602, request_id=5)
    assert error["data"]["path"] == "params.cursor"
    body = b'{"jsonrpc":"2.0","id":' + b"1" * 5000 + b',"method":"ping"}'
    assert_error(await wire.post(None, wire.legacy_headers(), content=body), 400, -32600, request_id=None)
    body = b'{"jsonrpc":"2.0","id":' + b"1" * 5000 + b',"method":"ping"'  # truly broken: still -32700
    assert_error(await wire.post(None, wire.legacy_headers(), content=body), 400, -32700, request_id=None)


def test_int_of_4300_digits_still_parses() -> None:
    message = parse_message(b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"n":' + b"7" * 4300 + b"}}")
    assert message.params["n"] == int("7" * 4300)  # type: ignore[union-attr]


# -- (d) duplicate keys are refused -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}', "'id' in the message"),
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"ping"}', "'method' in the message"),
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","name":"ints"}}', "'name' in the params"),
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","\\u006eame":"ints"}}', "'name' in the params"),
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"x":1,"x":2}}}', "params.arguments"),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"progressToken":1,"progressToken":2}}}', "params._meta"),
        (b'{"jsonrpc" : "2.0", "id" : 1, "method" : "ping", "method" : "x"}', "'method' in the message"),
    ],
    ids=["id", "method", "params.name", "escaped-key", "arguments", "meta", "whitespace"],
)
async def test_duplicate_keys_are_invalid_requests(wire: Wire, body: bytes, where: str) -> None:
    await wire.initialize()
    response = await wire.post(None, wire.legacy_headers(), content=body)
    error = final_message(response)["error"]
    assert response.status_code == 400 and error["code"] == -32600 and where in error["message"]
    assert final_message(response)["id"] == (None if b'"id":2' in body else 1)


def test_repeated_keys_in_different_objects_are_fine() -> None:
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"name":"b","id":{"id":1}}}}'
    message = parse_message(body)
    assert message.params == {"name": "a", "arguments": {"name": "b", "id": {"id": 1}}}  # type: ignore[union-attr]
    escaped = b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"t":"a\\"b","u":"\\u00e9"}}'
    assert parse_message(escaped).params == {"t": 'a"b', "u": "é"}  # type: ignore[union-attr]
    with pytest.raises(InvalidRequestError):
        parse_message(b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"t":"a\\"b","t":1}}')


# -- (e) a cancelled sync tool is never answered with its result ------------------------------------


async def test_cancelled_sync_tool_gets_32800_not_its_result(wire: Wire) -> None:
    await wire.initialize()
    replies: list[httpx.Response] = []

    async def call() -> None:
        replies.append(await wire.legacy("tools/call", {"name": "block", "arguments": {"seconds": 2.0}}, request_id=7, check=False))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await _running()  # the cancel must reach a running call: 2 s of margin from here
        note = await wire.post(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}, wire.legacy_headers()
        )
        assert note.status_code == 202
    message = final_message(replies[0])
    assert message.get("error", {}).get("code") == -32800, f"a cancelled call was answered: {message}"
    assert "full result" not in replies[0].text
    assert FINISHED == ["block"]  # the thread ran to its end; only its result was dropped


async def test_session_delete_drops_a_running_sync_tools_result(wire: Wire) -> None:
    sid = await wire.initialize()
    replies: list[httpx.Response] = []

    async def call() -> None:
        replies.append(await wire.legacy("tools/call", {"name": "block", "arguments": {"seconds": 2.0}}, check=False))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await _running()  # the cancel must reach a running call: 2 s of margin from here
        deleted = await wire.client.delete("/mcp", headers={"mcp-session-id": sid, "mcp-protocol-version": LEGACY})
        assert deleted.status_code == 200
    assert "full result" not in replies[0].text
    assert all("result" not in m for m in messages_of(replies[0]))


async def test_stdio_cancelled_sync_tool_is_never_answered(tmp_path: Path) -> None:
    async with spawn(tmp_path) as server:
        await server.initialize()
        await server.send(rpc("tools/call", {"name": "stubborn", "arguments": {"seconds": 2.0}}, 5))
        await server.send(rpc("tools/list", None, 6))
        assert (await server.recv())["id"] == 6  # the call is running
        await server.send(notification("notifications/cancelled", {"requestId": 5}))  # 2 s of margin before it wakes
        await server.expect_silence(3.0)  # the thread wakes up after 2 s: its result is dropped
        assert (await server.request("ping", None, 8))["id"] == 8
