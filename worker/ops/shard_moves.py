"""Adding a Redis shard (worker.protocol.shards; docs/operations.md, "Adding a shard"):
what is left to drain before the new shard can be settled.

While a shard joins, a moving user's hand-overs stay on their old shard as long
as one of their sessions holds a list no commit has finished there. The new shard
can be deployed as settled only once no moving user holds one: ``moving_left``
counts them, shard by shard, from each old shard's active sets (the sessions
with unfinished lists, kept by the hand-over and release scripts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from worker.protocol import keys
from worker.protocol.keys import SessionRef
from worker.protocol.shards import ShardedRedis

SCAN_COUNT = 500


@dataclass(frozen=True, slots=True)
class Left:
    """On one old shard: moving users, and their sessions, still holding unfinished lists."""

    shard: str
    users: int
    sessions: int


async def moving_left(redis: ShardedRedis) -> list[Left]:
    """For every settled shard, the moving users that still hold unfinished lists on it."""
    out = []
    for shard in redis.map.settled:
        client = redis.client(shard)
        users = sessions = 0
        async for raw in client.scan_iter(match=keys.USER_ACTIVE_PREFIX + "*",
                                          count=SCAN_COUNT):
            tag = raw.decode() if isinstance(raw, bytes) else str(raw)
            try:
                user_id = SessionRef.parse(tag.removeprefix(keys.USER_ACTIVE_PREFIX) + ":").user_id
            except ValueError:
                continue  # not a user's key: nothing of ours
            route = redis.route(user_id)
            if not route.moving or route.home != shard:
                continue
            unfinished = await _unfinished_sessions(client, user_id)
            if unfinished:
                users += 1
                sessions += unfinished
        out.append(Left(shard, users, sessions))
    return out


async def _unfinished_sessions(client: Any, user_id: str) -> int:
    """The user's sessions on this shard whose latest list no commit finished, or that
    hold older lists (the test enqueue.lua's hold mode makes)."""
    members = await client.smembers(keys.user_active_key(user_id))
    count = 0
    for member in members:
        session = SessionRef(user_id, member.decode() if isinstance(member, bytes) else member)
        latest, finished = await client.hmget(session.meta_key, "q", "d")
        if await client.exists(session.backlog_key) or (
                latest is not None and latest != finished):
            count += 1
    return count
