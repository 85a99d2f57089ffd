"""What a 2025 session retains for its client metadata (issue 24 item 7).

``MCP_MAX_CLIENT_METADATA_BYTES`` (64 KiB by default) bounds ``capabilities`` + ``clientInfo`` as
compact JSON; parsed, the same metadata takes about eight times that. The sessions keep the bytes
(``_transport/client_metadata.py``), so at the bound one session retains the bound plus a small,
fixed overhead, and ``max_sessions`` (10,000 by default) of them fit in 1 GB.

Measured with ``tracemalloc`` (what Python allocated and still holds), not RSS nor time: the
figures are deterministic. ``bench/bench_sessions.py --capabilities-bytes`` measures RSS through
uvicorn.
"""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import anyio
from conftest import LEGACY, Wire, make_app, make_router, open_client
from fastapi import Depends

from fastapi_mcp_ctx import Context, McpSettings, mcp_context
from fastapi_mcp_ctx._transport.client_metadata import HOT_ENTRIES, HOT_MAX_BYTES, encode_metadata
from fastapi_mcp_ctx._transport.memory_sessions import MemorySessionStore
from fastapi_mcp_ctx._transport.sessions import SessionRecord, check_client_metadata

BOUND = 64 * 1024
OVERHEAD = 2048
"""Bytes a session may keep on top of its metadata's JSON (the record, its id, the store's entry)."""


def capabilities_near(bound: int) -> dict[str, Any]:
    """``ClientCapabilities`` whose ``initialize`` metadata is just under ``bound`` bytes of JSON,
    shaped for the largest parsed form: many short keys with small values (an object each)."""
    info = {"name": "probe", "version": "1"}
    experimental: dict[str, Any] = {}
    capabilities = {"experimental": experimental}
    size = len(encode_metadata(capabilities, info))
    index = 0
    while True:  # one encoding per entry, not of the whole document: linear
        entry = len(f'"k{index}":{{"v":[{index}]}},')
        if size + entry > bound - 40:
            break
        experimental[f"k{index}"] = {"v": [index]}
        size += entry
        index += 1
    assert len(encode_metadata(capabilities, info)) <= bound - 40 + 1
    return capabilities


def _retained(build: Any, count: int) -> int:
    """Bytes still allocated after ``build(count)`` (its return value kept alive), by tracemalloc."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = build(count)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del kept
    return after - before


def test_a_session_at_the_metadata_bound_retains_about_the_bound() -> None:
    capabilities = capabilities_near(BOUND)
    info = {"name": "probe", "version": "1"}
    assert BOUND - 64 < len(encode_metadata(capabilities, info)) <= BOUND
    check_client_metadata({"capabilities": capabilities, "clientInfo": info}, BOUND)  # accepted: at the bound
    store = MemorySessionStore(idle_seconds=3600, max_sessions=1000)

    def build(count: int) -> MemorySessionStore:
        for _ in range(count):
            # a fresh parse per session, as each initialize body is parsed on its own
            params = {"capabilities": _copy(capabilities), "clientInfo": dict(info)}
            anyio.run(store.create, SessionRecord.from_initialize(params, LEGACY))
        return store

    count = 40
    per_session = _retained(build, count) / count
    assert per_session < BOUND + OVERHEAD, per_session
    # ... and what it keeps is the metadata, parsed on use
    record = next(iter(store._records.values()))  # pyright: ignore[reportPrivateUsage]
    assert record.client_capabilities == capabilities and record.client_info == info
    # the default bounds' worst case: max_sessions sessions at the metadata bound, under 1 GB
    defaults = McpSettings()
    assert defaults.max_client_metadata_bytes == BOUND
    assert defaults.max_sessions * (defaults.max_client_metadata_bytes + OVERHEAD) < 1024**3


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list):
        return [_copy(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    return value


def test_a_compact_record_gives_back_what_initialize_sent_and_updates_keep_it() -> None:
    params = {"capabilities": {"roots": {"listChanged": True}, "x": ["é", 1.5, None]}, "clientInfo": {"name": "ç", "version": "2"}}
    record = SessionRecord.from_initialize(params, LEGACY, "alice")
    assert record.client_capabilities == params["capabilities"] and record.client_info == params["clientInfo"]
    assert record.client_metadata == encode_metadata(params["capabilities"], params["clientInfo"])
    store = MemorySessionStore(idle_seconds=60, max_sessions=10)
    anyio.run(store.create, record)
    got = anyio.run(store.get, record.id)
    assert got is not None
    got.log_level = "error"
    anyio.run(store.update, got)
    again = anyio.run(store.get, record.id)
    assert again is not None and again.log_level == "error" and again.client_capabilities == params["capabilities"]
    bare = SessionRecord.from_initialize({"capabilities": "no", "clientInfo": 3}, LEGACY)
    assert (bare.client_capabilities, bare.client_info) == ({}, None)
    parsed = SessionRecord(id="p", protocol_version=LEGACY, client_capabilities={"a": {}}, client_info={"name": "n"})
    assert parsed.compact().client_capabilities == {"a": {}} and parsed.client_info == {"name": "n"}


async def test_sessions_opened_over_the_wire_retain_about_the_bound_and_tools_see_the_capabilities() -> None:
    router = make_router()
    seen: list[Any] = []

    @router.tool()
    def caps(ctx: Context = Depends(mcp_context)) -> str:  # pyright: ignore[reportUnusedFunction]
        """The session's capabilities, as a tool sees them."""
        seen.append(ctx.client_capabilities)
        return "ok"

    capabilities = capabilities_near(BOUND - 200)
    app = make_app(router)
    async with open_client(app) as client:
        wire = Wire(client)
        await wire.initialize(capabilities=_copy(capabilities))  # warm-up: first-use imports and caches
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            count = 10
            for _ in range(count):
                await wire.initialize(capabilities=_copy(capabilities))
            gc.collect()
            after = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        per_session = (after - before) / count
        assert per_session < BOUND + 4 * OVERHEAD, per_session  # parsed, it was about 8 x BOUND
        response = await wire.legacy("tools/call", {"name": "caps", "arguments": {}})
        assert response.status_code == 200, response.text
    assert seen == [capabilities]


