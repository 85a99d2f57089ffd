"""The official MCP client (``mcp`` 2.3.0) against the quickstart app served by Granian, both eras.

Granian (an ASGI server written in Rust, ``docs/deployment.md``) is not a dependency of the
package; the ``test`` extra installs it, so the test command runs this. Elsewhere it runs where an
interpreter with ``granian`` is given as ``TEST_GRANIAN_PYTHON`` (the benchmark venv has it:
``bench/requirements.txt``) or the running one has it, and is skipped otherwise. Granian serves ``examples.quickstart:app`` in a child process on 127.0.0.1; the client
lists the tools, calls ``add``, gets ``count_to``'s progress in order and reads its own session.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client
from serving import stop_process

ROOT = Path(__file__).resolve().parents[1]
MODES = ["legacy", "2026-07-28"]


def _granian_python() -> str | None:
    given = os.environ.get("TEST_GRANIAN_PYTHON")
    if given:
        return given
    return sys.executable if importlib.util.find_spec("granian") is not None else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    python = _granian_python()
    if python is None:
        pytest.skip("granian is not installed (set TEST_GRANIAN_PYTHON to an interpreter that has it)")
    port = _free_port()
    log = tmp_path_factory.mktemp("granian") / "granian.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    cmd = [python, "-m", "granian", "--interface", "asgi", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
           "--no-ws", "--log-level", "warning", "examples.quickstart:app"]  # fmt: skip
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"granian exited with {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"granian did not listen within 60 s:\n{log.read_text(errors='replace')[-3000:]}")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(proc)


@pytest.mark.parametrize("mode", MODES)
async def test_the_official_client_calls_tools_under_granian(server_url: str, mode: str) -> None:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    with anyio.fail_after(30):
        async with Client(server_url, mode=mode, cache=None) as client:
            assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
            names = [t.name for t in (await client.list_tools()).tools]
            assert "add" in names and "count_to" in names
            added = await client.call_tool("add", {"a": 2, "b": 3})
            assert added.is_error is False and added.structured_content == {"result": 5}
            counted = await client.call_tool("count_to", {"n": 3}, progress_callback=on_progress)
            assert counted.structured_content == {"result": "counted to 3"}
            who = (await client.call_tool("whoami", {})).structured_content
    assert seen == [1, 2, 3]
    assert who is not None and who["era"] == ("legacy" if mode == "legacy" else "modern")
    assert (who["session"] is not None) == (mode == "legacy")
