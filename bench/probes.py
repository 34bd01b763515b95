"""How the bench watches the real worker without changing its code.

- ``JobRecorder``: an OpenTelemetry span processor. The job already opens one
  span per stage; the recorder keeps their durations, grouped by trace (one
  trace per job). This is how ``persist`` and ``summary`` are timed: the audit
  row's timings_ms is written before either of them ends.
- ``timed_providers``: wraps the offline providers so each call's time is
  charged to the job whose span is current, which separates "offline provider"
  time (what a model would spend) from the worker's own time.
- ``TimedWorker``: ARQ's Worker with run_job timed, so ARQ's own Redis
  bookkeeping around the job function shows up too.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from arq.worker import Worker
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider

from worker.job import Deps
from worker.providers.base import Answer, Providers
from worker.wire import (
    ConsolidationAnswer,
    ConsolidationRequest,
    ExtractionAnswer,
    ExtractionRequest,
    SummaryAnswer,
    SummaryRequest,
)

JOB_SPAN = "memfleet.job"
_PREFIX = "memfleet."


@dataclass(slots=True)
class JobTrace:
    job_id: str
    start_ns: int  # the job function's start, time.time_ns() clock
    end_ns: int
    stages: dict[str, float]  # stage span name (without prefix) -> ms, summed over repeats
    provider: dict[str, float]  # provider call -> ms

    @property
    def function_ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


@dataclass(slots=True)
class _Partial:
    stages: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    provider: dict[str, float] = field(default_factory=lambda: defaultdict(float))


class JobRecorder(SpanProcessor):
    """Collects one JobTrace per finished job span; ``wait`` lets a caller await a job."""

    def __init__(self) -> None:
        self.jobs: dict[str, JobTrace] = {}
        self._open: dict[int, _Partial] = defaultdict(_Partial)

    # -- SpanProcessor (called synchronously on the event loop's thread) --

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        if not span.name.startswith(_PREFIX) or span.context is None:
            return
        start, end = span.start_time or 0, span.end_time or 0
        trace_id = span.context.trace_id
        if span.name != JOB_SPAN:
            self._open[trace_id].stages[span.name[len(_PREFIX):]] += (end - start) / 1e6
            return
        partial = self._open.pop(trace_id, _Partial())
        job_id = str((span.attributes or {}).get("messaging.message.id", ""))
        self.jobs[job_id] = JobTrace(job_id, start, end, dict(partial.stages),
                                     dict(partial.provider))

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    # -- provider timing --

    def charge(self, call: str, elapsed_ms: float) -> None:
        trace_id = trace.get_current_span().get_span_context().trace_id
        if trace_id:
            self._open[trace_id].provider[call] += elapsed_ms

    def clear(self) -> None:
        self.jobs.clear()
        self._open.clear()


def install_recorder() -> JobRecorder:
    """Make the process's tracer provider an SDK one that feeds a JobRecorder.

    Spans are recorded in memory only, never exported; the SDK's cost per span
    (some microseconds) is part of what the bench measures, as it would be in
    production with tracing on.
    """
    recorder = JobRecorder()
    provider = TracerProvider()
    provider.add_span_processor(recorder)
    trace.set_tracer_provider(provider)
    return recorder


# ---------------------------------------------------------------- providers


class _TimedExtractor:
    def __init__(self, inner: Any, recorder: JobRecorder) -> None:
        self._inner, self._recorder = inner, recorder

    async def extract(self, request: ExtractionRequest) -> Answer[ExtractionAnswer]:
        started = time.perf_counter()
        try:
            answer: Answer[ExtractionAnswer] = await self._inner.extract(request)
            return answer
        finally:
            self._recorder.charge("extract", (time.perf_counter() - started) * 1000)


class _TimedConsolidator:
    def __init__(self, inner: Any, recorder: JobRecorder) -> None:
        self._inner, self._recorder = inner, recorder

    async def consolidate(self, request: ConsolidationRequest) -> Answer[ConsolidationAnswer]:
        started = time.perf_counter()
        try:
            answer: Answer[ConsolidationAnswer] = await self._inner.consolidate(request)
            return answer
        finally:
            self._recorder.charge("consolidate", (time.perf_counter() - started) * 1000)


class _TimedSummarizer:
    def __init__(self, inner: Any, recorder: JobRecorder) -> None:
        self._inner, self._recorder = inner, recorder

    async def summarize(self, request: SummaryRequest) -> Answer[SummaryAnswer]:
        started = time.perf_counter()
        try:
            answer: Answer[SummaryAnswer] = await self._inner.summarize(request)
            return answer
        finally:
            self._recorder.charge("summary", (time.perf_counter() - started) * 1000)


class _TimedEmbedder:
    def __init__(self, inner: Any, recorder: JobRecorder) -> None:
        self._inner, self._recorder = inner, recorder

    @property
    def model(self) -> str:
        return str(self._inner.model)

    @property
    def dim(self) -> int:
        return int(self._inner.dim)

    async def embed(self, texts: list[str]) -> Answer[list[list[float]]]:
        started = time.perf_counter()
        try:
            answer: Answer[list[list[float]]] = await self._inner.embed(texts)
            return answer
        finally:
            self._recorder.charge("embed", (time.perf_counter() - started) * 1000)


def timed_providers(providers: Providers, recorder: JobRecorder) -> Providers:
    return Providers(
        extractor=_TimedExtractor(providers.extractor, recorder),
        consolidator=_TimedConsolidator(providers.consolidator, recorder),
        summarizer=_TimedSummarizer(providers.summarizer, recorder),
        embedder=_TimedEmbedder(providers.embedder, recorder),
    )


def with_timed_providers(options: dict[str, Any], recorder: JobRecorder) -> dict[str, Any]:
    """worker_options with on_startup wrapped: the job's Deps get timed providers."""
    startup = options["on_startup"]

    async def on_startup(ctx: dict[str, Any]) -> None:
        await startup(ctx)
        deps: Deps = ctx["deps"]
        ctx["deps"] = replace(deps, providers=timed_providers(deps.providers, recorder))

    return {**options, "on_startup": on_startup}


