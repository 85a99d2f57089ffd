"""A delete tool behind a consent gate: nothing is deleted until the user confirmed this very file.

Run:  python examples/consent_delete.py      (or: fastapi-mcp-ctx serve examples.consent_delete:app)

``await ctx.consent.require(...)`` asks the user (an elicitation form with one ``confirm`` box) and
returns only once a confirmation for this operation, this path and this content came back from
the same caller; a decline or cancel ends the call with an ``isError`` result
(``reason: "consent_declined"``). 2026-07-28 clients answer through ``input_required`` and a retry;
2025 clients through ``elicitation/create`` on the call's stream. The consent record is single use
(redeemed with the state backend's atomic ``take``), so a replayed retry is asked again and
never deletes twice. With several replicas, give them one ``MCP_REQUEST_STATE_KEY`` and a shared
``MCP_STORAGE_URL`` so the consent flow works on any of them; ``FILES`` below stands in for your
own storage and lives in this process (each replica would hold its own copy): keep the files in a
shared store (a database, ``ctx.state`` on Redis/PostgreSQL) before running it on several.
"""

from __future__ import annotations

import hashlib
import os

from fastapi import Depends, FastAPI

from fastapi_mcp_ctx import Context, McpRouter, ToolError, mcp_context

FILES: dict[str, str] = {"/reports/q3.txt": "revenue up 4%", "/reports/q4.txt": "revenue up 6%"}
"""The files this example can delete (path -> content): one process's memory, a stand-in for shared storage."""

mcp_router = McpRouter()


@mcp_router.tool(annotations={"destructiveHint": True, "idempotentHint": False})
async def delete_file(path: str, ctx: Context = Depends(mcp_context)) -> dict[str, str]:
    """Delete a file, after the user confirmed it."""
    content = FILES.get(path)
    if content is None:
        raise ToolError(f"No file {path}", reason="not_found", recovery_hint="List the files first.")
    await ctx.consent.require(
        operation="delete_file",
        target=path,
        content_hash=hashlib.sha256(content.encode()).hexdigest(),  # a file changed meanwhile is asked about again
        message=f"Delete {path} ({len(content)} bytes)? This cannot be undone.",
    )
    del FILES[path]
    return {"deleted": path}


@mcp_router.tool(annotations={"readOnlyHint": True})
async def list_files() -> list[str]:
    """The paths of the files."""
    return sorted(FILES)


app = FastAPI(title="consent example")
app.include_router(mcp_router)

if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=int(os.environ.get("PORT", "8000")))
