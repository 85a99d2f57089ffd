"""A real uvicorn server in a child process (or a thread), for the tests that drive outside clients.

``with uvicorn_server("examples.quickstart:app") as url:`` serves the app (``module:attribute``,
imported from the repository root) on 127.0.0.1 at a port the OS picks, and yields its MCP
endpoint ``http://127.0.0.1:PORT/mcp``. The port is read from uvicorn's own start-up line,
so there is no race between picking a free port and binding it. ``with uvicorn_thread(app) as
url:`` serves an app object in a thread of the test process instead (the test can then look
inside the app while a client drives it).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn

ROOT = Path(__file__).resolve().parents[1]
RUNNING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")


@contextmanager
def uvicorn_server(app: str, start_timeout: float = 20.0) -> Iterator[str]:
    """Serve ``app`` with uvicorn on 127.0.0.1; yield ``http://127.0.0.1:PORT/mcp``.

    Fails the test, with uvicorn's log, when the server has not started within
    ``start_timeout`` seconds. Stops the server (SIGTERM, then SIGKILL after 10 s) on exit.
    """
    with uvicorn_process(app, start_timeout=start_timeout) as (_, url, _log):
        yield url


@contextmanager
def uvicorn_process(
    app: str, *, start_timeout: float = 20.0, env: dict[str, str] | None = None, app_dir: Path | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], str, Path]]:
    """Like :func:`uvicorn_server`, yielding ``(process, url, log file)`` so a test can signal the
    process itself; ``env`` adds environment variables, ``app_dir`` is uvicorn's ``--app-dir``."""
    extra = ["--app-dir", str(app_dir)] if app_dir is not None else []
    with tempfile.NamedTemporaryFile(prefix="uvicorn-", suffix=".log") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", "0", "--no-access-log", *extra],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            env={**os.environ, **(env or {})},
        )
        try:
            port = _wait_for_port(proc, Path(log.name), start_timeout)
            yield proc, f"http://127.0.0.1:{port}/mcp", Path(log.name)
        finally:
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def _wait_for_port(proc: subprocess.Popen[bytes], log: Path, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if match := RUNNING.search(text):
            return int(match.group(1))
        if proc.poll() is not None:
            pytest.fail(f"uvicorn exited with status {proc.returncode}:\n{text[-3000:]}")
        time.sleep(0.05)
    pytest.fail(f"uvicorn did not start within {timeout} s:\n{log.read_text(errors='replace')[-3000:]}")


@contextmanager
def uvicorn_thread(app: Any, start_timeout: float = 10.0, *, path: str = "/mcp", lifespan: str = "on") -> Iterator[str]:
    """Serve the ASGI ``app`` with uvicorn on 127.0.0.1 (a free port) in a daemon thread
    (``lifespan`` as uvicorn's option); yield ``http://127.0.0.1:PORT`` + ``path``. Stops the
    server on exit."""
    # keep-alive 75 s (uvicorn's default is 5 s): on a loaded machine a client could reuse a
    # connection the server was just closing as idle, and fail with "Connection closed"
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan=lifespan, timeout_keep_alive=75)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            server.should_exit = True
            pytest.fail(f"uvicorn did not start within {start_timeout} s")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}{path}"
    finally:
        server.should_exit = True
        thread.join(timeout=5)



def stop_process(proc: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    """SIGTERM ``proc`` and wait ``timeout`` seconds for it; then SIGKILL."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
