"""The user's portrait through the real pipeline (docs/portrait.md): hand-overs queued
with the chat server's call, burst workers, Redis, PostgreSQL, and the real `openai`
client over HTTP against the project's stub (which answers the `user_portrait` pass
with the offline rules).

A portrait appears after a commit and follows an update; K commits within the
interval cost one model call, MEMFLEET_PORTRAIT_MAX_COMMITS commits bring it
forward; facts that did not change cost none; an erase removes every version and a
refresh whose model call was in flight during the erase writes nothing; memory off
empties it; a removed portrait stays removed until the user asks again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import asyncpg
import pytest
from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from tests.helpers import drain, eventually, fences_for_tests, hand_over, say
from tests.integration.faults.test_no_text_in_logs import (
    MARKER,
    Captured,
    assert_clean,
    drain_captured,
)
from tests.openai_stub import openai_settings, wire_requests
from worker.config import Settings
from worker.ops import privacy
from worker.pipeline.portrait import PORTRAIT_SLACK_WORDS
from worker.protocol import portrait_queue
from worker.protocol.keys import user_portrait_key
from worker.protocol.portrait_queue import PortraitPace
from worker.store.postgres import PostgresStore
from worker.store.types import ConsentGate

PORTRAIT = "user_portrait"


@pytest.fixture
def llm(settings: Settings, stub: StubServer) -> Settings:
    """The openai providers on the stub, portraits on, no interval between refreshes."""
    return openai_settings(settings, stub, llm_timeout_s=5.0, portrait_enabled=True,
                           portrait_min_interval=0.0)


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[PostgresStore]:
    store = await PostgresStore.connect(database_url, fences=fences_for_tests())
    yield store
    await store.aclose()


async def versions(db: asyncpg.Connection, user: str) -> list[asyncpg.Record]:
    return await db.fetch("SELECT version, text, fact_count, superseded_at, removed_at,"
                          " removed_reason FROM memory_portrait WHERE user_id = $1"
                          " ORDER BY version", user)


async def current(db: asyncpg.Connection, user: str) -> str | None:
    text: str | None = await db.fetchval(
        "SELECT text FROM memory_portrait WHERE user_id = $1 AND superseded_at IS NULL"
        " AND removed_at IS NULL", user)
    return text


def portrait_calls(stub: StubServer) -> list[dict[str, object]]:
    return wire_requests(stub, PORTRAIT)


async def test_a_portrait_appears_after_a_commit_and_follows_an_update(
    llm: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer
) -> None:
    await say(llm, redis, "ada", "s1", "I live in Oslo.", "I work as a nurse.")
    assert await current(db, "ada") == "The user lives in Oslo. The user works as nurse."
    (asked,) = portrait_calls(stub)
    assert sorted(f["text"] for f in asked["facts"]) == ["Lives in Oslo", "Works as nurse"]
    # The facts' own six words and the joins' slack, under the setting's 120.
    assert asked["max_words"] == 6 + PORTRAIT_SLACK_WORDS < llm.portrait_max_words
    await say(llm, redis, "ada", "s2", "I moved to Madrid.")
    text = await current(db, "ada")
    assert text is not None and "Madrid" in text and "Oslo" not in text
    rows = await versions(db, "ada")
    assert [r["version"] for r in rows] == [1, 2]
    assert rows[0]["superseded_at"] is not None and rows[1]["fact_count"] == 2
    assert len(portrait_calls(stub)) == 2


async def test_another_user_gets_a_portrait_of_their_own_facts_only(
    llm: Settings, redis: Redis, db: asyncpg.Connection, store: PostgresStore
) -> None:
    await say(llm, redis, "ada", "s1", "I live in Oslo.")
    await say(llm, redis, "bob", "s1", "I live in Lima.")
    assert await current(db, "ada") == "The user lives in Oslo."
    assert await current(db, "bob") == "The user lives in Lima."
    ada = await store.current_portrait("ada", ConsentGate())
    assert ada is not None and ada.user_id == "ada" and "Lima" not in ada.text
    assert await store.current_portrait("nobody") is None


async def test_k_commits_within_the_interval_make_one_model_call(
    llm: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer
) -> None:
    paced = llm.model_copy(update={"portrait_min_interval": 0.1})  # 6 s
    await say(paced, redis, "cy", "s0", "I live in Rome.")
    assert len(portrait_calls(stub)) == 1, "a user's first portrait is not held back"
    said = ["I use Go.", "I like chess.", "I work as a pilot.", "I am vegan."]
    for number, sentence in enumerate(said, 1):
        await hand_over(paced, redis, "cy", f"s{number}", sentence)
    await asyncio.wait_for(drain(paced), 60)  # the refresh waits out the interval
    calls = portrait_calls(stub)
    assert len(calls) == 2, "four commits within the interval, one refresh"
    assert len(calls[-1]["facts"]) == 5
    assert [r["version"] for r in await versions(db, "cy")] == [1, 2]


async def test_max_commits_bring_the_refresh_forward(
    llm: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer
) -> None:
    paced = llm.model_copy(update={"portrait_min_interval": 60.0, "portrait_max_commits": 3})
    await say(paced, redis, "di", "s0", "I live in Rome.")
    for number, sentence in enumerate(["I use Go.", "I like chess.", "I am vegan."], 1):
        await hand_over(paced, redis, "di", f"s{number}", sentence)
    # Within the hour's interval, the third commit brought the refresh forward to now:
    # the burst ends without waiting for it.
    await asyncio.wait_for(drain(paced), 60)
    assert len(portrait_calls(stub)) == 2
    assert await redis.zcard(paced.queue_name) == 0


async def test_facts_that_did_not_change_cost_no_model_call(
    llm: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer
) -> None:
    await say(llm, redis, "eve", "s1", "I live in Kyiv.")
    assert len(portrait_calls(stub)) == 1
    # Said again: consolidation answers NONE, nothing changed, no refresh is queued.
    await say(llm, redis, "eve", "s2", "I live in Kyiv.")
    assert len(portrait_calls(stub)) == 1
    # A refresh queued anyway (the user asked) finds the same facts: no model call.
    await portrait_queue.note_commit(redis, "eve", PortraitPace(), llm.queue_name, due_ms=0)
    await asyncio.wait_for(drain(llm), 60)
    assert len(portrait_calls(stub)) == 1
    assert [r["version"] for r in await versions(db, "eve")] == [1]


async def test_an_erase_removes_it_and_a_refresh_in_flight_does_not_bring_it_back(
    llm: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer,
    store: PostgresStore
) -> None:
    await say(llm, redis, "fay", "s1", "I live in Oslo.")
    assert await current(db, "fay") is not None
    # The next refresh's model call is held while the user is erased.
    stub.add_fault("hold", sleep_s=60, count=1, task=PORTRAIT)
    await hand_over(llm, redis, "fay", "s2", "I use Go.")
    worker = asyncio.create_task(drain(llm))
    try:
        async def asked() -> bool:
            return len(portrait_calls(stub)) == 2

        await eventually(asked, 30, "the refresh's model call")
        erased = await privacy.erase_user(redis, store, "fay", queue_name=llm.queue_name)
        assert erased["memory_portrait"] == 1
        assert not await redis.exists(user_portrait_key("fay"))
        stub.release()
        await asyncio.wait_for(worker, 60)
    finally:
        stub.release()
        if not worker.done():
            worker.cancel()
    assert await versions(db, "fay") == [], "the late refresh wrote nothing"
    assert await db.fetchval("SELECT count(*) FROM memory_fact WHERE user_id = 'fay'") == 0


async def test_memory_off_empties_it_and_no_refresh_runs_meanwhile(
    llm: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer,
    store: PostgresStore
) -> None:
    await say(llm, redis, "gus", "s1", "I live in Oslo.")
    await privacy.set_memory(redis, store, "gus", enabled=False, queue_name=llm.queue_name)
    (row,) = await versions(db, "gus")
    assert (row["removed_reason"], await current(db, "gus")) == ("memory_off", None)
    assert await store.current_portrait("gus", ConsentGate()) is None
    await portrait_queue.note_commit(redis, "gus", PortraitPace(), llm.queue_name, due_ms=0)
    await asyncio.wait_for(drain(llm), 60)
    assert len(portrait_calls(stub)) == 1, "no model call while memory is off"
    # On again, the next refresh writes a new version from the facts kept.
    await privacy.set_memory(redis, store, "gus", enabled=True, queue_name=llm.queue_name)
    await portrait_queue.note_commit(redis, "gus", PortraitPace(), llm.queue_name, due_ms=0)
    await asyncio.wait_for(drain(llm), 60)
    assert await current(db, "gus") == "The user lives in Oslo."


async def test_a_removed_portrait_stays_removed_until_the_user_asks_again(
    llm: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer,
    store: PostgresStore
) -> None:
    await say(llm, redis, "hal", "s1", "I live in Oslo.")
    assert await store.remove_portrait("hal") == 1
    await say(llm, redis, "hal", "s2", "I use Go.")
    assert await current(db, "hal") is None
    assert len(portrait_calls(stub)) == 1, "no model call for a portrait not wanted"
    await store.want_portrait("hal")
    await portrait_queue.note_commit(redis, "hal", PortraitPace(), llm.queue_name, due_ms=0)
    await asyncio.wait_for(drain(llm), 60)
    assert await current(db, "hal") == "The user lives in Oslo. The user uses Go."
    assert [r["removed_reason"] for r in await versions(db, "hal")] == ["user", None]


async def test_portraits_off_queue_no_refresh(
    settings: Settings, stub: StubServer, redis: Redis, db: asyncpg.Connection
) -> None:
    off = openai_settings(settings, stub, llm_timeout_s=5.0)
    await say(off, redis, "ivy", "s1", "I live in Oslo.")
    assert portrait_calls(stub) == []
    assert not await redis.exists(user_portrait_key("ivy"))
    assert await versions(db, "ivy") == []


async def test_no_fact_or_portrait_text_in_logs_or_spans_written_or_failed(
    llm: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer,
    caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    captured = Captured()
    await hand_over(llm, redis, "jo", "s1", f"I live in {MARKER}ville.")
    await drain_captured(llm, caplog, captured)
    assert MARKER in (await current(db, "jo") or ""), "the portrait holds the marked fact"
    # A model that keeps breaking the portrait's schema: tried, then failed on the record.
    stub.add_fault("schema_break", count=20, task=PORTRAIT)
    await hand_over(llm, redis, "jo", "s2", "I use Go.")
    await drain_captured(llm, caplog, captured)
    assert [r["version"] for r in await versions(db, "jo")] == [1]
    assert_clean(captured, [])
