"""Tracing and logging: one span per stage, stage timings for the audit row.

No user content (messages, fact text) goes into spans or logs; ids of
sessions and users appear only hashed.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import structlog
from opentelemetry import trace
from opentelemetry.sdk.environment_variables import OTEL_METRICS_EXEMPLAR_FILTER
from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from prometheus_client import CollectorRegistry, generate_latest

from worker.config import Settings
from worker.metrics import Metrics
from worker.telemetry_ids import hashed_id

__all__ = ["StageClock", "Telemetry", "hashed_id", "setup_telemetry"]

TRACER_NAME = "memfleet.worker"


def add_trace_ids(
    logger: Any, method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """Put the current span's trace_id and span_id on every log line."""
    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        event["trace_id"] = format(context.trace_id, "032x")
        event["span_id"] = format(context.span_id, "016x")
    return event


def configure_logging(level: str = "INFO") -> None:
    """JSON logs on stderr; called once by the entry point."""
    logging.basicConfig(stream=sys.stderr, level=level, format="%(message)s")
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            add_trace_ids,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        # stderr: stdout stays free for command output (and the console span exporter)
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )


@dataclass(slots=True)
class StageClock:
    """Opens a span per stage and keeps each stage's milliseconds for the audit row."""

    tracer: trace.Tracer
    metrics: Metrics | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str, **attributes: Any) -> Iterator[trace.Span]:
        started = time.perf_counter()
        with self.tracer.start_as_current_span(f"memfleet.{name}") as span:
            for key, value in attributes.items():
                span.set_attribute(key, value)
            try:
                yield span
            finally:
                elapsed = (time.perf_counter() - started) * 1000
                self.timings_ms[name] = round(self.timings_ms.get(name, 0.0) + elapsed, 3)
                if self.metrics is not None:
                    self.metrics.stage_duration.record(elapsed / 1000, {"stage": name})

    @contextmanager
    def provider_call(
        self, operation: str, provider: str, model: str
    ) -> Iterator[Callable[[str, int, int], None]]:
        """A gen_ai span around one provider call; yields ``done(response_model, in, out)``."""
        with self.tracer.start_as_current_span(
            f"{operation} {model}", kind=trace.SpanKind.CLIENT,
            attributes={"gen_ai.operation.name": operation, "gen_ai.provider.name": provider,
                        "gen_ai.request.model": model},
        ) as span:

            def done(response_model: str, input_tokens: int, output_tokens: int) -> None:
                span.set_attribute("gen_ai.response.model", response_model)
                span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
                span.set_attribute("gen_ai.usage.output_tokens", output_tokens)
                if self.metrics is not None:
                    for direction, count in (("input", input_tokens), ("output", output_tokens)):
                        if count:
                            self.metrics.tokens.add(
                                count, {"model": response_model, "direction": direction}
                            )

            yield done


@dataclass(slots=True)
class Telemetry:
    """Tracer, metrics and their exporters for one process; built once at the entry point."""

    tracer: trace.Tracer
    metrics: Metrics
    capture_content: bool
    registry: CollectorRegistry
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    def render_metrics(self) -> bytes:
        return bytes(generate_latest(self.registry))

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


def setup_telemetry(
    settings: Settings,
    service_name: str = "memfleet-worker",
    *,
    span_exporter: SpanExporter | None = None,
    extra_metric_readers: tuple[MetricReader, ...] = (),
) -> Telemetry:
    """Exporters by settings: none (default), console or otlp; /metrics is always available.

    ``span_exporter`` (tests) receives every span synchronously.
    """
    from opentelemetry.exporter.prometheus import PrometheusMetricReader

    resource = Resource.create({
        "service.name": service_name,
        "service.instance.id": f"{socket.gethostname()}-{os.getpid()}",
    })
    exporting = span_exporter is not None or settings.otel_exporter != "none"
    # Nothing exports spans: keep their contexts (trace ids in logs, links) but
    # do not record them, which costs a fraction of a recorded span.
    tracer_provider = TracerProvider(
        resource=resource, sampler=None if exporting else ALWAYS_OFF
    )
    if span_exporter is not None:
        tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    elif settings.otel_exporter == "console":
        tracer_provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    elif settings.otel_exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        endpoint = (settings.otel_endpoint or "http://127.0.0.1:4318").rstrip("/")
        tracer_provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces"))
        )
    registry = CollectorRegistry()
    readers: list[MetricReader] = [
        PrometheusMetricReader(registry=registry, scope_info_enabled=False),
        *extra_metric_readers,
    ]
    if settings.otel_exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        endpoint = (settings.otel_endpoint or "http://127.0.0.1:4318").rstrip("/")
        readers.append(PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=f"{endpoint}/v1/metrics"), export_interval_millis=15_000,
        ))
    # Exemplars travel only over OTLP: the Prometheus reader drops them, and
    # offering every measurement to the reservoir costs about a third of a
    # record. The standard variable still chooses when it is set.
    exemplars_wanted = (settings.otel_exporter == "otlp"
                        or OTEL_METRICS_EXEMPLAR_FILTER in os.environ)
    meter_provider = MeterProvider(
        resource=resource, metric_readers=readers,
        exemplar_filter=None if exemplars_wanted else AlwaysOffExemplarFilter(),
    )
    return Telemetry(
        tracer=tracer_provider.get_tracer(TRACER_NAME),
        metrics=Metrics(meter_provider.get_meter(TRACER_NAME)),
        capture_content=settings.capture_content,
        registry=registry,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
    )

