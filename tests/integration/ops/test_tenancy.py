"""One user's memory never touches another's, and a user's say over it holds against
jobs in flight: an erase or a consent switched off between a job's model calls and
its commit, on real Redis and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from redis.asyncio import Redis
from structlog.testing import capture_logs

from tests.helpers import active_texts, drain, job_deps, run_job, runs, user_msg
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.memory_rules import Limits
from worker.ops import privacy
from worker.protocol import keys, queue
from worker.protocol.keys import SessionRef
from worker.protocol.payload import Handover, Message, encode_handover
from worker.providers.base import Answer, Embedder, Providers
from worker.providers.factory import build_providers
from worker.telemetry import setup_telemetry
from worker.vectors import Vector

USER_TABLES = ("memory_fact", "memory_run", "session_cursor", "user_memory_state")


class InterruptedEmbedder:
    """Embeds like the embedder it wraps, then lets ``landing`` happen once before the
    job goes on: a moment between the job's start and its persist transaction. The
    embeddings call is the one model call every job with candidates makes (a first
    fact, with no neighbour, is added without a consolidation call)."""

    def __init__(self, inner: Embedder, landing: Callable[[], Awaitable[Any]]) -> None:
        self.inner, self.landing, self.landed = inner, landing, False

    @property
    def provider_name(self) -> str:
        return self.inner.provider_name

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def dim(self) -> int:
        return self.inner.dim

    async def embed(self, texts: list[str]) -> Answer[Vector]:
        answer = await self.inner.embed(texts)
        if not self.landed:
            self.landed = True
            await self.landing()
        return answer


def interrupted_at_embedding(base: Providers, landing: Callable[[], Awaitable[Any]]) -> Providers:
    return replace(base, embedder=InterruptedEmbedder(base.embedder, landing))


async def rows_of(db: asyncpg.Connection, user_id: str) -> dict[str, int]:
    return {table: await db.fetchval(f"SELECT count(*) FROM {table} WHERE user_id = $1",  # noqa: S608 - fixed table names
                                     user_id) for table in USER_TABLES}


async def test_an_erase_during_a_first_job_leaves_nothing_of_the_user(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    said = [user_msg("I live in Oslo."), user_msg("I use Rust.")]
    await schedule_memory_persistence(redis, "1", "alice", said, queue_name=settings.queue_name)
    await schedule_memory_persistence(redis, "1", "bob", said, queue_name=settings.queue_name)
    base = build_providers(settings)
    erased: list[dict[str, int]] = []
    async with job_deps(settings, redis, base) as deps:
        async def erase_alice() -> None:
            erased.append(await privacy.erase_user(redis, deps.store, "alice"))

        interrupted = interrupted_at_embedding(base, erase_alice)
        result = await run_job(replace(deps, providers=interrupted), "1", "j-alice", "alice")
        assert result["outcome"] == "erased"
        assert (await run_job(deps, "1", "j-bob", "bob"))["outcome"] == "committed"
    assert erased[0]["handovers"] == 1, "the pending hand-over went with the erase"
    assert await rows_of(db, "alice") == dict.fromkeys(USER_TABLES, 0)
    assert await db.fetchval("SELECT count(*) FROM memory_run WHERE session_id = '1'"
                             " AND user_id IS DISTINCT FROM 'bob'") == 0
    alice = SessionRef("alice", "1")
    assert await redis.exists(alice.handover_key, alice.meta_key,
                              alice.backlog_key, keys.user_sessions_key("alice")) == 0
    assert await active_texts(db, "bob") == ["Lives in Oslo", "Uses Rust"], "bob untouched"
    # What alice says after the erase is remembered as usual.
    await schedule_memory_persistence(redis, "1", "alice", [user_msg("I use Zig.")],
                                      queue_name=settings.queue_name)
    await drain(settings)
    assert await active_texts(db, "alice") == ["Uses Zig"]


async def test_memory_switched_off_during_a_job_stores_nothing_and_is_not_replayed(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    said = [user_msg("I live in Oslo.")]
    await schedule_memory_persistence(redis, "1", "alice", said, queue_name=settings.queue_name)
    base = build_providers(settings)
    async with job_deps(settings, redis, base) as deps:
        async def switch_off() -> None:
            await privacy.set_memory(redis, deps.store, "alice", enabled=False)

        interrupted = interrupted_at_embedding(base, switch_off)
        result = await run_job(replace(deps, providers=interrupted), "1", "j1", "alice")
    assert result["outcome"] == "opted_out"
    assert await active_texts(db, "alice") == []
    (run,) = await runs(db, "1", "alice")
    assert (run["outcome"], run["slice_len"], run["slice_first_hash"]) == ("opted_out", 1, None)
    # Off: hand-overs are taken and passed over without a model call.
    said += [user_msg("I use Rust.")]
    await schedule_memory_persistence(redis, "1", "alice", said, queue_name=settings.queue_name)
    await drain(settings)
    assert await active_texts(db, "alice") == []
    # On again: only what is said from now on is remembered.
    async with job_deps(settings, redis, base) as deps:
        await privacy.set_memory(redis, deps.store, "alice", enabled=True)
    said += [user_msg("I use Zig.")]
    await schedule_memory_persistence(redis, "1", "alice", said, queue_name=settings.queue_name)
    await drain(settings)
    assert await active_texts(db, "alice") == ["Uses Zig"]
    outcomes = [r["outcome"] for r in await runs(db, "1", "alice")]
    assert outcomes == ["opted_out", "opted_out", "committed"]


async def test_forgetting_erases_and_keeps_memory_off(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    await schedule_memory_persistence(redis, "1", "alice", [user_msg("I live in Oslo.")],
                                      queue_name=settings.queue_name)
    await drain(settings)
    async with job_deps(settings, redis, build_providers(settings)) as deps:
        removed = await privacy.set_memory(redis, deps.store, "alice", enabled=False,
                                           forget=True)
        assert removed is not None and removed["memory_fact"] == 1
        assert await deps.store.consent("alice") is False, "forgetting keeps the opt-out"
    assert not [key for key in await redis.keys("*") if b"alice" in key
                or (await redis.type(key) == b"string" and b"alice" in await redis.get(key))], \
        "no key of Redis names alice or holds her id after forgetting"
    await schedule_memory_persistence(redis, "1", "alice", [user_msg("I use Rust.")],
                                      queue_name=settings.queue_name)
    await drain(settings)
    assert await rows_of(db, "alice") == {**dict.fromkeys(USER_TABLES, 0), "memory_run": 1,
                                          "session_cursor": 1}
    assert [r["outcome"] for r in await runs(db, "1", "alice")] == ["opted_out"]


async def test_a_hand_over_of_an_older_client_is_adopted_and_remembered(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    # An older client wrote the payload under the session id alone, and its job
    # names only the session.
    payload = encode_handover(Handover(
        session_id="s1", user_id="alice", messages=(Message(role="user", content="I use Rust."),),
        handed_over_at=datetime.now(UTC)))
    await redis.set(keys.HANDOVER_PREFIX + "s1", payload)
    await redis.hset(keys.META_PREFIX + "s1", mapping={"q": "5", "d": "0"})
    job = {"t": None, "f": queue.JOB_FUNCTION, "a": [], "k": {"session_id": "s1"}, "et": 1}
    await redis.set(keys.ARQ_JOB_PREFIX + "legacy", json.dumps(job))
    await redis.zadd(settings.queue_name, {"legacy": 1})
    await drain(settings)
    assert await active_texts(db, "alice") == ["Uses Rust"]
    assert await redis.exists(keys.HANDOVER_PREFIX + "s1", keys.META_PREFIX + "s1") == 0


async def test_no_personal_data_in_logs_spans_or_metrics_on_these_paths(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    user, session, secret = "alice-7f3q", "sess-9x2", "I am treated for tinnitus."
    small = settings.model_copy(update={"max_messages": 2})
    exporter = InMemorySpanExporter()
    telemetry = setup_telemetry(small, span_exporter=exporter)
    limits = Limits.from_settings(small)
    said = [user_msg("I use Rust."), user_msg(secret), user_msg("I live in Oslo.")]
    base = build_providers(small)
    with capture_logs() as logs:
        # A windowed hand-over, a run with memory off, one switched off mid-run,
        # and an erase mid-run.
        await schedule_memory_persistence(redis, session, user, said, limits=limits,
                                          queue_name=small.queue_name)
        async with job_deps(small, redis, base) as deps:
            deps = replace(deps, telemetry=telemetry)
            await privacy.set_memory(redis, deps.store, user, enabled=False)
            assert (await run_job(deps, session, "j1", user))["outcome"] == "opted_out"
            await privacy.set_memory(redis, deps.store, user, enabled=True)
            said.append(user_msg("I use Zig."))
            await schedule_memory_persistence(redis, session, user, said, limits=limits,
                                              queue_name=small.queue_name)

            async def switch_off() -> None:
                await privacy.set_memory(redis, deps.store, user, enabled=False)

            off = interrupted_at_embedding(base, switch_off)
            result = await run_job(replace(deps, providers=off), session, "j2", user)
            assert result["outcome"] == "opted_out"
            await privacy.set_memory(redis, deps.store, user, enabled=True)
            said.append(user_msg("I use Go."))
            await schedule_memory_persistence(redis, session, user, said, limits=limits,
                                              queue_name=small.queue_name)

            async def erase() -> None:
                await privacy.erase_user(redis, deps.store, user)

            erasing = interrupted_at_embedding(base, erase)
            result = await run_job(replace(deps, providers=erasing), session, "j3", user)
            assert result["outcome"] == "erased"
    everything = ("\n".join(span.to_json() for span in exporter.get_finished_spans())
                  + json.dumps(logs, default=str) + telemetry.render_metrics().decode())
    assert exporter.get_finished_spans(), "the runs were traced"
    for private in (user, session, "tinnitus", "Rust", "Oslo", "Zig"):
        assert private not in everything, private
    erasures = await db.fetch("SELECT removed::text AS removed FROM memory_erasure")
    assert erasures and all(user not in r["removed"] for r in erasures)


async def test_arqs_job_lines_carry_no_user_or_session_id(
    settings: Settings, redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    await schedule_memory_persistence(redis, "sess-9x2", "alice-7f3q", [user_msg("I use Go.")],
                                      queue_name=settings.queue_name)
    with caplog.at_level(logging.INFO, logger="arq.worker"):
        await drain(settings)
    lines = [r.getMessage() for r in caplog.records if r.name == "arq.worker"]
    assert any("→" in line for line in lines), lines
    assert not any("alice-7f3q" in line or "sess-9x2" in line for line in lines), lines


# Where a round holds the user's jobs, with a lock of the test's own connection:
# - "in_commit": an uncommitted row of user_memory_state, so a commit waits inside
#   memfleet_commit_run, past its fence check and holding the user's advisory lock
#   shared, at the user-version bump; the erase then waits for that lock. Without
#   the lock (either side's) the erase goes through and the held commit's facts
#   land after it.
# - "before_commit": user_memory_consent locked, so each job waits in its first
#   query (load_session), its hand-over already claimed from Redis; the erase then
#   does everything but its last delete, and the jobs commit after the erase.
#   Without the fence those commits land.
HOLDS = {
    "in_commit": ("INSERT INTO user_memory_state (user_id, version) VALUES ($1, 0)",
                  "memfleet_commit_run", "pg_advisory_xact_lock(hashtextextended"),
    "before_commit": ("LOCK TABLE user_memory_consent IN ACCESS EXCLUSIVE MODE",
                      "FROM user_memory_consent WHERE user_id", "DELETE FROM user_memory_consent"),
}


async def _waiting_on_a_lock(db: asyncpg.Connection, fragment: str) -> int:
    return int(await db.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        " AND pid <> pg_backend_pid() AND strpos(query, $1) > 0", fragment))


async def _until(condition: Callable[[], Awaitable[bool]], what: str) -> None:
    """Poll ``condition`` until it holds; a generous deadline, never a bare sleep."""
    deadline = asyncio.get_running_loop().time() + 60
    while not await condition():
        assert asyncio.get_running_loop().time() < deadline, f"never observed: {what}"
        await asyncio.sleep(0.02)


async def test_erases_racing_a_busy_worker_leave_nothing_of_the_user(
    settings: Settings, redis: Redis, db: asyncpg.Connection, database_url: str
) -> None:
    # Jobs of many sessions of the user run on a busy worker while an erase lands
    # in the middle of their commits: observed, not hoped for. Each round holds the
    # user's jobs with a lock of the test's (HOLDS), sees them wait there, starts
    # the erase, sees it wait behind them (or finish), and only then lets go.
    # Nothing handed over before the erase survives it, and bob is untouched.
    base = build_providers(settings)
    holder = await asyncpg.connect(database_url)
    try:
        async with job_deps(settings, redis, base) as deps:
            for round_ in range(6):
                where = ("in_commit", "before_commit")[round_ % 2]
                hold, held_job, held_erase = HOLDS[where]
                user = f"alice{round_}"
                for n in range(6):
                    await schedule_memory_persistence(
                        redis, str(n), user, [user_msg(f"I use tool{n}."), user_msg("ok")],
                        queue_name=settings.queue_name)
                await schedule_memory_persistence(
                    redis, "1", "bob", [user_msg(f"I use b{round_}.")],
                    queue_name=settings.queue_name)
                held = holder.transaction()
                await held.start()
                await holder.execute(hold, *([user] if "$1" in hold else []))
                worker = asyncio.create_task(drain(settings, max_jobs=4))

                async def job_held(fragment: str = held_job) -> bool:
                    return await _waiting_on_a_lock(db, fragment) > 0

                await _until(job_held, f"{where}: a job of the user held")
                erase = asyncio.create_task(
                    privacy.erase_user(redis, deps.store, user, queue_name=settings.queue_name))

                async def erase_met_the_job(fragment: str = held_erase,
                                            erase: asyncio.Task[Any] = erase) -> bool:
                    return erase.done() or await _waiting_on_a_lock(db, fragment) > 0

                await _until(erase_met_the_job, f"{where}: the erase reached PostgreSQL")
                assert await job_held(), f"{where}: the job is still held as the erase lands"
                assert not worker.done()
                await held.rollback()
                removed = await erase
                await worker
                await drain(settings)  # whatever the erase left queued finds nothing
                left = await db.fetch("SELECT outcome, error, job_try, slice_len FROM memory_run"
                                      " WHERE user_id = $1", user)
                assert await rows_of(db, user) == dict.fromkeys(USER_TABLES, 0), (
                    where, removed, left)
                if where == "in_commit":
                    # The held commit landed first, under the lock, and the erase took it.
                    assert removed["memory_fact"] >= 1, (where, removed)
    finally:
        await holder.close()
    assert len(await active_texts(db, "bob")) == 6
