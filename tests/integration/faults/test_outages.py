"""Redis and PostgreSQL crash and come back: no hand-over is lost, workers carry on.

Each test runs servers of its own, so it can SIGKILL and restart them.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncpg
import httpx
import pytest
from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from tests.conftest import TEST_EMBED_DIM
from tests.helpers import WorkerProcesses, active_texts, drain, eventually, user_msg, worker_env
from tests.tcp_proxy import SwitchableProxy
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.embedded import EmbeddedPostgres, EmbeddedRedis, free_port
from worker.errors import HandoverUnavailable
from worker.store.migrate import migrate

LANGUAGES = ["Zig", "Go", "Rust", "Elm", "Nim", "Lua"]




def has_facts(url: str, user_id: str, expected: list[str]) -> Callable[[], Awaitable[bool]]:
    """A check for ``eventually``: the user's active facts at ``url`` are ``expected``."""
    async def check() -> bool:
        conn = await asyncpg.connect(url)
        try:
            return await active_texts(conn, user_id) == expected
        finally:
            await conn.close()
    return check


def logged(log_dir: Path, *words: str, times: int) -> Callable[[], Awaitable[bool]]:
    """A check for ``eventually``: ``times`` lines of the worker logs in ``log_dir``
    (tests.helpers.WorkerProcesses) hold every one of ``words``."""
    def count() -> int:
        lines = [line for log in log_dir.glob("worker-*.log")
                 for line in log.read_text(errors="replace").splitlines()]
        return sum(all(w in line for w in words) for line in lines)

    async def check() -> bool:
        return await asyncio.to_thread(count) >= times
    return check


async def test_handovers_survive_a_redis_crash_with_its_append_only_file(
    settings: Settings, db: asyncpg.Connection, aof_redis: EmbeddedRedis
) -> None:
    settings = settings.model_copy(update={"redis_url": aof_redis.url})
    client = Redis.from_url(aof_redis.url)
    try:
        for i, language in enumerate(LANGUAGES[:5]):
            await schedule_memory_persistence(client, f"s{i}", "u1",
                                              [user_msg(f"I use {language}.")],
                                              queue_name=settings.queue_name)
        await asyncio.to_thread(aof_redis.kill)  # SIGKILL: no time to save anything
        started = time.monotonic()
        with pytest.raises(HandoverUnavailable) as down:
            await schedule_memory_persistence(client, "s9", "u1", [user_msg("I use Odin.")],
                                              queue_name=settings.queue_name, timeout_s=0.5)
        assert time.monotonic() - started < 2, "an outage is reported, never waited out"
        # It names which Redis (host:port, as the TypeScript client does) and never the
        # session, the user or the text.
        address = (settings.redis_url or "").split("@")[-1].split("//")[-1].split("/")[0]
        said = str(down.value)
        assert said.startswith(f"Redis at {address} did not take the hand-over: "), said
        assert not any(secret in said for secret in ("s9", "u1", "Odin")), said
        await asyncio.to_thread(aof_redis.start)
        assert aof_redis.url == settings.redis_url
        # The same client, reconnecting by itself.
        await schedule_memory_persistence(client, "s5", "u1", [user_msg("I use Lua.")],
                                          queue_name=settings.queue_name)
    finally:
        await client.aclose()
    await drain(settings)
    assert sorted(await active_texts(db, "u1")) == sorted(f"Uses {x}" for x in LANGUAGES)


