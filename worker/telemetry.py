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
import traceback
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import structlog
from opentelemetry import context as otel_context
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
from worker.errors import MemfleetError
from worker.log_redaction import RedactUrls, redact_event
from worker.metrics import Metrics
from worker.telemetry_ids import hashed_id, id_key

__all__ = ["StageClock", "Telemetry", "setup_telemetry"]

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


class JobArgumentsHidden(logging.Filter):
    """ARQ logs each job's start as ``→ <job>(user_id='alice', session_id='1')``: the
    arguments are personal data, and go. The rest of the line stays."""

    START = "%6.2fs → %s(%s)%s"

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == self.START and isinstance(record.args, tuple) and len(record.args) == 4:
            record.args = (*record.args[:2], "…", record.args[3])
        return True


def hide_job_arguments() -> None:
    """Install JobArgumentsHidden on ARQ's worker logger, once per process."""
    arq_log = logging.getLogger("arq.worker")
    if not any(isinstance(f, JobArgumentsHidden) for f in arq_log.filters):
        arq_log.addFilter(JobArgumentsHidden())


# Their request lines hold whole URLs (and credentials in them): quiet unless asked for
# (MEMFLEET_LOG_HTTP_REQUESTS), and redacted even then.
HTTP_CLIENT_LOGGERS = ("httpx", "httpx2", "httpcore", "httpcore2", "openai", "aiohttp")


def _not_pool_floor_retry(record: logging.LogRecord) -> bool:
    """asyncpg's pool logs a traceback each time it fails to reconnect its floor while
    PostgreSQL is away: memfleet says that once (worker.fleet.server_watch)."""
    return not record.getMessage().startswith("Failed to restore the pool connection floor")


def configure_logging(level: str = "INFO", *, http_requests: bool = False) -> None:
    """JSON logs on stderr, URLs redacted (worker.log_redaction); called once by the
    entry point. ``level``: a level name, in any case. ``http_requests``: the HTTP
    clients' own request lines too."""
    level = level.upper()
    logging.basicConfig(stream=sys.stderr, level=level, format="%(message)s")
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactUrls) for f in handler.filters):
            handler.addFilter(RedactUrls())
    for name in HTTP_CLIENT_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET if http_requests else logging.WARNING)
    pool_log = logging.getLogger("asyncpg.pool")
    if _not_pool_floor_retry not in pool_log.filters:
        pool_log.addFilter(_not_pool_floor_retry)
    if http_requests:
        # openai logs each request's options, the messages included, at DEBUG: user text.
        logging.getLogger("openai").setLevel(logging.INFO)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            add_trace_ids,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            redact_event,
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
    # Tokens of every provider call that answered, for the audit row.
    input_tokens: int = 0
    output_tokens: int = 0

    def stage(self, name: str, **attributes: Any) -> _Stage:
        """``with clock.stage("persist", ...) as span``: the stage's span, made current."""
        return _Stage(self, name, attributes)

    def span(self, name: str, kind: trace.SpanKind, attributes: dict[str, Any]) -> _Scoped:
        """``with clock.span(...) as span``: any other span of the job (the job's own
        CONSUMER span, a database call), made current; not a stage, so not timed."""
        return _Scoped(self.tracer, name, kind, attributes)

    def provider_call(self, operation: str, provider: str, model: str) -> _ProviderCall:
        """``with clock.provider_call(...) as done``: a gen_ai span around one provider call;
        ``done(response_model, input_tokens, output_tokens)`` records what it answered."""
        return _ProviderCall(self, operation, provider, model)


# The context managers below are classes, not @contextmanager generators
# wrapped around start_as_current_span: the same spans with two generator
# frames fewer each, and a job opens about a dozen of them.


# Spans are started with these, so the SDK never records an exception itself: its
# event carries str(exc) and a traceback, which quote user text when the error
# came from a library (a pydantic or database error cites the input).
_NO_SDK_RECORDING: dict[str, Any] = {"record_exception": False,
                                     "set_status_on_exception": False}


def exception_text(exc: BaseException) -> str:
    """An exception as spans and logs may show it: memfleet's own errors with their
    message (ours, never user text), any other by type only."""
    if isinstance(exc, MemfleetError):
        return f"{type(exc).__name__}: {exc}"
    return type(exc).__name__


