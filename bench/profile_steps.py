"""Where each microsecond of one ``tools/call`` goes: fastapi_mcp_ctx beside a bare FastAPI path operation.

    .venv/bin/python bench/profile_steps.py d        # the d workload (yield dependency + header)
    .venv/bin/python bench/profile_steps.py a        # tools/call add(2, 3)
    .venv/bin/python bench/profile_steps.py s        # the same call in a 2025 session

The functions each step runs are wrapped with a timer before the apps are built (so routes capture
the wrappers); a step's time is exclusive: the time of the wrapped steps it calls is not counted
again. "ASGI stack" is what is left of the whole call: Starlette's middleware, FastAPI's routing
(``include_router`` included for the project) and its request/response wrapper. Same apps and
requests as ``profile_call.py``; sequential calls in process, ``--rounds`` rounds of ``--calls``
calls, apps interleaved; each app's quietest round is shown whole (on a shared machine noise only
adds). The timers' own cost is measured on empty functions and subtracted (see :class:`Steps`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import gc
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import profile_call as pc
from fastapi import routing as fastapi_routing
from fastapi.dependencies import utils as fastapi_dependency_utils
from pydantic import TypeAdapter
from starlette.background import BackgroundTasks
from starlette.responses import Response

from fastapi_mcp_ctx import _fastapi_compat, router
from fastapi_mcp_ctx._handlers import resolve as _resolve
from fastapi_mcp_ctx._server import dispatch as _dispatch
from fastapi_mcp_ctx._server import endpoint, session_gate
from fastapi_mcp_ctx._server import tool_calls as _tool_calls
from fastapi_mcp_ctx._transport import resumable_call as _resumable_call
from fastapi_mcp_ctx._transport import streams as _streams

_clock = time.perf_counter_ns


class Steps:
    """Exclusive nanoseconds per label, for calls made one at a time (a stack of child totals).

    The wrappers' own cost is measured (:meth:`calibrate`) and taken out again: per call of a
    step, the part inside its timed window; per call of a wrapped child, the part outside it.
    """

    def __init__(self) -> None:
        self.ns: dict[str, int] = defaultdict(int)
        self.calls: dict[str, int] = defaultdict(int)
        self.child_calls: dict[str, dict[bool, int]] = defaultdict(lambda: {True: 0, False: 0})
        self.top_calls: dict[bool, int] = {True: 0, False: 0}
        self.is_async: dict[str, bool] = {}
        self.inside: dict[bool, float] = {True: 0.0, False: 0.0}  # ns per call, by wrapper kind
        self.outside: dict[bool, float] = {True: 0.0, False: 0.0}
        self._stack: list[list[Any]] = []

    def clear(self) -> None:
        for table in (self.ns, self.calls, self.child_calls):
            table.clear()
        self.top_calls = {True: 0, False: 0}

    def _enter(self) -> int:
        self._stack.append([0, {True: 0, False: 0}])
        return _clock()

    def _leave(self, label: str, start: int, kind: bool) -> None:
        spent = _clock() - start
        child_ns, child_calls = self._stack.pop()
        self.ns[label] += spent - child_ns
        self.calls[label] += 1
        mine = self.child_calls[label]
        mine[True] += child_calls[True]
        mine[False] += child_calls[False]
        if self._stack:
            self._stack[-1][0] += spent
            self._stack[-1][1][kind] += 1
        else:
            self.top_calls[kind] += 1

    def wrap(self, label: str, func: Callable[..., Any]) -> Callable[..., Any]:
        if asyncio.iscoroutinefunction(func):
            self.is_async[label] = True

            @functools.wraps(func)
            async def timed_async(*args: Any, **kwargs: Any) -> Any:
                start = self._enter()
                try:
                    return await func(*args, **kwargs)
                finally:
                    self._leave(label, start, True)

            return timed_async
        self.is_async[label] = False

        @functools.wraps(func)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = self._enter()
            try:
                return func(*args, **kwargs)
            finally:
                self._leave(label, start, False)

        return timed

    async def calibrate(self, n: int = 20000) -> None:
        """Measure the wrappers on functions that do nothing."""

        def noop() -> None:
            return None

        async def anoop() -> None:
            return None

        timed, atimed = self.wrap("calibration", noop), self.wrap("calibration async", anoop)
        best: dict[str, float] = defaultdict(lambda: float("inf"))
        gc.disable()
        try:
            for _ in range(7):
                for name, func in (("raw", noop), ("wrapped", timed)):
                    self.clear()
                    start = _clock()
                    for _ in range(n):
                        func()
                    best[name] = min(best[name], (_clock() - start) / n)
                    if name == "wrapped":
                        best["recorded"] = min(best["recorded"], self.ns["calibration"] / n)
                for name, afunc in (("araw", anoop), ("awrapped", atimed)):
                    self.clear()
                    start = _clock()
                    for _ in range(n):
                        await afunc()
                    best[name] = min(best[name], (_clock() - start) / n)
                    if name == "awrapped":
                        best["arecorded"] = min(best["arecorded"], self.ns["calibration async"] / n)
        finally:
            gc.enable()
            self.clear()
        self.inside = {False: max(best["recorded"] - best["raw"], 0.0), True: max(best["arecorded"] - best["araw"], 0.0)}
        self.outside = {False: max(best["wrapped"] - best["recorded"], 0.0), True: max(best["awrapped"] - best["arecorded"], 0.0)}

    def corrected(self) -> tuple[dict[str, float], float]:
        """Exclusive ns per label without the wrappers' cost, and that whole cost."""
        out: dict[str, float] = {}
        overhead = sum(self.top_calls[k] * self.outside[k] for k in (True, False))
        for label, ns in self.ns.items():
            own = self.calls[label] * self.inside[self.is_async[label]]
            children = sum(self.child_calls[label][k] * self.outside[k] for k in (True, False))
            out[label] = max(ns - own - children, 0.0)
            overhead += own + children
        return out, overhead


