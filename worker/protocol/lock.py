"""Lock stage: one job per session at a time, in Redis.

``SET memory-task-lock:<session> <token> NX PX <ttl>`` (``<session>``: the
pair's ``SessionRef.key``, ``{<user>}:<session id>``) goes in the same
round trip as the job's claim of the hand-over (``claim``). While the job runs,
a timer extends the lock; release and extension compare the token, so a job
never touches a lock it lost. When an extension finds the lock gone or taken,
``SessionLock.check`` raises LockLost: the job stops before its next model
call. The lock only saves work: correctness rests on the cursor
compare-and-set in PostgreSQL.

A held lock also lists its session in the claimed set (``keys.claimed_key``)
with the lock's expiry. Every worker runs the recovery pass (``recover_abandoned``,
every MEMFLEET_RECOVERY_INTERVAL_S: worker.fleet.app): a session whose
deadline passed with its lock gone was abandoned by a dead worker, and gets a
new job at once, instead of waiting for ARQ to retry the dead worker's job
(job timeout + 10 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import structlog

from worker.errors import LockLost
from worker.protocol import keys, queue
from worker.protocol.events import CommitNote
from worker.protocol.keys import SessionRef
from worker.protocol.replies import as_bytes, as_text
from worker.protocol.scripts import ORPHANS, PAYLOAD_MESSAGES, LuaScript
from worker.telemetry import StageClock

log = structlog.get_logger("memfleet.lock")

# A job that claimed without the lock queues its session again within
# milliseconds; if it has not after this long, its worker died and the recovery
# pass does it.
HANDOFF_GRACE_MS = 5_000

_CLAIM = LuaScript("worker.protocol.lua", "claim.lua")
_EXTEND = LuaScript("worker.protocol.lua", "extend.lua")
_RELEASE = LuaScript("worker.protocol.lua", "release.lua", after=[PAYLOAD_MESSAGES])
_RECOVER = LuaScript("worker.protocol.lua", "recover.lua", after=[ORPHANS])


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class SessionLock:
    redis: Any
    session: SessionRef
    ttl_ms: int
    queue_name: str = keys.DEFAULT_QUEUE
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    lost: bool = False
    # A timer, not a sleeping task: most jobs end long before the first
    # extension is due, and cancelling a timer costs nothing to await.
    _timer: asyncio.TimerHandle | None = None
    _extending: asyncio.Task[None] | None = None
    _released: bool = False

    @property
    def key(self) -> str:
        return self.session.lock_key

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
            extended = await _EXTEND(self.redis, [self.key, keys.claimed_key(self.queue_name)],
                                     [self.token, self.ttl_ms, self.session.key, _now_ms()])
        except Exception as exc:  # noqa: BLE001 - a Redis blip must not kill the job; the fence protects
            log.warning("lock extension failed", error=type(exc).__name__)
            extended = True  # unknown: try again at the next interval
        if not extended:
            self.lost = True  # another holder, or expired: never touch it again
            log.warning("session lock lost")
            return
        self._schedule()

    async def release(self, *, done_through: int = 0, latest_done: int = 0,
                      gave_up: bool = False, note: CommitNote | None = None) -> None:
        """Release the lock and, in the same round trip, settle the session's lists:
        drop the backlog lists numbered up to ``done_through`` (a commit finished
        them) and mark the latest list finished when ``latest_done`` is still its
        number (worker.pipeline.cursor.Settlement); keep the fleet's waiting set true
        (``gave_up``: the session is a dead letter now, not waiting) and, when the
        run settled something, publish ``note`` on the events stream (worker.protocol.events)."""
        self._released = True
        if self._timer is not None:
            self._timer.cancel()
        if self._extending is not None and not self._extending.done():
            self._extending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._extending
        if self.lost:
            return
        note = note or CommitNote(session_tag="", outcome="none")
        # A failed release is harmless: the lock expires by its TTL, and a list
        # left in the backlog is passed over by the next job (its number is below
        # the cursor's).
        with contextlib.suppress(Exception):
            await _RELEASE(self.redis,
                           [self.key, keys.claimed_key(self.queue_name),
                            self.session.backlog_key, self.session.meta_key,
                            keys.waiting_key(self.queue_name), keys.events_key(self.queue_name),
                            self.session.handover_key,
                            keys.user_active_key(self.session.user_id)],
                           [self.token, self.session.key, done_through, latest_done,
                            int(gave_up), *note.args(), self.session.session_id])


@dataclass(frozen=True, slots=True)
class RawList:
    """One of the session's message lists as Redis holds it, not parsed yet."""

    seq: int  # its hand-over number (worker.protocol.queue)
    payload: bytes
    latest: bool


