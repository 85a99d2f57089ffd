"""The README's first command, as a new user types it: ``make run`` in a fresh clone.

Clones the committed HEAD into a temporary folder with no siblings, runs ``make run`` there
(``PORT`` picks a free port), and checks that it installs only what the example and its client
need (no test tools), says what it is doing, and serves MCP on 127.0.0.1 in both eras, which the
README's second-terminal step, ``.venv/bin/python examples/client.py``, then calls. Reuses pip's
cache; bounded in time (install ≤ 300 s, start ≤ 30 s).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def clone() -> Iterator[Path]:
    if not (ROOT / ".git").exists() or shutil.which("git") is None or shutil.which("make") is None:
        pytest.skip("needs a git checkout, git and make")
    parent = Path(tempfile.mkdtemp(prefix="mcp-make-run-"))
    try:
        subprocess.run(["git", "clone", "-q", str(ROOT), str(parent / "repo")], check=True, timeout=60)
        yield parent / "repo"
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def _post(url: str, body: dict[str, object], headers: dict[str, str]) -> tuple[int, dict[str, object], dict[str, str]]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - loopback only
        return response.status, json.loads(response.read()), dict(response.headers)


def test_make_run_installs_only_the_server_and_serves_both_eras(clone: Path) -> None:
    port = _free_port()
    env = {**os.environ, "PORT": str(port), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("VIRTUAL_ENV", None)
    proc = subprocess.Popen(
        ["make", "run"], cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 330
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    output = proc.stdout.read() if proc.stdout else ""
                    pytest.fail(f"make run did not serve on {port}:\n{output[-3000:]}")
                time.sleep(0.2)
        status, init, headers = _post(
            url,
            {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
            {},
        )
        assert status == 200 and init["result"]["protocolVersion"] == "2025-11-25"  # type: ignore[index]
        session = {k.lower(): v for k, v in headers.items()}["mcp-session-id"]
        status, call, _ = _post(
            url,
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 2, "b": 3}}},
            {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"},
        )
        assert call["result"]["structuredContent"] == {"result": 5}  # type: ignore[index]
        meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
        status, call, _ = _post(
            url,
            {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
             "params": {"name": "add", "arguments": {"a": 4, "b": 5}, "_meta": meta}},
            {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "add"},
        )
        assert status == 200 and call["result"]["structuredContent"] == {"result": 9}  # type: ignore[index]
        client = subprocess.run(
            [str(clone / ".venv" / "bin" / "python"), "examples/client.py", url],
            cwd=clone, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        )
        assert client.returncode == 0, client.stdout + client.stderr
        assert [line.split()[0] for line in client.stdout.splitlines()] == ["2025-11-25", "2026-07-28"], client.stdout
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            output, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
    assert (
        "bootstrap: installing the package, uvicorn, the fastapi-mcp-ctx command and the official MCP client"
        " (extras: server, cli, client)" in output
    )
    installed = subprocess.run(
        [str(clone / ".venv" / "bin" / "python"), "-m", "pip", "list", "--format=json"], capture_output=True, text=True, check=True
    )
    names = {p["name"].lower() for p in json.loads(installed.stdout)}
    assert {"fastapi-mcp-ctx", "uvicorn", "click", "httpx", "mcp"} <= names
    assert not names & {"pytest", "pyright", "ruff", "hypothesis", "fakeredis", "sqlalchemy", "redis"}, names
