"""Cost of authentication and of OpenTelemetry on one ``tools/call``, in process (not a timed test).

    .venv/bin/python bench/bench_auth_otel.py                  # both comparisons
    .venv/bin/python bench/bench_auth_otel.py --rounds 9 --calls 1000
    .venv/bin/python bench/bench_auth_otel.py --part otel --rounds 9  # the OpenTelemetry one only

Same driver as ``profile_call.py`` (each call a task of its own, ASGI apps called directly,
apps interleaved round by round, medians of rounds; process CPU time, see ``CLOCK``), workload ``a`` (``tools/call add(2, 3)``,
2025-11-25 era, no session):

* **auth**: the project with ``MCP_AUTH_MODE=jwt`` (RS256 keys from a JWKS served on loopback)
  and an ``Authorization: Bearer`` token on every request (default: a token verified once is
  remembered, ``MCP_JWT_CACHE_SECONDS``; also shown with 0: the signature checked on every
  request), beside a bare FastAPI route whose
  dependency verifies the same token with pyjwt (``jwt.decode`` with the public key, audience and
  issuer) and answers the same bytes. Also shown: both without any token (the unauthenticated
  baseline of each), so the verification's own share is visible.
* **otel**: the project with the OpenTelemetry SDK configured (``bench/servers/otel.py``: a
  ``TracerProvider`` whose ``BatchSpanProcessor`` feeds an exporter that drops everything, a
  ``MeterProvider`` whose periodic reader feeds one that drops everything): default settings,
  ``MCP_TELEMETRY_DETAIL=required``, and ``recommended`` with the payload-size histograms; beside
  the same app with ``MCP_TELEMETRY=off``, ``MCP_TELEMETRY=auto`` with no SDK (what every
  application without OpenTelemetry pays), and the **SDK floor**: the off app wrapped in just the
  SDK calls one traced request needs (one SERVER span, one duration record, attributes built
  once), which no instrumentation can go below.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import jwt  # noqa: E402
import profile_call as pc  # noqa: E402
from cryptography.hazmat.primitives import serialization  # noqa: E402
from fastapi import Depends, FastAPI, Header, HTTPException, Request, Response  # noqa: E402
from jwt_support import RESOURCE, RsaKey, claims, key_server  # noqa: E402

from fastapi_mcp_ctx import McpRouter, McpSettings  # noqa: E402
from fastapi_mcp_ctx._server.telemetry import Telemetry  # noqa: E402

ISSUER = "https://idp.example.test"


def project(**settings: Any) -> tuple[FastAPI, McpRouter]:
    values: dict[str, Any] = {"server_name": "bench", "session_mode": "stateless", "log_level": "warning", "auth_mode": "none"}
    values.update(settings)
    router = McpRouter(settings=McpSettings(**values))

    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    router.add_tool(add)
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    app.include_router(router)
    return app, router


def bare_fastapi(public_pem: bytes | None) -> FastAPI:
    """The ceiling: one POST route; with ``public_pem`` its dependency verifies the bearer JWT
    (the key loaded once, at start-up, as a careful hand-written app does)."""
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    public_key = serialization.load_pem_public_key(public_pem) if public_pem is not None else None

    def verify(authorization: str = Header()) -> dict[str, Any]:
        _scheme, _, token = authorization.partition(" ")
        try:
            return jwt.decode(token, public_key, algorithms=["RS256"], audience=RESOURCE, issuer=ISSUER, leeway=30)
        except jwt.PyJWTError as exc:
            raise HTTPException(401, "invalid token", headers={"WWW-Authenticate": 'Bearer error="invalid_token"'}) from exc

    async def answer(request: Request) -> Response:
        message = json.loads(await request.body())
        total = message["params"]["arguments"]["a"] + message["params"]["arguments"]["b"]
        return Response(content=pc._result(message["id"], {"result": total}, str(total)), media_type="application/json")

    if public_pem is None:
        app.add_api_route("/mcp", answer, methods=["POST"])
    else:

        async def verified(request: Request, _claims: dict[str, Any] = Depends(verify)) -> Response:
            return await answer(request)

        app.add_api_route("/mcp", verified, methods=["POST"])
    return app


def request_with(headers: Sequence[tuple[bytes, bytes]]) -> tuple[dict[str, Any], bytes]:
    scope, body = pc._request("a")
    scope["headers"] = [*scope["headers"], *headers]
    return scope, body


CLOCK = time.process_time
"""CPU time of this process (every thread: the SDK's export threads count): on a shared machine
wall time mostly measures the other processes; ``--wall`` uses ``time.perf_counter``."""


async def per_call_us(app: Any, scope: dict[str, Any], body: bytes, calls: int) -> float:
    start = CLOCK()
    for _ in range(calls):
        await pc.call(app, scope, body, pc.EXPECT["a"])
    return (CLOCK() - start) / calls * 1e6


async def compare(title: str, apps: dict[str, tuple[Any, dict[str, Any], bytes]], rounds: int, calls: int) -> dict[str, float]:
    for app, scope, body in apps.values():
        await per_call_us(app, scope, body, 200)  # warm-up
    figures: dict[str, list[float]] = {name: [] for name in apps}
    for _ in range(rounds):
        for name, (app, scope, body) in apps.items():
            figures[name].append(await per_call_us(app, scope, body, calls))
    medians = {name: statistics.median(values) for name, values in figures.items()}
    print(f"== {title}")
    for name, value in medians.items():
        print(f"  {name:<44} {value:8.1f} µs/call")
    return medians


def otel_providers() -> tuple[Any, Any]:
    """The SDK with exporters that drop everything (``bench/servers/otel.py``, as the harness's
    ``project-otel`` server configures it)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench.servers.otel import dropping_providers

    return dropping_providers()


def sdk_floor(app: Any, tracer_provider: Any, meter_provider: Any) -> Any:
    """``app`` (telemetry off) wrapped in the SDK calls alone that one traced call needs: a
    SERVER span with the default attribute set (start + end) and one duration histogram record
    with the metric's attributes, all built once: what no instrumenting code can go below."""
    from opentelemetry.trace import SpanKind

    tracer = tracer_provider.get_tracer("floor")
    duration = meter_provider.get_meter("floor").create_histogram("floor.duration", unit="s")
    metric = {
        "mcp.method.name": "tools/call", "mcp.protocol.version": "2025-11-25", "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add", "network.transport": "tcp", "network.protocol.name": "http", "network.protocol.version": "1.1",
    }  # fmt: skip
    span_attributes = {**metric, "jsonrpc.request.id": "1"}

    async def floor(scope: Any, receive: Any, send: Any) -> None:
        started = time.perf_counter()
        span = tracer.start_span("tools/call add", kind=SpanKind.SERVER, attributes=span_attributes)
        await app(scope, receive, send)
        span.end()
        duration.record(time.perf_counter() - started, metric)

    return floor


async def main(args: argparse.Namespace) -> None:
    if args.part in ("both", "auth") and args.only is None and not args.gc:
        await auth_part(args)
    if args.part in ("both", "otel"):
        await otel_part(args)


async def auth_part(args: argparse.Namespace) -> None:
    key = RsaKey.generate("bench")
    token = key.sign(claims(ISSUER, exp=int(time.time()) + 3600))
    bearer = [(b"authorization", f"Bearer {token}".encode())]
    with key_server(key) as idp:
        jwt_app, _ = project(auth_mode="jwt", jwt_jwks_url=idp.jwks_url, jwt_issuer=ISSUER, resource_url=RESOURCE)
        full_app, _ = project(
            auth_mode="jwt", jwt_jwks_url=idp.jwks_url, jwt_issuer=ISSUER, resource_url=RESOURCE, jwt_cache_seconds=0.0
        )
        plain_app, _ = project()
        auth = await compare(
            "auth: RS256 bearer verified per request (workload a)",
            {
                "project, MCP_AUTH_MODE=jwt, bearer": (jwt_app, *request_with(bearer)),
                "project, jwt, MCP_JWT_CACHE_SECONDS=0": (full_app, *request_with(bearer)),
                "FastAPI, pyjwt dependency, bearer": (bare_fastapi(key.public_pem()), *request_with(bearer)),
                "project, MCP_AUTH_MODE=none": (plain_app, *request_with([])),
                "FastAPI, no verification": (bare_fastapi(None), *request_with([])),
            },
            args.rounds,
            args.calls,
        )
    ratio = auth["FastAPI, pyjwt dependency, bearer"] / auth["project, MCP_AUTH_MODE=jwt, bearer"]
    base = auth["FastAPI, no verification"] / auth["project, MCP_AUTH_MODE=none"]
    full = auth["FastAPI, pyjwt dependency, bearer"] / auth["project, jwt, MCP_JWT_CACHE_SECONDS=0"]
    print(f"  ratio with a token (FastAPI time / project time) {ratio:.2f}; every request verified in full {full:.2f}; without a token {base:.2f}")



OTEL_VARIANTS = {
    "default": "project, OTel SDK (default)",
    "required": "project, OTel SDK, MCP_TELEMETRY_DETAIL=required",
    "recommended": "project, OTel SDK, detail=recommended + payload",
    "off": "project, MCP_TELEMETRY=off",
    "auto": "project, MCP_TELEMETRY=auto, no SDK",
    "floor": "SDK floor: off + 1 span + 1 histogram record",
    "http": "project, MCP_TELEMETRY=off, FastAPIInstrumentor",
    "sampled": "project, OTel SDK (default), ParentBased(TraceIdRatioBased(0.1))",
}
"""The otel part's variants: ``--only KEY`` makes ``--calls`` calls on that one and measures
nothing (for instruction counts: ``bench/callgrind_call.sh otel KEY``)."""


def otel_app(key: str, tracer_provider: Any, meter_provider: Any) -> Any:
    """The app of one :data:`OTEL_VARIANTS` key."""
    if key == "sampled":  # an application's own choice: 1 trace in 10 kept, metrics for every call
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from bench.servers.otel import dropping_providers

        tracer_provider = dropping_providers(ParentBased(TraceIdRatioBased(0.1)))[0]
        key = "default"
    if key in ("default", "required", "recommended"):
        settings: dict[str, Any] = {"default": {}, "required": {"telemetry_detail": "required"}}.get(
            key, {"telemetry_detail": "recommended", "telemetry_payload_metrics": True}
        )
        app, router = project(telemetry="on", **settings)
        router.dispatcher.telemetry = Telemetry(router.settings, tracer_provider=tracer_provider, meter_provider=meter_provider)
        return app
    app, _ = project(telemetry="auto" if key == "auto" else "off")
    if key == "floor":
        return sdk_floor(app, tracer_provider, meter_provider)
    if key == "http":  # for scale: what the HTTP instrumentation alone costs
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

        FastAPIInstrumentor.instrument_app(app, tracer_provider=tracer_provider, meter_provider=meter_provider)
    return app


async def gc_counts(app: Any, calls: int, freeze: bool) -> str:
    """Cyclic-GC work of ``calls`` calls on ``app``: collections per 1,000 calls by generation,
    objects the collector tracks (what a full collection walks) and the main thread's CPU time
    spent collecting (``gc.callbacks``, ``time.thread_time``), after a warm-up and, with ``freeze``, ``gc.collect()`` +
    ``gc.freeze()`` (what ``MCP_GC_FREEZE=1`` does at the first request)."""
    import gc

    scope, body = request_with([])
    for _ in range(300):
        await pc.call(app, scope, body, pc.EXPECT["a"])
    gc.collect()
    if freeze:
        gc.freeze()
    counts, spent, started = [0, 0, 0], [0.0], [0.0]

    def callback(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.thread_time()
        else:
            counts[info["generation"]] += 1
            spent[0] += time.thread_time() - started[0]

    gc.callbacks.append(callback)
    try:
        for _ in range(calls):
            await pc.call(app, scope, body, pc.EXPECT["a"])
        tracked, frozen = len(gc.get_objects()), gc.get_freeze_count()
    finally:
        gc.callbacks.remove(callback)
        if freeze:
            gc.unfreeze()
    per = 1000 / calls
    return (
        f"gen0 {counts[0] * per:6.1f}  gen1 {counts[1] * per:5.1f}  gen2 {counts[2] * per:4.2f} per 1,000 calls; "
        f"tracked {tracked:,} (+{frozen:,} frozen); {spent[0] / calls * 1e6:5.1f} µs/call collecting"
    )


async def otel_part(args: argparse.Namespace) -> None:
    tracer_provider, meter_provider = otel_providers()
    if args.gc:
        print(f"== cyclic GC per variant ({args.calls} calls each, after 300 warm-up calls)")
        for key in ("off", "floor", "default", "sampled"):
            for freeze in (False, True):
                app = otel_app(key, tracer_provider, meter_provider)
                print(f"  {key:<8} {'gc.freeze' if freeze else 'no freeze':<10} {await gc_counts(app, args.calls, freeze)}")
        tracer_provider.shutdown()
        meter_provider.shutdown()
        return
    if args.only is not None:
        app = otel_app(args.only, tracer_provider, meter_provider)
        scope, body = request_with([])
        for _ in range(args.calls):
            await pc.call(app, scope, body, pc.EXPECT["a"])
        tracer_provider.shutdown()
        meter_provider.shutdown()
        return
    otel = await compare(
        "otel: SDK with exporters that drop everything vs telemetry off (workload a)",
        {title: (otel_app(key, tracer_provider, meter_provider), *request_with([])) for key, title in OTEL_VARIANTS.items()},
        args.rounds,
        args.calls,
    )
    off = otel[OTEL_VARIANTS["off"]]
    sdk, lean = off / otel[OTEL_VARIANTS["default"]], off / otel[OTEL_VARIANTS["required"]]
    full = off / otel[OTEL_VARIANTS["recommended"]]
    idle = off / otel[OTEL_VARIANTS["auto"]]
    http = off / otel[OTEL_VARIANTS["http"]]
    floor = otel[OTEL_VARIANTS["floor"]]
    print(f"  ratio SDK on / off (off time / on time) {sdk:.2f}; detail=required {lean:.2f}; recommended + payload-size metrics {full:.2f}")
    print(f"  auto without SDK / off {idle:.2f}; SDK floor / off {off / floor:.2f}; default / floor {floor / otel[OTEL_VARIANTS['default']]:.2f}")
    print(f"  for scale: FastAPIInstrumentor alone (its HTTP spans and metrics) / off {http:.2f}")
    tracer_provider.shutdown()
    meter_provider.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--part", choices=("both", "auth", "otel"), default="both", help="which comparison to run")
    parser.add_argument("--wall", action="store_true", help="wall-clock time instead of process CPU time")
    parser.add_argument("--gc", action="store_true", help="with --part otel: count the cyclic GC's collections instead of timing")
    parser.add_argument("--only", choices=list(OTEL_VARIANTS), help="with --part otel: --calls calls on that variant, measure nothing")
    arguments = parser.parse_args()
    if arguments.wall:
        CLOCK = time.perf_counter
    pc.run(main(arguments))
