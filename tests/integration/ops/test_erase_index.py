"""An erase's Redis work is the user's, not the fleet's: the erase script finds the
user's jobs and set entries from the user's own keys (the session set, the job
index enqueue.lua keeps), so what it runs does not grow with other users' queued
jobs. A job a release before the index queued is found by its queued marker
while it waits; once started and queued again by ARQ, nothing of the user names
it: the erase leaves it, and when it runs it finds no hand-over and writes back
nothing of the user (the erase fence keeps the ids out of its audit row)."""

from __future__ import annotations

import asyncpg
from redis.asyncio import Redis

from api_stub.llm_stub import CHAT_PATH, StubServer
from tests.helpers import active_texts, drain, job_deps, user_msg
from tests.integration.ops.test_erase_leftovers import _names
from tests.openai_stub import openai_settings
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.ops import privacy
from worker.protocol import keys, queue
from worker.protocol.keys import SessionRef
from worker.providers.factory import build_providers

# What the erase script itself runs is counted; these are the calls around it.
_AROUND = {"eval", "evalsha", "info", "config|resetstat", "config"}


async def _commands_of_erase(redis: Redis, user_id: str, queue_name: str) -> dict[str, int]:
    """Each Redis command the erase of ``user_id`` ran, and how often (the script's
    own calls count in INFO commandstats)."""
    await redis.config_resetstat()
    cleared = await queue.erase_user(redis, user_id, queue_name)
    stats = await redis.info("commandstats")
    assert (cleared.handovers, cleared.jobs) == (2, 2), cleared
    return {name.removeprefix("cmdstat_"): int(value["calls"]) for name, value in stats.items()
            if name.removeprefix("cmdstat_") not in _AROUND}


async def _hand_over_alice(redis: Redis, queue_name: str) -> None:
    for session in ("1", "2"):
        await schedule_memory_persistence(redis, session, "alice", [user_msg("I use Rust.")],
                                          queue_name=queue_name)


async def test_the_erase_runs_the_same_commands_however_many_jobs_others_queued(
    settings: Settings, redis: Redis
) -> None:
    name = settings.queue_name
    await queue.erase_user(redis, "nobody", name)  # the script loaded (no NOSCRIPT below)
    await _hand_over_alice(redis, name)
    alone = await _commands_of_erase(redis, "alice", name)

    # 400 other users' hand-overs: their jobs queued, their sessions pending and waiting.
    for n in range(400):
        await schedule_memory_persistence(redis, "1", f"other{n}", [user_msg("I use Go.")],
                                          queue_name=name)
    await _hand_over_alice(redis, name)
    crowded = await _commands_of_erase(redis, "alice", name)

    assert crowded == alone, "the erase's work grew with other users' jobs"
    assert sum(alone.values()) < 40, alone
    assert await redis.zcard(name) == 400
    assert await redis.zcard(keys.pending_key(name)) == 400
    assert await redis.zcard(keys.waiting_key(name)) == 400


async def test_a_job_queued_before_the_index_is_taken_while_its_marker_names_it(
    settings: Settings, redis: Redis
) -> None:
    name = settings.queue_name
    await _hand_over_alice(redis, name)
    await redis.delete(keys.user_jobs_key("alice"))  # as the release before the index left it
    cleared = await queue.erase_user(redis, "alice", name)
    assert (cleared.handovers, cleared.jobs) == (2, 2)
    assert await _names(redis, b"alice") == []
    assert await redis.zcard(name) == 0


async def test_a_started_job_of_the_release_before_the_index_writes_back_nothing(
    settings: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer
) -> None:
    llm = openai_settings(settings, stub, extract_model="stub-extract",
                          consolidate_model="stub-consolidate", llm_timeout_s=2.0,
                          llm_retry_after_cap_s=2.0).model_copy(
        update={"llm_max_attempts": 1, "max_tries": 3})
    name = llm.queue_name
    stub.add_fault("503", count=1000, path=CHAT_PATH)
    try:
        await schedule_memory_persistence(redis, "1", "alice", [user_msg("I use Rust.")],
                                          queue_name=name)
        (job,) = [j.decode() for j in await redis.zrange(name, 0, -1)]
        await redis.delete(keys.user_jobs_key("alice"))  # queued by the release before
        # Its first try fails: ARQ queues it again; no marker, no index names it.
        assert (await drain(llm, max_burst_jobs=1))["retried"] == 1
    finally:
        stub.reset()
    assert await redis.get(SessionRef("alice", "1").queued_key) is None

    async with job_deps(llm, redis, build_providers(llm)) as deps:
        deleted = await privacy.erase_user(redis, deps.store, "alice", queue_name=name)
    assert (deleted["handovers"], deleted["jobs"]) == (1, 0)
    assert await _names(redis, b"alice") == [f"{keys.ARQ_JOB_PREFIX}{job} (value)"]

    # It runs: no hand-over to read, nothing remembered, and its audit row keeps no
    # id of the user (memfleet_insert_run: numbered at or below the erase's fence).
    await drain(llm)
    assert await redis.zcard(name) == 0
    assert await _names(redis, b"alice") == []
    assert await active_texts(db, "alice") == []
    assert await db.fetchval("SELECT count(*) FROM memory_run WHERE user_id = 'alice'") == 0
    assert await db.fetchval("SELECT count(*) FROM memory_run WHERE job_id = $1", job) == 1


async def test_a_re_drive_lists_its_session_for_the_erase(
    settings: Settings, redis: Redis
) -> None:
    # The fleet re-drives a session (a job with no payload: recovery, a busy lock) that
    # the user's session set may not list (an erase emptied it while a job ran).
    name = settings.queue_name
    await queue.enqueue(redis, SessionRef("alice", "1"), payload=None, queue_name=name)
    assert await redis.zcard(keys.pending_key(name)) == 1
    cleared = await queue.erase_user(redis, "alice", name)
    assert cleared.jobs == 1
    assert await _names(redis, b"alice") == []
    assert await redis.zcard(keys.pending_key(name)) == 0


async def test_the_job_index_holds_about_the_users_live_jobs(
    settings: Settings, redis: Redis
) -> None:
    # Jobs that ended leave the index at the user's next queued job: it does not grow
    # with the user's history, and it lapses a job's expiry after the last one.
    name = settings.queue_name
    index = keys.user_jobs_key("alice")
    said = []
    for turn in range(5):
        said.append(user_msg(f"I use language number {turn}."))
        await schedule_memory_persistence(redis, "1", "alice", said, queue_name=name)
        await schedule_memory_persistence(redis, "2", "alice", said, queue_name=name)
        assert await redis.zcard(index) == 2
        await drain(settings)
    assert 0 < await redis.pttl(index) <= queue.JOB_EXPIRES_MS
    assert await redis.zcard(name) == 0
