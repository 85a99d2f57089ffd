"""``tasks/get`` of a completed task beside ``tools/call add``, in one run, memory and Redis task stores.

    .venv/bin/python bench/bench_tasks.py [--reps 3] [--duration 4] [--conc 32] [--redis redis://127.0.0.1:56379/0]

Before any load, one ``tools/call report`` per era and store opts in to tasks and creates a task,
polled with ``tasks/get`` until ``completed``. Then wrk replays, each response checked:

- ``a``  ``tools/call add {"a":2,"b":3}``, 2025-11-25 (the harness's workload a);
- ``tg`` ``tasks/get`` of that completed task, 2025-11-25 (``MCP-Protocol-Version`` header, no session);
- ``b``  ``tools/call add``, 2026-07-28 ``_meta`` envelope and headers (the harness's workload b);
- ``tgm`` ``tasks/get`` of the 2026 task with its ``_meta`` envelope (tasks extension declared),
  ``Mcp-Method: tasks/get`` and ``Mcp-Name: <taskId>``.

Servers (``bench/servers/tasks_project.py``, one uvicorn process each, loopback, httptools +
uvloop from the peers' venv, the project imported from this checkout): ``memory`` (the default
store) and, with ``--redis URL``, ``redis`` (``MCP_SESSION_STORE_URL=URL``: records in Redis; the harness's Redis-session settings).
The figure kept is ``tasks/get`` ÷ ``tools/call`` requests per second of the same era and server,
paired per repetition (aim: ≥ 0.9, issue 20). Bounded in time (``--duration`` per run) and count
(``--max-requests``), loopback only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.harness.environment import default_venv, ensure_venv, ensure_wrk  # noqa: E402
from bench.harness.servers import REDIS_SESSIONS, ServerProcess, ServerSpec  # noqa: E402
from bench.harness.workloads import ACCEPT, LEGACY, MODERN, PV_KEY, Workload  # noqa: E402
from bench.harness.wrk import Expect, run_wrk  # noqa: E402

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
SPEC = ServerSpec("project", "fastapi-mcp-ctx", "bench.servers.tasks_project:app", project=True)
META = {PV_KEY: MODERN, "io.modelcontextprotocol/clientInfo": {"name": "bench-tasks", "version": "1.0"},
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}  # fmt: skip
LEGACY_HEADERS = {"Accept": ACCEPT, "MCP-Protocol-Version": LEGACY}
ADD = {"name": "add", "arguments": {"a": 2, "b": 3}}
PAIRS = (("tg", "a"), ("tgm", "b"))


def log(message: str) -> None:
    print(message, flush=True)


def rpc(method: str, params: dict[str, Any], *, modern: bool, name: str | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """A JSON-RPC request (id 1) and its headers, in the 2025 or the 2026 era's shape."""
    if not modern:
        return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, dict(LEGACY_HEADERS)
    headers = {"Accept": ACCEPT, "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if name is not None:
        headers["Mcp-Name"] = name
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}, headers


def completed_task(url: str, *, modern: bool) -> str:
    """Create a ``report`` task in the era's shape and poll it to ``completed``; its id.

    Raises:
        SystemExit: the server did not create a task or it did not complete within 30 s.
    """
    if modern:
        body, headers = rpc("tools/call", {"name": "report", "arguments": {"title": "q4"}}, modern=True, name="report")
    else:
        body, headers = rpc("tools/call", {"name": "report", "arguments": {"title": "q4"}, "task": {"ttl": 3_600_000}}, modern=False)
    with httpx.Client(timeout=10) as client:
        created = client.post(url, json=body, headers=headers).json().get("result", {})
        task_id = created.get("taskId") or created.get("task", {}).get("taskId")
        if not isinstance(task_id, str):
            raise SystemExit(f"no task created ({'2026' if modern else '2025'}): {created}")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            get, get_headers = rpc("tasks/get", {"taskId": task_id}, modern=modern, name=task_id)
            status = client.post(url, json=get, headers=get_headers).json().get("result", {}).get("status")
            if status == "completed":
                return task_id
            time.sleep(0.05)
    raise SystemExit(f"task {task_id} did not complete within 30 s")


