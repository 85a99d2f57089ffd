"""Readiness for load balancers: can this replica serve MCP now?

A replica behind a load balancer is *ready* when every shared store it uses answers (the
2025 session store, the SSE event log, the replica bus, the ``ctx.state`` backend:
:meth:`McpRouter.ready() <fastapi_mcp_ctx.McpRouter.ready>` probes them) and it is not
shutting down. Mount the probe beside the MCP endpoint::

    from fastapi_mcp_ctx.readiness import readiness_router

    app.include_router(mcp_router)
    app.include_router(readiness_router(mcp_router))      # GET /mcp/ready

``GET <mcp path>/ready`` answers ``200 {"ready": true, "shuttingDown": false, "checks": {...}}``
or ``503`` with ``Retry-After`` and ``"ready": false``; each check (``sessions``, ``events``,
``bus``, ``state``) is ``"ok"``, ``"in-process"`` (a memory twin: nothing to reach) or
``"unavailable: <why>"`` (never a URL or a password). A draining replica
(``mcp_router.begin_shutdown()``, or SIGTERM under uvicorn) is not ready, so the balancer stops
sending it new requests during a rolling restart (docs/deployment.md "Rolling restarts").

It is a plain FastAPI route: no MCP envelope, no Host/Origin check (it reveals nothing but the
checks' states), no authentication unless you pass ``dependencies=[...]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Protocol

from fastapi import APIRouter, params
from fastapi.responses import JSONResponse

__all__ = ["RETRY_AFTER_SECONDS", "readiness_router"]

RETRY_AFTER_SECONDS: Final = 1
"""``Retry-After`` (seconds) of a 503 readiness answer."""


class _Probed(Protocol):
    """What the probe reads from an :class:`~fastapi_mcp_ctx.McpRouter`."""

    mcp_path: str

    @property
    def shutting_down(self) -> bool: ...

    async def ready(self) -> dict[str, Any]: ...


def readiness_router(
    mcp_router: _Probed, *, path: str | None = None, dependencies: Sequence[params.Depends] | None = None
) -> APIRouter:
    """An ``APIRouter`` serving ``GET path`` (default ``<mcp path>/ready``, e.g. ``/mcp/ready``).

    Args:
        mcp_router: the router whose stores are probed (each within 2 s).
        path: where the probe is served.
        dependencies: FastAPI dependencies guarding the probe (e.g. a shared secret header).
    Returns:
        A router to ``app.include_router``. The answer is 200 when every check passes and the
        router is not shutting down, else 503 with ``Retry-After: 1``; the body is
        ``{"ready": bool, "shuttingDown": bool, "checks": {...}}``, with ``Cache-Control: no-store``.
    """
    route_path = path if path is not None else mcp_router.mcp_path.rstrip("/") + "/ready"
    router = APIRouter(dependencies=list(dependencies or []))

    async def ready() -> JSONResponse:
        report = await mcp_router.ready()
        shutting_down = mcp_router.shutting_down
        ready = bool(report["ready"]) and not shutting_down
        body = {**report, "ready": ready, "shuttingDown": shutting_down}
        headers = {"cache-control": "no-store"}
        if not ready:
            headers["retry-after"] = str(RETRY_AFTER_SECONDS)
        return JSONResponse(body, status_code=200 if ready else 503, headers=headers)

    router.add_api_route(route_path, ready, methods=["GET"], name="mcp_ready", include_in_schema=False)
    return router
