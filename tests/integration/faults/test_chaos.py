"""Chaos: every fault at once, and still every message exactly once.

Three worker processes on a Redis with its append-only file and a PostgreSQL
of this test's own, talking to the OpenAI-compatible stub. While sessions are
handed over turn by turn: workers are SIGKILLed and restarted, Redis and
PostgreSQL are SIGKILLed and restarted, the model endpoint is down for a few
seconds, and faulty answers (429, 500, timeouts, broken JSON, truncated JSON,
unknown ids) are mixed in; every third session's chat server replaces its
history with a summary halfway (tests/fleet_scenario.py). Afterwards every
message counted in exactly one committed slice, every fact is stored once, the
change of mind in every session is applied, every chain is consistent, and no
session is stuck.

`make test` runs a short version; `make chaos` a long one
(MEMFLEET_CHAOS_SESSIONS=200) and prints its figures.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter
from pathlib import Path

import asyncpg
import pytest
from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from tests.conftest import TEST_EMBED_DIM
from tests.fleet_scenario import (
    SUMMARY_TURN,
    assert_exactly_once,
    hand_over_turn_by_turn,
    wait_for_workers,
    wait_until_done,
)
from tests.helpers import WorkerProcesses, worker_env
from worker.embedded import EmbeddedPostgres, EmbeddedRedis
from worker.store.migrate import migrate

SESSIONS = int(os.environ.get("MEMFLEET_CHAOS_SESSIONS", "30"))
CHAT = "/v1/chat/completions"
ANSWER_FAULTS = ["429", "500", "timeout", "schema_break", "truncated", "unknown_ids"]


@pytest.mark.slow
async def test_every_message_exactly_once_through_every_fault_at_once(
    tmp_path: Path, settings: object
) -> None:
    redis_server = EmbeddedRedis(tmp_path / "redis", appendonly=True)
    pg = EmbeddedPostgres(tmp_path / "pg")
    await asyncio.to_thread(redis_server.start)
    await asyncio.to_thread(pg.start)
    await migrate(pg.url, embed_dim=TEST_EMBED_DIM)
    faults: Counter[str] = Counter()
    rng = random.Random(23)
    with StubServer(dim=TEST_EMBED_DIM) as stub:
        base = settings.model_copy(update={  # type: ignore[attr-defined]
            "database_url": pg.url, "redis_url": redis_server.url})
        env = worker_env(
            base, llm_provider="openai", llm_base_url=stub.v1, embed_provider="openai",
            embed_base_url=stub.v1, lock_ttl_s="3", recovery_interval_s="0.5",
            busy_defer_s="0.2", max_tries="50", llm_timeout_s="1", llm_max_attempts="2",
            llm_breaker_open_s="0.5", llm_breaker_max_s="2",
        )
        fleet = WorkerProcesses(env, tmp_path, count=3)
        redis = Redis.from_url(redis_server.url)
        db: asyncpg.Connection | None = None
        injecting: asyncio.Task[None] | None = None
        try:
            await wait_for_workers(redis, workers=3)
            handing_over = asyncio.create_task(
                hand_over_turn_by_turn(redis, 7, SESSIONS, pause_s=(1.4, 2.0)))
            started = time.monotonic()

            async def inject_answer_faults() -> None:
                # About one model request in five (chat or embeddings) is followed by
                # a faulty chat answer.
                seen = 0
                while True:
                    calls = len(stub.recorded())
                    for _ in range(calls - seen):
                        if rng.random() < 0.2:
                            mode = rng.choice(ANSWER_FAULTS)
                            stub.add_fault(mode, path=CHAT, sleep_s=2)
                            faults[f"answer {mode}"] += 1
                    seen = calls
                    await asyncio.sleep(0.05)

            injecting = asyncio.create_task(inject_answer_faults())

            async def server_fault(what: str) -> None:
                faults[what] += 1
                if what == "redis":
                    await asyncio.to_thread(redis_server.kill)
                    await asyncio.sleep(1)
                    await asyncio.to_thread(redis_server.start)
                elif what == "postgres":
                    await asyncio.to_thread(pg.kill)
                    await asyncio.sleep(1)
                    await asyncio.to_thread(pg.start)
                else:
                    stub.add_fault("503", count=1_000_000, path=CHAT)
                    await asyncio.sleep(3)
                    stub.control("DELETE", "/_stub/faults")

            events = [(1.0, "redis"), (2.5, "postgres"), (4.0, "llm down")]
            next_kill = started + rng.uniform(0.5, 1.5)
            while not handing_over.done():
                now = time.monotonic()
                if events and now - started >= events[0][0]:
                    await server_fault(events.pop(0)[1])
                if now >= next_kill:
                    fleet.kill_and_restart(rng.randrange(3))
                    faults["worker SIGKILL"] += 1
                    next_kill = now + rng.uniform(0.7, 1.5)
                await asyncio.sleep(0.3)
            handed = await handing_over
            # On a loaded machine the restarts can outlast the hand-overs: the faults not
            # yet made happen now, while the backlog drains, so every run has each once.
            for _, what in events:
                await server_fault(what)
            injecting.cancel()
            stub.control("DELETE", "/_stub/faults")
            fleet.kill_and_restart(rng.randrange(3))  # once more, while the backlog drains
            faults["worker SIGKILL"] += 1
            db = await asyncpg.connect(pg.url)
            drained = await wait_until_done(db, redis, 240, SESSIONS)
            await assert_exactly_once(db, SESSIONS)
            stats = await db.fetchrow(
                "SELECT count(*) AS runs, count(*) FILTER (WHERE outcome = 'committed')"
                " AS committed, count(*) FILTER (WHERE outcome = 'fenced') AS fenced,"
                " count(*) FILTER (WHERE job_try > 1) AS reruns,"
                " count(*) FILTER (WHERE outcome IN ('failed', 'skipped', 'invalid', 'error'))"
                " AS given_up, coalesce(sum(rejected), 0) AS rejected FROM memory_run")
            print(f"\nchaos: {SESSIONS} sessions x 5 turns (every third summarised at turn"
                  f" {SUMMARY_TURN}), {handed.taken} hand-overs taken; hand-overs refused"
                  f" while Redis was down and handed over again: {handed.refused};"
                  f" unfinished lists kept when a summary replaced them: {handed.kept_older};"
                  f" every session caught up {drained.caught_up_s:.1f} s and no job left"
                  f" waiting {drained.drained_s:.1f} s after"
                  f" the last hand-over; faults: {dict(sorted(faults.items()))};"
                  f" runs: {dict(stats)}; lost 0, doubled 0 (checked)")
            figures = f"faults {dict(faults)}, runs {dict(stats)}"
            assert faults["redis"] == faults["postgres"] == faults["llm down"] == 1, figures
            assert faults["worker SIGKILL"] >= 2, figures
            assert sum(n for what, n in faults.items() if what.startswith("answer ")) > 0, (
                figures)
            # Every hand-over was taken in the end, each once (a refused one again).
            assert handed.taken == handed.planned, (handed, figures)
            # Every session committed; with 50 tries and faults of one answer each,
            # nothing was given up (a skipped slice would also break exactly-once).
            assert stats["committed"] >= SESSIONS and stats["given_up"] == 0, figures
        finally:
            if injecting is not None:
                injecting.cancel()
            fleet.stop()
            await redis.aclose()
            if db is not None:
                await db.close()
            await asyncio.to_thread(redis_server.stop)
            await asyncio.to_thread(pg.stop)
