"""Hand-over and coalescing in Redis, shared by the client and the worker.

ARQ's ``_job_id`` alone drops hand-overs that arrive while a job runs, so
memfleet writes ARQ jobs itself, atomically, in Lua:

- ``memfleet:handover:<session>`` holds the session's LATEST message list
  (each hand-over replaces it: the chat server always sends the whole list);
- ``memfleet:queued:<session>`` names the job that is queued and not started.

A hand-over sets the payload and enqueues a job only when none is queued. A
job, when it starts, clears the marker and then reads the payload in the same
script: a hand-over before that moment is in what it reads; one after it
enqueues a new job. So every message is read by some job, with at most one
job queued per session at any time.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

JOB_FUNCTION = "persist_session_memory"
DEFAULT_QUEUE = "memfleet:queue"
HANDOVER_PREFIX = "memfleet:handover:"
QUEUED_PREFIX = "memfleet:queued:"
ARQ_JOB_PREFIX = "arq:job:"  # fixed by ARQ
PAYLOAD_TTL_MS = 7 * 86_400_000
JOB_EXPIRES_MS = 86_400_000

# KEYS: payload, marker, queue. ARGV: payload or "", payload ttl, job id, job
# bytes, score, job expiry ms, job key prefix.
_ENQUEUE = """
if ARGV[1] ~= '' then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
local queued = redis.call('GET', KEYS[2])
if queued and redis.call('EXISTS', ARGV[7] .. queued) == 1 then
  return false
end
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[6])
redis.call('SET', ARGV[7] .. ARGV[3], ARGV[4], 'PX', ARGV[6])
redis.call('ZADD', KEYS[3], ARGV[5], ARGV[3])
return ARGV[3]
"""

# KEYS: marker, payload, and the session lock when the job takes it in the same
# call. ARGV: this job's id, then the lock's token and ttl ms. Returns
# {payload or nil, 1 when the lock was taken}. No payload, no lock: there is
# nothing to work on.
_CLAIM = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
local payload = redis.call('GET', KEYS[2])
if not payload or #KEYS < 3 then return {payload, 0} end
if redis.call('SET', KEYS[3], ARGV[2], 'NX', 'PX', ARGV[3]) then return {payload, 1} end
return {payload, 0}
"""


def job_bytes(session_id: str, enqueue_ms: int) -> bytes:
    """An ARQ job as ARQ's deserializer expects it, in memfleet's JSON serializer."""
    job: dict[str, Any] = {"t": None, "f": JOB_FUNCTION, "a": [], "k": {"session_id": session_id},
           "et": enqueue_ms}
    return json.dumps(job, separators=(",", ":")).encode()


@dataclass(frozen=True, slots=True)
class Enqueued:
    job_id: str | None  # None: a job already queued for the session will read this hand-over


def _decode(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


async def enqueue(
    redis: Any,
    session_id: str,
    *,
    payload: bytes | None,
    queue_name: str = DEFAULT_QUEUE,
    defer_ms: int = 0,
) -> Enqueued:
    """Store ``payload`` (when given) and make sure one job for the session is queued."""
    now = int(time.time() * 1000)
    job_id = f"memfleet-{uuid.uuid4().hex}"
    result = await redis.eval(
        _ENQUEUE, 3,
        HANDOVER_PREFIX + session_id, QUEUED_PREFIX + session_id, queue_name,
        payload or b"", PAYLOAD_TTL_MS, job_id, job_bytes(session_id, now),
        now + defer_ms, JOB_EXPIRES_MS + defer_ms, ARQ_JOB_PREFIX,
    )
    return Enqueued(_decode(result))


@dataclass(frozen=True, slots=True)
class LockRequest:
    """A session lock to take in the claim's own round trip (worker.stages.lock)."""

    key: str
    token: str
    ttl_ms: int


@dataclass(frozen=True, slots=True)
class Claimed:
    payload: bytes | None
    locked: bool  # the lock of ``claim(lock=...)`` is now held by its token


async def claim(
    redis: Any, session_id: str, job_id: str, *, lock: LockRequest | None = None
) -> Claimed:
    """At job start: clear the queued marker if it is ours, read the latest payload and,
    when there is one, take ``lock``: one round trip for what every job does first."""
    keys = [QUEUED_PREFIX + session_id, HANDOVER_PREFIX + session_id]
    args: list[Any] = [job_id]
    if lock is not None:
        keys.append(lock.key)
        args += [lock.token, lock.ttl_ms]
    raw, locked = await redis.eval(_CLAIM, len(keys), *keys, *args)
    payload = raw if raw is None or isinstance(raw, bytes) else str(raw).encode()
    return Claimed(payload, bool(locked))