async def test_a_worker_carries_on_after_redis_restarts_under_it(
    settings: Settings, db: asyncpg.Connection, aof_redis: EmbeddedRedis, tmp_path: Path
) -> None:
    settings = settings.model_copy(update={"redis_url": aof_redis.url})
    port = free_port()
    workers = WorkerProcesses(worker_env(settings, metrics_port=str(port)), tmp_path, 1)
    client = Redis.from_url(aof_redis.url)
    health = f"http://127.0.0.1:{port}/readyz"

    async def health_is(status: int) -> bool:
        try:
            async with httpx.AsyncClient(timeout=5) as http:
                return (await http.get(health)).status_code == status
        except httpx.HTTPError:
            return False

    try:
        await schedule_memory_persistence(client, "s1", "u1", [user_msg("I use Zig.")],
                                          queue_name=settings.queue_name)

        async def stored(count: int) -> bool:
            return len(await active_texts(db, "u1")) == count

        await eventually(lambda: stored(1), 30)
        assert await health_is(200)
        await asyncio.to_thread(aof_redis.kill)
        await eventually(lambda: health_is(503), 10)  # not ready while Redis is gone
        await asyncio.to_thread(aof_redis.start)
        await eventually(lambda: health_is(200), 30)
        await schedule_memory_persistence(client, "s2", "u1", [user_msg("I use Go.")],
                                          queue_name=settings.queue_name)
        await eventually(lambda: stored(2), 30)
        assert workers.procs[0].poll() is None, "the same worker process did it"
    finally:
        await client.aclose()
        workers.stop()
    assert sorted(await active_texts(db, "u1")) == ["Uses Go", "Uses Zig"]


async def test_a_postgresql_crash_mid_job_loses_nothing_and_writes_nothing_twice(
    settings: Settings, redis: Redis, tmp_path: Path, own_postgres: EmbeddedPostgres
) -> None:
    pg = own_postgres
    settings = settings.model_copy(update={"database_url": pg.url})
    with StubServer(dim=TEST_EMBED_DIM) as stub:
        env = worker_env(settings, llm_provider="openai", llm_base_url=stub.v1,
                         embed_provider="openai", embed_base_url=stub.v1)
        # The model's answer is held until the database is gone: the kill lands mid-job
        # however slow the machine.
        stub.add_fault("hold", sleep_s=120, count=1, path="/v1/chat/completions")
        workers = WorkerProcesses(env, tmp_path, 1)
        try:
            await schedule_memory_persistence(redis, "s1", "u1", [user_msg("I use Zig.")],
                                              queue_name=settings.queue_name)

            async def in_flight() -> bool:
                return bool(stub.recorded())

            await eventually(in_flight, 30)
            await asyncio.to_thread(pg.kill)  # SIGKILL while the job waits on the model
            stub.release()
            # The job's next query fails: it is sent back to be retried later.
            await eventually(logged(tmp_path, "job did not complete", "retry", times=1), 60)
            await asyncio.to_thread(pg.start)  # crash recovery
            await eventually(has_facts(pg.url, "u1", ["Uses Zig"]), 60)
            assert workers.procs[0].poll() is None, "the worker rode the outage out"
            extractions = [r for r in stub.recorded()
                           if "fact_extraction" in str(r["body"].get("messages"))]
            assert len(extractions) >= 2, "the failed run was tried again from the start"
        finally:
            workers.stop()
    conn = await asyncpg.connect(pg.url)
    try:
        assert await conn.fetchval("SELECT count(*) FROM memory_fact") == 1
        outcomes = [r["outcome"] for r in await conn.fetch(
            "SELECT outcome FROM memory_run ORDER BY id")]
        assert outcomes[-1] == "committed" and outcomes.count("committed") == 1
    finally:
        await conn.close()


async def test_a_postgresql_outage_longer_than_every_try_loses_nothing(
    settings: Settings, redis: Redis, tmp_path: Path, own_postgres: EmbeddedPostgres
) -> None:
    # Two tries, 2 s apart: a job would give up within seconds. A database away for
    # longer must not cost the session its messages: the worker sees it away and
    # takes no job until it is back (worker.fleet.server_watch), so no try is spent;
    # a job it did take would be tried again every outage_wait_s (the retry policy).
    pg = own_postgres
    settings = settings.model_copy(update={"database_url": pg.url})
    workers = WorkerProcesses(worker_env(settings, max_tries="2", outage_wait_s="1"),
                              tmp_path, 1)
    try:
        await schedule_memory_persistence(redis, "warm", "w", [user_msg("I use Go.")],
                                          queue_name=settings.queue_name)
        await eventually(has_facts(pg.url, "w", ["Uses Go"]), 60)  # the worker is up
        await asyncio.to_thread(pg.kill)
        await schedule_memory_persistence(redis, "s1", "u1", [user_msg("I use Zig.")],
                                          queue_name=settings.queue_name)
        await eventually(logged(tmp_path, "server away", "PostgreSQL", times=1), 30)
        await asyncio.sleep(6)  # longer than both tries and their backoff
        assert workers.procs[0].poll() is None, "the worker rode the outage out"
        await asyncio.to_thread(pg.start)
        await eventually(has_facts(pg.url, "u1", ["Uses Zig"]), 60)
        conn = await asyncpg.connect(pg.url)
        try:
            outcomes = [r["outcome"] for r in await conn.fetch(
                "SELECT outcome FROM memory_run WHERE session_id = 's1' ORDER BY id")]
        finally:
            await conn.close()
        assert outcomes == ["committed"], "no try was spent during the outage"
    finally:
        workers.stop()


