"""The chat stand-in keeps each user's sessions apart, bounded and expiring."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest
from redis.asyncio import Redis

from api_stub.chat_log import ChatLog, session_key
from api_stub.chat_model import FALLBACK_ANSWER, PERSONA
from api_stub.llm_stub import CHAT_PATH, StubServer
from tests.api_server import api_settings, bearer, running_api
from tests.helpers import active_texts, drain
from worker.client.memory_tools import memory_tool_definitions
from worker.config import Settings
from worker.read_split import VOLATILE_HEADER

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


# --- With a model (MEMFLEET_CHAT_MODEL_BASE_URL on the stub): the prompt split and the
# memory tools (docs/prompt.md, docs/tools.md).


@pytest.fixture
async def model_chat(llm: Settings, stub: StubServer) -> AsyncIterator[httpx.AsyncClient]:
    """The stand-in on the stub's model, a stable block of at most 2 facts."""
    own = api_settings(llm, chat_standin=True, chat_model_base_url=stub.v1,
                       chat_model="stub-chat", read_stable_max_facts=2)
    async with running_api(own) as base_url, httpx.AsyncClient(base_url=base_url,
                                                                timeout=60) as api:
        yield api


def model_requests(stub: StubServer) -> list[dict[str, Any]]:
    """The stand-in's requests to its model (not a worker's), oldest first."""
    return [r["body"] for r in stub.recorded()
            if r["path"] == CHAT_PATH and r["body"]["messages"][0]["content"].startswith(PERSONA)]


async def test_the_prompt_is_the_stable_block_then_the_volatile_block_and_the_prefix_holds(
    model_chat: httpx.AsyncClient, stub: StubServer
) -> None:
    for text in ("Likes green tea", "Lives in Lisbon", "Has a dog named Rex",
                 "Plays the cello"):
        added = await model_chat.post("/users/ada/facts", json={"text": text},
                                      headers=bearer("ada"))
        assert added.status_code == 201, added.text
    stable = (await model_chat.get("/users/ada/stable-block", headers=bearer("ada"))).json()
    stub.script({"content": "Rex is a good dog."}, {"content": "The cello, yes."})
    first = await chat(model_chat, "ada", "1", "How is my dog Rex?")
    second = await chat(model_chat, "ada", "1", "Should I play the cello tonight?")
    assert first.json()["answer"] == "Rex is a good dog."
    assert second.json()["answer"] == "The cello, yes."
    one, two = model_requests(stub)
    # The persona, then the stable block: the cacheable prefix, the same bytes both turns.
    assert one["messages"][0] == two["messages"][0] == {
        "role": "system", "content": f"{PERSONA}\n\n{stable['block']}"}
    assert stable["count"] == 2
    # Then the volatile block of each turn's message, then the conversation.
    for body, message in ((one, "How is my dog Rex?"), (two, "Should I play the cello tonight?")):
        volatile = body["messages"][1]
        assert volatile["role"] == "system"
        assert volatile["content"].startswith(VOLATILE_HEADER)
        assert volatile["content"] not in body["messages"][0]["content"]
        assert body["messages"][-1] == {"role": "user", "content": message}
        assert body["tools"] == memory_tool_definitions()
    assert [m["content"] for m in two["messages"][2:4]] == ["How is my dog Rex?",
                                                            "Rex is a good dog."]
    assert first.json()["known_facts"] == 2 + one["messages"][1]["content"].count("\n- ")


async def test_a_save_memory_call_of_the_model_stores_a_fact_for_the_tokens_user_only(
    model_chat: httpx.AsyncClient, stub: StubServer, db: asyncpg.Connection
) -> None:
    stub.script({"tool_calls": [
        {"name": "save_memory", "arguments": {"text": "Likes green tea",
                                              "category": "preference"}},
        # No schema takes a user: naming one is refused, never acted on.
        {"name": "save_memory", "arguments": {"text": "Likes coffee", "user_id": "bob"}},
    ]}, {"content": "I will remember that."})
    reply = await model_chat.post("/chat/1", json={"content": "Remember: I like green tea.",
                                                   "agent_id": "luna"}, headers=bearer("ada"))
    assert reply.status_code == 200, reply.text
    assert reply.json()["answer"] == "I will remember that."
    assert reply.json()["tool_calls"] == 2
    assert await active_texts(db, "ada") == ["Likes green tea"]
    assert await active_texts(db, "bob") == []
    row = await db.fetchrow("SELECT source_kind, scope, agent_id FROM memory_fact"
                            " WHERE user_id = 'ada'")
    assert tuple(row) == ("manual", "profile", None)
    results = [json.loads(m["content"]) for m in model_requests(stub)[1]["messages"]
               if m["role"] == "tool"]
    assert results[0]["ok"] and results[0]["saved"]["text"] == "Likes green tea"
    assert results[1]["error"] == "bad_arguments" and "bob" not in json.dumps(results[1])


async def test_with_memory_off_the_tool_says_so_and_nothing_is_stored(
    model_chat: httpx.AsyncClient, stub: StubServer, db: asyncpg.Connection
) -> None:
    off = await model_chat.put("/users/ada/consent", json={"enabled": False},
                               headers=bearer("ada"))
    assert off.is_success, off.text
    stub.script({"tool_calls": [{"name": "save_memory", "arguments": {"text": "Likes tea"}}]},
                {"content": "Memory is off, so I cannot remember that."})
    reply = await chat(model_chat, "ada", "1", "Remember that I like tea.")
    assert reply.status_code == 200 and reply.json()["known_facts"] == 0
    first, last = model_requests(stub)
    assert first["messages"][0] == {"role": "system", "content": PERSONA}  # no block at all
    [result] = [json.loads(m["content"]) for m in last["messages"] if m["role"] == "tool"]
    assert result["error"] == "memory_off"
    assert await active_texts(db, "ada") == []


async def test_tool_rounds_are_bounded(model_chat: httpx.AsyncClient, stub: StubServer) -> None:
    listing = {"tool_calls": [{"name": "list_memory", "arguments": {}}]}
    stub.script(listing, listing, listing, listing)  # a model that never stops calling
    reply = await chat(model_chat, "ada", "1", "What do you know about me?")
    assert reply.status_code == 200
    assert (reply.json()["answer"], reply.json()["tool_calls"]) == (FALLBACK_ANSWER, 3)
    bodies = model_requests(stub)
    assert len(bodies) == 4 and bodies[-1]["tool_choice"] == "none"
    assert all("tool_choice" not in b for b in bodies[:3])
