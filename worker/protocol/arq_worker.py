"""ARQ's worker, refilling a freed slot at once and polling without busy loops.

ARQ polls its queue every ``poll_delay`` seconds. Two of its habits cost a busy
worker throughput, and are changed here:

- A slot freed by a finished job stays empty until the next poll. Here, while
  every slot is taken, an iteration waits for one of this worker's jobs to end
  and polls again at once, until ``poll_delay`` has passed; so a worker at
  ``max_jobs`` keeps its slots full instead of losing up to a poll per job.
- A job stays in the queue's sorted set while it runs, so each poll reads this
  worker's own running jobs again, and ARQ checks each in Redis (a WATCH, an
  EXISTS and a ZSCORE) before skipping it. Here the ids of jobs this worker is
  running are skipped without a round trip.
- ARQ takes a job in four round trips (WATCH, EXISTS, ZSCORE, then MULTI/PSETEX/
  EXEC); a busy worker's event loop makes each of them wait. Here one script
  (``worker/protocol/lua/start_job.lua``) does the same checks and the same write,
  atomically, in one.

ARQ's summary (``shutdown on ... ◆ N jobs complete ◆ N failed ◆ ...``) counts a
job that returned as complete. memfleet's job returns its ending rather than
raise it, so a job that gave its session up (``failed``, ``invalid``: a dead
letter) is counted here among the failed instead; ARQ's retries are untouched.
And the summary's "ongoing" counts the tasks still running, not those that
finished since the last poll.

In burst mode (``memfleet worker --burst``, the tests' drain; ``poll_delay=0``)
ARQ polls again at once until the queue is empty, a busy loop of Redis commands
while the queue holds only jobs not due yet (deferred: a busy session, the
circuit breaker, a retry's backoff) or jobs another worker holds. Here a burst
iteration that started no job waits: until one of this worker's jobs ends, or
the earliest queued job is due, at most ``BURST_MAX_WAIT_S`` and at least
``BURST_MIN_WAIT_S``. The burst still ends as soon as the queue is empty.

A Redis or PostgreSQL away never ends the worker (docs/operations.md, "When a
server is away"). Given a ``servers`` gate (worker.fleet.server_watch), each
pass of the loop first waits until every server answers: no job is taken while
one is away (it would only spend its tries). A Redis error in a pass (the gate
had not seen the outage yet) makes the gate check at once and wait; a job whose
ARQ bookkeeping could not reach Redis stays in progress until ARQ's in-progress
key lapses, then runs again, as a killed worker's does. A burst worker
(``--burst``) waits out an outage the same way and ends only once the queue is
empty. ARQ's ``main`` and ``close`` are therefore repeated here, with the pass
and the shutdown's Redis calls guarded.

``main``, ``_poll_iteration``, ``start_jobs``, ``run_job``, ``_jobs_started``,
``_release_sem_dec_counter_on_complete``, ``sem``, ``tasks``, ``job_counter``,
``functions``, ``jobs_complete``, ``jobs_failed``, ``handle_sig``,
``handle_sig_wait_for_completion``, ``in_progress_timeout_s``, ``_pool``, ``ctx``,
``_handle_signals``, ``max_burst_jobs`` and ``health_check_key`` are ARQ
internals (arq 0.28, pinned); this module and worker.protocol.queue are the only
ones that touch them (ARQ's key names: worker.protocol.keys).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from dataclasses import replace
from signal import Signals
from typing import Any, Protocol

from arq.connections import create_pool, log_redis_info
from arq.typing import WorkerCoroutine
from arq.utils import poll, timestamp_ms
from arq.worker import Function
from arq.worker import Worker as ArqWorker
from arq.worker import logger as arq_logger
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from worker.outcomes import Outcome
from worker.protocol import keys
from worker.protocol.replies import as_text
from worker.protocol.scripts import LuaScript

BURST_MIN_WAIT_S = 0.05
BURST_MAX_WAIT_S = 0.5

_START_JOB = LuaScript("worker.protocol.lua", "start_job.lua")

# Endings a job returns (its result's ``outcome``) that ARQ's summary counts as
# failed: the session given up (worker.protection.retry_policy.GIVEN_UP). An ``error``
# is raised, and ARQ counts it failed by itself.
FAILED_RESULTS = frozenset({Outcome.FAILED, Outcome.INVALID})

# Redis away (down, restarting, unreachable), not refusing a command: what redis-py
# raises, and the socket's own errors in the worker's loop.
REDIS_DOWN = (RedisConnectionError, RedisTimeoutError)
REDIS_AWAY = (*REDIS_DOWN, OSError)


class ServerGate(Protocol):
    """What the worker asks of worker.fleet.server_watch.ServerWatch."""

    def down(self) -> list[str]: ...

    async def check_now(self) -> None: ...

    async def wait_until_up(self) -> None: ...


class Worker(ArqWorker):
    def __init__(self, *args: Any, servers: ServerGate | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.servers = servers
        self._gave_up: set[str] = set()  # ids of jobs that returned a FAILED_RESULTS ending
        for name, function in self.functions.items():
            if type(function) is Function:  # a cron job has no ending to read
                self.functions[name] = replace(function,
                                               coroutine=self._noting_failures(function.coroutine))

    def _noting_failures(self, coroutine: WorkerCoroutine) -> WorkerCoroutine:
        async def job(ctx: dict[Any, Any], *args: Any, **kwargs: Any) -> Any:
            result = await coroutine(ctx, *args, **kwargs)
            if isinstance(result, dict) and result.get("outcome") in FAILED_RESULTS:
                self._gave_up.add(ctx["job_id"])
            return result

        return job

    async def main(self) -> None:
        """ARQ's main (arq 0.28), each pass waiting until the servers answer."""
        if self._pool is None:
            self._pool = await create_pool(
                self.redis_settings, job_deserializer=self.job_deserializer,
                job_serializer=self.job_serializer, default_queue_name=self.queue_name,
                expires_extra_ms=self.expires_extra_ms)
        arq_logger.info("Starting worker for %d functions: %s", len(self.functions),
                        ", ".join(self.functions))
        await log_redis_info(self.pool, arq_logger.info)
        self.ctx["redis"] = self.pool
        if self.on_startup:
            await self.on_startup(self.ctx)
        async for _ in poll(self.poll_delay_s):
            if self.servers is not None:
                await self.servers.wait_until_up()
            try:
                await self._poll_iteration()
                if self.burst and await self._burst_done():
                    return
            except REDIS_AWAY:
                if self.servers is None:
                    raise
                # The watch may not have seen it yet: look now; the next pass waits.
                await self.servers.check_now()

    async def _burst_done(self) -> bool:
        """ARQ's end of a burst: its job count reached, or the queue empty."""
        if 0 <= self.max_burst_jobs <= self._jobs_started() or \
                await self.pool.zcard(self.queue_name) == 0:
            await asyncio.gather(*self.tasks.values())
            return True
        return False

    async def close(self) -> None:
        """ARQ's close (arq 0.28); with Redis away, its health key is left to lapse."""
        if not self._handle_signals:
            self.handle_sig(signal.SIGUSR1)
        if not self._pool:
            return
        await asyncio.gather(*self.tasks.values())
        if self.servers is None or "Redis" not in self.servers.down():
            with contextlib.suppress(*REDIS_AWAY):
                await self.pool.delete(self.health_check_key)
        if self.on_shutdown:
            await self.on_shutdown(self.ctx)
        await self.pool.aclose(close_connection_pool=True)
        self._pool = None

    async def run_job(self, job_id: str, score: int) -> None:
        try:
            await super().run_job(job_id, score)
        except REDIS_AWAY:
            if self.servers is None:
                raise
            # ARQ could not read or finish the job: it stays in progress until its
            # key lapses, then runs again (the cursor fence keeps it from counting twice).
            arq_logger.debug("job %s left to ARQ's in-progress expiry: Redis away", job_id)
        finally:
            if job_id in self._gave_up:
                # ARQ counted it complete as it returned: the summary's failed count it.
                self._gave_up.discard(job_id)
                self.jobs_complete -= 1
                self.jobs_failed += 1

    def handle_sig(self, signum: Signals) -> None:
        self._drop_finished_tasks()
        super().handle_sig(signum)

    def handle_sig_wait_for_completion(self, signum: Signals) -> None:
        self._drop_finished_tasks()
        super().handle_sig_wait_for_completion(signum)

    def _drop_finished_tasks(self) -> None:
        """What ARQ's poll drops (a finished task) before its summary counts the tasks as
        ongoing; one whose run_job raised stays, for ARQ to raise at close."""
        for job_id, task in list(self.tasks.items()):
            if task.done() and not task.cancelled() and task.exception() is None:
                del self.tasks[job_id]

    async def _poll_iteration(self) -> None:
        if self.burst:
            started = self._jobs_started()
            await super()._poll_iteration()
            if self._jobs_started() == started:
                await self._wait_for_work()
            return
        # ARQ's loop sleeps what is left of poll_delay after this returns.
        deadline = time.monotonic() + self.poll_delay_s
        while True:
            await super()._poll_iteration()
            if self.job_counter < self.max_jobs:
                return  # a slot is free: the queue held nothing more to start
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not await self._slot_freed(remaining):
                return

    async def start_jobs(self, job_ids: list[bytes]) -> None:
        """ARQ's start_jobs (arq 0.28), skipping this worker's running jobs, with the
        job taken in one script."""
        # Every job this worker holds a task for: running, or finished since the
        # queue was read (it has left the queue), or deferred by a retry (not due
        # yet); the poll's end drops the finished tasks.
        held = set(self.tasks)
        for job_id in (as_text(raw) for raw in job_ids):
            if job_id in held:
                continue
            await self.sem.acquire()
            if self.job_counter >= self.max_jobs:
                self.sem.release()
                return
            self.job_counter += 1
            score = await _START_JOB(
                self.pool, [keys.arq_in_progress_key(job_id), self.queue_name],
                [job_id, timestamp_ms(), int(self.in_progress_timeout_s * 1000)])
            if score is None:
                self.job_counter -= 1
                self.sem.release()
                continue
            task = self.loop.create_task(self.run_job(job_id, int(float(score))))
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
