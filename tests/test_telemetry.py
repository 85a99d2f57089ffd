"""OpenTelemetry spans and metrics (known-faults B58) with the SDK's in-memory exporter and
metric reader, passed to the router's telemetry and to ``FastAPIInstrumentor`` explicitly (no
global provider is set, so other test modules are unaffected)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from conftest import Wire, mcp_settings, open_client, result_of
from fastapi import Depends, FastAPI
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from fastapi_mcp_ctx import Context, McpRouter, ToolError, mcp_context
from fastapi_mcp_ctx._server.telemetry import Telemetry

TRACE_A = "a" * 32
PARENT_B = "b" * 16
TRACE_C = "c" * 32
PARENT_D = "d" * 16


@dataclass
class Otel:
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def mcp_spans(self) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.attributes and "mcp.method.name" in s.attributes]

    def histogram(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        points: list[Any] = []
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        points.extend(metric.data.data_points)
        return points


@pytest.fixture
def otel() -> Iterator[Otel]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    yield Otel(exporter, reader, tracer_provider, meter_provider)
    tracer_provider.shutdown()
    meter_provider.shutdown()


def traced_app(otel: Otel, *, instrument: bool, **settings: Any) -> FastAPI:
    router = McpRouter(settings=mcp_settings(**settings))
    router.dispatcher.telemetry = Telemetry(
        router.settings, tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider
    )

    @router.tool()
    async def echo(text: str, ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """Echo, with the ids of the active span."""
        await ctx.state.set("last", text)
        return {"text": text, "trace_id": ctx.trace_id, "span_id": ctx.span_id}

    @router.tool()
    async def fail() -> str:
        """Always an anticipated error."""
        raise ToolError("nope")

    app = FastAPI()
    app.include_router(router)
    if instrument:
        FastAPIInstrumentor.instrument_app(app, tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    return app


async def test_one_call_under_fastapi_instrumentor_is_one_trace_nested_under_the_server_span(otel: Otel, era: str) -> None:
    async with open_client(traced_app(otel, instrument=True)) as client:
        wire = Wire(client)
        if era == "legacy":
            await wire.initialize()
            otel.exporter.clear()
        response = await wire.call_tool(era, "echo", {"text": "hi"})
    assert response.status_code == 200
    (mcp_span,) = otel.mcp_spans()
    server = [s for s in otel.spans() if s.kind == SpanKind.SERVER and s is not mcp_span and s.name.startswith("POST")]
    assert len(server) == 1, [s.name for s in otel.spans()]
    assert {s.context.trace_id for s in otel.spans()} == {server[0].context.trace_id}
    assert mcp_span.parent is not None and mcp_span.parent.span_id == server[0].context.span_id
    assert mcp_span.name == "tools/call echo" and mcp_span.kind == SpanKind.SERVER
    attributes = dict(mcp_span.attributes or {})
    version = "2025-11-25" if era == "legacy" else "2026-07-28"
    assert attributes["mcp.method.name"] == "tools/call"
    assert attributes["gen_ai.tool.name"] == "echo" and attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["mcp.protocol.version"] == version
    assert attributes["jsonrpc.request.id"] == str(result_request_id(response))
    assert attributes["network.transport"] == "tcp" and attributes["network.protocol.name"] == "http"
    assert "client.address" not in attributes and "client.port" not in attributes  # MCP_TELEMETRY_DETAIL=recommended
    assert ("mcp.session.id" in attributes) == (era == "legacy")
    if era == "legacy":
        assert attributes["mcp.session.id"] == wire.session
    assert "error.type" not in attributes
    structured = result_of(response)["structuredContent"]
    assert structured["trace_id"] == format(mcp_span.context.trace_id, "032x")
    assert structured["span_id"] == format(mcp_span.context.span_id, "016x")
    (state_span,) = [s for s in otel.spans() if s.name == "state set"]
    assert state_span.parent is not None and state_span.parent.span_id == mcp_span.context.span_id


def result_request_id(response: Any) -> Any:
    return response.json()["id"] if response.headers["content-type"].startswith("application/json") else None


async def both_parents(otel: Otel, *, instrument: bool) -> ReadableSpan:
    """One call with ``traceparent`` both in ``_meta`` (trace C) and in the HTTP header (trace A)."""
    async with open_client(traced_app(otel, instrument=instrument)) as client:
        meta = {"traceparent": f"00-{TRACE_C}-{PARENT_D}-01"}
        await Wire(client).call_tool("modern", "echo", {"text": "x"}, meta=meta, headers={"traceparent": f"00-{TRACE_A}-{PARENT_B}-01"})
    (span,) = otel.mcp_spans()
    assert format(span.context.trace_id, "032x") == TRACE_C
    return span


async def test_b58_meta_traceparent_is_the_parent_and_the_http_span_a_link(otel: Otel) -> None:
    span = await both_parents(otel, instrument=True)
    assert span.parent is not None and format(span.parent.span_id, "016x") == PARENT_D
    server = next(s for s in otel.spans() if s.kind == SpanKind.SERVER and s is not span and s.name.startswith("POST"))
    assert format(server.context.trace_id, "032x") == TRACE_A  # FastAPI continued the HTTP header
    assert [link.context.span_id for link in span.links] == [server.context.span_id]


async def test_b58_without_instrumentation_the_http_header_is_the_parent(otel: Otel, era: str) -> None:
    async with open_client(traced_app(otel, instrument=False)) as client:
        await Wire(client).call_tool(era, "echo", {"text": "x"}, headers={"traceparent": f"00-{TRACE_A}-{PARENT_B}-01"})
    span = next(s for s in otel.mcp_spans() if s.name == "tools/call echo")
    assert format(span.context.trace_id, "032x") == TRACE_A
    assert span.parent is not None and format(span.parent.span_id, "016x") == PARENT_B and span.parent.is_remote


async def test_b58_both_present_without_instrumentation_meta_wins_and_links_the_header(otel: Otel) -> None:
    span = await both_parents(otel, instrument=False)
    assert [format(link.context.span_id, "016x") for link in span.links] == [PARENT_B]


@pytest.mark.parametrize("bad", ["00-zz", f"00-{'0' * 32}-{PARENT_B}-01", "garbage", f"ff-{TRACE_A}-{PARENT_B}-01x"])
async def test_b58_a_malformed_traceparent_is_ignored_a_new_root(otel: Otel, bad: str) -> None:
    async with open_client(traced_app(otel, instrument=False)) as client:
        response = await Wire(client).call_tool(
            "modern", "echo", {"text": "x"}, meta={"traceparent": bad, "tracestate": "k=" + "v" * 600}, headers={"traceparent": bad}
        )
    assert response.status_code == 200 and result_of(response)["isError"] is False
    (span,) = otel.mcp_spans()
    assert span.parent is None


async def test_50_concurrent_calls_are_50_traces_and_50_histogram_points(otel: Otel) -> None:
    async with open_client(traced_app(otel, instrument=False)) as client:
        wire = Wire(client)

        async def one(n: int) -> None:
            response = await wire.call_tool("modern", "echo", {"text": str(n)})
            assert result_of(response)["structuredContent"]["text"] == str(n)

        async with anyio.create_task_group() as tg:
            for n in range(50):
                tg.start_soon(one, n)
    spans = otel.mcp_spans()
    assert len(spans) == 50 and len({s.context.trace_id for s in spans}) == 50
    (point,) = otel.histogram("mcp.server.operation.duration")
    assert point.count == 50 and point.sum > 0
    assert dict(point.attributes) == {
        "mcp.method.name": "tools/call", "mcp.protocol.version": "2026-07-28", "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "echo", "network.transport": "tcp", "network.protocol.name": "http", "network.protocol.version": "1.1",
    }  # fmt: skip
    assert otel.histogram("mcp.server.request.size") == [] and otel.histogram("mcp.server.response.size") == []


async def test_payload_size_histograms_when_asked(otel: Otel) -> None:
    """``MCP_TELEMETRY_PAYLOAD_METRICS=true``: one request-size and one response-size point per
    call, by method and tool only."""
    async with open_client(traced_app(otel, instrument=False, telemetry_payload_metrics=True)) as client:
        wire = Wire(client)
        for n in range(50):
            await wire.call_tool("modern", "echo", {"text": str(n)})
    (requests,) = otel.histogram("mcp.server.request.size")
    (responses,) = otel.histogram("mcp.server.response.size")
    assert requests.count == 50 and responses.count == 50 and responses.sum > 50 * 50
    assert dict(requests.attributes) == dict(responses.attributes) == {"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo"}


async def test_detail_recommended_adds_the_client_address_and_port(otel: Otel, era: str) -> None:
    async with open_client(traced_app(otel, instrument=False, telemetry_detail="recommended")) as client:
        wire = Wire(client)
        if era == "legacy":
            await wire.initialize()
        await wire.call_tool(era, "echo", {"text": "hi"})
    span = next(s for s in otel.mcp_spans() if s.name == "tools/call echo")
    attributes = dict(span.attributes or {})
    assert attributes["client.address"] == "127.0.0.1" and isinstance(attributes["client.port"], int)
    assert attributes["mcp.protocol.version"] and attributes["network.transport"] == "tcp"
    assert ("mcp.session.id" in attributes) == (era == "legacy")
    (point,) = [p for p in otel.histogram("mcp.server.operation.duration") if p.attributes.get("gen_ai.tool.name") == "echo"]
    assert "client.address" not in point.attributes  # never on a metric: one series per client
    assert otel.histogram("mcp.server.request.size") == []


async def test_detail_required_keeps_the_required_attributes_only(otel: Otel, era: str) -> None:
    async with open_client(traced_app(otel, instrument=False, telemetry_detail="required")) as client:
        wire = Wire(client)
        if era == "legacy":
            await wire.initialize()
        ok = await wire.call_tool(era, "echo", {"text": "hi"})
        await wire.call_tool(era, "missing", check=False)
    by_name = {s.name: dict(s.attributes or {}) for s in otel.mcp_spans()}
    assert by_name["tools/call echo"] == {
        "mcp.method.name": "tools/call", "gen_ai.tool.name": "echo", "jsonrpc.request.id": str(result_request_id(ok)),
    }  # fmt: skip
    assert by_name["tools/call missing"]["error.type"] == "-32602" and "mcp.session.id" not in by_name["tools/call missing"]
    points = {p.attributes.get("gen_ai.tool.name"): dict(p.attributes) for p in otel.histogram("mcp.server.operation.duration")}
    assert points["echo"] == {"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo"}
    assert points["missing"] == {"mcp.method.name": "tools/call", "gen_ai.tool.name": "missing", "error.type": "-32602"}


async def test_constant_attributes_are_shared_per_tool_and_bounded(otel: Otel) -> None:
    """The span name and constant attributes are made once per (method, tool, versions); a
    client naming ever new tools cannot grow that table past its bound."""
    from fastapi_mcp_ctx._server import telemetry as _telemetry

    router = McpRouter(settings=mcp_settings())
    telemetry = Telemetry(router.settings, tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    router.dispatcher.telemetry = telemetry
    app = FastAPI()
    app.include_router(router)
    async with open_client(app) as client:
        wire = Wire(client)
        for name in ("a", "b", "a", "b"):
            await wire.call_tool("modern", name, check=False)
        assert len(telemetry._shapes) == 2  # pyright: ignore[reportPrivateUsage]
        telemetry._shapes.update({("x", str(n), "v", None): telemetry._shapes[next(iter(telemetry._shapes))] for n in range(_telemetry._SHAPES_MAX)})  # pyright: ignore[reportPrivateUsage]
        await wire.call_tool("modern", "c", check=False)
    assert len(telemetry._shapes) == _telemetry._SHAPES_MAX + 2  # pyright: ignore[reportPrivateUsage]
    assert "tools/call c" in {s.name for s in otel.mcp_spans()}


async def test_one_histogram_point_per_call_and_error_types(otel: Otel) -> None:
    async with open_client(traced_app(otel, instrument=False)) as client:
        wire = Wire(client)
        await wire.call_tool("modern", "echo", {"text": "a"})
        await wire.call_tool("modern", "fail")
        await wire.call_tool("modern", "missing", check=False)
        await wire.modern("tools/list", {})
        await wire.modern("resources/read", {"uri": "note://x"}, check=False)  # not served on this router: -32601
    by_name = {s.name: dict(s.attributes or {}) for s in otel.mcp_spans()}
    assert by_name["resources/read"]["mcp.resource.uri"] == "note://x" and by_name["resources/read"]["error.type"] == "-32601"
    assert by_name["tools/call fail"]["error.type"] == "tool_error"
    assert by_name["tools/call missing"]["error.type"] == "-32602"
    assert by_name["tools/call missing"]["rpc.response.status_code"] == "-32602"
    assert "error.type" not in by_name["tools/list"] and "gen_ai.tool.name" not in by_name["tools/list"]
    points = otel.histogram("mcp.server.operation.duration")
    assert sum(p.count for p in points) == 5
    assert {p.attributes.get("error.type") for p in points} == {None, "tool_error", "-32602", "-32601"}
    assert all("mcp.resource.uri" not in p.attributes for p in points)


async def test_a_handler_span_when_asked(otel: Otel) -> None:
    async with open_client(traced_app(otel, instrument=False, telemetry_handler_span=True)) as client:
        await Wire(client).call_tool("modern", "echo", {"text": "a"})
    (mcp_span,) = otel.mcp_spans()
    (handler,) = [s for s in otel.spans() if s.name == "execute_tool echo"]
    assert handler.parent is not None and handler.parent.span_id == mcp_span.context.span_id
    (state_span,) = [s for s in otel.spans() if s.name == "state set"]
    assert state_span.parent is not None and state_span.parent.span_id == handler.context.span_id


def test_with_no_sdk_nothing_of_opentelemetry_jwt_or_cryptography_is_imported() -> None:
    """Idle cost: a served call (auto mode, no SDK) imports none of them beyond what FastAPI
    itself imports (FastAPI >= 0.16x loads the OpenTelemetry API for its own telemetry);
    ctx.trace_id still follows the traceparent; ``MCP_TELEMETRY=off`` builds no telemetry."""
    code = textwrap.dedent(
        """
        import asyncio, sys
        import httpx
        from fastapi import Depends, FastAPI
        baseline = set(sys.modules)
        from fastapi_mcp_ctx import Context, McpRouter, McpSettings, mcp_context

        router = McpRouter(settings=McpSettings(auth_mode="none"))

        @router.tool()
        async def tid(ctx: Context = Depends(mcp_context)) -> str | None:
            "Trace id."
            return ctx.trace_id

        app = FastAPI()
        app.include_router(router)

        async def main():
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
                meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                        "io.modelcontextprotocol/clientCapabilities": {}, "traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"}
                body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "tid", "arguments": {}, "_meta": meta}}
                headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
                           "mcp-method": "tools/call", "mcp-name": "tid"}
                response = await client.post("/mcp", json=body, headers=headers)
                print(response.json()["result"]["structuredContent"]["result"])
        asyncio.run(main())
        print(sorted(m for m in set(sys.modules) - baseline if m.split(".")[0] in ("opentelemetry", "jwt", "cryptography")))
        print(McpRouter(settings=McpSettings(auth_mode="none", telemetry="off")).dispatcher.telemetry)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout.split("\n")
    assert out[:3] == ["a" * 32, "[]", "None"], out


