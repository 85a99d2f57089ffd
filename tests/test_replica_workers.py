"""``fastapi-mcp-ctx serve --workers 2`` with the Redis session store (issue 7: "uvicorn
--workers 2 fails legacy sessions intermittently with Session not found"): 5 clients make 50
legacy calls with progress and logs over real sockets, with no error."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from conftest import LEGACY, rpc, sse_events
from redis.asyncio import Redis
from replica_app import redis_url

pytestmark = pytest.mark.redis
ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float = 40.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        if log.read_text().count("Application startup complete") >= 2:
            return
        time.sleep(0.1)
    pytest.fail(f"serve --workers 2 did not start:\n{log.read_text()[-3000:]}")


async def _client(base: str, calls: int) -> list[str]:
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream", "mcp-protocol-version": LEGACY}
    texts: list[str] = []
    limits = httpx.Limits(max_keepalive_connections=0)  # a new connection per request: any worker may take it
    async with httpx.AsyncClient(base_url=base, timeout=10.0, limits=limits) as client:
        params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "w", "version": "1"}}
        init = await client.post("/mcp", content=json.dumps(rpc("initialize", params, 0)), headers=headers)
        assert init.status_code == 200, init.text
        session = {**headers, "mcp-session-id": init.headers["mcp-session-id"]}
        note = await client.post("/mcp", content=json.dumps(rpc("notifications/initialized", {}, None)), headers=session)
        assert note.status_code == 202, note.text
        for n in range(calls):
            body = rpc("tools/call", {"name": "count_to", "arguments": {"n": 2}, "_meta": {"progressToken": f"p{n}"}}, n + 1)
            response = await client.post("/mcp", content=json.dumps(body), headers=session)
            assert response.status_code == 200, response.text
            messages = [json.loads(e["data"]) for e in sse_events(response.text) if e.get("data")]
            assert [m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"] == [1, 2]
            final: dict[str, Any] = messages[-1]
            assert final["id"] == n + 1, final
            texts.append(final["result"]["content"][0]["text"])
    return texts


async def test_serve_with_two_workers_and_the_redis_store_serves_50_legacy_calls_from_5_clients() -> None:
    url = redis_url()
    port = _free_port()
    env = {
        **os.environ,
        "MCP_SESSION_STORE_URL": url,
        "MCP_SESSION_STORE_NAMESPACE": f"w{uuid.uuid4().hex[:10]}:",
        "MCP_STORAGE_URL": url,
        "MCP_REQUEST_STATE_KEY": "7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e",  # the same on every worker (cursors, sealed requestState)
        "PYTHONUNBUFFERED": "1",
    }
    with tempfile.NamedTemporaryFile(prefix="serve-workers-", suffix=".log") as log:
        args = [sys.executable, "-m", "fastapi_mcp_ctx", "serve", "examples.quickstart:app", "--app-dir", str(ROOT)]
        args += ["--port", str(port), "--workers", "2"]
        proc = subprocess.Popen(args, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_port(port, proc, Path(log.name))
            results: list[list[str]] = [[] for _ in range(5)]

            async def run(i: int) -> None:
                results[i] = await _client(f"http://127.0.0.1:{port}", 10)

            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:
                    for i in range(5):
                        tg.start_soon(run, i)
            assert [len(r) for r in results] == [10] * 5
            assert {t for r in results for t in r} == {"counted to 2"}
            assert "Session not found" not in Path(log.name).read_text()
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            client = Redis.from_url(url)
            keys = [key async for key in client.scan_iter(match=f"{env['MCP_SESSION_STORE_NAMESPACE']}*", count=500)]
            if keys:
                await client.delete(*keys)
            await client.aclose()
