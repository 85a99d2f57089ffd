"""What a large bearer token costs the server (issue 24 item 3), over real sockets (not a timed test).

    .venv/bin/python bench/bench_tokens.py                 # defaults: 100 refusals, 400 legit calls
    .venv/bin/python bench/bench_tokens.py --refusals 60 --calls 1000

Two uvicorn processes (httptools, one worker each, ``bench/servers/token_apps.py``): the project
in ``MCP_AUTH_MODE=jwt`` and a bare ASGI app that refuses the same request with 401. Measured:

1. **CPU per refused request**: the server process's CPU time (``/proc/<pid>/task/*/schedstat``,
   nanoseconds on CPU, every thread) over ``--refusals`` requests carrying ``Authorization: Bearer <4 MB>``, each on a
   fresh connection, divided by their number; the same for a 20 KiB token (over
   ``MCP_JWT_MAX_TOKEN_BYTES``, under ``MCP_MAX_REQUEST_HEADER_BYTES``: refused by the token
   bound) and for a valid token's ``tools/call`` (for scale). The difference between the project
   and the bare app is what the project adds on top of receiving the header at all.
2. **A legitimate caller's latency**: ``--calls`` sequential ``tools/call`` with a valid token on
   one keep-alive connection, p50 and p99, alone and while two attacker *processes* each send a
   4 MB token in a loop (raw sockets, one connection per request, prebuilt bytes: the attackers
   cost the client side little CPU and share no GIL with the caller); the same against the bare
   app, whose figures are the floor (uvicorn receiving 4 MB headers on the same event loop).

3. **Our part alone, in process**: the CPU time of one ASGI call of each app with the 4 MB header
   (the same scope uvicorn builds, the body already there), no server: what the project adds on
   top of uvicorn, without uvicorn's own noise.

Prints one JSON document. The client runs on the same machine (its CPU competes with the
server's; the figures say what the server spends, not what a client waits for in a quiet
network).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import jwt

ROOT = Path(__file__).resolve().parents[1]
SECRET = "bench-secret-" + "x" * 32
BODY = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 2, "b": 3}}}
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of ``pid`` so far (schedstat: nanoseconds on CPU)."""
    return sum(int((task / "schedstat").read_text().split()[0]) for task in Path(f"/proc/{pid}/task").iterdir()) / 1e9


@contextmanager
def server(app: str) -> Iterator[tuple[str, int]]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_")}
    env.update(BENCH_JWT_SECRET=SECRET, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", f"bench.servers.token_apps:{app}", "--host", "127.0.0.1", "--port", str(port),
         "--http", "httptools", "--no-access-log", "--log-level", "warning"],
        cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp", proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def good_token() -> str:
    now = int(time.time())
    claims = {"iss": "https://idp.example.test", "aud": "https://mcp.example.test/mcp", "sub": "bench", "iat": now, "exp": now + 3600}
    return jwt.encode(claims, SECRET, algorithm="HS256")


def big_token(size: int) -> str:
    head = good_token().split(".")[0]
    return f"{head}.{'A' * size}.sig"


def per_request_cpu(url: str, pid: int, token: str, count: int) -> dict[str, Any]:
    """Server CPU per request (ms), each request on a fresh connection; the status codes seen."""
    statuses: dict[int, int] = {}
    headers = {**HEADERS, "authorization": f"Bearer {token}"}
    with httpx.Client(timeout=60.0) as warm:
        warm.post(url, json=BODY, headers=headers)
    before = cpu_seconds(pid)
    for _ in range(count):
        with httpx.Client(timeout=60.0) as client:
            status = client.post(url, json=BODY, headers=headers).status_code
        statuses[status] = statuses.get(status, 0) + 1
    return {"cpu_ms_per_request": round((cpu_seconds(pid) - before) * 1000 / count, 3), "statuses": statuses}


def attack(port: int, size: int, stop: Any, sent: Any) -> None:
    """One attacker process: POST a ``size``-byte bearer token, one connection per request."""
    body = json.dumps(BODY).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in HEADERS.items())
    request = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{head}Authorization: Bearer {big_token(size)}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
                conn.sendall(request)
                while conn.recv(65536):
                    pass
        except OSError:
            pass
        with sent.get_lock():
            sent.value += 1