async def test_a_postgresql_failover_mid_job_loses_nothing_and_writes_nothing_twice(
    settings: Settings, redis: Redis, tmp_path: Path
) -> None:
    # A primary with a synchronous streaming standby, behind a stable address. The
    # primary is SIGKILLed while a job waits on the model, the standby promoted and
    # the address switched to it: the job's commit reaches the new primary, what
    # the old one acknowledged is there, nothing is written twice.
    primary = EmbeddedPostgres(tmp_path / "primary")
    standby = EmbeddedPostgres(tmp_path / "standby")
    await asyncio.to_thread(primary.start)
    await migrate(primary.url, embed_dim=TEST_EMBED_DIM)
    await asyncio.to_thread(standby.clone_standby_of, primary)
    await asyncio.to_thread(standby.start)
    conn = await asyncpg.connect(primary.url)
    try:
        await conn.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
        await conn.execute("SELECT pg_reload_conf()")

        async def synchronous() -> bool:
            return await conn.fetchval(
                "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'") == 1

        await eventually(synchronous, 30)
    finally:
        await conn.close()
    proxy = SwitchableProxy(primary.port)
    await proxy.start()
    address = f"postgresql://postgres@127.0.0.1:{proxy.port}/postgres"
    settings = settings.model_copy(update={"database_url": address})

    with StubServer(dim=TEST_EMBED_DIM) as stub:
        env = worker_env(settings, llm_provider="openai", llm_base_url=stub.v1,
                         embed_provider="openai", embed_base_url=stub.v1)
        workers = WorkerProcesses(env, tmp_path, 1)
        try:
            await schedule_memory_persistence(redis, "s0", "u0", [user_msg("I use Go.")],
                                              queue_name=settings.queue_name)
            await eventually(has_facts(address, "u0", ["Uses Go"]), 60)
            # s1's extraction is held in flight through the kill, the promotion and
            # the switch, however slow the machine; its next query reaches the new primary.
            stub.add_fault("hold", sleep_s=120, count=1, path="/v1/chat/completions")
            s0_calls = len(stub.recorded())
            await schedule_memory_persistence(redis, "s1", "u1", [user_msg("I use Zig.")],
                                              queue_name=settings.queue_name)

            async def in_flight() -> bool:
                return len(stub.recorded()) > s0_calls  # s1's extraction, held

            await eventually(in_flight, 30)
            await asyncio.to_thread(primary.kill)
            conn = await asyncpg.connect(standby.url)
            try:
                assert await conn.fetchval("SELECT pg_promote()")
            finally:
                await conn.close()
            proxy.switch(standby.port)
            stub.release()
            await eventually(has_facts(address, "u1", ["Uses Zig"]), 60)
            await schedule_memory_persistence(redis, "s2", "u2", [user_msg("I use Elm.")],
                                              queue_name=settings.queue_name)
            await eventually(has_facts(address, "u2", ["Uses Elm"]), 60)
            assert workers.procs[0].poll() is None, "the worker rode the failover out"
        finally:
            workers.stop()
            await proxy.close()
    conn = await asyncpg.connect(standby.url)
    try:
        assert await conn.fetchval("SELECT count(*) FROM memory_fact") == 3
        assert await conn.fetchval(
            "SELECT count(*) FROM memory_run WHERE outcome = 'committed'") == 3
    finally:
        await conn.close()
        await asyncio.to_thread(standby.stop)
        await asyncio.to_thread(primary.stop)


