"""The official TypeScript SDK clients (``@modelcontextprotocol/sdk`` v1, ``@modelcontextprotocol/client``
v2; pinned in scripts/node) against examples/quickstart.py on uvicorn over Streamable HTTP.

``sdk_client.mjs`` connects, lists the tools, calls four of them and prints what it saw; the
assertions are here. v1 speaks the 2025 handshake era; v2 is run pinned to 2026-07-28, in its
legacy mode, and in ``auto`` mode (which must pick the 2026 era: the server answers
``server/discover``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .conftest import QUICKSTART_TOOLS, NodeTools

pytestmark = pytest.mark.node_clients

SCRIPT = Path(__file__).with_name("sdk_client.mjs")
EXPECTED = {
    "v1": ("legacy", "2025-11-25"),
    "v2-legacy": ("legacy", "2025-11-25"),
    "v2-modern": ("modern", "2026-07-28"),
    "v2-auto": ("modern", "2026-07-28"),
}


def run_client(node_tools: NodeTools, url: str, mode: str) -> dict[str, Any]:
    run = node_tools.run(["--input-type=module", "-", url, mode], stdin=SCRIPT.read_text(), timeout=60)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)


@pytest.mark.parametrize("mode", sorted(EXPECTED))
def test_typescript_sdk_client(node_tools: NodeTools, quickstart_url: str, mode: str) -> None:
    era, version = EXPECTED[mode]
    seen = run_client(node_tools, quickstart_url, mode)

    assert seen["era"] == era and seen["protocolVersion"] == version
    assert (seen["sessionId"] is None) == (era == "modern")
    assert seen["server"]["name"] == "fastapi-mcp-ctx"
    tools = {tool["name"]: tool for tool in seen["tools"]}
    assert set(tools) == QUICKSTART_TOOLS
    assert tools["count_to"]["inputSchema"]["properties"]["n"] == {"maximum": 100, "minimum": 1, "title": "N", "type": "integer"}

    assert seen["add"]["structuredContent"] == {"result": 42} and seen["add"]["content"] == [{"type": "text", "text": "42"}]
    assert seen["add"]["isError"] is False

    who = seen["whoami"]["structuredContent"]
    assert who["era"] == era and who["protocol_version"] == version and who["session"] == seen["sessionId"]

    assert seen["countTo"]["structuredContent"] == {"result": "counted to 3"}
    assert seen["progress"] == [{"progress": i, "total": 3, "message": f"step {i}"} for i in (1, 2, 3)]

    assert seen["findNote"]["isError"] is True
    assert seen["findNote"]["content"][0] == {"type": "text", "text": "No note with id 999"}
