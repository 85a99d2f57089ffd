"""Per-call cost of one ``tools/call`` in process: fastapi_mcp_ctx beside a bare FastAPI path operation.

Drives both ASGI apps directly (no server, no sockets) with the benchmark's requests, so the
figures are the framework's own work per call, repeatable enough to decide between variants:

    .venv/bin/python bench/profile_call.py                 # µs per call, d and a, both apps
    .venv/bin/python bench/profile_call.py --profile d     # + cProfile of the project's d call
    .venv/bin/python bench/profile_call.py --gc            # + cyclic garbage per call (gc.DEBUG_SAVEALL)
    bench/callgrind_call.sh d project                      # instructions per call (valgrind), repeatable

Workloads (as in the shared harness): ``d`` = ``tools/call lookup {"key": "k1"}`` with a yield
dependency (``get_db``) and the ``X-Tenant`` header; ``da`` = ``tools/call lookup_key {"key": "k1"}``
whose ``key`` only its dependency ``value_of(key, db=Depends(get_db))`` declares, beside FastAPI's
``POST /mcp/{key}`` path operation reading the same dependency with ``key`` a path parameter; ``a`` = ``tools/call add(2, 3)``; both
2025-11-25 era, no session; ``b`` = the a call in the 2026-07-28 era (``_meta`` envelope,
``Mcp-Method`` / ``Mcp-Name`` headers; the ceiling answers it as the shared harness's does: a's result with ``resultType`` and ``serverInfo``); ``s`` = the a call in a 2025 session (a stateful app,
``initialize`` once, every call carrying its ``Mcp-Session-Id``); ``r`` / ``rm`` = ``resources/read
bench://note`` and ``g`` / ``gm`` = ``prompts/get greet {"who": "Ada"}`` in the 2025 / 2026 era, the harness's
own requests (``bench.harness.workloads``), on the harness's resource and prompt (``bench.servers.tools``),
the ceiling answering them as ``bench/servers/fastapi_ceiling.py`` does. The FastAPI app is the harness's ceiling: one POST route declaring
``Depends(get_db)`` and ``Header()`` for d (a dependency-free one for a), answering the same bytes.
The project app is ``app.include_router(McpRouter(...))`` as in the harness's ``project_ref.py``;
``PROFILE_DIRECT_ROUTE=1`` puts the router's route on the app itself instead (what FastAPI's
``include_router`` dispatch costs); ``PROFILE_ROUTE_VARIANT=starlette|outer`` measures two of the
lean route's alternatives (:func:`_variant_app`). Each call runs in a task of its own, as uvicorn runs each
request, on uvloop when installed. Each figure is the median of ``--rounds`` rounds of
``--calls`` sequential calls. ``PYTHONPATH=<a copy of another checkout>`` profiles that one.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
import pstats
import statistics
import sys
import time
from collections.abc import AsyncIterator, Coroutine
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Header, Request, Response

from fastapi_mcp_ctx import Context, McpRouter, McpSettings, mcp_context

if __package__ in (None, ""):  # run as a script: the repository root on the path, for the harness's definitions
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness.workloads import GREETING, NOTE_TEXT, WORKLOADS  # noqa: E402
from bench.servers.tools import NOTE_URI, greet, note  # noqa: E402

FEATURE_WORKLOADS = ("r", "rm", "g", "gm")
"""The harness's resources/read and prompts/get workloads, requests taken from ``bench.harness.workloads``."""

DB = {"k1": "v1"}
COUNTS = {"opened": 0, "closed": 0}


async def get_db() -> AsyncIterator[dict[str, str]]:
    COUNTS["opened"] += 1
    try:
        yield DB
    finally:
        COUNTS["closed"] += 1


async def value_of(key: str, db: dict[str, str] = Depends(get_db)) -> str:
    """Workload da's dependency: ``key`` is its own parameter. In the project it is an argument of
    the tool (declared by the dependency only), on the FastAPI route a path parameter."""
    return db[key]


