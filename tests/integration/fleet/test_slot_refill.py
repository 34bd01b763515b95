"""The worker's own ARQ loop (worker.protocol.arq_worker) on real Redis: a slot freed by a
finished job takes the next queued job at once, not at the next poll; a job is
taken in one round trip; and the jobs a worker is running are not checked again
in Redis on every poll."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest
from arq import create_pool
from arq.worker import func
from redis.asyncio import Redis

from worker.embedded import EmbeddedRedis
from worker.fleet.app import redis_settings
from worker.protocol.arq_worker import Worker

JOB_S = 0.3
POLL_DELAY_S = 5.0  # far longer than a job: a slot that waited for the poll would show


async def sleeper(ctx: dict[str, Any], seconds: float) -> float:
    await asyncio.sleep(seconds)
    return seconds


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    """This module's own server (in place of the session's): its command counts are
    this module's workers' alone, whatever another test's leftover client does."""
    server = EmbeddedRedis(tmp_path_factory.mktemp("refill-redis"))
    server.start()
    yield server
    server.stop()


def new_worker(redis_url: str, queue: str, max_jobs: int, poll_delay_s: float) -> Worker:
    return Worker(functions=[func(sleeper, name="sleeper")], queue_name=queue,
                  redis_settings=redis_settings(redis_url, 1), max_jobs=max_jobs,
                  poll_delay=poll_delay_s, handle_signals=False, keep_result=60)


async def run_until_done(worker: Worker, jobs: int, timeout_s: float) -> float:
    """Seconds until the worker has completed ``jobs`` jobs (it keeps polling after)."""
    started = time.monotonic()
    running = asyncio.create_task(worker.main())
    try:
        while worker.jobs_complete < jobs:
            assert time.monotonic() - started < timeout_s, worker.jobs_complete
            assert not running.done(), running
            await asyncio.sleep(0.02)
        return time.monotonic() - started
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        # ARQ's close() cancels every job task not done, and one cancelled in its
        # bookkeeping (after jobs_complete counted it) fails close()'s gather: let the
        # last ones end first.
        if worker.tasks:
            await asyncio.wait(list(worker.tasks.values()), timeout=10)
        await worker.close()


async def test_a_freed_slot_takes_the_next_job_without_waiting_for_the_poll(
    redis_url: str,
) -> None:
    queue = "refill-queue"
    pool = await create_pool(redis_settings(redis_url, 1), default_queue_name=queue)
    for _ in range(6):
        await pool.enqueue_job("sleeper", JOB_S, _queue_name=queue)
    await pool.aclose()
    # Two slots, six jobs of 0.3 s: three rounds back to back take about 0.9 s. A slot
    # waiting for ARQ's next poll would start the second round only after 5 s.
    worker = new_worker(redis_url, queue, max_jobs=2, poll_delay_s=POLL_DELAY_S)
    took = await run_until_done(worker, 6, timeout_s=30)
    assert took < POLL_DELAY_S, took


async def commands(redis: Redis, name: str) -> int:
    stats = await redis.info("commandstats")
    return int(stats.get(f"cmdstat_{name}", {}).get("calls", 0))


async def test_a_job_is_taken_in_one_round_trip_and_running_jobs_are_not_checked_again(
    redis_url: str, redis: Redis,
) -> None:
    queue = "recheck-queue"
    pool = await create_pool(redis_settings(redis_url, 1), default_queue_name=queue)
    for n in range(20):  # of different lengths, so slots free one at a time
        await pool.enqueue_job("sleeper", 0.1 + 0.05 * (n % 5), _queue_name=queue)
    await pool.aclose()
    before = {name: await commands(redis, name) for name in ("watch", "evalsha", "eval")}
    # Twenty jobs through ten slots, polled every 50 ms: ARQ alone WATCHes the running
    # jobs again at every poll with a slot free (62 WATCHes for these 20 jobs where
    # this was written), and takes each job in four round trips; here each job is
    # taken by one script call, and no running job is looked at again.
    worker = new_worker(redis_url, queue, max_jobs=10, poll_delay_s=0.05)
    await run_until_done(worker, 20, timeout_s=30)
    after = {name: await commands(redis, name) for name in before}
    assert after["watch"] == before["watch"]
    assert after["evalsha"] - before["evalsha"] == 20
    assert after["eval"] - before["eval"] <= 1  # the script's first call on a new server
    assert worker.jobs_complete == 20 and worker.jobs_failed == 0


async def test_a_worker_takes_the_jobs_queued_behind_another_workers_running_ones(
    redis_url: str, redis: Redis,
) -> None:
    queue = "fleet-queue"
    pool = await create_pool(redis_settings(redis_url, 1), default_queue_name=queue)
    for _ in range(4):  # at the head of the queue, running on worker A all along
        await pool.enqueue_job("sleeper", 60.0, _queue_name=queue)
    first = new_worker(redis_url, queue, max_jobs=4, poll_delay_s=0.05)
    running = asyncio.create_task(first.main())
    try:
        for _ in range(1000):
            if first.job_counter == 4:
                break
            await asyncio.sleep(0.01)
        assert first.job_counter == 4, "worker A took the four long jobs"
        for _ in range(12):  # behind them
            await pool.enqueue_job("sleeper", 0.05, _queue_name=queue)
        watches = await commands(redis, "watch")
        second = new_worker(redis_url, queue, max_jobs=4, poll_delay_s=0.05)
        await run_until_done(second, 12, timeout_s=30)
        # B took all twelve while A's four still ran, and WATCHed none of them.
        assert first.jobs_complete == 0 and first.job_counter == 4
        assert await commands(redis, "watch") == watches
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        await first.close()
        await pool.aclose()
