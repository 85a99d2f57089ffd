"""Raw stdio wire for the tests: spawn the server on ``tests/stdio_app.py``, talk JSON lines.

:data:`STDIO_COMMAND` is the one place that says how the server is launched (the app spec
and options follow it). Every line the server writes on stdout must be one JSON-RPC object:
:meth:`StdioProcess.recv` fails the test otherwise. stderr goes to a file the test can read.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from conftest import modern_meta, rpc

STDIO_COMMAND: list[str] = [sys.executable, "-m", "fastapi_mcp_ctx", "stdio"]
"""The server command line before ``APP``."""

TESTS_DIR = Path(__file__).resolve().parent
APP = "stdio_app:app"
LEGACY = "2025-11-25"
MODERN = "2026-07-28"
MAX_LINE = 16 * 1024 * 1024


def server_env(marker: Path | None = None, **extra: str) -> dict[str, str]:
    """The server's environment: ours without ``MCP_*`` settings, plus ``extra``; this checkout's
    package first on ``PYTHONPATH`` (a relative entry such as ``.`` would name the server's cwd,
    and the venv's editable install may be another checkout's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_")}
    inherited = [str(Path(p).resolve()) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS_DIR.parent), *inherited])
    if marker is not None:
        env["STDIO_TEST_MARKER"] = str(marker)
    env.update(extra)
    return env


def envelope(**extra: Any) -> dict[str, Any]:
    """A 2026-07-28 ``_meta`` envelope."""
    return modern_meta(MODERN, **extra)


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """A JSON-RPC notification (no id)."""
    return rpc(method, params, None)


class StdioProcess:
    """One server process with a line reader on its stdout."""

    def __init__(self, process: Process, stderr_path: Path) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.stderr_path = stderr_path
        self._stdin = process.stdin
        self._stdout = BufferedByteReceiveStream(process.stdout)

    async def send(self, message: Mapping[str, Any] | bytes) -> None:
        """Write one message (a dict becomes one JSON line; bytes are written as given)."""
        data = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
        await self._stdin.send(data)

    async def recv(self, timeout: float = 60.0) -> dict[str, Any]:
        """The next stdout line, which must be a JSON-RPC 2.0 object."""
        with anyio.fail_after(timeout):
            line = await self._stdout.receive_until(b"\n", MAX_LINE)
        message = json.loads(line)
        assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", line[:200]
        return message

    async def recv_json(self, timeout: float = 60.0) -> Any:
        """The next stdout line as JSON of any shape (a batch's answer is an array)."""
        with anyio.fail_after(timeout):
            line = await self._stdout.receive_until(b"\n", MAX_LINE)
        return json.loads(line)

    async def expect_silence(self, seconds: float) -> None:
        """Nothing arrives on stdout for ``seconds``."""
        with anyio.move_on_after(seconds):
            line = await self._stdout.receive_until(b"\n", MAX_LINE)
            raise AssertionError(f"unexpected message: {line[:200]!r}")

    async def request(self, method: str, params: dict[str, Any] | None = None, request_id: Any = 1) -> dict[str, Any]:
        """Send a request and return the next message, which must answer it."""
        await self.send(rpc(method, params, request_id))
        reply = await self.recv()
        assert reply.get("id") == request_id and "method" not in reply, reply
        return reply

    async def initialize(self, version: str = LEGACY) -> dict[str, Any]:
        """The 2025 handshake: ``initialize`` then ``notifications/initialized``."""
        params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "pytest", "version": "1"}}
        reply = await self.request("initialize", params, "init")
        await self.send(notification("notifications/initialized"))
        return reply["result"]

    async def close_stdin(self) -> float:
        """Close the server's stdin; returns the monotonic time it was closed."""
        await self._stdin.aclose()
        return time.monotonic()

    async def wait(self, timeout: float = 60.0) -> int:
        """The exit status, within ``timeout`` seconds."""
        with anyio.fail_after(timeout):
            return await self.process.wait()

    async def rest_of_stdout(self, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Every message until stdout ends."""
        messages: list[dict[str, Any]] = []
        with anyio.fail_after(timeout):
            while True:
                try:
                    line = await self._stdout.receive_until(b"\n", MAX_LINE)
                except (anyio.EndOfStream, anyio.IncompleteRead):
                    return messages
                messages.append(json.loads(line))

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")


@asynccontextmanager
async def spawn(
    tmp_path: Path, *args: str, app: str = APP, env: Mapping[str, str] | None = None, cwd: Path = TESTS_DIR
) -> AsyncIterator[StdioProcess]:
    """Start the server on ``app`` (in ``cwd``, default tests/); killed on exit if still running."""
    stderr_path = tmp_path / f"stderr-{time.monotonic_ns()}.txt"
    with stderr_path.open("wb") as stderr:
        process = await anyio.open_process(
            [*STDIO_COMMAND, app, *args], cwd=cwd, env=dict(env if env is not None else server_env()), stderr=stderr
        )
    async with process:
        try:
            yield StdioProcess(process, stderr_path)
        finally:
            if process.returncode is None:
                process.kill()
                with anyio.move_on_after(5):
                    await process.wait()