STEPS = Steps()


def instrument() -> None:
    """Wrap every step (before any app exists: routes keep references to their endpoints)."""
    for owner, name, label in STEP_FUNCTIONS:
        if hasattr(owner, name):  # an older checkout may lack one (PYTHONPATH=<its copy> to profile it)
            setattr(owner, name, STEPS.wrap(label, getattr(owner, name)))


_FRAME = "JSON-RPC frame (from_json + checks)"
_ENVELOPE = "era + envelope"
_SOLVE = "solve: exit stacks, scope keys"
_SHAPE = "result: output validation + structuredContent + text"
_SEND = "response: result message, to_json, headers, send"
_SOLVER = "FastAPI solve_dependencies"
STEP_FUNCTIONS: list[tuple[Any, str, str]] = [
    # shared by both apps
    (contextlib.AsyncExitStack, "__aexit__", "exit stacks: teardown (yield dependency closed)"),
    (BackgroundTasks, "__call__", "background tasks (none)"),
    # bare FastAPI
    (fastapi_routing, "solve_dependencies", _SOLVER),
    (fastapi_dependency_utils, "run_in_threadpool", "worker thread hop (a plain def dependency)"),
    (fastapi_routing, "run_endpoint_function", "endpoint: json.loads, result dict, json.dumps, Response()"),
    (Response, "__call__", "response: headers, send start + body"),
    # fastapi_mcp_ctx: the HTTP front door
    (endpoint.McpEndpoint, "_endpoint", "front door: auth/method branch"),
    (endpoint, "header_map", "front door: header_map (decode headers once)"),
    (endpoint.McpEndpoint, "_check_transport", "front door: Host/Origin check"),
    (endpoint, "read_body", "front door: read the body (bounded)"),
    (endpoint, "accepted", "front door: Accept parse"),
    (endpoint.McpEndpoint, "_post", "front door: Content-Type, POST branch"),
    (endpoint, "parse_message", _FRAME),
    (endpoint, "choose_era", _ENVELOPE),
    (endpoint, "read_legacy_envelope", _ENVELOPE),
    (endpoint.McpEndpoint, "_post_legacy", _ENVELOPE),
    # the call
    (_dispatch.Dispatcher, "dispatch", "dispatch: method table"),
    (_dispatch.Dispatcher, "_tools_call", "dispatch: tool lookup, Request, CallState, Context, CallResponse"),
    (_streams.CallResponse, "__call__", "CallResponse: cancel scope, disconnect timer"),
    (_tool_calls, "run_tool", "run_tool: bind Context, overrides check"),
    (_resolve, "_invoke", "the tool itself"),
    (_resolve, "shape_result", _SHAPE),
    (TypeAdapter, "dump_python", _SHAPE),
    (_resolve, "open_solve", _SOLVE),
    (_resolve, "close_solve", _SOLVE),
    (_fastapi_compat, "solve_dependencies", _SOLVER),
    (_streams.CallResponse, "_send_final", _SEND),
    (_dispatch.Dispatcher, "_finish", _SEND),
    # a 2025 session (workload s)
    (session_gate.SessionGate, "session", "session: lookup, owner check"),
    (_resumable_call.ResumableCallResponse, "__call__", "session: resumable response (cancel scope, stream control)"),
    (_resumable_call.ResumableCallResponse, "_finish", _SEND),
    (_resumable_call.ResumableCallResponse, "_send_json", _SEND),
]


