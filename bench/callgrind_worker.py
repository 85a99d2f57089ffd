"""Instructions, cache misses and estimated cycles per request of the real uvicorn worker under load.

``bench/callgrind_call.sh`` counts one call in process, one at a time. This script counts what the
server process itself executes: uvicorn (httptools, uvloop) runs under valgrind's callgrind and wrk
drives it with ``--conc`` connections (32, as the shared harness does), twice (``--calls`` N1 and
N2 requests); the difference of the totals divided by N2 - N1 cancels start-up, import and
shutdown. With ``--cache`` valgrind also simulates the caches and branch predictors, with the last
level sized as this machine's **L2** (512 KiB, 8-way), not its L3: a working set that outgrows L2
then shows as "LL" misses, which an L3-sized simulation hides::

    BENCH_SERVERS_DIR=<bench kit>/servers .venv/bin/python bench/callgrind_worker.py a   # ours and bare FastAPI, Ir per request
    .venv/bin/python bench/callgrind_worker.py a b s d --cache # + L1/L2 misses, mispredicts, cycles

Estimated cycles = Ir + 10 x L1 misses + 40 x L2 misses + 15 x mispredicted branches (an EPYC's
rough costs); their ratio is a load-independent proxy for the wall-clock ratio. The servers are the
shared harness's (``project_ref:app``, importing this checkout's package or ``$PYTHONPATH``'s, and
``ceiling_fastapi:app``, from ``$BENCH_SERVERS_DIR``: the shared bench kit's ``servers/`` folder); workload
s opens its session with ``initialize`` before each count. Needs valgrind; the client is asyncio,
outside valgrind, so the server is always the bottleneck.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness.workloads import LEGACY, WORKLOADS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SERVERS = Path(os.environ.get("BENCH_SERVERS_DIR", ROOT / "bench" / "kit-servers"))
APPS = {"project": "project_ref:app", "fastapi": "ceiling_fastapi:app"}
EVENTS = ("Ir", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw", "Bcm", "Bim")
CACHE = ["--cache-sim=yes", "--branch-sim=yes", "--I1=32768,8,64", "--D1=32768,8,64", "--LL=524288,8,64"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(port: int, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str]]:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/mcp", data=body, headers={"Content-Type": "application/json", **headers}
    )
    with urllib.request.urlopen(req, timeout=600) as resp:
        resp.read()
        return resp.status, dict(resp.headers)


def _open_session(port: int) -> str:
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}  # fmt: skip
    hdr = {"Accept": "application/json, text/event-stream"}
    _, headers = _post(port, json.dumps(init).encode(), hdr)
    sid = next(v for k, v in headers.items() if k.lower() == "mcp-session-id")
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    _post(port, json.dumps(note).encode(), {**hdr, "MCP-Protocol-Version": LEGACY, "Mcp-Session-Id": sid})
    return sid


def _request_bytes(port: int, body: bytes, headers: dict[str, str]) -> bytes:
    head = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return (head + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n").encode() + body


async def _drive(port: int, body: bytes, headers: dict[str, str], calls: int, conc: int, unique_ids: bool) -> None:
    """``calls`` requests over ``conc`` keep-alive connections; each answer must be a 200 with a result."""
    request = _request_bytes(port, body, headers)
    left = [calls]
    counter = [0]

    async def connection() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while left[0] > 0:
            left[0] -= 1
            data = request
            if unique_ids:  # one session: each request its own JSON-RPC id
                counter[0] += 1
                data = _request_bytes(port, body.replace(b'"id":1,', b'"id":%d,' % (1000 + counter[0])), headers)
            writer.write(data)
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
            answer = await reader.readexactly(length)
            if not head.startswith(b"HTTP/1.1 200") or b'"result"' not in answer:
                raise SystemExit(f"bad response: {head[:40]!r} {answer[:300]!r}")
        writer.close()

    await asyncio.gather(*(connection() for _ in range(conc)))


def count(workload: str, app: str, calls: int, conc: int, cache: bool, tmp: Path) -> dict[str, int]:
    """Run the worker under callgrind for ``calls`` requests; the program's event totals."""
    wl = WORKLOADS[workload]
    port, out = _free_port(), tmp / f"cg.{workload}.{app}.{calls}"
    env = {**os.environ, "PYTHONHASHSEED": "0", "BENCH_TOOLS": "100", "BENCH_SERVERS_DIR": str(SERVERS),
           "PYTHONPATH": os.environ.get("PYTHONPATH") or str(ROOT),
           "BENCH_EXTRA_TOOLS": "1" if workload == "d" else "0", "BENCH_STATEFUL": "1" if wl.session else "0"}  # fmt: skip
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *(CACHE if cache else []),
           sys.executable, "-m", "uvicorn", APPS[app], "--host", "127.0.0.1", "--port", str(port),
           "--http", "httptools", "--loop", "uvloop", "--no-access-log", "--log-level", "warning"]  # fmt: skip
    with open(tmp / f"log.{app}.{calls}", "w") as log:
        server = subprocess.Popen(cmd, cwd=SERVERS, env=env, stdout=subprocess.DEVNULL, stderr=log)
    try:
        for _ in range(3000):
            if server.poll() is not None:
                raise SystemExit(f"the server under valgrind exited: {(tmp / f'log.{app}.{calls}').read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        else:
            raise SystemExit(
                f"the server under valgrind did not listen in 10 minutes: {(tmp / f'log.{app}.{calls}').read_text()[-2000:]}"
            )
        headers = dict(wl.headers)
        if wl.session:
            headers["Mcp-Session-Id"] = _open_session(port)
        asyncio.run(_drive(port, wl.body_bytes(), headers, calls, conc, wl.session))
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=600)
    text = out.read_text()
    names = next(line.split()[1:] for line in text.splitlines() if line.startswith("events:"))
    totals = next(line.split()[1:] for line in text.splitlines() if line.startswith(("summary:", "totals:")))
    return dict(zip(names, map(int, totals), strict=True))


