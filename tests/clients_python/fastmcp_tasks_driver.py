"""Drive an MCP server's tasks with FastMCP's own client (fastmcp 4.1.6 + fastmcp-tasks 4.1.4).

Runs in the virtualenv ``scripts/python_clients.sh`` installs, never in the project's own: it
imports only FastMCP. Usage::

    python fastmcp_tasks_driver.py URL SCENARIO

prints one JSON object on stdout (what the client saw) and exits 0; an exception exits 1 with
its traceback on stderr. Scenarios, each over one modern (``server/discover``) connection:

- ``transparent``: ``client.call_tool`` of a task tool; the tasks extension polls ``tasks/get``
  to the result under the hood.
- ``explicit``: ``call_tool_task`` returns a handle at once; ``status()``, ``wait()``,
  ``result()``.
- ``cancel``: ``call_tool_task`` of a tool that runs until cancelled, ``wait(state="working")``,
  ``cancel()``, ``wait()`` for the terminal state.
- ``input``: a task tool that elicits; the client's ``elicitation_handler`` answers through
  ``tasks/update`` and the task completes.
- ``plain``: ``client.call_tool`` of a tool that is not a task.
- ``legacy``: over an ``initialize`` (2025-11-25) connection, where FastMCP's tasks client is
  inert: ``client.call_tool`` of the task tool runs as a normal call.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import fastmcp_tasks  # registers the tasks client extension on every Client
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport


def _text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def _answer(message: str, response_type: Any, params: Any, context: Any) -> dict[str, Any]:
    return {"confirm": True}


async def run(url: str, scenario: str) -> dict[str, Any]:
    mode = "legacy" if scenario == "legacy" else "auto"
    client = Client(StreamableHttpTransport(url), elicitation_handler=_answer, timeout=60, mode=mode)
    async with client:
        seen: dict[str, Any] = {"protocolVersion": client.protocol_version}
        if scenario == "transparent":
            result = await client.call_tool("report", {"steps": 3})
            seen.update(text=_text(result), isError=result.is_error)
        elif scenario == "explicit":
            task = await fastmcp_tasks.call_tool_task(client, "report", {"steps": 3})
            first = await task.status()
            final = await task.wait(timeout=60)
            result = await task.result()
            seen.update(
                taskId=task.task_id,
                created=task.create_result.status,
                first=first.status,
                final=final.status,
                text=_text(result),
            )
        elif scenario == "cancel":
            task = await fastmcp_tasks.call_tool_task(client, "wait_until_cancelled", {})
            await task.wait(state="working", timeout=60)
            await task.cancel()
            final = await task.wait(timeout=60)
            saw = False
            for _ in range(200):  # the handler sees its cancellation after the acknowledgement
                saw = (await client.call_tool("cancel_seen", {"task_id": task.task_id})).data
                if saw:
                    break
                await asyncio.sleep(0.05)
            seen.update(taskId=task.task_id, final=final.status, handlerSawCancel=saw)
        elif scenario == "input":
            result = await client.call_tool("confirm_purge", {"what": "logs"})
            seen.update(text=_text(result), isError=result.is_error)
        elif scenario == "legacy":
            result = await client.call_tool("report", {"steps": 2})
            seen.update(text=_text(result), isError=result.is_error)
        elif scenario == "plain":
            result = await client.call_tool("echo", {"text": "hi"})
            seen.update(text=_text(result), isError=result.is_error)
        else:
            raise SystemExit(f"unknown scenario {scenario!r}")
        return seen


if __name__ == "__main__":
    print(json.dumps(asyncio.run(run(sys.argv[1], sys.argv[2]))))
