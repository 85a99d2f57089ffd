"""OpenTelemetry spans and metrics for MCP requests (the OpenTelemetry MCP semantic conventions).

One SERVER span per MCP HTTP request, named ``"{mcp.method.name} {target}"`` (``tools/call
add``; ``tools/list`` alone when there is no target). Its attributes, by ``MCP_TELEMETRY_DETAIL``:
``required``: ``mcp.method.name``, ``jsonrpc.request.id``, for ``tools/call`` ``gen_ai.tool.name``
(``prompts/get``: ``gen_ai.prompt.name``; ``resources/*``: ``mcp.resource.uri``) and, on failure,
``error.type`` (the JSON-RPC error code, ``tool_error`` for an ``isError`` result, or the
exception's class) with ``rpc.response.status_code``; ``standard`` (default) adds
``mcp.protocol.version``, ``gen_ai.operation.name = "execute_tool"``, ``mcp.session.id`` (2025
sessions) and ``network.transport`` / ``network.protocol.name`` / ``.version``; ``recommended``
adds ``client.address`` and ``client.port``. The name and the constant attributes are made once
per (method, target, protocol version, HTTP version) and reused (:class:`_Shape`).
``ctx.state`` operations are child spans (``state get`` …).

Parent of the span, in order (known-faults B58):

1. ``params._meta.traceparent`` (+ ``tracestate``), extracted with the globally configured
   propagator: the span is its child, and links to the current span (the HTTP server span of
   ``FastAPIInstrumentor``) when there is one;
2. else the current span (``FastAPIInstrumentor`` continued the HTTP ``traceparent``);
3. else the HTTP ``traceparent`` header itself (no HTTP instrumentation);
4. else a new root. An invalid value is treated as absent, never an error. ``baggage`` is not
   copied into attributes.

With no ``traceparent`` in ``_meta`` nor in the headers (the envelope read both) the current
context is the parent as it is: no propagator runs.

Metrics: ``mcp.server.operation.duration`` (histogram, seconds) with the low-cardinality
attributes of the span's set (no session or request id, no client address); with
``MCP_TELEMETRY_PAYLOAD_METRICS=true`` also ``mcp.server.request.size`` /
``mcp.server.response.size`` (histograms, bytes; the conventions define none for MCP) by
``mcp.method.name`` and ``gen_ai.tool.name`` only.

``MCP_TELEMETRY``: ``auto`` (default) turns this on once the application installed an SDK
tracer or meter provider (looked for at most once a second; nothing of OpenTelemetry is imported
by this module before: until then a request costs a clock read), ``on`` always (the API's no-op provider when no SDK is set), ``off``
never. ``MCP_TELEMETRY_HANDLER_SPAN=true`` adds an INTERNAL child span around the tool's run.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from .._transport.streams import Outbound, Reply
from .._wire.jsonrpc import dumps
from ..settings import McpSettings
from .http import BODY_SCOPE_KEY

__all__ = ["CallSpan", "Telemetry", "TracedBackend"]

_DURATION_BUCKETS: Final = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
_SIZE_BUCKETS: Final = (128.0, 512.0, 2048.0, 8192.0, 32768.0, 131072.0, 524288.0, 2097152.0)
_TARGETED: Final = {"tools/call": "name", "prompts/get": "name"}
_SHAPES_MAX: Final = 1024


class _Shape(NamedTuple):
    """What every request of one ``(method, target, protocol version, HTTP version)`` shares."""

    name: str  # the span name, "tools/call add"
    span: dict[str, Any]  # its constant span attributes (copied per request)
    metric: dict[str, Any]  # the duration histogram's attributes (shared and never changed: the SDK
    # copies them with dict(), whose fast path takes a dict, not a MappingProxyType)
    sized: dict[str, Any]  # the payload-size histograms' attributes (shared the same way)


class _Instruments:
    """The tracer and instruments, made once OpenTelemetry is in use."""

    def __init__(self, version: str, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        from opentelemetry import context, metrics, propagate, trace

        self.trace = trace
        self.server_kind = trace.SpanKind.SERVER
        self.context = context
        self.propagate = propagate
        self.tracer = trace.get_tracer("fastapi_mcp_ctx", version, tracer_provider=tracer_provider)
        meter = metrics.get_meter("fastapi_mcp_ctx", version, meter_provider=meter_provider)
        self.duration = meter.create_histogram(
            "mcp.server.operation.duration",
            unit="s",
            description="Duration of MCP requests as observed by the server",
            explicit_bucket_boundaries_advisory=list(_DURATION_BUCKETS),
        )
        self.request_size = meter.create_histogram(
            "mcp.server.request.size", unit="By", description="Size of MCP request bodies",
            explicit_bucket_boundaries_advisory=list(_SIZE_BUCKETS),
        )  # fmt: skip
        self.response_size = meter.create_histogram(
            "mcp.server.response.size", unit="By", description="Size of MCP response messages",
            explicit_bucket_boundaries_advisory=list(_SIZE_BUCKETS),
        )  # fmt: skip


def _sdk_configured() -> bool:
    trace = sys.modules.get("opentelemetry.trace")
    if trace is not None and not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return True
    metrics = sys.modules.get("opentelemetry.metrics")
    if metrics is None:
        return False
    from opentelemetry.metrics import NoOpMeterProvider

    provider = metrics.get_meter_provider()
    return type(provider).__name__ != "_ProxyMeterProvider" and not isinstance(provider, NoOpMeterProvider)


class Telemetry:
    """Per-router telemetry switch (see the module docstring); :meth:`start` opens a span.

    Args:
        settings: ``telemetry`` (auto/on/off), ``telemetry_handler_span``, ``server_version``.
        tracer_provider / meter_provider: explicit providers (default: the global ones); given
            either, telemetry is on whatever ``MCP_TELEMETRY`` says.
    """

    def __init__(self, settings: McpSettings, *, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        self.mode = settings.telemetry
        self.handler_span = settings.telemetry_handler_span
        self.payload_metrics = settings.telemetry_payload_metrics
        self.detail = settings.telemetry_detail
        self._shapes: dict[tuple[str, str | None, str, Any], _Shape] = {}
        self._traced_states: _TracedStates | None = None
        self._version = settings.server_version
        self._instruments: _Instruments | None = None
        self.next_check = math.inf if self.mode == "off" else 0.0
        """Before this ``time.monotonic()`` value :meth:`start` answers None (auto mode: when to
        look for an SDK provider again; -inf once on): a caller may skip the call."""
        if tracer_provider is not None or meter_provider is not None:
            self._instruments = _Instruments(self._version, tracer_provider, meter_provider)
            self.next_check = -math.inf

    def instruments(self) -> _Instruments | None:
        """The instruments when telemetry is on now, else None (cheap: called per request)."""
        if self._instruments is not None or self.mode == "off":
            return self._instruments
        if self.mode == "auto":
            now = time.monotonic()
            if now < self.next_check:
                return None
            if not _sdk_configured():
                self.next_check = now + 1.0  # an SDK installed later is seen within a second
                return None
        self._instruments = _Instruments(self._version)
        self.next_check = -math.inf
        return self._instruments

    def start(self, message: Any, envelope: Any, scope: Mapping[str, Any], session_id: str | None) -> CallSpan | None:
        """Open the SERVER span of one JSON-RPC request (None when telemetry is off)."""
        inst = self._instruments
        if inst is None:
            if time.monotonic() < self.next_check:  # instruments()'s own test, without its call
                return None
            if (inst := self.instruments()) is None:
                return None
        return self._open(inst, message, envelope, scope, session_id)

    def _open(self, inst: _Instruments, message: Any, envelope: Any, scope: Mapping[str, Any], session_id: str | None) -> CallSpan:
        """:meth:`start` once telemetry is on (a function of its own: off, a request touches none of it)."""
        method: str = message.method
        params: Mapping[str, Any] = message.params
        shape = self._shape(method, params, envelope.protocol_version, scope.get("http_version"))
        attributes = shape.span.copy()  # the SDK copies it again into its BoundedAttributes
        attributes["jsonrpc.request.id"] = str(message.id)  # (jsonrpc.protocol.version: only when not 2.0)
        if session_id is not None and self.detail != "required":
            attributes["mcp.session.id"] = session_id
        if method.startswith("resources/") and isinstance(uri := params.get("uri"), str):
            attributes["mcp.resource.uri"] = uri  # on the span only: too many values for a metric
        if self.detail == "recommended" and (client := scope.get("client")):
            attributes["client.address"] = str(client[0])
            attributes["client.port"] = int(client[1])
        # No traceparent in _meta nor in the headers (the envelope read both): the current
        # context is the parent (FastAPI's span, or none: a new root), no propagator needed.
        parent, links = self._parent(inst, params, scope) if "traceparent" in envelope.trace else (None, None)
        # The current context, read once: the span's parent when no traceparent chose another,
        # and the context the tool runs in with the span set (CallSpan._run).
        current = inst.context.get_current()
        span = inst.tracer.start_span(shape.name, context=parent or current, kind=inst.server_kind, attributes=attributes, links=links)
        if self.payload_metrics and isinstance(body := scope.get(BODY_SCOPE_KEY), bytes):
            inst.request_size.record(len(body), shape.sized)
        return CallSpan(self, inst, span, shape, current)

    def traced_states(self, factory: Any, inst: _Instruments) -> _TracedStates:
        """``factory`` (a ``state_factory``) whose states are traced; made once per factory."""
        traced = self._traced_states
        if traced is None or traced.factory is not factory:
            traced = self._traced_states = _TracedStates(factory, inst)
        return traced

    def _shape(self, method: str, params: Mapping[str, Any], version: str, http_version: Any) -> _Shape:
        """The span name and the constant attributes of ``(method, target, versions)``, made
        once and reused (at most ``_SHAPES_MAX`` kept: targets come from the client)."""
        target = params.get(_TARGETED[method]) if method in _TARGETED else None
        target = target if isinstance(target, str) else None
        key = (method, target, version, http_version)
        shape = self._shapes.get(key)
        if shape is not None:
            return shape
        standard = self.detail != "required"
        metric: dict[str, Any] = {"mcp.method.name": method}
        if standard:
            metric["mcp.protocol.version"] = version
        if method == "tools/call":
            if standard:
                metric["gen_ai.operation.name"] = "execute_tool"
            if target is not None:
                metric["gen_ai.tool.name"] = target
        elif method == "prompts/get" and target is not None:
            metric["gen_ai.prompt.name"] = target
        if standard:
            metric["network.transport"] = "tcp"
            metric["network.protocol.name"] = "http"
            if isinstance(http_version, str):
                metric["network.protocol.version"] = http_version
        sized = {"mcp.method.name": method, "gen_ai.tool.name": target} if method == "tools/call" and target else {"mcp.method.name": method}
        shape = _Shape(f"{method} {target}" if target else method, dict(metric), metric, sized)
        if len(self._shapes) < _SHAPES_MAX:
            self._shapes[key] = shape
        return shape

    @staticmethod
    def _parent(inst: _Instruments, params: Mapping[str, Any], scope: Mapping[str, Any]) -> tuple[Any, list[Any] | None]:
        trace = inst.trace
        current = trace.get_current_span().get_span_context()
        meta = params.get("_meta")
        if isinstance(meta, dict) and "traceparent" in meta:
            carrier = {k: v for k in ("traceparent", "tracestate") if isinstance(v := meta.get(k), str)}  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            context = inst.propagate.extract(carrier)
            if trace.get_current_span(context).get_span_context().is_valid:
                http = current if current.is_valid else Telemetry._from_headers(inst, scope)
                return context, [trace.Link(http)] if http is not None and http.is_valid else []
        if current.is_valid:
            return None, None
        http = Telemetry._from_headers(inst, scope)
        if http is not None and http.is_valid:
            return inst.trace.set_span_in_context(inst.trace.NonRecordingSpan(http)), None
        return None, None

    @staticmethod
    def _from_headers(inst: _Instruments, scope: Mapping[str, Any]) -> Any:
        """The span context of the HTTP ``traceparent`` / ``tracestate`` headers, or None."""
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope.get("headers", ()):
            name = raw_name.decode("latin-1").lower()
            if name in ("traceparent", "tracestate"):
                headers[name] = raw_value.decode("latin-1")
        if "traceparent" not in headers:
            return None
        return inst.trace.get_current_span(inst.propagate.extract(headers)).get_span_context()


class CallSpan:
    """One request's span and its metric attributes; :meth:`finish` ends both."""

    __slots__ = ("_current", "_inst", "_runner", "_shape", "_started", "_telemetry", "span")

    def __init__(self, telemetry: Telemetry, inst: _Instruments, span: Any, shape: _Shape, current: Any = None) -> None:
        self._telemetry = telemetry
        self._inst = inst
        self.span = span
        self._shape = shape
        self._runner: Any = None
        self._current = current  # the context the request arrived in (None: read it when the tool runs)
        self._started = time.perf_counter()

    @property
    def ids(self) -> tuple[str, str]:
        """``(trace_id, span_id)`` in W3C hex (32 and 16 characters)."""
        context = self.span.get_span_context()  # (int.to_bytes().hex(): a third of format()'s cost)
        return context.trace_id.to_bytes(16, "big").hex(), context.span_id.to_bytes(8, "big").hex()

    def finish(self, reply: Reply | None, error_type: str | None = None) -> None:
        """End the span: ``error.type`` from the reply (JSON-RPC error code, ``tool_error``)
        or ``error_type``; record the duration and the response size."""
        metric = self._shape.metric
        if reply is not None:
            message = reply.message
            if "error" in message:
                error = message["error"]
                if isinstance(error, dict):
                    error_type = str(error.get("code"))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
                    self.span.set_attribute("rpc.response.status_code", error_type)
            elif (result := message.get("result")) is not None and isinstance(result, dict) and result.get("isError") is True:  # pyright: ignore[reportUnknownMemberType]
                error_type = "tool_error"
            if self._telemetry.payload_metrics:
                self._inst.response_size.record(len(dumps(message)), self._shape.sized)
        if error_type is not None:
            metric = {**metric, "error.type": error_type}
            self.span.set_attribute("error.type", error_type)
            self.span.set_status(self._inst.trace.Status(self._inst.trace.StatusCode.ERROR))
        self.span.end()
        self._inst.duration.record(time.perf_counter() - self._started, metric)

    def bind(self, outcome: Any, state: Any) -> Any:
        """The outcome of ``Dispatcher.serve`` with this span attached: a :class:`Reply` ends
        it now; a ``PreparedCall`` gets a runner that runs the tool with the span current (so
        ``ctx.state`` spans nest and ``ctx.trace_id`` / ``ctx.span_id`` name it) and ends it."""
        if isinstance(outcome, Reply):
            self.finish(outcome)
            return outcome
        self._runner = outcome.runner
        if state is not None:
            state.trace_id, state.span_id = self.ids
            if state.state_factory is not None:
                state.state_factory = self._telemetry.traced_states(state.state_factory, self._inst)
        outcome.runner = self._run  # in place: the PreparedCall is this request's own
        return outcome

    async def _run(self, outbound: Outbound) -> Reply | None:
        """The tool's runner with this span current; ends the span with its reply."""
        inst = self._inst
        token = inst.context.attach(inst.trace.set_span_in_context(self.span, self._current))
        try:
            if self._telemetry.handler_span:
                with inst.tracer.start_as_current_span(f"execute_tool {self._shape.metric.get('gen_ai.tool.name', '')}".strip()):
                    reply = await self._runner(outbound)
            else:
                reply = await self._runner(outbound)
        except BaseException as exc:
            self.finish(None, type(exc).__qualname__)
            raise
        finally:
            inst.context.detach(token)
        self.finish(reply, None if reply is not None else "cancelled")
        return reply


