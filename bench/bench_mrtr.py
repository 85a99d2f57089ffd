"""A 2026-07-28 elicitation round, fastapi-mcp-ctx beside the official SDK's ``MCPServer``, in one run.

    .venv/bin/python bench/bench_mrtr.py [--reps 5] [--duration 4] [--warmup 2] [--conc 32]

One round = the first ``tools/call export {"dataset": "sales"}`` (answered ``input_required``: an
``elicitation/create`` form asking for the format, and a sealed ``requestState``) + the retry
carrying ``inputResponses`` (accept, ``{"format": "csv"}``) and the echoed ``requestState``
(answered with the tool's result). Servers:

- ``project``: ``bench/servers/mrtr_project.py``, ``answer = await ctx.elicit(QUESTION, ExportFormat)``;
- ``sdk``: ``bench/servers/mrtr_sdk.py``, ``fmt: Annotated[ExportFormat, Resolve(ask_format)]`` where
  the resolver returns ``Elicit(QUESTION, ExportFormat)``.

Both seal their state with AES-GCM under a random key of the process (neither has a shared key set),
both stateless, JSON responses. Each is one uvicorn process (the harness's ``ServerProcess``:
loopback, one worker, httptools + uvloop) from the peers' venv (``bench/requirements.txt``), the
project imported from this checkout; servers pinned to the first core and wrk to the second when
there are two. Before any load, one round per server is checked in full; then ``bench/mrtr_round.lua``
makes wrk check every response (a first call must be ``input_required`` with a ``requestState``, a
retry must carry the tool's result). Repetitions alternate the servers' order; figures are medians,
the ratio is paired per repetition. Rounds/s counts completed rounds (two requests each). Bounded in
time (``--duration`` per run, a process timeout) and count (``--max-requests``), loopback only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.harness.environment import default_venv, ensure_venv, ensure_wrk  # noqa: E402
from bench.harness.servers import ServerProcess, ServerSpec, rss_kb  # noqa: E402
from bench.harness.wrk import invoke_wrk  # noqa: E402

LUA = Path(__file__).with_name("mrtr_round.lua")
MODERN = "2026-07-28"
SERVERS = {
    "project": ServerSpec("project", "fastapi-mcp-ctx", "bench.servers.mrtr_project:app", project=True),
    "sdk": ServerSpec("sdk", "official SDK (mcp) MCPServer", "bench.servers.mrtr_sdk:app"),
}
HEADERS = {
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": MODERN,
    "Mcp-Method": "tools/call",
    "Mcp-Name": "export",
}
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "bench-mrtr", "version": "1.0"},
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
}
FIRST = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "export", "arguments": {"dataset": "sales"}, "_meta": META},
}
ANSWER = {"action": "accept", "content": {"format": "csv"}}
EXPECT = '"status":"exported"'
RESULT = {"dataset": "sales", "format": "csv", "status": "exported"}


def log(message: str) -> None:
    print(message, flush=True)


def check_round(url: str) -> tuple[str, bool]:
    """One full round against ``url``: ("" when right, else what was wrong; whether the server
    refused the round's state echoed with other arguments)."""
    with httpx.Client(timeout=10) as client:
        first = client.post(url, json=FIRST, headers=HEADERS)
        result = first.json().get("result", {}) if first.status_code == 200 else {}
        if result.get("resultType") != "input_required" or not isinstance(result.get("requestState"), str):
            return f"first call: {first.status_code} {first.text[:300]}", False
        (key, entry), *more = result["inputRequests"].items()
        if more or entry["method"] != "elicitation/create" or entry["params"]["requestedSchema"]["required"] != ["format"]:
            return f"first call asked something else: {result['inputRequests']}", False
        retry = json.loads(json.dumps(FIRST))
        retry["params"] |= {"inputResponses": {key: ANSWER}, "requestState": result["requestState"]}
        second = client.post(url, json=retry, headers=HEADERS)
        final = second.json().get("result", {}) if second.status_code == 200 else {}
        if final.get("structuredContent") != RESULT or final.get("isError"):
            return f"retry: {second.status_code} {second.text[:300]}", False
        moved = json.loads(json.dumps(retry))
        moved["params"]["arguments"] = {"dataset": "payroll"}  # the state was minted for "sales"
        other = client.post(url, json=moved, headers=HEADERS)
        refused = other.status_code != 200 or "error" in other.json()
    return "", refused


def run_wrk(server: ServerProcess, conc: int, duration: float, max_requests: int, cpu: int | None, tmp: Path) -> dict[str, Any]:
    """Load ``server`` with rounds for ``duration`` seconds; the run's figures."""
    body, headers = tmp / "first.json", tmp / "headers.txt"
    body.write_text(json.dumps(FIRST, separators=(",", ":")))
    headers.write_text("".join(f"{k}: {v}\n" for k, v in HEADERS.items()))
    env = {**os.environ, "BENCH_BODY": str(body), "BENCH_HEADERS": str(headers), "BENCH_EXPECT": EXPECT,
           "BENCH_ANSWER": json.dumps(ANSWER, separators=(",", ":")), "BENCH_MAX": str(max_requests)}  # fmt: skip
    run = invoke_wrk(server.url, LUA, env, conc=conc, duration=duration, cpu=cpu, server_pid=server.pid)
    w, srv_s, secs = run.result, run.server_cpu_s, run.result["duration_us"] / 1e6
    return {
        "rounds_per_s": w["rounds"] / secs,
        "requests_per_s": w["requests"] / secs,
        "rounds": w["rounds"],
        "firsts": w["firsts"],
        "bad": w["bad"],
        "bad_sample": run.bad_sample[:300] if run.bad_sample else None,
        "socket_errors": w["socket_errors"],
        "timeouts": w["timeouts"],
        "p50_ms": w["p50_us"] / 1000,
        "p99_ms": w["p99_us"] / 1000,
        "cpu_us_per_round": srv_s * 1e6 / w["rounds"] if w["rounds"] else None,
        "wrk_cpu_s": run.wrk_cpu_s,
        "others_cores": max(run.busy_s - srv_s - run.wrk_cpu_s, 0.0) / run.wall_s,
        "wall_s": run.wall_s,
        "rss_kb": rss_kb(server.pid),
    }


def summarize(runs: list[dict[str, Any]], reps: int) -> dict[str, Any]:
    """Medians per server, and the project/SDK ratio paired per repetition."""
    out: dict[str, Any] = {}
    for name in SERVERS:
        mine = [r for r in runs if r["server"] == name]
        if mine:
            out[name] = {k: statistics.median(r[k] for r in mine if r[k] is not None)
                         for k in ("rounds_per_s", "requests_per_s", "p50_ms", "p99_ms", "cpu_us_per_round", "others_cores")}  # fmt: skip
            out[name]["bad"] = sum(r["bad"] + r["socket_errors"] for r in mine)
    pairs = []
    for rep in range(reps):
        by = {r["server"]: r for r in runs if r["rep"] == rep}
        if {"project", "sdk"} <= set(by) and by["sdk"]["rounds_per_s"]:
            pairs.append((by["project"]["rounds_per_s"] / by["sdk"]["rounds_per_s"],
                          by["sdk"]["cpu_us_per_round"] / by["project"]["cpu_us_per_round"]))  # fmt: skip
    if pairs:
        out["ratio_rounds"] = statistics.median(p[0] for p in pairs)
        out["ratio_cpu"] = statistics.median(p[1] for p in pairs)
        out["ratio_rounds_range"] = (min(p[0] for p in pairs), max(p[0] for p in pairs))
    return out


def table(summary: dict[str, Any], conc: int) -> str:
    rows = [
        "| server | rounds/s | requests/s | p50 / p99 ms (per request) | server CPU µs per round | bad |",
        "|---|---|---|---|---|---|",
    ]
    for name, spec in SERVERS.items():
        s = summary.get(name)
        if s:
            rows.append(f"| {spec.title} | {s['rounds_per_s']:,.0f} | {s['requests_per_s']:,.0f} | {s['p50_ms']:.1f} / {s['p99_ms']:.1f} "
                        f"| {s['cpu_us_per_round']:,.0f} | {s['bad']} |")  # fmt: skip
    if "ratio_rounds" in summary:
        low, high = summary["ratio_rounds_range"]
        rows.append(f"\nc={conc}: project / SDK rounds per second **{summary['ratio_rounds']:.2f}×** (paired per repetition, "
                    f"range {low:.2f}–{high:.2f}); SDK / project CPU per round {summary['ratio_cpu']:.2f}×; other processes used "
                    f"{statistics.median(s['others_cores'] for n, s in summary.items() if n in SERVERS):.2f} cores (median)")  # fmt: skip
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--duration", type=float, default=4.0, help="seconds per measured run")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of warm-up per server")
    parser.add_argument("--conc", type=int, default=32, help="wrk connections")
    parser.add_argument("--max-requests", type=int, default=1_000_000)
    parser.add_argument("--venv", type=Path, default=default_venv(), help="the peers' venv (bench/requirements.txt)")
    parser.add_argument("--project-python", help="run the project with this interpreter instead of the venv's")
    parser.add_argument("--no-pin", action="store_true")
    parser.add_argument("--json", type=Path, help="write every run and the summary here")
    args = parser.parse_args(argv)
    ensure_wrk()
    venv_python = ensure_venv(args.venv)
    affinity = sorted(os.sched_getaffinity(0))
    cpus: tuple[int | None, int | None] = (affinity[0], affinity[1]) if len(affinity) >= 2 and not args.no_pin else (None, None)
    procs: dict[str, ServerProcess] = {}
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="fastapi-mcp-ctx-mrtr-") as tmp_name:
        tmp = Path(tmp_name)
        try:
            for name, spec in SERVERS.items():
                python = args.project_python if spec.project and args.project_python else venv_python
                procs[name] = ServerProcess(spec, python, {}, ["mrtr"], tmp)
                procs[name].spawn({}, cpus[0])
            for name, proc in procs.items():
                log(f"started {proc.label} ({proc.spec.app}) on {proc.url} in {proc.wait_listening():.1f} s")
                why, binds = check_round(proc.url)
                if why:
                    raise SystemExit(f"{name} failed the round check: {why}")
                log(f"  {name}: one round checked; a state echoed with other arguments is {'refused' if binds else 'ACCEPTED'}")
            for proc in procs.values():
                if args.warmup > 0:
                    run_wrk(proc, args.conc, args.warmup, args.max_requests, cpus[1], tmp)
            names = list(SERVERS)
            for rep in range(args.reps):
                for i in range(len(names)):
                    name = names[(rep + i) % len(names)]
                    r = run_wrk(procs[name], args.conc, args.duration, args.max_requests, cpus[1], tmp) | {
                        "server": name,
                        "rep": rep,
                    }
                    runs.append(r)
                    log(f"rep {rep} {name:8s} {r['rounds_per_s']:8,.0f} rounds/s  p50 {r['p50_ms']:6.1f} ms  p99 {r['p99_ms']:7.1f} ms  "
                        f"cpu {r['cpu_us_per_round'] or 0:6.0f} µs/round  others {r['others_cores']:.2f} cores" + (f"  BAD {r['bad']}: {r['bad_sample']}" if r["bad"] else ""))  # fmt: skip
        finally:
            for proc in procs.values():
                proc.stop()
    summary = summarize(runs, args.reps)
    print("\n" + table(summary, args.conc))
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "summary": summary}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
