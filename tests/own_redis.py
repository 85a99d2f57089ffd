"""A Redis server of the test's own (a temp dir, a free loopback port) that the test may stop
and start again: the outage tests never touch the shared one.

Persistence is on (``appendonly yes``, ``appendfsync always``), so what was acknowledged before
a stop is there after the restart, as in a production Redis with AOF.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OwnRedis:
    """``url`` (db 1), :meth:`stop` (SHUTDOWN NOSAVE: like a crash, AOF kept), :meth:`start`."""

    def __init__(self, binary: str, folder: Path) -> None:
        self.binary = binary
        self.folder = folder
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/1"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.folder), "--save", ""]
        args += ["--appendonly", "yes", "--appendfsync", "always", "--daemonize", "no"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"redis-server on port {self.port} did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: redis flushes the AOF (fsync always: nothing is lost anyway)
            self.proc.wait(timeout=10)
        self.proc = None


@contextmanager
def own_redis() -> Iterator[OwnRedis]:
    """Start a private redis-server; stop it afterwards (skip without the binary, fail under
    ``MCP_REQUIRE_SERVICES=1``)."""
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("MCP_REQUIRE_SERVICES") == "1":
            pytest.fail("MCP_REQUIRE_SERVICES=1 but redis-server is not on PATH")
        pytest.skip("redis-server is not on PATH")
    with tempfile.TemporaryDirectory(prefix="mcp-own-redis-") as folder:
        server = OwnRedis(binary, Path(folder))
        server.start()
        try:
            yield server
        finally:
            server.stop()
