"""ARQ's worker, with a burst mode that waits instead of spinning.

ARQ's burst loop polls again at once (``poll_delay=0``) until the queue is
empty. While the queue holds only jobs that are not due yet (deferred: a busy
session, the circuit breaker, a retry's backoff) or jobs that another worker
holds, or while this worker's own jobs run, that is a busy loop of Redis
commands. Here an iteration that started no job waits: until one of this
worker's jobs ends, or the earliest queued job is due, at most
``BURST_MAX_WAIT_S`` and at least ``BURST_MIN_WAIT_S``. The burst still ends as
soon as the queue is empty.

``_poll_iteration`` and ``_jobs_started`` are ARQ internals (arq 0.28); this
module and worker.queue are the only ones that touch them.
"""

from __future__ import annotations

import asyncio
import time

from arq.worker import Worker as ArqWorker

BURST_MIN_WAIT_S = 0.05
BURST_MAX_WAIT_S = 0.5


class Worker(ArqWorker):
    async def _poll_iteration(self) -> None:
        started = self._jobs_started()
        await super()._poll_iteration()
        if self.burst and self._jobs_started() == started:
            await self._wait_for_work()

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
