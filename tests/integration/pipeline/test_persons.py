"""The people in a user's life (docs/persons.md), end to end: hand-overs through Redis
to a burst worker on the real `openai` client and the LLM stub (which answers with the
rules), into PostgreSQL. A fact about a person is theirs and never the user's; a
person is resolved by name, relation or alias across sessions; consolidation compares
a candidate only with the facts about the same person; persons off behave as before;
an erase removes them; memory off stores none.
"""

from __future__ import annotations

import asyncpg
import pytest
from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from tests.conftest import TEST_FENCE_KEY
from tests.helpers import say
from tests.openai_stub import openai_settings, wire_requests
from worker.config import Settings
from worker.ops.privacy import erase_user
from worker.store.fence_key import fence_keys
from worker.store.postgres import PostgresStore


@pytest.fixture
def llm(settings: Settings, stub: StubServer) -> Settings:
    # Persons on (MEMFLEET_PERSONS, off by default): what these tests are about.
    return openai_settings(settings, stub, extract_model="stub-extract",
                           consolidate_model="stub-consolidate", llm_timeout_s=2.0,
                           persons=True)


async def users_facts(db: asyncpg.Connection, user: str) -> list[str]:
    rows = await db.fetch("SELECT text FROM memory_fact WHERE user_id = $1 AND person_id IS NULL"
                          " AND superseded_at IS NULL ORDER BY id", user)
    return [r["text"] for r in rows]


async def persons_facts(db: asyncpg.Connection, user: str) -> list[tuple[str, str | None,
                                                                         str | None]]:
    """(text, the person's current name, relation) of every active fact about a person."""
    rows = await db.fetch(
        "SELECT f.text, l.display_name, l.relation FROM memory_fact AS f"
        " JOIN memory_person_label AS l ON l.user_id = f.user_id AND l.person_id = f.person_id"
        "  AND l.superseded_at IS NULL"
        " WHERE f.user_id = $1 AND f.superseded_at IS NULL ORDER BY f.id", user)
    return [tuple(r) for r in rows]


async def test_facts_about_named_people_are_theirs_and_never_the_users(
    llm: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer
) -> None:
    await say(llm, redis, "ada", "s1", "My sister Ana is vegetarian. I live in Munich.",
              "My wife is allergic to nuts.", "My boss Tom moved to Berlin.")
    assert await users_facts(db, "ada") == ["Lives in Munich"]
    assert await persons_facts(db, "ada") == [
        ("The user's sister Ana is vegetarian", "Ana", "sister"),
        ("The user's wife is allergic to nuts", None, "wife"),
        ("The user's boss Tom moved to Berlin", "Tom", "boss"),
    ]
    persons = await db.fetch("SELECT created_from, source_session_id FROM memory_person"
                             " WHERE user_id = 'ada'")
    assert {tuple(p) for p in persons} == {("conversation", "s1")}
    # The request asked who each fact is about (no one known yet); the answer said.
    (request,) = wire_requests(stub, "fact_extraction")
    assert request["people"] == []


async def test_a_person_is_found_again_by_name_relation_or_alias(
    llm: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer
) -> None:
    await say(llm, redis, "bo", "s1", "My sister Ana is vegetarian.", "My wife is a pilot.")
    stub.reset()
    await say(llm, redis, "bo", "s2", "Ana is learning Spanish.", "My wife Sarah plays golf.")
    (request,) = wire_requests(stub, "fact_extraction")
    assert [(p["name"], p["relation"]) for p in request["people"]] == [
        ("Ana", "sister"), (None, "wife")], "the known persons went out, without ids"
    assert await db.fetchval("SELECT count(*) FROM memory_person WHERE user_id = 'bo'") == 2
    assert await persons_facts(db, "bo") == [
        ("The user's sister Ana is vegetarian", "Ana", "sister"),
        ("The user's wife is a pilot", "Sarah", "wife"),
        ("Ana is learning Spanish", "Ana", "sister"),
        ("The user's wife Sarah plays golf", "Sarah", "wife"),
    ]
    # The wife's name learned: a new label version; the nameless one stays as history.
    labels = await db.fetch(
        "SELECT display_name, superseded_at IS NOT NULL AS ended, superseded_by IS NOT NULL"
        " AS linked FROM memory_person_label WHERE user_id = 'bo' AND relation = 'wife'"
        " ORDER BY id")
    assert [tuple(r) for r in labels] == [(None, True, True), ("Sarah", False, False)]


