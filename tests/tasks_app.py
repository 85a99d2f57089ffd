"""An app with task tools for the task tests (tests/test_tasks.py, tests/replicas): what each
tool saw (started, cancelled) is recorded in ``EVENTS`` (per process)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import anyio
from fastapi import Depends, FastAPI, Header
from pydantic import BaseModel

from fastapi_mcp_ctx import Context, McpRouter, McpSettings, mcp_context
from fastapi_mcp_ctx.auth import Principal
from fastapi_mcp_ctx.errors import InternalError

EVENTS: list[str] = []


class Confirmation(BaseModel):
    confirm: bool


def authenticate(x_user: str | None = Header(default=None), x_tenant: str | None = Header(default=None)) -> Principal | None:
    """``X-User`` / ``X-Tenant`` name the caller (tests only; None: anonymous)."""
    return None if x_user is None else Principal(subject=x_user, tenant_id=x_tenant)


def bearer(authorization: str | None = Header(default=None)) -> str | None:
    """The ``Authorization`` header of the request (a dependency)."""
    return authorization


def build_app(settings: McpSettings | None = None, *, authenticated: bool = False) -> FastAPI:
    """The task tools on a fresh router (``settings``: the test's)."""
    router = McpRouter(settings=settings, authenticate=authenticate if authenticated else None)

    @router.tool(task="optional")
    async def sleeper(seconds: float, ctx: Context = Depends(mcp_context)) -> str:
        """Sleeps, then answers which replica ran it; records its start and its cancellation."""
        EVENTS.append(f"started {ctx.task.task_id if ctx.task else 'plain'}")
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            EVENTS.append(f"cancelled {ctx.task.task_id if ctx.task else 'plain'}")
            raise
        return f"slept {seconds:g} s on {os.environ.get('MCP_TEST_REPLICA', 'one')}"

    @router.tool(task="required")
    async def only_task(size: int = 10) -> str:
        """A task-only tool answering ``size`` characters."""
        return "x" * size

    @router.tool(task="optional")
    async def broken() -> str:
        """Fails with a JSON-RPC error."""
        raise InternalError("broken on purpose")

    @router.tool(task="optional")
    async def asks(ctx: Context = Depends(mcp_context)) -> str:
        """Asks a confirmation inside the task."""
        answer = await ctx.elicit("Go on?", Confirmation)
        return "confirmed" if answer.data is not None and answer.data.confirm else "declined"

    @router.tool(task="optional")
    async def asks_two(ctx: Context = Depends(mcp_context)) -> str:
        """Asks two confirmations at once (two inputRequests pending together)."""
        first, second = await asyncio.gather(
            ctx.elicit("First?", Confirmation, key="one"), ctx.elicit("Second?", Confirmation, key="two")
        )
        return f"{bool(first.data and first.data.confirm)} {bool(second.data and second.data.confirm)}"

    @router.tool(task="optional")
    async def whoami(token: str | None = Depends(bearer), ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """Known fault B09: the request's dependencies and principal, read after the call was answered."""
        await anyio.sleep(0.05)
        auth = ctx.auth
        return {"token": token, "subject": auth.subject if auth else None, "tenant": auth.tenant_id if auth else None}

    @router.tool()
    async def plain() -> str:
        """Not a task tool."""
        return "plain"

    app = FastAPI()
    app.include_router(router)
    app.state.router = router
    return app


def events() -> list[str]:
    """What the tools recorded so far (a copy)."""
    return list(EVENTS)


def ready(app: Any) -> McpRouter:
    """The app's router."""
    return app.state.router


def __getattr__(name: str) -> Any:
    """``tasks_app:app``, for ``python -m fastapi_mcp_ctx._stdio`` (tests/test_tasks.py): built on
    first access, so importing the module's helpers builds no router."""
    if name == "app":
        return build_app()
    raise AttributeError(name)
