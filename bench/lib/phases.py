"""The bench's measurements: one job at a time, and a burst drain.

Each phase hands its sessions over through the real client call and lets a
worker from ``worker.fleet.app.build_worker`` run them in this process, on the
telemetry whose exporter records the jobs' spans.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import asyncpg
from redis.asyncio import Redis

from bench.lib.jobs import Finished, Handed, close, hand_over, stop
from bench.lib.spans import JobSpans, JobTiming
from bench.lib.workload import SessionPlan
from worker.config import Settings
from worker.fleet.app import build_worker

if TYPE_CHECKING:
    from worker.telemetry import Telemetry


@dataclass(slots=True)
class JobSample:
    """Everything measured about one job."""

    handed: Handed
    timing: JobTiming
    finished_ns: int  # ARQ's after_job_end: result recorded
    audit: dict[str, Any] = field(default_factory=dict)  # its memory_run row

    @property
    def pickup_ms(self) -> float:
        """Hand-over call returned -> the job's span began."""
        return (self.timing.start_ns - self.handed.call_end_ns) / 1e6

    @property
    def arq_after_ms(self) -> float:
        """The job's span ended -> ARQ's after_job_end (result bookkeeping in Redis)."""
        return (self.finished_ns - self.timing.end_ns) / 1e6


@dataclass(slots=True)
class PhaseResult:
    name: str
    samples: list[JobSample]
    poll_delay_s: float
    max_jobs: int
    wall_s: float = 0.0  # first job start -> last job done
    cpu_s: float = 0.0  # this process (worker and bench) over the phase

    @property
    def jobs_per_s(self) -> float:
        return len(self.samples) / self.wall_s if self.wall_s else 0.0


@dataclass(frozen=True, slots=True)
class Bench:
    """What every phase runs on."""

    settings: Settings
    telemetry: Telemetry
    spans: JobSpans
    redis: Redis


def _result(name: str, bench: Bench, handed: Sequence[Handed], finished: Finished,
            poll_delay_s: float, cpu_s: float) -> PhaseResult:
    samples = []
    for h in handed:
        timing = bench.lib.spans.jobs.get(h.job_id)
        if timing is None or h.job_id not in finished.at_ns:
            raise RuntimeError(f"job {h.job_id} did not run")
        samples.append(JobSample(h, timing, finished.at_ns[h.job_id]))
    wall_ns = (max(s.finished_ns for s in samples)
               - min(s.timing.start_ns for s in samples)) if samples else 0
    return PhaseResult(name, samples, poll_delay_s, bench.settings.max_jobs,
                       wall_s=wall_ns / 1e9, cpu_s=cpu_s)


async def one_at_a_time(
    name: str, bench: Bench, plans: Sequence[SessionPlan], *, poll_delay_s: float,
    warmup: int, random_arrival: bool = False,
) -> PhaseResult:
    """Hand over one session, wait until ARQ is done with its job, then the next.

    The worker is idle at every hand-over, so this measures service time and
    the pick-up delay. The first ``warmup`` jobs (start-up included) are not
    counted. Handing over right after a job ends lands at the same point of
    the poll cycle every time; ``random_arrival`` waits a random part of a
    poll interval first, as a chat server's hand-over would.
    """
    finished = Finished()
    worker = build_worker(bench.settings, telemetry=bench.telemetry, poll_delay=poll_delay_s,
                          handle_signals=False, after_job_end=finished)
    main = asyncio.create_task(worker.main())
    rng = random.Random(0)
    handed: list[Handed] = []
    cpu_s = 0.0
    try:
        for n, plan in enumerate(plans):
            if n == warmup:
                cpu_s = -time.process_time()
            if random_arrival:
                await asyncio.sleep(rng.uniform(0, poll_delay_s))
            h = await hand_over(bench.redis, bench.settings, plan)
            await finished.wait(h.job_id, main)
            if n >= warmup:
                handed.append(h)
        cpu_s += time.process_time()
        await stop(worker, main)
    finally:
        await close(worker, main)
    return _result(name, bench, handed, finished, poll_delay_s, cpu_s)


async def burst_drain(name: str, bench: Bench, plans: Sequence[SessionPlan]) -> PhaseResult:
    """Queue every session first, then let one burst worker drain the queue.

    Throughput is jobs over the time from the first job's start to the last
    job's end (ARQ's after_job_end).
    """
    handed = [await hand_over(bench.redis, bench.settings, plan) for plan in plans]
    finished = Finished()
    worker = build_worker(bench.settings, burst=True, telemetry=bench.telemetry,
                          after_job_end=finished)
    cpu_s = -time.process_time()
    try:
        await worker.main()
        cpu_s += time.process_time()
    finally:
        await worker.close()
    return _result(name, bench, handed, finished, 0.0, cpu_s)


async def attach_audit(database_url: str, samples: Sequence[JobSample]) -> None:
    """Each job's memory_run row: outcome, candidates and outcome counts."""
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch(
            "SELECT job_id, outcome, candidates, added, updated, deleted, unchanged, rejected,"
            " consolidation_attempts"
            " FROM memory_run WHERE job_id = ANY($1::text[])",
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
