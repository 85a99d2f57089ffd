"""Idle RSS of the shared harness's ``project_ref`` app against bare FastAPI, in one run (issue 23: ≤ 1.15×).

    .venv/bin/python bench/idle_rss.py --servers <kit>/servers                     # this checkout vs the ceiling, 7 starts each
    .venv/bin/python bench/idle_rss.py --servers <kit>/servers --checkout ../other  # another checkout of the project

The servers are the shared bench kit's: its ``servers/`` folder, given by ``--servers`` or
``BENCH_SERVERS_DIR``.

Starts each server as the harness does (``python -m uvicorn <app> --app-dir <servers>``, httptools,
uvloop, ``--lifespan on``, one worker on 127.0.0.1, ``BENCH_TOOLS=100``), waits until the port
accepts, reads ``VmRSS`` from ``/proc/<pid>/status`` (what the harness records as idle RSS; no
request sent), stops it. The servers take turns, start after start, so a drift of the machine
lands on all of them; prints each one's median, every sample, and project ÷ ceiling.
Each ``--checkout`` is put first on ``PYTHONPATH`` for ``project_ref`` (default: this checkout).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def vm_rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def idle_rss_kb(python: str, servers: Path, app: str, pythonpath: str | None, timeout: float = 60.0) -> int:
    """VmRSS (KiB) of ``app`` (``module:attr`` in ``servers``) once its port accepts, never asked anything.

    Raises:
        RuntimeError: the server exited, or did not listen within ``timeout`` seconds.
    """
    port = free_port()
    env = dict(os.environ, BENCH_TOOLS="100", BENCH_SYNC_TOOLS="0", PYTHONUNBUFFERED="1", BENCH_SERVERS_DIR=str(servers))
    env.pop("PYTHONPATH", None)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    cmd = [
        python, "-m", "uvicorn", app, "--app-dir", str(servers),
        "--host", HOST, "--port", str(port), "--no-access-log", "--log-level", "warning",
        "--http", "httptools", "--loop", "uvloop", "--lifespan", "on",
    ]  # fmt: skip
    # cwd: the servers' folder (``python -m`` puts the cwd first on sys.path: run from a checkout, it
    # would shadow ``PYTHONPATH``)
    proc = subprocess.Popen(
        cmd, env=env, cwd=servers, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                tail = proc.stderr.read().decode()[-2000:] if proc.stderr else ""
                raise RuntimeError(f"{app} exited {proc.returncode}: {tail}")
            try:
                with socket.create_connection((HOST, port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{app} did not listen within {timeout}s") from None
                time.sleep(0.05)
        return vm_rss_kb(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--checkout", action="append", help="a fastapi_mcp_ctx checkout (repeatable; default: this one)")
    parser.add_argument("--starts", type=int, default=7)
    parser.add_argument("--servers", default=os.environ.get("BENCH_SERVERS_DIR"), help="the bench kit's servers/ folder (BENCH_SERVERS_DIR)")
    args = parser.parse_args()
    if not args.servers or not (Path(args.servers) / "project_ref.py").is_file():
        parser.error("--servers (or BENCH_SERVERS_DIR) must name the bench kit's servers/ folder, the one holding project_ref.py")
    servers_dir = Path(args.servers).resolve()
    checkouts: list[str] = args.checkout or [str(HERE.parent)]
    servers: list[tuple[str, str, str | None]] = [(f"project_ref @ {c}", "project_ref:app", c) for c in checkouts]
    servers.append(("ceiling_fastapi", "ceiling_fastapi:app", None))
    samples: dict[str, list[int]] = {name: [] for name, _, _ in servers}
    for _ in range(args.starts):
        for name, app, path in servers:
            samples[name].append(idle_rss_kb(args.python, servers_dir, app, path))
    ceiling = statistics.median(samples["ceiling_fastapi"])
    report = {
        name: {
            "median_mb": round(statistics.median(kb) / 1024, 2),
            "x_ceiling": round(statistics.median(kb) / ceiling, 4),
            "samples_kb": kb,
        }
        for name, kb in samples.items()
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
