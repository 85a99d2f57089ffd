"""The app the resumability and shutdown tests share (wire tests, and real uvicorn: ``resume_app:app``).

Tools: ``steps`` (progress, then an answer), ``quick`` (answers at once: JSON), ``hold``
(logs, waits for a gate or ``seconds``, logs, answers), ``quiet`` (waits for a gate, says
nothing on the way), ``poll_progress`` (progress, close, progress, answer), ``poke`` / ``poke_me``
(a notification to a session's GET stream), ``poll`` (closes its SSE connection,
then goes on), ``close_get`` (closes the session's GET connection), ``record`` (what ``hold``
saw at its end). Gates are ``anyio.Event`` objects a test puts in :data:`GATES`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
from fastapi import Depends, FastAPI

from fastapi_mcp_ctx import Context, McpRouter, McpSettings, mcp_context

GATES: dict[str, anyio.Event] = {}
ENDED: list[tuple[str, bool, str | None]] = []


@contextmanager
def fresh_gates() -> Iterator[None]:
    """Empty :data:`GATES` and :data:`ENDED` for one test (gates belong to its event loop)."""
    GATES.clear()
    ENDED.clear()
    try:
        yield
    finally:
        GATES.clear()


def build(settings: McpSettings | None = None, **kwargs: Any) -> tuple[FastAPI, McpRouter]:
    """An app with the shared tools; ``kwargs`` go to ``McpRouter`` (``event_store``, ``list_changed``...)."""
    router = McpRouter(settings=settings, **kwargs)

    @router.tool()
    async def steps(n: int = 3, delay_ms: int = 10, ctx: Context = Depends(mcp_context)) -> str:
        """Report progress ``n`` times, ``delay_ms`` apart, then answer."""
        for i in range(1, n + 1):
            await ctx.report_progress(i, n, f"step {i}")
            await anyio.sleep(delay_ms / 1000)
        return f"done {n}"

    @router.tool()
    async def quick() -> str:
        """Answer at once."""
        return "quick"

    @router.tool()
    async def hold(gate: str = "", seconds: float = 0.0, ctx: Context = Depends(mcp_context)) -> str:
        """Log, wait for GATES[gate] (or ``seconds``), log, answer."""
        await ctx.log.info("holding")
        try:
            if gate:
                await GATES[gate].wait()
            else:
                await anyio.sleep(seconds)
        finally:
            ENDED.append((gate, ctx.signal.cancelled, ctx.signal.reason))
        await ctx.log.info("released")
        return f"released {gate}"

    @router.tool()
    async def quiet(gate: str, ctx: Context = Depends(mcp_context)) -> str:
        """Wait for GATES[gate] without a message on the way (the answer may go as JSON)."""
        try:
            await GATES[gate].wait()
        finally:
            ENDED.append((gate, ctx.signal.cancelled, ctx.signal.reason))
        return f"quiet {gate}"

    @router.tool()
    async def poll(gate: str = "", ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """Close this call's SSE connection, log, wait for GATES[gate], log, answer."""
        closed = await ctx.close_sse_stream()
        await ctx.log.info("after close")
        if gate:
            await GATES[gate].wait()
        await ctx.log.info("after gate")
        return {"closed": closed}

    @router.tool()
    async def poll_progress(ctx: Context = Depends(mcp_context)) -> str:
        """Progress 1, close the SSE connection, progress 2 after a while, answer."""
        await ctx.report_progress(1, 2, "before close")
        closed = await ctx.close_sse_stream()
        await anyio.sleep(0.2)
        await ctx.report_progress(2, 2, "after close")
        return f"polled closed={closed}"

    @router.tool()
    async def close_get(ctx: Context = Depends(mcp_context)) -> bool:
        """Close the connection of this session's GET stream (a retry hint first)."""
        return await ctx.close_standalone_sse_stream()

    @router.tool()
    async def poke_me(text: str, ctx: Context = Depends(mcp_context)) -> bool:
        """Send a log-shaped notification to this session's own GET stream."""
        assert ctx.session_id is not None
        return await router.send_notification_to_session(ctx.session_id, "notifications/message", {"level": "info", "data": text})

    @router.tool()
    async def poke(session_id: str, text: str = "poke") -> bool:
        """Send a log-shaped notification to one session's GET stream."""
        return await router.send_notification_to_session(session_id, "notifications/message", {"level": "info", "data": text})

    app = FastAPI()
    app.include_router(router)
    return app, router


app, router = build(list_changed={"tools"})
