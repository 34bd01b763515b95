"""The fleet's state, probed in Redis by one exporter process, and the workers' heartbeats.

Workers export what each process does (jobs, stages, model calls). What the
fleet as a whole owes (the queue, the jobs held by dead workers, the lag) is
one set of numbers, exported once by ``memfleet exporter`` (worker.fleet.metrics_exporter),
a process apart from the workers: it keeps exporting when the workers are
scaled to zero, which is what lets an autoscaler start the first one.

- the queue by state: ready (due, not picked), in progress (picked: ARQ's
  in-progress key), orphaned (in progress, held by no live worker), deferred
  (due later);
- the oldest ready job's age;
- the lag: the age of the oldest hand-over no commit has finished, over every
  session (the waiting set, kept by the hand-over, claim and release scripts);
  dead letters (failed, invalid) are not waiting: their own alert covers them;
- the live workers, from their heartbeats: every ``HEARTBEAT_S`` each worker
  writes the job ids it runs, with a deadline, into one hash.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from worker.fleet import periodic
from worker.protocol import keys
from worker.protocol.scripts import ORPHANS, LuaScript

log = structlog.get_logger("memfleet.fleet")

HEARTBEAT_S = 2.0
# A worker's entry lapses after this many missed beats.
HEARTBEAT_MISSES = 3
# A job picked less than this long ago may not be in its worker's last beat yet.
ORPHAN_SLACK_MS = int(HEARTBEAT_S * HEARTBEAT_MISSES * 1000)
# Due jobs looked at one by one (in progress or ready); beyond, due jobs count as ready.
MAX_DUE_LOOKED_AT = 5_000
# Waiting sessions whose hand-over is gone, dropped per probe.
MAX_STALE_DROPPED = 1_000

_PROBE = LuaScript("worker.protocol.lua", "fleet_probe.lua", after=[ORPHANS])
_BEAT = LuaScript("worker.protocol.lua", "heartbeat.lua")


@dataclass(frozen=True, slots=True)
class FleetSnapshot:
    ready: int = 0
    deferred: int = 0
    in_progress: int = 0
    orphaned: int = 0
    oldest_ready_age_s: float = 0.0
    lag_s: float = 0.0
    sessions_waiting: int = 0
    workers: int = 0

    @property
    def jobs(self) -> int:
        """The work the fleet holds: ready, running, and held by dead workers."""
        return self.ready + self.in_progress


async def probe(redis: Any, queue_name: str) -> FleetSnapshot:
    """The fleet's state in one round trip (worker/protocol/lua/fleet_probe.lua)."""
    answer = await _PROBE(
        redis, [queue_name, keys.waiting_key(queue_name), keys.workers_key(queue_name),
                keys.suspects_key(queue_name)],
        [keys.ARQ_IN_PROGRESS_PREFIX, keys.META_PREFIX, ORPHAN_SLACK_MS, MAX_DUE_LOOKED_AT,
         MAX_STALE_DROPPED],
    )
    ready, deferred, running, orphaned, ready_age, lag, waiting, workers = (
        int(value) for value in answer)
    return FleetSnapshot(ready, deferred, running, orphaned, ready_age / 1000, lag / 1000,
                         waiting, workers)


def worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


async def beat(redis: Any, queue_name: str, worker: str, jobs: Callable[[], list[str]]) -> None:
    """One heartbeat: this worker is alive until the deadline and runs ``jobs()``."""
    await _BEAT(redis, [keys.workers_key(queue_name)],
                [worker, int(HEARTBEAT_S * HEARTBEAT_MISSES * 1000), ",".join(jobs())])


async def keep_beating(
    redis: Any, queue_name: str, jobs: Callable[[], list[str]], every_s: float = HEARTBEAT_S
) -> None:
    """Heartbeats until cancelled; the entry goes when the worker stops."""
    worker = worker_id()
    try:
        # A missed beat (Redis away) is retried at the next one.
        await periodic.every(every_s, lambda: beat(redis, queue_name, worker, jobs),
                             name="heartbeat")
    finally:
        try:
            # Bounded: with Redis away the client's retries would hold the shutdown.
            await asyncio.wait_for(redis.hdel(keys.workers_key(queue_name), worker), every_s)
        except Exception as exc:  # noqa: BLE001 - the entry lapses by its deadline anyway
            log.warning("heartbeat entry not removed", error=type(exc).__name__)
