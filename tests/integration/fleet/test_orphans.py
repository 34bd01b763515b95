"""The recovery pass retires a dead worker's ARQ job (worker.fleet.orphans), on a real
Redis: only when no live worker has listed it for the slack, never one the calling
worker runs, and only once its session is in neither the pending nor the claimed set.
A live worker's slow job, in real processes, is never retired."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from tests.conftest import TEST_EMBED_DIM
from tests.helpers import WorkerProcesses, active_texts, user_msg, worker_env
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.fleet.orphans import retire_orphans
from worker.fleet.probe import probe
from worker.protocol import keys, queue
from worker.protocol.keys import SessionRef

Q = keys.DEFAULT_QUEUE
SLACK_MS = 200
CHAT = "/v1/chat/completions"
# A user id and session id that need the hash tag's escapes: the script builds the
# session key from the job's arguments as SessionRef.key does.
TRICKY = SessionRef("a{b}%c", "s:1")


async def picked_job(redis: Redis, session: SessionRef = TRICKY) -> str:
    """A job for ``session`` that a worker picked (ARQ's in-progress and retry keys)
    and that nobody lists: as a SIGKILLed worker leaves it."""
    enqueued = await queue.enqueue(redis, session, payload=None, queue_name=Q)
    assert enqueued.job_id is not None
    await redis.psetex(keys.arq_in_progress_key(enqueued.job_id), 300_000, "1")
    await redis.incr(keys.arq_retry_key(enqueued.job_id))
    return enqueued.job_id


async def retire_after_slack(redis: Redis, own: tuple[str, ...] = ()) -> list[str]:
    """Two passes, the slack apart: the first sees the suspects, the second may retire."""
    first = await retire_orphans(redis, Q, own, slack_ms=SLACK_MS)
    await asyncio.sleep(SLACK_MS / 1000 + 0.1)
    return first + await retire_orphans(redis, Q, own, slack_ms=SLACK_MS)


async def beat_for(redis: Redis, job: str, deadline_ms: int) -> None:
    await redis.hset(keys.workers_key(Q), "host-1", f"{deadline_ms}|other,{job}")


async def still_queued(redis: Redis, job: str) -> bool:
    return (await redis.zscore(Q, job) is not None
            and bool(await redis.exists(keys.arq_in_progress_key(job))))


async def test_a_dead_workers_job_is_retired_once_its_session_owes_nothing(redis: Redis) -> None:
    job = await picked_job(redis)
    # Its session is pending: it was never claimed, and the recovery pass has yet
    # to queue it again. The job stays meanwhile, however long it has been orphaned.
    assert await retire_after_slack(redis) == []
    assert await still_queued(redis, job)
    await redis.zrem(keys.pending_key(Q), TRICKY.key)
    await redis.zadd(keys.claimed_key(Q), {TRICKY.key: 1})  # queued again, and claimed
    assert await retire_orphans(redis, Q, (), slack_ms=SLACK_MS) == []
    await redis.zrem(keys.claimed_key(Q), TRICKY.key)  # that job released it
    assert await retire_orphans(redis, Q, (), slack_ms=SLACK_MS) == [job]
    assert await redis.zscore(Q, job) is None
    for key in (keys.arq_in_progress_key(job), keys.arq_job_key(job), keys.arq_retry_key(job)):
        assert not await redis.exists(key), key
    assert await redis.hlen(keys.suspects_key(Q)) == 0


async def test_a_job_a_live_worker_lists_is_never_retired(redis: Redis) -> None:
    job = await picked_job(redis)
    await redis.zrem(keys.pending_key(Q), TRICKY.key)  # its session owes nothing
    now_ms = int(time.time() * 1000)
    await beat_for(redis, job, now_ms + 60_000)
    assert await retire_after_slack(redis) == []
    assert await still_queued(redis, job)
    # The calling worker's own job, listed by no beat (its entry lapsed while its
    # event loop stalled): never retired by itself.
    await beat_for(redis, job, now_ms - 1)
    assert await retire_after_slack(redis, own=(job,)) == []
    assert await still_queued(redis, job)
    # Another worker's pass: the entry lapsed, and the job is retired only once it
    # has been unlisted for the slack, not at the first look.
    assert await retire_orphans(redis, Q, (), slack_ms=SLACK_MS) == []
    assert await still_queued(redis, job)
    await asyncio.sleep(SLACK_MS / 1000 + 0.1)
    assert await retire_orphans(redis, Q, (), slack_ms=SLACK_MS) == [job]
    assert not await redis.hexists(keys.workers_key(Q), "host-1"), "a lapsed entry is dropped"


async def test_a_listed_job_starts_its_slack_again(redis: Redis) -> None:
    job = await picked_job(redis)
    await redis.zrem(keys.pending_key(Q), TRICKY.key)
    assert await retire_orphans(redis, Q, (), slack_ms=SLACK_MS) == []  # a suspect now
    await asyncio.sleep(SLACK_MS / 1000 + 0.1)
    await beat_for(redis, job, int(time.time() * 1000) + 60_000)  # its worker's beat came
    assert await retire_orphans(redis, Q, (), slack_ms=SLACK_MS) == []
    assert await redis.hlen(keys.suspects_key(Q)) == 0, "listed: no longer a suspect"


async def test_a_job_naming_no_session_is_left_to_arq_and_one_with_no_job_key_goes(
    redis: Redis,
) -> None:
    legacy = await picked_job(redis, SessionRef("u1", "s1"))
    await redis.zrem(keys.pending_key(Q), SessionRef("u1", "s1").key)
    raw = json.loads(await redis.get(keys.arq_job_key(legacy)))
    raw["k"] = {"session_id": "s1"}  # a job of a client older than per-user sessions
    await redis.set(keys.arq_job_key(legacy), json.dumps(raw))
    expired = await picked_job(redis, SessionRef("u2", "s2"))
    await redis.delete(keys.arq_job_key(expired))  # its job key expired: it can run nothing
    assert await retire_after_slack(redis) == [expired]
    assert await still_queued(redis, legacy)


async def test_the_probe_and_the_retire_keep_one_suspects_hash(redis: Redis) -> None:
    job = await picked_job(redis)
    await probe(redis, Q)  # the exporter's probe saw it first
    seen = await redis.hget(keys.suspects_key(Q), job)
    assert seen is not None
    assert await retire_orphans(redis, Q, (), slack_ms=60_000) == []
    assert await redis.hget(keys.suspects_key(Q), job) == seen, "first seen is kept"
    assert (await probe(redis, Q)).in_progress == 1


# ------------------------------------------------------------ in real processes


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer(dim=TEST_EMBED_DIM) as server:
        yield server


async def test_a_live_workers_slow_job_is_not_retired(
    settings: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer,
    tmp_path: Path,
) -> None:
    """One job held far past the orphan slack, with two workers running their
    recovery passes every 0.2 s: it stays queued and in progress until it commits."""
    env = worker_env(
        settings, llm_provider="openai", llm_base_url=stub.v1, embed_provider="openai",
        embed_base_url=stub.v1, extract_model="stub", consolidate_model="stub",
        recovery_interval_s="0.2",
    )
    hold_s = 14  # over a lapsed entry's 6 s plus the 6 s slack
    stub.add_fault("hold", count=1, sleep_s=hold_s, path=CHAT)
    workers = WorkerProcesses(env, tmp_path, 2)
    try:
        await schedule_memory_persistence(redis, "s1", "u1", [user_msg("I use Zig.")],
                                          queue_name=settings.queue_name)
        deadline = time.monotonic() + 30
        while not any(r["path"] == CHAT for r in stub.recorded()):
            assert time.monotonic() < deadline, "the job did not start"
            await asyncio.sleep(0.1)
        held_since = time.monotonic()
        job = (await redis.zrange(settings.queue_name, 0, 0))[0].decode()
        while True:
            # Read before the commit is looked for: ARQ ends the job after its commit.
            queued = (await redis.zscore(settings.queue_name, job) is not None
                      and await redis.exists(keys.arq_in_progress_key(job)))
            if await active_texts(db, "u1") == ["Uses Zig"]:
                break
            assert queued, "the job left the queue before its commit"
            assert time.monotonic() - held_since < hold_s + 30, "not committed"
            await asyncio.sleep(0.2)
        assert time.monotonic() - held_since > hold_s - 1, "held past the slack"
    finally:
        workers.stop()
    rows = await db.fetch("SELECT job_id, job_try, outcome FROM memory_run WHERE user_id = 'u1'")
    assert [(r["job_id"], r["job_try"], r["outcome"]) for r in rows] == [(job, 1, "committed")]
    assert "retired" not in worker_logs(tmp_path)


def worker_logs(log_dir: Path) -> str:
    return "".join(p.read_text() for p in log_dir.glob("worker-*.log"))
