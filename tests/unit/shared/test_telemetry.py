"""setup_telemetry and StageClock: which measurements carry exemplars; failing stages.

Exemplars only leave the process over OTLP (the Prometheus reader drops
them), so without OTLP the worker does not collect them; the standard
OTEL_METRICS_EXEMPLAR_FILTER variable still decides when it is set.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from worker.config import Settings
from worker.errors import ProviderAnswerInvalid
from worker.telemetry import StageClock, setup_telemetry


def _exemplars_after_one_stage(settings: Settings) -> int:
    reader = InMemoryMetricReader()
    telemetry = setup_telemetry(settings, span_exporter=InMemorySpanExporter(),
                                extra_metric_readers=(reader,))
    try:
        # Recorded inside a sampled span: the trace-based filter keeps it.
        with StageClock(telemetry.tracer, telemetry.metrics).stage("lock"):
            pass
        data = reader.get_metrics_data()
    finally:
        telemetry.shutdown()
    assert data is not None
    return sum(
        len(point.exemplars)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == "memfleet.stage.duration"
        for point in metric.data.data_points
    )


def test_no_exemplars_when_nothing_exports_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_METRICS_EXEMPLAR_FILTER", raising=False)
    assert _exemplars_after_one_stage(Settings(otel_exporter="none", metrics_port=None)) == 0


class _AcceptEverything(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # http.server calls it by this name
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def otlp_sink() -> Iterator[str]:
    """A loopback endpoint that accepts what shutdown flushes, so it does not retry."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _AcceptEverything)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_otlp_keeps_trace_based_exemplars(
    monkeypatch: pytest.MonkeyPatch, otlp_sink: str
) -> None:
    monkeypatch.delenv("OTEL_METRICS_EXEMPLAR_FILTER", raising=False)
    settings = Settings(otel_exporter="otlp", otel_endpoint=otlp_sink, metrics_port=None)
    assert _exemplars_after_one_stage(settings) == 1


def test_the_standard_variable_still_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_METRICS_EXEMPLAR_FILTER", "trace_based")
    assert _exemplars_after_one_stage(Settings(otel_exporter="none", metrics_port=None)) == 1


def test_a_failing_stage_is_an_error_span_and_still_timed() -> None:
    exporter = InMemorySpanExporter()
    telemetry = setup_telemetry(Settings(otel_exporter="none", metrics_port=None),
                                span_exporter=exporter)
    clock = StageClock(telemetry.tracer, telemetry.metrics)
    try:
        with telemetry.tracer.start_as_current_span("job") as job:
            with pytest.raises(TimeoutError), clock.stage("consolidate"), \
                    clock.provider_call("chat", "openai", "m"):
                raise TimeoutError("the model did not answer")
            # Both spans were current inside and are not any more.
            assert trace.get_current_span() is job
    finally:
        telemetry.shutdown()
    spans = {span.name: span for span in exporter.get_finished_spans()}
    for name in ("memfleet.consolidate", "chat m"):
        span = spans[name]
        assert span.status.status_code is StatusCode.ERROR
        assert [event.name for event in span.events] == ["exception"]
        assert span.end_time is not None
    assert spans["chat m"].parent.span_id == spans["memfleet.consolidate"].context.span_id
    assert spans["memfleet.consolidate"].parent.span_id == spans["job"].context.span_id
    assert "consolidate" in clock.timings_ms


def test_a_span_records_a_foreign_exception_by_type_and_ours_with_its_message() -> None:
    # The SDK would record str(exc) and a traceback with chained causes: a pydantic or
    # database error quotes the user's text there.
    marker = "Qz-user-text-7731"
    exporter = InMemorySpanExporter()
    telemetry = setup_telemetry(Settings(otel_exporter="none", metrics_port=None),
                                span_exporter=exporter)
    clock = StageClock(telemetry.tracer, telemetry.metrics)
    try:
        with pytest.raises(ValueError), clock.stage("extract"):
            try:
                raise KeyError(marker)
            except KeyError as cause:
                raise ValueError(f"cannot read {marker}") from cause
        with pytest.raises(ProviderAnswerInvalid), clock.span(
                "job", trace.SpanKind.CONSUMER, {}):
            raise ProviderAnswerInvalid("the answer was empty")
    finally:
        telemetry.shutdown()
    spans = {span.name: span for span in exporter.get_finished_spans()}
    foreign, ours = spans["memfleet.extract"], spans["job"]
    assert marker not in foreign.to_json()
    (event,) = foreign.events
    assert event.attributes["exception.type"] == "ValueError"
    assert "test_telemetry.py" in event.attributes["exception.stacktrace"]
    assert "exception.message" not in event.attributes
    assert foreign.status.description == "ValueError"
    assert ours.events[0].attributes["exception.message"] == "the answer was empty"
    assert ours.events[0].attributes["exception.type"] == "worker.errors.ProviderAnswerInvalid"
    assert ours.status.description == "ProviderAnswerInvalid: the answer was empty"


def test_openai_request_bodies_stay_out_of_the_log_even_with_http_requests_on() -> None:
    """openai logs each request's options (the user's messages) at DEBUG."""
    from worker.telemetry import HTTP_CLIENT_LOGGERS, configure_logging

    loggers = [logging.getLogger(name) for name in HTTP_CLIENT_LOGGERS]
    saved = [logger.level for logger in loggers]
    root_level = logging.getLogger().level
    try:
        configure_logging("DEBUG", http_requests=True)
        logging.getLogger().setLevel(logging.DEBUG)  # basicConfig leaves pytest's root as is
        assert logging.getLogger("httpx").isEnabledFor(logging.INFO)  # request lines on
        assert not logging.getLogger("openai").isEnabledFor(logging.DEBUG)
        configure_logging("DEBUG")
        assert not logging.getLogger("httpx").isEnabledFor(logging.INFO)
    finally:
        for logger, level in zip(loggers, saved, strict=True):
            logger.setLevel(level)
        logging.getLogger().setLevel(root_level)
