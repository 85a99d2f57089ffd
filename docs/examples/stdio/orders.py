"""An app whose tools need an API key, served over HTTP and over stdio by the same code.

``fastapi-mcp-ctx serve orders:app`` and ``fastapi-mcp-ctx stdio orders:app`` (with the key in
``--header X-API-Key=...`` or ``MCP_STDIO_HEADER_X_API_KEY``) run the same ``authenticate=``
and the same tenant dependency: ``ctx.tenant_id`` and the app's own ``current_tenant`` agree.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, FastAPI, Header, HTTPException

from fastapi_mcp_ctx import Context, McpRouter, Principal, mcp_context

API_KEYS = {"key-acme": "acme", "key-globex": "globex"}  # in a real app: a table of hashed keys


def key_owners() -> dict[str, str]:
    """API key -> tenant (tests override it with app.dependency_overrides)."""
    return API_KEYS


def current_tenant(
    x_api_key: Annotated[str, Header()],
    owners: Annotated[dict[str, str], Depends(key_owners)],
) -> str:
    """The app's own tenant dependency, used by its REST routes and its tools alike."""
    tenant = owners.get(x_api_key)
    if tenant is None:
        raise HTTPException(401, "Unknown API key")
    return tenant


def authenticate(tenant: Annotated[str, Depends(current_tenant)]) -> Principal:
    return Principal(subject=f"api-key@{tenant}", tenant_id=tenant)


mcp_router = McpRouter(authenticate=authenticate)


@mcp_router.tool()
async def add_order(
    item: str,
    tenant: Annotated[str, Depends(current_tenant)],
    ctx: Context = Depends(mcp_context),
) -> dict[str, object]:
    """Add an order for the caller's tenant."""
    orders: list[str] = await ctx.state.get("orders") or []
    orders.append(item)
    await ctx.state.set("orders", orders)
    return {"tenant": tenant, "state_tenant": ctx.tenant_id, "orders": orders}


@mcp_router.tool()
async def list_orders(ctx: Context = Depends(mcp_context)) -> list[str]:
    """The caller's tenant's orders."""
    return await ctx.state.get("orders") or []


app = FastAPI()
app.include_router(mcp_router)
