"""A rename and a new relation said in conversation, as the 1.5B model answered them
(docs/persons.md). The rename (the eval's
`people-renamed-changed-name`, --keep-calls), scripted on the OpenAI-compatible stub
and read through the real `openai` client by burst workers on Redis and PostgreSQL
(docs/persons.md): the friend called Kai is called Kian from then on, Kai kept as an
alias; the rename itself is no fact; and the next session's fact, which the model
wrote of the user though it said it was about Kian, is Kian's, never the user's.
"""

from __future__ import annotations

import json
from typing import Any

import asyncpg
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from tests.helpers import active_texts, drain, hand_over, say
from tests.openai_stub import openai_settings
from worker.config import Settings
from worker.telemetry import setup_telemetry


def _answer(text: str, name: str, relation: str) -> dict[str, Any]:
    fact = {"text": text, "category": "fact", "importance": 7, "scope": "profile",
            "basis": "stated", "valid_from": None, "valid_to": None, "expires_at": None,
            "forget": False, "about": {"name": name, "relation": relation}}
    return {"content": json.dumps({"facts": [fact]})}


@pytest.fixture
def llm(settings: Settings, stub: StubServer) -> Settings:
    return openai_settings(settings, stub, llm_timeout_s=5.0, persons=True)


async def _labels(db: asyncpg.Connection, user: str) -> list[tuple[str, str, list[str]]]:
    """Every label version of the user's persons, oldest first: name, relation, aliases."""
    rows = await db.fetch("SELECT display_name, relation, aliases FROM memory_person_label "
                          "WHERE user_id = $1 ORDER BY id", user)
    return [(r["display_name"], r["relation"], list(r["aliases"] or [])) for r in rows]


async def _about(db: asyncpg.Connection, user: str) -> list[tuple[str, int | None]]:
    rows = await db.fetch(
        "SELECT text, person_id FROM memory_fact WHERE user_id = $1 "
        "AND superseded_at IS NULL ORDER BY id", user)
    return [(r["text"], r["person_id"]) for r in rows]


async def test_a_rename_renames_the_friend_and_the_next_fact_is_theirs(
    llm: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer
) -> None:
    stub.script(_answer("The user's friend Kai plays the cello.", "Kai", "friend"))
    await say(llm, redis, "ada", "s1", "My friend Kai plays the cello.")
    stub.script(_answer("Kai changed his name to Kian last month.", "Kai", "friend"))
    await hand_over(llm, redis, "ada", "s2", "Kai changed his name to Kian last month.")
    exporter = InMemorySpanExporter()
    assert (await drain(llm, telemetry=setup_telemetry(llm, span_exporter=exporter)))[
        "failed"] == 0
    assert await _labels(db, "ada") == [("Kai", "friend", []), ("Kian", "friend", ["Kai"])]
    (consolidate,) = [s for s in exporter.get_finished_spans()
                      if s.attributes and "memfleet.persons.renamed" in s.attributes]
    assert consolidate.attributes is not None
    assert (consolidate.attributes["memfleet.persons.renamed"],
            consolidate.attributes["memfleet.persons.relabelled"]) == (1, 1)
    spans = json.dumps([dict(s.attributes or {}) for s in exporter.get_finished_spans()])
    assert "Kian" not in spans and "Kai" not in spans

    # The model wrote the user as the subject, about Kian: the user's words say it of him.
    stub.script(_answer("The user started a job at a bakery.", "Kian", "friend"))
    await say(llm, redis, "ada", "s3", "Kian started a job at a bakery.")
    person_id = await db.fetchval("SELECT id FROM memory_person WHERE user_id = 'ada'")
    assert await _about(db, "ada") == [
        ("The user's friend Kai plays the cello.", person_id),
        ("Kian started a job at a bakery", person_id)]  # the stub's ADD, its text without the stop


async def test_a_fact_the_users_words_do_not_say_of_that_person_is_nobodys(
    llm: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer
) -> None:
    # "about" names Liz, but the user's sentence about the puppy is their own.
    stub.script(_answer("The user adopted a puppy.", "Liz", "cousin"))
    await say(llm, redis, "bo", "s1", "My cousin Liz came over. I adopted a puppy.")
    assert await active_texts(db, "bo") == []


async def test_a_new_relation_the_user_said_is_the_persons_though_the_answer_says_not(
    llm: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer
) -> None:
    # The eval's `people-girlfriend-to-wife`: the model answered "Mia is my wife now."
    # with the old relation, in its text and in "about".
    stub.script(_answer("The user's girlfriend Mia loves climbing.", "Mia", "girlfriend"))
    await say(llm, redis, "cy", "s1", "My girlfriend Mia loves climbing.")
    stub.script(_answer("The user is Mia's girlfriend.", "Mia", "girlfriend"))
    await say(llm, redis, "cy", "s2", "Mia is my wife now.")
    assert await _labels(db, "cy") == [("Mia", "girlfriend", []), ("Mia", "wife", [])]
    person_id = await db.fetchval("SELECT id FROM memory_person WHERE user_id = 'cy'")
    facts = await _about(db, "cy")
    assert ("The user's girlfriend Mia loves climbing.", person_id) in facts
    assert all(about == person_id for _, about in facts), "none of them the user's"
