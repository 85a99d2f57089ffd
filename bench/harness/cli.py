"""``python -m bench.harness``: fastapi-mcp-ctx, the official SDK, FastMCP and a bare FastAPI ceiling, same run.

Starts every server in its own uvicorn process (pinned to one core; wrk to the other, when there
are two), checks each workload once in full, warms up, then measures with wrk, the servers
interleaved and their order rotated every repetition, so that drift on a shared machine hits
them alike. Prints medians and the paired ratios to the ceiling, writes every run to
``bench/results/<date-time>-<name>.json`` (+ ``.md``). Every load is bounded in time and count,
on 127.0.0.1 only. See ``bench/README.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import report
from .environment import default_venv, ensure_venv, ensure_wrk, versions
from .preflight import Preflight, preflight
from .servers import ROOT, SERVERS, ServerProcess, plan
from .workloads import DEFAULT_WORKLOADS, WORKLOADS
from .wrk import run_wrk

CEILING = "fastapi"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.harness", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-w", "--workload", action="append", choices=list(WORKLOADS), help=f"repeatable; default {' '.join(DEFAULT_WORKLOADS)}")
    ap.add_argument("--all", action="store_true", help="every workload: " + " ".join(WORKLOADS))
    ap.add_argument("-s", "--server", action="append", choices=list(SERVERS), help="repeatable; default all but the opt-in project-redis and project-otel (the ceiling is always added)")
    ap.add_argument("--no-ceiling", action="store_true", help="do not add the bare-FastAPI ceiling (no ratios)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions; figures are medians (default 3)")
    ap.add_argument("--duration", type=int, default=3, help="seconds per measured run (default 3)")
    ap.add_argument("--warmup", type=int, default=1, help="seconds of warm-up per server and workload (default 1; 0: none)")
    ap.add_argument("-c", "--conc", type=int, action="append", help="wrk connections, repeatable (default 32)")
    ap.add_argument("--tools", type=int, default=100, help="tools registered: add + fillers (default 100)")
    ap.add_argument("--max-requests", type=int, default=1_000_000, help="responses per run at most (count bound)")
    ap.add_argument("--max-minutes", type=float, default=30.0, help="stop scheduling runs after this long")
    ap.add_argument("--no-pin", action="store_true", help="do not pin servers and wrk to separate cores")
    ap.add_argument("--venv", type=Path, default=default_venv(), help="the peers' venv (default %(default)s)")
    ap.add_argument("--project-python", help="run the project with this interpreter (default: the peers' venv)")
    ap.add_argument("--python", help="run every server with this interpreter, no venv (it must import what they import)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results", help="results directory")
    ap.add_argument("--name", help="results file name part (default: the server names)")
    ap.add_argument("--report", type=Path, metavar="JSON", help="print the tables of a results file and exit")
    return ap.parse_args(argv)


def git_commit() -> str:
    done = subprocess.run(["git", "describe", "--always", "--dirty", "--exclude", "*"], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), platform.machine())
    except OSError:
        return platform.machine()


def tables(result: dict[str, Any]) -> str:
    meta = result["meta"]
    titles = {name: SERVERS[name].title if name in SERVERS else name for name in meta["servers"]}
    out = [
        "req/s (× ceiling, paired per repetition) · p99 ms; medians of "
        f"{meta['reps']} × {meta['duration_s']} s, {meta['tools']} tools:",
        "",
        report.matrix_table(result["summary"], meta["servers"], titles),
        "",
        report.detail_table(result["summary"], titles),
        "",
        "Workloads: " + "; ".join(f"{w} = {WORKLOADS[w].title}" for w in meta["workloads"]),
    ]
    skipped = [f"{label} {wl}: {pf['why']}" for label, info in result["processes"].items()
               for wl, pf in info["preflight"].items() if not pf["ok"]]  # fmt: skip
    if skipped:
        out += ["", "Skipped (failed the preflight check): " + "; ".join(skipped)]
    counted = [f"{label} {c['opened']}/{c['closed']}" for label, info in result["processes"].items() if (c := info.get("db_counters"))]
    if counted:
        out += ["", "get_db (yield dependency) opened/closed: " + "; ".join(counted)]
    out += ["", report.noise_line(result["runs"])]
    return "\n".join(out)


def measure(args: argparse.Namespace, procs: list[ServerProcess], specs: list[str], wl_ids: list[str], result: dict[str, Any],
            cpus: tuple[int | None, int | None], tmp: Path) -> None:  # fmt: skip
    """Preflight, warm-up, then the interleaved repetitions; appends to ``result["runs"]``."""
    checks: dict[tuple[str, str], Preflight] = {}
    for p in procs:
        for wl in p.workloads:
            checks[(p.spec.name, wl)] = pf = preflight(p, WORKLOADS[wl], args.tools)
            log(f"  preflight {p.label:16s} {wl:2s} {'ok' if pf.ok else 'SKIP'} {pf.response_bytes:6d} B {pf.content_type} "
                + ("" if pf.ok else pf.why[:160]))  # fmt: skip
            result["processes"][p.label]["preflight"][wl] = {
                "ok": pf.ok, "why": pf.why, "content_type": pf.content_type, "bytes": pf.response_bytes,
                "expect": [pf.expect.substring, pf.expect.repeated, pf.expect.count],
            }  # fmt: skip
    proc_of = {(p.spec.name, wl): p for p in procs for wl in p.workloads}
    concs = args.conc or [32]
    cells = [(wl, s) for wl in wl_ids for s in specs if checks[(s, wl)].ok]
    n_runs = len(cells) * len(concs) * args.reps
    log(f"{n_runs} measured runs of {args.duration} s: about {(n_runs * (args.duration + 0.3) + len(cells) * (args.warmup + 0.3)) / 60:.1f} min")
    load_cpu = cpus[1]
    for wl, s in cells:
        if args.warmup > 0:
            w = run_wrk(proc_of[(s, wl)], WORKLOADS[wl], checks[(s, wl)].expect, conc=max(concs), duration=args.warmup,
                        max_requests=args.max_requests, cpu=load_cpu, extra_headers=checks[(s, wl)].headers, tmp=tmp)  # fmt: skip
            if w["bad"] or not w["ok"]:
                log(f"  WARNING warm-up {s} {wl}: {w['bad']} bad responses, e.g. {w['bad_sample']}")
    deadline = time.monotonic() + args.max_minutes * 60
    for rep in range(args.reps):
        for wl in wl_ids:
            for conc in concs:
                for i in range(len(specs)):
                    s = specs[(rep + i) % len(specs)]  # rotated: rep r starts with server r
                    if not checks[(s, wl)].ok:
                        continue
                    if time.monotonic() + args.duration > deadline:
                        result["meta"]["truncated"] = True
                        log("time budget reached: stopping early")
                        return
                    proc = proc_of[(s, wl)]
                    if not proc.alive():
                        raise RuntimeError(f"{proc.label} died:\n{proc.tail()}")
                    r = run_wrk(proc, WORKLOADS[wl], checks[(s, wl)].expect, conc=conc, duration=args.duration,
                                max_requests=args.max_requests, cpu=load_cpu, extra_headers=checks[(s, wl)].headers, tmp=tmp)  # fmt: skip
                    r.update(server=s, process=proc.label, workload=wl, conc=conc, rep=rep)
                    result["runs"].append(r)
                    log(f"rep {rep} {wl:2s} c={conc:<3d} {proc.label:16s} {r['rps']:8,.0f} req/s  p50 {r['p50_us'] / 1000:6.2f} ms  "
                        f"p99 {r['p99_us'] / 1000:6.2f} ms  cpu {r['cpu_us_per_req'] or 0:5.0f} µs/req  others {r['others_cores']:.2f}"
                        + (f"  BAD {r['bad']}: {r['bad_sample']}" if r["bad"] else ""))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report:
        res = json.loads(args.report.read_text())
        res["summary"] = report.summarize(res["runs"], res["meta"]["ceiling"])
        print(tables(res))
        return 0
    wl_ids = list(WORKLOADS) if args.all else list(dict.fromkeys(args.workload or DEFAULT_WORKLOADS))
    specs = list(dict.fromkeys(args.server or [name for name, spec in SERVERS.items() if not spec.opt_in]))
    if not args.no_ceiling and CEILING not in specs:
        specs.append(CEILING)
    ensure_wrk()
    needs_venv = not args.python and (any(not SERVERS[s].project for s in specs) or not args.project_python)
    venv_python = ensure_venv(args.venv) if needs_venv else args.python
    project_python = args.project_python or venv_python
    assert project_python is not None
    affinity = sorted(os.sched_getaffinity(0))
    pinned = len(affinity) >= 2 and not args.no_pin
    cpus: tuple[int | None, int | None] = (affinity[0], affinity[1]) if pinned else (None, None)
    started = dt.datetime.now()
    tmp = Path(tempfile.mkdtemp(prefix="fastapi-mcp-ctx-bench-"))
    base_env = {"BENCH_TOOLS": str(args.tools)}
    pythons = {s: project_python if SERVERS[s].project else str(venv_python) for s in specs}
    if CEILING in specs:  # the ceiling serves the project's tools/list as static data
        fixture = tmp / "tools_list.json"
        env = {**os.environ, **base_env, "PYTHONPATH": str(ROOT)}
        subprocess.run([pythons[CEILING], "-m", "bench.harness.capture", str(fixture)], cwd=ROOT, env=env, check=True)
        base_env["BENCH_TOOLS_LIST"] = str(fixture)
    result: dict[str, Any] = {
        "meta": {
            "started": started.isoformat(timespec="seconds"), "commit": git_commit(), "servers": specs, "workloads": wl_ids,
            "ceiling": None if args.no_ceiling else CEILING, "reps": args.reps, "duration_s": args.duration,
            "warmup_s": args.warmup, "concurrency": args.conc or [32], "tools": args.tools, "truncated": False,
            "pinning": f"servers on CPU {cpus[0]}, wrk on CPU {cpus[1]}" if pinned else "none",
            "host": {"cpus": len(affinity), "cpu_model": cpu_model(), "kernel": platform.release(),
                     "loadavg_at_start": os.getloadavg()},
            "versions": {s: versions(py) for s, py in pythons.items()},
            "wrk": subprocess.run(["wrk", "--version"], capture_output=True, text=True).stdout.split("\n")[0].strip(),
        },
        "processes": {},
        "runs": [],
    }  # fmt: skip
    procs: list[ServerProcess] = []
    t0 = time.monotonic()
    try:
        for spec, env, wls in plan([SERVERS[s] for s in specs], wl_ids):
            p = ServerProcess(spec, pythons[spec.name], env, wls, tmp)
            procs.append(p)
            result["processes"][p.label] = {"app": spec.app, "python": p.python, "env": env, "workloads": wls, "preflight": {}}
            p.spawn(base_env, cpus[0])
        for p in procs:
            result["processes"][p.label]["startup_s"] = secs = round(p.wait_listening(), 2)
            log(f"started {p.label} ({p.spec.app}) on {p.url} in {secs:.1f} s")
        measure(args, procs, specs, wl_ids, result, cpus, tmp)
    finally:
        for p in procs:
            p.stop()
            result["processes"][p.label].update(db_counters=p.counters(), log_tail=p.tail(1500))
        shutil.rmtree(tmp, ignore_errors=True)
    result["meta"]["wall_s"] = round(time.monotonic() - t0, 1)
    result["summary"] = report.summarize(result["runs"], result["meta"]["ceiling"])
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{started:%Y-%m-%d-%H%M%S}-{args.name or '-'.join(specs)}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    text = tables(result)
    path.with_suffix(".md").write_text(f"# bench {result['meta']['started']} ({result['meta']['commit']})\n\n{text}\n")
    print("\n" + text + f"\n\nwall {result['meta']['wall_s']} s; results: {path} (+ .md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
