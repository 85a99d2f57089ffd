"""Issue 24 items 1, 2 and 15 through the nginx of ``deploy/nginx.conf.template``.

Item 1: uvicorn (``--proxy-headers``) serving an app whose MCP route has a FastAPI dependency
(app-, router- or include-level, tests/gate_app.py) and no authentication configured, behind the
committed nginx template: a caller whose ``X-Forwarded-For`` names a remote address got 200
(without the dependency, 403); it gets 403 now, in both eras. Item 2: a plain request through
that nginx is not local either (the template adds the forwarding headers). Item 15: the template
closes a connection whose headers never finish within ``client_header_timeout``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from servers import free_port

from .topology import ROOT, Nginx, _accepts, _stop, _wait  # pyright: ignore[reportPrivateUsage]
from .wire import LEGACY, modern_headers, modern_meta

pytestmark = [pytest.mark.replicas]

PLACEMENTS = ("app_level", "router_level", "include_level")
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "gate", "version": "1"}}}  # fmt: skip
LEGACY_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream", "mcp-protocol-version": LEGACY}


@dataclass
class Served:
    """One uvicorn process of a tests/gate_app.py app, and nginx in front of it."""

    replica: str
    proxy: str


@contextmanager
def served(app: str) -> Iterator[Served]:
    with tempfile.TemporaryDirectory(prefix="mcp-gate-") as tmp, ExitStack() as stack:
        base = Path(tmp)
        base.chmod(0o755)
        port = free_port()
        log = base / "uvicorn.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_") or k.startswith("MCP_TEST_")}  # no MCP_AUTH_MODE
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "uvicorn", f"gate_app:{app}", "--app-dir", "tests", "--host", "127.0.0.1",
                 "--port", str(port), "--no-access-log", "--proxy-headers", "--forwarded-allow-ips", "127.0.0.1"],
                cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
            )  # fmt: skip
        stack.callback(_stop, proc)
        _wait(f"uvicorn {app}", lambda: _accepts(port), proc, log)
        nginx = Nginx(base / "nginx", [f"127.0.0.1:{port}", f"127.0.0.1:{port}"])
        nginx.prefix.mkdir()
        nginx.prefix.chmod(0o755)
        nginx.start()
        stack.callback(nginx.stop)
        yield Served(f"http://127.0.0.1:{port}/mcp", f"http://127.0.0.1:{nginx.port}/mcp")


def _modern_call() -> tuple[dict[str, str], dict[str, object]]:
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "hello", "arguments": {}, "_meta": modern_meta()}}
    return modern_headers("tools/call", "hello"), body


@pytest.mark.parametrize("app", PLACEMENTS)
def test_a_dependency_does_not_open_the_local_only_gate_behind_nginx(app: str) -> None:
    with served(app) as server, httpx.Client(timeout=15.0) as http:
        headers, body = _modern_call()
        remote = {"x-forwarded-for": "203.0.113.9"}
        answers = {
            "modern remote": http.post(server.proxy, json=body, headers={**headers, **remote}),
            "legacy remote": http.post(server.proxy, json=INITIALIZE, headers={**LEGACY_HEADERS, **remote}),
            "modern via nginx": http.post(server.proxy, json=body, headers=headers),
            "legacy via nginx": http.post(server.proxy, json=INITIALIZE, headers=LEGACY_HEADERS),
        }
        direct = http.post(server.replica, json=body, headers=headers)
    for what, response in answers.items():
        assert response.status_code == 403, (what, response.text)
        assert response.json()["error"]["data"]["reason"] == "authentication_not_configured", what
    assert direct.status_code == 200 and direct.json()["result"]["structuredContent"] == {"result": "hello"}


def test_the_template_closes_a_connection_whose_headers_never_finish() -> None:
    """Item 15: uvicorn keeps a connection whose request headers trickle in open indefinitely;
    nginx's client_header_timeout (5 s in the template; nginx's default is 60 s) closes it.
    Waited on for at most 50 s, an order of magnitude above the template's value."""
    with served("no_dependency") as server:
        port = int(server.proxy.rsplit(":", 1)[1].split("/", 1)[0])
        with socket.create_connection(("127.0.0.1", port), timeout=50.0) as conn:
            conn.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            started = time.monotonic()
            try:
                while conn.recv(4096):
                    pass
            except TimeoutError:
                pytest.fail("nginx kept a connection with unfinished headers open for 50 s")
            assert time.monotonic() - started < 50.0