def workloads(url: str) -> dict[str, tuple[Workload, Expect]]:
    legacy_task, modern_task = completed_task(url, modern=False), completed_task(url, modern=True)
    out: dict[str, tuple[Workload, Expect]] = {}
    a = rpc("tools/call", ADD, modern=False)
    b = rpc("tools/call", ADD, modern=True, name="add")
    tg = rpc("tasks/get", {"taskId": legacy_task}, modern=False)
    tgm = rpc("tasks/get", {"taskId": modern_task}, modern=True, name=modern_task)
    out["a"] = (Workload("a", "tools/call add, 2025-11-25", *a), Expect('"text":"5"'))
    out["b"] = (Workload("b", "tools/call add, 2026-07-28", *b), Expect('"text":"5"'))
    out["tg"] = (Workload("tg", "tasks/get of a completed task, 2025-11-25", *tg), Expect('"status":"completed"'))
    out["tgm"] = (Workload("tgm", "tasks/get of a completed task, 2026-07-28", *tgm), Expect('"status":"completed"'))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--duration", type=float, default=4.0, help="seconds per measured run")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds of warm-up per workload")
    parser.add_argument("--conc", type=int, default=32, help="wrk connections")
    parser.add_argument("--max-requests", type=int, default=1_000_000)
    parser.add_argument("--redis", help="also run with MCP_SESSION_STORE_URL set to this Redis URL")
    parser.add_argument("--venv", type=Path, default=default_venv(), help="the peers' venv (bench/requirements.txt)")
    parser.add_argument("--project-python", help="run the project with this interpreter instead of the venv's")
    parser.add_argument("--no-pin", action="store_true")
    parser.add_argument("--json", type=Path, help="write every run and the summary here")
    args = parser.parse_args(argv)
    ensure_wrk()
    python = args.project_python or ensure_venv(args.venv)
    affinity = sorted(os.sched_getaffinity(0))
    cpus: tuple[int | None, int | None] = (affinity[0], affinity[1]) if len(affinity) >= 2 and not args.no_pin else (None, None)
    redis = {**REDIS_SESSIONS, "MCP_SESSION_STORE_URL": args.redis} if args.redis else None
    stores: dict[str, dict[str, str]] = {"memory": {}} | ({"redis": redis} if redis else {})
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="fastapi-mcp-ctx-tasks-") as tmp_name:
        tmp = Path(tmp_name)
        for store, env in stores.items():
            proc = ServerProcess(SPEC, python, env, [store], tmp)
            proc.spawn({}, cpus[0])
            try:
                log(f"started {store} store on {proc.url} in {proc.wait_listening():.1f} s")
                loads = workloads(proc.url)
                for wl, expect in loads.values():
                    run_wrk(proc, wl, expect, conc=args.conc, duration=args.warmup, max_requests=args.max_requests,
                            cpu=cpus[1], extra_headers={}, tmp=tmp)  # fmt: skip
                names = list(loads)
                for rep in range(args.reps):
                    for i in range(len(names)):
                        name = names[(rep + i) % len(names)]
                        wl, expect = loads[name]
                        r = run_wrk(proc, wl, expect, conc=args.conc, duration=args.duration, max_requests=args.max_requests,
                                    cpu=cpus[1], extra_headers={}, tmp=tmp) | {"store": store, "workload": name, "rep": rep}  # fmt: skip
                        runs.append(r)
                        log(f"{store:6s} rep {rep} {name:4s} {r['rps']:8,.0f} req/s  p50 {r['p50_us'] / 1000:5.2f} ms  "
                            f"p99 {r['p99_us'] / 1000:6.2f} ms  cpu {r['cpu_us_per_req'] or 0:5.0f} µs/req  "
                            f"others {r['others_cores']:.2f} cores" + (f"  BAD {r['bad']}: {r['bad_sample']}" if r["bad"] else ""))  # fmt: skip
            finally:
                proc.stop()
    summary = summarize(runs, list(stores), args.reps)
    print("\n" + table(summary, args.conc))
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "summary": summary}, indent=1) + "\n")
    return 0 if all(s["bad"] == 0 for s in summary["workloads"].values()) else 1


def summarize(runs: list[dict[str, Any]], stores: list[str], reps: int) -> dict[str, Any]:
    """Medians per (store, workload), and tasks/get ÷ tools/call paired per repetition."""
    workloads_out: dict[str, Any] = {}
    ratios: dict[str, Any] = {}
    for store in stores:
        for name in ("a", "tg", "b", "tgm"):
            mine = [r for r in runs if r["store"] == store and r["workload"] == name]
            if mine:
                workloads_out[f"{store}/{name}"] = {
                    "rps": statistics.median(r["rps"] for r in mine),
                    "p50_ms": statistics.median(r["p50_us"] for r in mine) / 1000,
                    "p99_ms": statistics.median(r["p99_us"] for r in mine) / 1000,
                    "cpu_us_per_req": statistics.median(r["cpu_us_per_req"] for r in mine if r["cpu_us_per_req"]),
                    "others_cores": statistics.median(r["others_cores"] for r in mine),
                    "bad": sum(r["bad"] + r["socket_errors"] for r in mine),
                }
        for get, call in PAIRS:
            pairs = []
            for rep in range(reps):
                by = {r["workload"]: r for r in runs if r["store"] == store and r["rep"] == rep}
                if get in by and call in by and by[call]["rps"]:
                    pairs.append(by[get]["rps"] / by[call]["rps"])
            if pairs:
                ratios[f"{store}/{get}÷{call}"] = {"median": statistics.median(pairs), "range": (min(pairs), max(pairs))}
    return {"workloads": workloads_out, "ratios": ratios}


def table(summary: dict[str, Any], conc: int) -> str:
    rows = [f"c={conc}", "", "| store / workload | req/s | p50 / p99 ms | server CPU µs/req | bad |", "|---|---|---|---|---|"]
    for key, s in summary["workloads"].items():
        rows.append(f"| {key} | {s['rps']:,.0f} | {s['p50_ms']:.2f} / {s['p99_ms']:.2f} | {s['cpu_us_per_req']:,.0f} | {s['bad']} |")
    rows += ["", "| ratio (paired per repetition) | median | range |", "|---|---|---|"]
    for key, r in summary["ratios"].items():
        rows.append(f"| {key} | **{r['median']:.2f}×** | {r['range'][0]:.2f}–{r['range'][1]:.2f} |")
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