def cycles(per: dict[str, float]) -> float:
    """Estimated cycles of one request from its events (module docstring)."""
    g = per.get
    l1 = g("I1mr", 0) + g("D1mr", 0) + g("D1mw", 0)
    l2 = g("ILmr", 0) + g("DLmr", 0) + g("DLmw", 0)
    return g("Ir", 0) + 10 * l1 + 40 * l2 + 15 * (g("Bcm", 0) + g("Bim", 0))


def main() -> None:
    if not (SERVERS / "project_ref.py").is_file():
        raise SystemExit(f"no project_ref.py in {SERVERS}: set BENCH_SERVERS_DIR to the shared bench kit's servers/ folder")
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("workloads", nargs="*", default=["a"], choices=["a", "b", "c", "cm", "d", "s"])
    parser.add_argument("--apps", nargs="+", default=["project", "fastapi"], choices=list(APPS))
    parser.add_argument("--calls", nargs=2, type=int, default=[300, 1300], metavar=("N1", "N2"))
    parser.add_argument("--conc", type=int, default=32)
    parser.add_argument("--cache", action="store_true", help="simulate caches (L2-sized LL) and branches")
    args = parser.parse_args()
    n1, n2 = args.calls
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for workload in args.workloads:
            rows: dict[str, dict[str, float]] = {}
            for app in args.apps:
                with ThreadPoolExecutor(2) as pool:  # both counts at once: instruction counts do not depend on load
                    runs = [pool.submit(count, workload, app, n, args.conc, args.cache, tmp) for n in (n1, n2)]
                    first, second = (run.result() for run in runs)
                rows[app] = {k: (second[k] - first[k]) / (n2 - n1) for k in second}
            shown = [e for e in EVENTS if all(e in r for r in rows.values())]
            print(f"workload {workload}, c={args.conc}, per request ({n1} -> {n2} requests):")
            print("  " + " ".join(f"{e:>9}" for e in [*shown, "cycles"]) + "  app")
            for app, r in rows.items():
                print("  " + " ".join(f"{r[e]:9.0f}" for e in shown) + f" {cycles(r):9.0f}  {app}")
            if len(rows) == 2:
                (_, ours), (_, theirs) = rows.items()
                print(f"  ceiling / ours: Ir {theirs['Ir'] / ours['Ir']:.3f}x, cycles {cycles(theirs) / cycles(ours):.3f}x")


if __name__ == "__main__":
    main()
