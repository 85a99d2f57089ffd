"""Apps whose MCP route has a FastAPI dependency that authenticates nothing, at each of the three
places FastAPI admits one (issue 24 item 1): ``FastAPI(dependencies=...)`` (``app_level``),
``APIRouter(dependencies=...)`` around the McpRouter (``router_level``) and
``include_router(r, dependencies=...)`` (``include_level``). No MCP_AUTH_MODE, no
``authenticate=``: each must serve local callers only. Served by uvicorn behind nginx in
tests/replicas/test_gate_nginx.py."""

from __future__ import annotations

from fastapi import APIRouter, Depends, FastAPI

from fastapi_mcp_ctx import McpRouter


async def get_db() -> None:  # what an application's database session dependency looks like to the gate
    return None


def mcp_router() -> McpRouter:
    router = McpRouter()

    @router.tool()
    async def hello() -> str:
        """Say hello."""
        return "hello"

    return router


app_level = FastAPI(dependencies=[Depends(get_db)])
app_level.include_router(mcp_router())

_outer = APIRouter(dependencies=[Depends(get_db)])
_outer.include_router(mcp_router())
router_level = FastAPI()
router_level.include_router(_outer)

include_level = FastAPI()
include_level.include_router(mcp_router(), dependencies=[Depends(get_db)])

no_dependency = FastAPI()
no_dependency.include_router(mcp_router())
