"""The tool set every benchmarked server registers, and the process variants (environment).

Plain functions, no framework import (a peer's process must not load the project, nor the
reverse):

* ``add(a: int, b: int) -> int``: workloads a, b, s;
* ``BENCH_TOOLS - 1`` fillers ``tool_000``… (``filler(x: int, label: str = "item") -> str``):
  what ``tools/list`` returns in workloads c, cm (100 tools by default);
* :func:`note` (the resource ``bench://note``, ``text/plain``) and :func:`greet` (the prompt
  ``greet(who)``): workloads r, rm, g, gm;
* :func:`get_db`, the yield dependency of ``lookup`` (workload d), whose opens and teardowns are
  counted and printed at exit (``BENCH_COUNTERS {...}``), so a server that skipped the teardown
  shows ``opened != closed``.

``lookup`` and ``countdown`` (workload p) are declared by each server module in its own
framework's idiom (that is what d and p compare); they exist only when ``BENCH_EXTRA_TOOLS=1``,
so that ``tools/list`` lists exactly ``BENCH_TOOLS`` tools in the default process.

Environment (set by ``bench.harness``): ``BENCH_TOOLS`` (int), ``BENCH_EXTRA_TOOLS=1`` (d, p),
``BENCH_STATEFUL=1`` (s: 2025 sessions), ``BENCH_SSE=1`` (p, peers: SSE response mode, in which
alone their transport sends a call's notifications).
"""

from __future__ import annotations

import atexit
import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

N_TOOLS = int(os.environ.get("BENCH_TOOLS", "100"))
EXTRA_TOOLS = os.environ.get("BENCH_EXTRA_TOOLS") == "1"
STATEFUL = os.environ.get("BENCH_STATEFUL") == "1"
SSE = os.environ.get("BENCH_SSE") == "1"

TENANT_HEADER = "x-tenant"
DB: dict[str, str] = {"k1": "v1"}
DB_COUNTERS = {"opened": 0, "closed": 0}


async def get_db() -> AsyncIterator[dict[str, str]]:
    """``lookup``'s yield dependency: "opens" ``DB`` and "closes" it after the call (both counted)."""
    DB_COUNTERS["opened"] += 1
    try:
        yield DB
    finally:
        DB_COUNTERS["closed"] += 1


@atexit.register
def _print_counters() -> None:
    if DB_COUNTERS["opened"]:
        print("BENCH_COUNTERS " + json.dumps(DB_COUNTERS), file=sys.stderr, flush=True)


NOTE_URI = "bench://note"  # workloads r, rm: resources/read of a small text resource
NOTE_TEXT = "A small note: the benchmark reads it as a resource."


async def note() -> str:
    """A small text note."""
    return NOTE_TEXT


async def greet(who: str) -> str:
    """Greet someone (workloads g, gm: prompts/get)."""
    return f"Hello, {who}!"


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _filler(i: int) -> Callable[..., Any]:
    async def filler(x: int, label: str = "item") -> str:
        return f"{label}-{x}"

    filler.__name__ = filler.__qualname__ = f"tool_{i:03d}"
    filler.__doc__ = f"Filler tool number {i}: formats an integer with a label."
    return filler


def tool_functions() -> list[Callable[..., Any]]:
    """``add``, then ``N_TOOLS - 1`` fillers: ``N_TOOLS`` async functions (never ``lookup``/``countdown``)."""
    return [add] + [_filler(i) for i in range(max(N_TOOLS - 1, 0))]
