"""SIGTERM lets a running job finish: a rolling deploy loses and repeats nothing."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from pathlib import Path

import asyncpg
import pytest
from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from tests.helpers import WorkerProcesses, active_texts, runs, user_msg, worker_env
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings


async def test_sigterm_waits_for_the_running_job(
    settings: Settings, redis: Redis, db: asyncpg.Connection, tmp_path: Path
) -> None:
    with StubServer(dim=settings.embed_dim) as stub:
        # The job's first model call is held until the test releases it: the job is
        # surely mid-flight at SIGTERM, however slow the machine.
        stub.add_fault("hold", count=1, sleep_s=120, path="/v1/chat/completions")
        env = worker_env(settings, llm_provider="openai", embed_provider="openai",
                         llm_base_url=stub.v1)
        proc = WorkerProcesses(env, tmp_path, count=1).procs[0]
        try:
            await schedule_memory_persistence(redis, "s1", "u1", [user_msg("I live in Gdansk.")])
            deadline = time.monotonic() + 30
            while not stub.recorded():
                assert time.monotonic() < deadline, "the job never called the model"
                await asyncio.sleep(0.05)
            proc.send_signal(signal.SIGTERM)
            with pytest.raises(subprocess.TimeoutExpired):  # it waits for the held job
                await asyncio.to_thread(proc.wait, 1.0)
            stub.release()
            code = await asyncio.to_thread(proc.wait, 60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert code == 0
    assert [r["outcome"] for r in await runs(db, "s1")] == ["committed"]
    assert await active_texts(db, "u1") == ["Lives in Gdansk"]
