"""What idle 2025 sessions cost: RSS of a uvicorn server before and after N ``initialize``.

    .venv/bin/python bench/bench_sessions.py [--sessions 10000] [--concurrency 32] [--capabilities-bytes 63748]

Starts ``examples/bench_app.py`` stateful (``BENCH_STATEFUL=1``) in its own uvicorn process on
127.0.0.1, warms it up with 200 sessions (so allocator arenas and import-time caches are paid),
reads its RSS from ``/proc/<pid>/status``, opens ``--sessions`` more sessions (``initialize`` +
``notifications/initialized``, the official client's capabilities), lets them sit idle, and
reads RSS again. Prints MB in all and bytes per session. ``--capabilities-bytes N`` sends
capabilities of many small objects (the shape that grows most when parsed) making each
``initialize``'s metadata N bytes of JSON (at most ``MCP_MAX_CLIENT_METADATA_BYTES``, 65,536 by
default: the worst case a session may keep; issue 24 item 7). Bounded: at most ``--sessions`` + 200
requests pairs, a 10-minute cap.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
INIT: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {"form": {}}},
        "clientInfo": {"name": "bench-sessions", "version": "1.0"},
    },
}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def _rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _capabilities_of(size: int) -> dict[str, Any]:
    """``ClientCapabilities`` making ``INIT``'s capabilities + clientInfo ``size`` bytes of compact JSON."""
    experimental: dict[str, Any] = {}
    capabilities: dict[str, Any] = {**INIT["params"]["capabilities"], "experimental": experimental}

    def length() -> int:
        kept = {"capabilities": capabilities, "clientInfo": INIT["params"]["clientInfo"]}
        return len(json.dumps(kept, separators=(",", ":")).encode())

    index = 0
    while length() < size - 24:
        experimental[f"k{index}"] = {"v": [index]}
        index += 1
    experimental["pad"] = "x" * max(0, size - length() - 8)
    return capabilities


async def _open_sessions(url: str, count: int, concurrency: int, init: dict[str, Any] = INIT) -> int:
    limiter = asyncio.Semaphore(concurrency)
    opened = 0
    async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=concurrency)) as client:

        async def one() -> None:
            nonlocal opened
            async with limiter:
                response = await client.post(url, content=json.dumps(init), headers=HEADERS)
                assert response.status_code == 200, response.text
                session = response.headers["mcp-session-id"]
                notified = await client.post(
                    url,
                    content=json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                    headers={**HEADERS, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"},
                )
                assert notified.status_code == 202, notified.text
                opened += 1

        await asyncio.gather(*(one() for _ in range(count)))
    return opened


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--capabilities-bytes", type=int, default=0, help="metadata JSON bytes per initialize (0: small)")
    args = parser.parse_args()
    init: dict[str, Any] = INIT
    if args.capabilities_bytes:
        init = {**INIT, "params": {**INIT["params"], "capabilities": _capabilities_of(args.capabilities_bytes)}}
    port = _free_port()
    env = {**os.environ, "BENCH_STATEFUL": "1", "MCP_MAX_SESSIONS": str(args.sessions + 1000), "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "examples.bench_app:app", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        cwd=ROOT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("server did not start") from None
                time.sleep(0.1)
        asyncio.run(asyncio.wait_for(_open_sessions(url, 200, args.concurrency), 120))
        time.sleep(1)
        before = _rss_bytes(server.pid)
        started = time.monotonic()
        opened = asyncio.run(asyncio.wait_for(_open_sessions(url, args.sessions, args.concurrency, init), 600))
        elapsed = time.monotonic() - started
        time.sleep(2)
        after = _rss_bytes(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=15)
    grown = after - before
    print(f"sessions opened: {opened} in {elapsed:.1f} s ({opened / elapsed:,.0f}/s)")
    print(f"RSS before: {before / 2**20:.1f} MB, after: {after / 2**20:.1f} MB, grown: {grown / 2**20:.1f} MB")
    print(f"per idle session: {grown / max(opened, 1):,.0f} bytes")


if __name__ == "__main__":
    main()
