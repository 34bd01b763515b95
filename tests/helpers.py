"""Test helpers: drive burst workers in-process and read results back."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
from redis.asyncio import Redis

from tests.conftest import TEST_FENCE_KEY
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings, secret
from worker.fleet.app import drain_queue
from worker.fleet.job import Deps, persist_session_memory
from worker.memory_rules import Limits
from worker.providers.base import Providers
from worker.store.fence_key import FenceKeys, fence_keys
from worker.store.pool import create_pool
from worker.store.postgres import PostgresStore
from worker.telemetry import setup_telemetry


def fences_for_tests() -> FenceKeys:
    """The fence keys of the tests' MEMFLEET_ERASE_FENCE_KEY (tests.conftest.settings)."""
    return FenceKeys(TEST_FENCE_KEY.encode())


async def drain(settings: Settings, **overrides: Any) -> dict[str, int]:
    """Run a burst worker until the queue (deferred jobs included) is empty."""
    worker = await drain_queue(settings, **overrides)
    return {"complete": worker.jobs_complete, "failed": worker.jobs_failed,
            "retried": worker.jobs_retried}


def user_msg(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def bot_msg(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


async def hand_over(settings: Settings, redis: Redis, user: str, session: str,
                    *said: str) -> None:
    """The chat server's call: the user's lines as one session's list."""
    await schedule_memory_persistence(redis, session, user, [user_msg(t) for t in said],
                                      queue_name=settings.queue_name)


async def say(settings: Settings, redis: Redis, user: str, session: str,
              *said: str) -> dict[str, int]:
    """Hand the user's lines over and run a burst worker until the queue is empty; no job
    may fail."""
    await hand_over(settings, redis, user, session, *said)
    counts = await asyncio.wait_for(drain(settings), 60)
    assert counts["failed"] == 0, counts
    return counts


async def active_texts(db: asyncpg.Connection, user_id: str) -> list[str]:
    rows = await db.fetch(
        "SELECT text FROM memory_fact WHERE user_id = $1 AND superseded_at IS NULL ORDER BY id",
        user_id,
    )
    return [r["text"] for r in rows]


async def runs(
    db: asyncpg.Connection, session_id: str, user_id: str | None = None
) -> list[asyncpg.Record]:
    """The session's audit rows (of one user's session, when ``user_id`` is given)."""
    return await db.fetch("SELECT * FROM memory_run WHERE session_id = $1"
                          " AND ($2::text IS NULL OR user_id = $2) ORDER BY id",
                          session_id, user_id)


class WorkerProcesses:
    """Real `memfleet worker` processes, for tests that kill them."""

    def __init__(self, env: dict[str, str], log_dir: Path, count: int) -> None:
        self.env, self.log_dir = env, log_dir
        self.procs: list[subprocess.Popen[bytes]] = []
        self.started = 0
        for _ in range(count):
            self.procs.append(self._spawn())

    def _spawn(self) -> subprocess.Popen[bytes]:
        self.started += 1
        log = (self.log_dir / f"worker-{self.started}.log").open("wb")
        return subprocess.Popen(
            [sys.executable, "-m", "worker.cli", "worker", "--log-level", "WARNING"],
            env=self.env, stdout=log, stderr=subprocess.STDOUT,
        )

    async def up(self, redis: Redis, queue_name: str, timeout_s: float = 60) -> None:
        """Wait for each process's first heartbeat: from then it polls the queue. A
        test that times the fleet starts its clock here, not at spawn (a worker's start
        takes seconds on a loaded machine)."""
        from worker.protocol.keys import workers_key

        async def all_beat() -> bool:
            return await redis.hlen(workers_key(queue_name)) >= len(self.procs)

        await eventually(all_beat, timeout_s, f"{len(self.procs)} workers' first heartbeat")

    def kill_and_restart(self, index: int) -> None:
        self.procs[index].send_signal(signal.SIGKILL)
        self.procs[index].wait()
        self.procs[index] = self._spawn()

    def stop(self) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def start_exporter(env: dict[str, str], log_dir: Path) -> subprocess.Popen[bytes]:
    """A real `memfleet exporter` process (stop it with ``stop_process``)."""
    log = (log_dir / "exporter.log").open("wb")
    return subprocess.Popen([sys.executable, "-m", "worker.cli", "exporter"], env=env,
                            stdout=log, stderr=subprocess.STDOUT)


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def worker_env(settings: Settings, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFLEET_")}
    env.update({
        "MEMFLEET_DATABASE_URL": settings.database_url or "",
        "MEMFLEET_REDIS_URL": settings.redis_url or "",
        "MEMFLEET_EMBED_DIM": str(settings.embed_dim),
        "MEMFLEET_HOME_DIR": str(settings.home_dir),
        "MEMFLEET_ERASE_FENCE_KEY": secret(settings.erase_fence_key) or "",
    })
    env.update({f"MEMFLEET_{k.upper()}": v for k, v in extra.items()})
    return env


@asynccontextmanager
async def job_deps(settings: Settings, redis: Redis, providers: Providers) -> AsyncIterator[Deps]:
    pool = await create_pool(settings.database_url or "", min_size=1, max_size=4)
    try:
        store = PostgresStore(pool, fence_keys(secret(settings.erase_fence_key)))
        yield Deps(settings, redis, store, providers, Limits.from_settings(settings),
                   setup_telemetry(settings))
    finally:
        await pool.close()


async def run_job(deps: Deps, session_id: str, job_id: str,
                  user_id: str = "u1") -> dict[str, Any]:
    return await persist_session_memory({"deps": deps, "job_id": job_id, "job_try": 1},
                                        user_id=user_id, session_id=session_id)


def lock_key(user_id: str, session_id: str) -> str:
    """The session lock's Redis key (worker.protocol.lock)."""
    from worker.protocol.keys import SessionRef

    return SessionRef(user_id, session_id).lock_key


async def eventually(check: Callable[[], Awaitable[bool]], timeout_s: float,
                     what: str = "") -> None:
    """Wait until ``check()`` holds, looking every 0.1 s; AssertionError after ``timeout_s``
    (naming ``what`` was awaited, when given)."""
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what + ': ' if what else ''}not within {timeout_s} s")
        await asyncio.sleep(0.1)
