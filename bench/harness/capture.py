"""Capture the project's ``tools/list`` results, which the ceiling serves as its own static data.

    python -m bench.harness.capture OUT.json      # with BENCH_TOOLS set, from the repository root

Sends one ``tools/list`` per protocol era to ``examples.bench_app:app`` in process (a minimal
ASGI call, no server, no client library) and writes ``{"2025-11-25": result, "2026-07-28":
result}``: what ``bench/servers/fastapi_ceiling.py`` loads from ``BENCH_TOOLS_LIST``, so that
the ceiling returns the project's bytes without importing the project.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from .workloads import WORKLOADS


async def asgi_post(app: Any, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    """POST ``body`` to ``/mcp`` of the ASGI ``app`` in process; ``(status, response body)``."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": "/mcp", "raw_path": b"/mcp", "query_string": b"", "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in {**headers, "Host": "127.0.0.1:8000",
                    "Content-Type": "application/json", "Content-Length": str(len(body))}.items()],
        "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000),
    }  # fmt: skip
    incoming = [{"type": "http.request", "body": body, "more_body": False}]
    status, chunks = 0, []

    async def receive() -> dict[str, Any]:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    return status, b"".join(chunks)


async def capture() -> dict[str, Any]:
    """``{protocol version: tools/list result}`` of the project app.

    Raises:
        RuntimeError: the app did not answer 200 with a result.
    """
    from examples.bench_app import app

    out: dict[str, Any] = {}
    for wl_id in ("c", "cm"):
        wl = WORKLOADS[wl_id]
        status, raw = await asgi_post(app, wl.body_bytes(), wl.headers)
        msg = json.loads(raw) if status == 200 else {}
        if "result" not in msg:
            raise RuntimeError(f"tools/list ({wl_id}) answered {status}: {raw[:300]!r}")
        out[wl.headers["MCP-Protocol-Version"]] = msg["result"]
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m bench.harness.capture OUT.json", file=sys.stderr)
        return 2
    Path(argv[0]).write_text(json.dumps(asyncio.run(capture())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
