"""A resumable 2025 call whose event store fails when its stream begins (Redis down, or Redis
refusing writes under ``maxmemory``): the stream goes out live, without ids, and the call's
progress and answer still reach the client. Before the fix the failure escaped: the tool's
first ``ctx.report_progress`` raised (the call ended with ``backend_unavailable`` after its side
effects ran) or, when the store still failed at the answer, the ASGI app raised and the client
got a bare ``500 Internal Server Error`` (text/plain) and a torn connection.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import LEGACY, Wire, open_client, rpc, sse_events
from resume_app import build, fresh_gates

from fastapi_mcp_ctx._transport.events import StreamKey
from fastapi_mcp_ctx._transport.memory_events import MemoryEventStore
from fastapi_mcp_ctx.errors import ConfigurationError, StateUnavailableError


class FailingStore(MemoryEventStore):
    """A memory store whose writes fail with ``error`` while ``failing`` is set."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error
        self.failing = True

    async def open(self, key: StreamKey) -> None:
        if self.failing:
            raise self.error
        await super().open(key)

    async def append(self, key: StreamKey, data: bytes | None, *, last: bool = False) -> int:
        if self.failing:
            raise self.error
        return await super().append(key, data, last=last)


@pytest.mark.parametrize(
    "error",
    [
        StateUnavailableError("The event store (redis) is unavailable, retry later"),
        ConfigurationError("the event store (redis) is unusable"),
    ],
    ids=["unreachable", "refusing"],
)
async def test_a_store_failing_at_stream_start_still_delivers_progress_and_the_answer(error: Exception) -> None:
    with fresh_gates():
        store = FailingStore(error)
        app, _ = build(event_store=store)
        async with open_client(app) as client:
            wire = Wire(client)
            sid = await wire.initialize(LEGACY)
            params = {"name": "steps", "arguments": {"n": 2}, "_meta": {"progressToken": "p"}}
            response = await wire.post(rpc("tools/call", params, 7), {"mcp-session-id": sid, "mcp-protocol-version": LEGACY})
            assert response.status_code == 200, response.text
            assert response.headers["content-type"].startswith("text/event-stream")
            parsed = sse_events(response.text)
            messages: list[dict[str, Any]] = [json.loads(e["data"]) for e in parsed if e.get("data")]
            assert [m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"] == [1, 2]
            answer = messages[-1]
            assert answer["id"] == 7 and answer["result"]["structuredContent"] == {"result": "done 2"}, answer
            assert all("id" not in e for e in parsed), "nothing was stored: no event ids, not resumable"
            store.failing = False  # the session goes on once the store answers again
            assert (await wire.legacy("ping")).status_code == 200
