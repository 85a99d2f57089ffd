"""The MCP Inspector's CLI (``@modelcontextprotocol/inspector --cli``, pinned in scripts/node)
against examples/quickstart.py on uvicorn, in both protocol eras (``--protocol-era``).

Asserts on the JSON the inspector prints (``--format json``: ``{"result": ...}`` on stdout;
a tool result with ``isError`` exits 5 with an error envelope on stderr).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import QUICKSTART_TOOLS, NodeTools

pytestmark = pytest.mark.node_clients

VERSION = {"legacy": "2025-11-25", "modern": "2026-07-28"}
EXIT_TOOL_IS_ERROR = 5

Inspector = Callable[..., tuple[int, Any, str]]


@pytest.fixture
def inspector(node_tools: NodeTools, quickstart_url: str, era: str, tmp_path: Path) -> Inspector:
    """``inspector(*args)`` runs ``mcp-inspector --cli URL --protocol-era ERA ARGS`` on the quickstart
    (``era``: the suite's both-eras fixture); it gives (exit status, the parsed stdout or None, stderr)."""
    cli = node_tools.package_bin("@modelcontextprotocol/inspector", "mcp-inspector")
    env = {**os.environ, "HOME": str(tmp_path)}  # its catalog and client config stay out of the user's home

    def run(*args: str) -> tuple[int, Any, str]:
        done = node_tools.run(
            [str(cli), "--cli", quickstart_url, "--format", "json", "--protocol-era", era, "--connect-timeout", "10000", *args],
            env=env,
        )
        return done.returncode, json.loads(done.stdout) if done.stdout.strip() else None, done.stderr

    return run


def test_lists_the_quickstart_tools(inspector: Inspector) -> None:
    status, out, err = inspector("--method", "tools/list")
    assert status == 0, err
    tools = {tool["name"]: tool for tool in out["result"]["tools"]}
    assert set(tools) == QUICKSTART_TOOLS
    add = tools["add"]
    assert add["description"] == "Add two integers."
    assert add["inputSchema"]["required"] == ["a", "b"]
    assert add["inputSchema"]["properties"]["a"] == {"description": "First addend", "title": "A", "type": "integer"}
    assert add["outputSchema"] == {
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
        "x-fastmcp-wrap-result": True,  # FastMCP's client unwraps it; the Inspector ignores it
    }
    assert add["annotations"] == {"readOnlyHint": True}
    assert tools["add_note"]["inputSchema"]["properties"]["text"]["minLength"] == 1


def test_calls_add(inspector: Inspector, era: str) -> None:
    status, out, err = inspector("--method", "tools/call", "--tool-name", "add", "--tool-args-json", '{"a": 2, "b": 40}')
    assert status == 0, err
    result = out["result"]
    assert result["content"] == [{"type": "text", "text": "42"}]
    assert result["structuredContent"] == {"result": 42}
    assert result["isError"] is False
    if era == "modern":
        assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "fastapi-mcp-ctx"
    else:
        assert "_meta" not in result


def test_whoami_sees_the_negotiated_era(inspector: Inspector, era: str) -> None:
    status, out, err = inspector("--method", "tools/call", "--tool-name", "whoami")
    assert status == 0, err
    who = out["result"]["structuredContent"]
    assert who["era"] == era and who["protocol_version"] == VERSION[era] and who["tenant"] == "default"
    assert (who["session"] is None) == (era == "modern")
    assert json.loads(out["result"]["content"][0]["text"]) == who


def test_header_reaches_the_tool(inspector: Inspector) -> None:
    status, out, err = inspector(
        "--method", "tools/call", "--tool-name", "add_note", "--tool-arg", "text=from the inspector", "--header", "X-Author: inspector"
    )
    assert status == 0, err
    note = out["result"]["structuredContent"]
    assert note["text"] == "from the inspector" and note["author"] == "inspector" and note["id"] >= 1


def test_tool_error_is_an_error_result(inspector: Inspector) -> None:
    status, out, err = inspector("--method", "tools/call", "--tool-name", "find_note", "--tool-arg", "note_id=999")
    assert status == EXIT_TOOL_IS_ERROR, err
    assert out["result"]["isError"] is True
    assert out["result"]["content"] == [
        {"type": "text", "text": "No note with id 999"},
        {"type": "text", "text": "Recovery: List notes with add_note first."},
    ]
    assert json.loads(err.strip().splitlines()[-1])["error"]["code"] == "tool_is_error"
