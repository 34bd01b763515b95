"""Nothing handed over is lost to a later hand-over, on real Redis and PostgreSQL.

The chat server may summarise or replace its history while no job has
finished the previous list (workers down, or busy). The messages only that
list held are still remembered, in order, before the new ones; once a commit
finished a list, no replay of it (Redis losing the drop) writes anything.
"""

from __future__ import annotations

import asyncpg
import pytest
from redis.asyncio import Redis

from tests.helpers import active_texts, drain, runs, user_msg
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.errors import HandoverBacklogFull
from worker.protocol import queue
from worker.protocol.keys import SessionRef

DANA_S1 = SessionRef("dana", "s1")


def system_msg(text: str) -> dict[str, str]:
    return {"role": "system", "content": text}


async def hand_over(settings: Settings, redis: Redis, messages: list[dict[str, str]]) -> None:
    await schedule_memory_persistence(redis, "s1", "dana", messages,
                                      queue_name=settings.queue_name)


async def backlog(redis: Redis) -> list[bytes]:
    return list(await redis.lrange(DANA_S1.backlog_key, 0, -1))


async def test_a_list_that_extends_the_last_one_replaces_it(
    settings: Settings, redis: Redis
) -> None:
    turns = [user_msg("I live in Paris.")]
    await hand_over(settings, redis, turns)
    await hand_over(settings, redis, [*turns, user_msg("I use Vim.")])
    await hand_over(settings, redis, [*turns, user_msg("I use Vim."), user_msg("ok")])
    assert await backlog(redis) == []
    # An earlier message edited: the list no longer extends the last one.
    await hand_over(settings, redis, [user_msg("I live in Lyon."), user_msg("I use Vim.")])
    assert len(await backlog(redis)) == 1
    # A shorter list (the last message taken back) does not extend it either.
    await hand_over(settings, redis, [user_msg("I live in Lyon.")])
    assert len(await backlog(redis)) == 2


async def test_turns_a_summary_replaced_before_any_job_ran_are_still_remembered(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    # No worker runs while the chat server hands over turn by turn, then collapses
    # the history into a summary: with only the latest list kept, "Uses Vim" was lost.
    turns = [user_msg("I live in Paris.")]
    await hand_over(settings, redis, turns)
    turns.append(user_msg("I use Vim."))
    await hand_over(settings, redis, turns)
    await hand_over(settings, redis, [system_msg("Summary: Dana lives in Paris."),
                                      user_msg("I moved to Lyon.")])
    assert len(await backlog(redis)) == 1
    await drain(settings)
    assert sorted(await active_texts(db, "dana")) == ["Lives in Lyon", "Uses Vim"]
    paris = await db.fetchrow("SELECT * FROM memory_fact WHERE text = 'Lives in Paris'")
    assert paris["superseded_by"] is not None, "the later list's move supersedes the older fact"
    slices = [(r["outcome"], r["slice_len"]) for r in await runs(db, "s1", "dana")]
    assert slices == [("committed", 2), ("committed", 2)], "older list first, then the new one"
    assert await backlog(redis) == [], "a finished list is dropped"
    meta = await redis.hgetall(DANA_S1.meta_key)
    assert meta[b"d"] == meta[b"q"], "the latest list is marked finished"
    # The same list again (a retried hand-over) is still finished; a finished
    # latest list is not kept when a later one replaces it.
    latest = [system_msg("Summary: Dana lives in Paris."), user_msg("I moved to Lyon.")]
    await hand_over(settings, redis, latest)
    meta = await redis.hgetall(DANA_S1.meta_key)
    assert meta[b"d"] == meta[b"q"]
    await hand_over(settings, redis, [system_msg("Summary: Dana lives in Lyon.")])
    assert await backlog(redis) == []


async def test_a_finished_list_read_again_writes_nothing(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    # A commit finished the older list and then the newer one, which retracts what
    # the older one said; Redis then lost the older list's drop (a crash between
    # the commit and the drop, or the last second before an fsync). Read again
    # from the start, it would state the retracted fact anew.
    said = [user_msg("I use Vim.")]
    await hand_over(settings, redis, said)
    await hand_over(settings, redis, [system_msg("Summary: Dana uses Vim."),
                                      user_msg("I no longer use Vim.")])
    [entry] = await backlog(redis)
    await drain(settings)
    assert await active_texts(db, "dana") == [], "the retraction applied"
    await redis.rpush(DANA_S1.backlog_key, entry)  # the lost drop
    await queue.enqueue(redis, DANA_S1, payload=None, queue_name=settings.queue_name)
    await drain(settings)
    assert await active_texts(db, "dana") == [], "the retracted fact stays retracted"
    assert [r["outcome"] for r in await runs(db, "s1", "dana")][-1] == "empty"
    assert await backlog(redis) == [], "the empty run drops it"


async def test_a_full_backlog_refuses_the_hand_over_and_keeps_the_last_list(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    for n in range(queue.BACKLOG_LIMIT + 1):  # each replaces the last: LIMIT older lists
        await hand_over(settings, redis, [user_msg(f"My item{n} is blue.")])
    assert len(await backlog(redis)) == queue.BACKLOG_LIMIT
    kept = await redis.get(DANA_S1.handover_key)
    with pytest.raises(HandoverBacklogFull):
        await hand_over(settings, redis, [user_msg("My pet is a cat.")])
    assert await redis.get(DANA_S1.handover_key) == kept
    await drain(settings)
    remembered = await active_texts(db, "dana")
    assert len(remembered) == queue.BACKLOG_LIMIT + 1, "every list taken was remembered"
    await hand_over(settings, redis, [user_msg("My pet is a cat.")])  # room again
    await drain(settings)
    assert "Pet is a cat" in await active_texts(db, "dana")
    assert await backlog(redis) == []
