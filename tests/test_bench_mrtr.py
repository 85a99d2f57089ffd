"""``bench/bench_mrtr.py``: its round check and wrk script against the project's bench app (served by
uvicorn in this process), and the paired ratio. Not a timed test: 1 s of load, 4 connections."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from serving import uvicorn_thread

from bench import bench_mrtr
from bench.servers.mrtr_project import app as project_app


def test_one_round_checks_in_full() -> None:
    with uvicorn_thread(project_app) as url:
        assert bench_mrtr.check_round(url) == ("", True)  # and a state echoed with other arguments is refused


def test_the_ratio_is_paired_per_repetition() -> None:
    def run(server: str, rep: int, rps: float, cpu: float) -> dict[str, Any]:
        return {"server": server, "rep": rep, "rounds_per_s": rps, "requests_per_s": 2 * rps, "p50_ms": 1.0, "p99_ms": 2.0,
                "cpu_us_per_round": cpu, "others_cores": 0.5, "bad": 0, "socket_errors": 0}  # fmt: skip

    runs = [run("project", 0, 300, 500), run("sdk", 0, 100, 1500), run("project", 1, 200, 600), run("sdk", 1, 100, 1200)]
    summary = bench_mrtr.summarize(runs, 2)
    assert summary["ratio_rounds"] == 2.5 and summary["ratio_rounds_range"] == (2.0, 3.0)
    assert summary["ratio_cpu"] == 2.5 and summary["project"]["rounds_per_s"] == 250
    assert "2.50×" in bench_mrtr.table(summary, 32)


@dataclass
class InProcess:
    """What run_wrk reads of a server: its URL and the pid whose CPU time it counts (ours here)."""

    url: str
    pid: int


@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed (apt-get install wrk)")
def test_wrk_completes_rounds_and_checks_every_response(tmp_path: Path) -> None:
    with uvicorn_thread(project_app) as url:
        result = bench_mrtr.run_wrk(InProcess(url, os.getpid()), 4, 1, 2000, None, tmp_path)  # type: ignore[arg-type]
    assert result["bad"] == 0 and result["socket_errors"] == 0, result["bad_sample"]
    assert result["rounds"] > 0 and abs(result["firsts"] - result["rounds"]) <= 4  # every first call gets its retry
