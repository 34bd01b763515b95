"""A worker outlives an outage of Redis or PostgreSQL, however long, and says so twice.

A real `memfleet worker` process (tests.helpers.WorkerProcesses) sees the
server it depends on SIGKILLed for longer than its Redis retries would once
have allowed (MEMFLEET_REDIS_RETRIES=2: a few seconds), then restarted on the
same port with its data. The worker must still run, have logged one line when
it lost the server and one when it had it back (no traceback), have answered
503 on /readyz meanwhile (and 200 on /healthz, its liveness), and commit the
next hand-over on its own.

`make test` keeps each outage at OUTAGE_S (15 s); `make chaos` runs the same
tests with MEMFLEET_OUTAGE_S=600 (ten minutes).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import asyncpg
import httpx
import pytest
from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from tests.conftest import TEST_EMBED_DIM
from tests.helpers import WorkerProcesses, active_texts, drain, eventually, user_msg, worker_env
from tests.openai_stub import openai_settings
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.embedded import EmbeddedPostgres, EmbeddedRedis, free_port

OUTAGE_S = float(os.environ.get("MEMFLEET_OUTAGE_S", "15"))
# A Redis command gives up after two tries: the code before this test died within seconds.
RETRIES = "2"
# The outage, plus the servers' start, the worker's and the hand-overs around it.
pytestmark = pytest.mark.timeout(OUTAGE_S + 240)




class Probes:
    """The worker's /healthz and /readyz, and what /readyz said during the outage."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.not_ready: list[dict[str, object]] = []
        self.live_failures = 0

    async def status(self, path: str) -> tuple[int, dict[str, object]]:
        try:
            async with httpx.AsyncClient(timeout=5) as http:
                answer = await http.get(self.base + path)
                return answer.status_code, json.loads(answer.content or b"{}")
        except (httpx.HTTPError, ValueError):
            return 0, {}

    async def ready(self) -> bool:
        return (await self.status("/readyz"))[0] == 200

    async def watch_outage(self, outage_s: float, proc_alive: object) -> None:
        """Through the outage: /readyz not ready, /healthz alive, the process running."""
        deadline = time.monotonic() + outage_s
        while time.monotonic() < deadline:
            code, body = await self.status("/readyz")
            if code == 503:
                self.not_ready.append(body)
            if (await self.status("/healthz"))[0] != 200:
                self.live_failures += 1
            assert callable(proc_alive) and proc_alive(), "the worker exited during the outage"
            await asyncio.sleep(min(2.0, max(0.1, deadline - time.monotonic())))


def worker_log(log_dir: Path) -> str:
    return "\n".join(log.read_text(errors="replace") for log in log_dir.glob("worker-*.log"))


def lines_with(text: str, *words: str) -> list[str]:
    return [line for line in text.splitlines() if all(w in line for w in words)]


def check_two_lines(text: str, server: str) -> None:
    """One line when the worker lost ``server``, one when it had it back, nothing in
    between; no traceback."""
    assert "Traceback" not in text, text[-3000:]
    away = lines_with(text, '"server away"', f'"{server}"')
    back = lines_with(text, '"server back"', f'"{server}"')
    assert len(away) == 1 and len(back) == 1, text[-3000:]
    lines = text.splitlines()
    between = lines[lines.index(away[0]) + 1:lines.index(back[0])]
    assert between == [], "nothing else is logged for the outage"
    for line in away + back:
        record = json.loads(line)
        assert "@" not in str(record.get("address")), "no URL credentials in the address"


async def stored(url: str, user_id: str, expected: list[str]) -> bool:
    conn = await asyncpg.connect(url)
    try:
        return await active_texts(conn, user_id) == expected
    finally:
        await conn.close()


async def test_a_worker_outlives_a_redis_outage_longer_than_its_retries(
    settings: Settings, db: asyncpg.Connection, aof_redis: EmbeddedRedis, tmp_path: Path
) -> None:
    settings = settings.model_copy(update={"redis_url": aof_redis.url})
    port = free_port()
    workers = WorkerProcesses(worker_env(settings, metrics_port=str(port),
                                         redis_retries=RETRIES), tmp_path, 1)
    probes = Probes(port)
    client = Redis.from_url(aof_redis.url)
    proc = workers.procs[0]
    try:
        await schedule_memory_persistence(client, "s1", "u1", [user_msg("I use Zig.")],
                                          queue_name=settings.queue_name)

        async def first() -> bool:
            return await active_texts(db, "u1") == ["Uses Zig"]

        await eventually(first, 30)
        assert await probes.ready()
        await asyncio.to_thread(aof_redis.kill)  # SIGKILL; the append-only file keeps the data
        await probes.watch_outage(OUTAGE_S, lambda: proc.poll() is None)
        await asyncio.to_thread(aof_redis.start)
        assert aof_redis.url == settings.redis_url, "restarted on the same port"
        await eventually(probes.ready, 30)
        await schedule_memory_persistence(client, "s2", "u1", [user_msg("I use Go.")],
                                          queue_name=settings.queue_name)

        async def second() -> bool:
            return sorted(await active_texts(db, "u1")) == ["Uses Go", "Uses Zig"]

        await eventually(second, 60)
        assert proc.poll() is None, "the same worker process committed it"
    finally:
        await client.aclose()
        workers.stop()
    assert probes.not_ready, "/readyz said not ready during the outage"
    assert all(body.get("down") == ["Redis"] for body in probes.not_ready), probes.not_ready
    assert probes.live_failures == 0, "/healthz (liveness) held through the outage"
    check_two_lines(worker_log(tmp_path), "Redis")
    if OUTAGE_S > 30:
        print(f"\nRedis SIGKILLed for {OUTAGE_S:.0f} s: the worker ran through it; its log:\n"
              + "\n".join(lines_with(worker_log(tmp_path), '"server ')))


