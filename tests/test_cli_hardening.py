"""The CLI against bad input and hostile servers: a clear one-line error and an exit code,
never a traceback, a hang or unbounded memory.

``check`` is bounded per exchange in time (``--timeout``, connect to last byte) and in size
(``MAX_RESPONSE_BYTES``): tested against a real socket server on 127.0.0.1 that trickles SSE
comments or floods an endless chunked body.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from fastapi_mcp_ctx import McpRouter, McpSettings
from fastapi_mcp_ctx._probe import MAX_RESPONSE_BYTES
from fastapi_mcp_ctx.cli import cli
from fastapi_mcp_ctx.errors import ConfigurationError

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


# -- a hostile HTTP server ------------------------------------------------------------------


def _serve_one(conn: socket.socket, mode: str, stop: threading.Event, sent: list[int]) -> None:
    with conn:
        try:
            conn.settimeout(5)
            conn.recv(65536)
            kind = "text/event-stream" if mode == "trickle" else "application/json"
            conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nTransfer-Encoding: chunked\r\n\r\n".encode())
            chunk = b"a" * 65536
            deadline = time.monotonic() + 15
            while not stop.is_set() and time.monotonic() < deadline:
                if mode == "trickle":
                    conn.sendall(b"5\r\n: x\n\n\r\n")
                    time.sleep(0.2)
                else:
                    conn.sendall(b"10000\r\n" + chunk + b"\r\n")
                    sent[0] += len(chunk)
        except OSError:  # the probe hung up: what it should do
            pass


@contextlib.contextmanager
def hostile_server(mode: str) -> Iterator[tuple[str, list[int]]]:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()
    sent = [0]

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=_serve_one, args=(conn, mode, stop, sent), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/mcp", sent
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def test_check_trickling_sse_server_is_bounded_by_the_timeout() -> None:
    with hostile_server("trickle") as (url, _):
        started = time.monotonic()
        result = run("check", url, "--timeout", "1")
        took = time.monotonic() - started
    assert result.exit_code == 1, result.output
    assert "no complete answer within 1 s (--timeout)" in result.output
    assert took < 8, took  # two eras, one bounded exchange each


def test_check_endless_body_is_cut_at_the_size_cap() -> None:
    with hostile_server("flood") as (url, sent):
        result = run("check", url, "--timeout", "20")
    assert result.exit_code == 1, result.output
    assert "exceeds 4 MiB, stopped reading" in result.output
    assert sent[0] < 40 * MAX_RESPONSE_BYTES  # the probe hung up; it did not drain the stream


@pytest.mark.parametrize("url", ["http://[::1/mcp", "ftp://127.0.0.1/mcp", "127.0.0.1:8000/mcp"])
def test_check_bad_url_is_a_usage_error(url: str) -> None:
    result = run("check", url)
    assert result.exit_code == 2, result.output
    assert "Invalid value for URL" in result.output and "Traceback" not in result.output


# -- migrate --------------------------------------------------------------------------------


def test_migrate_sql_unknown_revision_is_one_line() -> None:
    result = run("migrate", "--sql", "--url", "sqlite+aiosqlite:///x.db", "--revision", "bogus")
    assert result.exit_code == 1, result.output
    assert "cannot write the SQL for sqlite+aiosqlite:///x.db" in result.output and "bogus" in result.output


@pytest.mark.parametrize("url", ["sqlite+aiosqlite://", "sqlite+aiosqlite:///:memory:"])
def test_migrate_in_memory_sqlite_says_what_to_use(url: str) -> None:
    result = run("migrate", "--url", url)
    assert result.exit_code == 1, result.output
    assert "in-memory SQLite database is not supported" in result.output and "memory://" in result.output


def test_migrate_malformed_url_is_a_usage_error() -> None:
    result = run("migrate", "--url", "postgresql+asyncpg://u:pw@:bad:port/db")
    assert result.exit_code == 2, result.output
    assert "not a database URL" in result.output and "pw" not in result.output.replace("pw@", "")


def test_migrate_to_base_on_a_new_database_says_nothing_to_do(tmp_path: Path) -> None:
    result = run("migrate", "--url", f"sqlite+aiosqlite:///{tmp_path / 'new.db'}", "--revision", "base")
    assert result.exit_code == 0, result.output
    assert "no ctx.state schema, nothing to do" in result.output and "None" not in result.output


@pytest.mark.parametrize("url", ["sqlite+aiosqlite:///:memory:", "sqlite+aiosqlite://"])
def test_router_with_in_memory_sqlite_is_refused_at_build(url: str) -> None:
    with pytest.raises(ConfigurationError, match="memory://"):
        McpRouter(settings=McpSettings(storage_url=url))


# -- serve ----------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["os:path", "os:getcwd", "json:dumps"])
def test_serve_refuses_what_is_not_an_mcp_app(spec: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: pytest.fail("uvicorn must not start"))
    result = CliRunner().invoke(cli, ["serve", spec, "--app-dir", str(ROOT)])
    assert result.exit_code == 2, result.output
    assert "not an ASGI application holding an McpRouter" in result.output
