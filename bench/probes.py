"""How the bench watches the real worker without changing its code.

- ``JobRecorder``: an OpenTelemetry span processor. The job already opens one
  span per stage; the recorder keeps their durations, grouped by trace (one
  trace per job, ended by the job's CONSUMER span). This is how ``persist``
  and ``summary`` are timed: the audit row's timings_ms is written before
  either of them ends.
- ``timed_providers``: wraps the offline providers so each call's time is
  charged to the job whose span is current, which separates "offline provider"
  time (what a model would spend) from the worker's own time.
- ``instrumented``: worker_options with start-up and shut-down wrapped, to
  install those providers and to count the pool's PostgreSQL statements.
- ``TimedWorker``: ARQ's Worker with run_job and each queue poll timed, so
  ARQ's own Redis bookkeeping and dispatch delay show up too.
- ``process_table`` / ``cpu_between``: CPU seconds per process from /proc, to
  tell where the cores went and whether something else on the machine was busy.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
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
from opentelemetry.trace import SpanKind

from worker.job import Deps
from worker.providers.base import Answer, Providers
from worker.vectors import Vector
from worker.wire import (
    ConsolidationAnswer,
    ConsolidationRequest,
    ExtractionAnswer,
    ExtractionRequest,
    SummaryAnswer,
    SummaryRequest,
)

JOB_WAIT_S = 60.0
_STAGE_PREFIX = "memfleet."  # StageClock names its spans memfleet.<stage>
_JOB_ID = "messaging.message.id"


@dataclass(slots=True)
class JobTrace:
    job_id: str
    start_ns: int  # the job function's start, time.time_ns() clock
    end_ns: int
    stages: dict[str, float]  # stage span name (without prefix) -> ms, summed over repeats
    spans: dict[str, float]  # any other span inside the job (e.g. the neighbour SELECT) -> ms
    provider: dict[str, float]  # provider call -> ms

    @property
    def function_ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


@dataclass(slots=True)
class _Partial:
    spans: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    provider: dict[str, float] = field(default_factory=lambda: defaultdict(float))


def _is_job_span(span: ReadableSpan) -> bool:
    # The job's own span is the CONSUMER span that carries the ARQ job id;
    # matching on that rather than on its name survives renames.
    return span.kind is SpanKind.CONSUMER and _JOB_ID in (span.attributes or {})


class JobRecorder(SpanProcessor):
    """Collects one JobTrace per finished job span."""

    def __init__(self) -> None:
        self.jobs: dict[str, JobTrace] = {}
        self._open: dict[int, _Partial] = defaultdict(_Partial)
        # Tracer providers this recorder is attached to, kept alive so that an
        # identity check never mistakes a new provider for a collected one.
        self._providers: list[Any] = []

    def attach(self, provider: Any) -> None:
        """Also record the spans of ``provider`` (a worker-made SDK TracerProvider)."""
        if not hasattr(provider, "add_span_processor"):
            return
        if not any(p is provider for p in self._providers):
            provider.add_span_processor(self)
            self._providers.append(provider)

    # -- SpanProcessor (called synchronously on the event loop's thread) --

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        if span.context is None:
            return
        start, end = span.start_time or 0, span.end_time or 0
        trace_id = span.context.trace_id
        if not _is_job_span(span):
            self._open[trace_id].spans[span.name] += (end - start) / 1e6
            return
        partial = self._open.pop(trace_id, _Partial())
        job_id = str((span.attributes or {})[_JOB_ID])
        stages = {name[len(_STAGE_PREFIX):]: v for name, v in partial.spans.items()
                  if name.startswith(_STAGE_PREFIX)}
        others = {name: v for name, v in partial.spans.items()
                  if not name.startswith(_STAGE_PREFIX)}
        self.jobs[job_id] = JobTrace(job_id, start, end, stages, others, dict(partial.provider))

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    # -- provider timing --

    def charge(self, call: str, elapsed_ms: float) -> None:
        trace_id = trace.get_current_span().get_span_context().trace_id
        if trace_id:
            self._open[trace_id].provider[call] += elapsed_ms


def install_recorder() -> JobRecorder:
    """Make the process's global tracer provider an SDK one that feeds a JobRecorder.

    Spans are recorded in memory only, never exported; the SDK's cost per span
    (some microseconds) is part of what the bench measures, as it would be in
    production with tracing on. A worker that makes its own tracer provider
    is attached to at start-up instead (see ``instrumented``).
    """
    recorder = JobRecorder()
    provider = TracerProvider()
    recorder.attach(provider)
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

    async def embed(self, texts: list[str]) -> Answer[Vector]:
        started = time.perf_counter()
        try:
            answer: Answer[Vector] = await self._inner.embed(texts)
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


@dataclass(slots=True)
class PoolCounter:
    """Statements sent by the worker's asyncpg pool, read just before it closes."""

    queries: int = 0