def project_app(session_mode: str = "stateless") -> FastAPI:
    settings = McpSettings(server_name="bench", server_version="0.1.0", session_mode=session_mode, log_level="warning")  # pyright: ignore[reportArgumentType]
    router = McpRouter(settings=settings)

    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    async def lookup(
        key: str,
        db: dict[str, str] = Depends(get_db),
        x_tenant: str = Header(),
        ctx: Context = Depends(mcp_context),
    ) -> dict[str, str]:
        """Look a key up in the tenant's store."""
        return {"value": db[key], "tenant": x_tenant}

    async def lookup_key(value: str = Depends(value_of)) -> dict[str, str]:
        """Look a key up: the key is an argument its dependency declares (workload da)."""
        return {"value": value}

    async def report(title: str) -> str:
        """A report ready at once (workloads tg, tgm read its finished task)."""
        return f"report {title} ready"

    router.add_tool(add)
    router.tool(task="optional")(report)
    router.add_tool(lookup)
    router.add_tool(lookup_key)
    router.resource(NOTE_URI, mime_type="text/plain")(note)  # r, rm (as examples/bench_app.py)
    router.prompt()(greet)  # g, gm
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    variant = os.environ.get("PROFILE_ROUTE_VARIANT", "direct" if os.environ.get("PROFILE_DIRECT_ROUTE") else "")
    if variant == "direct":  # experiment: the route on the app itself, no include_router
        app.router.routes.extend(router.routes)
    elif variant in ("starlette", "outer"):  # experiments (bench/README.md, the lean route's alternatives)
        return _variant_app(app, router, variant)
    else:
        app.include_router(router)
    return app


def _variant_app(app: FastAPI, router: McpRouter, variant: str) -> Any:
    """``starlette``: a plain Starlette ``Route`` with an ASGI endpoint on the app (what
    ``include_router`` would rebuild without the include-level dependencies); ``outer``: an ASGI
    callable around the whole app claiming the path (before the app's middleware)."""
    from starlette.routing import Route

    from fastapi_mcp_ctx._fastapi_routes import LeanRoute

    lean = next(r for r in router.routes if isinstance(r, LeanRoute))
    lean.endpoint.__self__.start(app, "/mcp")  # type: ignore[attr-defined]  # what the first request would do
    app.router.middleware_stack = app.router.app  # no claim: the variant's own path only
    if variant == "starlette":
        class Endpoint:  # an instance, not a function: Starlette calls it as an ASGI app
            async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
                await lean.serve_directly(scope, receive, send)

        app.router.routes.append(Route("/mcp", Endpoint(), methods=["POST", "GET", "DELETE"]))
        return app

    async def outer(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/mcp":
            await lean.serve_directly(scope, receive, send)
            return
        await app(scope, receive, send)

    return outer


_dumps = json.JSONEncoder(separators=(",", ":")).encode


def _result(request_id: Any, structured: dict[str, Any], text: str, modern: bool = False) -> bytes:
    """The SDK's CallToolResult, keys in its order; with ``resultType`` and ``serverInfo`` for a
    2026-07-28 request, as the shared harness's ceiling (``ceiling_core._tool_result``) answers b."""
    result: dict[str, Any] = {"content": [{"text": text, "type": "text"}], "isError": False}
    if modern:
        result["resultType"] = "complete"
    result["structuredContent"] = structured
    if modern:
        result["_meta"] = _SERVER_INFO
    return _dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()


def fastapi_app(workload: str) -> FastAPI:
    """The ceiling: for d the route declares lookup's dependencies, for a it declares none."""
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)

    async def mcp(request: Request) -> Response:
        message = json.loads(await request.body())
        params = message["params"]
        total = params["arguments"]["a"] + params["arguments"]["b"]
        modern = _PV_KEY in (params.get("_meta") or {})
        return Response(content=_result(message["id"], {"result": total}, str(total), modern), media_type="application/json")

    async def mcp_with_dependencies(request: Request, db: dict[str, str] = Depends(get_db), x_tenant: str = Header()) -> Response:
        message = json.loads(await request.body())
        out = {"value": db[message["params"]["arguments"]["key"]], "tenant": x_tenant}
        body = _result(message["id"], out, json.dumps(out, indent=2))
        return Response(content=body, media_type="application/json")

    async def mcp_feature(request: Request) -> Response:  # r rm g gm: fastapi_ceiling.py's branches, same bytes
        message = json.loads(await request.body())
        method, params = message["method"], message.get("params") or {}
        modern = _PV_KEY in (params.get("_meta") or {})
        if method == "resources/read":
            result: dict[str, Any] = {"contents": [{"uri": params["uri"], "mimeType": "text/plain", "text": NOTE_TEXT}]}
            if modern:
                result.update({"resultType": "complete", "ttlMs": 0, "cacheScope": "private", "_meta": _SERVER_INFO})
        else:
            text = f"Hello, {(params.get('arguments') or {})['who']}!"
            result = {"messages": [{"role": "user", "content": {"type": "text", "text": text}}], "description": greet.__doc__}
            if modern:
                result.update({"resultType": "complete", "_meta": _SERVER_INFO})
        body = _dumps_utf8({"jsonrpc": "2.0", "id": message.get("id"), "result": result}).encode()
        return Response(content=body, media_type="application/json")

    async def mcp_with_path_parameter(request: Request, value: str = Depends(value_of)) -> Response:
        message = json.loads(await request.body())  # da: the same dependency, its key from the path
        out = {"value": value}
        return Response(content=_result(message["id"], out, json.dumps(out, indent=2)), media_type="application/json")

    if workload == "da":
        app.add_api_route("/mcp/{key}", mcp_with_path_parameter, methods=["POST"])
        PATHS[id(app)] = "/mcp/k1"
        return app
    route = mcp_with_dependencies if workload == "d" else mcp_feature if workload in FEATURE_WORKLOADS else mcp
    app.add_api_route("/mcp", route, methods=["POST"])
    return app


