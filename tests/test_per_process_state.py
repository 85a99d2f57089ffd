"""``ctx.state`` left at its ``memory://`` default in a worker of ``fastapi-mcp-ctx serve --workers N``:
the app is served (one that never uses ``ctx.state`` loses nothing), and a handler's first
``ctx.state`` is refused with a ``ConfigurationError`` naming what to set, before anything is
stored where the other workers cannot see it. A shared backend, or one process, is never refused.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import MODERN, Wire, make_app, mcp_settings, modern_meta, open_client, rpc
from fastapi import Depends
from serving import stop_process

from fastapi_mcp_ctx import Context, McpRouter, mcp_context
from fastapi_mcp_ctx.backends._per_process import SERVE_WORKERS_ENV, served_workers

ROOT = Path(__file__).resolve().parent.parent


def build(**overrides: Any) -> Any:
    router = McpRouter(settings=mcp_settings(**overrides))

    @router.tool()
    async def remember(value: str, ctx: Context = Depends(mcp_context)) -> str:
        """Store ``value``."""
        await ctx.state.set("k", value)
        return "stored"

    @router.tool()
    async def hello(ctx: Context = Depends(mcp_context)) -> str:
        """Log, touch no state."""
        await ctx.log.info("hello")
        return "hi"

    return make_app(router)


async def call(app: Any, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    async with open_client(app) as client:
        response = await Wire(client).modern("tools/call", {"name": name, "arguments": arguments}, check=False)
        assert response.status_code in (200, 500), response.text
        return response.json()


async def test_a_worker_refuses_memory_state_at_first_use_and_serves_everything_else(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SERVE_WORKERS_ENV, "3")
    app = build()
    refused = await call(app, "remember", {"value": "x"})
    text = str(refused)
    assert "MCP_STORAGE_URL=redis://" in text and "--workers 1" in text and "--workers 3" in text, refused
    assert "Traceback" not in text
    served = await call(app, "hello", {})
    assert served["result"]["content"][0]["text"] == "hi", served


async def test_one_process_or_a_shared_backend_is_never_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(SERVE_WORKERS_ENV, raising=False)
    assert (await call(build(), "remember", {"value": "x"}))["result"]["content"][0]["text"] == "stored"
    monkeypatch.setenv(SERVE_WORKERS_ENV, "2")
    shared = build(storage_url=f"sqlite+aiosqlite:///{tmp_path}/s.db", storage_create_tables=True)
    assert (await call(shared, "remember", {"value": "x"}))["result"]["content"][0]["text"] == "stored"


@pytest.mark.parametrize(("raw", "workers"), [("", 1), ("0", 1), ("x", 1), ("-2", 1), ("4", 4)])
def test_the_worker_count_is_read_safely(monkeypatch: pytest.MonkeyPatch, raw: str, workers: int) -> None:
    monkeypatch.setenv(SERVE_WORKERS_ENV, raw)
    assert served_workers() == workers


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_serve_with_two_real_workers_refuses_memory_state_in_each_and_serves_the_rest(tmp_path: Path) -> None:
    (tmp_path / "workers_app.py").write_text(
        "from fastapi import Depends, FastAPI\n"
        "from fastapi_mcp_ctx import Context, McpRouter, mcp_context\n"
        "router = McpRouter()\n"
        "@router.tool()\n"
        "async def remember(value: str, ctx: Context = Depends(mcp_context)) -> str:\n"
        "    '''Store.'''\n"
        "    await ctx.state.set('k', value)\n"
        "    return 'stored'\n"
        "@router.tool()\n"
        "async def hello() -> str:\n"
        "    '''Hi.'''\n"
        "    return 'hi'\n"
        "app = FastAPI()\n"
        "app.include_router(router)\n"
    )
    port = _free_port()
    env = {**os.environ, "MCP_SESSION_MODE": "stateless", "MCP_REQUEST_STATE_KEY": "7e" * 32, "MCP_AUTH_MODE": "none"}
    env.pop("MCP_STORAGE_URL", None)
    cli = [sys.executable, "-m", "fastapi_mcp_ctx", "serve", "workers_app:app", "--app-dir", str(tmp_path)]
    proc = subprocess.Popen([*cli, "--port", str(port), "--workers", "2"], env=env, cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream", "mcp-protocol-version": MODERN}

        def tool_call(name: str, arguments: dict[str, Any]) -> httpx.Response:
            body = rpc("tools/call", {"name": name, "arguments": arguments, "_meta": modern_meta()}, 1)
            return httpx.post(url, json=body, headers={**headers, "mcp-method": "tools/call", "mcp-name": name}, timeout=5)

        deadline = time.monotonic() + 30
        while True:
            try:
                served = tool_call("hello", {})
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                assert time.monotonic() < deadline, "serve --workers 2 did not come up"
                time.sleep(0.2)
        assert served.status_code == 200 and "hi" in served.text, served.text
        for _ in range(4):  # whichever worker answers
            refused = tool_call("remember", {"value": "x"})
            assert "MCP_STORAGE_URL=redis://" in refused.text and "--workers 2" in refused.text, refused.text
    finally:
        stop_process(proc)
