"""fastapi-mcp-ctx serving ``bench/bench_mrtr.py``'s elicitation round.

``export(dataset)`` asks for its format with ``await ctx.elicit(QUESTION, ExportFormat)``: at
2026-07-28 the first call ends with ``input_required`` and a sealed ``requestState``
(AES-256-GCM; without ``MCP_REQUEST_STATE_KEY`` a random key of this process, as the SDK's
default), and the retry carrying ``inputResponses`` returns the result. Stateless, as the
HTTP benchmark's ``examples/bench_app.py``; ``log_level="warning"``.
"""

from __future__ import annotations

from fastapi import Depends, FastAPI

from bench.servers.mrtr_tools import QUESTION, ExportFormat, exported
from fastapi_mcp_ctx import Context, McpRouter, McpSettings, mcp_context

router = McpRouter(settings=McpSettings(session_mode="stateless", log_level="warning", server_name="bench-project-mrtr"))


@router.tool()
async def export(dataset: str, ctx: Context = Depends(mcp_context)) -> dict[str, str]:
    """Export a dataset in the format the user picks."""
    answer = await ctx.elicit(QUESTION, ExportFormat)
    if answer.data is None:
        return {"dataset": dataset, "status": answer.action}
    return exported(dataset, answer.data)


app = FastAPI()
app.include_router(router)
