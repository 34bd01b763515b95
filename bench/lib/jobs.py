"""Sessions handed over and run by the real worker, through its public functions only.

The bench reaches the worker through ``worker.client.handover.schedule_memory_persistence``,
``worker.fleet.app.build_worker`` / ``drain_queue`` and ARQ's documented
``after_job_end`` hook; the job's own spans (bench.lib.spans) time it. Used by
bench.run and by bench.ab.ab_worker, which runs against older revisions too.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import asyncpg
from arq.worker import Worker
from redis.asyncio import Redis

from bench.lib.worker_entry import drain_queue, schedule_memory_persistence
from bench.lib.workload import SessionPlan, seed_sessions
from worker.config import Settings

if TYPE_CHECKING:  # what setup_telemetry returns; not needed at run time
    from worker.telemetry import Telemetry

EMBED_DIM = 1536  # production's (text-embedding-3-small)
JOB_WAIT_S = 60.0


@dataclass(frozen=True, slots=True)
class Handed:
    job_id: str
    call_start_ns: int
    call_end_ns: int

    @property
    def call_ms(self) -> float:
        return (self.call_end_ns - self.call_start_ns) / 1e6


async def hand_over(redis: Redis, settings: Settings, plan: SessionPlan,
                    messages: Sequence[dict[str, str]] | None = None) -> Handed:
    """The chat server's call; ``messages`` defaults to the plan's whole conversation."""
    started = time.time_ns()
    enqueued = await schedule_memory_persistence(
        redis, plan.session_id, plan.user_id,
        plan.messages if messages is None else list(messages), queue_name=settings.queue_name)
    ended = time.time_ns()
    if enqueued.job_id is None:
        raise RuntimeError(f"{plan.session_id}: the hand-over joined a queued job")
    return Handed(enqueued.job_id, started, ended)


@dataclass(slots=True)
class Finished:
    """ARQ's ``after_job_end`` hook: when ARQ is done with a job, its result recorded."""

    at_ns: dict[str, int] = field(default_factory=dict)
    _events: dict[str, asyncio.Event] = field(default_factory=dict)

    async def __call__(self, ctx: dict[str, Any]) -> None:
        job_id = str(ctx["job_id"])
        self.at_ns[job_id] = time.time_ns()
        self._events.setdefault(job_id, asyncio.Event()).set()

    async def wait(self, job_id: str, main: asyncio.Task[None]) -> None:
        """Until the job is done; the worker's own error if its main task ends first."""
        waiter = asyncio.ensure_future(self._events.setdefault(job_id, asyncio.Event()).wait())
        await asyncio.wait({waiter, main}, timeout=JOB_WAIT_S,
                           return_when=asyncio.FIRST_COMPLETED)
        if waiter.done():
            return
        waiter.cancel()
        if main.done():
            main.result()
            raise RuntimeError("the worker stopped before the job ran")
        raise TimeoutError(f"job {job_id} did not finish within {JOB_WAIT_S:g} s")


async def stop(worker: Worker, main: asyncio.Task[None]) -> None:
    """End a polling worker the way ARQ ends a burst worker: at a poll finding no job."""
    worker.burst = True
    await asyncio.wait_for(main, JOB_WAIT_S)


async def close(worker: Worker, main: asyncio.Task[None]) -> None:
    """After stop(), or after an error: the main task ended, the worker's connections closed."""
    main.cancel()  # a no-op once it has ended
    await asyncio.gather(main, return_exceptions=True)
    await worker.close()


async def seed(redis: Redis, settings: Settings, telemetry: Telemetry, *, seed: int,
               users: int, plans: Sequence[SessionPlan]) -> None:
    """Every user's facts, then every plan's history, each drained by a burst worker."""
    # A user's sessions far apart in the queue, so concurrent jobs are other users'.
    for sessions in zip(*(seed_sessions(seed, user) for user in range(users)), strict=True):
        for plan in sessions:
            await hand_over(redis, settings, plan)
    await drain_queue(settings, telemetry=telemetry)
    for plan in plans:
        await hand_over(redis, settings, plan, plan.history)
    await drain_queue(settings, telemetry=telemetry)


async def settle(database_url: str) -> tuple[int, int]:
    """Statistics and dirty pages done now, not mid-measurement; active facts per user."""
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("VACUUM (ANALYZE)")
        await conn.execute("CHECKPOINT")
        return await active_range(conn)
    finally:
        await conn.close()


async def active_range(conn: asyncpg.Connection) -> tuple[int, int]:
    row = await conn.fetchrow(
        "SELECT min(n) AS lo, max(n) AS hi FROM (SELECT count(*) AS n FROM memory_fact"
        " WHERE superseded_at IS NULL GROUP BY user_id) AS per_user")
    return (int(row["lo"] or 0), int(row["hi"] or 0))
