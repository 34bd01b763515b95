"""Outcomes the job must never lose: a follow-up that Redis refused, an error nobody
expected, and a test process whose garbage collector the worker leaves alone."""

from __future__ import annotations

import gc
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import asyncpg
import pytest
from arq import Retry
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from tests.helpers import active_texts, drain, job_deps, lock_key, run_job, runs, user_msg
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.errors import UnexpectedJobError
from worker.protocol import queue
from worker.providers.factory import build_providers
from worker.telemetry import setup_telemetry


class OnEnqueue:
    """The worker's Redis, running ``hook`` before each hand-over script call; the
    lock's own scripts go straight through."""

    def __init__(self, redis: Redis, hook: Callable[[], Awaitable[None]]) -> None:
        self._redis, self._hook, self.calls = redis, hook, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._redis, name)

    async def evalsha(self, sha: str, *args: Any) -> Any:
        if sha == queue._ENQUEUE.sha:
            self.calls += 1
            await self._hook()
        return await self._redis.evalsha(sha, *args)


async def test_a_refused_follow_up_enqueue_hands_the_rest_of_the_backlog_to_arq(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    settings = settings.model_copy(update={"max_slice_messages": 1})
    said = [user_msg("I use Zig."), user_msg("I live in Oslo.")]
    await schedule_memory_persistence(redis, "s1", "u1", said, queue_name=settings.queue_name)
    async with job_deps(settings, redis, build_providers(settings)) as deps:
        async def refuse() -> None:  # Redis went away right after the commit
            raise RedisConnectionError("connection reset")

        flaky = OnEnqueue(redis, refuse)
        with pytest.raises(Retry):
            await run_job(replace(deps, redis=flaky), "s1", "j1")
        assert flaky.calls == 3, "tried again before handing it over"
        assert await active_texts(db, "u1") == ["Uses Zig"], "the first slice is committed"
        # ARQ runs the job again: it goes on from the cursor, with Redis back.
        assert (await run_job(deps, "s1", "j1"))["outcome"] == "committed"
    assert sorted(await active_texts(db, "u1")) == ["Lives in Oslo", "Uses Zig"]


class ExplodingExtractor:
    provider_name, model = "memfleet.test", "test-double"

    async def extract(self, request: Any) -> Any:
        raise RuntimeError("a bug nobody planned for, quoting I use Zig")


async def test_an_unexpected_error_is_recorded_counted_and_raised(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    await schedule_memory_persistence(redis, "s1", "u1", [user_msg("I use Zig.")],
                                      queue_name=settings.queue_name)
    broken = replace(build_providers(settings), extractor=ExplodingExtractor())
    async with job_deps(settings, redis, broken) as deps:
        with pytest.raises(UnexpectedJobError) as raised:
            await run_job(deps, "s1", "j1")
        # ARQ logs what the job raises: the type and place, never the message or its chain.
        assert str(raised.value).startswith("RuntimeError at ")
        assert "Zig" not in str(raised.value) and raised.value.__suppress_context__
        metrics = deps.telemetry.render_metrics().decode()
    assert 'memfleet_jobs_total{outcome="error"} 1.0' in metrics
    (run,) = await runs(db, "s1")
    assert (run["outcome"], run["error"]) == ("error", "RuntimeError")
    assert await db.fetchval("SELECT count(*) FROM session_cursor") == 0, "nothing was lost"


async def test_a_slice_over_the_cpu_budget_is_skipped_on_the_record_and_the_session_goes_on(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    tight = settings.model_copy(update={"provider_cpu_budget_s": 1e-9})
    await schedule_memory_persistence(redis, "s1", "u1", [user_msg("I use Zig.")],
                                      queue_name=settings.queue_name)
    counts = await drain(tight)
    assert counts["retried"] == 0, "deterministic work is not tried again"
    (run,) = await runs(db, "s1")
    assert run["outcome"] == "skipped"
    assert run["error"].startswith("ProviderWorkOverBudget: "), run["error"]
    assert await active_texts(db, "u1") == []
    # Skipped past, not stuck: the next turn of the session is processed normally.
    await schedule_memory_persistence(redis, "s1", "u1",
                                      [user_msg("I use Zig."), user_msg("I live in Oslo.")],
                                      queue_name=settings.queue_name)
    await drain(settings)
    assert [r["outcome"] for r in await runs(db, "s1")] == ["skipped", "committed"]
    assert await active_texts(db, "u1") == ["Lives in Oslo"]


async def test_a_worker_in_a_shared_process_leaves_the_garbage_collector_alone(
    settings: Settings, redis: Redis
) -> None:
    threshold, frozen = gc.get_threshold(), gc.get_freeze_count()
    await schedule_memory_persistence(redis, "s1", "u1", [user_msg("I use Zig.")],
                                      queue_name=settings.queue_name)
    await drain(settings, telemetry=setup_telemetry(settings))
    assert (gc.get_threshold(), gc.get_freeze_count()) == (threshold, frozen)


async def test_the_follow_up_is_queued_while_the_job_still_holds_the_session(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    # Queued after the release, a worker dying in between would leave the rest of
    # the list with no job, no lock and nothing pending.
    settings = settings.model_copy(update={"max_slice_messages": 1})
    said = [user_msg("I use Zig."), user_msg("I live in Oslo.")]
    await schedule_memory_persistence(redis, "s1", "u1", said, queue_name=settings.queue_name)
    locked_at_enqueue: list[bool] = []

    async def note_the_lock() -> None:
        locked_at_enqueue.append(bool(await redis.exists(lock_key("u1", "s1"))))

    async with job_deps(settings, redis, build_providers(settings)) as deps:
        watched = OnEnqueue(redis, note_the_lock)
        assert (await run_job(replace(deps, redis=watched), "s1", "j1"))["follow_up"]
    assert locked_at_enqueue == [True]
