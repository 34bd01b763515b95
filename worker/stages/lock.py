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
    _keeper: asyncio.Task[None] | None = None

    @property
    def key(self) -> str:
        return LOCK_PREFIX + self.session_id

    @property
    def request(self) -> LockRequest:
        """This lock as the job's claim takes it (worker.queue.claim)."""
        return LockRequest(self.key, self.token, self.ttl_ms)

    def held(self) -> None:
        """The claim took the lock with this token: keep it alive from now on."""
        if self._keeper is None:
            self._keeper = asyncio.create_task(self._keep_alive())

    async def _keep_alive(self) -> None:
        interval = self.ttl_ms / 3000
        while True:
            await asyncio.sleep(interval)
            try:
                extended = await self.redis.eval(_EXTEND, 1, self.key, self.token, self.ttl_ms)
            except Exception as exc:  # noqa: BLE001 - a Redis blip must not kill the job; the fence protects
                log.warning("lock extension failed", error=type(exc).__name__)
                continue
            if not extended:
                self.lost = True
                return

    async def release(self) -> None:
        if self._keeper is not None:
            self._keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keeper
        # A failed release is harmless: the lock expires by its TTL.
        with contextlib.suppress(Exception):
            await self.redis.eval(_RELEASE, 1, self.key, self.token)
