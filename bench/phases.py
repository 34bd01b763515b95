"""The bench's measurements: hand-over, one-at-a-time jobs, a burst drain, isolated parts.

Each phase hands over its own sessions through the real client call and lets
the real ARQ worker (worker.app.worker_options) run them in this process.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import asyncpg
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from redis.asyncio import Redis

from bench.probes import (
    JOB_WAIT_S,
    JobRecorder,
    PoolCounter,
    ProcCpu,
    TimedWorker,
    cpu_between,
    instrumented,
    machine_steal_s,
    process_table,
    tree_pids,
)
from bench.workload import SessionPlan
from worker.app import worker_options
from worker.client import schedule_memory_persistence
from worker.config import Settings
from worker.payload import Message
from worker.providers.hashing import HashingEmbedder
from worker.providers.rules import decide, extract_facts
from worker.stages import consolidate, extract
from worker.stages.extract import CandidateFact
from worker.store.pool import GENERIC_PLANS, create_pool
from worker.store.postgres import PgMemoryStore
from worker.telemetry import setup_telemetry
from worker.vectors import Vector


class DroppingExporter(SpanExporter):
    """Accepts every span and keeps none: the bench's JobRecorder reads them instead."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


@dataclass(frozen=True, slots=True)
class Handed:
    job_id: str
    session_id: str
    call_start_ns: int
    call_end_ns: int

    @property
    def call_ms(self) -> float:
        return (self.call_end_ns - self.call_start_ns) / 1e6


@dataclass(slots=True)
class JobSample:
    """Everything measured about one job."""

    handed: Handed
    function_ms: float  # the job function, claim to return (its CONSUMER span)
    run_job_ms: float  # ARQ's run_job: fetch, function, result bookkeeping
    start_ns: int  # the job function's start
    stages: dict[str, float]  # stage spans, ms
    spans: dict[str, float]  # other spans of the job by name, ms
    provider: dict[str, float]  # offline provider calls inside them, ms
    dispatch_ms: float | None  # the poll that found the job -> job function start
    audit: dict[str, Any] = field(default_factory=dict)  # its memory_run row

    @property
    def pickup_ms(self) -> float:
        """Hand-over call returned -> job function started."""
        return (self.start_ns - self.handed.call_end_ns) / 1e6

    @property
    def provider_ms(self) -> float:
        return sum(self.provider.values())

    @property
    def infra_ms(self) -> float:
        """ARQ's whole run_job minus the offline providers: the job outside the LLM."""
        return self.run_job_ms - self.provider_ms


@dataclass(slots=True)
class PhaseResult:
    name: str
    samples: list[JobSample]
    wall_s: float = 0.0  # first job start -> last job end
    total_s: float = 0.0  # including worker start-up and shut-down
    # CPU seconds over the phase: "worker process" (this one), "postgres",
    # "redis", "other processes" (the rest of the machine) and "steal" (the VM's).
    cpu_s: dict[str, float] = field(default_factory=dict)
    pg_queries: int = 0  # statements the worker's pool sent
    poll_delay_s: float = 0.0
    max_jobs: int = 0
    random_arrival: bool = False

    @property
    def jobs_per_s(self) -> float:
        return len(self.samples) / self.wall_s if self.wall_s else 0.0


@dataclass(slots=True)
class _CpuWatch:
    """CPU used by us, our servers and every other process between start() and stop()."""

    pids: dict[str, int]  # label -> root pid of a server of ours
    before: dict[int, ProcCpu] = field(default_factory=dict)
    steal: float = 0.0
    process: float = 0.0

    def start(self) -> None:
        self.before = process_table()
        self.steal, self.process = machine_steal_s(), time.process_time()

    def stop(self) -> dict[str, float]:
        after = process_table()
        used = {"worker process": time.process_time() - self.process,
                "steal": machine_steal_s() - self.steal}
        ours = {os.getpid()}
        for label, root in self.pids.items():
            tree = tree_pids(after, root) | tree_pids(self.before, root)
            used[label] = cpu_between(self.before, after, tree)
            ours |= tree
        others = (set(after) | set(self.before)) - ours
        used["other processes"] = cpu_between(self.before, after, others)
        return used


