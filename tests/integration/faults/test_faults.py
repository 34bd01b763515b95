"""Faults a fleet meets: expired locks, concurrent sessions of one user, rerun jobs."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

import asyncpg
import pytest
from arq import Retry
from redis.asyncio import Redis

from tests.helpers import active_texts, drain, job_deps, lock_key, run_job, runs, user_msg
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.errors import StoreUnavailable
from worker.protocol import keys, lock
from worker.protocol.keys import SessionRef
from worker.providers.base import Answer
from worker.providers.factory import build_providers
from worker.providers.wire import (
    ConsolidationAnswer,
    ConsolidationRequest,
    ExtractionAnswer,
    ExtractionRequest,
)

U1_S1 = SessionRef("u1", "s1")


class GatedExtractor:
    """Extracts like the rules provider, but waits at a gate first (a stalled worker)."""

    provider_name, model = "memfleet.test", "test-double"

    def __init__(self, inner: Any, gate: asyncio.Event, entered: asyncio.Event) -> None:
        self.inner, self.gate, self.entered = inner, gate, entered

    async def extract(self, request: ExtractionRequest) -> Answer[ExtractionAnswer]:
        self.entered.set()
        await self.gate.wait()
        result: Answer[ExtractionAnswer] = await self.inner.extract(request)
        return result


class NeighborsBarrier:
    """The store, whose first read of the user's neighbours waits for the other job's:
    both jobs have read the user's version before either commits, the race the user
    version closes, however the machine schedules them (a barrier before that read let
    one job commit before a starved other read, and no race happened)."""

    def __init__(self, store: Any, barrier: asyncio.Barrier) -> None:
        self._store, self._barrier, self._reads = store, barrier, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def neighbors(self, *args: Any, **kwargs: Any) -> Any:
        found = await self._store.neighbors(*args, **kwargs)
        self._reads += 1
        if self._reads == 1:
            await self._barrier.wait()
        return found


@pytest.mark.parametrize("earlier_turns", [0, 1], ids=["first-run", "later-run"])
async def test_a_stalled_workers_commit_is_refused_after_its_lock_expired(
    settings: Settings, redis: Redis, db: asyncpg.Connection, earlier_turns: int
) -> None:
    # first-run: the fence is the cursor row's primary key; later-run: its version.
    messages = [user_msg("I like jazz.")][:earlier_turns]
    base = build_providers(settings)
    if earlier_turns:
        await schedule_memory_persistence(redis, "s1", "u1", messages,
                                          queue_name=settings.queue_name)
        async with job_deps(settings, redis, base) as deps:
            assert (await run_job(deps, "s1", "job-earlier"))["outcome"] == "committed"
    messages += [user_msg("I live in Oslo."), user_msg("I use Rust.")]
    await schedule_memory_persistence(redis, "s1", "u1", messages, queue_name=settings.queue_name)
    gate, entered = asyncio.Event(), asyncio.Event()
    stalled = replace(base, extractor=GatedExtractor(base.extractor, gate, entered))
    async with job_deps(settings, redis, stalled) as slow, job_deps(settings, redis, base) as fast:
        first = asyncio.create_task(run_job(slow, "s1", "job-stalled"))
        await entered.wait()
        # The stalled worker's lock expires (it could not extend it while frozen).
        await redis.delete(lock_key("u1", "s1"))
        second = await run_job(fast, "s1", "job-fresh")
        assert second["outcome"] == "committed"
        gate.set()
        stale = await first
    assert stale["outcome"] == "fenced"
    assert await db.fetchval("SELECT count(*) FROM memory_fact WHERE text = 'Uses Rust'") == 1
    assert await db.fetchval("SELECT count(*) FROM memory_fact") == 2 + earlier_turns
    outcomes = sorted(r["outcome"] for r in await runs(db, "s1"))
    assert outcomes == sorted(["committed"] * (1 + earlier_turns) + ["fenced"])
    fenced = next(r for r in await runs(db, "s1") if r["outcome"] == "fenced")
    assert (fenced["added"], fenced["updated"]) == (0, 0)


async def test_two_sessions_of_one_user_add_a_shared_fact_once(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    said = [user_msg("I live in Lisbon.")]
    await schedule_memory_persistence(redis, "phone", "u1", said, queue_name=settings.queue_name)
    await schedule_memory_persistence(redis, "laptop", "u1", said, queue_name=settings.queue_name)
    barrier = asyncio.Barrier(2)
    base = build_providers(settings)
    async with job_deps(settings, redis, base) as a, job_deps(settings, redis, base) as b:
        a = replace(a, store=NeighborsBarrier(a.store, barrier))
        b = replace(b, store=NeighborsBarrier(b.store, barrier))
        results = await asyncio.gather(run_job(a, "phone", "j1"), run_job(b, "laptop", "j2"))
    assert {r["outcome"] for r in results} == {"committed"}
    assert await active_texts(db, "u1") == ["Lives in Lisbon"]
    assert await db.fetchval("SELECT count(*) FROM memory_fact") == 1
    attempts = sorted(
        await db.fetchval("SELECT array_agg(consolidation_attempts) FROM memory_run")
    )
    assert attempts == [1, 2], "the loser re-ran consolidation against the winner's commit"


async def test_a_busy_session_is_deferred_not_failed(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    await schedule_memory_persistence(redis, "s1", "u1", [user_msg("I use Go.")],
                                      queue_name=settings.queue_name)
    await redis.set(lock_key("u1", "s1"), "someone-else", px=60_000)
    async with job_deps(settings, redis, build_providers(settings)) as deps:
        result = await run_job(deps, "s1", "j1")
        assert result == {"outcome": "deferred", "reason": "busy"}
        queued = await redis.zrange(settings.queue_name, 0, -1)
        assert len(queued) == 1, "a follow-up job is queued for later"
        await redis.delete(lock_key("u1", "s1"))
        later = await run_job(deps, "s1", queued[0].decode())
    assert later["outcome"] == "committed"
    assert await active_texts(db, "u1") == ["Uses Go"]


async def test_a_rerun_of_a_committed_job_writes_nothing(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    # ARQ is at-least-once: the same job may run twice.
    await schedule_memory_persistence(redis, "s1", "u1", [user_msg("I use Zig.")],
                                      queue_name=settings.queue_name)
    async with job_deps(settings, redis, build_providers(settings)) as deps:
        assert (await run_job(deps, "s1", "j1"))["outcome"] == "committed"
        assert (await run_job(deps, "s1", "j1"))["outcome"] == "empty"
    assert await db.fetchval("SELECT count(*) FROM memory_fact") == 1


async def test_handovers_while_a_job_runs_coalesce_and_lose_nothing(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    convo = [user_msg("I use Python.")]
    first = await schedule_memory_persistence(redis, "s1", "u1", convo,
                                              queue_name=settings.queue_name)
    assert first.job_id is not None
    again = await schedule_memory_persistence(redis, "s1", "u1", convo,
                                              queue_name=settings.queue_name)
    assert again.job_id is None, "a queued job already covers this hand-over"
    # The job starts (claims), then the user says more before it commits.
    started = lock.SessionLock(redis, U1_S1, ttl_ms=5000)
    assert (await lock.claim(redis, started, first.job_id)).payload is not None
    await started.release()
    convo = [*convo, user_msg("I use Elixir.")]
    after = await schedule_memory_persistence(redis, "s1", "u1", convo,
                                              queue_name=settings.queue_name)
    assert after.job_id is not None, "a hand-over after the claim gets a job of its own"
    await drain(settings)
    assert sorted(await active_texts(db, "u1")) == ["Uses Elixir", "Uses Python"]


class CountingConsolidator:
    provider_name, model = "memfleet.test", "test-double"

    def __init__(self, inner: Any) -> None:
        self.inner, self.calls = inner, 0

    async def consolidate(self, request: ConsolidationRequest) -> Answer[ConsolidationAnswer]:
        self.calls += 1
        answer: Answer[ConsolidationAnswer] = await self.inner.consolidate(request)
        return answer


async def test_a_job_that_lost_its_lock_stops_calling_the_model(
    settings: Settings, redis: Redis, db: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings.model_copy(update={"lock_ttl_s": 0.3})
    taken: list[lock.SessionLock] = []
    real_held = lock.SessionLock.held

    def noted(self: lock.SessionLock) -> None:
        taken.append(self)
        real_held(self)

    monkeypatch.setattr(lock.SessionLock, "held", noted)
    await schedule_memory_persistence(redis, "s1", "u1", [user_msg("I like jazz.")],
                                      queue_name=settings.queue_name)
    base = build_providers(settings)
    gate, entered = asyncio.Event(), asyncio.Event()
    counting = CountingConsolidator(base.consolidator)
    stalled = replace(base, extractor=GatedExtractor(base.extractor, gate, entered),
                      consolidator=counting)
    async with job_deps(settings, redis, stalled) as deps:
        job = asyncio.create_task(run_job(deps, "s1", "job-stalled"))
        await entered.wait()
        # Its lock expired while it was frozen, and another job took it.
        await redis.set(lock_key("u1", "s1"), "another-job", px=10_000)
        (held,) = taken
        deadline = time.monotonic() + 30
        while not held.lost:  # the next heartbeat finds the lock gone
            assert time.monotonic() < deadline, "the job never noticed"
            await asyncio.sleep(0.02)
        gate.set()
        result = await job
    assert result["outcome"] == "deferred"
    assert counting.calls == 0, "no model call once the lock was lost"
    assert await db.fetchval("SELECT count(*) FROM memory_fact") == 0
    assert await redis.get(lock_key("u1", "s1")) == b"another-job", "the other holder's lock stays"
    (run,) = await runs(db, "s1")
    assert run["outcome"] == "deferred" and "LockLost" in run["error"]
    # The session was handed to a later job: once the other holder is done, it is stored.
    await redis.delete(lock_key("u1", "s1"))
    await drain(settings)
    assert await active_texts(db, "u1") == ["Likes jazz"]


async def test_a_handover_never_coalesces_into_a_job_a_dead_worker_picked(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    said = [user_msg("I use Zig.")]
    first = await schedule_memory_persistence(redis, "s1", "u1", said,
                                              queue_name=settings.queue_name)
    assert first.job_id is not None
    # A worker picked the job (ARQ marks it in progress for the job timeout + 10 s)
    # and was SIGKILLed before the job claimed the session.
    await redis.set(keys.ARQ_IN_PROGRESS_PREFIX + first.job_id, b"1", px=60_000)
    said += [user_msg("I live in Oslo.")]
    second = await schedule_memory_persistence(redis, "s1", "u1", said,
                                               queue_name=settings.queue_name)
    assert second.job_id is not None, "the hand-over queued a job of its own"
    await redis.delete(keys.ARQ_IN_PROGRESS_PREFIX + first.job_id)  # in time, it expires
    await drain(settings)
    assert sorted(await active_texts(db, "u1")) == ["Lives in Oslo", "Uses Zig"]


async def test_a_job_whose_worker_died_before_claiming_it_is_queued_again_by_recovery(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    first = await schedule_memory_persistence(redis, "s1", "u1", [user_msg("I use Zig.")],
                                              queue_name=settings.queue_name)
    assert first.job_id is not None
    # A worker picked the job and was SIGKILLed before the job claimed the session;
    # no later hand-over comes. ARQ alone would run it again after job timeout + 10 s.
    await redis.set(keys.ARQ_IN_PROGRESS_PREFIX + first.job_id, b"1", px=60_000)
    pending = keys.pending_key(settings.queue_name)
    assert await redis.zscore(pending, U1_S1.key) is not None
    assert await lock.recover_abandoned(redis, settings.queue_name) == [], "not late yet"
    await redis.zadd(pending, {U1_S1.key: 0})  # its grace period is over
    assert await lock.recover_abandoned(redis, settings.queue_name) == [U1_S1]
    again = await redis.get(U1_S1.queued_key)
    assert again is not None and again.decode() != first.job_id, "a job of its own"
    await redis.delete(keys.ARQ_IN_PROGRESS_PREFIX + first.job_id)  # in time, it expires
    await drain(settings)
    assert await active_texts(db, "u1") == ["Uses Zig"]
    assert await redis.zscore(pending, U1_S1.key) is None, "claimed: no longer pending"


async def test_a_late_session_whose_job_a_live_worker_runs_is_not_queued_again(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    # A worker picked the job but, on a loaded machine, has not reached the claim
    # within the pending grace. Its heartbeat lists the job: the session is not
    # abandoned, and a second job would only run for nothing.
    from worker.fleet import probe

    first = await schedule_memory_persistence(redis, "s1", "u1", [user_msg("I use Zig.")],
                                              queue_name=settings.queue_name)
    assert first.job_id is not None
    job_id = first.job_id
    await redis.set(keys.ARQ_IN_PROGRESS_PREFIX + job_id, b"1", px=60_000)
    await probe.beat(redis, settings.queue_name, "slow-worker", lambda: [job_id])
    pending = keys.pending_key(settings.queue_name)
    await redis.zadd(pending, {U1_S1.key: 0})  # its grace period is over
    assert await lock.recover_abandoned(redis, settings.queue_name) == []
    deadline = await redis.zscore(pending, U1_S1.key)
    assert deadline is not None and deadline > time.time() * 1000, "watched again later"
    assert (await redis.get(U1_S1.queued_key)) == job_id.encode(), "no second job"
    assert await redis.zcard(settings.queue_name) == 1
    # The worker dies: its entry lapses, and the next late pass queues the session again.
    await redis.hdel(keys.workers_key(settings.queue_name), "slow-worker")
    await redis.zadd(pending, {U1_S1.key: 0})
    assert await lock.recover_abandoned(redis, settings.queue_name) == [U1_S1]
    await redis.delete(keys.ARQ_IN_PROGRESS_PREFIX + job_id)  # in time, it expires
    await drain(settings)
    assert await active_texts(db, "u1") == ["Uses Zig"]


async def test_a_late_session_whose_job_still_waits_in_the_queue_is_not_queued_again(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    # Every worker busy: the job waits in the queue past the grace. It will run; the
    # recovery pass says nothing and queues nothing.
    first = await schedule_memory_persistence(redis, "s1", "u1", [user_msg("I use Zig.")],
                                              queue_name=settings.queue_name)
    assert first.job_id is not None
    pending = keys.pending_key(settings.queue_name)
    await redis.zadd(pending, {U1_S1.key: 0})
    assert await lock.recover_abandoned(redis, settings.queue_name) == []
    assert await redis.zscore(pending, U1_S1.key) > time.time() * 1000
    # Its job key gone (expired), the queued job can run nothing: recovered.
    await redis.delete(keys.ARQ_JOB_PREFIX + first.job_id)
    await redis.zadd(pending, {U1_S1.key: 0})
    assert await lock.recover_abandoned(redis, settings.queue_name) == [U1_S1]
    await drain(settings)
    assert await active_texts(db, "u1") == ["Uses Zig"]


async def test_a_job_that_found_its_session_busy_and_died_leaves_it_to_recovery(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    first = await schedule_memory_persistence(redis, "s1", "u1", [user_msg("I use Zig.")],
                                              queue_name=settings.queue_name)
    assert first.job_id is not None
    # Another job holds the session; this job claims, finds it busy, and its worker
    # is SIGKILLed before it queues the session again.
    await redis.set(lock_key("u1", "s1"), b"another-job", px=30_000)
    busy = lock.SessionLock(redis, U1_S1, ttl_ms=1000, queue_name=settings.queue_name)
    assert not (await lock.claim(redis, busy, first.job_id)).locked
    await redis.delete(lock_key("u1", "s1"))  # the other job ends
    await redis.zrem(settings.queue_name, first.job_id)  # ARQ will not run it in time
    pending = keys.pending_key(settings.queue_name)
    deadline = await redis.zscore(pending, U1_S1.key)
    assert deadline is not None, "still pending"
    assert deadline <= time.time() * 1000 + lock.HANDOFF_GRACE_MS, "due again within seconds"
    await redis.zadd(pending, {U1_S1.key: 0})  # its grace period is over
    assert await lock.recover_abandoned(redis, settings.queue_name) == [U1_S1]
    await drain(settings)
    assert await active_texts(db, "u1") == ["Uses Zig"]


async def test_a_job_handed_to_arq_for_a_retry_stays_pending_until_it_runs(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    # A retry is queued by ARQ after the job ends; a worker dying in between would
    # leave the session to ARQ's in-progress expiry. Pending, recovery has it.
    job = await schedule_memory_persistence(redis, "s1", "u1", [user_msg("I use Zig.")],
                                            queue_name=settings.queue_name)
    assert job.job_id is not None
    async with job_deps(settings, redis, build_providers(settings)) as deps:
        down = replace(deps, store=StoreDown(deps.store))
        with pytest.raises(Retry):
            await run_job(down, "s1", job.job_id)
    pending = keys.pending_key(settings.queue_name)
    assert await redis.zscore(pending, U1_S1.key) is not None
    await redis.zrem(settings.queue_name, job.job_id)  # the worker died: no retry in time
    await redis.zadd(pending, {U1_S1.key: 0})
    assert await lock.recover_abandoned(redis, settings.queue_name) == [U1_S1]
    await drain(settings)
    assert await active_texts(db, "u1") == ["Uses Zig"]
    assert await redis.zscore(pending, U1_S1.key) is None, "claimed: no longer pending"


class StoreDown:
    """The store, with PostgreSQL unreachable for reading the cursor."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def load_session(self, user_id: str, session_id: str) -> Any:
        raise StoreUnavailable("loading the cursor failed: ConnectionRefusedError")
