"""``--workers 2`` on one port with the Redis session store: the kernel spreads connections over
two processes, so a legacy session's requests reach both; 5 official clients make 50 calls
with no error, each executed exactly once (issue 7: "``uvicorn --workers 2`` fails legacy
sessions intermittently with ``Session not found``")."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client
from servers import free_port

from .topology import ROOT, RedisServer, _stop, replica_env, wait_ready

pytestmark = [pytest.mark.replicas, pytest.mark.redis]

CLIENTS = 5
CALLS = 10


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    with tempfile.TemporaryDirectory(prefix="mcp-workers-") as tmp:
        server = RedisServer(Path(tmp))
        server.start()
        try:
            yield server
        finally:
            server.stop()


def _serve(argv: list[str], redis: RedisServer, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = replica_env(redis)
    env.pop("REPLICA_NAME", None)  # each worker names itself <host>:<pid>
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    try:
        wait_ready(f"http://127.0.0.1:{port}")
    except RuntimeError:
        _stop(proc)
        raise AssertionError(log.read_text(errors="replace")[-3000:]) from None
    return proc


async def _fifty_calls(url: str) -> tuple[list[str], list[str]]:
    job = f"w{uuid.uuid4().hex[:12]}"
    served: list[str] = []

    async def one() -> None:
        async with Client(url, mode="legacy", cache=None) as client:
            for _ in range(CALLS):
                result = await client.call_tool("work", {"job": job, "steps": 1})
                assert result.is_error is False, result.content
                assert isinstance(result.structured_content, dict)
                served.append(result.structured_content["replica"])

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for _ in range(CLIENTS):
                tg.start_soon(one)
        async with Client(url, mode="legacy", cache=None) as client:
            executed = await client.call_tool("runs", {"job": job})
    assert isinstance(executed.structured_content, dict)
    return served, executed.structured_content["result"]


@pytest.mark.parametrize("command", ["uvicorn", "fastapi-mcp-ctx serve"])
async def test_two_workers_serve_fifty_legacy_calls_from_five_clients(redis: RedisServer, command: str, tmp_path: Path) -> None:
    port = free_port()
    common = ["examples.replicated_app:app", "--host", "127.0.0.1", "--port", str(port), "--workers", "2"]
    if command == "uvicorn":
        argv = [sys.executable, "-m", "uvicorn", *common, "--no-access-log", "--timeout-graceful-shutdown", "2"]
    else:
        argv = [sys.executable, "-m", "fastapi_mcp_ctx", "serve", *common, "--log-level", "warning", "--graceful-timeout", "2"]
    log = tmp_path / "server.log"
    started = time.monotonic()
    proc = _serve(argv, redis, port, log)
    up = time.monotonic()
    try:
        served, executed = await _fifty_calls(f"http://127.0.0.1:{port}/mcp")
    finally:
        called = time.monotonic()
        _stop(proc)
    print(f"{command}: start {up - started:.1f} s, 50 calls {called - up:.1f} s, stop {time.monotonic() - called:.1f} s")
    assert len(served) == CLIENTS * CALLS
    assert Counter(executed) == Counter(served)  # each call executed exactly once
    print(f"{command} --workers 2: calls per worker {dict(Counter(served))}")
