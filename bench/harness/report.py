"""Medians, ratios against the ceiling measured in the same run, and the Markdown tables.

A run is one wrk measurement: a dict with ``server``, ``workload``, ``conc``, ``rep`` and the
figures of :func:`bench.harness.wrk.run_wrk`. The ratio of a server to the ceiling is paired:
for each repetition, the server's req/s over the ceiling's req/s for the same workload and
concurrency in that repetition (measured minutes apart at most), then the median of those.
"""

from __future__ import annotations

import statistics
from typing import Any

Row = dict[str, Any]


def _median(values: list[Any]) -> float | None:
    xs = [x for x in values if x is not None]
    return statistics.median(xs) if xs else None


def summarize(runs: list[dict[str, Any]], ceiling: str | None) -> list[Row]:
    """One row per (workload, conc, server), in the order first seen in ``runs``.

    Row keys: ``server workload conc n rps rps_min rps_max p50_us p99_us cpu_us_per_req`` (medians
    over the repetitions), ``bad`` and ``socket_errors`` (totals), ``ratio`` (median of the paired
    req/s ratios to ``ceiling``; None without a ceiling run to pair with), ``cpu_ratio`` (the same
    for the server's CPU time per request: the figure least moved by other load on the machine).
    """
    cells: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    for r in runs:
        cells.setdefault((r["workload"], r["conc"], r["server"]), []).append(r)
    by_rep = {(r["workload"], r["conc"], r["server"], r["rep"]): r for r in runs}
    rows: list[Row] = []
    for (wl, conc, server), rs in cells.items():
        pairs = [(r, c) for r in rs if (c := by_rep.get((wl, conc, ceiling, r["rep"])))]
        cpu = [r["cpu_us_per_req"] / c["cpu_us_per_req"] for r, c in pairs if r.get("cpu_us_per_req") and c.get("cpu_us_per_req")]
        rows.append(
            {
                "server": server,
                "workload": wl,
                "conc": conc,
                "n": len(rs),
                "rps": _median([r["rps"] for r in rs]),
                "rps_min": min(r["rps"] for r in rs),
                "rps_max": max(r["rps"] for r in rs),
                "p50_us": _median([r["p50_us"] for r in rs]),
                "p99_us": _median([r["p99_us"] for r in rs]),
                "cpu_us_per_req": _median([r.get("cpu_us_per_req") for r in rs]),
                "bad": sum(r["bad"] for r in rs),
                "socket_errors": sum(r["socket_errors"] + r["timeouts"] for r in rs),
                "ratio": _median([r["rps"] / c["rps"] for r, c in pairs if c["rps"]]),
                "cpu_ratio": _median(cpu),
            }
        )
    return rows


def _ms(us: float | None) -> str:
    return "-" if us is None else f"{us / 1000:.2f}"


def _flag(row: Row) -> str:
    if row["bad"] or row["socket_errors"]:
        return f" (!{row['bad']} bad, {row['socket_errors']} socket errors)"
    return ""


def detail_table(rows: list[Row], titles: dict[str, str]) -> str:
    """One line per workload, concurrency and server: req/s (median, min-max), × ceiling, p50, p99, CPU."""
    head = ["workload", "conc", "server", "req/s", "[min-max]", "× ceiling", "p50 ms", "p99 ms", "CPU µs/req", "CPU × ceiling"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        cpu = "-" if r["cpu_us_per_req"] is None else f"{r['cpu_us_per_req']:.0f}"
        cpu_ratio = "-" if r.get("cpu_ratio") is None else f"{r['cpu_ratio']:.2f}"
        cells = [r["workload"], str(r["conc"]), titles.get(r["server"], r["server"]) + _flag(r), f"{r['rps']:,.0f}",
                 f"{r['rps_min']:,.0f}-{r['rps_max']:,.0f}", ratio, _ms(r["p50_us"]), _ms(r["p99_us"]), cpu, cpu_ratio]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def matrix_table(rows: list[Row], servers: list[str], titles: dict[str, str]) -> str:
    """Workloads down, servers across; each cell ``req/s (× ceiling) · p99 ms``."""
    index = {(r["workload"], r["conc"], r["server"]): r for r in rows}
    keys = list(dict.fromkeys((r["workload"], r["conc"]) for r in rows))
    lines = ["| workload | conc | " + " | ".join(titles.get(s, s) for s in servers) + " |", "|---|---|" + "---|" * len(servers)]
    for wl, conc in keys:
        cells = []
        for s in servers:
            r = index.get((wl, conc, s))
            if r is None:
                cells.append("-")
                continue
            ratio = "" if r["ratio"] is None else f" ({r['ratio']:.2f}×)"
            cells.append(f"{r['rps']:,.0f}{ratio} · {_ms(r['p99_us'])}{_flag(r)}")
        lines.append(f"| {wl} | {conc} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def noise_line(runs: list[dict[str, Any]]) -> str:
    """How busy the rest of the machine was, and how far the repetitions spread."""
    if not runs:
        return "no runs"
    others = [r["others_cores"] for r in runs]
    return (
        f"{len(runs)} runs; CPU used by other processes during the runs: median {statistics.median(others):.2f} cores, "
        f"max {max(others):.2f}"
    )
