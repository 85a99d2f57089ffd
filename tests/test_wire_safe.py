"""Every outgoing message is JSON any client can parse, whatever a handler returned.

Found by the third hostile run: a tool returning a file name read with ``os.listdir`` /
``os.fsdecode`` (an undecodable byte becomes a lone surrogate, ``surrogateescape``) ended the
HTTP call with a 500 from the ASGI server (the encoder raised "surrogates not allowed"); a tool
returning an integer of more than 4300 digits was written as a number that Python's ``json`` and
pydantic (the official Python SDK) refuse to parse, so the client never read its answer. Now
the message is written repaired (U+FFFD, the digits as a string) and the server log names it.
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any

import pytest
from conftest import LEGACY, Wire, make_app, make_router, open_client, rpc, sse_events
from fastapi import Depends
from pydantic_core import from_json, to_json

from fastapi_mcp_ctx import Context, mcp_context
from fastapi_mcp_ctx._wire.jsonrpc import dumps
from fastapi_mcp_ctx._wire.safe_text import MAX_INT_DIGITS, encode

ODD_NAME = os.fsdecode(b"caf\xe9.txt")  # 'caf\udce9.txt' on a UTF-8 file system
BIG = 10**5000


def strict(data: bytes) -> Any:
    """Parse as the clients do: UTF-8, stdlib json (its int limit), then pydantic."""
    text = data.decode("utf-8")
    json.loads(text)
    return from_json(data)


def test_a_lone_surrogate_is_written_as_the_replacement_character_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": ODD_NAME}], ODD_NAME: 1}}
    with caplog.at_level(logging.ERROR, logger="fastapi_mcp_ctx"):
        out = strict(dumps(message))
    assert out["result"]["content"][0]["text"] == "caf\ufffd.txt"
    assert "caf\ufffd.txt" in out["result"]
    assert any("lone surrogate" in r.getMessage() and "result.content.0.text" in r.getMessage() for r in caplog.records)


def test_an_over_long_integer_is_written_as_its_digits_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="fastapi_mcp_ctx"):
        out = strict(encode({"jsonrpc": "2.0", "id": 1, "result": {"n": BIG, "small": 10**MAX_INT_DIGITS - 1, "neg": -BIG}}))
    assert out["result"]["n"] == "1" + "0" * 5000 and out["result"]["neg"] == "-1" + "0" * 5000
    assert isinstance(out["result"]["small"], int)  # 4300 digits: still a number
    assert any("result.n" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 1, "result": {"text": "7" * 10_000}},  # digits inside a string
        {"jsonrpc": "2.0", "id": "é", "result": {"x": [1.5, None, True, "ünï"], "n": 10**4000}},
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "x" * 50_000}},
    ],
)
def test_ordinary_messages_are_written_exactly_as_before(message: dict[str, Any]) -> None:
    assert encode(message) == to_json(message, inf_nan_mode="strings")


def test_the_digit_scan_is_linear() -> None:
    text = ("1" * 4000 + " ") * 500  # 2 MB of digit runs just under the limit
    started = time.monotonic()
    encode({"jsonrpc": "2.0", "id": 1, "result": {"text": text}})
    assert time.monotonic() - started < 0.5


def build() -> Any:
    router = make_router()

    @router.tool()
    async def list_files() -> list[str]:
        """A directory listing with an undecodable name."""
        return ["a.txt", ODD_NAME]

    @router.tool()
    async def name_text() -> str:
        """The name as text."""
        return ODD_NAME

    @router.tool()
    async def huge() -> int:
        """An over-long integer."""
        return BIG

    @router.tool()
    async def logs_it(ctx: Context = Depends(mcp_context)) -> str:
        """Logs the name."""
        await ctx.log.info(f"opened {ODD_NAME}")
        return "ok"

    @router.resource("files://{name}")
    async def file_entry(name: str) -> Any:
        """The listing as a resource."""
        return {"names": [ODD_NAME], "size": BIG}

    return make_app(router)


@pytest.mark.parametrize("accept", ["application/json", "application/json, text/event-stream"])
async def test_over_http_every_answer_parses(accept: str) -> None:
    async with open_client(build()) as client:
        wire = Wire(client)
        session = await wire.initialize(LEGACY)
        headers = {"mcp-session-id": session, "mcp-protocol-version": LEGACY, "accept": accept}
        bodies = [
            rpc("tools/call", {"name": "list_files", "arguments": {}}, 1),
            rpc("tools/call", {"name": "name_text", "arguments": {}}, 2),
            rpc("tools/call", {"name": "huge", "arguments": {}}, 3),
            rpc("tools/call", {"name": "logs_it", "arguments": {}, "_meta": {"progressToken": 1}}, 4),
            rpc("resources/read", {"uri": "files://x"}, 5),
        ]
        for body in bodies:
            response = await wire.post(body, headers)
            assert response.status_code == 200, response.text
            if response.headers["content-type"].startswith("text/event-stream"):
                frames = [strict(event["data"].encode()) for event in sse_events(response.text) if event.get("data")]
            else:
                frames = [strict(response.content)]
            answer = frames[-1]
            assert answer["id"] == body["id"] and "result" in answer, answer
            if answer["id"] in (1, 2, 5):
                assert "caf\ufffd.txt" in json.dumps(answer, ensure_ascii=False)
            if answer["id"] == 3:
                assert answer["result"]["structuredContent"]["result"] == "1" + "0" * 5000
            if answer["id"] == 4 and "event-stream" in accept:  # the log line went on the call's stream
                logged = [f for f in frames if f.get("method") == "notifications/message"]
                assert logged and "caf\ufffd.txt" in json.dumps(logged, ensure_ascii=False)
