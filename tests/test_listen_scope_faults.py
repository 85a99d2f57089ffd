"""Listen-scope defect found by a hostile fault run (2026-12-01): 2026 ``subscriptions/listen`` vs 2025 ``resources/subscribe``."""

from __future__ import annotations

import json
from typing import Any

import anyio
from conftest import Wire, asgi_exchange, make_app, mcp_settings, open_client
from fastapi import Request
from notify_app import listen_body, listen_headers

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
    # The 2026 rule is the same (issue 24 item 8, docs/auth.md): the listen is refused whole.
    async with asgi_exchange(app, "POST", headers=listen_headers(), body_chunks=[listen_body("l-1", {"resourceSubscriptions": ["docs://secret"]})]) as ex:
        with anyio.fail_after(30):
            await ex.finished.wait()
    assert ex.status == 403, ex.body
    error: dict[str, Any] = json.loads(ex.body)["error"]
    assert error["code"] == -32003 and error["data"]["reason"] == "insufficient_scope"
    assert error["data"]["requiredScopes"] == ["docs:read"]


async def test_a_percent_encoded_uri_does_not_subscribe_past_a_scoped_resource() -> None:
    """2025 ``resources/subscribe`` checks the scopes of the resource the *raw* URI finds, then
    records the *normalized* URI (``%67`` → ``g``, RFC 3986 §6.2.2.2). With a scoped static
    ``files://admin/config`` and an unscoped catch-all ``files://{+path}``, the URI
    ``files://admin/confi%67`` finds the template (no scope needed) and is recorded as
    ``files://admin/config``: a caller refused the scoped resource hears its updates."""
    router = McpRouter(settings=mcp_settings(), resources_subscribe=True, authenticate=reader)

    @router.resource("files://admin/config", scopes=["admin"])
    async def config() -> str:
        """Needs admin."""
        return "secret"

    @router.resource("files://{+path}")
    async def any_file(path: str) -> str:
        """Any public file."""
        return f"public {path}"

    app = make_app(router)
    async with open_client(app) as client:
        wire = Wire(client)
        session = await wire.initialize()
        refused = await wire.legacy("resources/subscribe", {"uri": "files://admin/config"}, check=False)
        assert refused.status_code == 403  # the rule
        await wire.legacy("resources/subscribe", {"uri": "files://admin/confi%67"}, check=False)
    subscribers = await router.subscriptions.subscribers("files://admin/config")
    assert session not in [s.session_id for s in subscribers], f"subscribed to the scoped resource: {subscribers}"
