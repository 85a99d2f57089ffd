"""The MCP route honours HTTP-level dependencies of ``include_router`` and ``FastAPI(...)``.

Without any, the endpoint is called directly (no path-operation solve); with some, FastAPI's
own request handling runs them first, for every MCP request (``initialize`` included).
"""

from __future__ import annotations

import pytest
from conftest import Wire, make_router, open_client, result_of
from fastapi import Depends, FastAPI, Header, HTTPException

SEEN: list[str] = []


def guard(x_key: str | None = Header(default=None)) -> None:
    SEEN.append(x_key or "-")
    if x_key != "open-sesame":
        raise HTTPException(401, "no key", headers={"WWW-Authenticate": "Key"})


def _router():  # type: ignore[no-untyped-def]
    router = make_router()

    @router.tool()
    async def ping_tool() -> str:
        """Answers pong."""
        return "pong"

    return router


@pytest.mark.parametrize("how", ["include_router", "app"])
async def test_http_level_dependencies_guard_every_request(how: str) -> None:
    SEEN.clear()
    if how == "include_router":
        app = FastAPI()
        app.include_router(_router(), dependencies=[Depends(guard)])
    else:
        app = FastAPI(dependencies=[Depends(guard)])
        app.include_router(_router())
    async with open_client(app) as client:
        wire = Wire(client)
        denied = await wire.modern("tools/list", check=False)
        assert denied.status_code == 401
        assert denied.headers["www-authenticate"] == "Key"
        listing = result_of(await wire.modern("tools/list", headers={"x-key": "open-sesame"}))
        assert [t["name"] for t in listing["tools"]] == ["ping_tool"]
        await wire.initialize(headers={"x-key": "open-sesame"})
        legacy = result_of(await wire.legacy("tools/call", {"name": "ping_tool", "arguments": {}}, headers={"x-key": "open-sesame"}))
        assert legacy["structuredContent"] == {"result": "pong"}
    assert SEEN[0] == "-" and "open-sesame" in SEEN


async def test_prefix_of_include_router_moves_the_endpoint() -> None:
    app = FastAPI()
    app.include_router(_router(), prefix="/v1")
    async with open_client(app) as client:
        wire = Wire(client, path="/v1/mcp")
        assert result_of(await wire.modern("tools/list"))["tools"][0]["name"] == "ping_tool"
        assert (await client.post("/mcp", json={})).status_code == 404
