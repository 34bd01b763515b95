"""An erase leaves nothing of the user in Redis, even with no worker running: the
queued ARQ jobs that name the user (also one ARQ queued again after a failure,
which no marker names) and the user's sessions in the pending and waiting sets
go in the erase's own script. Other users' jobs and entries stay."""

from __future__ import annotations

import asyncpg
from redis.asyncio import Redis

from tests.helpers import active_texts, drain, job_deps, user_msg
from worker import privacy, queue
from worker.client import schedule_memory_persistence
from worker.config import Settings
from worker.providers.factory import build_providers
from worker.session_ref import SessionRef


async def _names(redis: Redis, needle: bytes) -> list[str]:
    """Every key, set member and string value of Redis that holds ``needle``."""
    found = []
    for key in await redis.keys("*"):
        kind = await redis.type(key)
        if needle in key:
            found.append(key.decode())
        elif kind == b"string" and needle in (await redis.get(key) or b""):
            found.append(f"{key.decode()} (value)")
        elif kind in (b"zset", b"set"):
            members = (await redis.zrange(key, 0, -1) if kind == b"zset"
                       else await redis.smembers(key))
            if any(needle in m for m in members):
                found.append(f"{key.decode()} (member)")
    return found


async def test_an_erase_takes_the_users_queued_jobs_and_set_entries_with_no_worker_running(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    name = settings.queue_name
    for session in ("1", "2", "3"):
        await schedule_memory_persistence(redis, session, "alice", [user_msg("I use Rust.")],
                                          queue_name=name)
    await schedule_memory_persistence(redis, "1", "bob", [user_msg("I use Go.")],
                                      queue_name=name)
    # A job ARQ queued again after a failed try: no queued marker names it.
    retried = queue.job_bytes(SessionRef("alice", "9"), 1)
    await redis.set(queue.ARQ_JOB_PREFIX + "memfleet-retried", retried)
    await redis.set(queue.ARQ_RETRY_PREFIX + "memfleet-retried", 2)
    await redis.zadd(name, {"memfleet-retried": 1})
    # A job a worker is running: left to that worker (it meets the fence).
    await redis.set(queue.ARQ_JOB_PREFIX + "memfleet-running",
                    queue.job_bytes(SessionRef("alice", "8"), 1))
    await redis.set(queue.ARQ_IN_PROGRESS_PREFIX + "memfleet-running", 1)
    await redis.zadd(name, {"memfleet-running": 1})
    assert len(await _names(redis, b"alice")) > 10, "the user is all over Redis before"

    async with job_deps(settings, redis, build_providers(settings)) as deps:
        deleted = await privacy.erase_user(redis, deps.store, "alice", queue_name=name)

    assert (deleted["handovers"], deleted["jobs"]) == (3, 4)
    assert await _names(redis, b"alice") == [queue.ARQ_JOB_PREFIX + "memfleet-running (value)"]
    bob = SessionRef("bob", "1")
    assert await redis.zrange(queue.pending_key(name), 0, -1) == [bob.key.encode()]
    assert await redis.zrange(queue.waiting_key(name), 0, -1) == [bob.key.encode()]
    jobs = await redis.zrange(name, 0, -1)
    assert sorted(jobs) == sorted([b"memfleet-running", (await redis.get(queue.queued_key(bob)))])
    # bob's job still runs and remembers; the erase twice finds nothing more.
    await redis.delete(queue.ARQ_IN_PROGRESS_PREFIX + "memfleet-running",
                       queue.ARQ_JOB_PREFIX + "memfleet-running")
    await redis.zrem(name, "memfleet-running")
    await drain(settings)
    assert await active_texts(db, "bob") == ["Uses Go"]
    assert await active_texts(db, "alice") == []
    async with job_deps(settings, redis, build_providers(settings)) as deps:
        again = await privacy.erase_user(redis, deps.store, "alice", queue_name=name)
    assert (again["handovers"], again["jobs"]) == (0, 0)
