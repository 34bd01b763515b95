"""Recovery time after a worker is SIGKILLed at a random moment of a job.

One `memfleet worker` process with the default lock TTL, recovery interval and
job timeout, the `openai` providers against the project's OpenAI-compatible
stub answering every chat call after ``--latency-ms``. Each trial hands a new
session over, SIGKILLs the worker a random 0-2 s later, starts a new worker at
once (as an orchestrator restarts a pod), and times how long after the kill
the session's fact is committed. Kills are told apart by the moment they came:
before the job claimed the session (the new worker takes the job when it has
booted), with the session lock held (the session waits for the lock's TTL and
a recovery pass), or after the commit (nothing to recover, counted apart).

Run: .venv/bin/python -m bench.recovery [--trials 10]   (part of `make chaos`)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import statistics
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
from worker.protocol.keys import SessionRef
from worker.store.migrate import migrate

DIM = 64
CHAT = "/v1/chat/completions"


def spawn(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "worker.cli", "worker", "--log-level",
                             "WARNING"], env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT)


async def stored(db: asyncpg.Connection, user_id: str) -> bool:
    return bool(await db.fetchval(
        "SELECT count(*) FROM memory_fact WHERE user_id = $1 AND superseded_at IS NULL", user_id))


async def trial(redis: Redis, db: asyncpg.Connection, env: dict[str, str], log: Path,
                worker: subprocess.Popen[bytes], n: int, kill_after_s: float,
                timeout_s: float) -> tuple[subprocess.Popen[bytes], str, float | None]:
    """Returns the worker now running, when the kill came ("before the claim",
    "lock held" or "after the commit") and the seconds from the kill to the
    commit (None after the commit)."""
    user = f"user{n}"
    await schedule_memory_persistence(redis, f"s{n}", user, [
        {"role": "user", "content": f"I use tool{n}."}])
    await asyncio.sleep(kill_after_s)
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    killed_at = time.monotonic()
    if await stored(db, user):
        return spawn(env, log), "after the commit", None
    lock = SessionRef(user, f"s{n}").lock_key
    moment = "lock held" if await redis.exists(lock) else "before the claim"
    worker = spawn(env, log)
    while time.monotonic() - killed_at < timeout_s:
        if await stored(db, user):
            return worker, moment, time.monotonic() - killed_at
        await asyncio.sleep(0.1)
    raise AssertionError(f"session s{n} not processed {timeout_s:.0f} s after the kill")


async def main(trials: int, latency_ms: int, seed: int) -> None:
    rng = random.Random(seed)
    defaults = Settings()
    with throwaway_servers(durable=True) as servers, StubServer(dim=DIM) as stub:
        await migrate(servers.database_url, embed_dim=DIM)
        stub.add_fault("latency_ms", latency_ms=latency_ms, count=1_000_000, path=CHAT)
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFLEET_")}
        env.update({"MEMFLEET_DATABASE_URL": servers.database_url,
                    "MEMFLEET_REDIS_URL": servers.redis_url, "MEMFLEET_EMBED_DIM": str(DIM),
                    "MEMFLEET_LLM_PROVIDER": "openai", "MEMFLEET_LLM_BASE_URL": stub.v1,
                    "MEMFLEET_EMBED_PROVIDER": "openai", "MEMFLEET_EMBED_BASE_URL": stub.v1})
        log = servers.root / "workers.log"
        redis = Redis.from_url(servers.redis_url)
        db = await asyncpg.connect(servers.database_url)
        worker = spawn(env, log)
        times: dict[str, list[float]] = {"before the claim": [], "lock held": []}
        after_commit = 0
        try:
            await asyncio.sleep(3)  # the first worker boots
            for n in range(trials):
                worker, moment, took = await trial(redis, db, env, log, worker, n,
                                                   rng.uniform(0.0, 2.0), timeout_s=120)
                if took is None:
                    after_commit += 1
                else:
                    times[moment].append(took)
                print(f"  trial {n + 1}/{trials}: killed {moment}"
                      + ("" if took is None else f", stored {took:.1f} s after the kill"),
                      flush=True)
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=30)
            await redis.aclose()
            await db.close()
    print(f"\nrecovery after a worker SIGKILL (lock TTL {defaults.lock_ttl_s:g} s, recovery"
          f" pass every {defaults.recovery_interval_s:g} s, job timeout"
          f" {defaults.job_timeout_s:g} s, model answers in {latency_ms} ms):")
    print("| killed | kills | stored after the kill, p50 | max |")
    print("| --- | ---: | ---: | ---: |")
    every = times["before the claim"] + times["lock held"]
    for label, took in (*times.items(), ("every interrupted job", every)):
        p50 = f"{statistics.median(took):.1f} s" if took else "-"
        worst = f"{max(took):.1f} s" if took else "-"
        print(f"| {label} | {len(took)} | {p50} | {worst} |")
    print(f"| after the commit (nothing to recover) | {after_commit} | - | - |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--latency-ms", type=int, default=500)
    parser.add_argument("--seed", type=int, default=12)
    args = parser.parse_args()
    asyncio.run(main(args.trials, args.latency_ms, args.seed))
