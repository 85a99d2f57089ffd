"""One app, several replicas: run it N times behind a round-robin proxy, no sticky sessions.

Every replica shares the same settings (docs/deployment.md "Settings every replica shares"):

    MCP_SESSION_STORE_URL=redis://redis:6379/0   2025 sessions, the SSE event log, the bus
    MCP_STORAGE_URL=redis://redis:6379/1         ctx.state
    MCP_REQUEST_STATE_KEY=<fastapi-mcp-ctx keygen>

    uvicorn examples.replicated_app:app --port 8001 --proxy-headers   # and 8002, 8003...

``REPLICA_NAME`` (not an MCP setting: a label of this process) is what ``served_by`` returns and
what the ``X-Served-By`` response header says, so you can watch the proxy alternate; it
defaults to ``<host name>:<pid>``. ``GET /mcp/ready`` is the load balancer's readiness probe.
compose.yaml runs two replicas, nginx (deploy/nginx.conf.template) and Redis.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

import anyio
from fastapi import Depends, FastAPI
from pydantic import BaseModel, Field
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fastapi_mcp_ctx import Context, McpRouter, mcp_context
from fastapi_mcp_ctx.readiness import readiness_router

REPLICA = os.environ.get("REPLICA_NAME") or f"{socket.gethostname()}:{os.getpid()}"

mcp_router = McpRouter(list_changed={"tools", "prompts"})

JobName = Annotated[str, Field(pattern=r"^[a-z0-9_-]{1,64}$", description="A name for this unit of work")]


@mcp_router.tool(annotations={"readOnlyHint": True})
async def served_by() -> str:
    """The replica that runs this call."""
    return REPLICA


@mcp_router.tool()
async def work(
    job: JobName, steps: Annotated[int, Field(ge=1, le=20)] = 3, ctx: Context = Depends(mcp_context)
) -> dict[str, str]:
    """Report progress and log ``steps`` times, record this execution in ctx.state, answer."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"{job}:{i}")
        await ctx.log.info(f"{job}:{i}", replica=REPLICA)
    await ctx.state.set(f"runs/{job}/{uuid.uuid4().hex}", REPLICA)  # one entry per execution
    return {"job": job, "replica": REPLICA}


@mcp_router.tool(annotations={"readOnlyHint": True})
async def runs(job: JobName, ctx: Context = Depends(mcp_context)) -> list[str]:
    """The replicas that executed ``job``, one entry per execution (sorted)."""
    found: list[str] = []
    cursor: str | None = None
    while True:
        page = await ctx.state.list(f"runs/{job}/", cursor=cursor, limit=1000)
        found.extend(str(item.value) for item in page.items)
        if (cursor := page.next_cursor) is None:
            return sorted(found)


@mcp_router.tool()
async def announce(kind: Literal["tools", "prompts"]) -> str:
    """Announce a change of the tool or prompt list, to every stream on every replica."""
    if kind == "tools":
        await mcp_router.notify_tools_list_changed()
    else:
        await mcp_router.notify_prompts_list_changed()
    return REPLICA


@mcp_router.tool()
async def poke(text: str, ctx: Context = Depends(mcp_context)) -> bool:
    """Send a log message to this session's GET stream, whichever replica holds it."""
    if ctx.session_id is None:
        return False
    params = {"level": "info", "logger": "poke", "data": text}
    return await mcp_router.send_notification_to_session(ctx.session_id, "notifications/message", params)


@mcp_router.tool()
async def long_job(
    steps: Annotated[int, Field(ge=2, le=20)] = 4,
    delay: Annotated[float, Field(ge=0, le=5)] = 0.3,
    ctx: Context = Depends(mcp_context),
) -> dict[str, Any]:
    """Progress 1, then close this call's SSE connection (the client resumes, on any replica),
    then the remaining progress ``delay`` seconds apart, then the result."""
    await ctx.report_progress(1, steps, "1")
    closed = await ctx.close_sse_stream()
    for i in range(2, steps + 1):
        await anyio.sleep(delay)
        await ctx.report_progress(i, steps, str(i))
    return {"replica": REPLICA, "closed": closed, "steps": steps}


@mcp_router.tool()
async def ping_client(ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
    """Ping the client from this call; its answer may arrive on any replica."""
    answer = await ctx.send_request("ping", timeout=10)
    return {"replica": REPLICA, "answer": answer}


class Name(BaseModel):
    name: str


@mcp_router.tool()
async def ask_name(ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
    """Ask the user's name (2025: a live elicitation/create; its answer may arrive on any replica)."""
    answer = await ctx.elicit("What is your name?", Name)
    return {"replica": REPLICA, "action": answer.action, "name": answer.data.name if answer.data else None}


@mcp_router.tool(task="optional")
async def report(seconds: Annotated[float, Field(ge=0, le=600)] = 1.0, ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
    """A long report: a task when the client opts in (docs/tasks.md), so any replica can report,
    update or cancel it. Records in ctx.state the replica running it and a cancellation it saw."""
    task = ctx.task.task_id if ctx.task is not None else "plain"
    await ctx.state.set(f"reports/{task}/started", REPLICA)
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await ctx.state.set(f"reports/{task}/cancelled", REPLICA)
        raise
    return {"replica": REPLICA, "seconds": seconds}


@mcp_router.tool(annotations={"readOnlyHint": True})
async def report_events(task: str, ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
    """Where task ``task`` of ``report`` started, and where it saw its cancellation (or None)."""
    return {
        "started": await ctx.state.get(f"reports/{task}/started"),
        "cancelled": await ctx.state.get(f"reports/{task}/cancelled"),
    }


class ServedBy:
    """Pure ASGI middleware adding ``X-Served-By: <REPLICA_NAME>`` to every response (streams too)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def tagged(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"x-served-by", REPLICA.encode())]}
            await send(message)

        await self.app(scope, receive, tagged)


@asynccontextmanager
async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
    yield
    await mcp_router.aclose()


app = FastAPI(title="fastapi-mcp-ctx replicated", lifespan=lifespan)
app.include_router(mcp_router)
app.include_router(readiness_router(mcp_router))  # GET /mcp/ready
app.add_middleware(ServedBy)