class _TracedStates:
    """A ``state_factory`` whose states have their backend traced (:class:`TracedBackend`)."""

    __slots__ = ("_inst", "factory")

    def __init__(self, factory: Any, inst: _Instruments) -> None:
        self.factory = factory
        self._inst = inst

    def __call__(self, tenant: str | None) -> Any:
        return TracedBackend.wrap(self.factory(tenant), self._inst)


class TracedBackend:
    """A ``StateBackend`` whose every operation is a child span ``state <operation>`` of the
    current span (``ctx.state`` under telemetry)."""

    _OPERATIONS: Final = ("get", "set", "delete", "take", "get_many", "set_many", "delete_many", "scan")

    def __init__(self, backend: Any, inst: _Instruments) -> None:
        self._backend = backend
        self._inst = inst

    @classmethod
    def wrap(cls, state: Any, inst: _Instruments) -> Any:
        """``state`` (a ``ContextState``) with its backend traced."""
        state._backend = cls(state._backend, inst)  # noqa: SLF001 - the one swap, here
        return state

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._backend, name)
        if name not in self._OPERATIONS:
            return attribute
        tracer = self._inst.tracer

        async def traced(*args: Any, **kwargs: Any) -> Any:
            with tracer.start_as_current_span(f"state {name}", attributes={"db.operation.name": name}):
                return await attribute(*args, **kwargs)

        return traced
