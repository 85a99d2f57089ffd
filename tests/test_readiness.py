"""The load balancer's readiness probe (``fastapi_mcp_ctx.readiness``) over ``McpRouter.ready()``:
200 while every store the router uses answers, 503 + ``Retry-After`` when one does not or the
router is draining. In process; the failing Redis is a real client aimed at a loopback port
nobody listens on."""

from __future__ import annotations

import time

import anyio
from conftest import make_app, make_router, mcp_settings, open_client
from servers import free_port

from fastapi_mcp_ctx import McpRouter
from fastapi_mcp_ctx._replicas.stores import readiness
from fastapi_mcp_ctx.backends import backend_from_url
from fastapi_mcp_ctx.readiness import readiness_router


async def test_memory_router_is_ready_at_mcp_path_ready() -> None:
    router = make_router()
    app = make_app(router)
    app.include_router(readiness_router(router))
    async with open_client(app) as client:
        response = await client.get("/mcp/ready")
    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-store" and "retry-after" not in response.headers
    assert response.json() == {
        "ready": True,
        "shuttingDown": False,
        "checks": {"sessions": "in-process", "events": "in-process", "bus": "in-process", "state": "in-process"},
    }


async def test_unreachable_redis_state_is_503_with_retry_after_and_no_url_in_the_body() -> None:
    url = f"redis://:secret@127.0.0.1:{free_port()}/0"
    router = McpRouter(settings=mcp_settings(), state_backend=backend_from_url(url))
    app = make_app(router)
    app.include_router(readiness_router(router, path="/healthz/ready"))
    async with open_client(app) as client:
        with anyio.fail_after(10):
            response = await client.get("/healthz/ready")
    assert response.status_code == 503 and response.headers["retry-after"] == "1"
    body = response.json()
    assert body["ready"] is False and body["checks"]["sessions"] == "in-process"
    assert body["checks"]["state"].startswith("unavailable")
    assert "secret" not in response.text and "127.0.0.1" not in response.text


async def test_unreachable_session_store_fails_every_replica_check() -> None:
    router = make_router(session_store_url=f"redis://:secret@127.0.0.1:{free_port()}/0")
    app = make_app(router)
    app.include_router(readiness_router(router))
    async with open_client(app) as client:
        with anyio.fail_after(15):
            response = await client.get("/mcp/ready")
    assert response.status_code == 503 and response.headers["retry-after"] == "1"
    checks = response.json()["checks"]
    assert all(checks[name].startswith("unavailable") for name in ("sessions", "events", "bus")), checks
    assert "secret" not in response.text and "127.0.0.1" not in response.text
    await router.aclose()


async def test_a_draining_router_is_not_ready() -> None:
    router = make_router()
    app = make_app(router)
    app.include_router(readiness_router(router))
    router.begin_shutdown()
    await anyio.sleep(0.05)  # begin_shutdown starts the shutdown in a task
    try:
        async with open_client(app) as client:
            response = await client.get("/mcp/ready")
        assert response.status_code == 503 and response.headers["retry-after"] == "1"
        assert response.json()["shuttingDown"] is True and response.json()["ready"] is False
    finally:
        await router.shutdown()


async def test_hung_stores_are_checked_at_once_and_say_why() -> None:
    """Every check runs concurrently under one deadline: Redis hung (SIGSTOP) answers in about
    one timeout, not one per store, and each failing check says why (never an empty reason)."""
    class Hung:
        async def ping(self) -> None:
            await anyio.sleep(30)

        async def check(self) -> None:
            await anyio.sleep(30)

        async def connected(self) -> bool:
            await anyio.sleep(30)
            return True

    started = time.monotonic()
    report = await readiness(sessions=Hung(), events=Hung(), bus=Hung(), state=Hung(), timeout=0.3)
    assert time.monotonic() - started < 10  # one 0.3 s timeout, not the 30 s hang of each check
    assert report["ready"] is False
    assert set(report["checks"].values()) == {"unavailable: no answer within 0.3 s"}
