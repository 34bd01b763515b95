"""The whole write path on real Redis and PostgreSQL with pgvector, offline providers."""

from __future__ import annotations

import asyncpg
from redis.asyncio import Redis

from tests.helpers import active_texts, bot_msg, drain, runs, user_msg
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings


async def test_a_conversation_becomes_superseding_facts(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    convo = [
        user_msg("Hi! My name is Dana and I live in Berlin."),
        bot_msg("Nice to meet you, Dana."),
        user_msg("For my side project I use Postgres."),
    ]
    await schedule_memory_persistence(redis, "s1", "dana", convo, queue_name=settings.queue_name)
    await drain(settings)
    assert sorted(await active_texts(db, "dana")) == [
        "Lives in Berlin", "Name is Dana", "Uses Postgres",
    ]

    convo += [bot_msg("Great choice."), user_msg("We switched from Postgres to SQLite.")]
    await schedule_memory_persistence(redis, "s1", "dana", convo, queue_name=settings.queue_name)
    await drain(settings)
    assert sorted(await active_texts(db, "dana")) == [
        "Lives in Berlin", "Name is Dana", "Uses SQLite",
    ]
    old = await db.fetchrow("SELECT * FROM memory_fact WHERE text = 'Uses Postgres'")
    new = await db.fetchrow("SELECT * FROM memory_fact WHERE text = 'Uses SQLite'")
    assert old["superseded_by"] == new["id"]
    assert old["superseded_at"] is not None
    assert new["source_session_id"] == "s1"
    outcomes = [r["outcome"] for r in await runs(db, "s1")]
    assert outcomes == ["committed", "committed"]
