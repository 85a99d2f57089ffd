"""FastMCP's own client (fastmcp 4.1.6 with its tasks client, fastmcp-tasks 4.1.4) drives tasks.

``fastmcp_tasks_driver.py`` runs in the clients' venv (``scripts/python_clients.sh``) against
``tasks_app.py`` on uvicorn and prints what it saw; the assertions are here. FastMCP's tasks
client speaks the tasks extension of 2026-07-28 (``io.modelcontextprotocol/tasks``, SEP-2663)
only: on an ``initialize`` connection it is inert, and a task-capable tool runs as a normal call.
It sends no ``Mcp-Name`` on ``tasks/get``/``tasks/update``/``tasks/cancel`` (the SEP asks clients
to), which this server tolerates (it checks the header when present).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.py_clients

DRIVER = Path(__file__).with_name("fastmcp_tasks_driver.py")


def drive(python: Path, url: str, scenario: str) -> dict[str, Any]:
    run = subprocess.run([str(python), str(DRIVER), url, scenario], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, f"{scenario}: rc {run.returncode}\n{run.stderr[-3000:]}"
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_call_tool_polls_a_task_to_its_result(python_clients: Path, tasks_url: str) -> None:
    seen = drive(python_clients, tasks_url, "transparent")
    assert seen == {"protocolVersion": "2026-07-28", "text": "report of 3 steps", "isError": False}


def test_call_tool_task_creates_and_polls_a_task(python_clients: Path, tasks_url: str) -> None:
    seen = drive(python_clients, tasks_url, "explicit")
    assert seen["protocolVersion"] == "2026-07-28"
    assert seen["taskId"]
    assert seen["created"] == "working"
    assert seen["first"] in {"working", "completed"}
    assert (seen["final"], seen["text"]) == ("completed", "report of 3 steps")


def test_cancel_reaches_the_running_handler(python_clients: Path, tasks_url: str) -> None:
    seen = drive(python_clients, tasks_url, "cancel")
    assert seen["final"] == "cancelled"
    assert seen["handlerSawCancel"] is True


def test_a_question_inside_a_task_is_answered_through_tasks_update(python_clients: Path, tasks_url: str) -> None:
    seen = drive(python_clients, tasks_url, "input")
    assert seen == {"protocolVersion": "2026-07-28", "text": "purged logs", "isError": False}


def test_a_tool_that_is_not_a_task_answers_at_once(python_clients: Path, tasks_url: str) -> None:
    assert drive(python_clients, tasks_url, "plain") == {"protocolVersion": "2026-07-28", "text": "hi", "isError": False}


def test_on_a_2025_connection_a_task_tool_runs_as_a_normal_call(python_clients: Path, tasks_url: str) -> None:
    seen = drive(python_clients, tasks_url, "legacy")
    assert seen == {"protocolVersion": "2025-11-25", "text": "report of 2 steps", "isError": False}
