"""Listen-scope defect found by the h-breaker fault run: 2026 ``subscriptions/listen`` vs 2025 ``resources/subscribe``."""

from __future__ import annotations

from typing import Any

import anyio
from conftest import Wire, make_app, mcp_settings, open_client
from fastapi import Request
from notify_app import frames, listening

from fastapi_mcp_ctx import McpRouter
from fastapi_mcp_ctx.auth import Principal


async def reader(request: Request) -> Principal:
    return Principal(subject="reader", tenant_id="acme", scopes=frozenset({"notes:read"}))


async def test_listen_does_not_deliver_updates_of_a_resource_the_caller_may_not_read() -> None:
    """2025 ``resources/subscribe`` refuses a scoped resource to a caller without its scope
    (``require_scopes``, "only what can be read can be watched"); 2026 ``subscriptions/listen``
    takes ``resourceSubscriptions`` as given (``parse_filter``: no lookup, no scope check), so the
    same caller hears every ``notifications/resources/updated`` of ``docs://secret``."""
    router = McpRouter(settings=mcp_settings(), resources_subscribe=True, authenticate=reader)

    @router.resource("docs://secret", scopes=["docs:read"])
    async def secret() -> str:
        """Needs docs:read."""
        return "secret"

    app = make_app(router)
    async with open_client(app) as client:
        wire = Wire(client)
        await wire.initialize()
        refused = await wire.legacy("resources/subscribe", {"uri": "docs://secret"}, check=False)
        assert refused.status_code == 403, refused.text  # the 2025 rule
    async with listening(app, "l-1", {"resourceSubscriptions": ["docs://secret"]}) as listen:
        ack: dict[str, Any] = frames(listen)[0]
        await router.notify_resource_updated("docs://secret", tenant_id="acme")
        await anyio.sleep(0.3)
    updates = [f for f in frames(listen) if f.get("method") == "notifications/resources/updated"]
    assert updates == [], f"ack {ack}; a caller without docs:read heard {updates}"
