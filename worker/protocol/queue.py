"""The hand-over in Redis, and the one module that knows ARQ's internals.

ARQ's ``_job_id`` alone drops hand-overs that arrive while a job runs, so
memfleet writes ARQ jobs itself, atomically, in Lua (``worker/protocol/lua/enqueue.lua``):

A session is the pair (user_id, session_id) (worker.protocol.keys.SessionRef);
its keys, the SessionRef's properties, end in ``SessionRef.key``,
``{<user>}:<session id>`` (worker.protocol.key_table lists every key):

- the latest list (``handover_key``) holds the session's LATEST message list
  (the chat server always sends the whole list) until a commit finishes it
  with no older list left, and its meta (``meta_key``) its hand-over number,
  whether a commit finished it and, once the finished list is dropped, its
  digest (worker/protocol/lua/release.lua);
- the user's session set (``user_sessions_key``) lists the user's session ids,
  so an erase finds every hand-over of the user without scanning Redis;
- the backlog (``backlog_key``) holds older lists that a later one does not
  extend (the chat server summarised or replaced its history before a commit
  finished them), oldest first, each as ``<number>:<payload>``; jobs process
  them before the latest list, and drop them once done when they release the
  session lock (worker.protocol.lock);
- the queued marker (``queued_key``) names the job that is queued and not started;
- the user's active set (``user_active_key``) lists the user's session ids that
  hold a list no commit has finished, for the cap on such sessions per user (the
  release takes a session out when it finishes its last list).
- the user's job index (``user_jobs_key``) lists the jobs queued for the user
  until they end, so an erase finds them without reading the fleet's queue.

Byte budgets (worker.memory_rules.Limits) are kept by the hand-over script itself:
a payload over ``max_handover_bytes``, a session whose lists (latest and older)
would pass ``max_session_bytes``, and a user's session over
``max_user_sessions`` are refused before anything is written.

A hand-over sets the payload and enqueues a job only when none is waiting (a
job a worker has already picked does not count: that worker may be dead). A
job, when it starts, clears the marker and then reads the payload in the same
script (worker.protocol.lock.claim): a hand-over before that moment is in what
it reads; one after it enqueues a new job. So every message is read by some
job, with at most one job queued per session at any time.

ARQ's job format (``job_bytes``) is written here and nowhere else, and ARQ's
key prefixes are used only here and by the worker (worker.protocol.arq_worker):
moving to another queue is these modules. docs/protocol.md is the whole protocol.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from worker.errors import (
    HandoverBacklogFull,
    HandoverTooLarge,
    MemfleetError,
    SessionBytesFull,
    UserSessionsFull,
)
from worker.memory_rules import Limits
from worker.protocol import serialization
from worker.protocol.keys import (
    ARQ_IN_PROGRESS_PREFIX,
    ARQ_JOB_PREFIX,
    ARQ_RETRY_PREFIX,
    BACKLOG_PREFIX,
    DEFAULT_QUEUE,
    HANDOVER_PREFIX,
    META_PREFIX,
    QUEUED_PREFIX,
    SessionRef,
    pending_key,
    user_active_key,
    user_jobs_key,
    user_moved_key,
    user_session_prefix,
    user_sessions_key,
    user_tag,
    waiting_key,
)
from worker.protocol.replies import as_text
from worker.protocol.scripts import PAYLOAD_MESSAGES, LuaScript

JOB_FUNCTION = "persist_session_memory"
# The fleet's refresh of one user's portrait (worker.protocol.portrait_queue).
PORTRAIT_JOB_FUNCTION = "refresh_user_portrait"
# Older lists a session may hold unprocessed; one more refuses the hand-over.
BACKLOG_LIMIT = 32
PAYLOAD_TTL_MS = 7 * 86_400_000
# A job not claimed this long after it was due is looked at by the recovery pass:
# longer than a picked job takes to claim even on a loaded worker, about the lock's
# TTL. A late session whose job merely waits in the queue costs the pass a no-op.
PENDING_GRACE_MS = 10_000
JOB_EXPIRES_MS = 86_400_000

_ENQUEUE = LuaScript("worker.protocol.lua", "enqueue.lua", after=[PAYLOAD_MESSAGES])
_ERASE_USER = LuaScript("worker.protocol.lua", "erase_user.lua")
_DROP_LEGACY = LuaScript("worker.protocol.lua", "drop_legacy.lua")


def job_bytes(session: SessionRef, enqueue_ms: int) -> bytes:
    """An ARQ job as ARQ's deserializer expects it, in memfleet's JSON serializer."""
    job: dict[str, Any] = {"t": None, "f": JOB_FUNCTION, "a": [],
                           "k": {"user_id": session.user_id, "session_id": session.session_id},
                           "et": enqueue_ms}
    return serialization.serialize(job)


def portrait_job_bytes(user_id: str, enqueue_ms: int) -> bytes:
    """A portrait refresh's ARQ job (worker.protocol.portrait_queue), as ``job_bytes``."""
    job: dict[str, Any] = {"t": None, "f": PORTRAIT_JOB_FUNCTION, "a": [],
                           "k": {"user_id": user_id}, "et": enqueue_ms}
    return serialization.serialize(job)


