"""Text files under one directory as MCP resources: a ``{+path}`` template whose handler confines
the path it is given.

Run:  FILES_ROOT=some/dir python examples/files.py        (127.0.0.1:8003/mcp)

``{+path}`` keeps reserved characters, so its value may hold ``/`` and ``..`` segments
(``files:///a/../../etc/passwd``, or the same percent-encoded: it is decoded once): the matcher
cannot tell a sub-directory from an escape, so the handler resolves the path under its root
(symbolic links included) and refuses what lands outside.
"""

from __future__ import annotations

import os
from pathlib import Path

from fastapi import FastAPI

from fastapi_mcp_ctx import McpRouter, ToolError

ROOT = Path(os.environ.get("FILES_ROOT", ".")).resolve()

mcp_router = McpRouter()


def confined(root: Path, path: str) -> Path:
    """``path`` resolved under ``root``; ToolError (-32602) when it would leave ``root``."""
    if "\x00" in path:
        raise ToolError("A path cannot hold a NUL byte", code=-32602, reason="invalid_path")
    target = (root / path).resolve()  # an absolute path, '..' and symbolic links resolved
    if not target.is_relative_to(root):
        raise ToolError("The path leaves the served directory", code=-32602, reason="outside_root")
    return target


@mcp_router.resource("files:///{+path}", mime_type="text/plain")
def read_file(path: str) -> str | None:
    """A text file under ROOT (None: no such file, the era's not-found error)."""
    target = confined(ROOT, path)
    return target.read_text(encoding="utf-8") if target.is_file() else None


app = FastAPI(title="files")
app.include_router(mcp_router)

if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=int(os.environ.get("PORT", "8003")))