def latencies(url: str, calls: int, attackers: int) -> dict[str, Any]:
    port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
    stop = multiprocessing.Event()
    sent = multiprocessing.Value("i", 0)
    procs = [multiprocessing.Process(target=attack, args=(port, 4 * 1024 * 1024, stop, sent), daemon=True) for _ in range(attackers)]
    for proc in procs:
        proc.start()
    time.sleep(1.0 if attackers else 0)
    headers = {**HEADERS, "authorization": f"Bearer {good_token()}"}
    samples: list[float] = []
    with httpx.Client(timeout=60.0) as client:
        for _ in range(calls):
            started = time.perf_counter()
            response = client.post(url, json=BODY, headers=headers)
            samples.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, response.text
    stop.set()
    for proc in procs:
        proc.join(timeout=60)
    quantiles = statistics.quantiles(samples, n=100)
    return {"attackers": attackers, "p50_ms": round(quantiles[49], 2), "p99_ms": round(quantiles[98], 2), "attack_requests": sent.value}


def in_process(count: int) -> dict[str, float]:
    """CPU ms per ASGI call of ``project`` and ``bare`` with a 4 MB bearer token (figure 3)."""
    import asyncio  # noqa: PLC0415 - only this figure runs the apps in this process

    os.environ["BENCH_JWT_SECRET"] = SECRET
    sys.path.insert(0, str(ROOT))
    from bench.servers.token_apps import bare, project  # noqa: PLC0415

    body = json.dumps(BODY).encode()
    raw = [(k.encode(), v.encode()) for k, v in HEADERS.items()]
    raw += [(b"host", b"127.0.0.1:8000"), (b"authorization", f"Bearer {big_token(4 * 1024 * 1024)}".encode()),
            (b"content-length", str(len(body)).encode())]  # fmt: skip

    async def call(app: Any) -> None:
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
                 "path": "/mcp", "raw_path": b"/mcp", "query_string": b"", "root_path": "", "headers": list(raw),
                 "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 8000), "state": {}}  # fmt: skip

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            return None

        await app(scope, receive, send)

    async def measure(app: Any) -> float:
        for _ in range(5):
            await call(app)
        started = time.process_time()
        for _ in range(count):
            await call(app)
        return round((time.process_time() - started) * 1000 / count, 4)

    async def both() -> dict[str, float]:
        return {"project_ms": await measure(project), "bare_ms": await measure(bare)}

    return asyncio.run(both())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--refusals", type=int, default=100)
    parser.add_argument("--calls", type=int, default=400)
    args = parser.parse_args()
    four_mb, twenty_kb = big_token(4 * 1024 * 1024), big_token(20 * 1024)
    report: dict[str, Any] = {"load_average": os.getloadavg(), "cpus": os.cpu_count()}
    with server("bare") as (url, pid):
        report["bare_4mb"] = per_request_cpu(url, pid, four_mb, args.refusals)
        report["bare_20kb"] = per_request_cpu(url, pid, twenty_kb, args.refusals)
        report["bare_legit_alone"] = latencies(url, args.calls, 0)
        report["bare_legit_under_attack"] = latencies(url, args.calls, 2)
    with server("project") as (url, pid):
        report["project_4mb"] = per_request_cpu(url, pid, four_mb, args.refusals)
        report["project_20kb"] = per_request_cpu(url, pid, twenty_kb, args.refusals)
        report["project_valid_call"] = per_request_cpu(url, pid, good_token(), args.refusals)
        report["legit_alone"] = latencies(url, args.calls, 0)
        report["legit_under_attack"] = latencies(url, args.calls, 2)
    report["in_process_4mb"] = in_process(1000)
    report["project_over_bare_4mb_ms"] = round(report["project_4mb"]["cpu_ms_per_request"] - report["bare_4mb"]["cpu_ms_per_request"], 3)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