def make_worker(
    settings: Settings, recorder: JobRecorder, counter: PoolCounter, *, burst: bool,
    **overrides: Any,
) -> TimedWorker:
    # Spans are recorded, as in production with tracing on: a worker that exports
    # nothing does not record them (worker.telemetry), so give it an exporter that
    # drops what it is given, and the recorder reads the spans on their way.
    telemetry = setup_telemetry(settings, span_exporter=DroppingExporter())
    options = instrumented(worker_options(settings, burst=burst, telemetry=telemetry),
                           recorder, counter)
    return TimedWorker(**{**options, **overrides})


async def hand_over(redis: Redis, settings: Settings, plan: SessionPlan) -> Handed:
    started = time.time_ns()
    enqueued = await schedule_memory_persistence(
        redis, plan.session_id, plan.user_id, plan.messages, queue_name=settings.queue_name
    )
    ended = time.time_ns()
    if enqueued.job_id is None:
        raise RuntimeError(f"{plan.session_id}: the hand-over joined a queued job")
    return Handed(enqueued.job_id, plan.session_id, started, ended)


def _samples(handed: Sequence[Handed], recorder: JobRecorder,
             worker: TimedWorker) -> list[JobSample]:
    out = []
    for h in handed:
        job = recorder.jobs.get(h.job_id)
        run = worker.run_ns.get(h.job_id)
        if job is None or run is None:
            raise RuntimeError(f"job {h.job_id} of {h.session_id} did not run")
        out.append(JobSample(h, job.function_ms, (run[1] - run[0]) / 1e6, job.start_ns,
                             job.stages, job.spans, job.provider,
                             worker.dispatch_ms(job.start_ns)))
    return out


async def one_at_a_time(
    name: str, settings: Settings, redis: Redis, plans: Sequence[SessionPlan],
    recorder: JobRecorder, *, poll_delay_s: float, cpu_pids: dict[str, int],
    random_arrival: bool = False,
) -> PhaseResult:
    """Hand over one session, wait until ARQ is done with its job, then the next.

    The worker is idle at every hand-over, so this measures service time and
    the pick-up delay, with no other job sharing the event loop. Handing over
    right after a job ends lands at the same point of the poll cycle every
    time; ``random_arrival`` waits a random part of a poll interval first, so
    the pick-up delay is the one a chat server would see.
    """
    counter = PoolCounter()
    worker = make_worker(settings, recorder, counter, burst=False, poll_delay=poll_delay_s,
                         handle_signals=False)
    rng = random.Random(0)
    began = time.perf_counter()
    main = asyncio.create_task(worker.main())
    handed: list[Handed] = []
    cpu = _CpuWatch(cpu_pids)
    try:
        while "deps" not in worker.ctx:  # start-up done: pool open, providers built
            if main.done():
                main.result()  # start-up failed: raise its error
            await asyncio.sleep(0.01)
        cpu.start()
        for plan in plans:
            if random_arrival:
                await asyncio.sleep(rng.uniform(0, poll_delay_s))
            h = await hand_over(redis, settings, plan)
            handed.append(h)
            await _job_or_crash(worker.wait_done(h.job_id, JOB_WAIT_S), main)
        used = cpu.stop()
    finally:
        await worker.stop_polling(main)
        await worker.close()
    return _result(name, handed, recorder, worker, began, used, counter, settings,
                   random_arrival=random_arrival)


