"""The app the notification tests share: a router declaring change notifications, and tools
that publish them (imported by test_listen.py, test_notifications.py, test_notify_faults.py).

Long-lived streams (2026 listen, 2025 GET) are read with ``conftest.asgi_exchange``: the
response is observed while it is still open, in the same event loop as the tool calls.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

from conftest import (
    ACCEPT_BOTH,
    LEGACY,
    MODERN,
    AsgiExchange,
    asgi_exchange,
    make_app,
    mcp_settings,
    modern_meta,
    rpc,
    sse_events,
)
from fastapi import Depends, FastAPI, Header

from fastapi_mcp_ctx import Context, McpRouter, Principal, mcp_context
from fastapi_mcp_ctx._transport.bus import MessageBus
from fastapi_mcp_ctx._transport.subscriptions import SessionAddress
from fastapi_mcp_ctx.settings import McpSettings

SUB = "io.modelcontextprotocol/subscriptionId"
ALL_KINDS = ("tools", "prompts", "resources")


def tenant_auth(x_tenant: str | None = Header(default=None)) -> Principal | None:
    """Authenticates anyone naming a tenant in ``X-Tenant`` (subject ``user-<tenant>``)."""
    return Principal(subject=f"user-{x_tenant}", tenant_id=x_tenant) if x_tenant else None


def build(
    *,
    list_changed: Iterable[str] = ALL_KINDS,
    resources_subscribe: bool = True,
    authenticate: Callable[..., Any] | None = None,
    bus: MessageBus | None = None,
    session_store: Any = None,
    subscription_registry: Any = None,
    settings: McpSettings | None = None,
    **overrides: Any,
) -> tuple[FastAPI, McpRouter]:
    """An app whose router declares ``list_changed`` / ``resources_subscribe``, with tools that
    publish (``change``, ``touch``, ``noisy``) and reach sessions (``watch``, ``poke``, ``sessions``)."""
    router = McpRouter(
        settings=settings or mcp_settings(**overrides),
        list_changed=list_changed,
        resources_subscribe=resources_subscribe,
        authenticate=authenticate,
        bus=bus,
        session_store=session_store,
        subscription_registry=subscription_registry,
    )

    @router.tool()
    async def change(kind: str, ctx: Context = Depends(mcp_context)) -> str:
        """Announce that the ``kind`` list changed."""
        await getattr(ctx, f"notify_{kind}_list_changed")()
        return "changed"

    @router.tool()
    async def touch(uri: str, ctx: Context = Depends(mcp_context)) -> str:
        """Announce that ``uri`` changed."""
        await ctx.notify_resource_updated(uri)
        return "touched"

    @router.tool()
    async def noisy(ctx: Context = Depends(mcp_context)) -> str:
        """Progress and logs on its own stream, plus a tool-list change."""
        await ctx.report_progress(1, 2, "half")
        await ctx.log.info("busy")
        await ctx.notify_tools_list_changed()
        await ctx.report_progress(2, 2, "done")
        return "done"

    @router.tool()
    async def watch(uri: str, ctx: Context = Depends(mcp_context)) -> str:
        """Subscribe this 2025 session to ``uri`` (what resources/subscribe will do)."""
        assert ctx.session_id is not None
        await router.subscriptions.subscribe(SessionAddress(ctx.tenant_id, ctx.session_id), uri)
        return "watching"

    @router.tool()
    async def poke(session_id: str, text: str = "poke") -> bool:
        """Send a log-shaped notification to one session's GET stream."""
        return await router.send_notification_to_session(session_id, "notifications/message", {"level": "info", "data": text})

    @router.tool()
    async def sessions() -> list[str]:
        """The caller's tenant's reachable sessions."""
        return await router.active_sessions()

    @router.tool()
    async def whoami(ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """Session and tenant of the caller."""
        return {"session": ctx.session_id, "tenant": ctx.tenant_id}

    return make_app(router), router


def listen_body(request_id: Any, notifications: Any = ..., **params: Any) -> bytes:
    """A ``subscriptions/listen`` request body (``notifications=...`` omits the filter)."""
    body: dict[str, Any] = {"_meta": modern_meta(), **params}
    if notifications is not ...:
        body["notifications"] = notifications
    return json.dumps(rpc("subscriptions/listen", body, request_id)).encode()


def listen_headers(accept: str = ACCEPT_BOTH, **extra: str) -> dict[str, str]:
    """Every 2026 header a listen POST carries."""
    return {
        "content-type": "application/json",
        "accept": accept,
        "mcp-protocol-version": MODERN,
        "mcp-method": "subscriptions/listen",
        **extra,
    }


def frames(exchange: AsgiExchange) -> list[dict[str, Any]]:
    """The JSON-RPC messages the stream carried so far."""
    return [json.loads(e["data"]) for e in sse_events(exchange.body.decode()) if e.get("data")]


def methods(exchange: AsgiExchange) -> list[str | None]:
    """The ``method`` of each frame (None for the final answer)."""
    return [f.get("method") for f in frames(exchange)]


async def wait_frames(exchange: AsgiExchange, count: int, timeout: float = 30.0) -> list[dict[str, Any]]:
    """Wait until ``count`` frames arrived; returns them all."""
    await exchange.wait_for(lambda e: len(frames(e)) >= count, timeout)
    return frames(exchange)


@asynccontextmanager
async def listening(app: Any, request_id: Any, notifications: Any, **extra: str) -> AsyncIterator[AsgiExchange]:
    """An open listen stream whose acknowledgement has arrived."""
    async with asgi_exchange(app, "POST", headers=listen_headers(**extra), body_chunks=[listen_body(request_id, notifications)]) as ex:
        await wait_frames(ex, 1)
        yield ex


@asynccontextmanager
async def get_stream(app: Any, session_id: str, **extra: str) -> AsyncIterator[AsgiExchange]:
    """An open 2025 standalone GET stream of ``session_id``."""
    headers = {"accept": "text/event-stream", "mcp-session-id": session_id, "mcp-protocol-version": LEGACY, **extra}
    async with asgi_exchange(app, "GET", headers=headers) as ex:
        assert ex.status == 200, ex.body
        yield ex
