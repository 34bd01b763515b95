"""The session lock on a real Redis: kept alive while held, never touched once lost."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from redis.asyncio import Redis

from worker.protocol.keys import SessionRef
from worker.protocol.lock import SessionLock

S1 = SessionRef("u1", "s1")


async def until(check: Callable[[], Awaitable[bool]], timeout_s: float = 30) -> None:
    """Wait for the state itself, with a deadline generous for a loaded machine."""
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, f"not within {timeout_s} s"
        await asyncio.sleep(0.02)


async def _take(redis: Redis, lock: SessionLock) -> None:
    assert await redis.set(lock.key, lock.token, nx=True, px=lock.ttl_ms)
    lock.held()


async def test_a_held_lock_outlives_its_ttl_and_is_released(redis: Redis) -> None:
    # Extended every third of its TTL: a second of slack for a stalled event loop.
    lock = SessionLock(redis, S1, ttl_ms=1500)
    await _take(redis, lock)
    extensions = 0
    last_ttl = await redis.pttl(lock.key)
    held_until = time.monotonic() + 2 * lock.ttl_ms / 1000  # two TTLs: only extensions keep it
    while time.monotonic() < held_until:
        assert await redis.get(lock.key) == lock.token.encode()
        ttl = await redis.pttl(lock.key)
        extensions += ttl > last_ttl
        last_ttl = ttl
        await asyncio.sleep(0.05)
    assert extensions >= 2, "the TTL was pushed back as the lock was held"
    assert not lock.lost
    await lock.release()
    assert await redis.get(lock.key) is None


async def test_a_lost_lock_is_never_extended_nor_released(redis: Redis) -> None:
    lock = SessionLock(redis, S1, ttl_ms=300)
    await _take(redis, lock)
    await redis.set(lock.key, "someone-else", px=5000)  # it expired; another took it

    async def lost() -> bool:
        return lock.lost

    await until(lost)  # the next extension finds the other token
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

    async def gone() -> bool:
        return await redis.get(lock.key) is None

    # A keep-alive still running (every 100 ms) would keep it forever: the wait fails.
    await until(gone, timeout_s=10)


async def test_the_recovery_pass_requeues_only_sessions_whose_lock_is_gone(redis: Redis) -> None:
    from worker.protocol import keys, queue
    from worker.protocol.lock import claim, recover_abandoned

    # TTLs a loaded machine cannot overrun by accident: "dead" must not be overdue at
    # the first pass, "alive" must keep being extended throughout.
    dead = SessionLock(redis, SessionRef("u1", "dead"), ttl_ms=1500)
    alive = SessionLock(redis, SessionRef("u2", "alive"), ttl_ms=1500)
    done = SessionLock(redis, SessionRef("u1", "done"), ttl_ms=1500)
    for one in (dead, alive, done):
        job = await queue.enqueue(redis, one.session, payload=b"{}")
        assert job.job_id is not None
        assert (await claim(redis, one, job.job_id)).locked
    assert await redis.get(dead.session.queued_key) is None, "the job claimed its session"
    await done.release()
    # "dead": its worker was killed, nothing extends the lock any more.
    dead._released = True
    if dead._timer is not None:
        dead._timer.cancel()
    assert await recover_abandoned(redis, keys.DEFAULT_QUEUE) == [], "no deadline passed yet"
    recovered: list[SessionRef] = []

    async def recovered_some() -> bool:
        recovered.extend(await recover_abandoned(redis, keys.DEFAULT_QUEUE))
        return bool(recovered)

    await until(recovered_some)  # once dead's lock deadline passed
    assert recovered == [dead.session]
    claimed = await redis.zrange(keys.claimed_key(keys.DEFAULT_QUEUE), 0, -1)
    assert claimed == [alive.session.key.encode()]
    assert await redis.get(dead.session.queued_key) is not None, "a job waits for it"
    assert await recover_abandoned(redis, keys.DEFAULT_QUEUE) == [], "queued once"
    await alive.release()
    assert await redis.zcard(keys.claimed_key(keys.DEFAULT_QUEUE)) == 0
