"""Redis memory has a byte budget whatever the client sends, on real Redis and PostgreSQL.

The attack (issue 25): 60 turns of long emoji messages added 35 MB to one
session, bounded in messages, never in bytes. Now a message, a hand-over, a
session's lists (latest and older) and the number of a user's sessions holding
unfinished lists are each bounded; a refused hand-over stores nothing and loses
nothing held (the full backlog's semantics, test_handover_backlog.py).
"""

from __future__ import annotations

import json

import asyncpg
import httpx
import pytest
from redis.asyncio import Redis

from api_stub.chat_log import ChatLog, session_key
from tests.api_server import api_settings, bearer, running_api
from tests.helpers import active_texts, drain, user_msg
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.errors import HandoverTooLarge, SessionBytesFull, UserSessionsFull
from worker.memory_rules import Limits
from worker.protocol import keys, queue
from worker.protocol.keys import SessionRef

EVE = SessionRef("eve", "s1")
# MEMORY USAGE counts what Redis allocates beside the bytes the budget counts:
# per key its name and object header, the meta hash, the queued marker and the
# user's sets (4.3 KB measured for a full session on the tests' Redis, built
# with libc malloc), and the allocator's rounding: none to speak of with libc,
# up to a quarter of a large string with jemalloc's size classes.
# Documented in docs/architecture.md.
OVERHEAD_BYTES = 16_384