async def test_fastapi_native_telemetry_nests_the_mcp_span_too(otel: Otel) -> None:
    """FastAPI's own ``FastAPI(telemetry={...})`` server span is the current span as well."""
    router = McpRouter(settings=mcp_settings())
    router.dispatcher.telemetry = Telemetry(router.settings, tracer_provider=otel.tracer_provider)

    @router.tool()
    async def echo(text: str) -> str:
        """Echo."""
        return text

    app = FastAPI(telemetry={"tracer_provider": otel.tracer_provider, "metrics": False, "logs": False})
    app.include_router(router)
    async with open_client(app) as client:
        await Wire(client).call_tool("modern", "echo", {"text": "x"})
    (mcp_span,) = otel.mcp_spans()
    (server,) = [s for s in otel.spans() if s is not mcp_span and s.kind == SpanKind.SERVER]
    assert mcp_span.parent is not None and mcp_span.parent.span_id == server.context.span_id


def test_the_docs_example_runs_as_written() -> None:
    """docs/telemetry.md: the example (a global provider, so in its own process) gives one
    trace with the MCP span under FastAPI's server span."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "telemetry.md").read_text(encoding="utf-8")
    match = re.search(r"```python\n(.*?)```", text, re.DOTALL)
    assert match is not None
    check = textwrap.dedent(
        """
        import asyncio, httpx
        async def main():
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
                meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                        "io.modelcontextprotocol/clientCapabilities": {}}
                body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 2, "b": 3}, "_meta": meta}}
                headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
                           "mcp-method": "tools/call", "mcp-name": "add"}
                assert (await client.post("/mcp", json=body, headers=headers)).json()["result"]["structuredContent"] == {"result": 5}
        asyncio.run(main())
        spans = {s.name: s for s in exporter.get_finished_spans()}
        mcp, server = spans["tools/call add"], spans["POST /mcp"]
        assert mcp.parent.span_id == server.context.span_id and mcp.context.trace_id == server.context.trace_id
        print("ok")
        """
    )
    env = {**__import__("os").environ, "MCP_AUTH_MODE": "none"}
    out = subprocess.run([sys.executable, "-c", match.group(1) + check], capture_output=True, text=True, timeout=60, env=env)
    assert out.stdout.strip() == "ok", out.stderr


def test_bind_swaps_the_runner_and_keeps_every_other_field_of_the_prepared_call() -> None:
    """``CallSpan.bind`` puts its wrapper in the ``PreparedCall`` in place (no copy per request)
    and leaves every other field, including any added later, as it was."""
    from dataclasses import fields

    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider

    from fastapi_mcp_ctx._server.outcomes import PreparedCall
    from fastapi_mcp_ctx._server.telemetry import CallSpan, _Instruments, _Shape  # pyright: ignore[reportPrivateUsage]

    provider = SdkTracerProvider()
    inst = _Instruments("1", tracer_provider=provider)
    telemetry = Telemetry(mcp_settings(), tracer_provider=provider)
    span = CallSpan(telemetry, inst, inst.tracer.start_span("x"), _Shape("x", {}, {}, {}))
    values = {f.name: object() for f in fields(PreparedCall)}
    values["state"] = None
    call = PreparedCall(**values)  # pyright: ignore[reportArgumentType]
    assert span.bind(call, None) is call
    assert call.runner == span._run  # pyright: ignore[reportPrivateUsage]
    assert all(getattr(call, name) is value for name, value in values.items() if name != "runner")
    span.span.end()
