"""The load balancer's readiness probe (``fastapi_mcp_ctx.readiness``): 200 while every store
the router uses answers, 503 + ``Retry-After`` when one does not or the router is draining.
In process; the failing Redis is a real client aimed at a loopback port nobody listens on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio
from conftest import make_app, make_router, mcp_settings, open_client
from servers import free_port

from fastapi_mcp_ctx import McpRouter
from fastapi_mcp_ctx.backends import backend_from_url
from fastapi_mcp_ctx.errors import ConfigurationError, StateUnavailableError
from fastapi_mcp_ctx.readiness import check_readiness, readiness_router


@dataclass
class Store:
    """A store whose ``check`` fails with ``error``, hangs for ``delay`` seconds, or passes."""

    error: BaseException | None = None
    delay: float = 0.0
    calls: list[int] = field(default_factory=lambda: [])

    async def check(self) -> None:
        self.calls.append(1)
        await anyio.sleep(self.delay)
        if self.error is not None:
            raise self.error


@dataclass
class Served:
    sessions: Any = field(default_factory=Store)
    event_store: Any = field(default_factory=Store)
    bus: Any = field(default_factory=Store)
    state_backend: Any = field(default_factory=Store)
    mcp_path: str = "/mcp"
    shutting_down: bool = False


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
        "checks": {
            "sessions": {"ok": True, "store": "MemorySessionStore"},
            "events": {"ok": True, "store": "MemoryEventStore"},
            "bus": {"ok": True, "store": "MemoryBus"},
            "state": {"ok": True, "store": "MemoryBackend"},
        },
    }


async def test_unreachable_redis_is_503_with_retry_after_and_no_url_in_the_body() -> None:
    url = f"redis://:secret@127.0.0.1:{free_port()}/0"
    router = McpRouter(settings=mcp_settings(), state_backend=backend_from_url(url))
    app = make_app(router)
    app.include_router(readiness_router(router, path="/healthz/ready"))
    async with open_client(app) as client:
        with anyio.fail_after(10):
            response = await client.get("/healthz/ready")
    assert response.status_code == 503 and response.headers["retry-after"] == "1"
    body = response.json()
    assert body["ready"] is False
    assert body["checks"]["state"] == {"ok": False, "store": "RedisBackend", "error": "unreachable"}
    assert body["checks"]["sessions"]["ok"] is True
    assert "secret" not in response.text and "127.0.0.1" not in response.text


async def test_a_draining_router_is_not_ready() -> None:
    router = make_router()
    app = make_app(router)
    app.include_router(readiness_router(router))
    router.begin_shutdown()
    try:
        async with open_client(app) as client:
            response = await client.get("/mcp/ready")
        assert response.status_code == 503 and response.json()["shuttingDown"] is True
    finally:
        await router.shutdown()


async def test_each_failure_is_reported_under_its_role_and_a_shared_store_is_probed_once() -> None:
    shared = Store()
    served = Served(
        sessions=shared,
        event_store=shared,
        bus=Store(error=StateUnavailableError()),
        state_backend=Store(error=ConfigurationError("run `fastapi-mcp-ctx migrate`")),
    )
    report = await check_readiness(served)
    assert report.ready is False and len(shared.calls) == 1
    assert report.checks["sessions"] == report.checks["events"] == {"ok": True, "store": "Store"}
    assert report.checks["bus"] == {"ok": False, "store": "Store", "error": "unreachable"}
    assert report.checks["state"]["error"] == "run `fastapi-mcp-ctx migrate`"


async def test_a_slow_or_crashing_store_is_bounded_and_reported_not_raised() -> None:
    served = Served(sessions=Store(delay=30), event_store=Store(error=RuntimeError("boom")))
    with anyio.fail_after(3):
        report = await check_readiness(served, timeout=0.2)
    assert report.checks["sessions"] == {"ok": False, "store": "Store", "error": "no answer within 0.2 s"}
    assert report.checks["events"] == {"ok": False, "store": "Store", "error": "RuntimeError"}
    assert report.checks["bus"]["ok"] is True and report.ready is False


async def test_stores_without_a_check_are_in_process_and_ready() -> None:
    report = await check_readiness(Served(sessions=object(), event_store=object(), bus=object(), state_backend=object()))
    assert report.ready is True
    assert report.as_json()["checks"]["bus"] == {"ok": True, "store": "object"}
