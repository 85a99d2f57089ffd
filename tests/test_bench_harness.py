"""The benchmark runner (``bench.harness``): its response checks, the paired ratios and tables, the
ceiling's bytes against the project's, and a short real run (uvicorn + wrk) of the project and the
ceiling, bounded in time and count. The real run needs ``wrk`` (``apt-get install wrk``; ``make bench``
installs it when run as root) and is skipped without it."""

from __future__ import annotations

import importlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.harness import cli, report
from bench.harness.capture import asgi_post, capture
from bench.harness.servers import SERVERS, plan
from bench.harness.workloads import COUNTDOWN_N, WORKLOADS, check_response, expectation

ADD_2025 = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"5"}],"structuredContent":{"result":5},"isError":false}}'
ADD_SPACED = b'{"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "5"}], "isError": false}}'
LOOKUP = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{}"}],"structuredContent":{"value":"v1","tenant":"acme"},"isError":false}}'
JSON = "application/json"
SSE = "text/event-stream"


def sse(*messages: dict[str, Any], sep: str = "\r\n") -> bytes:
    return "".join(f"event: message{sep}data: {json.dumps(m)}{sep}{sep}" for m in messages).encode()


def progress(i: int, token: str = "t1") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": i, "total": COUNTDOWN_N}}


DONE = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": '{"done": 10}'}], "structuredContent": {"done": 10}}}
COUNTDOWN = sse(*(progress(i) for i in range(1, COUNTDOWN_N + 1)), DONE)


def tools_list(n: int) -> bytes:
    tools = [{"name": "add"}] + [{"name": f"tool_{i:03d}"} for i in range(n - 1)]
    return json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": tools}}).encode()


# -- response checks ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wl", "status", "ctype", "raw", "ok", "why"),
    [
        ("a", 200, JSON, ADD_2025, True, "ok"),
        ("a", 200, JSON, ADD_SPACED, True, "ok"),  # the text block alone
        ("a", 400, JSON, ADD_2025, False, "HTTP 400"),
        ("a", 200, JSON, ADD_2025.replace(b":5}", b":6}").replace(b'"5"', b'"6"'), False, "wrong result"),
        ("a", 200, JSON, ADD_2025.replace(b'"isError":false', b'"isError":true'), False, "tool error"),
        ("a", 200, JSON, ADD_2025.replace(b'"id":1', b'"id":2'), False, "no result for id 1"),
        ("a", 200, JSON, b'{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"x"}}', False, "no result"),
        ("a", 200, SSE, sse(json.loads(ADD_2025)), False, "not a JSON body"),
        ("c", 200, JSON, tools_list(100), True, "ok"),
        ("c", 200, JSON, tools_list(99), False, "gave 99 tools, expected 100"),
        ("d", 200, JSON, LOOKUP, True, "ok"),
        ("d", 200, JSON, LOOKUP.replace(b'"acme"', b'""'), False, "wrong result"),
        ("p", 200, SSE, COUNTDOWN, True, "ok"),
        ("p", 200, SSE, COUNTDOWN.replace(b"\r\n", b"\n"), True, "ok"),  # LF framing
        ("p", 200, JSON, json.dumps(DONE).encode(), False, "not SSE"),  # progress dropped
        ("p", 200, SSE, sse(*(progress(i) for i in range(1, COUNTDOWN_N)), DONE), False, "9 progress events"),
        ("p", 200, SSE, sse(*(progress(i, "t2") for i in range(1, COUNTDOWN_N + 1)), DONE), False, "10 progress events, expected"),
        ("p", 200, SSE, sse(*(progress(i) for i in range(1, COUNTDOWN_N + 1))), False, "not the call's result"),
    ],
)
def test_check_response(wl: str, status: int, ctype: str, raw: bytes, ok: bool, why: str) -> None:
    got_ok, got_why = check_response(WORKLOADS[wl], status, ctype, raw, 100)
    assert got_ok is ok
    assert why in got_why


