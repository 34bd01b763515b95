"""Cursor cases and bad input, end to end through Redis, the worker and PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time

import asyncpg
import pytest
from redis.asyncio import Redis

from tests.helpers import active_texts, bot_msg, drain, runs, user_msg
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.errors import HandoverUnavailable, InvalidHandover
from worker.memory_rules import Limits
from worker.protocol import queue
from worker.protocol.keys import SessionRef


async def handover(redis: Redis, settings: Settings, session: str, user: str, msgs: list) -> None:  # type: ignore[type-arg]
    await schedule_memory_persistence(redis, session, user, msgs, queue_name=settings.queue_name)


async def test_the_same_list_twice_is_an_empty_slice(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    msgs = [user_msg("I live in Quito.")]
    await handover(redis, settings, "s1", "u1", msgs)
    await drain(settings)
    await handover(redis, settings, "s1", "u1", msgs)
    await drain(settings)
    assert [r["outcome"] for r in await runs(db, "s1")] == ["committed", "empty"]
    assert await db.fetchval("SELECT count(*) FROM memory_fact") == 1


async def test_a_summarised_history_that_kept_the_cursor_processes_only_the_new(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    msgs = [user_msg("I live in Lima."), bot_msg("Lovely."), user_msg("I use Vim."),
            bot_msg("Classic."), user_msg("I like tea."), bot_msg("Noted.")]
    await handover(redis, settings, "s1", "u1", msgs)
    await drain(settings)
    summarised = [{"role": "system", "content": "[Summary of the earlier conversation]"},
                  *msgs[2:], user_msg("I use Emacs too.")]
    await handover(redis, settings, "s1", "u1", summarised)
    await drain(settings)
    last = (await runs(db, "s1"))[-1]
    assert last["slice_len"] == 1
    assert sorted(await active_texts(db, "u1")) == [
        "Likes tea", "Lives in Lima", "Uses Emacs", "Uses Vim",
    ]


async def test_a_summarised_history_without_the_cursor_is_processed_whole_without_duplicates(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    msgs = [user_msg("I live in Lima."), bot_msg("Lovely."), user_msg("I use Vim.")]
    await handover(redis, settings, "s1", "u1", msgs)
    await drain(settings)
    summarised = [{"role": "system", "content": "The user lives in Lima and uses Vim."},
                  user_msg("I use Vim."), user_msg("My name is Ana.")]
    await handover(redis, settings, "s1", "u1", summarised)
    await drain(settings)
    last = (await runs(db, "s1"))[-1]
    assert last["slice_len"] == 3, "the whole current list"
    assert last["unchanged"] == 1, "the repeated fact is recognised, not added twice"
    assert sorted(await active_texts(db, "u1")) == ["Lives in Lima", "Name is Ana", "Uses Vim"]
    summary = await db.fetchval("SELECT summary FROM session_cursor WHERE session_id = 's1'")
    assert summary, "a summarised history refreshes the rolling summary"


async def test_a_session_of_ten_thousand_messages_is_processed_in_bounded_chunks(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    msgs = [user_msg(f"I use tool{i}.") if i % 100 == 0 else bot_msg(f"reply {i}")
            for i in range(10_000)]
    await handover(redis, settings, "s1", "u1", msgs)
    await drain(settings.model_copy(update={"max_slice_messages": 500}))
    committed = [r for r in await runs(db, "s1") if r["outcome"] == "committed"]
    assert len(committed) == 20
    assert sum(r["slice_len"] for r in committed) == 10_000
    assert len(await active_texts(db, "u1")) == 100


@pytest.mark.parametrize(
    ("session", "user", "messages"),
    [
        ("", "u1", [user_msg("hi")]),
        ("s1", None, [user_msg("hi")]),
        ("s1", "u1", {"role": "user", "content": "not a list"}),
        ("s1", "u1", [{"role": "robot", "content": "hi"}]),
        ("s1", "u1", [{"role": "user", "content": ""}]),
        ("s1", "u1", [{"role": "user", "content": "x" * 40_000}]),
        ("s1", "u1", [{"role": "user", "content": "nul\x00byte"}]),
        ("s1", "u1", [{"role": "user", "content": "\udcff"}]),
    ],
)
async def test_bad_handovers_are_refused_and_leave_nothing_behind(
    redis: Redis, session: str, user: str, messages: object
) -> None:
    with pytest.raises(InvalidHandover):
        await schedule_memory_persistence(redis, session, user, messages)  # type: ignore[arg-type]
    assert await redis.keys("*") == []


class SilentRedis:
    """A port that accepts connections and reads forever, never answering: a Redis
    that hangs (stopped with SIGSTOP, a half-open network path), not one that refuses."""

    def __init__(self) -> None:
        self.connections = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> str:
        self._server = await asyncio.start_server(self._swallow, "127.0.0.1", 0)
        return f"redis://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/0"

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        await self._server.wait_closed()

    async def _swallow(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.append(writer)
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while await reader.read(65536):
                pass
        writer.close()


# The hand-over's own timeout; the bound allows for a loaded CI machine, yet is far
# below what a hang would take (the test itself would run into pytest's timeout).
HANDOVER_TIMEOUT_S = 1.0
REPORTED_WITHIN_S = HANDOVER_TIMEOUT_S + 2.0


async def _handover_fails_within_bound(url: str) -> float:
    # The chat server's own client, with its defaults: no socket timeout of its own.
    client = Redis.from_url(url)
    started = time.monotonic()
    try:
        with pytest.raises(HandoverUnavailable):
            await asyncio.wait_for(
                schedule_memory_persistence(client, "s1", "u1", [user_msg("hi")],
                                            timeout_s=HANDOVER_TIMEOUT_S),
                timeout=30)  # a hang fails the test here, never the whole run
        return time.monotonic() - started
    finally:
        await asyncio.wait_for(client.aclose(), timeout=5)


async def test_a_refusing_redis_is_reported_within_the_handover_timeout() -> None:
    from worker.embedded import free_port

    took = await _handover_fails_within_bound(f"redis://127.0.0.1:{free_port()}/0")
    assert took < REPORTED_WITHIN_S, took


async def test_a_hanging_redis_is_reported_within_the_handover_timeout() -> None:
    hanging = SilentRedis()
    async with hanging as url:
        took = await _handover_fails_within_bound(url)
        assert hanging.connections >= 1, "the client did reach the hanging server"
    assert HANDOVER_TIMEOUT_S * 0.9 <= took < REPORTED_WITHIN_S, took


async def test_malformed_jobs_and_payloads_are_recorded_not_retried(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    # A payload that is not JSON, under a properly queued job.
    session = SessionRef("u1", "s1")
    await redis.set(session.handover_key, b"\xff not json")
    await queue.enqueue(redis, session, payload=None, queue_name=settings.queue_name)
    now_ms = int(time.time() * 1000)  # ARQ skips a job whose score is 0
    # A job whose arguments are wrong.
    await redis.set("arq:job:bad-args",
                    json.dumps({"t": None, "f": queue.JOB_FUNCTION, "a": [1], "k": {},
                                "et": 0}))
    await redis.zadd(settings.queue_name, {"bad-args": now_ms})
    # A job that is not even JSON (or is a pickle someone slipped in).
    await redis.set("arq:job:garbage", b"\x80\x04\x95 pickle-ish")
    await redis.zadd(settings.queue_name, {"garbage": now_ms})
    stats = await drain(settings)
    assert stats["retried"] == 0
    outcomes = sorted(r["outcome"] for r in await db.fetch("SELECT outcome FROM memory_run"))
    assert outcomes == ["invalid", "invalid"]
    errors = " ".join(r["error"] for r in await db.fetch("SELECT error FROM memory_run"))
    assert "does not parse" in errors and "session_id" in errors
    assert await redis.zcard(settings.queue_name) == 0, "nothing is left to retry forever"


async def test_another_user_with_the_same_session_id_has_a_session_of_their_own(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    await handover(redis, settings, "s1", "alice", [user_msg("I live in Nice.")])
    await drain(settings)
    await handover(redis, settings, "s1", "mallory",
                   [user_msg("I live in Nice."), user_msg("I use Perl.")])
    await drain(settings)
    assert await active_texts(db, "mallory") == ["Lives in Nice", "Uses Perl"]
    assert await active_texts(db, "alice") == ["Lives in Nice"], "alice's memory is untouched"
    cursors = await db.fetch("SELECT user_id, processed_count FROM session_cursor"
                             " WHERE session_id = 's1' ORDER BY user_id")
    assert [tuple(c) for c in cursors] == [("alice", 1), ("mallory", 2)]
    assert [r["outcome"] for r in await runs(db, "s1")] == ["committed", "committed"]



async def test_a_session_longer_than_the_limit_is_handed_over_as_its_latest_window(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    small = settings.model_copy(update={"max_messages": 4})
    limits = Limits.from_settings(small)
    said: list[dict[str, str]] = []
    for n in range(10):
        said.append(user_msg(f"I use tool{n}."))
        said.append(bot_msg("ok"))
        await schedule_memory_persistence(redis, "s1", "u1", said, limits=limits,
                                          queue_name=small.queue_name)
        if n % 3 == 2:  # the worker lags behind some turns: older windows wait for it
            await drain(small)
    await drain(small)
    assert sorted(await active_texts(db, "u1")) == sorted(f"Uses tool{n}" for n in range(10))
    committed = [r for r in await runs(db, "s1") if r["outcome"] == "committed"]
    assert sum(r["slice_len"] for r in committed) == len(said), "every message exactly once"


async def test_a_handover_naming_its_agent_is_taken_and_remembered(
    settings: Settings, redis: Redis, db: asyncpg.Connection,
) -> None:
    await schedule_memory_persistence(redis, "s1", "u1", [user_msg("I use Zig.")],
                                      queue_name=settings.queue_name, agent_id="coach")
    stored = await redis.get(SessionRef("u1", "s1").handover_key)
    assert json.loads(stored)["agent_id"] == "coach"
    with pytest.raises(InvalidHandover, match="agent_id"):
        await schedule_memory_persistence(redis, "s2", "u1", [user_msg("I use Go.")],
                                          queue_name=settings.queue_name,
                                          agent_id="bad\x07agent")
    assert await redis.get(SessionRef("u1", "s2").handover_key) is None
    await drain(settings)
    assert await active_texts(db, "u1") == ["Uses Zig"]
