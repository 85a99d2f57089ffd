"""An MCP endpoint browser clients can call: Starlette's CORSMiddleware answers the preflight and
exposes the MCP response headers; MCP_ALLOWED_ORIGINS is the router's own Origin check.

Run: MCP_ALLOWED_ORIGINS=https://app.example.com uvicorn examples.cors_app:app
"""

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from fastapi_mcp_ctx import McpRouter

mcp_router = McpRouter()


@mcp_router.tool()
async def echo(text: str) -> str:
    """Echo the text."""
    return text


app = FastAPI()
app.include_router(mcp_router)
app.add_middleware(
    CORSMiddleware,
    allow_origins=["https://app.example.com"],  # the same origins as MCP_ALLOWED_ORIGINS
    allow_methods=["GET", "POST", "DELETE"],
    allow_headers=["*"],  # Content-Type, Accept, Authorization, Mcp-Session-Id, MCP-Protocol-Version, Mcp-Method, Mcp-Name, Mcp-Param-*, Last-Event-ID
    expose_headers=["Mcp-Session-Id", "WWW-Authenticate"],  # a browser script reads only exposed headers
)