async def test_a_relation_that_changes_relabels_the_person_and_keeps_their_facts(
    llm: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    await say(llm, redis, "cyd", "s1", "My girlfriend Mia loves climbing.")
    await say(llm, redis, "cyd", "s2", "Mia is my wife now.")
    assert await persons_facts(db, "cyd") == [
        ("The user's girlfriend Mia loves climbing", "Mia", "wife"),
        ("Mia is the user's wife", "Mia", "wife"),
    ]
    assert await db.fetchval("SELECT count(*) FROM memory_person WHERE user_id = 'cyd'") == 1


async def test_consolidation_compares_a_candidate_with_the_same_persons_facts_only(
    llm: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer
) -> None:
    await say(llm, redis, "dee", "s1", "I am vegetarian.", "My sister Ana is vegetarian.")
    stub.reset()
    await say(llm, redis, "dee", "s2", "I am vegan.", "My sister Ana is vegetarian.")
    asked = wire_requests(stub, "memory_consolidation")
    shown = {c["text"]: [n["text"] for n in c["neighbors"]] for a in asked
             for c in a["candidates"]}
    assert "The user's sister Ana is vegetarian" not in shown.get("Is vegan", [])
    assert shown.get("The user's sister Ana is vegetarian") == [
        "The user's sister Ana is vegetarian"], "Ana's fact met Ana's fact alone"
    assert await users_facts(db, "dee") == ["Is vegan"]
    assert await persons_facts(db, "dee") == [
        ("The user's sister Ana is vegetarian", "Ana", "sister")]


async def test_an_unclear_person_is_nobodys_fact(
    llm: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    await say(llm, redis, "eli", "s1",
              "My friend Sam likes chess. My friend Jo plays golf. He also plays the piano.")
    texts = [t for t, _, _ in await persons_facts(db, "eli")] + await users_facts(db, "eli")
    assert not [t for t in texts if "piano" in t], "who plays the piano is not guessed"
    assert await users_facts(db, "eli") == []


async def test_persons_off_behave_as_before(
    llm: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer
) -> None:
    off = llm.model_copy(update={"persons": False})
    await say(off, redis, "fay", "s1", "My sister Ana is vegetarian.")
    (request,) = wire_requests(stub, "fact_extraction")
    assert "people" not in request
    assert await users_facts(db, "fay") == ["Sister Ana is vegetarian"]
    assert await db.fetchval("SELECT count(*) FROM memory_person WHERE user_id = 'fay'") == 0


async def test_an_erase_removes_the_persons_and_memory_off_stores_none(
    llm: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    await say(llm, redis, "gus", "s1", "My sister Ana is vegetarian.")
    await say(llm, redis, "hal", "s1", "My sister Ana is vegetarian.")
    store = await PostgresStore.connect(llm.database_url or "",
                                        fences=fence_keys(TEST_FENCE_KEY))
    try:
        await erase_user(redis, store, "gus", queue_name=llm.queue_name)
        await store.set_consent("ivy", False)
    finally:
        await store.aclose()
    for table in ("memory_person", "memory_person_label", "memory_fact"):
        assert await db.fetchval(f"SELECT count(*) FROM {table} WHERE user_id = 'gus'") == 0  # noqa: S608
        assert await db.fetchval(f"SELECT count(*) FROM {table} WHERE user_id = 'hal'") >= 1  # noqa: S608
    await say(llm, redis, "ivy", "s1", "My boss Tom moved to Berlin.")
    assert await db.fetchval("SELECT count(*) FROM memory_person WHERE user_id = 'ivy'") == 0
