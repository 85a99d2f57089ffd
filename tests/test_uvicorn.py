"""A real ``uvicorn`` process with its default logging config: what an operator sees on stderr,
and what a slow or lying client can do to a connection.

- (b) ``ctx.log`` lines appear in the server log with level, message, ``request_id``,
  ``tenant_id``, ``session_id``, ``trace_id`` and the data; library warnings carry their level.
- (d) a body shorter than its ``Content-Length``, or a chunked body that never ends, is answered
  408 after ``MCP_BODY_TIMEOUT_SECONDS`` and the connection is closed (known-faults kind
  RESOURCE-LIMITS: limits on what is actually read), checked with raw sockets.

The server runs ``python -m uvicorn`` on 127.0.0.1 (a free port) for this module only; every
network wait is bounded.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

BODY_TIMEOUT = 1.0

APP_SOURCE = '''
from fastapi import Depends, FastAPI

from fastapi_mcp_ctx import Context, McpRouter, mcp_context

router = McpRouter()


@router.tool()
async def store_note(text: str, ctx: Context = Depends(mcp_context)) -> str:
    """Logs at three levels."""
    await ctx.log.debug("details", step=1)
    await ctx.log.info("stored", note_id=7, text=text)
    await ctx.log.warning("careful", password="hunter2")
    return "ok"


app = FastAPI()
app.include_router(router)
'''


@dataclass
class Server:
    port: int
    stderr: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def log(self) -> str:
        return self.stderr.read_text(encoding="utf-8", errors="replace")

    def wait_for_log(self, pattern: str, timeout: float = 5.0) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while True:
            match = re.search(pattern, self.log(), re.MULTILINE)
            if match is not None:
                return match
            if time.monotonic() > deadline:
                raise AssertionError(f"{pattern!r} not in the server log:\n{self.log()}")
            time.sleep(0.05)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("uvicorn_app")
    (root / "notes_app.py").write_text(APP_SOURCE, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_")}
    env["MCP_BODY_TIMEOUT_SECONDS"] = str(BODY_TIMEOUT)
    env["MCP_LOG_LEVEL"] = "debug"  # the log test reads all three levels (the default floor is info)
    port = _free_port()
    stderr = root / "stderr.log"
    with stderr.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "notes_app:app", "--app-dir", str(root), "--host", "127.0.0.1", "--port", str(port)],
            cwd=root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    srv = Server(port, stderr)
    try:
        srv.wait_for_log(r"Uvicorn running on", timeout=20)
        yield srv
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
TRACE = "0af7651916cd43dd8448eb211c80319c"


def test_ctx_log_lines_appear_with_level_message_fields_and_data(server: Server) -> None:
    with httpx.Client(timeout=10) as http:
        init = http.post(server.url, headers=HEADERS, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
        })
        sid = init.headers["mcp-session-id"]
        session = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        call = http.post(server.url, headers=session, json={
            "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "store_note", "arguments": {"text": "hello"}},
        })
        assert call.status_code == 200
        modern = {**HEADERS, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "store_note",
                  "traceparent": f"00-{TRACE}-b7ad6b7169203331-01"}
        call = http.post(server.url, headers=modern, json={
            "jsonrpc": "2.0", "id": "m-3", "method": "tools/call",
            "params": {"name": "store_note", "arguments": {"text": "again"}, "_meta": META},
        })
        assert call.status_code == 200
    server.wait_for_log(
        rf'^INFO:     fastapi_mcp_ctx - stored request_id=2 tenant_id=default session_id={sid} trace_id=- note_id=7 text="hello"$'
    )
    server.wait_for_log(rf"^DEBUG:    fastapi_mcp_ctx - details request_id=2 tenant_id=default session_id={sid} .*step=1$")
    warning = server.wait_for_log(r"^WARNING:  fastapi_mcp_ctx - careful request_id=2 .*$").group(0)
    assert 'password="[REDACTED]"' in warning and "hunter2" not in server.log()
    server.wait_for_log(
        rf'^INFO:     fastapi_mcp_ctx - stored request_id=m-3 tenant_id=default session_id=- trace_id={TRACE} note_id=7 text="again"$'
    )


def test_library_warnings_carry_level_and_say_what_to_set(server: Server) -> None:
    with httpx.Client(timeout=10) as http:
        refused = http.post(server.url, headers={**HEADERS, "host": "mcp.example.test"}, content=b"{}")
    assert refused.status_code == 421
    assert "MCP_ALLOWED_HOSTS" in refused.json()["error"]["message"]
    server.wait_for_log(r"^WARNING:  fastapi_mcp_ctx - refused Host 'mcp\.example\.test' .*MCP_ALLOWED_HOSTS='\[\"mcp\.example\.test\"\]'$")


# -- (d) bounded body reads ---------------------------------------------------------------------------


def exchange(port: int, raw: bytes, deadline: float) -> tuple[bytes, float]:
    """Send ``raw`` and read until the server closes; returns (bytes, seconds to EOF)."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=deadline) as sock:
        sock.sendall(raw)
        received = b""
        while True:
            chunk = sock.recv(65536)  # socket.timeout (an OSError) fails the test past the deadline
            if not chunk:
                return received, time.monotonic() - started
            received += chunk


def parse(response: bytes) -> tuple[int, dict[str, str], Any]:
    head, _, body = response.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    return status, headers, json.loads(body) if body else None


def post_head(port: int, extra: str) -> bytes:
    return (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\n{extra}\r\n"
    ).encode()


@pytest.mark.parametrize(
    "tail",
    [
        "Content-Length: 400\r\n\r\n" + '{"jsonrpc":"2.0","id":1,',
        "Transfer-Encoding: chunked\r\n\r\n" + "a\r\n0123456789\r\n",
        "Content-Length: 50\r\n\r\n",
    ],
    ids=["short-content-length", "unfinished-chunked", "headers-only"],
)
def test_stalled_body_is_408_and_the_connection_is_freed(server: Server, tail: str) -> None:
    head, _, rest = tail.partition("\r\n\r\n")
    raw = post_head(server.port, head + "\r\n") + rest.encode()
    response, seconds = exchange(server.port, raw, deadline=BODY_TIMEOUT + 8)
    assert BODY_TIMEOUT * 0.8 <= seconds < BODY_TIMEOUT + 5, seconds
    status, headers, body = parse(response)
    assert status == 408
    assert headers.get("connection") == "close"
    assert body["error"]["code"] == -32600 and body["id"] is None
    assert body["error"]["data"]["reason"] == "body_timeout"


def test_many_slow_clients_do_not_pin_the_server(server: Server) -> None:
    """Eight stalled connections at once are all freed, and a normal request is served meanwhile."""
    socks: list[socket.socket] = []
    try:
        for _ in range(8):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=BODY_TIMEOUT + 8)
            sock.sendall(post_head(server.port, "Content-Length: 1000\r\n") + b'{"jsonrpc"')
            socks.append(sock)
        with httpx.Client(timeout=5) as http:
            started = time.monotonic()
            ok = http.post(server.url, headers={**HEADERS, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"},
                           json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}})
            assert ok.status_code == 200 and time.monotonic() - started < BODY_TIMEOUT
        for sock in socks:
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
            assert parse(received)[0] == 408
    finally:
        for sock in socks:
            sock.close()