async def _job_or_crash(waiting: Coroutine[Any, Any, None], main: asyncio.Task[None]) -> None:
    """Wait for a job; if the worker's main task ends first, raise its error at once."""
    waiter = asyncio.ensure_future(waiting)
    await asyncio.wait({waiter, main}, return_when=asyncio.FIRST_COMPLETED)
    if not waiter.done():
        waiter.cancel()
        main.result()  # raises the worker's error, if it has one
        raise RuntimeError("the worker stopped before the job ran")
    waiter.result()


async def burst_drain(
    name: str, settings: Settings, redis: Redis, plans: Sequence[SessionPlan],
    recorder: JobRecorder, *, cpu_pids: dict[str, int],
) -> PhaseResult:
    """Queue every session first, then let one burst worker drain the queue.

    Throughput is jobs over the time from the first job's start to the last
    job's end; CPU seconds of this process, PostgreSQL and Redis over the drain
    show where the machine's cores went.
    """
    handed = [await hand_over(redis, settings, plan) for plan in plans]
    counter = PoolCounter()
    worker = make_worker(settings, recorder, counter, burst=True)
    cpu = _CpuWatch(cpu_pids)
    began = time.perf_counter()
    cpu.start()
    try:
        await worker.main()
        used = cpu.stop()
    finally:
        await worker.close()
    return _result(name, handed, recorder, worker, began, used, counter, settings)


def _result(
    name: str, handed: Sequence[Handed], recorder: JobRecorder, worker: TimedWorker,
    began: float, cpu_used: dict[str, float], counter: PoolCounter, settings: Settings,
    *, random_arrival: bool = False,
) -> PhaseResult:
    samples = _samples(handed, recorder, worker)
    first = min(worker.run_ns[h.job_id][0] for h in handed)
    last = max(worker.run_ns[h.job_id][1] for h in handed)
    return PhaseResult(
        name, samples, wall_s=(last - first) / 1e9, total_s=time.perf_counter() - began,
        cpu_s=cpu_used, pg_queries=counter.queries, poll_delay_s=worker.poll_delay_s,
        max_jobs=worker.max_jobs, random_arrival=random_arrival,
    )


async def attach_audit(database_url: str, samples: Sequence[JobSample]) -> None:
    """Each job's memory_run row: candidates, outcome counts and timings_ms."""
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch(
            "SELECT job_id, outcome, candidates, added, updated, deleted, unchanged, rejected,"
            " consolidation_attempts, timings_ms::text AS timings FROM memory_run"
            " WHERE job_id = ANY($1::text[])",
            [s.handed.job_id for s in samples],
        )
    finally:
        await conn.close()
    by_job: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["job_id"] in by_job:
            raise RuntimeError(f"job {row['job_id']} has more than one audit row")
        by_job[row["job_id"]] = dict(row)
    for sample in samples:
        sample.audit = by_job.get(sample.handed.job_id, {})


# ---------------------------------------------------------------- isolated parts


@dataclass(slots=True)
class Isolated:
    """Per call, ms: the pipeline's consolidation parts timed one by one, outside a job."""

    neighbors: list[float] = field(default_factory=list)
    build_request: list[float] = field(default_factory=list)
    rules_decide: list[float] = field(default_factory=list)
    validate_plan: list[float] = field(default_factory=list)
    active_facts: list[int] = field(default_factory=list)  # rows the query ranked, per user
    candidates: int = 0


async def plan_candidates(
    plan: SessionPlan, embedder: HashingEmbedder, context_messages: int, now: datetime
) -> tuple[list[CandidateFact], Vector]:
    """The candidates a job extracts from the plan's new slice, and their embeddings."""
    messages = [Message.model_validate(m) for m in plan.messages]
    request = extract.build_request(messages, len(plan.history), len(messages),
                                    context_messages, None, now)
    candidates = extract.candidates_from(extract_facts(request))
    # As the pipeline does: one float32 matrix for every later step.
    return candidates, (await embedder.embed([c.text for c in candidates])).value


