"""Lock stage: one job per session at a time, in Redis.

``SET memory-task-lock:<session> <token> NX PX <ttl>`` goes in the same
round trip as the job's claim of the hand-over (``claim``). While the job runs,
a timer extends the lock; release and extension compare the token, so a job
never touches a lock it lost. When an extension finds the lock gone or taken,
``SessionLock.check`` raises LockLost: the job stops before its next model
call. The lock only saves work: correctness rests on the cursor
compare-and-set in PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from dataclasses import dataclass, field
from typing import Any

import structlog

from worker import queue
from worker.errors import LockLost
from worker.redis_scripts import LuaScript
from worker.telemetry import StageClock

log = structlog.get_logger("memfleet.lock")

LOCK_PREFIX = "memory-task-lock:"

_CLAIM = LuaScript("worker.stages.lua", "claim.lua")
_EXTEND = LuaScript("worker.stages.lua", "extend.lua")
_RELEASE = LuaScript("worker.stages.lua", "release.lua")


@dataclass(slots=True)
class SessionLock:
    redis: Any
    session_id: str
    ttl_ms: int
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    lost: bool = False
    # A timer, not a sleeping task: most jobs end long before the first
    # extension is due, and cancelling a timer costs nothing to await.
    _timer: asyncio.TimerHandle | None = None
    _extending: asyncio.Task[None] | None = None
    _released: bool = False

    @property
    def key(self) -> str:
        return LOCK_PREFIX + self.session_id

    def held(self) -> None:
        """The lock is ours with this token: keep it alive from now on."""
        if self._timer is None and self._extending is None:
            self._schedule()

    def check(self) -> None:
        """Raise LockLost once an extension found the lock gone or another's."""
        if self.lost:
            raise LockLost("the session lock expired or was taken by another job")

    def _schedule(self) -> None:
        if self._released:
            return
        # Three tries per TTL: one failed extension (a Redis blip) still leaves time.
        self._timer = asyncio.get_running_loop().call_later(self.ttl_ms / 3000, self._extend_now)

    def _extend_now(self) -> None:
        self._timer = None
        self._extending = asyncio.ensure_future(self._extend())

    async def _extend(self) -> None:
        try:
            extended = await _EXTEND(self.redis, [self.key], [self.token, self.ttl_ms])
        except Exception as exc:  # noqa: BLE001 - a Redis blip must not kill the job; the fence protects
            log.warning("lock extension failed", error=type(exc).__name__)
            extended = True  # unknown: try again at the next interval
        if not extended:
            self.lost = True  # another holder, or expired: never touch it again
            log.warning("session lock lost")
            return
        self._schedule()

    async def release(self) -> None:
        self._released = True
        if self._timer is not None:
            self._timer.cancel()
        if self._extending is not None and not self._extending.done():
            self._extending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._extending
        if self.lost:
            return
        # A failed release is harmless: the lock expires by its TTL.
        with contextlib.suppress(Exception):
            await _RELEASE(self.redis, [self.key], [self.token])


@dataclass(frozen=True, slots=True)
class Claimed:
    payload: bytes | None  # None: the session has no hand-over (erased, or expired)
    locked: bool  # the lock is now held by this job; False with a payload: busy


async def claim(redis: Any, lock: SessionLock, job_id: str) -> Claimed:
    """At job start: clear the queued marker if it is this job's, read the latest
    hand-over and, when there is one, take ``lock``: one round trip."""
    raw, locked = await _CLAIM(
        redis,
        [queue.queued_key(lock.session_id), queue.handover_key(lock.session_id), lock.key],
        [job_id, lock.token, lock.ttl_ms],
    )
    payload = raw if raw is None or isinstance(raw, bytes) else str(raw).encode()
    if locked:
        lock.held()
    return Claimed(payload, bool(locked))


async def take(redis: Any, lock: SessionLock, job_id: str, clock: StageClock) -> Claimed:
    """The lock stage: ``claim`` in its span, with busy sessions counted."""
    with clock.stage("lock") as span:
        claimed = await claim(redis, lock, job_id)
        span.set_attribute("memfleet.lock.acquired", claimed.locked)
    if claimed.payload is not None and not claimed.locked and clock.metrics is not None:
        clock.metrics.lock_contention.add(1)
    return claimed
