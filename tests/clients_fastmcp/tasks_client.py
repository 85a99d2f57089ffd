"""FastMCP's own task client (``fastmcp_tasks``, SEP-2663: 2026-07-28 only) against a URL.

Run by tests/test_tasks_fastmcp.py in an environment with ``fastmcp-slim[client]`` and
``fastmcp-tasks``: ``python tasks_client.py URL`` prints one JSON object of what it saw.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from fastmcp import Client
from fastmcp_tasks.client import call_tool_task


async def main(url: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with Client(url, mode="2026-07-28") as client:
        task = await call_tool_task(client, "sleeper", {"seconds": 0.2})
        seen["created"] = task.create_result.status
        seen["polled"] = (await task.status()).status
        seen["result"] = (await task.result()).content[0].text  # type: ignore[union-attr]
        long = await call_tool_task(client, "sleeper", {"seconds": 60})
        await long.wait(state="working", timeout=10)
        await long.cancel()
        seen["cancelled"] = (await long.wait(timeout=10)).status
        seen["transparent"] = (await client.call_tool("sleeper", {"seconds": 0})).content[0].text  # type: ignore[union-attr]
    return seen


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1]))))
