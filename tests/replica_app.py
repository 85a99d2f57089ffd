"""Two replicas of one app in one process, sharing a Redis (``MCP_TEST_REDIS_URL``): each its
own FastAPI app, McpRouter and replica identity, like two uvicorn processes behind a load
balancer. Used by tests/test_replicas.py and tests/test_replica_outage.py.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from conftest import mcp_settings
from fastapi import Depends, FastAPI
from notify_app import build
from redis.asyncio import Redis
from redis.exceptions import RedisError

from fastapi_mcp_ctx import Context, McpRouter, mcp_context

ASKED: list[Any] = []
ENDED: list[tuple[str, str]] = []
"""How each ``slow`` call ended: (replica, "done" | "cancelled")."""


def redis_url() -> str:
    """The test Redis (skip without it; fail under ``MCP_REQUIRE_SERVICES=1``)."""
    return deployment_url("single")


DEPLOYMENTS = ["single", "cluster", "sentinel"]
"""The Redis deployments of ``scripts/services.sh`` (issue 21): one server, a three-master
cluster, a sentinel group; a fixture parametrised over them runs its tests on each."""

_DEPLOYMENT_ENV = {"single": "MCP_TEST_REDIS_URL", "cluster": "MCP_TEST_REDIS_CLUSTER_URL", "sentinel": "MCP_TEST_REDIS_SENTINEL_URL"}


def deployment_url(kind: str) -> str:
    """The URL of one test deployment (skip without it; fail under ``MCP_REQUIRE_SERVICES=1``)."""
    var = _DEPLOYMENT_ENV[kind]
    url = os.environ.get(var)
    if not url:
        msg = f"{var} is not set: run `scripts/services.sh start` and `eval \"$(scripts/services.sh env)\"`"
        if os.environ.get("MCP_REQUIRE_SERVICES") == "1":
            pytest.fail(f"MCP_REQUIRE_SERVICES=1 but {msg}")
        pytest.skip(msg)
    return url


def replica(name: str, url: str, namespace: str, **overrides: Any) -> tuple[FastAPI, McpRouter]:
    """One replica: the notification tools of ``notify_app`` plus ``slow`` (progress, then a
    result) and ``ask`` (a server→client request), identity ``name``."""
    settings = mcp_settings(session_store_url=url, session_store_namespace=namespace, **overrides)
    app, router = build(settings=settings)
    router.relay.identity = lambda: name

    @router.tool()
    async def slow(steps: int = 3, delay: float = 0.2, ctx: Context = Depends(mcp_context)) -> str:
        """``steps`` progress notifications ``delay`` seconds apart, then ``"<name> done"``."""
        try:
            for i in range(1, steps + 1):
                await anyio.sleep(delay)
                await ctx.report_progress(i, steps, f"step {i} on {name}")
        except anyio.get_cancelled_exc_class():
            ENDED.append((name, "cancelled"))
            raise
        ENDED.append((name, "done"))
        return f"{name} done"

    @router.tool()
    async def ask(method: str = "ping", ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """Send ``method`` to the client; return its answer."""
        answer = await ctx.send_request(method, None, timeout=5.0)
        ASKED.append((name, answer))
        return {"answer": answer, "asked_from": name}

    @router.tool()
    async def where() -> str:
        """Which replica served the call."""
        return name

    return app, router


@asynccontextmanager
async def two_replicas(url: str | None = None, **overrides: Any) -> AsyncIterator[tuple[FastAPI, McpRouter, FastAPI, McpRouter]]:
    """Replicas ``a`` and ``b`` on one Redis namespace (fresh per test, deleted afterwards)."""
    url = url or redis_url()
    namespace = f"t{uuid.uuid4().hex[:10]}:"
    app_a, router_a = replica("a", url, namespace, **overrides)
    app_b, router_b = replica("b", url, namespace, **overrides)
    try:
        yield app_a, router_a, app_b, router_b
    finally:
        with anyio.move_on_after(5.0, shield=True):
            await router_a.aclose(grace_seconds=0.5)
            await router_b.aclose(grace_seconds=0.5)
            try:
                client = Redis.from_url(url, socket_timeout=2.0)
                keys = [key async for key in client.scan_iter(match=f"{namespace}*", count=500)]
                if keys:
                    await client.delete(*keys)
                await client.aclose()
            except (OSError, RedisError):  # the outage tests stop their own server
                pass
