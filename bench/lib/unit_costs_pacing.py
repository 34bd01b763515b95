"""The coalescing ratio: hand-overs per job when turns arrive paced like a chat.

Each session is a fresh user's conversation (bench.lib.workload's plans: small talk,
then five turns of statements), at most ``turns`` user turns; after every turn
the chat server hands over the whole list so far, as the README's chat loop does.
A turn follows the last after a pause drawn uniformly from ``pause_s`` (the model's
reply of 1 to 3 s plus the user's reading and typing). A worker in this process
(MEMFLEET_MAX_JOBS ``max_jobs``, its model answering chat calls in ``latency_ms``)
drains while the sessions talk. The hand-over's reply says whether it queued a job
(``job_id``) or joined the session's queued one (``None``): hand-overs / jobs queued
is the ratio; the memory_run rows of those sessions count the jobs that ran.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

import asyncpg
from redis.asyncio import Redis

from api_stub.llm_stub import CHAT_PATH, StubServer
from bench.lib import jobs, workload
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.fleet.app import build_worker

if TYPE_CHECKING:
    from worker.telemetry import Telemetry


@dataclass(frozen=True, slots=True)
class Pacing:
    name: str
    sessions: int
    turns: int
    pause_s: tuple[float, float]
    max_jobs: int
    latency_ms: int


@dataclass(frozen=True, slots=True)
class PacedResult:
    pacing: Pacing
    handovers: int
    jobs_queued: int
    runs: int
    seconds: float

    @property
    def ratio(self) -> float:
        return self.handovers / self.jobs_queued if self.jobs_queued else float("nan")


async def paced(redis: Redis, db: asyncpg.Connection, settings: Settings, stub: StubServer,
                telemetry: Telemetry, pacing: Pacing, *, first_user: int,
                seed: int) -> PacedResult:
    stub.reset()
    stub.add_fault("latency_ms", latency_ms=pacing.latency_ms, count=1_000_000_000,
                   path=CHAT_PATH)
    plans = [workload.session_plan(seed, first_user + i, 0, first_user + i)
             for i in range(pacing.sessions)]
    rng = random.Random(f"{seed}:{pacing.name}")
    pauses = [[rng.uniform(*pacing.pause_s) for _ in range(pacing.turns)] for _ in plans]
    worker = build_worker(settings.model_copy(update={"max_jobs": pacing.max_jobs}),
                          telemetry=telemetry, poll_delay=0.05)
    main = asyncio.create_task(worker.main())
    queued = handed = 0

    async def talk(plan: workload.SessionPlan, waits: list[float]) -> None:
        nonlocal queued, handed
        messages = plan.messages[: 2 * pacing.turns]
        for turn in range(len(messages) // 2):
            await asyncio.sleep(waits[turn])
            enqueued = await schedule_memory_persistence(
                redis, plan.session_id, plan.user_id, messages[: 2 * turn + 2],
                queue_name=settings.queue_name, timeout_s=10)
            handed += 1
            queued += enqueued.job_id is not None

    loop = asyncio.get_running_loop()
    began = loop.time()
    try:
        await asyncio.gather(*(talk(p, w) for p, w in zip(plans, pauses, strict=True)))
        await jobs.stop(worker, main)  # a burst worker from here: it drains what is left
    finally:
        await jobs.close(worker, main)
        stub.reset()
    runs = await db.fetchval("SELECT count(*) FROM memory_run WHERE user_id = ANY($1)",
                             [p.user_id for p in plans])
    return PacedResult(pacing, handed, queued, int(runs), loop.time() - began)
