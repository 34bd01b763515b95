"""ARQ's worker, refilling a freed slot at once and polling without busy loops.

ARQ polls its queue every ``poll_delay`` seconds. Two of its habits cost a busy
worker throughput, and are changed here:

- A slot freed by a finished job stays empty until the next poll. Here, while
  every slot is taken, an iteration waits for one of this worker's jobs to end
  and polls again at once, until ``poll_delay`` has passed; so a worker at
  ``max_jobs`` keeps its slots full instead of losing up to a poll per job.
- ARQ reads the head of the queue, then takes each job there in four round
  trips (WATCH, EXISTS, ZSCORE, then MULTI/PSETEX/EXEC), including every job
  another worker of the fleet runs: they stay at the head until they finish.
  Here one script (``worker/lua/take_jobs.lua``) reads the head and takes up
  to the free slots' count of jobs nobody runs, atomically, in one round trip.

In burst mode (``memfleet worker --burst``, the tests' drain; ``poll_delay=0``)
ARQ polls again at once until the queue is empty, a busy loop of Redis commands
while the queue holds only jobs not due yet (deferred: a busy session, the
circuit breaker, a retry's backoff) or jobs another worker holds. Here a burst
iteration that started no job waits: until one of this worker's jobs ends, or
the earliest queued job is due, at most ``BURST_MAX_WAIT_S`` and at least
``BURST_MIN_WAIT_S``. The burst still ends as soon as the queue is empty.

``_poll_iteration`` (replaced here), ``run_job``, ``_cancel_aborted_jobs``,
``heart_beat``, ``_jobs_started``, ``_release_sem_dec_counter_on_complete``,
``sem``, ``tasks``, ``job_counter`` and ``in_progress_timeout_s`` are ARQ
internals (arq 0.28, pinned); this module and worker.queue are the only ones
that touch them.
"""

from __future__ import annotations

import asyncio
import time

from arq.constants import in_progress_key_prefix
from arq.utils import timestamp_ms
from arq.worker import Worker as ArqWorker

from worker.redis_scripts import LuaScript

BURST_MIN_WAIT_S = 0.05
BURST_MAX_WAIT_S = 0.5

_TAKE_JOBS = LuaScript("worker.lua", "take_jobs.lua")


class Worker(ArqWorker):
    async def _poll_iteration(self) -> None:
        if self.burst:
            started = self._jobs_started()
            await self._poll_once()
            if self._jobs_started() == started:
                await self._wait_for_work()
            return
        # ARQ's loop sleeps what is left of poll_delay after this returns.
        deadline = time.monotonic() + self.poll_delay_s
        while True:
            await self._poll_once()
            if self.job_counter < self.max_jobs:
                return  # a slot is free: the queue held nothing more to start
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not await self._slot_freed(remaining):
                return

    async def _poll_once(self) -> None:
        """ARQ's poll iteration (arq 0.28), with the jobs taken by one script."""
        free = self.max_jobs - self.job_counter
        if self.burst and self.max_burst_jobs >= 0:
            free = min(free, self.max_burst_jobs - self._jobs_started())
        if self.allow_pick_jobs and free > 0:
            await self._take_jobs(free)
        if self.allow_abort_jobs:
            await self._cancel_aborted_jobs()
        for job_id, task in list(self.tasks.items()):
            if task.done():
                del self.tasks[job_id]
                task.result()  # an error of run_job itself surfaces here, as in ARQ
        await self.heart_beat()

    async def _take_jobs(self, count: int) -> None:
        taken = await _TAKE_JOBS(
            self.pool, [self.queue_name],
            [timestamp_ms(), int(self.in_progress_timeout_s * 1000), count,
             in_progress_key_prefix, self.queue_read_limit])
        for raw_id, raw_score in zip(taken[::2], taken[1::2], strict=True):
            await self.sem.acquire()  # a slot is free: this never waits
            self.job_counter += 1
            job_id = raw_id.decode()
            task = self.loop.create_task(self.run_job(job_id, int(float(raw_score))))
            task.add_done_callback(lambda _: self._release_sem_dec_counter_on_complete())
            self.tasks[job_id] = task

    async def _slot_freed(self, timeout_s: float) -> bool:
        """Wait until one of this worker's jobs ends; False if none did in time."""
        running = [task for task in self.tasks.values() if not task.done()]
        if not running:
            return True
        done, _ = await asyncio.wait(running, timeout=timeout_s,
                                     return_when=asyncio.FIRST_COMPLETED)
        return bool(done)

    async def _wait_for_work(self) -> None:
        running = [task for task in self.tasks.values() if not task.done()]
        if running and self.job_counter >= self.max_jobs:
            # Every slot is taken: the next job can start when one of ours ends.
            await asyncio.wait(running, timeout=BURST_MAX_WAIT_S,
                               return_when=asyncio.FIRST_COMPLETED)
            return
        head = await self.pool.zrange(self.queue_name, 0, 0, withscores=True)
        if not head:
            return  # the queue is empty: ARQ's loop ends the burst now
        due_in_s = head[0][1] / 1000 - time.time()
        wait_s = min(max(due_in_s, BURST_MIN_WAIT_S), BURST_MAX_WAIT_S)
        if running:
            await asyncio.wait(running, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
        else:
            await asyncio.sleep(wait_s)
