"""JSON-RPC batches on stdio (2025-03-26 ``basic/transports`` §stdio: a line may be a batch),
for a connection initialized at 2025-03-26 only; every other one keeps the single-message
refusal (known fault B17). A real server process on ``tests/stdio_app.py``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from stdio_wire import notification, rpc, spawn

BATCH_VERSION = "2025-03-26"
SINGLE_MESSAGE = "Body must be a single JSON-RPC request or notification object"


def call(name: str, arguments: dict[str, Any], request_id: Any, **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if meta:
        params["_meta"] = meta
    return rpc("tools/call", params, request_id)


def line(messages: list[Any]) -> bytes:
    return json.dumps(messages).encode() + b"\n"


async def test_a_batch_is_answered_with_one_array_line_in_order(tmp_path: Path) -> None:
    async with spawn(tmp_path) as server:
        await server.initialize(BATCH_VERSION)
        init = rpc("initialize", {"protocolVersion": BATCH_VERSION, "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}, "i")
        members = [call("slow", {"seconds": 3.0}, 1), rpc("ping", None, 2), notification("notifications/initialized"), 1, init]
        started = time.monotonic()
        await server.send(line([*members, call("slow", {"seconds": 3.0, "label": "b"}, 3)]))
        answers = await server.recv_json()
        # one after the other they take 6 s: 2.5 s of margin for a loaded machine
        assert time.monotonic() - started < 5.5, "the two 3 s calls ran one after the other"
    assert isinstance(answers, list)
    assert [(a["id"], "error" in a) for a in answers] == [(1, False), (2, False), (None, True), ("i", True), (3, False)]
    assert answers[0]["result"]["structuredContent"] == {"result": "slow done"}
    assert "initialize must not be part of a JSON-RPC batch" in answers[3]["error"]["message"]


async def test_notifications_go_out_before_the_array_and_a_cancelled_member_is_not_answered(tmp_path: Path) -> None:
    async with spawn(tmp_path) as server:
        await server.initialize(BATCH_VERSION)
        await server.send(line([call("count", {"n": 2}, "c", progressToken="p"), call("slow", {"seconds": 30}, "s"), rpc("ping", None, 7)]))
        await server.send(notification("notifications/cancelled", {"requestId": "s", "reason": "user"}))
        seen = [await server.recv_json()]
        while not isinstance(seen[-1], list):  # the array line comes last
            seen.append(await server.recv_json())
    progress = [m for m in seen[:-1] if m.get("method") == "notifications/progress"]
    assert [p["params"]["progress"] for p in progress] == [1, 2]
    assert {a["id"] for a in seen[-1]} == {"c", 7}


async def test_only_notifications_and_responses_write_nothing(tmp_path: Path) -> None:
    async with spawn(tmp_path) as server:
        await server.initialize(BATCH_VERSION)
        await server.send(line([notification("notifications/initialized"), {"jsonrpc": "2.0", "id": 99, "result": {}}]))
        await server.expect_silence(0.3)
        assert (await server.request("ping", None, 5))["result"] == {}


@pytest.mark.parametrize(("content", "code"), [(b"[]\n", -32600), (b"[1,\n", -32700), (b'[{"jsonrpc":"2.0"}] x\n', -32700)])
async def test_an_empty_or_broken_batch_is_one_error(tmp_path: Path, content: bytes, code: int) -> None:
    async with spawn(tmp_path) as server:
        await server.initialize(BATCH_VERSION)
        await server.send(content)
        answer = await server.recv()
    assert answer["id"] is None and answer["error"]["code"] == code


@pytest.mark.parametrize("version", [None, "2024-11-05", "2025-11-25"])
async def test_other_connections_keep_refusing_arrays(tmp_path: Path, version: str | None) -> None:
    async with spawn(tmp_path) as server:
        if version is not None:
            await server.initialize(version)
        await server.send(line([rpc("ping", None, 1)]))
        answer = await server.recv()
    assert answer["id"] is None and answer["error"]["code"] == -32600 and answer["error"]["message"] == SINGLE_MESSAGE
