"""Unit tests of the stdio parts: line framing, the pending-request table, finding the
McpRouter of an app, and one in-process session over OS pipes (responses from the client
reach the pending table)."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from conftest import make_app, make_router
from fastapi import APIRouter, FastAPI

from fastapi_mcp_ctx._discovery import find_targets
from fastapi_mcp_ctx._stdio.serve import load_app, resolve_app
from fastapi_mcp_ctx._stdio.session import LineFramer, StdioSession
from fastapi_mcp_ctx._transport.pending import PendingRequests
from fastapi_mcp_ctx._wire.jsonrpc import JsonRpcResponse
from fastapi_mcp_ctx.errors import AppLoadError


# -- LineFramer ---------------------------------------------------------------------------
def test_framer_joins_lines_across_chunks_and_flushes_the_tail_at_eof() -> None:
    framer = LineFramer(limit=100)
    assert framer.feed(b'{"a"') == []
    assert framer.feed(b':1}\n{"b":2}\n{"c"') == [b'{"a":1}', b'{"b":2}']
    assert framer.feed(b":3}\r\n\n") == [b'{"c":3}\r', b""]
    assert framer.feed(b"tail") == []
    assert framer.feed(b"") == [b"tail"]
    assert framer.feed(b"") == []


def test_framer_replaces_an_oversized_line_by_none_without_buffering_it() -> None:
    framer = LineFramer(limit=8)
    assert framer.feed(b"12345678\n") == [b"12345678"]  # exactly the limit: fine
    assert framer.feed(b"123456789") == [None]  # one byte over: reported at once
    assert framer.feed(b"x" * 10_000) == []  # the rest of that line is skipped
    assert framer.feed(b"more\nok\n") == [b"ok"]
    assert framer.feed(b"0123456789\nnext\n") == [None, b"next"]
    assert framer.feed(b"way too long at eof") == [None]
    assert framer.feed(b"") == []


# -- PendingRequests ----------------------------------------------------------------------
async def test_pending_table_routes_a_response_to_its_waiter() -> None:
    table = PendingRequests()
    first, second = table.open(), table.open()
    assert first != second and len(table) == 2
    assert table.resolve(JsonRpcResponse(second, {"ok": 2}, None))
    assert not table.resolve(JsonRpcResponse(second, {"ok": "again"}, None))  # answered already
    assert not table.resolve(JsonRpcResponse(str(first), {}, None))  # "1" is not 1
    assert not table.resolve(JsonRpcResponse(None, None, {"code": -32700, "message": "x"}))
    assert not table.resolve(JsonRpcResponse(999, {}, None))  # never sent
    assert (await table.wait(second, timeout=30)).result == {"ok": 2}
    assert len(table) == 1

    async def answer_later() -> None:
        await anyio.sleep(0.05)
        assert table.resolve(JsonRpcResponse(first, None, {"code": -1, "message": "declined"}))

    async with anyio.create_task_group() as tg:
        tg.start_soon(answer_later)
        response = await table.wait(first, timeout=30)
    assert response.error == {"code": -1, "message": "declined"} and len(table) == 0


async def test_pending_entries_leave_on_timeout_and_close() -> None:
    table = PendingRequests()
    late = table.open()
    with pytest.raises(TimeoutError):
        await table.wait(late, timeout=0.05)
    assert len(table) == 0 and not table.resolve(JsonRpcResponse(late, {}, None))  # a late answer is not ours
    with pytest.raises(KeyError):
        await table.wait(late, timeout=0.05)
    waiting = table.open()

    async def close_soon() -> None:
        await anyio.sleep(0.05)
        table.close()

    async with anyio.create_task_group() as tg:
        tg.start_soon(close_soon)
        with pytest.raises(anyio.ClosedResourceError):
            await table.wait(waiting, timeout=30)
    assert len(table) == 0
    with pytest.raises(anyio.ClosedResourceError):
        table.open()


# -- finding the router -------------------------------------------------------------------
def test_find_targets_sees_prefixed_includes_and_mounted_apps() -> None:
    router = make_router()
    outer = APIRouter(prefix="/api")
    outer.include_router(router, prefix="/v1")
    app = FastAPI()
    app.include_router(outer)
    sub = make_app(other := make_router())
    app.mount("/sub", sub)
    targets = find_targets(app)
    assert [(t.path, t.router, t.app) for t in targets] == [("/api/v1/mcp", router, app), ("/sub/mcp", other, sub)]


def test_resolve_app_chooses_or_explains() -> None:
    one, two = make_router(), make_router(path="/other")
    app = make_app(one, two)
    with pytest.raises(AppLoadError, match=r"several McpRouters .*/mcp, /other.*--path"):
        resolve_app(app, "m:app", None)
    assert resolve_app(app, "m:app", "/other")[1].router is two
    with pytest.raises(AppLoadError, match="no McpRouter at path '/nope' \\(found: /mcp, /other\\)"):
        resolve_app(app, "m:app", "/nope")
    with pytest.raises(AppLoadError, match="has no McpRouter: add one"):
        resolve_app(FastAPI(), "m:app", None)
    with pytest.raises(AppLoadError, match="is a dict, not a FastAPI/Starlette app"):
        resolve_app({}, "m:thing", None)
    wrapped, target = resolve_app(one, "m:router", None)  # an McpRouter alone is served in an app of its own
    assert isinstance(wrapped, FastAPI) and target.router is one and target.path == "/mcp"


def test_load_app_errors_say_what_to_fix() -> None:
    for spec in ("no_colon", ":app", "module:"):
        with pytest.raises(AppLoadError, match="'module:attribute'"):
            load_app(spec)
    with pytest.raises(AppLoadError, match="Cannot import module 'no_such_module_xyz'"):
        load_app("no_such_module_xyz:app")
    with pytest.raises(AppLoadError, match=r"has no attribute 'nope\.deeper'"):
        load_app("json:nope.deeper")
    assert load_app("json:decoder.JSONDecoder") is json.decoder.JSONDecoder


# -- one session over OS pipes, in process ------------------------------------------------
@asynccontextmanager
async def pipe_session() -> AsyncIterator[tuple[StdioSession, int, int]]:
    """A session on two fresh pipes: yields ``(session, client_write_fd, client_read_fd)``."""
    server_in, client_out = os.pipe()
    client_in, server_out = os.pipe()
    app = make_app(router := make_router())
    session = StdioSession(router, app=app, path="/mcp", read_fd=server_in, write_fd=server_out, drain_seconds=0.1)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(session.serve)
            yield session, client_out, client_in
            os.close(client_out)  # EOF: the session ends
            client_out = -1
    finally:
        for fd in (server_in, server_out, client_in, client_out):
            if fd >= 0:
                os.close(fd)


def _write(fd: int, message: dict[str, Any]) -> None:
    os.write(fd, json.dumps(message).encode() + b"\n")


async def _read_line(fd: int) -> dict[str, Any]:
    data = b""
    with anyio.fail_after(30):
        while not data.endswith(b"\n"):
            data += await anyio.to_thread.run_sync(os.read, fd, 1)
    return json.loads(data)


async def test_responses_from_the_client_reach_the_pending_table() -> None:
    async with pipe_session() as (session, to_server, from_server):
        request_id = session.pending.open()
        _write(to_server, {"jsonrpc": "2.0", "id": 12345, "result": {}})  # unknown id: ignored
        _write(to_server, {"jsonrpc": "2.0", "id": request_id, "result": {"action": "accept"}})
        response = await session.pending.wait(request_id, timeout=5)
        assert response.result == {"action": "accept"}
        _write(to_server, {"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert await _read_line(from_server) == {"jsonrpc": "2.0", "id": 1, "result": {}}  # nothing came before it