def record_error(span: trace.Span, exc: BaseException) -> None:
    """The ``exception`` event and ERROR status of an escaping exception, without
    anything of it that can hold user text: the type, our own message, and the
    frames it passed (file, line, function; no exception message, no chain)."""
    if not span.is_recording():
        return
    kind = type(exc)
    frames = traceback.format_list(traceback.extract_tb(exc.__traceback__))
    attributes: dict[str, Any] = {
        "exception.type": (kind.__qualname__ if kind.__module__ == "builtins"
                           else f"{kind.__module__}.{kind.__qualname__}"),
        "exception.stacktrace": "".join(frames),
        "exception.escaped": "True",
    }
    if isinstance(exc, MemfleetError):
        attributes["exception.message"] = str(exc)
    span.add_event("exception", attributes)
    span.set_status(trace.Status(trace.StatusCode.ERROR, exception_text(exc)))


class _CurrentSpan:
    """A started span made current until exit; an escaping exception is recorded
    sanitised (``record_error``) and marks the span as an error, then it ends."""

    __slots__ = ("_span", "_token")

    def _enter(self, span: trace.Span) -> None:
        self._span = span
        self._token = otel_context.attach(trace.set_span_in_context(span))

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        otel_context.detach(self._token)
        if exc is not None:
            record_error(self._span, exc)
        self._span.end()


class _Scoped(_CurrentSpan):
    """``StageClock.span``: any other span of the job, made current."""

    __slots__ = ("_attributes", "_kind", "_name", "_tracer")

    def __init__(self, tracer: trace.Tracer, name: str, kind: trace.SpanKind,
                 attributes: dict[str, Any]) -> None:
        self._tracer, self._name, self._kind, self._attributes = tracer, name, kind, attributes

    def __enter__(self) -> trace.Span:
        self._enter(self._tracer.start_span(self._name, kind=self._kind,
                                            attributes=self._attributes, **_NO_SDK_RECORDING))
        return self._span


class _Stage(_CurrentSpan):
    __slots__ = ("_attributes", "_clock", "_name", "_started")

    def __init__(self, clock: StageClock, name: str, attributes: dict[str, Any]) -> None:
        self._clock, self._name, self._attributes = clock, name, attributes

    def __enter__(self) -> trace.Span:
        self._started = time.perf_counter()
        self._enter(self._clock.tracer.start_span(f"memfleet.{self._name}",
                                                   attributes=self._attributes or None,
                                                   **_NO_SDK_RECORDING))
        return self._span

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        elapsed = (time.perf_counter() - self._started) * 1000
        clock, name = self._clock, self._name
        clock.timings_ms[name] = round(clock.timings_ms.get(name, 0.0) + elapsed, 3)
        if clock.metrics is not None:
            # While the span is current: an exemplar, when kept, points at it.
            clock.metrics.stage_duration.record(elapsed / 1000, {"stage": name})
        super().__exit__(exc_type, exc, tb)


class _ProviderCall(_CurrentSpan):
    __slots__ = ("_clock", "_model", "_operation", "_provider")

    def __init__(self, clock: StageClock, operation: str, provider: str, model: str) -> None:
        self._clock, self._operation, self._provider, self._model = (
            clock, operation, provider, model)

    def __enter__(self) -> Callable[[str, int, int], None]:
        self._enter(self._clock.tracer.start_span(
            f"{self._operation} {self._model}", kind=trace.SpanKind.CLIENT,
            attributes={"gen_ai.operation.name": self._operation,
                        "gen_ai.provider.name": self._provider,
                        "gen_ai.request.model": self._model},
            **_NO_SDK_RECORDING,
        ))
        return self.done

    def done(self, response_model: str, input_tokens: int, output_tokens: int) -> None:
        self._span.set_attributes({"gen_ai.response.model": response_model,
                                   "gen_ai.usage.input_tokens": input_tokens,
                                   "gen_ai.usage.output_tokens": output_tokens})
        clock = self._clock
        clock.input_tokens += input_tokens
        clock.output_tokens += output_tokens
        metrics = clock.metrics
        if metrics is not None:
            for direction, count in (("input", input_tokens), ("output", output_tokens)):
                if count:
                    metrics.tokens.add(count, {"model": response_model, "direction": direction})


@dataclass(slots=True)
class Telemetry:
    """Tracer, metrics and their exporters for one process; built once at the entry point."""

    tracer: trace.Tracer
    metrics: Metrics
    capture_content: bool
    registry: CollectorRegistry
    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    id_key: bytes

    def hashed_id(self, value: str) -> str:
        """A session or user id as spans show it (worker.telemetry_ids)."""
        return hashed_id(value, self.id_key)

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
    # offering every measurement to the reservoir costs a good part of a
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
        id_key=id_key(settings.telemetry_id_key.get_secret_value()
                      if settings.telemetry_id_key else None),
    )

