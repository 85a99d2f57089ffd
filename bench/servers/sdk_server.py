"""The official MCP Python SDK (``mcp``, ``MCPServer``) over Streamable HTTP at ``/mcp``.

JSON responses, stateless (``BENCH_STATEFUL=1``: 2025 sessions; ``BENCH_SSE=1``: SSE responses,
without which its transport drops a call's progress notifications). With ``BENCH_EXTRA_TOOLS=1``:

* ``lookup`` (workload d): the SDK's injection is ``Annotated[T, Resolve(fn)]``, which injects a
  resolver's *return value* and has no yield/teardown form, so the header comes from a resolver
  reading ``ctx.headers`` and the tool body enters :func:`~bench.servers.tools.get_db` itself;
* ``countdown`` (workload p): ``await ctx.report_progress(i, n)``.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer, Resolve

from bench.servers.tools import EXTRA_TOOLS, NOTE_URI, SSE, STATEFUL, TENANT_HEADER, get_db, greet, note, tool_functions

db_session = asynccontextmanager(get_db)


async def tenant(ctx: Context) -> str:
    """The ``X-Tenant`` header of the HTTP request behind the call."""
    return (ctx.headers or {}).get(TENANT_HEADER, "")


async def lookup(key: str, tenant: Annotated[str, Resolve(tenant)]) -> dict[str, str]:
    """Look a key up in the tenant's store."""
    async with db_session() as db:
        return {"value": db[key], "tenant": tenant}


async def countdown(n: int, ctx: Context) -> dict[str, int]:
    """Count to n, reporting progress at every step."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, n)
    return {"done": n}


server = MCPServer("bench-sdk", log_level="WARNING")
for fn in tool_functions() + ([lookup, countdown] if EXTRA_TOOLS else []):
    server.add_tool(fn)
server.resource(NOTE_URI, mime_type="text/plain")(note)  # workloads r, rm
server.prompt()(greet)  # workloads g, gm

app = server.streamable_http_app(streamable_http_path="/mcp", json_response=not SSE, stateless_http=not STATEFUL)
