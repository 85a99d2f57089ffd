"""stdio defects found by a hostile fault run (2026-12-01) (the server launched as a desktop client does)."""

from __future__ import annotations

from pathlib import Path

from stdio_wire import server_env, spawn


async def test_stdio_serves_an_app_with_the_default_settings(tmp_path: Path) -> None:
    """``fastapi-mcp-ctx stdio tests.stdio_app:app`` with no ``MCP_*`` set (the secure default, what a
    desktop client's config usually launches): every request now runs the local-only HTTP gate
    (``StdioAdmission`` → ``RequestGate.admit`` → ``RequestGate.refuse_remote``), whose peer is the synthetic
    scope's ``client = ("stdio", 0)``, not a loopback address: ``initialize`` is refused
    ``-32003`` ("only answers local requests") and the server serves nothing. The one transport
    that is local by construction is refused as remote (tests/test_stdio.py fails likewise)."""
    env = server_env()
    assert not [name for name in env if name.startswith("MCP_")]
    async with spawn(tmp_path, env=env) as server:
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "pytest", "version": "1"}}
        answer = await server.request("initialize", params, "init")
        assert "result" in answer, answer
