"""A user's say over their memory: erase everything, and turn memory on or off.

An erase clears Redis first, then PostgreSQL, and holds against jobs in
flight:

1. Redis (worker.protocol.queue.erase_user): every pending hand-over of the user goes,
   with the user's queued jobs and their entries in the pending and waiting
   sets, in one script; the Redis clock at that moment is the erase's number.
   Hand-overs are numbered from the same clock, so every list a job may still
   hold from before the erase is numbered at or below it.
2. PostgreSQL, in one transaction under the user's advisory lock
   (worker.store): a fence at that number, then the user's facts, audit rows,
   cursors, version and an opt-in, each found by the user id (never by a
   session id alone: session ids repeat across users). A commit in flight
   either landed before (and its rows are deleted here) or meets the fence and
   writes nothing (memfleet_commit_run, UserErased).

Either step failing leaves the erase to be run again: both are idempotent.
The erase is recorded in memory_erasure with its counts and no user data.

Consent lives in PostgreSQL (user_memory_consent). While a user's memory is
off, hand-overs are still accepted, and jobs move the cursor past them as
``opted_out`` without a model call, so turning it back on does not replay
them. Turning it off takes the same advisory lock as commits, so no commit
that started before the switch writes a fact after it.
"""

from __future__ import annotations

from typing import Any

from redis.exceptions import RedisError

from worker.errors import HandoverUnavailable
from worker.protocol import keys, queue, shards
from worker.store.base import MemoryStore
from worker.store.types import Erasure


async def erase_user(
    redis: Any, store: MemoryStore, user_id: str, *, keep_opt_out: bool = True,
    queue_name: str = keys.DEFAULT_QUEUE,
) -> dict[str, int]:
    """Everything held about the user goes; counts per table (and ``handovers``
    for the sessions whose pending hand-over went, ``jobs`` for the queued jobs)."""
    try:
        everywhere = [await _erase_on(client, user_id, queue_name)
                      for _, client in shards.every_shard(redis)]
    except (RedisError, OSError) as exc:
        raise HandoverUnavailable(
            f"Redis did not take the erase: {type(exc).__name__}") from exc
    erased_seq = max(cleared.erased_seq for cleared in everywhere)
    removed = await store.erase_user(Erasure(user_id, erased_seq, keep_opt_out=keep_opt_out))
    return {**removed, "handovers": sum(cleared.handovers for cleared in everywhere),
            "jobs": sum(cleared.jobs for cleared in everywhere)}


async def _erase_on(redis: Any, user_id: str, queue_name: str) -> queue.ClearedUser:
    cleared = await queue.erase_user(redis, user_id, queue_name)
    # The marker of a move to a new shard names the user (worker.protocol.shards); so
    # does the state of the user's portrait refreshes (worker.protocol.portrait_queue).
    await redis.delete(keys.user_moved_key(user_id), keys.user_portrait_key(user_id))
    return cleared


async def set_memory(
    redis: Any, store: MemoryStore, user_id: str, *, enabled: bool, forget: bool = False,
    queue_name: str = keys.DEFAULT_QUEUE,
) -> dict[str, int] | None:
    """Turn the user's memory on or off; ``forget`` (only when turning it off) also
    erases everything held, and returns what went."""
    if forget and enabled:
        raise ValueError("forgetting goes with turning memory off")
    await store.set_consent(user_id, enabled)
    if forget:
        return await erase_user(redis, store, user_id, keep_opt_out=True, queue_name=queue_name)
    return None