def test_expectation_follows_the_response_spelling() -> None:
    assert expectation(WORKLOADS["a"], ADD_2025, 100) == ('"text":"5"', "", 0)
    assert expectation(WORKLOADS["a"], ADD_SPACED, 100) == ('"text": "5"', "", 0)
    assert expectation(WORKLOADS["c"], tools_list(100), 100) == ('"name": "tool_098"', "", 0)
    assert expectation(WORKLOADS["d"], LOOKUP, 100) == ('{"value":"v1","tenant":"acme"}', "", 0)
    assert expectation(WORKLOADS["p"], COUNTDOWN, 100) == ('{"done": 10}', '"progressToken": "t1"', COUNTDOWN_N)
    assert expectation(WORKLOADS["a"], b'{"result":"five"}', 100) == ("", "", 0)


# -- medians, paired ratios, tables -------------------------------------------------------


def run(server: str, rep: int, rps: float, wl: str = "a", bad: int = 0) -> dict[str, Any]:
    return {"server": server, "workload": wl, "conc": 32, "rep": rep, "rps": rps, "p50_us": rps / 10, "p99_us": rps,
            "cpu_us_per_req": 100.0, "bad": bad, "socket_errors": 0, "timeouts": 0, "others_cores": 0.5}  # fmt: skip


def test_ratios_are_paired_per_repetition() -> None:
    # The machine slows down in rep 2: every server halves. Paired ratios stay 0.5; the ratio of the
    # medians would not (project median 400 / ceiling median 1000 = 0.4).
    runs = [run("project", 0, 500), run("fastapi", 0, 1000), run("project", 1, 400), run("fastapi", 1, 800),
            run("project", 2, 250), run("fastapi", 2, 500), run("sdk", 0, 100, bad=3)]  # fmt: skip
    rows = {r["server"]: r for r in report.summarize(runs, "fastapi")}
    assert rows["project"]["ratio"] == pytest.approx(0.5)
    assert rows["project"]["rps"] == 400
    assert (rows["project"]["rps_min"], rows["project"]["rps_max"]) == (250, 500)
    assert rows["project"]["p99_us"] == 400
    assert rows["fastapi"]["ratio"] == pytest.approx(1.0)
    assert rows["sdk"]["ratio"] == pytest.approx(0.1)  # paired with rep 0 only
    assert rows["sdk"]["bad"] == 3
    assert all(r["ratio"] is None for r in report.summarize(runs, None))

    titles = {"project": "fastapi-mcp-ctx", "fastapi": "ceiling"}
    matrix = report.matrix_table(report.summarize(runs, "fastapi"), ["project", "sdk", "fastapi"], titles)
    lines = matrix.splitlines()
    assert lines[0] == "| workload | conc | fastapi-mcp-ctx | sdk | ceiling |"
    assert lines[2] == "| a | 32 | 400 (0.50×) · 0.40 | 100 (0.10×) · 0.10 (!3 bad, 0 socket errors) | 800 (1.00×) · 0.80 |"
    detail = report.detail_table(report.summarize(runs, "fastapi"), titles)
    assert "| a | 32 | fastapi-mcp-ctx | 400 | 250-500 | 0.50 | 0.04 | 0.40 | 100 | 1.00 |" in detail.splitlines()


def test_processes_per_variant() -> None:
    got = {(spec.name, tuple(wls)): env for spec, env, wls in plan(list(SERVERS.values()), ["a", "b", "d", "s", "p"])}
    assert got[("project", ("a", "b"))] == {}
    assert got[("project", ("d", "p"))] == {"BENCH_EXTRA_TOOLS": "1"}  # switches to SSE by itself
    assert got[("sdk", ("p",))] == {"BENCH_EXTRA_TOOLS": "1", "BENCH_SSE": "1"}
    assert got[("sdk", ("s",))] == {"BENCH_STATEFUL": "1"}
    assert got[("fastapi", ("a", "b", "s", "p"))] == {}  # only d declares dependencies on the route
    assert got[("fastapi", ("d",))] == {"BENCH_EXTRA_TOOLS": "1"}


# -- the ceiling answers with the project's bytes -----------------------------------------


async def test_ceiling_returns_the_project_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from examples.bench_app import app as project

    fixture = tmp_path / "tools_list.json"
    fixture.write_text(json.dumps(await capture()))
    monkeypatch.setenv("BENCH_TOOLS_LIST", str(fixture))
    ceiling = importlib.import_module("bench.servers.fastapi_ceiling").app
    for wl in ("a", "b", "c", "cm", "r", "rm", "g", "gm"):
        body, headers = WORKLOADS[wl].body_bytes(), WORKLOADS[wl].headers
        mine, theirs = await asgi_post(project, body, headers), await asgi_post(ceiling, body, headers)
        assert mine == theirs, wl
        assert check_response(WORKLOADS[wl], theirs[0], JSON, theirs[1], 100) == (True, "ok")


