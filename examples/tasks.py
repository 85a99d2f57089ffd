"""Tasks: long tool calls a client polls, updates or cancels, on any replica (docs/tasks.md).

Run:  uvicorn examples.tasks:app --port 8000
"""

from __future__ import annotations

import anyio
from fastapi import Depends, FastAPI
from pydantic import BaseModel

from fastapi_mcp_ctx import Context, McpRouter, mcp_context

mcp_router = McpRouter()


class Confirm(BaseModel):
    confirm: bool


@mcp_router.tool(task="optional")
async def build_report(pages: int, ctx: Context = Depends(mcp_context)) -> str:
    """Build a report of ``pages`` pages: a task when the client opts in, else a plain call."""
    for page in range(1, pages + 1):
        await anyio.sleep(0.01)  # the real work
        if ctx.task is not None:
            await ctx.task.status(f"page {page} of {pages}")
    return f"report of {pages} pages"


@mcp_router.tool(task="required")
async def purge(ctx: Context = Depends(mcp_context)) -> str:
    """Purge the archive once the user confirms: always a task (its question waits in the task)."""
    answer = await ctx.elicit("Purge the whole archive?", Confirm)
    if answer.data is None or not answer.data.confirm:
        return "kept the archive"
    return "archive purged"


app = FastAPI()
app.include_router(mcp_router)
