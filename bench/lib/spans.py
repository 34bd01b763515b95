"""Each job's timing, read from the spans the job itself opens.

``setup_telemetry(settings, span_exporter=JobSpans())`` hands the exporter
every span as it ends. A job is one trace: its CONSUMER span ("process
<queue>", carrying the ARQ job id) ends last, after its stage spans
(``memfleet.<stage>``), its gen_ai CLIENT spans (one per provider call) and
any other span (such as the neighbour query). When the CONSUMER span ends,
the trace becomes a ``JobTiming``.

Only the OpenTelemetry SDK is imported here: bench.ab.ab_worker uses this module
against older revisions of the worker too.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind

JOB_ID = "messaging.message.id"
GEN_AI_OPERATION = "gen_ai.operation.name"
STAGE_PREFIX = "memfleet."


@dataclass(slots=True)
class JobTiming:
    job_id: str
    start_ns: int  # the CONSUMER span, time.time_ns() clock
    end_ns: int
    stages: dict[str, float]  # stage -> ms (a stage opened twice is summed)
    provider: dict[str, float]  # stage the provider calls ran in -> ms
    other: dict[str, float]  # any other span, "<stage>: <name>" inside a stage -> ms
    # The time at least one provider call was running: calls made side by side
    # (the summary beside extraction) count once.
    provider_wall_ms: float = 0.0

    @property
    def job_ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6

    @property
    def provider_ms(self) -> float:
        return sum(self.provider.values())

    @property
    def outside_llm_ms(self) -> float:
        """The job's CONSUMER span less the time a provider call was running."""
        return self.job_ms - (self.provider_wall_ms or self.provider_ms)

    def stage_less_provider(self, stage: str) -> float | None:
        if stage not in self.stages:
            return None
        return self.stages[stage] - self.provider.get(stage, 0.0)

    def as_json(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "job_ms": self.job_ms,
                "outside_llm_ms": self.outside_llm_ms, "stages": self.stages,
                "provider": self.provider, "other": self.other}


def _ms(span: ReadableSpan) -> float:
    return ((span.end_time or 0) - (span.start_time or 0)) / 1e6


def _is_provider_call(span: ReadableSpan) -> bool:
    return GEN_AI_OPERATION in (span.attributes or {})


def _timing(job: ReadableSpan, spans: Sequence[ReadableSpan]) -> JobTiming:
    by_id = {s.context.span_id: s for s in spans if s.context is not None}

    def ancestors(span: ReadableSpan) -> list[ReadableSpan]:
        found, parent = [], span.parent
        while parent is not None and parent.span_id in by_id:
            found.append(by_id[parent.span_id])
            parent = by_id[parent.span_id].parent
        return found

    stages: dict[str, float] = defaultdict(float)
    provider: dict[str, float] = defaultdict(float)
    other: dict[str, float] = defaultdict(float)
    calls: list[tuple[int, int]] = []
    for span in spans:
        if span.name.startswith(STAGE_PREFIX):
            stages[span.name[len(STAGE_PREFIX):]] += _ms(span)
            continue
        above = ancestors(span)
        stage = next((a.name[len(STAGE_PREFIX):] for a in above
                      if a.name.startswith(STAGE_PREFIX)), None)
        if not _is_provider_call(span):
            other[span.name if stage is None else f"{stage}: {span.name}"] += _ms(span)
        elif not any(_is_provider_call(a) for a in above):  # nested calls count once
            provider[stage or str((span.attributes or {})[GEN_AI_OPERATION])] += _ms(span)
            calls.append((span.start_time or 0, span.end_time or 0))
    job_id = str((job.attributes or {})[JOB_ID])
    return JobTiming(job_id, job.start_time or 0, job.end_time or 0, dict(stages),
                     dict(provider), dict(other), _union_ms(calls))


def _union_ms(intervals: list[tuple[int, int]]) -> float:
    """How long at least one of the intervals (ns) was open, in ms."""
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total / 1e6


class JobSpans(SpanExporter):
    """Keeps one JobTiming per job id (the last, if ARQ ran the job again)."""

    def __init__(self) -> None:
        self.jobs: dict[str, JobTiming] = {}
        self._traces: dict[int, list[ReadableSpan]] = defaultdict(list)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        for span in spans:
            if span.context is None:
                continue
            trace_id = span.context.trace_id
            if span.kind is SpanKind.CONSUMER and JOB_ID in (span.attributes or {}):
                self.jobs[str((span.attributes or {})[JOB_ID])] = _timing(
                    span, self._traces.pop(trace_id, []))
            else:
                self._traces[trace_id].append(span)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