async def overhead(redis: Redis, budget: int) -> int:
    allocator = str((await redis.info("memory")).get("mem_allocator", ""))
    return OVERHEAD_BYTES + (budget // 4 if "jemalloc" in allocator else 0)


async def session_memory(redis: Redis, session: SessionRef) -> int:
    """MEMORY USAGE of every key of the session, and of its user's keys."""
    total = 0
    for key in (*session.state_keys, *keys.user_keys(session.user_id)):
        total += int(await redis.memory_usage(key) or 0)
    return total


async def held(redis: Redis, session: SessionRef) -> tuple[bytes | None, list[bytes]]:
    return (await redis.get(session.handover_key),
            list(await redis.lrange(session.backlog_key, 0, -1)))


async def test_sixty_long_emoji_turns_stay_within_the_session_budget(
    settings: Settings, redis: Redis
) -> None:
    limits = Limits.from_settings(settings)
    emoji = "\U0001f600" * (limits.max_message_bytes // 4)  # the longest message: 64 KiB
    history: list[dict[str, str]] = []
    refused = 0
    allowed = await overhead(redis, limits.max_session_bytes)
    for turn in range(60):  # no worker runs: nothing is ever finished
        history += [user_msg(f"{turn} {emoji}"[: len(emoji)]),
                    {"role": "assistant", "content": f"reply {turn}"}]
        before = await held(redis, EVE)
        try:
            await schedule_memory_persistence(redis, EVE.session_id, EVE.user_id, history,
                                              limits=limits, queue_name=settings.queue_name)
        except SessionBytesFull as exc:
            refused += 1
            assert exc.size > limits.max_session_bytes
            assert await held(redis, EVE) == before, "a refusal keeps every list held"
        used = await session_memory(redis, EVE)
        assert used <= limits.max_session_bytes + allowed, (
            f"turn {turn}: {used} bytes in Redis")
    assert refused > 0, "the history outgrew the session's budget"
    payload, older = await held(redis, EVE)
    assert payload is not None and len(payload) <= limits.max_handover_bytes
    assert sum(len(entry) for entry in older) + len(payload) <= limits.max_session_bytes
    assert payload.count("\U0001f600".encode()) > 0 and b"\\ud83d" not in payload


async def test_a_message_over_its_byte_limit_is_refused_naming_the_sizes(
    settings: Settings, redis: Redis
) -> None:
    limits = Limits.from_settings(settings)
    await schedule_memory_persistence(redis, "s1", "eve", [user_msg("I live in Oslo.")],
                                      limits=limits, queue_name=settings.queue_name)
    before = await held(redis, EVE)
    # 17,000 characters is under the character limit; 68,000 bytes is over the byte limit.
    secret = "\U0001f511" * 17_000
    with pytest.raises(HandoverTooLarge) as caught:
        await schedule_memory_persistence(
            redis, "s1", "eve", [user_msg("I live in Oslo."), user_msg(secret)],
            limits=limits, queue_name=settings.queue_name)
    assert str(caught.value) == (
        f"message 1: content is 68000 bytes, over the limit of {limits.max_message_bytes}")
    assert await held(redis, EVE) == before


async def test_a_list_over_the_hand_over_limit_goes_as_its_newest_window(
    settings: Settings, redis: Redis
) -> None:
    limits = Limits.from_settings(settings)
    messages = [user_msg(f"m{n} " + "x" * 30_000) for n in range(40)]  # 1.2 MB of messages
    await schedule_memory_persistence(redis, "s1", "eve", messages, limits=limits,
                                      queue_name=settings.queue_name)
    payload, _ = await held(redis, EVE)
    assert payload is not None
    assert limits.max_handover_bytes - 30_100 < len(payload) <= limits.max_handover_bytes
    assert b'"m39 ' in payload and b'"m0 ' not in payload, "the newest messages, in order"


async def test_a_client_of_another_language_is_held_to_the_hand_over_limit(
    settings: Settings, redis: Redis
) -> None:
    # The script checks it itself: a client that skips the Python checks is refused too.
    limits = Limits(max_handover_bytes=10_000)

    def payload(content: bytes) -> bytes:
        return (b'{"v":1,"session_id":"s1","user_id":"eve","messages":[{"role":"user",'
                b'"content":"' + content + b'"}],"handed_over_at":"2026-01-01T00:00:00Z"}')

    await queue.enqueue(redis, EVE, payload=payload(b"I live in Oslo."),
                        queue_name=settings.queue_name, limits=limits)
    before = await held(redis, EVE)
    jobs = await redis.zcard(settings.queue_name)
    large = payload(b"y" * 10_000)
    with pytest.raises(HandoverTooLarge, match=f"is {len(large)} bytes, over the limit of"):
        await queue.enqueue(redis, EVE, payload=large, queue_name=settings.queue_name,
                            limits=limits)
    assert await held(redis, EVE) == before
    assert await redis.zcard(settings.queue_name) == jobs, "no job for a refused hand-over"


async def test_a_full_session_budget_refuses_and_loses_nothing_held(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    # Each list replaces the last (a history summarised again and again while no
    # worker runs): the older ones wait in the backlog until the budget is full.
    limits = Limits(max_handover_bytes=20_000, max_session_bytes=40_000)
    filler = {"role": "assistant", "content": "z" * 9_000}

    async def hand_over(n: int) -> None:
        await schedule_memory_persistence(
            redis, "s1", "eve", [user_msg(f"My item{n} is blue."), filler], limits=limits,
            queue_name=settings.queue_name)

    n = 0
    with pytest.raises(SessionBytesFull, match="over the limit of 40000"):
        while True:
            await hand_over(n)
            n += 1
            before = await held(redis, EVE)
    assert n == 4 and await held(redis, EVE) == before
    payload, older = before
    assert payload is not None
    assert await redis.hget(EVE.meta_key, "k") == str(sum(map(len, older))).encode()
    await drain(settings)
    assert len(await active_texts(db, "eve")) == n, "every list taken was remembered"
    assert await held(redis, EVE) == (None, []), "the budget is given back"
    await hand_over(n)  # room again
    await drain(settings)
    assert f"Item{n} is blue" in " ".join(await active_texts(db, "eve"))


async def test_a_user_holds_a_bounded_number_of_unfinished_sessions(
    settings: Settings, redis: Redis
) -> None:
    limits = Limits(max_user_sessions=3)

    async def hand_over(user: str, session: str, text: str = "I live in Oslo.") -> None:
        await schedule_memory_persistence(redis, session, user, [user_msg(text)],
                                          limits=limits, queue_name=settings.queue_name)

    for session in ("a", "b", "c"):
        await hand_over("eve", session)
    with pytest.raises(UserSessionsFull, match="has 3 sessions"):
        await hand_over("eve", "d")
    assert await redis.get(SessionRef("eve", "d").handover_key) is None
    await hand_over("eve", "a", "I live in Rome.")  # a session already counted goes on
    await hand_over("bob", "d")  # another user has budgets of their own
    await drain(settings)
    # Finished, idle sessions keep their meta and no longer count.
    assert await redis.scard(keys.user_active_key("eve")) == 0
    for session in ("d", "e", "f"):
        await hand_over("eve", session)
    # A session whose lists went without a release (expired) is pruned at the cap.
    await redis.delete(*SessionRef("eve", "d").state_keys)
    await hand_over("eve", "g")
    assert sorted(await redis.smembers(keys.user_active_key("eve"))) == [b"e", b"f", b"g"]


async def test_astral_characters_are_stored_as_utf8_and_reach_the_facts(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    text = "My pet is a \U0001f408 called \u03a9mega."
    result = await schedule_memory_persistence(redis, "s\U0001f408", "\u00e8ve\U0001f600",
                                               [user_msg(text)], queue_name=settings.queue_name)
    session = SessionRef("\u00e8ve\U0001f600", "s\U0001f408")
    payload = await redis.get(session.handover_key)
    assert payload is not None and text.encode() in payload
    assert b"\\u" not in payload, "no escape of any character"
    job = await redis.get(keys.ARQ_JOB_PREFIX + (result.job_id or ""))
    assert job is not None and b"\\u" not in job and "\U0001f408".encode() in job
    await drain(settings)
    assert await active_texts(db, "\u00e8ve\U0001f600") == ["Pet is a \U0001f408 called \u03a9mega"]


async def test_the_chat_stand_in_answers_413_and_429_and_keeps_no_refused_turn(
    settings: Settings, redis: Redis
) -> None:
    async with (
        running_api(api_settings(settings.model_copy(update={"max_user_sessions": 1}),
                                 chat_standin=True)) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as api,
    ):
        async def chat(session: str, text: str) -> httpx.Response:
            return await api.post(f"/chat/{session}", json={"content": text},
                                  headers=bearer("eve"))

        large = await chat("1", "\U0001f511" * 17_000)
        assert large.status_code == 413
        assert large.json() == {"detail": "the message is 68000 bytes, over the limit of 65536",
                                "error": "HandoverTooLarge"}
        assert await redis.exists(session_key("eve", "1")) == 0, "nothing of it stored"

        assert (await chat("1", "My pet is a \U0001f408.")).status_code == 200
        stored = await redis.lrange(session_key("eve", "1"), 0, -1)
        assert "\U0001f408".encode() in stored[0] and b"\\u" not in stored[0]
        full = await chat("2", "I live in Oslo.")
        assert full.status_code == 429 and full.headers["Retry-After"] == "5"
        assert full.json() == {"detail": "the user has 1 sessions with message lists no job"
                                         " has finished, the limit",
                               "error": "UserSessionsFull"}
        assert await redis.lrange(session_key("eve", "2"), 0, -1) == [], "the turn taken back"
        assert await redis.zscore(keys.chat_sessions_key("eve"), "2") is None, \
            "a session left empty does not count against the user's cap on sessions"
        assert len(await redis.lrange(session_key("eve", "1"), 0, -1)) == 2
        await drain(settings)
        assert (await chat("2", "I live in Oslo.")).status_code == 200
        # A message kept from before a lower limit refuses the hand-over, not the turn.
        await drain(settings)
        old = json.dumps({"role": "user", "content": "\U0001f511" * 17_000})
        await redis.rpush(session_key("eve", "3"), old)
        turn = await chat("3", "hello")
        assert turn.status_code == 200 and turn.json()["handover"] == "refused"


async def test_the_chat_stand_in_log_keeps_no_more_bytes_than_a_hand_over_sends(
    redis: Redis
) -> None:
    log = ChatLog(redis, max_messages=1000, ttl_s=60)
    for turn in range(20):
        messages = await log.append_turn("eve", "1", f"{turn} " + "\u00e9" * 1000, "ok",
                                         max_bytes=10_000)
    stored = await redis.lrange(session_key("eve", "1"), 0, -1)
    assert 8_000 < sum(len(item) for item in stored) <= 10_000
    assert messages[-2]["content"].startswith("19 ") and len(messages) == len(stored)
    # A single turn over the bound is still kept whole: the hand-over decides about it.
    messages = await log.append_turn("eve", "1", "x" * 12_000, "ok", max_bytes=10_000)
    assert [m["content"][:1] for m in messages] == ["x", "o"]
