"""Bytecodes run per call, by function (self), for one or two workloads of ``profile_call``.

A deterministic, load-independent proxy for the Python-level work of each function (the C work
inside, pydantic validation or ``to_json``, is not counted), to find which of our functions a
workload's extra instructions come from; instruction counts themselves come from
``bench/callgrind_call.sh``:

    .venv/bin/python bench/opcodes_call.py s a        # s beside a: the functions whose counts differ
    .venv/bin/python bench/opcodes_call.py a          # every function of a, most bytecodes first

Runs on uvloop when installed (as ``profile_call`` and uvicorn do), 100 traced calls after 50
untraced ones.
"""

from __future__ import annotations

import asyncio
import collections
import sys
from types import CodeType, FrameType
from typing import Any

import profile_call as pc

CALLS = 100


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def measure(workload: str) -> dict[str, float]:
    """Bytecodes per call of ``workload`` on the project app, keyed ``file:line(function)``."""
    counts: collections.Counter[CodeType] = collections.Counter()

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "call":
            frame.f_trace_opcodes = True
            frame.f_trace_lines = False
        elif event == "opcode":
            counts[frame.f_code] += 1
        return tracer

    async def main() -> None:
        app = await pc.app_for("project", workload)
        scope, body = pc._request(workload, app)  # pyright: ignore[reportPrivateUsage]
        for _ in range(50):
            await pc.call(app, scope, body, pc.EXPECT[workload])
        sys.settrace(tracer)
        try:
            for _ in range(CALLS):
                await pc.call(app, scope, body, pc.EXPECT[workload])
        finally:
            sys.settrace(None)

    loop = _new_loop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    out: dict[str, float] = {}
    for code, n in counts.items():
        name = code.co_filename.split("site-packages/")[-1]
        if "fastapi_mcp_ctx/" in name:
            name = "fastapi_mcp_ctx/" + name.split("fastapi_mcp_ctx/", 1)[1]
        key = f"{name}:{code.co_firstlineno}({code.co_name})"
        out[key] = out.get(key, 0.0) + n / CALLS
    return out


def main(workloads: list[str]) -> None:
    results = [measure(w) for w in workloads]
    if len(results) == 2:
        first, second = results
        print(f"total {workloads[0]} {sum(first.values()):.0f}, {workloads[1]} {sum(second.values()):.0f} bytecodes per call")
        rows = sorted(((first.get(k, 0) - second.get(k, 0), k) for k in set(first) | set(second)), reverse=True)
        print(f"{'diff':>7} {workloads[1]:>7} {workloads[0]:>7}  function")
        for diff, key in rows:
            if abs(diff) >= 1:
                print(f"{diff:7.0f} {second.get(key, 0):7.0f} {first.get(key, 0):7.0f}  {key}")
        return
    only = results[0]
    print(f"total {sum(only.values()):.0f} bytecodes per call")
    for key, n in sorted(only.items(), key=lambda kv: -kv[1]):
        print(f"{n:7.0f}  {key}")


if __name__ == "__main__":
    main(sys.argv[1:] or ["s", "a"])
