"""The official MCP Python SDK (``mcp``, ``MCPServer``) serving ``bench/bench_mrtr.py``'s elicitation round.

``export(dataset)`` gets its ``format`` from a resolver returning ``Elicit`` (the SDK's
``Annotated[T, Resolve(fn)]`` path): at 2026-07-28 the first call answers ``input_required`` with
a sealed ``requestState`` (the SDK's default, ephemeral AES-GCM key), and the retry carrying
``inputResponses`` gets the result. JSON responses, stateless, as in the HTTP benchmark.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Elicit, MCPServer, Resolve

from bench.servers.mrtr_tools import QUESTION, ExportFormat, exported


async def ask_format() -> Elicit[ExportFormat]:
    """Ask the user which format to export in."""
    return Elicit(QUESTION, ExportFormat)


async def export(dataset: str, fmt: Annotated[ExportFormat, Resolve(ask_format)]) -> dict[str, str]:
    """Export a dataset in the format the user picks."""
    return exported(dataset, fmt)


server = MCPServer("bench-sdk-mrtr", log_level="WARNING")
server.add_tool(export)

app = server.streamable_http_app(streamable_http_path="/mcp", json_response=True, stateless_http=True)
