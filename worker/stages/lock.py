"""Lock stage: one worker per session at a time, in Redis.

``SET memory-task-lock:<session> <token> NX PX <ttl>``, sent by the job in the
same Lua call that claims the hand-over (worker.queue.claim); a background task
extends it while the job runs; release and extension compare the token so a
worker never touches a lock it lost. The lock only saves work: correctness
rests on the cursor compare-and-set in Postgres.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from dataclasses import dataclass, field
from typing import Any

import structlog

from worker.queue import LockRequest

log = structlog.get_logger("memfleet.lock")

LOCK_PREFIX = "memory-task-lock:"

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
_EXTEND = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""


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

    @property
    def request(self) -> LockRequest:
        """This lock as the job's claim takes it (worker.queue.claim)."""
        return LockRequest(self.key, self.token, self.ttl_ms)

    def held(self) -> None:
        """The claim took the lock with this token: keep it alive from now on."""
        if self._timer is None and self._extending is None:
            self._schedule()

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
            extended = await self.redis.eval(_EXTEND, 1, self.key, self.token, self.ttl_ms)
        except Exception as exc:  # noqa: BLE001 - a Redis blip must not kill the job; the fence protects
            log.warning("lock extension failed", error=type(exc).__name__)
            extended = True  # unknown: try again at the next interval
        if not extended:
            self.lost = True  # another holder, or expired: never touch it again
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
        # A failed release is harmless: the lock expires by its TTL.
        with contextlib.suppress(Exception):
            await self.redis.eval(_RELEASE, 1, self.key, self.token)
