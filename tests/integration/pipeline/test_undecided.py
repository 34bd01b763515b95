"""Nothing dropped without a trace (issue 38): a candidate whose consolidation
decisions stay unusable after the re-ask is held for the user as an addition,
through the real `openai` client, the OpenAI-compatible stub, a burst worker,
Redis and PostgreSQL; and a model that breaks the schema gets two tries of the
job, not MEMFLEET_MAX_TRIES.
"""

from __future__ import annotations

import asyncpg
import numpy as np
import pytest
from redis.asyncio import Redis

from api_stub.llm_stub import CHAT_PATH, StubServer
from tests.helpers import active_texts, drain, fences_for_tests, runs, user_msg
from tests.openai_stub import openai_settings, wire_requests
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.store.pool import create_pool
from worker.store.postgres import PostgresStore
from worker.store.types import Acceptance


@pytest.fixture
def llm(settings: Settings, stub: StubServer) -> Settings:
    return openai_settings(settings, stub, extract_model="stub-extract",
                           consolidate_model="stub-consolidate", llm_timeout_s=2.0,
                           llm_retry_after_cap_s=2.0, max_tries=4)


async def hand_over(settings: Settings, redis: Redis, user: str, said: list[str]) -> None:
    await schedule_memory_persistence(redis, "s1", user, [user_msg(t) for t in said],
                                      queue_name=settings.queue_name)


async def test_a_candidate_without_a_usable_decision_is_held_for_the_user(
    llm: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer
) -> None:
    await hand_over(llm, redis, "alice", ["I live in Turin."])
    await drain(llm)
    stub.reset()
    # Every consolidation answer names a target the candidate was not shown.
    stub.add_fault("unknown_ids", count=100, path=CHAT_PATH, task="memory_consolidation")
    await hand_over(llm, redis, "alice", ["I live in Turin.", "I moved to Milan."])
    await drain(llm)
    # Asked, asked again with the reason, the job tried once more: 2 x 2 asks.
    assert len(wire_requests(stub, "memory_consolidation")) == 4
    assert await active_texts(db, "alice") == ["Lives in Turin"], "nothing applied"
    *_, retried, last = await runs(db, "s1", "alice")
    assert retried["outcome"] == "retry"
    assert (last["outcome"], last["rejected"], last["held"], last["added"]) == (
        "committed", 1, 1, 0)
    # The doubt is on the audit row, without the fact's text.
    assert last["error"].startswith("undecided, held for the user: candidate 0: target")
    assert "Milan" not in last["error"]
    (held,) = await db.fetch("SELECT * FROM memory_held_proposal WHERE user_id = 'alice'")
    assert (held["event"], held["reason"], held["fact_id"], held["text"]) == (
        "ADD", "undecided", None, "Lives in Milan")
    assert (held["category"], held["scope"], held["run_id"]) == ("fact", "profile", last["id"])
    # The user sees it (the memory API's read) and adds it.
    pool = await create_pool(llm.database_url or "", min_size=1, max_size=1)
    try:
        store = PostgresStore(pool, fences_for_tests())
        (listed,) = await store.held_proposals("alice")
        assert (listed["event"], listed["stale"], listed["text"]) == (
            "ADD", False, "Lives in Milan")
        outcome = await store.accept_held("alice", listed["id"], Acceptance(
            resolved_by="user", embedding=np.ones(llm.embed_dim, dtype=np.float32)
            / np.sqrt(llm.embed_dim), embedding_model="text-embedding-3-small",
            confidence=0.9))
    finally:
        await pool.close()
    assert outcome.status == "done" and outcome.fact is not None
    assert outcome.fact.text == "Lives in Milan" and outcome.fact.source_session_id == "s1"
    assert await active_texts(db, "alice") == ["Lives in Turin", "Lives in Milan"]
    assert outcome.proposal is not None and outcome.proposal["result_fact_id"] == outcome.fact.id


async def test_an_unusable_consolidation_answer_holds_the_candidates_after_two_tries(
    llm: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer
) -> None:
    json_object = llm.model_copy(update={"llm_structured_output": "json_object"})
    stub.add_fault("schema_break", count=100, path=CHAT_PATH, task="memory_consolidation")
    await hand_over(json_object, redis, "bob", ["I live in Bern.", "I use Go."])
    await drain(json_object)
    # Two tries of the job (max_tries is 4), not four: then the candidates are held,
    # not the slice skipped.
    assert [r["outcome"] for r in await runs(db, "s1", "bob")] == ["retry", "committed"]
    last = (await runs(db, "s1", "bob"))[-1]
    # Bern, with no neighbour, is added without asking; Go (Bern its neighbour) is held.
    assert (last["rejected"], last["held"], last["added"]) == (1, 1, 1)
    held = await db.fetch("SELECT event, reason, text FROM memory_held_proposal"
                          " WHERE user_id = 'bob' ORDER BY id")
    assert [tuple(h) for h in held] == [("ADD", "undecided", "Uses Go")]
    assert await active_texts(db, "bob") == ["Lives in Bern"]
    # Try 1: one ask of 2 answers; try 2: the ask and the re-ask, 2 answers each.
    assert len(wire_requests(stub, "memory_consolidation")) == 6


async def test_extra_keys_in_a_json_object_answer_are_dropped_not_refused(
    llm: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer
) -> None:
    json_object = llm.model_copy(update={"llm_structured_output": "json_object"})
    stub.add_fault("extra_keys", count=100, path=CHAT_PATH)
    await hand_over(json_object, redis, "cleo", ["I live in Bern.", "I use Go."])
    await drain(json_object)
    assert [r["outcome"] for r in await runs(db, "s1", "cleo")] == ["committed"]
    assert await active_texts(db, "cleo") == ["Lives in Bern", "Uses Go"]
    assert len(wire_requests(stub, "memory_consolidation")) == 1, "no re-ask needed"
