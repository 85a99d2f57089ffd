"""Summarize a py-spy ``--format raw`` profile of a server under load: CPU µs per request, by part.

    .venv/bin/python bench/pyspy_summary.py bench/results/pyspy-examples.bench_app-d.raw --wrk wrk.json --rate 400

A sample in a worker thread (or handing work to one) is "thread pool"; any other goes to the part
of its deepest frame that a rule below matches (rules in order), "other" when none does. With ``--wrk`` (bench/harness/check.lua's BENCH_RESULT: requests, latency)
and ``--rate`` (samples per second) the shares become µs per request: samples / rate / requests.
py-spy counts only threads that are running, so a worker waiting for the GIL or for its pool
shows as missing samples, i.e. idle time at full load.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter

PARTS: list[tuple[str, str]] = [
    ("thread pool: worker threads and hand-offs", r"threading\.py|to_thread|run_sync_in_worker_thread|WorkerThread|concurrent/futures"),
    ("FastAPI solve_dependencies (get_db entered, Header read)", r"dependencies/utils\.py:(solve_dependencies|_solve_generator|request_params_to_args)"),
    ("yield teardown: exit stacks", r"contextlib\.py:(AsyncExitStack\.__aexit__|_AsyncGeneratorContextManager\.__aexit__)"),
    ("anyio CancelScope enter/exit", r"anyio/"),
    ("fastapi_mcp_ctx: result shaping, output validation", r"fastapi_mcp_ctx/_handlers/results\.py"),
    ("fastapi_mcp_ctx: dispatch, run_tool, Context", r"fastapi_mcp_ctx/(_server/dispatch|_server/tool_calls|_server/call_prep|_handlers/resolve|context|_context/\w+|_fastapi_compat)\.py"),
    ("fastapi_mcp_ctx: CallResponse, send", r"fastapi_mcp_ctx/_transport/streams\.py"),
    ("fastapi_mcp_ctx: front door, JSON-RPC, envelope", r"fastapi_mcp_ctx/"),
    ("ceiling endpoint: json.loads/dumps, Response", r"ceiling_core\.py|ceiling_fastapi\.py|json/"),
    ("FastAPI routing (include_router), request handler", r"fastapi/routing\.py"),
    ("Starlette/FastAPI middleware, Request, Response", r"starlette/|fastapi/"),
    ("uvicorn + httptools + event loop", r"uvicorn/|asyncio/|uvloop|runpy|click/"),
]
_THREADS = PARTS[0]
_REST = "other"


def _where(frame: str) -> str:
    match = re.match(r"(.*) \((.*?):\d+\)$", frame)
    return f"{match.group(2)}:{match.group(1)}" if match else frame


def _part(frames: list[str]) -> str:
    if any(re.search(_THREADS[1], f) for f in frames):
        return _THREADS[0]
    for frame in reversed(frames):
        for name, rule in PARTS[1:]:
            if re.search(rule, frame):
                return name
    return _REST


def summarize(path: str) -> tuple[Counter[str], int]:
    parts: Counter[str] = Counter()
    total = 0
    with open(path) as lines:
        for line in lines:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack:
                continue
            frames = [_where(f) for f in stack.split(";")]
            n = int(count)
            total += n
            parts[_part(frames)] += n
    return parts, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("raw")
    parser.add_argument("--wrk", help="check.lua's BENCH_RESULT line, as a file")
    parser.add_argument("--rate", type=float, default=400.0, help="py-spy samples per second")
    args = parser.parse_args()
    parts, total = summarize(args.raw)
    requests = 0
    if args.wrk:
        with open(args.wrk) as f:
            run = json.load(f)
        requests = run["requests"]
        seconds = run["duration_us"] / 1e6
        print(f"{requests / seconds:,.0f} req/s, p50 {run['p50_us'] / 1000:.2f} ms, p99 {run['p99_us'] / 1000:.2f} ms, "
              f"{total} samples = {total / args.rate:.1f} s of CPU in {seconds:.1f} s")
    print("| part | share | µs per request |" if requests else "| part | share |")
    print("|---|---|---|" if requests else "|---|---|")
    for name, n in parts.most_common():
        cells = f"{100 * n / total:.1f}%"
        if requests:
            cells += f" | {n / args.rate / requests * 1e6:.1f}"
        print(f"| {name} | {cells} |")
    if requests:
        print(f"| **all** | 100% | **{total / args.rate / requests * 1e6:.1f}** |")


if __name__ == "__main__":
    main()
