"""The benchmark app: the ``project`` slot of the shared MCP benchmark harness.

Run by the harness as ``uvicorn bench_app:app --app-dir examples`` (see ``bench/README.md``),
or by hand:  ``uvicorn examples.bench_app:app --host 127.0.0.1 --port 8000``.

Contract (harness ``servers/common.py``): Streamable HTTP at ``POST /mcp``, JSON responses,
stateless when the client sends no session, tools ``add(a: int, b: int) -> int`` plus
``BENCH_TOOLS - 1`` fillers ``tool_000``… (``filler(x: int, label: str = "item") -> str``),
``async def`` unless ``BENCH_SYNC_TOOLS=1``.

Settings, and why:

- ``session_mode="stateless"``: the peers (official SDK, FastMCP) run stateless, and the
  harness's workload *a* sends ``MCP-Protocol-Version: 2025-11-25`` without a session. Our
  default (``stateful``) would answer 400 and push the harness into its fallback (one
  ``initialize``, one shared ``Mcp-Session-Id``, a fresh JSON-RPC id per request): that adds
  a session-store lookup per request and is not the configuration the peers are measured in.
- JSON responses: ``CallResponse`` answers ``application/json`` whenever a tool emits no
  notification before its result, which is always the case here (no knob needed).
- DNS-rebinding protection stays on (automatic for a 127.0.0.1 bind); ``wrk`` sends
  ``Host: 127.0.0.1:<port>``, which the loopback allow-list (``127.0.0.1:*``) admits.
- ``log_level="warning"``: no client log traffic; the harness runs uvicorn at warning too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from fastapi_mcp_ctx import McpRouter, McpSettings

# The harness's tool definitions, when the shared harness sits beside the project (../shared/bench);
# otherwise the same functions, defined here.
_HARNESS_SERVERS = Path(os.environ.get("BENCH_SERVERS_DIR", Path(__file__).resolve().parents[2] / "shared" / "bench" / "servers"))
tool_functions: Callable[[], list[Callable[..., Any]]]
if (_HARNESS_SERVERS / "common.py").is_file():
    sys.path.insert(0, str(_HARNESS_SERVERS))
    from common import tool_functions  # type: ignore[import-not-found,no-redef]  # noqa: E402
else:
    N_TOOLS = int(os.environ.get("BENCH_TOOLS", "100"))
    SYNC_TOOLS = os.environ.get("BENCH_SYNC_TOOLS", "0") == "1"

    def _make_add() -> Callable[..., Any]:
        if SYNC_TOOLS:

            def add(a: int, b: int) -> int:
                """Add two integers."""
                return a + b

        else:

            async def add(a: int, b: int) -> int:  # type: ignore[misc]
                """Add two integers."""
                return a + b

        return add

    def _make_filler(i: int) -> Callable[..., Any]:
        if SYNC_TOOLS:

            def filler(x: int, label: str = "item") -> str:
                return f"{label}-{x}"

        else:

            async def filler(x: int, label: str = "item") -> str:  # type: ignore[misc]
                return f"{label}-{x}"

        name = f"tool_{i:03d}"
        filler.__name__ = name
        filler.__qualname__ = name
        filler.__doc__ = f"Filler tool number {i}: formats an integer with a label."
        return filler

    def tool_functions() -> list[Callable[..., Any]]:  # type: ignore[no-redef]
        """``add`` first, then the fillers, ``N_TOOLS`` functions in all."""
        return [_make_add()] + [_make_filler(i) for i in range(max(N_TOOLS - 1, 0))]


settings = McpSettings(
    server_name="bench",
    server_version="0.1.0",
    session_mode="stateless",
    log_level="warning",
)

mcp_router = McpRouter(settings=settings)
for fn in tool_functions():
    mcp_router.add_tool(fn)

app = FastAPI(title="fastapi-mcp-ctx bench", openapi_url=None, docs_url=None, redoc_url=None)
app.include_router(mcp_router)
