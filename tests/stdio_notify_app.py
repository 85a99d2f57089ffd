"""An app for the stdio change-notification tests: it declares tools list changes and resource
subscriptions, and has tools that publish them (imported in the server process only)."""

from __future__ import annotations

from fastapi import Depends, FastAPI

from fastapi_mcp_ctx import Context, McpRouter, mcp_context

mcp_router = McpRouter(list_changed={"tools"}, resources_subscribe=True)


@mcp_router.resource("notes://{name}", name="note", mime_type="text/plain")
async def note(name: str) -> str:
    return f"note {name}"


@mcp_router.tool()
async def add_tool(ctx: Context = Depends(mcp_context)) -> str:
    """Publish notifications/tools/list_changed."""
    await ctx.notify_tools_list_changed()
    return "published"


@mcp_router.tool()
async def touch(uri: str, ctx: Context = Depends(mcp_context)) -> str:
    """Publish notifications/resources/updated for uri."""
    await ctx.notify_resource_updated(uri)
    return "touched"


@mcp_router.tool()
async def poke(text: str, ctx: Context = Depends(mcp_context)) -> bool:
    """send_notification_to_session on the caller's own session."""
    assert ctx.session_id is not None
    return await mcp_router.send_notification_to_session(ctx.session_id, "notifications/message", {"level": "info", "data": text})


app = FastAPI()
app.include_router(mcp_router)