PATHS: dict[int, str] = {}
"""Workload da: the ceiling's request path (``/mcp/k1``, the key a path parameter), by ``id(app)``."""


_PV_KEY = "io.modelcontextprotocol/protocolVersion"
_SERVER_INFO = {"io.modelcontextprotocol/serverInfo": {"name": "bench", "version": "0.1.0"}}
_dumps_utf8 = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


TASKS: dict[int, str] = {}
"""Workloads tg / tgm: the completed task of each project app (by ``id(app)``), made by :func:`finished_task`."""
TASK_EXT = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


async def finished_task(app: Any, workload: str) -> None:
    """Create a ``report`` task on ``app`` in the era of ``workload`` (tg: 2025 ``task: {ttl}``, tgm:
    2026 with the tasks extension declared) and wait until it is completed."""
    scope, _ = _request("b" if workload == "tgm" else "a")
    params: dict[str, Any] = {"name": "report", "arguments": {"title": "q4"}}
    if workload == "tgm":
        params["_meta"] = {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": TASK_EXT}
        scope["headers"] = [(k, b"report" if k == b"mcp-name" else v) for k, v in scope["headers"] if k != b"content-length"]
    else:
        params["task"] = {"ttl": 3_600_000}
    body = _dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()
    out: list[bytes] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        out.append(message.get("body", b""))

    await app(dict(scope), receive, send)
    created = json.loads(b"".join(out))["result"]
    TASKS[id(app)] = created["taskId"] if "taskId" in created else created["task"]["taskId"]
    for _ in range(200):
        scope_get, body_get = _request(workload, app)
        out.clear()

        async def receive_get(body_get: bytes = body_get) -> dict[str, Any]:
            return {"type": "http.request", "body": body_get, "more_body": False}

        await app(dict(scope_get), receive_get, send)
        if b'"status":"completed"' in b"".join(out):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the task did not complete: {b''.join(out)[:300]!r}")


SESSIONS: dict[int, str] = {}
"""Workload s: the session id of each stateful project app (by ``id(app)``), opened by :func:`open_session`."""


async def open_session(app: Any) -> None:
    """``initialize`` + ``notifications/initialized`` on ``app`` (workload s), as the harness's client does once."""
    scope, _ = _request("a")
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
    body = _dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}).encode()
    headers: list[tuple[bytes, bytes]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            headers.extend(message["headers"])

    await app(dict(scope), receive, send)
    session_id = dict(headers)[b"mcp-session-id"]
    SESSIONS[id(app)] = session_id.decode()
    body = _dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
    scope["headers"] = [*scope["headers"], (b"mcp-session-id", session_id)]
    await app(dict(scope), receive, send)


MODERN_META: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1.0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _task_request(workload: str, app: Any) -> tuple[dict[str, Any], bytes]:
    """``tasks/get`` of the app's finished task (tg: 2025-11-25, tgm: 2026-07-28 with its headers)."""
    task_id = TASKS.get(id(app), "none")
    params: dict[str, Any] = {"taskId": task_id}
    if workload == "tgm":
        params["_meta"] = {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": TASK_EXT}
    body = _dumps({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": params}).encode()
    scope, _ = _request("b" if workload == "tgm" else "a")
    headers = [(k, v) for k, v in scope["headers"] if k not in (b"content-length", b"mcp-method", b"mcp-name")]
    if workload == "tgm":
        headers += [(b"mcp-method", b"tasks/get"), (b"mcp-name", task_id.encode())]
    scope["headers"] = [*headers, (b"content-length", str(len(body)).encode())]
    return scope, body


def _request(workload: str, app: Any = None) -> tuple[dict[str, Any], bytes]:
    if workload in FEATURE_WORKLOADS:
        return _feature_request(workload)
    if workload in ("tg", "tgm"):
        if app is not None and id(app) not in TASKS:  # the ceiling answers tg / tgm as a
            return _request("a", app)
        return _task_request(workload, app)
    if workload == "d":
        params: dict[str, Any] = {"name": "lookup", "arguments": {"key": "k1"}}
    elif workload == "da":
        params = {"name": "lookup_key", "arguments": {"key": "k1"}}
    else:
        params = {"name": "add", "arguments": {"a": 2, "b": 3}}
    version = b"2025-11-25"
    if workload == "b":  # the 2026-07-28 era: the _meta envelope and the Mcp-Method / Mcp-Name headers
        version = b"2026-07-28"
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1.0"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    body = _dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()
    headers = [
        (b"host", b"127.0.0.1:8000"),
        (b"user-agent", b"wrk"),
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
        (b"mcp-protocol-version", version),
        (b"x-tenant", b"acme"),
        (b"content-length", str(len(body)).encode()),
    ]
    if workload == "b":
        headers[5:5] = [(b"mcp-method", b"tools/call"), (b"mcp-name", b"add")]
    scope: dict[str, Any] = {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
        "method": "POST", "scheme": "http", "path": "/mcp", "raw_path": b"/mcp", "query_string": b"",
        "root_path": "", "headers": headers, "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000),
        "state": {},
    }
    path = PATHS.get(id(app))
    if path is not None:
        scope["path"], scope["raw_path"] = path, path.encode()
    if workload == "s" and id(app) in SESSIONS:  # the a call inside the project app's session
        scope["headers"] = [*headers, (b"mcp-session-id", SESSIONS[id(app)].encode())]
    return scope, body


def _feature_request(workload: str) -> tuple[dict[str, Any], bytes]:
    """The harness's request of r / rm / g / gm: its body bytes and headers, in the a call's scope."""
    wl = WORKLOADS[workload]
    body = wl.body_bytes()
    headers = [(b"host", b"127.0.0.1:8000"), (b"user-agent", b"wrk")]
    headers += [(k.lower().encode(), v.encode()) for k, v in wl.headers.items()]
    headers += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    scope, _ = _request("a")
    scope["headers"] = headers
    return scope, body


async def call(app: Any, scope: dict[str, Any], body: bytes, expect: bytes) -> None:
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)  # uvicorn blocks here until the client disconnects
        return {"type": "http.disconnect"}

    out: list[bytes] = []
    status = 0

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        else:
            out.append(message.get("body", b""))

    # one task per request, as uvicorn runs each (per-task state such as anyio's is then per call too)
    await asyncio.get_running_loop().create_task(app(dict(scope), receive, send))
    if status != 200 or expect not in b"".join(out):
        raise AssertionError(f"unexpected answer {status}: {b''.join(out)[:300]!r}")


EXPECT = {"tg": b'"status":"completed"', "tgm": b'"status":"completed"', "d": b'{"value":"v1","tenant":"acme"}', "da": b'"structuredContent":{"value":"v1"}', "a": b'"text":"5"', "b": b'"text":"5"', "s": b'"text":"5"'}
EXPECT.update({w: json.dumps(NOTE_TEXT if w[0] == "r" else GREETING).encode() for w in FEATURE_WORKLOADS})


def expected(app: Any, workload: str) -> bytes:
    """What a good answer of ``workload`` holds on ``app`` (the ceiling answers tg / tgm as a)."""
    if workload in ("tg", "tgm") and id(app) not in TASKS:
        return EXPECT["a"]
    return EXPECT[workload]


async def per_call_us(app: Any, workload: str, calls: int) -> float:
    scope, body = _request(workload, app)
    start = time.perf_counter()
    for _ in range(calls):
        await call(app, scope, body, expected(app, workload))
    return (time.perf_counter() - start) / calls * 1e6


async def cyclic_garbage(app: Any, workload: str, calls: int = 200) -> tuple[float, list[str]]:
    scope, body = _request(workload, app)
    for _ in range(20):
        await call(app, scope, body, expected(app, workload))
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(calls):
            await call(app, scope, body, expected(app, workload))
        gc.collect()
        kinds = sorted({type(o).__name__ for o in gc.garbage})
        per_call = len(gc.garbage) / calls
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    return per_call, kinds


def run(main: Coroutine[Any, Any, None]) -> None:
    """Run ``main`` on uvloop when installed (as uvicorn does), else on asyncio."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
    else:
        uvloop.run(main)


async def app_for(name: str, workload: str) -> Any:
    """The app of ``name`` (``project`` / ``fastapi``) for ``workload``; for s a stateful project
    app with its session open (the ceiling answers s as a: it has no sessions)."""
    if name == "fastapi":
        return fastapi_app(workload)
    if workload in ("tg", "tgm"):
        app = project_app()
        await finished_task(app, workload)
        return app
    if workload != "s":
        return project_app()
    app = project_app("stateful")
    await open_session(app)
    return app


async def main(args: argparse.Namespace) -> None:
    if args.only is not None:  # a fixed number of calls and nothing else, for instruction counts
        app = await app_for(args.only, args.workloads[0])
        scope, body = _request(args.workloads[0], app)
        for _ in range(args.calls):
            await call(app, scope, body, expected(app, args.workloads[0]))
        return
    for workload in args.workloads:
        apps = {"project": await app_for("project", workload), "fastapi": fastapi_app(workload)}
        for app in apps.values():
            await per_call_us(app, workload, 200)  # warm-up
        figures: dict[str, list[float]] = {name: [] for name in apps}
        for _ in range(args.rounds):
            for name, app in apps.items():  # interleaved, so drift hits both
                figures[name].append(await per_call_us(app, workload, args.calls))
        medians = {name: statistics.median(values) for name, values in figures.items()}
        print(
            f"{workload}: project {medians['project']:.1f} µs/call, FastAPI {medians['fastapi']:.1f} µs/call, "
            f"ratio (FastAPI/project time) {medians['fastapi'] / medians['project']:.2f}"
        )
        if args.gc:
            for name, app in apps.items():
                per_call, kinds = await cyclic_garbage(app, workload)
                print(f"  {name}: {per_call:.1f} cyclic objects per call {kinds[:12]}")
    if args.profile:
        apps = {"project": await app_for("project", args.profile), "fastapi": fastapi_app(args.profile)}
        for name in ("project", "fastapi"):
            scope, body = _request(args.profile, apps[name])
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(args.calls):
                await call(apps[name], scope, body, expected(apps[name], args.profile))
            profiler.disable()
            print(f"\n=== cProfile {name} {args.profile}, {args.calls} calls (cumulative) ===")
            pstats.Stats(profiler).sort_stats(args.sort).print_stats(args.top)
    assert COUNTS["opened"] == COUNTS["closed"], COUNTS


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("workloads", nargs="*", default=["d", "a"], help="d, da, a, b, s, r, rm, g, gm, tg, tgm (default: d and a)")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", choices=["d", "da", "a", "b", "s", "tg", "tgm", *FEATURE_WORKLOADS])
    parser.add_argument("--sort", default="cumulative")
    parser.add_argument("--top", type=int, default=60)
    parser.add_argument("--gc", action="store_true")
    parser.add_argument("--only", choices=["project", "fastapi"], help="make --calls calls of the first workload on one app, measure nothing")
    run(main(parser.parse_args()))
