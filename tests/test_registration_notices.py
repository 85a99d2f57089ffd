"""Small registration items of issue 22: a tool with no description is logged once at
registration, naming the tool and the fix; a wrapped non-object output carries FastMCP's unwrap
marker (``x-fastmcp-wrap-result``), which the official client still validates against (both eras).
"""

from __future__ import annotations

import logging

import pytest
from conftest import make_app, mcp_settings
from fastapi import Depends
from pydantic import BaseModel

from fastapi_mcp_ctx import Context, McpRouter, mcp_context
from fastapi_mcp_ctx.testing import McpTestClient


class Point(BaseModel):
    x: int
    y: int


def _router() -> McpRouter:
    router = McpRouter(settings=mcp_settings())

    @router.tool()
    async def count() -> int:
        """Count."""
        return 42

    @router.tool()
    async def names() -> list[str]:
        """Names."""
        return ["a", "b"]

    @router.tool()
    async def point(ctx: Context = Depends(mcp_context)) -> Point:
        """A point."""
        return Point(x=1, y=2)

    @router.tool()
    async def mapping() -> dict[str, int]:
        """A mapping."""
        return {"a": 1}

    return router


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_wrapped_outputs_carry_the_fastmcp_unwrap_marker(era: str) -> None:
    async with McpTestClient(make_app(_router()), era=era) as client:  # validates every result against the wire models
        schemas = {tool["name"]: tool.get("outputSchema") for tool in await client.list_tools()}
        assert schemas["count"] == {
            "type": "object",
            "properties": {"result": {"type": "integer"}},
            "required": ["result"],
            "x-fastmcp-wrap-result": True,
        }
        assert schemas["names"] is not None and schemas["names"]["x-fastmcp-wrap-result"] is True
        assert schemas["point"] is not None and "x-fastmcp-wrap-result" not in schemas["point"]  # objects are not wrapped
        assert schemas["mapping"] is not None and "x-fastmcp-wrap-result" not in schemas["mapping"]
        assert (await client.call_tool("count", {})).structured == {"result": 42}
        assert (await client.call_tool("names", {})).structured == {"result": ["a", "b"]}


def test_a_tool_without_a_description_is_logged_at_registration(caplog: pytest.LogCaptureFixture) -> None:
    router = McpRouter(settings=mcp_settings())
    with caplog.at_level(logging.WARNING, logger="fastapi_mcp_ctx"):

        @router.tool()
        async def undocumented(a: int) -> int:
            return a

        @router.tool(description="Given explicitly.")
        async def described(a: int) -> int:
            return a

        @router.tool()
        async def documented(a: int) -> int:
            """Has a docstring."""
            return a

    notices = [r.getMessage() for r in caplog.records if "has no description" in r.getMessage()]
    assert len(notices) == 1
    assert "tool 'undocumented' has no description" in notices[0]
    assert "give the function 'test_a_tool_without_a_description_is_logged_at_registration.<locals>.undocumented' a docstring" in notices[0]
    assert "description=" in notices[0]
