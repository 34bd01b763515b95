"""Dead letters end to end: a hand-over the model endpoint fails, tried again and
again at the same point, then re-driven once the endpoint is back. Real
PostgreSQL and Redis, the OpenAI-compatible stub, burst workers, and `memfleet
runs` / `memfleet retry` as the operator runs them (subprocesses)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import asyncpg
from redis.asyncio import Redis

from api_stub.llm_stub import CHAT_PATH, StubServer
from tests.helpers import active_texts, drain, runs, user_msg, worker_env
from tests.openai_stub import openai_settings
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings


def memfleet(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "worker.cli", *args],
                          env=worker_env(settings), capture_output=True, text=True, timeout=120)


def listed(settings: Settings, *args: str) -> list[dict[str, Any]]:
    done = memfleet(settings, "runs", "--json", *args)
    assert done.returncode == 0, done.stderr
    letters: list[dict[str, Any]] = json.loads(done.stdout)
    return letters


async def test_a_hand_over_that_failed_twice_and_was_retried_is_one_resolved_dead_letter(
    settings: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer
) -> None:
    # Two tries a job, one HTTP call a try, and a breaker shorter than ARQ's backoff
    # (2 s): each job is tried again by ARQ, then fails.
    llm = openai_settings(settings, stub, max_tries=2, llm_max_attempts=1,
                          llm_breaker_open_s=0.1, llm_breaker_max_s=0.2)
    stub.add_fault("503", count=1_000_000, path=CHAT_PATH)  # the endpoint is down
    await schedule_memory_persistence(redis, "s1", "u1", [user_msg("I live in Porto.")],
                                      queue_name=llm.queue_name)
    counts = await drain(llm)
    assert (counts["failed"], counts["retried"]) == (1, 1), "ARQ's summary counts it failed"

    # Re-driven too early, while the endpoint is still down: the same point fails again.
    assert memfleet(llm, "retry", "--failed").stdout == "u1 s1: queued\n"
    assert (await drain(llm))["failed"] == 1
    rows = [(r["outcome"], r["job_try"]) for r in await runs(db, "s1", "u1")]
    assert rows == [("retry", 1), ("failed", 2), ("retry", 1), ("failed", 2)], rows
    (dead,) = listed(llm)
    assert (dead["status"], dead["outcome"], dead["attempts"]) == ("open", "failed", 4)
    assert "ProviderUnavailable" in dead["error"] and "Porto" not in json.dumps(dead)

    stub.reset()  # the endpoint is back
    assert memfleet(llm, "retry", "--failed").stdout == "u1 s1: queued\n"
    assert (await drain(llm))["failed"] == 0
    assert await active_texts(db, "u1") == ["Lives in Porto"]

    nothing_open = memfleet(llm, "runs")
    assert (nothing_open.returncode, nothing_open.stdout) == (0, "")
    assert nothing_open.stderr.startswith("memfleet: no open dead letter")
    (history,) = listed(llm, "--all")  # one failure, not one per failed run
    assert (history["status"], history["resolved_by"], history["attempts"]) == (
        "resolved", "committed", 4)
    assert history["first_failed_at"] <= history["last_failed_at"] <= history["resolved_at"]
    healthy = memfleet(llm, "retry", "--session", "s1", "--user", "u1")
    assert healthy.returncode == 0 and healthy.stdout.startswith("u1 s1: healthy: ")
