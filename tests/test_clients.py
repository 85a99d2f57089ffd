"""The official MCP client (``mcp`` 2.3.0) against the real quickstart app over real HTTP.

uvicorn serves ``examples.quickstart:app`` on 127.0.0.1 (a free port, chosen by the OS) in a
background thread. Both client modes run: ``legacy`` (initialize handshake, Mcp-Session-Id)
and ``2026-07-28`` (stateless per-request envelope). Checklist §8.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from serving import uvicorn_thread

from examples import quickstart

MODES = ["legacy", "2026-07-28"]


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    """Serve the quickstart app with uvicorn on 127.0.0.1 (port 0 = any free port)."""
    with uvicorn_thread(quickstart.app) as url:
        yield url


@pytest.fixture(autouse=True)
def _clean_book() -> None:
    quickstart.BOOK.notes.clear()
    quickstart.BOOK.events.clear()


def client_for(url: str, mode: str, headers: dict[str, str] | None = None, **kwargs: Any) -> Client:
    if headers is None:
        return Client(url, mode=mode, cache=None, **kwargs)
    transport = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
    return Client(transport, mode=mode, cache=None, **kwargs)


@pytest.mark.parametrize("mode", MODES)
async def test_client_lists_tools_and_adds(server_url: str, mode: str) -> None:
    with anyio.fail_after(15):
        async with client_for(server_url, mode) as client:
            assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
            listing = await client.list_tools()
            names = [t.name for t in listing.tools]
            assert names == ["add", "add_note", "whoami", "count_to", "find_note", "remember", "recall"]
            add = next(t for t in listing.tools if t.name == "add")
            assert add.input_schema["properties"]["a"]["description"] == "First addend"
            assert add.annotations is not None and add.annotations.read_only_hint is True
            result = await client.call_tool("add", {"a": 2, "b": 3})
            assert result.is_error is False
            assert result.structured_content == {"result": 5}
            assert isinstance(result.content[0], types.TextContent) and result.content[0].text == "5"


@pytest.mark.parametrize("mode", MODES)
async def test_client_add_note_yield_dependency_order_and_header(server_url: str, mode: str) -> None:
    with anyio.fail_after(15):
        async with client_for(server_url, mode, headers={"X-Author": "ada"}) as client:
            first = await client.call_tool("add_note", {"text": "first"})
            second = await client.call_tool("add_note", {"text": "second"})
    assert first.is_error is False and second.is_error is False
    assert first.structured_content == {"id": 1, "text": "first", "author": "ada"}
    assert second.structured_content == {"id": 2, "text": "second", "author": "ada"}
    events = quickstart.BOOK.events
    assert len(events) == 6, events
    for chunk in (events[0:3], events[3:6]):
        assert chunk[0] == "db:open"
        assert re.fullmatch(r"tool:add_note:.+", chunk[1])
        assert chunk[2] == "db:close"
    assert events[1] != events[4], "each call has its own request id"


@pytest.mark.parametrize("mode", MODES)
async def test_client_add_note_default_author(server_url: str, mode: str) -> None:
    with anyio.fail_after(15):
        async with client_for(server_url, mode) as client:
            result = await client.call_tool("add_note", {"text": "anon"})
    assert result.structured_content == {"id": 1, "text": "anon", "author": "anonymous"}


@pytest.mark.parametrize("mode", MODES)
async def test_client_add_note_invalid_argument_is_tool_error(server_url: str, mode: str) -> None:
    with anyio.fail_after(15):
        async with client_for(server_url, mode) as client:
            result = await client.call_tool("add_note", {"text": ""})
    assert result.is_error is True
    assert "text" in result.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", MODES)
async def test_client_whoami(server_url: str, mode: str) -> None:
    with anyio.fail_after(15):
        async with client_for(server_url, mode, headers={"User-Agent": "pytest-agent/1.0"}) as client:
            result = await client.call_tool("whoami", {})
            second = await client.call_tool("whoami", {})
    out = result.structured_content
    assert out is not None
    assert out["user_agent"] == "pytest-agent/1.0"
    assert out["tenant"] == "default"
    if mode == "legacy":
        assert out["era"] == "legacy"
        assert out["protocol_version"] == "2025-11-25"
        assert out["session"] and second.structured_content["session"] == out["session"]  # type: ignore[index]
    else:
        assert out["era"] == "modern"
        assert out["protocol_version"] == "2026-07-28"
        assert out["session"] is None


@pytest.mark.parametrize("mode", MODES)
async def test_client_count_to_progress_in_order(server_url: str, mode: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    with anyio.fail_after(15):
        async with client_for(server_url, mode) as client:
            result = await client.call_tool("count_to", {"n": 4}, progress_callback=on_progress)
    assert result.is_error is False
    assert result.structured_content == {"result": "counted to 4"}
    assert [p for p, _, _ in seen] == [1, 2, 3, 4]
    assert all(t == 4 for _, t, _ in seen)
    assert [m for _, _, m in seen] == ["step 1", "step 2", "step 3", "step 4"]


@pytest.mark.parametrize("mode", MODES)
async def test_client_logging_callback(server_url: str, mode: str) -> None:
    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    extra: dict[str, Any] = {"log_level": "info"} if mode != "legacy" else {}
    with anyio.fail_after(15):
        async with client_for(server_url, mode, logging_callback=on_log, **extra) as client:
            await client.call_tool("count_to", {"n": 2})
    assert [entry.data["value"] for entry in logs] == [1, 2]  # type: ignore[index]
    assert all(entry.level == "info" for entry in logs)


@pytest.mark.parametrize("mode", MODES)
async def test_client_find_note_sync_tool_and_tool_error(server_url: str, mode: str) -> None:
    with anyio.fail_after(15):
        async with client_for(server_url, mode) as client:
            missing = await client.call_tool("find_note", {"note_id": 7})
            await client.call_tool("add_note", {"text": "kept"})
            found = await client.call_tool("find_note", {"note_id": 1})
    assert missing.is_error is True
    assert "No note with id 7" in missing.content[0].text  # type: ignore[union-attr]
    assert found.structured_content == {"id": 1, "text": "kept", "author": "anonymous"}


async def test_client_auto_mode_picks_modern(server_url: str) -> None:
    with anyio.fail_after(15):
        async with Client(server_url, mode="auto", cache=None) as client:
            assert client.protocol_version == "2026-07-28"
            result = await client.call_tool("add", {"a": 1, "b": 41})
    assert result.structured_content == {"result": 42}


async def test_readme_client_script_runs_as_a_file(server_url: str) -> None:
    """examples/client.py (the README's client block) runs as written, as a separate process."""
    script = Path(__file__).resolve().parents[1] / "examples" / "client.py"
    with anyio.fail_after(60):
        done = await anyio.run_process([sys.executable, str(script), server_url], check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().splitlines() == [
        "2025-11-25 {'id': 1, 'text': 'hello', 'author': 'anonymous'}",
        "2026-07-28 {'id': 2, 'text': 'hello', 'author': 'anonymous'}",
    ]

@pytest.mark.parametrize("mode", MODES)
async def test_client_remember_recall_in_ctx_state(server_url: str, mode: str) -> None:
    key = f"memo-{mode.replace('.', '')[:6]}"
    with anyio.fail_after(15):
        async with client_for(server_url, mode) as client:
            missing = await client.call_tool("recall", {"key": "never-stored"})
            stored = await client.call_tool("remember", {"key": key, "text": "milk"})
        async with client_for(server_url, mode) as client:  # another session: the state outlives it
            recalled = await client.call_tool("recall", {"key": key})
    assert missing.is_error is True and "No memo named" in missing.content[0].text  # type: ignore[union-attr]
    assert stored.structured_content == {"key": key, "text": "milk"}
    assert recalled.structured_content == {"key": key, "text": "milk"}