# `make chaos` runs the model outage for two minutes with the default breaker and
# tries; `make test` for a few seconds with a faster breaker.
MODEL_OUTAGE_S = float(os.environ.get("MEMFLEET_MODEL_OUTAGE_S", "8"))
LONG_OUTAGE = MODEL_OUTAGE_S > 30


def probe_windows(outage_s: float, open_s: float, max_s: float) -> int:
    """How many breaker periods (open_s, doubling up to max_s) start within the outage."""
    windows, elapsed, period = 0, 0.0, open_s
    while elapsed < outage_s:
        windows += 1
        elapsed += period
        period = min(2 * period, max_s)
    return windows


async def test_a_model_outage_pauses_the_whole_fleet_and_loses_nothing(
    settings: Settings, redis: Redis, db: asyncpg.Connection, tmp_path: Path
) -> None:
    chat = "/v1/chat/completions"
    breaker = {} if LONG_OUTAGE else {"llm_breaker_open_s": "1", "llm_breaker_max_s": "4",
                                      "max_tries": "50", "busy_defer_s": "0.1"}
    defaults = Settings()
    open_s = float(breaker.get("llm_breaker_open_s", defaults.llm_breaker_open_s))
    max_s = float(breaker.get("llm_breaker_max_s", defaults.llm_breaker_max_s))
    with StubServer(dim=TEST_EMBED_DIM) as stub:
        env = worker_env(settings, llm_provider="openai", llm_base_url=stub.v1,
                         embed_provider="openai", embed_base_url=stub.v1,
                         llm_max_attempts="1", **breaker)
        stub.add_fault("503", count=10_000_000, path=chat)  # the endpoint is down
        workers = WorkerProcesses(env, tmp_path, 2)
        try:
            # The outage is timed from when both workers poll, not from their spawn.
            await workers.up(redis, settings.queue_name)
            for i, language in enumerate(LANGUAGES):
                await schedule_memory_persistence(redis, f"s{i}", f"u{i}",
                                                  [user_msg(f"I use {language}.")],
                                                  queue_name=settings.queue_name)
            await asyncio.sleep(MODEL_OUTAGE_S)
            calls = sorted(r["at"] for r in stub.recorded() if r["path"] == chat)
            stub.reset()  # the endpoint is back
            back_at = time.monotonic()

            async def all_stored() -> bool:
                count = await db.fetchval(
                    "SELECT count(*) FROM memory_fact WHERE superseded_at IS NULL")
                return bool(count == len(LANGUAGES))

            await eventually(all_stored, 60 + max_s)
            caught_up_s = time.monotonic() - back_at
        finally:
            workers.stop()
    # Every job in flight when the endpoint went down makes its call; after the first
    # failure, the whole fleet sends one probe per open period (doubling up to the
    # max) instead of each job retrying on its own backoff.
    after_first_second = [at for at in calls if at > calls[0] + 1.0]
    budget = probe_windows(MODEL_OUTAGE_S, open_s, max_s) + 1
    assert calls and len(after_first_second) <= budget, (len(calls), after_first_second)
    for i, language in enumerate(LANGUAGES):
        assert await active_texts(db, f"u{i}") == [f"Uses {language}"]
    outcomes = await db.fetch("SELECT outcome, count(*) AS n FROM memory_run GROUP BY 1")
    assert "failed" not in {r["outcome"] for r in outcomes}
    if LONG_OUTAGE:
        print(f"\nmodel endpoint down {MODEL_OUTAGE_S:.0f} s (breaker {open_s:g} s doubling to"
              f" {max_s:g} s): {len(calls)} model calls in all, {len(after_first_second)} after"
              f" the first second; every session stored {caught_up_s:.1f} s after the endpoint"
              f" came back; runs: {dict((r['outcome'], r['n']) for r in outcomes)}")
