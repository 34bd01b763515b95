"""A burst worker (`memfleet worker --burst`, the tests' drain) waits for a deferred
job instead of polling Redis in a busy loop, and still ends once the queue is empty."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from redis.asyncio import Redis

from tests.helpers import active_texts, drain, user_msg
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings


async def commands_processed(redis: Redis) -> int:
    return int((await redis.info("stats"))["total_commands_processed"])


async def test_a_burst_worker_waits_for_a_deferred_job_without_spinning(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    await schedule_memory_persistence(redis, "s1", "u1", [user_msg("I use Zig.")],
                                      queue_name=settings.queue_name)
    # The session's job is due in 1.5 s (as a busy session's or a backoff's would be).
    [(job_id, score)] = await redis.zrange(settings.queue_name, 0, 0, withscores=True)
    await redis.zadd(settings.queue_name, {job_id: score + 1500})
    before = await commands_processed(redis)
    started = time.monotonic()
    await drain(settings)
    waited = time.monotonic() - started
    commands = await commands_processed(redis) - before
    assert await active_texts(db, "u1") == ["Uses Zig"]
    assert waited >= 1.4, "the job ran when it was due, not before"
    # A busy loop sends thousands of commands in 1.5 s; waiting, a few per poll
    # (at most every BURST_MIN_WAIT_S) plus the job's own.
    assert commands < 300, commands
    assert await redis.zcard(settings.queue_name) == 0


async def test_a_burst_worker_ends_at_once_on_an_empty_queue(
    settings: Settings, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # "At once": it never waits for work (no sleep a wait would take), whatever the
    # machine's load makes of its start-up; the wall bound only catches a hang.
    real_sleep = asyncio.sleep
    waits: list[float] = []

    async def noted_sleep(delay: float, *args: Any, **kwargs: Any) -> Any:
        caller = sys._getframe(1).f_code.co_filename
        if delay > 0 and "arq" in Path(caller).name + Path(caller).parent.name:
            waits.append(delay)  # the poll loop's (ARQ's or worker.protocol.arq_worker's)
        return await real_sleep(delay, *args, **kwargs)

    monkeypatch.setattr(asyncio, "sleep", noted_sleep)
    started = time.monotonic()
    stats = await drain(settings)
    assert time.monotonic() - started < 30
    assert waits == [], waits
    assert stats == {"complete": 0, "failed": 0, "retried": 0}