async def isolated_parts(settings: Settings, plans: Sequence[SessionPlan]) -> Isolated:
    """PgMemoryStore.neighbors on its own, plus the CPU parts around it, per plan.

    The same users and the same ten candidate embeddings a job would send;
    called one at a time on an otherwise idle database.
    """
    pool = await create_pool(settings.database_url or "", min_size=1, max_size=2,
                             server_settings=GENERIC_PLANS)  # as the worker's pool
    store = PgMemoryStore(pool)
    embedder = HashingEmbedder(settings.embed_dim)
    k = settings.neighbors_k
    out = Isolated()
    now = datetime.now(UTC)
    try:
        counts = {r["user_id"]: r["n"] for r in await pool.fetch(
            "SELECT user_id, count(*) AS n FROM memory_fact WHERE superseded_at IS NULL"
            " GROUP BY user_id")}
        for plan in plans:
            candidates, embeddings = await plan_candidates(plan, embedder,
                                                           settings.context_messages, now)
            out.candidates = len(candidates)
            out.active_facts.append(counts.get(plan.user_id, 0))

            t0 = time.perf_counter()
            _, neighbors = await store.neighbors(plan.user_id, embeddings, k)
            t1 = time.perf_counter()
            prepared = consolidate.build_request(
                candidates, embeddings, neighbors, extract.observed_label(now),
                now.date().isoformat(), k,
            )
            t2 = time.perf_counter()
            answer = decide(prepared.request)
            t3 = time.perf_counter()
            validated = consolidate.validate(prepared, answer)
            consolidate.plan_writes(candidates, embeddings, prepared, validated)
            t4 = time.perf_counter()
            out.neighbors.append((t1 - t0) * 1000)
            out.build_request.append((t2 - t1) * 1000)
            out.rules_decide.append((t3 - t2) * 1000)
            out.validate_plan.append((t4 - t3) * 1000)
    finally:
        await pool.close()
    return out


@dataclass(frozen=True, slots=True)
class RoundTrips:
    """One loopback round trip as this machine does it: the unit most stages are made of."""

    pg_ms: list[float]
    redis_ms: list[float]
    pg_cpu_ms: float  # client CPU per round trip, mean
    redis_cpu_ms: float


async def round_trips(database_url: str, redis: Redis, count: int = 1000) -> RoundTrips:
    conn = await asyncpg.connect(database_url)
    try:
        for _ in range(50):
            await conn.fetchval("SELECT 1")
        pg, cpu = [], time.process_time()
        for _ in range(count):
            t0 = time.perf_counter()
            await conn.fetchval("SELECT 1")
            pg.append((time.perf_counter() - t0) * 1000)
        pg_cpu = (time.process_time() - cpu) / count * 1000
    finally:
        await conn.close()
    rd, cpu = [], time.process_time()
    for _ in range(count):
        t0 = time.perf_counter()
        await redis.ping()
        rd.append((time.perf_counter() - t0) * 1000)
    return RoundTrips(pg, rd, pg_cpu, (time.process_time() - cpu) / count * 1000)


async def set_durability(database_url: str, *, durable: bool) -> dict[str, str]:
    """Switch the running cluster to EmbeddedPostgres(durable=False)'s settings, or back.

    fsync, synchronous_commit and full_page_writes are exactly what
    durable=False passes with -c at start; all three take effect on reload,
    so the same seeded cluster serves both runs.
    """
    conn = await asyncpg.connect(database_url)
    try:
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            if durable:
                await conn.execute(f"ALTER SYSTEM RESET {setting}")
            else:
                await conn.execute(f"ALTER SYSTEM SET {setting} = off")
        await conn.execute("SELECT pg_reload_conf()")
        await asyncio.sleep(0.2)  # the postmaster signals the backends asynchronously
        return {s: str(await conn.fetchval(f"SHOW {s}"))
                for s in ("fsync", "synchronous_commit", "full_page_writes")}
    finally:
        await conn.close()
