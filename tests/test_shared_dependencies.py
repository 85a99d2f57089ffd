"""A dependency shared by a path operation and a tool may take the Context: ``OptionalMcpContext``
is the call's Context in an MCP call and None on a plain path operation (a new-user run found
``McpContext`` there answering 500 on the path operation, with no way out named)."""

from __future__ import annotations

from typing import Literal

import httpx
import pytest
from conftest import BASE_URL
from fastapi import Depends, FastAPI

from fastapi_mcp_ctx import McpRouter, OptionalMcpContext, mcp_context


def make_app() -> FastAPI:
    def load_thing(thing_id: int, ctx: OptionalMcpContext) -> dict[str, object]:
        return {"id": thing_id, "via": "mcp" if ctx is not None else "http", "tenant": ctx.tenant_id if ctx else None}

    router = McpRouter()

    @router.tool
    async def show_thing(thing: dict[str, object] = Depends(load_thing)) -> dict[str, object]:
        """Show a thing."""
        return thing

    app = FastAPI()
    app.include_router(router)

    @app.get("/things/{thing_id}")
    async def get_thing(thing: dict[str, object] = Depends(load_thing)) -> dict[str, object]:
        return thing

    return app


@pytest.mark.parametrize("test_era", ["legacy", "modern"])
async def test_optional_mcp_context_serves_a_tool_and_a_path_operation(test_era: Literal["legacy", "modern"]) -> None:
    pytest.importorskip("asgi_lifespan")
    from fastapi_mcp_ctx.testing import McpTestClient

    app = make_app()
    async with McpTestClient(app, era=test_era) as client:
        result = await client.call_tool("show_thing", {"thing_id": 3})
        assert result.structured == {"id": 3, "via": "mcp", "tenant": "default"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE_URL) as http:
        response = await http.get("/things/4")
    assert response.status_code == 200 and response.json() == {"id": 4, "via": "http", "tenant": None}


async def test_mcp_context_on_a_path_operation_names_the_optional_form() -> None:
    app = FastAPI()

    @app.get("/plain")
    async def plain(ctx: object = Depends(mcp_context)) -> str:
        return "unreachable"

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=True)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http:
        with pytest.raises(RuntimeError, match=r"OptionalMcpContext"):
            await http.get("/plain")
