"""A real `memfleet worker` process serves /metrics and /healthz for the dashboard.

The worker runs the openai providers against the LLM stub, so tokens are
counted and faults can be injected. Jobs are steered through every instrument:
a plain commit, a busy session lock (contention, deferred), a provider 500
(an LLM error, a retry), and a user-version compare-and-set lost to a
concurrent write (a refused CAS). Then every metric name the Grafana
dashboard queries, and every label it filters or groups by, must be in the
scraped text; and /readyz turns 503 once PostgreSQL is gone, /healthz staying 200.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

import asyncpg
import httpx
from redis.asyncio import Redis

from api_stub.llm_stub import CHAT_PATH, StubServer
from tests.conftest import TEST_EMBED_DIM
from tests.helpers import WorkerProcesses, lock_key, user_msg, worker_env
from tests.unit.deploy.test_dashboard import (
    dashboard_exprs,
    dashboard_metric_names,
    exported,
    problems,
)
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.embedded import EmbeddedPostgres, free_port

USER = "obs-user"


def metrics_env(settings: Settings, port: int, stub: StubServer) -> dict[str, str]:
    return worker_env(
        settings,
        metrics_port=str(port), metrics_host="127.0.0.1",
        queue_probe_interval_s="0.2",
        llm_provider="openai", llm_base_url=stub.v1,
        embed_provider="openai", embed_base_url=stub.v1,
        extract_model="stub-extract", consolidate_model="stub-consolidate",
        llm_max_attempts="1",  # one HTTP try, so a single 500 is a provider error
        llm_budget_concurrency="100",  # a fleet budget: a 429 pauses, later calls wait
        llm_timeout_s="5",
        summary_every_user_turns="1",  # the summary stage runs too
        lock_ttl_s="5", busy_defer_s="0.2", job_timeout_s="30",
    )


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout_s: float,
                     log_dir: Path | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}\n{worker_logs(log_dir)[-4000:]}")


def worker_logs(log_dir: Path | None) -> str:
    return "".join(p.read_text() for p in sorted(log_dir.glob("*.log"))) if log_dir else ""


async def committed(conn: asyncpg.Connection, session: str) -> bool:
    row = await conn.fetchval(
        "SELECT count(*) FROM memory_run WHERE session_id = $1 AND outcome = 'committed'", session)
    return bool(row)


async def hand_over(redis: Redis, settings: Settings, session: str, lines: list[str]) -> None:
    await schedule_memory_persistence(redis, session, USER, [user_msg(t) for t in lines],
                                      queue_name=settings.queue_name)


def consolidation_requests(stub: StubServer) -> int:
    count = 0
    for record in stub.state.recorded():
        if record["path"] != CHAT_PATH:
            continue
        document = json.loads(record["body"]["messages"][-1]["content"])
        count += document.get("task") == "memory_consolidation"
    return count


async def test_a_worker_serves_what_the_dashboard_queries_and_healthz(
    settings: Settings, redis: Redis, pg_server: EmbeddedPostgres, database_url: str,
    tmp_path: Path,
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with StubServer(dim=TEST_EMBED_DIM) as stub:
        workers = WorkerProcesses(metrics_env(settings, port, stub), tmp_path, 1)
        conn = await asyncpg.connect(database_url)
        try:
            async with httpx.AsyncClient(base_url=base, timeout=5) as http:

                async def healthy() -> bool:
                    try:
                        return (await http.get("/healthz")).status_code == 200
                    except httpx.TransportError:
                        return False

                await eventually(healthy, "/healthz to answer 200", 30, tmp_path)

                # A commit; a session whose lock another worker holds (it expires in 1.5 s);
                # a provider 500 (one HTTP try: the job is retried after 2 s).
                await redis.set(lock_key(USER, "obs-locked"), "someone-else", px=1500)
                stub.add_fault("500", path=CHAT_PATH, task="fact_extraction")
                await hand_over(redis, settings, "obs-error", ["I use Postgres."])
                # The fault takes the next extraction: let it be this session's.
                await eventually(partial(_chat_seen, stub), "the faulted request", 10, tmp_path)
                await hand_over(redis, settings, "obs-plain", ["I live in Berlin."])
                await hand_over(redis, settings, "obs-locked", ["I like hiking."])
                for session in ("obs-plain", "obs-locked", "obs-error"):
                    await eventually(partial(committed, conn, session), f"{session} to commit",
                                     20, tmp_path)

                # Lose the user compare-and-set: while the consolidation call is held,
                # another writer bumps the user's version; consolidation re-runs and commits.
                before = consolidation_requests(stub)
                stub.add_fault("hold", sleep_s=60, task="memory_consolidation")
                await hand_over(redis, settings, "obs-cas", ["I like chess."])

                async def consolidating() -> bool:
                    return consolidation_requests(stub) > before

                await eventually(consolidating, "the slowed consolidation", 10, tmp_path)
                await conn.execute(
                    "UPDATE user_memory_state SET version = version + 1 WHERE user_id = $1", USER)
                stub.release()
                await eventually(partial(committed, conn, "obs-cas"), "obs-cas to commit", 20,
                                 tmp_path)

                # A 429 with Retry-After: the fleet pauses, and the job's retry waits it out.
                stub.add_fault("429", path=CHAT_PATH, task="fact_extraction", retry_after=4)
                await hand_over(redis, settings, "obs-paused", ["I use Zig."])
                await eventually(partial(committed, conn, "obs-paused"), "obs-paused to commit",
                                 30, tmp_path)

                response = await http.get("/metrics")
                assert response.status_code == 200
                assert response.headers["content-type"].startswith("text/plain")
                known = exported(response.text)

                # Every metric and label the dashboard uses is in a real scrape.
                # (The fleet's gauges come from the exporter: test_fleet_signal.py.)
                missing = dashboard_metric_names("memfleet-worker") - set(known) - {"up"}
                assert missing == set(), response.text
                errors = {e: problems(e, known, values=False) for e in dashboard_exprs()
                          if 'job="memfleet-exporter"' not in e}
                assert {e: p for e, p in errors.items() if p} == {}
                # The steered events were counted, with the values the panels split by.
                assert {"committed", "deferred", "retry"} <= known["memfleet_jobs_total"]["outcome"]
                assert known["memfleet_llm_errors_total"]["kind"] == {"server_error", "rate_limit"}
                assert known["memfleet_cas_refused_total"]["fence"] == {"user"}
                assert "memfleet_lock_contention_total" in known
                assert known["memfleet_llm_tokens_total"]["direction"] == {"input", "output"}
                assert set(known["memfleet_stage_duration_seconds_count"]["stage"]) == {
                    "lock", "cursor", "extract", "embed", "consolidate", "persist", "summary"}
                assert "ADD" in known["memfleet_decisions_total"]["event"]
                assert "memfleet_queue_depth" not in known, "the exporter's, once per fleet"
                assert "memfleet_handover_lag_seconds_bucket" in known
                assert known["memfleet_llm_budget_waits_total"]["reason"] == {"paused"}
                assert "memfleet_llm_budget_pauses_total" in known

                health = await http.get("/healthz")
                assert (health.status_code, health.json()) == (200, {"status": "ok"})
                ready = await http.get("/readyz")
                assert (ready.status_code, ready.json()) == (200, {"status": "ok"})
                assert (await http.get("/nowhere")).status_code == 404

                # PostgreSQL gone (the test database dropped under the worker): not ready,
                # and still alive.
                await conn.close()
                admin = await asyncpg.connect(pg_server.url)
                try:
                    name = database_url.rsplit("/", 1)[1]
                    await admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
                finally:
                    await admin.close()
                async def unready() -> bool:
                    return (await http.get("/readyz")).status_code == 503

                await eventually(unready, "/readyz to answer 503", 10, tmp_path)
                assert (await http.get("/readyz")).json() == {
                    "status": "unavailable", "down": ["PostgreSQL"]}
                assert (await http.get("/healthz")).status_code == 200
                # /metrics does not depend on the database.
                assert (await http.get("/metrics")).status_code == 200
        finally:
            if not conn.is_closed():
                await conn.close()
            workers.stop()


async def _chat_seen(stub: StubServer) -> bool:
    return any(r["path"] == CHAT_PATH for r in stub.state.recorded())
