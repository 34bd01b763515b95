"""A worker SIGKILLed mid-job: its session is processed again within seconds,
whatever the job timeout, with no new hand-over to wake it up."""

from __future__ import annotations

import asyncio
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
