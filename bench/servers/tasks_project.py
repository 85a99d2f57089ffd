"""fastapi-mcp-ctx serving ``bench/bench_tasks.py``: ``tasks/get`` of a completed task beside ``tools/call add``.

``add`` is the harness's tool (never a task); ``report`` is a task when the client opts in and
ends at once. Stateless, as ``examples/bench_app.py``, ``log_level="warning"``; the task store
is the session store: memory, or Redis when ``MCP_SESSION_STORE_URL`` is set (the ``redis``
variant of the benchmark).
"""

from __future__ import annotations

from fastapi import FastAPI

from fastapi_mcp_ctx import McpRouter, McpSettings

router = McpRouter(settings=McpSettings(session_mode="stateless", log_level="warning", server_name="bench-project-tasks"))


@router.tool()
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@router.tool(task="optional")
async def report(title: str) -> str:
    """A report that is ready at once (the benchmark reads its finished task)."""
    return f"report {title} ready"


app = FastAPI()
app.include_router(router)