@dataclass(frozen=True, slots=True)
class Claimed:
    payload: bytes | None  # None: the session has no hand-over (erased, or expired)
    locked: bool  # the lock is now held by this job; False with a payload: busy
    breaker_open_ms: int = 0  # > 0: the fleet's LLM breaker is open; the lock was not taken
    breaker_failures: int = 0  # model failures in a row before this job (worker.protection.breaker)
    seq: int = 0  # the latest list's hand-over number
    backlog: tuple[bytes, ...] = ()  # older lists, oldest first, as "<number>:<payload>"
    # No payload because a commit finished every list and the release dropped it.
    finished: bool = False

    def lists(self) -> list[RawList]:
        """The backlog's lists, oldest first, then the latest one."""
        lists = []
        for entry in self.backlog:
            number, sep, payload = entry.partition(b":")
            if sep and number.isdigit():
                lists.append(RawList(int(number), payload, latest=False))
            else:  # unreadable: its payload fails to parse and is recorded as such
                lists.append(RawList(0, entry, latest=False))
        if self.payload is not None:
            lists.append(RawList(self.seq, self.payload, latest=True))
        return lists


async def claim(redis: Any, lock: SessionLock, job_id: str) -> Claimed:
    """At job start: clear the queued marker if it is this job's, read the latest
    hand-over and, when there is one, take ``lock``: one round trip."""
    queue_name = lock.queue_name  # the breaker's keys: worker.protection.breaker
    reply = await _CLAIM(
        redis,
        [lock.session.queued_key, lock.session.handover_key, lock.key,
         keys.claimed_key(queue_name), keys.breaker_open_key(queue_name),
         keys.breaker_failures_key(queue_name), keys.breaker_probe_key(queue_name),
         keys.pending_key(lock.queue_name), lock.session.meta_key,
         lock.session.backlog_key, keys.waiting_key(lock.queue_name)],
        [job_id, lock.token, lock.ttl_ms, lock.session.key, _now_ms(), HANDOFF_GRACE_MS],
    )
    raw, locked, open_ms, failures, seq, backlog = reply[:6]
    if locked:
        lock.held()
    return Claimed(None if raw is None else as_bytes(raw), bool(locked), int(open_ms),
                   int(failures), int(seq), tuple(as_bytes(entry) for entry in backlog),
                   finished=len(reply) > 6 and bool(reply[6]))


async def take(redis: Any, lock: SessionLock, job_id: str, clock: StageClock) -> Claimed:
    """The lock stage: ``claim`` in its span, with busy sessions counted."""
    with clock.stage("lock") as span:
        claimed = await claim(redis, lock, job_id)
        span.set_attribute("memfleet.lock.acquired", claimed.locked)
    if claimed.payload is not None and not claimed.locked and clock.metrics is not None:
        clock.metrics.lock_contention.add(1)
    return claimed


async def recover_abandoned(
    redis: Any, queue_name: str, *, limit: int = 100
) -> list[SessionRef]:
    """Queue a job for each session a dead worker left claimed, or whose job nobody
    claimed in time and is no longer on its way (waiting in the queue, or run by a
    live worker); return them."""
    raw = await _RECOVER(
        redis, [keys.claimed_key(queue_name), keys.pending_key(queue_name), queue_name,
                keys.workers_key(queue_name)],
        [_now_ms(), keys.LOCK_PREFIX, limit, keys.QUEUED_PREFIX, keys.ARQ_JOB_PREFIX,
         keys.ARQ_IN_PROGRESS_PREFIX, queue.PENDING_GRACE_MS])
    sessions = []
    for member in dict.fromkeys(as_text(s) for s in raw):
        try:
            sessions.append(SessionRef.parse(member))
        except ValueError:  # written by a release that keyed sessions by id alone
            log.warning("recovery pass dropped a member that names no session")
    for session in sessions:
        await queue.enqueue(redis, session, payload=None, queue_name=queue_name)
    return sessions