# ---------------------------------------------------------------- ARQ


class TimedWorker(Worker):  # type: ignore[misc]  # arq ships no type information
    """ARQ's worker, with each run_job (fetch, function, result bookkeeping) timed."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.run_ns: dict[str, tuple[int, int]] = {}
        self._done: dict[str, asyncio.Event] = {}

    async def run_job(self, job_id: str, score: int) -> None:
        started = time.time_ns()
        try:
            await super().run_job(job_id, score)
        finally:
            self.run_ns[job_id] = (started, time.time_ns())
            self._done.setdefault(job_id, asyncio.Event()).set()

    async def wait_done(self, job_id: str, timeout_s: float) -> None:
        await asyncio.wait_for(self._done.setdefault(job_id, asyncio.Event()).wait(), timeout_s)


# ---------------------------------------------------------------- CPU


def _ticks_per_s() -> int:
    return int(os.sysconf("SC_CLK_TCK"))


def _proc_cpu_s(pid: int, with_children: bool) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # After the command: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14)
    ticks = int(fields[11]) + int(fields[12])
    if with_children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / _ticks_per_s()


def tree_cpu_s(root_pid: int) -> float:
    """CPU seconds of a process and its live children (and the children it has reaped).

    The postmaster reaps its backends, so their time lands in its cutime/cstime.
    Returns 0.0 where there is no /proc.
    """
    try:
        total = _proc_cpu_s(root_pid, with_children=True)
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                if ppid == root_pid:
                    total += _proc_cpu_s(int(entry.name), with_children=True)
            except (OSError, ValueError, IndexError):
                continue
        return total
    except (OSError, ValueError, IndexError):
        return 0.0
