"""The chat stand-in is off unless MEMFLEET_CHAT_STANDIN mounts it; on, it is bounded
per user like the hand-over: a turn rate, a cap on sessions, a lifetime on its lists
(issue 37, finding 3). Real API over HTTP, real Redis and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import httpx
from redis.asyncio import Redis

from api_stub.chat_log import ChatLog, session_key
from tests.api_server import api_settings, bearer, running_api
from tests.helpers import active_texts, drain
from worker.config import Settings
from worker.protocol.keys import chat_sessions_key, chat_turns_key

DAY_MS = 86_400_000


@asynccontextmanager
async def stand_in(settings: Settings, **update: Any) -> AsyncIterator[httpx.AsyncClient]:
    """The API with the stand-in mounted and ``update`` applied to its settings."""
    served = api_settings(settings, chat_standin=True).model_copy(update=update)
    async with (running_api(served) as base_url,
                httpx.AsyncClient(base_url=base_url, timeout=30) as api):
        yield api


async def chat(api: httpx.AsyncClient, user: str, session: str, text: str) -> httpx.Response:
    return await api.post(f"/chat/{session}", json={"content": text}, headers=bearer(user))


async def test_off_by_default_the_routes_are_absent_and_a_token_feeds_nothing(
    api: httpx.AsyncClient, settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    turn = await chat(api, "ada", "1", "I live in Berlin.")
    assert turn.status_code == 404, turn.text
    assert (await api.post("/chat/1", json={"content": "hi"})).status_code == 404, \
        "absent, not merely refused: no token needed to find out"
    await drain(settings)
    assert await active_texts(db, "ada") == []
    assert await redis.keys("*") == [], "nothing of the turn reached Redis"
    # The same token-only turn with the stand-in mounted becomes an extracted fact.
    async with stand_in(settings) as on:
        assert (await chat(on, "ada", "1", "I live in Berlin.")).status_code == 200
    await drain(settings)
    assert await active_texts(db, "ada") == ["Lives in Berlin"]


async def test_on_a_user_beyond_the_turn_rate_gets_429_with_retry_after(
    settings: Settings, redis: Redis
) -> None:
    # One turn a second on average, three at once.
    async with stand_in(settings, chat_turns_per_minute=60, chat_turn_burst=3) as api:
        for n in range(3):
            assert (await chat(api, "ada", "1", f"turn {n}")).status_code == 200
        fast = await chat(api, "ada", "1", "one too many")
        assert fast.status_code == 429, fast.text
        assert fast.headers["Retry-After"] == "1"
        assert fast.json() == {"detail": "too many chat turns; retry later",
                               "error": "ChatTurnsTooFast"}
        assert await redis.llen(session_key("ada", "1")) == 6, "nothing of it kept"
        assert 0 < await redis.pttl(chat_turns_key("ada")) <= 3_000
        # Another user's turns are their own.
        assert (await chat(api, "bob", "1", "hello")).status_code == 200
        await asyncio.sleep(int(fast.headers["Retry-After"]))
        assert (await chat(api, "ada", "1", "after the wait")).status_code == 200


async def test_on_a_new_session_beyond_the_users_cap_gets_429_until_the_oldest_lapses(
    settings: Settings, redis: Redis
) -> None:
    async with stand_in(settings, chat_sessions_per_user=2, chat_ttl_s=3,
                        chat_turns_per_minute=0) as api:
        assert (await chat(api, "ada", "a", "hello")).status_code == 200
        assert (await chat(api, "ada", "b", "hello")).status_code == 200
        third = await chat(api, "ada", "c", "hello")
        assert third.status_code == 429, third.text
        assert third.json()["error"] == "ChatSessionsFull"
        assert 1 <= int(third.headers["Retry-After"]) <= 3
        assert await redis.exists(session_key("ada", "c")) == 0, "nothing of it kept"
        # The sessions already counted go on; another user has a cap of their own.
        assert (await chat(api, "ada", "a", "still here")).status_code == 200
        assert (await chat(api, "bob", "c", "hello")).status_code == 200
        # New sessions racing for the cap's free places: no more get in than it has.
        raced = await asyncio.gather(*(chat(api, "cy", f"r{n}", "hi") for n in range(8)))
        assert sorted(r.status_code for r in raced) == [200, 200] + [429] * 6
        # Once the oldest session's list has lapsed, a new one may start.
        await asyncio.sleep(int(third.headers["Retry-After"]) + 0.2)
        assert await redis.exists(session_key("ada", "b")) == 0, "b's list lapsed"
        assert (await chat(api, "ada", "c", "hello")).status_code == 200


async def test_on_the_lists_live_a_day_not_a_month_and_an_erase_takes_every_key(
    settings: Settings, redis: Redis
) -> None:
    async with stand_in(settings) as api:
        for session in ("1", "2"):
            assert (await chat(api, "ada", session, "I live in Lisbon.")).status_code == 200
        for key in (session_key("ada", "1"), session_key("ada", "2"),
                    chat_sessions_key("ada"), chat_turns_key("ada")):
            assert 0 < await redis.pttl(key) <= DAY_MS, key
        assert await redis.pttl(session_key("ada", "1")) > DAY_MS - 60_000
        erased = await api.delete("/users/ada", headers=bearer("ada"))
        assert erased.status_code == 200 and erased.json()["deleted"]["chat_sessions"] == 2
    assert [k for k in await redis.keys("chat:*")] == []


async def test_an_older_stand_ins_set_of_sessions_is_counted_and_erased(redis: Redis) -> None:
    # What the stand-in wrote before its sessions carried their last turn's time.
    await redis.sadd(chat_sessions_key("ada"), "1", "2")
    await redis.rpush(session_key("ada", "1"), json.dumps({"role": "user", "content": "hi"}))
    log = ChatLog(redis, max_messages=10, ttl_s=60, max_sessions=2)
    refused = await log.admit_turn("ada", "3")
    assert refused is not None and refused.error == "ChatSessionsFull"
    assert await log.admit_turn("ada", "1") is None
    await redis.delete(chat_sessions_key("ada"))
    await redis.sadd(chat_sessions_key("ada"), "1")
    assert await log.erase_user("ada") == 1
    assert await redis.keys("chat:*") == []
