"""The OpenTelemetry SDK as the benchmarks configure it: everything recorded, nothing sent.

A ``TracerProvider`` whose ``BatchSpanProcessor`` feeds an exporter that drops every batch, and a
``MeterProvider`` whose ``PeriodicExportingMetricReader`` (every 5 s) feeds one that drops every
collection: the SDK's whole per-request work (spans built, sampled, queued and handed to the
worker thread; measurements aggregated and collected) without any I/O. Used in process by
``bench/bench_auth_otel.py`` and, with ``BENCH_OTEL=1``, by ``examples/bench_app.py`` (harness
server ``project-otel``), which installs the providers globally so that the router's
``MCP_TELEMETRY=auto`` finds them. Needs ``opentelemetry-sdk`` (the project's ``otel`` extra).
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, PeriodicExportingMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

__all__ = ["dropping_providers", "install_globally"]


class DropSpans(SpanExporter):
    """Accepts every batch of spans and keeps nothing."""

    def export(self, spans: Any) -> SpanExportResult:
        return SpanExportResult.SUCCESS


class DropMetrics(MetricExporter):
    """Accepts every collection of metrics and keeps nothing."""

    def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        return None


def dropping_providers(sampler: Any = None) -> tuple[TracerProvider, MeterProvider]:
    """A new ``(tracer_provider, meter_provider)`` pair exporting to :class:`DropSpans` / :class:`DropMetrics`
    (``sampler``: the ``TracerProvider``'s; default the SDK's, ``ParentBased(ALWAYS_ON)``)."""
    tracer_provider = TracerProvider(sampler=sampler)
    tracer_provider.add_span_processor(BatchSpanProcessor(DropSpans()))
    reader = PeriodicExportingMetricReader(DropMetrics(), export_interval_millis=5000)
    return tracer_provider, MeterProvider(metric_readers=[reader])


def install_globally() -> tuple[TracerProvider, MeterProvider]:
    """:func:`dropping_providers` set as the global providers (``trace.set_tracer_provider``,
    ``metrics.set_meter_provider``), as an application configuring OpenTelemetry does."""
    from opentelemetry import metrics, trace

    tracer_provider, meter_provider = dropping_providers()
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    return tracer_provider, meter_provider
