"""A chat server can learn when a turn's facts are stored: the hand-over id, the
session's memory status, and a wait for it (read-your-writes)."""

from __future__ import annotations

import asyncio

import asyncpg
from redis.asyncio import Redis

from tests.helpers import active_texts, drain, user_msg
from worker.client.handover import memory_status, schedule_memory_persistence, wait_for_memory
from worker.config import Settings


async def test_a_hand_overs_id_is_covered_once_a_commit_stored_it(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    said = [user_msg("I live in Oslo.")]
    first = await schedule_memory_persistence(redis, "1", "ada", said,
                                              queue_name=settings.queue_name)
    assert first.handover_id > 0
    status = await memory_status(redis, "1", "ada")
    assert (status.latest, status.covers(first.handover_id)) == (first.handover_id, False)
    assert not await wait_for_memory(redis, "1", "ada", first.handover_id, timeout_s=0.2)

    waiting = asyncio.create_task(
        wait_for_memory(redis, "1", "ada", first.handover_id, timeout_s=30))
    await drain(settings)
    assert await waiting, "covered once the worker committed"
    assert await active_texts(db, "ada") == ["Lives in Oslo"], "read-your-writes"

    said.append(user_msg("I use Rust."))
    second = await schedule_memory_persistence(redis, "1", "ada", said,
                                               queue_name=settings.queue_name)
    assert second.handover_id > first.handover_id
    status = await memory_status(redis, "1", "ada")
    assert not status.covers(second.handover_id)
    await drain(settings)
    assert (await memory_status(redis, "1", "ada")).covers(second.handover_id)


async def test_an_older_list_waiting_in_the_backlog_keeps_the_session_pending(
    settings: Settings, redis: Redis
) -> None:
    first = await schedule_memory_persistence(redis, "1", "ada", [user_msg("I live in Oslo.")],
                                              queue_name=settings.queue_name)
    # The chat server replaced the history before any commit: the first list waits.
    second = await schedule_memory_persistence(redis, "1", "ada", [user_msg("I use Rust.")],
                                               queue_name=settings.queue_name)
    assert second.kept_older
    status = await memory_status(redis, "1", "ada")
    assert status.older_lists == 1 and not status.covers(first.handover_id)
    await drain(settings)
    status = await memory_status(redis, "1", "ada")
    assert status.older_lists == 0 and status.covers(first.handover_id)
    assert status.covers(second.handover_id)


async def test_another_users_session_of_the_same_id_is_not_theirs(
    settings: Settings, redis: Redis
) -> None:
    mine = await schedule_memory_persistence(redis, "1", "ada", [user_msg("I use Rust.")],
                                             queue_name=settings.queue_name)
    assert (await memory_status(redis, "1", "bob")).latest == 0
    await drain(settings)
    assert not (await memory_status(redis, "1", "bob")).covers(mine.handover_id)
