"""An idle, fully processed session leaves no message snapshot in Redis.

Once a commit finished the session's latest list with no older list left, the
release drops the list and keeps its digest in the meta
(worker/protocol/lua/release.lua). The next hand-over is then processed exactly
once; the same list handed over again stays finished; a job that runs with
nothing left to read is an empty run, not an invalid one.
"""

from __future__ import annotations

import asyncpg
from redis.asyncio import Redis

from tests.helpers import active_texts, drain, runs, user_msg
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.protocol import keys, queue
from worker.protocol.keys import SessionRef

ERIN_S1 = SessionRef("erin", "s1")


async def hand_over(settings: Settings, redis: Redis, messages: list[dict[str, str]]) -> None:
    await schedule_memory_persistence(redis, "s1", "erin", messages,
                                      queue_name=settings.queue_name)


async def committed_slices(db: asyncpg.Connection) -> list[int]:
    return [r["slice_len"] for r in await runs(db, "s1", "erin") if r["outcome"] == "committed"]


async def test_an_idle_processed_session_has_no_snapshot_and_the_next_turn_counts_once(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    said = [user_msg("I live in Oslo."), user_msg("I use Emacs.")]
    await hand_over(settings, redis, said)
    await drain(settings)
    assert not await redis.exists(ERIN_S1.handover_key), "no snapshot once idle"
    meta = await redis.hgetall(ERIN_S1.meta_key)
    assert meta[b"d"] == meta[b"q"] and b"h" in meta, "finished, its digest kept"
    assert await redis.zscore(keys.waiting_key(settings.queue_name), ERIN_S1.key) is None

    # The next turn extends the dropped list: only the new message is processed.
    said.append(user_msg("I moved to Bergen."))
    await hand_over(settings, redis, said)
    assert await redis.exists(ERIN_S1.handover_key)
    await drain(settings)
    assert await committed_slices(db) == [2, 1], "each message in exactly one slice"
    assert sorted(await active_texts(db, "erin")) == ["Lives in Bergen", "Uses Emacs"]
    assert not await redis.exists(ERIN_S1.handover_key)


async def test_the_same_list_again_stays_finished_and_writes_nothing(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    said = [user_msg("I use Emacs.")]
    await hand_over(settings, redis, said)
    await drain(settings)
    await hand_over(settings, redis, said)  # a retried hand-over of the dropped list
    meta = await redis.hgetall(ERIN_S1.meta_key)
    assert meta[b"d"] == meta[b"q"], "the same list is still finished"
    assert await redis.zscore(keys.waiting_key(settings.queue_name), ERIN_S1.key) is None
    await drain(settings)
    assert [r["outcome"] for r in await runs(db, "s1", "erin")] == ["committed", "empty"]
    assert await active_texts(db, "erin") == ["Uses Emacs"]
    assert not await redis.exists(ERIN_S1.handover_key)


async def test_a_job_after_the_drop_is_an_empty_run(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    await hand_over(settings, redis, [user_msg("I use Emacs.")])
    await drain(settings)
    # A job for the session with nothing new (a re-drive, the recovery pass).
    await queue.enqueue(redis, ERIN_S1, payload=None, queue_name=settings.queue_name)
    await drain(settings)
    assert [r["outcome"] for r in await runs(db, "s1", "erin")] == ["committed", "empty"]
    assert await active_texts(db, "erin") == ["Uses Emacs"]
