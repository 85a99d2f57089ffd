"""The benchmark app: fastapi-mcp-ctx as ``bench.harness`` measures it (``make bench``).

Run by the harness as ``uvicorn examples.bench_app:app`` from the repository root, or by hand:
``.venv/bin/uvicorn examples.bench_app:app --host 127.0.0.1 --port 8000``.

The tools are the ones every benchmarked server registers (``bench/servers/tools.py``): ``add``
plus ``BENCH_TOOLS - 1`` fillers; with ``BENCH_EXTRA_TOOLS=1`` (workloads d and p) also

* ``lookup``: FastAPI's own dependency resolution in the tool signature, ``db = Depends(get_db)``
  (the async-generator dependency, torn down after the call) and ``x_tenant: str = Header()``;
* ``countdown``: ``await ctx.report_progress(i, n)``: the response turns into the call's SSE
  stream at the first notification, by itself (no setting).

Always: the resource ``bench://note`` and the prompt ``greet`` (workloads r, rm, g, gm).

Settings, and why:

- ``session_mode="stateless"`` (``"stateful"`` with ``BENCH_STATEFUL=1``, workload s): the peers
  run stateless, and workloads a/b/c/d/p send no session.
- JSON responses: ``CallResponse`` answers ``application/json`` whenever a tool emits no
  notification before its result (no knob needed).
- DNS-rebinding protection stays on (automatic for a 127.0.0.1 bind); ``wrk`` sends
  ``Host: 127.0.0.1:<port>``, which the loopback allow-list admits.
- ``log_level="warning"``: no client log traffic; ``page_size`` above the tool count, so that
  ``tools/list`` is one page as with the peers.
- ``BENCH_OTEL=1`` (harness server ``project-otel``): the OpenTelemetry SDK installed globally
  before the router is made, exporting to exporters that drop everything
  (``bench/servers/otel.py``); ``MCP_TELEMETRY=auto`` (the default) then traces every request;
  FastAPI's own HTTP telemetry stays off (the comparison is the MCP layer's cost).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from fastapi import Depends, FastAPI, Header

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run by hand as `uvicorn bench_app:app --app-dir examples`
    sys.path.insert(0, str(ROOT))

from bench.servers.tools import EXTRA_TOOLS, N_TOOLS, NOTE_URI, STATEFUL, get_db, greet, note, tool_functions  # noqa: E402
from fastapi_mcp_ctx import Context, McpRouter, McpSettings, mcp_context  # noqa: E402

OTEL = os.environ.get("BENCH_OTEL") == "1"
if OTEL:
    from bench.servers.otel import install_globally

    install_globally()


async def lookup(key: str, db: dict[str, str] = Depends(get_db), x_tenant: str = Header()) -> dict[str, str]:
    """Look a key up in the tenant's store."""
    return {"value": db[key], "tenant": x_tenant}


async def countdown(n: int, ctx: Context = Depends(mcp_context)) -> dict[str, int]:
    """Count to n, reporting progress at every step."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, n)
    return {"done": n}


settings = McpSettings(
    server_name="bench",
    server_version="0.1.0",
    session_mode="stateful" if STATEFUL else "stateless",
    log_level="warning",
    page_size=max(N_TOOLS + 2, 100),
)

mcp_router = McpRouter(settings=settings)
for fn in tool_functions() + ([lookup, countdown] if EXTRA_TOOLS else []):
    mcp_router.add_tool(fn)

mcp_router.resource(NOTE_URI, mime_type="text/plain")(note)  # workloads r, rm
mcp_router.prompt()(greet)  # workloads g, gm

# BENCH_OTEL: FastAPI's own HTTP telemetry (FastAPI >= 0.16x traces every request once a global
# provider is set) stays off, so project-otel / project measures the MCP spans and metrics alone.
native = {"telemetry": {"tracing": False, "metrics": False, "logs": False}} if OTEL else {}
app = FastAPI(title="fastapi-mcp-ctx bench", openapi_url=None, docs_url=None, redoc_url=None, **native)
app.include_router(mcp_router)
