"""FastMCP (``fastmcp``, on the SDK's session manager) over Streamable HTTP at ``/mcp``.

JSON responses, stateless (``BENCH_STATEFUL=1``: 2025 sessions; ``BENCH_SSE=1``: SSE responses,
without which its transport drops a call's progress notifications). With ``BENCH_EXTRA_TOOLS=1``:

* ``lookup`` (workload d): FastMCP's own injection, ``Depends(...)`` (enters a context manager
  and exits it after the call, hence ``asynccontextmanager(get_db)``) and ``CurrentHeaders()``;
* ``countdown`` (workload p): ``await ctx.report_progress(i, n)``.
"""

from __future__ import annotations

from contextlib import asynccontextmanager

from fastmcp import Context, FastMCP
from fastmcp.dependencies import CurrentHeaders, Depends

from bench.servers.tools import EXTRA_TOOLS, NOTE_URI, SSE, STATEFUL, TENANT_HEADER, get_db, greet, note, tool_functions

db_session = asynccontextmanager(get_db)


async def lookup(
    key: str,
    db: dict[str, str] = Depends(db_session),
    headers: dict[str, str] = CurrentHeaders(),
) -> dict[str, str]:
    """Look a key up in the tenant's store."""
    return {"value": db[key], "tenant": headers.get(TENANT_HEADER, "")}


async def countdown(n: int, ctx: Context) -> dict[str, int]:
    """Count to n, reporting progress at every step."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, n)
    return {"done": n}


server = FastMCP("bench-fastmcp")
for fn in tool_functions() + ([lookup, countdown] if EXTRA_TOOLS else []):
    server.tool(fn)
server.resource(NOTE_URI, mime_type="text/plain")(note)  # workloads r, rm
server.prompt()(greet)  # workloads g, gm

app = server.http_app(path="/mcp", json_response=not SSE, stateless_http=not STATEFUL)
