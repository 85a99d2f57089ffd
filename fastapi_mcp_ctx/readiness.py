"""Readiness for load balancers: can this replica serve MCP now?

A replica behind a load balancer is *ready* when every shared store it uses answers (the
2025 session store, the SSE event log, the replica bus, the ``ctx.state`` backend) and it
is not shutting down. Mount the probe beside the MCP endpoint::

    from fastapi_mcp_ctx.readiness import readiness_router

    app.include_router(mcp_router)
    app.include_router(readiness_router(mcp_router))      # GET /mcp/ready

``GET <mcp path>/ready`` answers ``200 {"ready": true, "checks": {...}}`` or ``503`` with
``Retry-After`` and ``{"ready": false, ...}``; each check is ``{"ok": bool, "store": <class
name>}`` plus ``"error"`` (a short reason, never a URL or a password) when it failed.
In-process stores (the memory twins) are always ready: they have nothing to reach. A
draining replica (``mcp_router.begin_shutdown()``, or SIGTERM under uvicorn) is not ready,
so the balancer stops sending it new requests during a rolling restart (docs/deployment.md).

It is a plain FastAPI route: no MCP envelope, no Host/Origin check (it reveals nothing but
booleans and class names), no authentication unless you add ``dependencies=[...]``.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
from fastapi import APIRouter, params
from fastapi.responses import JSONResponse

from .errors import ConfigurationError, StateUnavailableError

__all__ = ["ReadinessReport", "check_readiness", "readiness_router"]

logger = logging.getLogger("fastapi_mcp_ctx")

RETRY_AFTER_SECONDS = 1
"""``Retry-After`` (seconds) of a 503 readiness answer."""


class _Served(Protocol):
    """What the probe reads from an :class:`~fastapi_mcp_ctx.McpRouter`."""

    mcp_path: str
    sessions: Any
    event_store: Any
    bus: Any
    state_backend: Any

    @property
    def shutting_down(self) -> bool: ...


@dataclass(frozen=True)
class ReadinessReport:
    """The outcome of one probe.

    Attributes:
        ready: every check passed and the router is not shutting down.
        checks: ``{name: {"ok": bool, "store": class name, "error"?: str}}`` for ``sessions``,
            ``events``, ``bus`` and ``state``.
        shutting_down: the router began its graceful shutdown.
    """

    ready: bool
    checks: dict[str, dict[str, Any]]
    shutting_down: bool

    def as_json(self) -> dict[str, Any]:
        """The JSON body of the readiness answer."""
        return {"ready": self.ready, "shuttingDown": self.shutting_down, "checks": self.checks}


def _checker(store: object) -> Callable[[], Awaitable[object]] | None:
    """The store's ``check()`` (or ``ping()``) coroutine function; None for an in-process store."""
    for name in ("check", "ping"):
        method = getattr(store, name, None)
        if method is not None and inspect.iscoroutinefunction(method):
            return method
    return None


async def _run_check(store: object, timeout: float) -> dict[str, Any]:
    outcome: dict[str, Any] = {"ok": True, "store": type(store).__name__}
    check = _checker(store)
    if check is None:
        return outcome
    try:
        with anyio.fail_after(timeout):
            await check()
    except TimeoutError:
        outcome.update(ok=False, error=f"no answer within {timeout:g} s")
    except StateUnavailableError:
        outcome.update(ok=False, error="unreachable")
    except ConfigurationError as exc:
        outcome.update(ok=False, error=exc.message)
    except Exception as exc:  # a probe reports, it never crashes: the cause goes to the log
        logger.warning("readiness check of %s failed", type(store).__name__, exc_info=exc)
        outcome.update(ok=False, error=type(exc).__name__)
    return outcome


async def check_readiness(mcp_router: _Served, *, timeout: float = 2.0) -> ReadinessReport:
    """Probe every store ``mcp_router`` uses, concurrently, each within ``timeout`` seconds.

    A store object used for several roles (one Redis store for sessions and events) is
    probed once and reported under each role.

    Returns:
        :class:`ReadinessReport` (never raises for a store failure: it is reported).
    """
    roles = {
        "sessions": mcp_router.sessions,
        "events": mcp_router.event_store,
        "bus": mcp_router.bus,
        "state": mcp_router.state_backend,
    }
    distinct: dict[int, object] = {id(store): store for store in roles.values()}
    results: dict[int, dict[str, Any]] = {}

    async def probe(key: int, store: object) -> None:
        results[key] = await _run_check(store, timeout)

    async with anyio.create_task_group() as tg:
        for key, store in distinct.items():
            tg.start_soon(probe, key, store)
    checks = {role: dict(results[id(store)]) for role, store in roles.items()}
    shutting_down = mcp_router.shutting_down
    ready = not shutting_down and all(check["ok"] for check in checks.values())
    return ReadinessReport(ready=ready, checks=checks, shutting_down=shutting_down)


def readiness_router(
    mcp_router: _Served,
    *,
    path: str | None = None,
    timeout: float = 2.0,
    dependencies: Sequence[params.Depends] | None = None,
) -> APIRouter:
    """An ``APIRouter`` serving ``GET path`` (default ``<mcp path>/ready``, e.g. ``/mcp/ready``).

    Args:
        mcp_router: the router whose stores are probed.
        path: where the probe is served.
        timeout: seconds each store may take to answer (a slower one counts as down).
        dependencies: FastAPI dependencies guarding the probe (e.g. a shared secret header).
    Returns:
        A router to ``app.include_router``; the answer is 200 or 503 (``Retry-After: 1``),
        body :meth:`ReadinessReport.as_json`, ``Cache-Control: no-store``.
    """
    route_path = path if path is not None else mcp_router.mcp_path.rstrip("/") + "/ready"
    router = APIRouter(dependencies=list(dependencies or []))

    async def ready() -> JSONResponse:
        report = await check_readiness(mcp_router, timeout=timeout)
        headers = {"cache-control": "no-store"}
        if not report.ready:
            headers["retry-after"] = str(RETRY_AFTER_SECONDS)
        return JSONResponse(report.as_json(), status_code=200 if report.ready else 503, headers=headers)

    router.add_api_route(route_path, ready, methods=["GET"], name="mcp_ready", include_in_schema=False)
    return router
