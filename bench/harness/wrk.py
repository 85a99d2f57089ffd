"""One measured run: ``wrk`` (one thread, ``conc`` keep-alive connections) against one server.

wrk runs in its own process, pinned to the other core when there are two, bounded in time
(``-d``, plus a subprocess timeout) and in count (``BENCH_MAX`` responses), loopback only.
``check.lua`` checks every response (status 200, the expected substring, for p the exact count
of progress frames) and reports the good and bad counts with wrk's latency percentiles.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .servers import CLK_TCK, HOST, ServerProcess, cpu_ticks, rss_kb
from .workloads import Workload

LUA = Path(__file__).with_name("check.lua")


@dataclass(frozen=True)
class Expect:
    """What every response must hold (from :func:`bench.harness.workloads.expectation`)."""

    substring: str = ""
    repeated: str = ""
    count: int = 0


def wrk_path() -> str | None:
    return shutil.which("wrk")


def _system_busy_s() -> float:
    """Busy CPU seconds of the whole machine so far (``/proc/stat``: all but idle, iowait, steal)."""
    with open("/proc/stat") as f:
        values = [int(x) for x in f.readline().split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, _steal = values
    return (user + nice + system + irq + softirq) / CLK_TCK


@dataclass(frozen=True)
class WrkRun:
    """One wrk process: its ``BENCH_RESULT`` line (``result``), the first ``BENCH_BAD`` sample, and the
    CPU seconds the server, wrk and the whole machine used meanwhile, over ``wall_s`` seconds."""

    result: dict[str, Any]
    bad_sample: str | None
    server_cpu_s: float
    wrk_cpu_s: float
    busy_s: float
    wall_s: float


def invoke_wrk(
    url: str, script: Path, env: dict[str, str], *, conc: int, duration: float, cpu: int | None, server_pid: int
) -> WrkRun:
    """Run ``wrk -t1 -c<conc>`` with the Lua ``script`` against ``url`` (pinned to ``cpu`` when given),
    bounded in time (``-d``, plus a process timeout).

    Raises:
        RuntimeError: wrk failed or printed no ``BENCH_RESULT`` line.
    """
    seconds = max(1, round(duration))
    cmd = ["wrk", "-t1", f"-c{conc}", f"-d{seconds}s", "--timeout", "10s", "-s", str(script), url]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu), *cmd]
    ru0, busy0, srv0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), _system_busy_s(), cpu_ticks(server_pid), time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=seconds + 30)
    wall = time.monotonic() - t0
    srv_s = (cpu_ticks(server_pid) - srv0) / CLK_TCK
    busy = _system_busy_s() - busy0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    found = re.search(r"^BENCH_RESULT (\{.*\})$", done.stdout, re.M)
    if done.returncode != 0 or not found:
        raise RuntimeError(f"wrk failed (rc {done.returncode}): {done.stdout[-500:]} {done.stderr[-500:]}")
    bad = re.search(r"^BENCH_BAD (.*)$", done.stdout, re.M)
    wrk_s = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return WrkRun(json.loads(found.group(1)), bad.group(1) if bad else None, srv_s, wrk_s, busy, wall)


def run_wrk(
    server: ServerProcess,
    wl: Workload,
    expect: Expect,
    *,
    conc: int,
    duration: float,
    max_requests: int,
    cpu: int | None,
    extra_headers: dict[str, str],
    tmp: Path,
) -> dict[str, Any]:
    """Load ``server`` with ``wl`` for ``duration`` seconds; the run's figures.

    Returns a dict: ``rps`` (responses/s), ``ok``/``bad`` (checked responses), ``requests``,
    ``socket_errors``, ``timeouts``, ``p50_us``/``p90_us``/``p99_us``/``max_us`` (µs),
    ``cpu_us_per_req`` (server CPU µs per response), ``others_cores`` (CPU other processes used
    meanwhile, in cores), ``rss_kb`` (server RSS after the run), ``duration_s``.

    Raises:
        RuntimeError: wrk failed or printed no result line.
    """
    assert server.url.startswith(f"http://{HOST}:"), server.url
    body, headers = tmp / f"body-{wl.id}.json", tmp / f"headers-{server.port}-{wl.id}.txt"
    body.write_bytes(wl.body_bytes())
    headers.write_text("".join(f"{k}: {v}\n" for k, v in {**wl.headers, **extra_headers}.items()))
    env = {
        **os.environ,
        "BENCH_BODY": str(body),
        "BENCH_HEADERS": str(headers),
        "BENCH_EXPECT": expect.substring,
        "BENCH_REPEAT": expect.repeated,
        "BENCH_REPEAT_COUNT": str(expect.count),
        "BENCH_MAX": str(max_requests),
        "BENCH_UNIQUE_IDS": "1" if "Mcp-Session-Id" in extra_headers else "0",
    }
    run = invoke_wrk(server.url, LUA, env, conc=conc, duration=duration, cpu=cpu, server_pid=server.pid)
    w, srv_s, secs = run.result, run.server_cpu_s, run.result["duration_us"] / 1e6
    return {
        "rps": w["requests"] / secs,
        "requests": w["requests"],
        "ok": w["ok"],
        "bad": w["bad"],
        "bad_sample": run.bad_sample[:200] if run.bad_sample else None,
        "socket_errors": w["socket_errors"],
        "timeouts": w["timeouts"],
        "p50_us": w["p50_us"],
        "p90_us": w["p90_us"],
        "p99_us": w["p99_us"],
        "max_us": w["max_us"],
        "bytes_per_response": w["bytes"] / w["requests"] if w["requests"] else None,
        "cpu_us_per_req": srv_s * 1e6 / w["requests"] if w["requests"] else None,
        "others_cores": max(run.busy_s - srv_s - run.wrk_cpu_s, 0.0) / run.wall_s,
        "rss_kb": rss_kb(server.pid),
        "duration_s": secs,
        "capped": w["requests"] >= max_requests,
    }