async def test_a_worker_outlives_a_postgresql_outage(
    settings: Settings, redis: Redis, tmp_path: Path, own_postgres: EmbeddedPostgres
) -> None:
    pg = own_postgres
    settings = settings.model_copy(update={"database_url": pg.url})
    port = free_port()
    workers = WorkerProcesses(worker_env(settings, metrics_port=str(port),
                                         redis_retries=RETRIES), tmp_path, 1)
    probes = Probes(port)
    proc = workers.procs[0]
    try:
        await schedule_memory_persistence(redis, "s1", "u1", [user_msg("I use Zig.")],
                                          queue_name=settings.queue_name)
        await eventually(lambda: stored(pg.url, "u1", ["Uses Zig"]), 30)
        assert await probes.ready()
        await asyncio.to_thread(pg.kill)
        # Handed over while the database is away: it waits for it, and is not failed.
        await schedule_memory_persistence(redis, "s2", "u2", [user_msg("I use Elm.")],
                                          queue_name=settings.queue_name)
        await probes.watch_outage(OUTAGE_S, lambda: proc.poll() is None)
        await asyncio.to_thread(pg.start)  # crash recovery, same port, same data
        await eventually(probes.ready, 30)
        await schedule_memory_persistence(redis, "s3", "u3", [user_msg("I use Go.")],
                                          queue_name=settings.queue_name)
        await eventually(lambda: stored(pg.url, "u3", ["Uses Go"]), 60)
        await eventually(lambda: stored(pg.url, "u2", ["Uses Elm"]), 60)
        assert proc.poll() is None, "the same worker process committed them"
    finally:
        workers.stop()
    conn = await asyncpg.connect(pg.url)
    try:
        outcomes = [r["outcome"] for r in await conn.fetch("SELECT outcome FROM memory_run")]
    finally:
        await conn.close()
    assert "failed" not in outcomes, outcomes
    assert probes.not_ready, "/readyz said not ready during the outage"
    assert all(body.get("down") == ["PostgreSQL"] for body in probes.not_ready), probes.not_ready
    assert probes.live_failures == 0, "/healthz (liveness) held through the outage"
    check_two_lines(worker_log(tmp_path), "PostgreSQL")
    if OUTAGE_S > 30:
        print(f"\nPostgreSQL SIGKILLed for {OUTAGE_S:.0f} s: the worker ran through it; its "
              "log:\n" + "\n".join(lines_with(worker_log(tmp_path), '"server ')))


async def test_a_burst_worker_waits_a_redis_outage_out_and_still_drains_the_queue(
    settings: Settings, db: asyncpg.Connection, aof_redis: EmbeddedRedis
) -> None:
    # `memfleet worker --burst` (here in-process, as `drain` runs it): Redis goes while
    # a job waits on the model; the burst neither raises nor ends early: it ends once
    # the queue is empty, the job's fact stored (docs/operations.md).
    settings = settings.model_copy(update={"redis_url": aof_redis.url, "redis_retries": 2})
    client = Redis.from_url(aof_redis.url)
    with StubServer(dim=TEST_EMBED_DIM) as stub:
        # openai_settings empties the stub: the hold is queued after it, or it is lost
        # and the job may end (and the burst with it) before Redis goes.
        burst_settings = openai_settings(settings, stub)
        stub.add_fault("hold", sleep_s=120, count=1, path="/v1/chat/completions")
        try:
            await schedule_memory_persistence(client, "s1", "u1", [user_msg("I use Zig.")],
                                              queue_name=settings.queue_name)
            burst = asyncio.create_task(drain(burst_settings))

            async def in_flight() -> bool:
                return bool(stub.recorded())

            await eventually(in_flight, 30)
            await asyncio.to_thread(aof_redis.kill)
            await asyncio.sleep(min(OUTAGE_S, 8))  # past the two tries of each command
            assert not burst.done(), "the burst waits for Redis"
            assert not await active_texts(db, "u1"), "the job is still held by the stub"
            await asyncio.to_thread(aof_redis.start)
            stub.release()
            await asyncio.wait_for(burst, 90)
        finally:
            await client.aclose()
    assert await active_texts(db, "u1") == ["Uses Zig"]
