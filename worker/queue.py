"""The hand-over in Redis, and the one module that knows ARQ's internals.

ARQ's ``_job_id`` alone drops hand-overs that arrive while a job runs, so
memfleet writes ARQ jobs itself, atomically, in Lua (``worker/lua/enqueue.lua``):

- ``memfleet:handover:<session>`` holds the session's LATEST message list
  (the chat server always sends the whole list), and
  ``memfleet:handover-meta:<session>`` its hand-over number and whether a
  commit finished it;
- ``memfleet:backlog:<session>`` holds older lists that a later one does not
  extend (the chat server summarised or replaced its history before a commit
  finished them), oldest first, each as ``<number>:<payload>``; jobs process
  them before the latest list, and drop them once done when they release the
  session lock (worker.stages.lock);
- ``memfleet:queued:<session>`` names the job that is queued and not started.

A hand-over sets the payload and enqueues a job only when none is waiting (a
job a worker has already picked does not count: that worker may be dead). A
job, when it starts, clears the marker and then reads the payload in the same
script (worker.stages.lock.claim): a hand-over before that moment is in what
it reads; one after it enqueues a new job. So every message is read by some
job, with at most one job queued per session at any time.

ARQ's job format (``job_bytes``) and key prefix (``ARQ_JOB_PREFIX``) are
written here and nowhere else: moving to another queue is this one module.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from worker.errors import HandoverBacklogFull
from worker.redis_scripts import LuaScript

JOB_FUNCTION = "persist_session_memory"
DEFAULT_QUEUE = "memfleet:queue"
HANDOVER_PREFIX = "memfleet:handover:"
QUEUED_PREFIX = "memfleet:queued:"
META_PREFIX = "memfleet:handover-meta:"
BACKLOG_PREFIX = "memfleet:backlog:"
# Older lists a session may hold unprocessed; one more refuses the hand-over.
BACKLOG_LIMIT = 32
ARQ_JOB_PREFIX = "arq:job:"  # fixed by ARQ
ARQ_IN_PROGRESS_PREFIX = "arq:in-progress:"  # fixed by ARQ: a worker picked the job
PENDING_PREFIX = "memfleet:pending:"  # + queue name: sessions with a job not yet claimed
PAYLOAD_TTL_MS = 7 * 86_400_000
# A job not claimed this long after it was due is looked at by the recovery pass:
# longer than a picked job takes to claim even on a loaded worker, about the lock's
# TTL. A late session whose job merely waits in the queue costs the pass a no-op.
PENDING_GRACE_MS = 10_000
JOB_EXPIRES_MS = 86_400_000

_ENQUEUE = LuaScript("worker.lua", "enqueue.lua")


def job_bytes(session_id: str, enqueue_ms: int) -> bytes:
    """An ARQ job as ARQ's deserializer expects it, in memfleet's JSON serializer."""
    job: dict[str, Any] = {"t": None, "f": JOB_FUNCTION, "a": [], "k": {"session_id": session_id},
                           "et": enqueue_ms}
    return json.dumps(job, separators=(",", ":")).encode()


def pending_key(queue_name: str) -> str:
    return PENDING_PREFIX + queue_name


def handover_key(session_id: str) -> str:
    return HANDOVER_PREFIX + session_id


def queued_key(session_id: str) -> str:
    return QUEUED_PREFIX + session_id


def meta_key(session_id: str) -> str:
    return META_PREFIX + session_id


def backlog_key(session_id: str) -> str:
    return BACKLOG_PREFIX + session_id


@dataclass(frozen=True, slots=True)
class Enqueued:
    job_id: str | None  # None: a job already queued for the session will read this hand-over
    kept_older: bool = False  # the previous list went to the backlog (this one does not extend it)


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
    """Store ``payload`` (when given: worker.payload.encode_handover's JSON) and make
    sure one job for the session is queued.

    Raises HandoverBacklogFull when the session already holds BACKLOG_LIMIT older
    lists that no job has finished: the new list is not stored.
    """
    now = int(time.time() * 1000)
    job_id = f"memfleet-{uuid.uuid4().hex}"
    result = await _ENQUEUE(
        redis,
        [handover_key(session_id), queued_key(session_id), queue_name, pending_key(queue_name),
         meta_key(session_id), backlog_key(session_id)],
        [payload or b"", PAYLOAD_TTL_MS, job_id, job_bytes(session_id, now),
         now + defer_ms, JOB_EXPIRES_MS + defer_ms, ARQ_JOB_PREFIX, ARQ_IN_PROGRESS_PREFIX,
         session_id, now + defer_ms + PENDING_GRACE_MS, BACKLOG_LIMIT],
    )
    if result == -1:
        raise HandoverBacklogFull(
            f"the session holds {BACKLOG_LIMIT} older message lists no job has finished yet"
        )
    job, kept = result
    return Enqueued(_decode(job), bool(kept))


async def keep_pending(redis: Any, session_id: str, queue_name: str, due_in_ms: int) -> None:
    """List the session as pending, due in ``due_in_ms``: if no job claims it by then
    and the grace period, the recovery pass queues a job for it."""
    deadline = int(time.time() * 1000) + due_in_ms + PENDING_GRACE_MS
    await redis.zadd(pending_key(queue_name), {session_id: deadline})
