"""The memory model on the write path, through the real `openai` client and the stub:
scopes per agent, back-dated validity, expiring plans, pinned and trusted facts.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta

import asyncpg
import pytest
from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from tests.conftest import TEST_EMBED_DIM
from tests.helpers import bot_msg, drain, fences_for_tests, user_msg
from tests.openai_stub import openai_settings, wire_requests
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.store.pool import create_pool
from worker.store.postgres import PostgresStore
from worker.store.types import Erasure


@pytest.fixture
def llm(settings: Settings, stub: StubServer) -> Settings:
    return openai_settings(settings, stub, llm_timeout_s=2.0)


async def say(settings: Settings, redis: Redis, user: str, session: str, *texts: str,
              agent: str | None = None) -> None:
    messages: list[dict[str, str]] = []
    for text in texts:
        messages += [user_msg(text), bot_msg("Noted.")]
    await schedule_memory_persistence(redis, session, user, messages,
                                      queue_name=settings.queue_name, agent_id=agent)
    await drain(settings)


async def rows(db: asyncpg.Connection, user: str) -> list[asyncpg.Record]:
    return await db.fetch("SELECT * FROM memory_fact WHERE user_id = $1 ORDER BY id", user)


def active(found: list[asyncpg.Record]) -> list[tuple[str, str | None]]:
    return sorted((r["text"], r["agent_id"]) for r in found if r["superseded_at"] is None)


async def test_two_agents_share_the_profile_and_keep_their_own_relationship(
    llm: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer
) -> None:
    await say(llm, redis, "mia", "s-luna", "I live in Lisbon.", "You can call me Sunny.",
              agent="luna")
    await say(llm, redis, "mia", "s-orion", "I live in Lisbon.", "You can call me Captain.",
              agent="orion")
    found = await rows(db, "mia")
    assert active(found) == [
        ("Lives in Lisbon", None),
        ("Wants this assistant to call them Captain", "orion"),
        ("Wants this assistant to call them Sunny", "luna"),
    ]
    assert len(found) == 3, "the profile fact said to both agents is stored once"
    scopes = {r["text"]: (r["scope"], r["agent_id"]) for r in found}
    assert scopes["Lives in Lisbon"] == ("profile", None)
    assert scopes["Wants this assistant to call them Sunny"] == ("relationship", "luna")
    # Orion's candidate was never shown Luna's fact, so it could not supersede it.
    for request in wire_requests(stub, "memory_consolidation"):
        for candidate in request["candidates"]:
            shown = {n["text"] for n in candidate["neighbors"]}
            if "Captain" in candidate["text"]:
                assert not any("Sunny" in text for text in shown)


async def test_a_fact_without_a_date_is_valid_from_when_it_was_said(
    llm: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    await say(llm, redis, "bo", "s1", "I live in Paris.")
    (paris,) = await rows(db, "bo")
    assert paris["valid_from"] == paris["observed_at"] and paris["valid_to"] is None


async def test_without_an_agent_every_fact_is_a_profile_fact(
    llm: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer
) -> None:
    await say(llm, redis, "noa", "s1", "You can call me Sunny.")
    extraction = wire_requests(stub)
    assert all("agent" not in doc for doc in extraction), "no agent key without an agent"
    assert {(r["scope"], r["agent_id"]) for r in await rows(db, "noa")} <= {("profile", None)}


def _month_start(day: date, back: int) -> datetime:
    index = day.year * 12 + day.month - 1 - back
    return datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)


async def test_a_back_dated_move_closes_the_old_home_where_the_new_one_begins(
    llm: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    await say(llm, redis, "ada", "s1", "I live in Paris.")
    # As if learned long ago: valid (and observed) since 2024.
    since = datetime(2024, 1, 1, tzinfo=UTC)
    await db.execute("UPDATE memory_fact SET valid_from = $1, observed_at = $1"
                     " WHERE user_id = 'ada'", since)
    await say(llm, redis, "ada", "s2", "I moved to Lisbon last month.")
    paris, lisbon = await rows(db, "ada")
    assert (paris["text"], lisbon["text"]) == ("Lives in Paris", "Lives in Lisbon")
    today = lisbon["observed_at"].astimezone(UTC).date()
    assert lisbon["valid_from"] == _month_start(today, 1), "resolved against the message's date"
    assert lisbon["observed_at"] > lisbon["valid_from"], "learned today, true since last month"
    assert paris["superseded_by"] == lisbon["id"]
    assert paris["superseded_reason"] == "updated"
    assert paris["valid_to"] == lisbon["valid_from"]
    assert lisbon["valid_to"] is None and lisbon["superseded_at"] is None


async def test_a_stay_this_week_expires_by_itself_and_leaves_the_neighbours(
    llm: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer
) -> None:
    await say(llm, redis, "eve", "s1", "I'm in Paris this week.")
    (stay,) = await rows(db, "eve")
    said = stay["observed_at"].astimezone(UTC).date()
    monday = said + timedelta(days=7 - said.weekday())
    assert stay["expires_at"] == datetime.combine(monday, datetime.min.time(), UTC)
    assert stay["valid_to"] == stay["expires_at"] and stay["text"].startswith("Is in Paris")

    # Once its time has passed, consolidation no longer sees it: saying it again
    # a week later is new, not "already known".
    await db.execute("UPDATE memory_fact SET expires_at = now() - interval '1 second',"
                     " valid_to = NULL WHERE id = $1", stay["id"])
    stub.reset()
    await say(llm, redis, "eve", "s2", "I'm in Paris this week.")
    for request in wire_requests(stub, "memory_consolidation"):
        for candidate in request["candidates"]:
            assert candidate["neighbors"] == []
    assert len(await rows(db, "eve")) == 2


async def _pin(db: asyncpg.Connection, user: str, text: str) -> int:
    fact_id: int = await db.fetchval(
        "UPDATE memory_fact SET pinned = true WHERE user_id = $1 AND text = $2"
        " AND superseded_at IS NULL RETURNING id", user, text)
    await db.execute("UPDATE user_memory_state SET version = version + 1 WHERE user_id = $1",
                     user)
    return fact_id


async def test_a_pinned_fact_survives_a_contradicting_conversation(
    llm: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer
) -> None:
    await say(llm, redis, "ida", "s1", "I live in Paris.", "I use Vim.")
    pinned = await _pin(db, "ida", "Lives in Paris")
    stub.reset()
    await say(llm, redis, "ida", "s2", "I moved to Lisbon.", "I no longer use Vim.")

    assert active(await rows(db, "ida")) == [("Lives in Paris", None)]
    shown = [n for request in wire_requests(stub, "memory_consolidation")
             for c in request["candidates"] for n in c["neighbors"]]
    assert any(n.get("pinned") is True for n in shown), "the model is told what is pinned"
    assert all("pinned" not in n for n in shown if "Vim" in n["text"])
    held = await db.fetch("SELECT * FROM memory_held_proposal WHERE user_id = 'ida'")
    assert [(h["fact_id"], h["event"], h["reason"], h["text"]) for h in held] == [
        (pinned, "UPDATE", "pinned", "Lives in Lisbon")]
    run = await db.fetchrow("SELECT * FROM memory_run WHERE session_id = 's2'"
                            " AND outcome = 'committed'")
    assert (run["held"], run["deleted"], run["updated"]) == (1, 1, 0)


async def test_the_previous_release_commit_signature_writes_only_with_a_fence_key(
    db: asyncpg.Connection,
) -> None:
    """The 13-argument form of an older release: a caller that names no erase fence key
    (worker.store.fence_key) writes nothing (MF005), as no fence could be checked for it."""
    vector = "[" + ",".join(["0.1"] * TEST_EMBED_DIM) + "]"
    cursor = {"session_id": "old", "user_id": "old-worker", "expected_version": 0,
              "last_hash": "h", "window_hash": "w", "position": 0, "processed": 1,
              "user_turns": 1}
    run = {"job_id": "j", "job_try": 1, "session_id": "old", "user_id": "old-worker",
           "outcome": "committed", "started_at": datetime.now(UTC).isoformat(),
           "slice_len": 1, "candidates": 1, "added": 1, "updated": 0, "deleted": 0,
           "unchanged": 0, "rejected": 0, "consolidation_attempts": 1, "input_tokens": 0,
           "output_tokens": 0, "timings_ms": {}, "handover_seq": 0}
    call = ("SELECT memfleet_commit_run($1::jsonb, NULL, $2::jsonb, ARRAY['Uses Vim'],"
            " ARRAY['preference'], ARRAY[5]::smallint[], ARRAY[$3::halfvec], 'm', now(), 'old',"
            " ARRAY[]::bigint[], ARRAY[]::integer[], ARRAY[]::integer[])")
    with pytest.raises(asyncpg.PostgresError) as refused:
        await db.execute(call, json.dumps(cursor), json.dumps(run), vector)
    assert refused.value.sqlstate == "MF005"
    assert await rows(db, "old-worker") == []
    keyed = {**cursor, "fence_key": fences_for_tests().of("old-worker").hex()}
    await db.execute(call, json.dumps(keyed), json.dumps(run), vector)
    (row,) = await rows(db, "old-worker")
    assert (row["scope"], row["agent_id"], row["basis"], row["pinned"]) == (
        "profile", None, "stated", False)
    assert row["valid_from"] == row["observed_at"] and row["embedding_dim"] == TEST_EMBED_DIM


async def test_an_erase_takes_the_held_proposals_and_counts_them(
    llm: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    await say(llm, redis, "una", "s1", "I live in Paris.")
    await _pin(db, "una", "Lives in Paris")
    await say(llm, redis, "una", "s2", "I moved to Lisbon.")
    await say(llm, redis, "val", "s1", "I live in Rome.")
    await _pin(db, "val", "Lives in Rome")
    await say(llm, redis, "val", "s2", "I moved to Oslo.")
    pool = await create_pool(llm.database_url or "", min_size=1, max_size=1)
    try:
        store = PostgresStore(pool, fences_for_tests())
        counts = await store.erase_user(Erasure("una", erased_seq=1))
    finally:
        await pool.close()
    assert (counts["memory_held_proposal"], counts["memory_fact"]) == (1, 1)
    left = await db.fetch("SELECT user_id FROM memory_held_proposal")
    assert [r["user_id"] for r in left] == ["val"], "another user's proposal stays"