def _pool_queries(pool: Any) -> int:
    # asyncpg counts the queries of each connection for its max_queries
    # setting; summed over the pool that is the number of round trips to
    # PostgreSQL (one per statement, BEGIN/COMMIT and release resets included).
    total = 0
    for holder in getattr(pool, "_holders", ()):
        con = getattr(holder, "_con", None)
        protocol = getattr(con, "_protocol", None)
        total += int(getattr(protocol, "queries_count", 0) or 0)
    return total


def instrumented(
    options: dict[str, Any], recorder: JobRecorder, counter: PoolCounter
) -> dict[str, Any]:
    """worker_options with on_startup/on_shutdown wrapped; the job code is untouched.

    Start-up gives the job's Deps timed providers; shut-down counts the pool's
    statements before the pool closes.
    """
    startup, shutdown = options["on_startup"], options["on_shutdown"]

    async def on_startup(ctx: dict[str, Any]) -> None:
        await startup(ctx)
        deps: Deps = ctx["deps"]
        # A worker whose Deps carry their own telemetry traces on its own provider.
        recorder.attach(getattr(getattr(deps, "telemetry", None), "tracer_provider", None))
        ctx["deps"] = replace(deps, providers=timed_providers(deps.providers, recorder))
        counter.queries = -_pool_queries(ctx["pool"])  # start-up's own queries do not count

    async def on_shutdown(ctx: dict[str, Any]) -> None:
        if "pool" in ctx:
            counter.queries += _pool_queries(ctx["pool"])
        await shutdown(ctx)

    return {**options, "on_startup": on_startup, "on_shutdown": on_shutdown}


# ---------------------------------------------------------------- ARQ


class TimedWorker(Worker):
    """ARQ's worker, with each run_job (fetch, function, result bookkeeping) timed."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.run_ns: dict[str, tuple[int, int]] = {}
        self.poll_ns: list[int] = []  # when each poll of the queue began
        self._done: dict[str, asyncio.Event] = {}
        self._between_polls = asyncio.Event()
        self._between_polls.set()

    async def _poll_iteration(self) -> None:
        self.poll_ns.append(time.time_ns())
        self._between_polls.clear()
        try:
            await super()._poll_iteration()
        finally:
            self._between_polls.set()

    async def stop_polling(self, main: asyncio.Task[None]) -> None:
        """Cancel a non-burst worker's main task while it sleeps between polls.

        Cancelling it in the middle of a poll's Redis pipeline leaves that
        pipeline unclosed (redis-py then logs an error at exit).
        """
        if not main.done():
            # Once set, the main task runs on to its sleep before this resumes.
            await asyncio.wait_for(self._between_polls.wait(), JOB_WAIT_S)
        main.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await main

    def dispatch_ms(self, start_ns: int) -> float | None:
        """From the poll that found a job to the job function's start."""
        at = bisect.bisect_right(self.poll_ns, start_ns)
        return (start_ns - self.poll_ns[at - 1]) / 1e6 if at else None

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


@dataclass(frozen=True, slots=True)
class ProcCpu:
    ppid: int
    own_s: float  # utime + stime
    reaped_s: float  # cutime + cstime: children it has waited for


def process_table() -> dict[int, ProcCpu]:
    """CPU seconds of every process now; empty where there is no /proc."""
    tick = _ticks_per_s()
    table: dict[int, ProcCpu] = {}
    try:
        entries = list(Path("/proc").iterdir())
    except OSError:
        return table
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            # After the command: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14)
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            table[int(entry.name)] = ProcCpu(
                int(fields[1]), (int(fields[11]) + int(fields[12])) / tick,
                (int(fields[13]) + int(fields[14])) / tick,
            )
        except (OSError, ValueError, IndexError):
            continue  # it exited while we looked
    return table


def tree_pids(table: dict[int, ProcCpu], root: int) -> set[int]:
    """A server and its direct children (PostgreSQL's backends, Redis's forks)."""
    return {root} | {pid for pid, p in table.items() if p.ppid == root}


def cpu_between(
    before: dict[int, ProcCpu], after: dict[int, ProcCpu], pids: set[int]
) -> float:
    """CPU seconds that ``pids`` (and the children they reaped) used between two tables.

    A process that started in between counts from zero; one that exited is
    lost unless a process in ``pids`` reaped it.
    """
    used = 0.0
    for pid in pids:
        now = after.get(pid)
        if now is None:
            continue
        then = before.get(pid)
        used += now.own_s + now.reaped_s - ((then.own_s + then.reaped_s) if then else 0.0)
    return max(used, 0.0)


def machine_steal_s() -> float:
    """CPU seconds the hypervisor gave to other guests since boot; 0.0 without /proc."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0.0
    # user nice system idle iowait irq softirq steal ...
    return (fields[7] if len(fields) > 7 else 0) / _ticks_per_s()
