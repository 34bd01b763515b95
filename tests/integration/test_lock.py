"""The session lock on a real Redis: kept alive while held, never touched once lost."""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis

from worker.session_ref import SessionRef
from worker.stages.lock import SessionLock

S1 = SessionRef("u1", "s1")


async def _take(redis: Redis, lock: SessionLock) -> None:
    assert await redis.set(lock.key, lock.token, nx=True, px=lock.ttl_ms)
    lock.held()


async def test_a_held_lock_outlives_its_ttl_and_is_released(redis: Redis) -> None:
    lock = SessionLock(redis, S1, ttl_ms=300)
    await _take(redis, lock)
    await asyncio.sleep(1.0)  # more than three TTLs: only the extensions keep it
    assert await redis.get(lock.key) == lock.token.encode()
    assert not lock.lost
    await lock.release()
    assert await redis.get(lock.key) is None


async def test_a_lost_lock_is_never_extended_nor_released(redis: Redis) -> None:
    lock = SessionLock(redis, S1, ttl_ms=300)
    await _take(redis, lock)
    await redis.set(lock.key, "someone-else", px=5000)  # it expired; another took it
    await asyncio.sleep(0.3)
    assert lock.lost
    await lock.release()
    assert await redis.get(lock.key) == b"someone-else"
    assert 3000 < await redis.pttl(lock.key) <= 5000, "the other holder's TTL is untouched"


async def test_no_extension_after_release(redis: Redis) -> None:
    lock = SessionLock(redis, S1, ttl_ms=300)
    await _take(redis, lock)
    await lock.release()
    # Put our own token back with a short TTL: a keep-alive that outlived the
    # release would find it and keep extending it.
    await redis.set(lock.key, lock.token, px=150)
    await asyncio.sleep(0.5)
    assert await redis.get(lock.key) is None, "nothing extended the lock after its release"


async def test_the_recovery_pass_requeues_only_sessions_whose_lock_is_gone(redis: Redis) -> None:
    from worker import queue
    from worker.stages.lock import claim, claimed_key, recover_abandoned

    dead = SessionLock(redis, SessionRef("u1", "dead"), ttl_ms=200)
    alive = SessionLock(redis, SessionRef("u2", "alive"), ttl_ms=200)
    done = SessionLock(redis, SessionRef("u1", "done"), ttl_ms=200)
    for one in (dead, alive, done):
        job = await queue.enqueue(redis, one.session, payload=b"{}")
        assert job.job_id is not None
        assert (await claim(redis, one, job.job_id)).locked
    assert await redis.get(queue.queued_key(dead.session)) is None, "the job claimed its session"
    await done.release()
    # "dead": its worker was killed, nothing extends the lock any more.
    dead._released = True
    if dead._timer is not None:
        dead._timer.cancel()
    assert await recover_abandoned(redis, queue.DEFAULT_QUEUE) == [], "no deadline passed yet"
    await asyncio.sleep(0.5)
    assert await recover_abandoned(redis, queue.DEFAULT_QUEUE) == [dead.session]
    claimed = await redis.zrange(claimed_key(queue.DEFAULT_QUEUE), 0, -1)
    assert claimed == [alive.session.key.encode()]
    assert await redis.get(queue.queued_key(dead.session)) is not None, "a job waits for it"
    assert await recover_abandoned(redis, queue.DEFAULT_QUEUE) == [], "queued once"
    await alive.release()
    assert await redis.zcard(claimed_key(queue.DEFAULT_QUEUE)) == 0