class _TimedValidator:
    """Stands in for a model's ``__pydantic_validator__`` (a Rust object takes no new attributes)."""

    def __init__(self, validator: Any, label: str) -> None:
        self._validator = validator
        self.validate_json = STEPS.wrap(label, validator.validate_json)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._validator, name)


def _wrap_argument_models() -> None:
    registry = _routers[-1].registry
    for name in ("lookup", "add"):
        tool: Any = registry.get(name)
        model: Any = tool.arguments_model
        label = "arguments: strict JSON validation"
        model.model_validate_json = STEPS.wrap(label, model.model_validate_json)  # an older checkout calls this
        model.__pydantic_validator__ = _TimedValidator(model.__pydantic_validator__, label)
        if hasattr(tool, "validator"):  # what a call validates with (ToolDef.validator)
            tool.validator = model.__pydantic_validator__


_routers: list[router.McpRouter] = []


async def one_round(app: Any, workload: str, calls: int) -> tuple[dict[str, float], float]:
    """µs per call of each step, and the total, over ``calls`` sequential calls."""
    scope, body = pc._request(workload, app)
    gc.collect()
    gc.disable()  # collections land at random steps; their cost is a matter of its own (tests/test_gc.py)
    try:
        STEPS.clear()
        start = _clock()
        for _ in range(calls):
            await pc.call(app, scope, body, pc.EXPECT[workload])
        wrapped = _clock() - start
    finally:
        gc.enable()
    steps, overhead = STEPS.corrected()
    total = (wrapped - overhead) / calls / 1000
    row = {label: ns / calls / 1000 for label, ns in steps.items()}
    row[REST] = total - sum(row.values())
    return row, total


REST = "ASGI stack: middleware, routing, request/response wrapper (rest)"


async def main(args: argparse.Namespace) -> None:
    instrument()
    original_init = router.McpRouter.__init__

    def remember(self: router.McpRouter, *a: Any, **k: Any) -> None:
        original_init(self, *a, **k)
        _routers.append(self)

    router.McpRouter.__init__ = remember  # type: ignore[method-assign]
    project = await pc.app_for("project", args.workload)
    _wrap_argument_models()
    apps = {"fastapi_mcp_ctx": project, "bare FastAPI": pc.fastapi_app(args.workload)}
    await STEPS.calibrate()
    for app in apps.values():
        await one_round(app, args.workload, 300)  # warm-up
    rounds: dict[str, list[tuple[dict[str, float], float]]] = {name: [] for name in apps}
    for _ in range(args.rounds):  # interleaved; the quietest round of each app is reported whole
        for name, app in apps.items():
            rounds[name].append(await one_round(app, args.workload, args.calls))
    results = {name: min(runs, key=lambda run: run[1]) for name, runs in rounds.items()}
    labels = sorted({label for steps, _ in results.values() for label in steps}, key=lambda lb: -max(r[0].get(lb, 0) for r in results.values()))
    print(f"| step ({args.workload}) | " + " | ".join(f"{n} µs" for n in apps) + " |")
    print("|---|" + "---|" * len(apps))
    for label in labels:
        cells = [f"{results[n][0].get(label, 0.0):.1f}" if results[n][0].get(label) else "–" for n in apps]
        print(f"| {label} | " + " | ".join(cells) + " |")
    print("| **total per call** | " + " | ".join(f"**{results[n][1]:.1f}**" for n in apps) + " |")
    print(f"(timer cost taken out: {STEPS.inside[False]:.0f}/{STEPS.outside[False]:.0f} ns per sync step inside/outside its window, "
          f"{STEPS.inside[True]:.0f}/{STEPS.outside[True]:.0f} ns per async step)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("workload", nargs="?", default="d", help="d, a or s")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    pc.run(main(parser.parse_args()))