@dataclass(frozen=True, slots=True)
class Enqueued:
    job_id: str | None  # None: a job already queued for the session will read this hand-over
    kept_older: bool = False  # the previous list went to the backlog (this one does not extend it)
    # The hand-over's number (0: none stored); worker.client.handover.memory_status and
    # wait_for_memory tell when a commit has covered it.
    handover_id: int = 0


async def enqueue(
    redis: Any,
    session: SessionRef,
    *,
    payload: bytes | None,
    queue_name: str = DEFAULT_QUEUE,
    defer_ms: int = 0,
    limits: Limits | None = None,
) -> Enqueued:
    """Store ``payload`` (when given: worker.protocol.payload.encode_handover's JSON) and make
    sure one job for the session is queued.

    Refuses the payload, storing nothing of it and keeping every list already held,
    with HandoverBacklogFull when the session already holds BACKLOG_LIMIT older
    lists that no job has finished, SessionBytesFull (one) when its lists would
    pass ``limits.max_session_bytes``, UserSessionsFull when the user already has
    ``limits.max_user_sessions`` other sessions with unfinished lists, and
    HandoverTooLarge when the payload is over ``limits.max_handover_bytes``.
    """
    enqueued = await enqueue_on_old_shard(redis, session, payload=payload,
                                          queue_name=queue_name, defer_ms=defer_ms,
                                          limits=limits, mode=None)
    if enqueued is None:  # only a shard mode refuses so; there is none here
        raise MemfleetError("the hand-over script refused a hand-over with no shard mode")
    return enqueued


async def enqueue_on_old_shard(
    redis: Any,
    session: SessionRef,
    *,
    payload: bytes | None,
    mode: str | None,
    queue_name: str = DEFAULT_QUEUE,
    defer_ms: int = 0,
    limits: Limits | None = None,
) -> Enqueued | None:
    """``enqueue`` on a moving user's old shard while a shard is added (``mode``:
    worker.protocol.shards.STAY or HOLD; None: plain ``enqueue``): None when the
    script refused because the user's hand-overs go to the new shard now."""
    limits = limits or Limits()
    now = int(time.time() * 1000)
    job_id = f"memfleet-{uuid.uuid4().hex}"
    shard_args: list[Any] = [] if mode is None else [
        mode, user_moved_key(session.user_id), PAYLOAD_TTL_MS]
    result = await _ENQUEUE(
        redis,
        [session.handover_key, session.queued_key, queue_name, pending_key(queue_name),
         session.meta_key, session.backlog_key, user_sessions_key(session.user_id),
         waiting_key(queue_name), user_active_key(session.user_id),
         user_jobs_key(session.user_id)],
        [payload or b"", PAYLOAD_TTL_MS, job_id, job_bytes(session, now),
         now + defer_ms, JOB_EXPIRES_MS + defer_ms, ARQ_JOB_PREFIX, ARQ_IN_PROGRESS_PREFIX,
         session.key, now + defer_ms + PENDING_GRACE_MS, BACKLOG_LIMIT, session.session_id,
         limits.max_handover_bytes, limits.max_session_bytes, limits.max_user_sessions,
         user_session_prefix(META_PREFIX, session.user_id),
         user_session_prefix(BACKLOG_PREFIX, session.user_id), *shard_args],
    )
    if result == -1:
        raise HandoverBacklogFull(
            f"the session holds {BACKLOG_LIMIT} older message lists no job has finished yet"
        )
    if isinstance(result[0], int):  # a refusal: {code, figure}
        code, figure = result[0], int(result[1])
        if code == -2:
            raise SessionBytesFull(figure, limits.max_session_bytes)
        if code == -3:
            raise UserSessionsFull(limits.max_user_sessions)
        if code == -5:
            return None
        raise HandoverTooLarge("the hand-over", figure, limits.max_handover_bytes)
    job, kept, seq = result
    return Enqueued(None if job is None else as_text(job), bool(kept), int(seq))


