"""How long `memfleet worker --burst` takes to drain after workers were SIGKILLed mid-job.

Three `memfleet worker` processes with the default settings (lock TTL, recovery
interval, job timeout), the `openai` providers against the project's
OpenAI-compatible stub. ``--sessions`` sessions are handed over; the stub holds
every first chat call, so each job is mid-job with its session lock held; then
every worker is SIGKILLed and one `memfleet worker --burst` is started. It
prints when the last session committed and when the burst exited, both from
the burst's start, and what the queue held at its exit. The dead workers' jobs
stay in the queue behind ARQ's in-progress keys (the job timeout + 10 s) unless
something retires them.

Run: .venv/bin/python -m bench.burst_drain [--sessions 24]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import asyncpg
from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from bench.lib.servers import throwaway_servers
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.store.migrate import migrate

DIM = 64
CHAT = "/v1/chat/completions"
WORKERS = 3


def spawn(env: dict[str, str], log: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(  # noqa: S603 - our own worker, from our own arguments
        [sys.executable, "-m", "worker.cli", "worker", "--log-level", "WARNING", *extra],
        env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT)


async def committed(db: asyncpg.Connection) -> dict[str, int]:
    rows = await db.fetch("SELECT user_id, sum(slice_len)::int AS n FROM memory_run"
                          " WHERE outcome = 'committed' GROUP BY user_id")
    return {r["user_id"]: r["n"] for r in rows}


async def main(sessions: int, timeout_s: float) -> None:
    defaults = Settings()
    with throwaway_servers(durable=False) as servers, StubServer(dim=DIM) as stub:
        await migrate(servers.database_url, embed_dim=DIM)
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFLEET_")}
        env.update({"MEMFLEET_DATABASE_URL": servers.database_url,
                    "MEMFLEET_REDIS_URL": servers.redis_url, "MEMFLEET_EMBED_DIM": str(DIM),
                    "MEMFLEET_HOME_DIR": str(servers.root / "home"),
                    "MEMFLEET_LLM_PROVIDER": "openai", "MEMFLEET_LLM_BASE_URL": stub.v1,
                    "MEMFLEET_EMBED_PROVIDER": "openai", "MEMFLEET_EMBED_BASE_URL": stub.v1})
        log = servers.root / "workers.log"
        redis = Redis.from_url(servers.redis_url)
        db = await asyncpg.connect(servers.database_url)
        workers = [spawn(env, log) for _ in range(WORKERS)]
        burst: subprocess.Popen[bytes] | None = None
        try:
            stub.add_fault("hold", count=sessions, sleep_s=3600, path=CHAT)
            for n in range(sessions):
                await schedule_memory_persistence(redis, f"s{n}", f"user{n}", [
                    {"role": "user", "content": f"I use tool{n}."}], timeout_s=30)
            deadline = time.monotonic() + 120
            while sum(r["path"] == CHAT for r in stub.recorded()) < sessions:
                assert time.monotonic() < deadline, "the jobs did not start"
                await asyncio.sleep(0.1)
            for worker in workers:  # every job mid-job, its session lock held
                worker.send_signal(signal.SIGKILL)
                worker.wait()
            stub.control("DELETE", "/_stub/faults")
            stub.release()
            queued = await redis.zcard(defaults.queue_name)
            print(f"{WORKERS} workers SIGKILLed with {sessions} jobs running;"
                  f" {queued} jobs queued", flush=True)
            started = time.monotonic()
            burst = spawn(env, log, "--burst")
            last_commit_s: float | None = None
            while burst.poll() is None:
                assert time.monotonic() - started < timeout_s, "the burst did not end"
                if last_commit_s is None and len(await committed(db)) == sessions:
                    last_commit_s = time.monotonic() - started
                await asyncio.sleep(0.1)
            exited_s = time.monotonic() - started
            done = await committed(db)
            if last_commit_s is None and len(done) == sessions:
                last_commit_s = exited_s
            left = await redis.zcard(defaults.queue_name)
        finally:
            for proc in (*workers, *([burst] if burst else [])):
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            await redis.aclose()
            await db.close()
    once = sum(1 for n in done.values() if n == 1)
    print(f"burst worker (lock TTL {defaults.lock_ttl_s:g} s, recovery pass every"
          f" {defaults.recovery_interval_s:g} s, job timeout {defaults.job_timeout_s:g} s):"
          f" exit code {burst.returncode}")
    print(f"  every session committed after {last_commit_s or float('nan'):.1f} s;"
          f" burst exited after {exited_s:.1f} s"
          f" ({exited_s - (last_commit_s or exited_s):.1f} s after the last commit)")
    print(f"  {once} of {sessions} sessions committed exactly once; {left} jobs left queued")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=24)
    parser.add_argument("--timeout-s", type=float, default=600)
    args = parser.parse_args()
    asyncio.run(main(args.sessions, args.timeout_s))
