"""The memory API's manual writes make the user's portrait due (docs/portrait.md).

A route whose write changed the user's facts (added, corrected, removed, pinned or
unpinned one, accepted a held change, moved a fact to or from a person, merged two
persons) calls ``facts_changed`` once its store call returned, so after the write's
transaction committed: the change counts toward the user's next refresh exactly as a
job's commit does (worker.protocol.portrait_queue.facts_changed: the same debounce,
the same queue, nothing while MEMFLEET_PORTRAIT_ENABLED is off). Best effort: a
Redis error is logged and the write still answers as written.
"""

from __future__ import annotations

from typing import Any

from worker.api.deps import ApiDeps
from worker.protocol import portrait_queue
from worker.protocol.shards import ShardedRedis


def user_redis(deps: ApiDeps, user_id: str) -> Any:
    """The Redis the user's jobs run on: their shard when the fleet has several."""
    redis = deps.handover
    return redis.for_user(user_id) if isinstance(redis, ShardedRedis) else redis


async def facts_changed(deps: ApiDeps, user_id: str) -> None:
    await portrait_queue.facts_changed(user_redis(deps, user_id), user_id, deps.settings)
