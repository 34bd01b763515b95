"""enqueue.lua's shard modes (docs/protocol.md, "A shard being added") on a real Redis:
`stay` refuses only a user marked moved; `hold` takes a user's hand-over while one of
their sessions holds an unfinished list here, else marks them moved; a refusal writes
nothing but the mark; without a mode the hand-over is as it always was."""

from __future__ import annotations

from redis.asyncio import Redis

from tests.helpers import drain, user_msg
from worker.config import Settings
from worker.protocol import keys, queue, shards
from worker.protocol.keys import SessionRef
from worker.protocol.payload import Handover, encode_handover

EPOCH = "2026-11-26T00:00:00Z"


def payload(user: str, session: str, *texts: str) -> bytes:
    handover = Handover.model_validate({
        "session_id": session, "user_id": user, "handed_over_at": EPOCH,
        "messages": [user_msg(text) for text in texts]})
    return encode_handover(handover)


async def _keys_of(redis: Redis, user: str) -> set[str]:
    return {k.decode() for k in await redis.keys(f"*{{{user}}}*")}


async def test_stay_refuses_only_a_user_marked_moved(redis: Redis) -> None:
    session = SessionRef("u1", "s1")
    taken = await queue.enqueue_on_old_shard(redis, session, payload=payload("u1", "s1", "a"),
                                             mode=shards.STAY)
    assert taken is not None and taken.handover_id > 0
    await redis.set(keys.user_moved_key("u1"), "1")
    before = await _keys_of(redis, "u1")
    refused = await queue.enqueue_on_old_shard(
        redis, session, payload=payload("u1", "s1", "a", "b"), mode=shards.STAY)
    assert refused is None
    assert await _keys_of(redis, "u1") == before  # nothing written


async def test_hold_keeps_a_busy_user_and_marks_an_idle_one(
    redis: Redis, settings: Settings
) -> None:
    busy = SessionRef("u2", "s1")
    # An idle user (nothing here): marked moved, nothing else written.
    idle = await queue.enqueue_on_old_shard(redis, busy, payload=payload("u2", "s1", "a"),
                                            mode=shards.HOLD)
    assert idle is None
    assert await _keys_of(redis, "u2") == {keys.user_moved_key("u2")}
    assert 0 < await redis.pttl(keys.user_moved_key("u2")) <= queue.PAYLOAD_TTL_MS
    # A user with an unfinished list here: held, in order, on this shard.
    other = SessionRef("u3", "s1")
    await queue.enqueue(redis, other, payload=payload("u3", "s1", "a"))
    held = await queue.enqueue_on_old_shard(
        redis, SessionRef("u3", "s2"), payload=payload("u3", "s2", "x"), mode=shards.HOLD)
    assert held is not None and held.handover_id > 0  # another session of the user: held too
    assert not await redis.exists(keys.user_moved_key("u3"))
    await drain(settings)  # every list of u3 finished here
    moved = await queue.enqueue_on_old_shard(
        redis, other, payload=payload("u3", "s1", "a", "b"), mode=shards.HOLD)
    assert moved is None and await redis.exists(keys.user_moved_key("u3"))
    # Once marked, stay refuses too (a process still on the pending map).
    assert await queue.enqueue_on_old_shard(
        redis, other, payload=payload("u3", "s1", "a", "b"), mode=shards.STAY) is None


async def test_without_a_mode_the_mark_is_ignored(redis: Redis) -> None:
    await redis.set(keys.user_moved_key("u4"), "1")
    taken = await queue.enqueue(redis, SessionRef("u4", "s1"), payload=payload("u4", "s1", "a"))
    assert taken.job_id is not None and taken.handover_id > 0