# -- a real run: uvicorn + wrk, bounded -----------------------------------------------------


@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed (apt-get install wrk; `make bench` installs it as root)")
def test_smoke_run_project_and_ceiling(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    max_requests = 3000
    argv = ["-s", "project", "-w", "a", "-w", "d", "-w", "p", "--reps", "1", "--duration", "1", "--warmup", "0",
            "-c", "4", "--max-requests", str(max_requests), "--python", sys.executable, "--out", str(tmp_path)]  # fmt: skip
    assert cli.main(argv) == 0
    (path,) = tmp_path.glob("*.json")
    result = json.loads(path.read_text())
    assert {(r["server"], r["workload"]) for r in result["runs"]} == {(s, w) for s in ("project", "fastapi") for w in "adp"}
    for r in result["runs"]:
        assert r["ok"] > 0 and r["bad"] == 0 and r["socket_errors"] == 0, r
        assert r["requests"] <= max_requests + 4  # the count bound (plus responses in flight)
    procs = result["processes"]
    for wl, label in (("a", ""), ("d", "[d]"), ("p", "")):  # the ceiling sends the project's bytes
        project_label = "project" + ("[d,p]" if wl in "dp" else "")
        assert procs["fastapi" + label]["preflight"][wl]["bytes"] == procs[project_label]["preflight"][wl]["bytes"], wl
    for label in ("project[d,p]", "fastapi[d]"):  # every yield dependency torn down
        counters = procs[label]["db_counters"]
        assert counters["opened"] == counters["closed"] > 0, label
    rows = {(r["server"], r["workload"]): r for r in result["summary"]}
    assert rows[("fastapi", "a")]["ratio"] == pytest.approx(1.0)
    assert rows[("project", "d")]["ratio"] > 0
    out = capsys.readouterr().out
    assert "| workload | conc | fastapi-mcp-ctx | bare FastAPI (ceiling) |" in out
    assert path.with_suffix(".md").exists()


def test_project_otel_runs_every_workload_with_the_sdk_configured() -> None:
    """``-s project-otel``: the project's processes, each with ``BENCH_OTEL=1`` added (the bench
    app installs the SDK with dropping exporters); opt-in, so a default run is unchanged."""
    got = {tuple(wls): env for spec, env, wls in plan([SERVERS["project-otel"]], ["a", "b", "d", "s", "p"])}
    assert got == {("a", "b"): {"BENCH_OTEL": "1"}, ("d", "p"): {"BENCH_OTEL": "1", "BENCH_EXTRA_TOOLS": "1"},
                   ("s",): {"BENCH_OTEL": "1", "BENCH_STATEFUL": "1"}}  # fmt: skip
    assert SERVERS["project-otel"].opt_in and SERVERS["project-otel"].project


def test_bench_app_with_bench_otel_traces_every_call() -> None:
    """``BENCH_OTEL=1``: the bench app (its own process: global providers) serves workload a with
    the SDK configured, and the router's ``MCP_TELEMETRY=auto`` emits the span."""
    import subprocess
    import textwrap

    code = textwrap.dedent(
        """
        import asyncio
        from opentelemetry import trace
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from bench.harness.capture import asgi_post
        from bench.harness.workloads import WORKLOADS
        from examples.bench_app import app, mcp_router
        exporter = InMemorySpanExporter()
        trace.get_tracer_provider().add_span_processor(SimpleSpanProcessor(exporter))  # beside the dropping one
        status, raw = asyncio.run(asgi_post(app, WORKLOADS["a"].body_bytes(), WORKLOADS["a"].headers))
        print(status, b'"text":"5"' in raw, [s.name for s in exporter.get_finished_spans()])
        """
    )
    root = Path(__file__).resolve().parents[1]
    env = {**__import__("os").environ, "BENCH_OTEL": "1", "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env, cwd=root)
    assert out.stdout.split("\n")[0] == "200 True ['tools/call add']", out.stderr
