"""The app FastMCP's tasks client drives (tests/clients_python/test_fastmcp_tasks.py).

``report`` is a task when the client opts in, ``wait_until_cancelled`` only ever a task (it
records, in :data:`CANCELLED`, the task id it saw cancelled, read back through ``cancel_seen``),
``confirm_purge`` asks a question from inside its task, ``echo`` is never a task.
"""

from __future__ import annotations

import anyio
from fastapi import Depends, FastAPI
from pydantic import BaseModel

from fastapi_mcp_ctx import Context, McpRouter, mcp_context

router = McpRouter()
CANCELLED: set[str] = set()


@router.tool(task="optional")
async def report(steps: int, ctx: Context = Depends(mcp_context)) -> str:
    """Builds a report in ``steps`` steps of 0.05 s, publishing each as the task's status."""
    for step in range(1, steps + 1):
        if ctx.task is not None:
            await ctx.task.status(f"step {step} of {steps}")
        await anyio.sleep(0.05)
    return f"report of {steps} steps"


@router.tool(task="required")
async def wait_until_cancelled(ctx: Context = Depends(mcp_context)) -> str:
    """Runs until its task is cancelled (at most 120 s), then notes that it saw the cancellation."""
    try:
        await anyio.sleep(120)
    except anyio.get_cancelled_exc_class():
        if ctx.task is not None:
            CANCELLED.add(ctx.task.task_id)
        raise
    return "never cancelled"


@router.tool()
async def cancel_seen(task_id: str) -> bool:
    """Whether ``wait_until_cancelled`` saw task ``task_id`` cancelled."""
    return task_id in CANCELLED


class Purge(BaseModel):
    confirm: bool


@router.tool(task="optional")
async def confirm_purge(what: str, ctx: Context = Depends(mcp_context)) -> str:
    """Asks for confirmation inside its task (the task goes input_required), then purges or keeps."""
    answer = await ctx.elicit(f"Purge {what}?", Purge)
    if answer.action == "accept" and answer.data is not None and answer.data.confirm:
        return f"purged {what}"
    return f"kept {what}"


@router.tool()
async def echo(text: str) -> str:
    """Echoes ``text`` (never a task)."""
    return text


app = FastAPI()
app.include_router(router)
