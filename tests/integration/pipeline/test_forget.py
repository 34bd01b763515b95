""""Please forget X" does what the user asked (issue 38), within the memory model: the
facts that say X are retracted (superseded as deleted, their history kept), nothing
is stored of the request, a pinned fact's retraction is held for the user, and a
request to forget everything is no forget request. Through the real `openai` client,
the OpenAI-compatible stub (which answers with the rules), a burst worker, Redis and
PostgreSQL.
"""

from __future__ import annotations

import asyncpg
import pytest
from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from tests.helpers import active_texts, runs, say
from tests.openai_stub import openai_settings, wire_requests
from worker.config import Settings


@pytest.fixture
def llm(settings: Settings, stub: StubServer) -> Settings:
    return openai_settings(settings, stub, extract_model="stub-extract",
                           consolidate_model="stub-consolidate", llm_timeout_s=2.0)


async def test_please_forget_retracts_the_fact_and_keeps_its_history(
    llm: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer
) -> None:
    await say(llm, redis, "ada", "s1", "I live in Oslo.", "I use Notion.")
    assert await active_texts(db, "ada") == ["Lives in Oslo", "Uses Notion"]
    stub.reset()
    await say(llm, redis, "ada", "s2", "Please forget that I live in Oslo.")
    assert await active_texts(db, "ada") == ["Uses Notion"], "only what was asked"
    # The request went out marked, and named the stored fact as a neighbour.
    (extracted,) = wire_requests(stub, "fact_extraction")
    (asked,) = wire_requests(stub, "memory_consolidation")
    (candidate,) = asked["candidates"]
    assert candidate["forget"] is True and candidate["text"] == "Lives in Oslo"
    assert "Lives in Oslo" in [n["text"] for n in candidate["neighbors"]]
    assert extracted["messages"][0]["content"].startswith("Please forget")
    # Retracted, not erased: the row stays in the history, ended as deleted.
    row = await db.fetchrow("SELECT * FROM memory_fact WHERE user_id = 'ada'"
                            " AND text = 'Lives in Oslo'")
    assert row["superseded_reason"] == "deleted" and row["superseded_by"] is None
    assert row["valid_to"] is not None
    assert await db.fetchval("SELECT count(*) FROM memory_fact WHERE user_id = 'ada'") == 2
    last = (await runs(db, "s2", "ada"))[-1]
    assert (last["outcome"], last["deleted"], last["added"], last["rejected"]) == (
        "committed", 1, 0, 0)


async def test_a_pinned_fact_asked_to_be_forgotten_is_held_for_the_user(
    llm: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    await say(llm, redis, "bea", "s1", "I live in Rome.")
    await db.execute("UPDATE memory_fact SET pinned = true WHERE user_id = 'bea'")
    await say(llm, redis, "bea", "s2", "Forget that I live in Rome.")
    assert await active_texts(db, "bea") == ["Lives in Rome"]
    (held,) = await db.fetch("SELECT event, reason FROM memory_held_proposal"
                             " WHERE user_id = 'bea'")
    assert tuple(held) == ("DELETE", "pinned")


async def test_what_is_no_forget_request_forgets_nothing(
    llm: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    await say(llm, redis, "cy", "s1", "I live in Lima.", "I use Go.")
    await say(llm, redis, "cy", "s2", "Forget everything about me.",
              "Don't forget that I use Go.", "I like chess.")
    assert await active_texts(db, "cy") == ["Lives in Lima", "Uses Go", "Likes chess"]
    # Asked to forget what was never stored: nothing to retract, nothing stored.
    await say(llm, redis, "cy", "s3", "Please forget that I live in Paris.")
    assert await active_texts(db, "cy") == ["Lives in Lima", "Uses Go", "Likes chess"]
