"""The chat stand-in keeps each user's sessions apart, bounded and expiring."""

from __future__ import annotations

import json
import time

import asyncpg
import httpx
import pytest
from redis.asyncio import Redis

from api_stub.chat_log import ChatLog, session_key
from tests.api_server import api_settings, bearer, running_api
from tests.helpers import active_texts, drain
from worker.config import Settings

# Every test here chats: the API fixture mounts the stand-in (MEMFLEET_CHAT_STANDIN).
pytestmark = pytest.mark.chat_standin


async def chat(api: httpx.AsyncClient, user: str, session: str, text: str) -> httpx.Response:
    return await api.post(f"/chat/{session}", json={"content": text}, headers=bearer(user))


async def test_two_users_with_the_same_session_id_keep_separate_conversations(
    api: httpx.AsyncClient, settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    assert (await chat(api, "ada", "1", "I live in Berlin.")).status_code == 200
    assert (await chat(api, "bob", "1", "I live in Oslo.")).status_code == 200
    ada = [json.loads(m) for m in await redis.lrange(session_key("ada", "1"), 0, -1)]
    bob = [json.loads(m) for m in await redis.lrange(session_key("bob", "1"), 0, -1)]
    assert ada[0]["content"] == "I live in Berlin." and bob[0]["content"] == "I live in Oslo."
    await drain(settings)
    assert await active_texts(db, "ada") == ["Lives in Berlin"]
    assert await active_texts(db, "bob") == ["Lives in Oslo"]


async def test_a_session_id_in_use_by_another_user_cannot_be_told_apart(
    api: httpx.AsyncClient
) -> None:
    await chat(api, "ada", "private-7", "hello")
    taken = await chat(api, "bob", "private-7", "hello")
    fresh = await chat(api, "bob", "never-used", "hello")
    assert taken.status_code == fresh.status_code == 200
    assert taken.json() | {"session_id": ""} == fresh.json() | {"session_id": ""}


async def test_the_list_is_bounded_and_expires(redis: Redis) -> None:
    log = ChatLog(redis, max_messages=4, ttl_s=60)
    for n in range(5):
        messages = await log.append_turn("ada", "1", f"turn {n}", "ok")
    assert [m["content"] for m in messages] == ["turn 3", "ok", "turn 4", "ok"]
    assert 0 < await redis.pttl(session_key("ada", "1")) <= 60_000
    assert 0 < await redis.pttl(b"chat:sessions:{ada}") <= 60_000


async def test_erasing_a_user_takes_all_their_sessions_and_no_one_elses(redis: Redis) -> None:
    log = ChatLog(redis, max_messages=10, ttl_s=60)
    for user in ("a}:b", "a"):  # users whose escaped names could run together
        for session in ("1", "b}:1"):
            await log.append_turn(user, session, "hi", "ok")
    assert await log.erase_user("a") == 2
    assert await log.erase_user("a") == 0, "erasing twice is harmless"
    left = sorted(k.decode() for k in await redis.keys("chat:*"))
    assert left == sorted([session_key("a}:b", "1"), session_key("a}:b", "b}:1"),
                           "chat:sessions:{a%7D:b}"])


async def test_a_turn_with_an_agent_keeps_its_relationship_facts_with_that_agent(
    api: httpx.AsyncClient, settings: Settings, db: asyncpg.Connection
) -> None:
    async def turn(session: str, text: str, agent: str) -> httpx.Response:
        return await api.post(f"/chat/{session}", json={"content": text, "agent_id": agent},
                              headers=bearer("ada"))

    assert (await turn("1", "I live in Lisbon. You can call me Sunny.", "luna")).is_success
    await drain(settings)
    rows = await db.fetch("SELECT text, agent_id FROM memory_fact WHERE user_id = 'ada'"
                          " ORDER BY text")
    assert [tuple(r) for r in rows] == [
        ("Lives in Lisbon", None), ("Wants this assistant to call them Sunny", "luna")]
    # Luna's prompt holds both facts; another assistant's, the profile alone.
    assert (await turn("1", "hello again", "luna")).json()["known_facts"] == 2
    assert (await turn("2", "hello", "orion")).json()["known_facts"] == 1
    bad = await turn("3", "hello", "bad\nagent")
    assert bad.status_code == 422 and "bad" not in bad.text


async def test_a_stand_in_with_an_answer_time_answers_after_it_and_still_hands_over(
    settings: Settings, db: asyncpg.Connection
) -> None:
    # An answer time long enough that the hand-over's own time, however loaded the
    # machine, stays below it: the two are timed apart.
    slow = api_settings(settings, chat_standin=True).model_copy(update={"chat_answer_ms": 1000})
    async with running_api(slow) as base_url, httpx.AsyncClient(base_url=base_url) as api:
        started = time.monotonic()
        reply = await chat(api, "ada", "1", "I live in Lisbon.")
        took = time.monotonic() - started
    assert reply.is_success and reply.json()["handover"] == "scheduled"
    assert took >= 1.0, took
    # The hand-over is timed apart from the answer (normally a few milliseconds).
    assert float(reply.headers["X-Memory-Handover-Ms"]) < 1000
    await drain(settings)
    assert await active_texts(db, "ada") == ["Lives in Lisbon"]
