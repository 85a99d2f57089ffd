"""The code footprint of one call: distinct Python functions run and the bytes of their bytecode.

Instruction counts miss what a request's spread over many functions costs: each distinct function
touches its function and code objects, its bytecode (inline in the code object on Python 3.11),
its constants and its module's globals, and a working set that outgrows the CPU's L2 cache shows
as misses (``bench/callgrind_worker.py --cache``). This counts, for one call of a workload of
``profile_call`` after 50 warm-up calls, the distinct functions it runs, grouped by package::

    .venv/bin/python bench/footprint_call.py a             # ours; "fastapi" for the ceiling
    .venv/bin/python bench/footprint_call.py d fastapi
    .venv/bin/python bench/footprint_call.py a --list      # + every function, largest first

Runs on plain asyncio (``sys.setprofile`` sees its Python-level loop functions too, which uvloop
runs in C), so compare two apps or two checkouts with each other, not with uvloop's figures.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import defaultdict
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import profile_call as pc  # noqa: E402


def _where(filename: str) -> str:
    """A code object's file, short: the part after ``site-packages/`` or the repository root."""
    short = filename.split("site-packages/")[-1]
    root = str(Path(__file__).resolve().parents[1]) + "/"
    return short.removeprefix(root)


async def _footprint(workload: str, app_name: str) -> dict[CodeType, str]:
    app = await pc.app_for(app_name, workload)
    scope, body = pc._request(workload, app)  # pyright: ignore[reportPrivateUsage]
    expect = pc.expected(app, workload)
    for _ in range(50):
        await pc.call(app, dict(scope), body, expect)
    codes: dict[CodeType, str] = {}

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            codes[frame.f_code] = _where(frame.f_code.co_filename)

    sys.setprofile(profile)
    try:
        await pc.call(app, dict(scope), body, expect)
    finally:
        sys.setprofile(None)
    return codes


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("workload", choices=["a", "b", "d", "s"])
    parser.add_argument("app", nargs="?", default="project", choices=["project", "fastapi"])
    parser.add_argument("--list", action="store_true", help="every function, largest bytecode first")
    args = parser.parse_args()
    codes = asyncio.run(_footprint(args.workload, args.app))
    groups: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])
    for code, where in codes.items():
        group = groups[where.split("/")[0] if "/" in where else where]
        group[0] += 1
        group[1] += len(code.co_code)
    print(f"{args.app} {args.workload}: {len(codes)} distinct functions, {sum(g[1] for g in groups.values())} bytes of bytecode")
    for name, (count, size) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
        print(f"  {count:4} functions {size:6} B  {name}")
    if args.list:
        for code, where in sorted(codes.items(), key=lambda kv: -len(kv[0].co_code)):
            print(f"  {len(code.co_code):6} B  {where}:{code.co_qualname}")


if __name__ == "__main__":
    main()
