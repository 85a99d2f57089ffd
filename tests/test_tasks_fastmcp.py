"""FastMCP 4's own task client (``fastmcp_tasks`` 4.1.4, SEP-2663) against this server over real
HTTP: it creates a task, polls it, reads its result, cancels another (the handler sees it) and
calls a task tool transparently. Its source says tasks are 2026-07-28 only ("on a legacy
connection ... this extension is inert"), so it runs in that era.

The client runs in its own interpreter (``tests/clients_fastmcp/tasks_client.py``): this one when
it has ``fastmcp_tasks`` (the ``test`` extra), else the one ``MCP_TEST_FASTMCP_PYTHON`` names."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import mcp_settings
from serving import uvicorn_thread
from tasks_app import build_app, events

CLIENT = Path(__file__).parent / "clients_fastmcp" / "tasks_client.py"


def interpreter() -> str:
    named = os.environ.get("MCP_TEST_FASTMCP_PYTHON")
    if named:
        return named
    if importlib.util.find_spec("fastmcp_tasks") is None:
        pytest.skip("fastmcp-tasks is not installed (pip install -e '.[test]', or set MCP_TEST_FASTMCP_PYTHON)")
    return sys.executable


def test_fastmcp_task_client_creates_polls_and_cancels() -> None:
    python = interpreter()
    before = len(events())
    with uvicorn_thread(build_app(mcp_settings())) as url:
        run = subprocess.run([python, str(CLIENT), url], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen.pop("polled") in ("working", "completed")  # a loaded machine may poll after the 0.2 s
    assert seen == {
        "created": "working",
        "result": "slept 0.2 s on one",
        "cancelled": "cancelled",
        "transparent": "slept 0 s on one",
    }
    assert any(e.startswith("cancelled ") for e in events()[before:])  # the handler saw the cancel
