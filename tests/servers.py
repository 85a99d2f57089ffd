"""Real servers in subprocesses for the tests that need one (the CLI, compose rehearsal, the
installed wheel): a free loopback port, start, wait until it accepts, stop by its own pid."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Served:
    """A running server: its MCP URL; ``output`` (stdout + stderr) once it has stopped."""

    url: str
    output: str = ""
    returncode: int | None = None


@contextmanager
def serving(
    argv: Sequence[str], port: int, *, env: Mapping[str, str], cwd: Path, path: str = "/mcp", timeout: float = 30.0
) -> Iterator[Served]:
    """Run ``argv`` (a server listening on ``port``) until the block ends, then SIGTERM it."""
    proc = subprocess.Popen(
        list(argv), cwd=cwd, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    served = Served(f"http://127.0.0.1:{port}{path}")
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    proc.kill()
                    pytest.fail(f"{' '.join(argv)} did not start: {proc.communicate(timeout=10)[0]}")
                time.sleep(0.1)
        yield served
    finally:
        if proc.poll() is None:
            proc.terminate()
        try:
            served.output = proc.communicate(timeout=15)[0]
        except subprocess.TimeoutExpired:
            proc.kill()
            served.output = proc.communicate(timeout=5)[0]
        served.returncode = proc.returncode


def call_tool(url: str, name: str, arguments: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
    """One 2026-07-28 ``tools/call`` over real HTTP (every required header, the ``_meta``
    envelope); the JSON-RPC response."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "pytest", "version": "1"},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments, "_meta": meta}}
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": name,
    }
    response = httpx.post(url, json=body, headers=headers, timeout=timeout)
    assert response.headers["content-type"].startswith("application/json"), response.text
    return response.json()