def test_a_hot_record_keeps_its_parsed_metadata_until_hot_entries_later_parses() -> None:
    """A compact record parses its (small) metadata once and keeps the objects while it is among
    the ``HOT_ENTRIES`` most recently parsed; then it forgets them and parses again on use.
    Metadata over ``HOT_MAX_BYTES`` is parsed on every use, never kept."""

    def compact(capabilities: dict[str, Any]) -> SessionRecord:
        return SessionRecord.from_initialize({"capabilities": capabilities, "clientInfo": {"name": "n"}}, LEGACY)

    first = compact({"roots": {"listChanged": True}})
    parsed = first.client_metadata_parsed()
    assert parsed == ({"roots": {"listChanged": True}}, {"name": "n"})
    assert first.client_metadata_parsed() is parsed  # hot: the same objects, no parse
    for index in range(HOT_ENTRIES - 1):
        compact({"k": index}).client_metadata_parsed()
    assert first.client_metadata_parsed() is parsed  # still among the HOT_ENTRIES last parsed
    compact({"k": "one more"}).client_metadata_parsed()
    again = first.client_metadata_parsed()
    assert again == parsed and again is not parsed  # dropped out: parsed anew, and hot again
    assert first.client_metadata_parsed() is again
    big = compact({"x": "y" * HOT_MAX_BYTES})
    assert big.client_metadata_parsed() is not big.client_metadata_parsed()  # too large to keep
    assert big.client_capabilities == {"x": "y" * HOT_MAX_BYTES}
    assert first.compact().client_metadata_parsed() == parsed  # compact() drops the parsed form


def test_call_started_registers_a_call_once_per_request_id_and_call_ended_drops_the_companion() -> None:
    from fastapi_mcp_ctx._context.cancel_signal import CancelSignal
    from fastapi_mcp_ctx._transport.sessions import LiveSessions

    live = LiveSessions()
    first, second = CancelSignal(), CancelSignal()
    companion = live.call_started("s", 1, first)
    assert companion is not None and companion.in_flight == {1: first}
    assert live.call_started("s", 1, second) is None  # in flight already: nothing registered
    assert companion.in_flight == {1: first}
    assert live.call_started("s", 2, second) is companion
    live.call_ended(companion, "s", 1, first)
    assert live.get("s") is companion and companion.in_flight == {2: second}
    live.call_ended(companion, "s", 2, second)
    assert not live.streaming("s") and live._live == {}  # pyright: ignore[reportPrivateUsage]  # no companion left
