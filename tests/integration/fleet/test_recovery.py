"""A worker SIGKILLed mid-job: its session is processed again within seconds,
whatever the job timeout, with no new hand-over to wake it up; and its ARQ job
does not hold a burst worker up until ARQ's in-progress key expires."""

from __future__ import annotations

import asyncio
import subprocess
import sys
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
from worker.protocol import keys

CHAT = "/v1/chat/completions"


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer(dim=TEST_EMBED_DIM) as server:
        yield server


async def wait_for(condition: object, timeout_s: float) -> float:
    """Poll ``condition`` (an async callable) until true; return the seconds it took."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if await condition():  # type: ignore[operator]
            return time.monotonic() - started
        await asyncio.sleep(0.1)
    raise AssertionError(f"not within {timeout_s} s")


async def test_a_session_whose_worker_was_killed_mid_job_is_processed_again_within_seconds(
    settings: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer,
    tmp_path: Path,
) -> None:
    env = worker_env(
        settings, llm_provider="openai", llm_base_url=stub.v1, embed_provider="openai",
        embed_base_url=stub.v1, extract_model="stub", consolidate_model="stub",
        job_timeout_s="300", lock_ttl_s="2", recovery_interval_s="0.5",
    )
    stub.add_fault("latency_ms", latency_ms=30_000, count=1, path=CHAT)  # the job hangs
    workers = WorkerProcesses(env, tmp_path, 1)
    try:
        await workers.up(redis, settings.queue_name)
        await schedule_memory_persistence(redis, "s1", "u1", [user_msg("I use Zig.")],
                                          queue_name=settings.queue_name)

        async def in_flight() -> bool:
            return any(r["path"] == CHAT for r in stub.recorded())

        await wait_for(in_flight, 30)
        workers.procs[0].kill()  # SIGKILL, mid-job, the session lock held
        workers.procs[0].wait()
        killed_at = time.monotonic()
        workers.procs[0] = workers._spawn()

        async def stored() -> bool:
            return await active_texts(db, "u1") == ["Uses Zig"]

        await wait_for(stored, 30)
        # The lock's TTL plus a recovery pass, far below ARQ's job timeout + 10 s.
        assert time.monotonic() - killed_at < 15
    finally:
        workers.stop()
    assert await db.fetchval("SELECT count(*) FROM memory_fact") == 1


def start_burst_worker(env: dict[str, str], log_dir: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "worker.cli", "worker", "--burst", "--log-level", "WARNING"],
        env=env, stdout=(log_dir / "burst.log").open("wb"), stderr=subprocess.STDOUT)


async def test_a_burst_worker_ends_within_seconds_of_the_last_commit_after_workers_were_killed(
    settings: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer,
    tmp_path: Path,
) -> None:
    """Workers SIGKILLed mid-job leave their jobs in ARQ's queue behind in-progress keys
    that live the job timeout + 10 s (310 s). The recovery pass queues their sessions
    again and retires the dead jobs, so `memfleet worker --burst` ends soon after the
    last commit, every message committed once."""
    sessions = 8
    env = worker_env(
        settings, llm_provider="openai", llm_base_url=stub.v1, embed_provider="openai",
        embed_base_url=stub.v1, extract_model="stub", consolidate_model="stub",
        lock_ttl_s="3", recovery_interval_s="0.5",
    )
    stub.add_fault("hold", count=sessions, sleep_s=600, path=CHAT)  # every first call hangs
    workers = WorkerProcesses(env, tmp_path, 2)
    burst: subprocess.Popen[bytes] | None = None
    try:
        # Handed over only once both beat: a session no job claims within the pending
        # grace (10 s; worker starts on a loaded machine took longer) gets a second job
        # from the recovery pass, and the queue would hold more than the dead workers' jobs.
        await workers.up(redis, settings.queue_name)
        for n in range(sessions):
            await schedule_memory_persistence(redis, f"s{n}", f"u{n}", [user_msg(f"I use Zig{n}.")],
                                              queue_name=settings.queue_name)

        async def all_in_flight() -> bool:
            return sum(r["path"] == CHAT for r in stub.recorded()) == sessions

        await wait_for(all_in_flight, 60)
        for proc in workers.procs:  # SIGKILL, every job mid-job with its session lock held
            proc.kill()
            proc.wait()
        stub.control("DELETE", "/_stub/faults")
        stub.release()
        assert await redis.zcard(settings.queue_name) == sessions

        started = time.monotonic()
        burst = start_burst_worker(env, tmp_path)
        last_commit: float | None = None
        while burst.poll() is None:
            assert time.monotonic() - started < 120, "the burst worker did not end"
            if last_commit is None and await db.fetchval(
                    "SELECT count(DISTINCT user_id) FROM memory_run"
                    " WHERE outcome = 'committed'") == sessions:
                last_commit = time.monotonic()
            await asyncio.sleep(0.1)
        ended = time.monotonic()
    finally:
        workers.stop()
        if burst is not None and burst.poll() is None:
            burst.kill()
            burst.wait()
    assert burst.returncode == 0
    for n in range(sessions):
        assert await active_texts(db, f"u{n}") == [f"Uses Zig{n}"]
    slices = await db.fetch("SELECT user_id, sum(slice_len)::int AS n, max(job_try) AS tries"
                            " FROM memory_run WHERE outcome = 'committed' GROUP BY user_id")
    assert {r["user_id"]: (r["n"], r["tries"]) for r in slices} == {
        f"u{n}": (1, 1) for n in range(sessions)}, "each message committed once, no rerun"
    assert await redis.zcard(settings.queue_name) == 0
    assert await redis.keys(keys.ARQ_IN_PROGRESS_PREFIX + "*") == []
    # Far below ARQ's job timeout + 10 s: the heartbeats' lapse and the orphan slack
    # (6 s each) after the kill, and a recovery pass.
    assert last_commit is not None
    assert ended - last_commit < 30, f"{ended - last_commit:.1f} s after the last commit"