@dataclass(frozen=True, slots=True)
class ClearedUser:
    """What an erase cleared in Redis (worker/protocol/lua/erase_user.lua)."""

    erased_seq: int  # hand-overs numbered up to this were made before the erase
    session_ids: tuple[str, ...]
    handovers: int  # sessions whose pending hand-over went
    jobs: int = 0  # queued jobs of the user that went (not one a worker is running)


async def erase_user(redis: Any, user_id: str, queue_name: str = DEFAULT_QUEUE) -> ClearedUser:
    """Delete every hand-over of the user that no job has finished, the user's
    queued jobs and their sessions' entries in the pending and waiting sets: all
    found from the user's own keys (the session set, the job index), so the
    script's work grows with the user's sessions and jobs, not the fleet's queue."""
    seq, sessions, deleted, jobs = await _ERASE_USER(
        redis, [user_sessions_key(user_id), queue_name, pending_key(queue_name),
                waiting_key(queue_name), user_active_key(user_id), user_jobs_key(user_id)],
        [user_tag(user_id), HANDOVER_PREFIX, META_PREFIX, BACKLOG_PREFIX, QUEUED_PREFIX,
         ARQ_JOB_PREFIX, ARQ_IN_PROGRESS_PREFIX, ARQ_RETRY_PREFIX],
    )
    return ClearedUser(int(seq), tuple(sorted(as_text(s) for s in sessions)),
                       int(deleted), int(jobs))


async def redis_clock(redis: Any) -> int:
    """The Redis clock in microseconds: what hand-overs and erases are numbered from,
    for a chat server's ``listed_at_us`` (worker.client.handover)."""
    seconds, micros = await redis.time()
    return int(seconds) * 1_000_000 + int(micros)


async def keep_pending(redis: Any, session: SessionRef, queue_name: str, due_in_ms: int) -> None:
    """List the session as pending, due in ``due_in_ms``: if no job claims it by then
    and the grace period, the recovery pass queues a job for it."""
    deadline = int(time.time() * 1000) + due_in_ms + PENDING_GRACE_MS
    await redis.zadd(pending_key(queue_name), {session.key: deadline})


async def adopt_legacy(redis: Any, session_id: str, queue_name: str) -> int:
    """Move a hand-over written under a session id alone (a client older than
    (user, session) keys) to its pair's keys, unfinished lists oldest first, and
    queue its job; return how many lists moved."""
    old = [key + session_id for key in (HANDOVER_PREFIX, META_PREFIX, BACKLOG_PREFIX,
                                        QUEUED_PREFIX)]
    latest = await redis.get(old[0])
    if latest is None:
        return 0
    meta = await redis.hgetall(old[1])
    finished = int(meta.get(b"d", b"0") or 0)
    lists = [entry.partition(b":") for entry in await redis.lrange(old[2], 0, -1)]
    payloads = [body for number, _, body in lists if number.isdigit() and int(number) > finished]
    if meta.get(b"q") != meta.get(b"d"):
        payloads.append(latest)
    moved = 0
    for payload in payloads:
        try:
            user_id = json.loads(payload)["user_id"]
        except (ValueError, KeyError, TypeError):
            continue  # not a hand-over: nothing to move
        await enqueue(redis, SessionRef(str(user_id), session_id), payload=payload,
                      queue_name=queue_name)
        moved += 1
    await _DROP_LEGACY(redis, old, [latest])
    return moved


@dataclass(frozen=True, slots=True)
class HandoverState:
    """Where a session's memory stands, from its hand-over meta (worker.protocol.lock
    marks the latest list finished when a commit covered its last message)."""

    latest: int  # the number of the session's latest hand-over (0: none kept)
    finished: int  # the number of the latest hand-over a commit finished (0: none)
    older_lists: int  # older lists still waiting in the backlog

    def covers(self, handover_id: int) -> bool:
        """Every message of hand-over ``handover_id`` is in a committed slice."""
        return self.finished >= handover_id and self.older_lists == 0


async def handover_state(redis: Any, session: SessionRef) -> HandoverState:
    pipe = redis.pipeline(transaction=False)
    pipe.hmget(session.meta_key, "q", "d")
    pipe.llen(session.backlog_key)
    (latest, finished), older = await pipe.execute()
    return HandoverState(int(latest or 0), int(finished or 0), int(older))
