"""The fleet's numbers and its signal back: lag, the queue by state, workers held by
dead workers, the commit events, and the exporter that serves them once per fleet."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest
from pydantic import SecretStr
from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from tests.conftest import TEST_EMBED_DIM
from tests.helpers import (
    WorkerProcesses,
    drain,
    eventually,
    job_deps,
    lock_key,
    run_job,
    start_exporter,
    stop_process,
    user_msg,
    worker_env,
)
from tests.unit.deploy.test_dashboard import dashboard_metric_names, exported
from worker.client.handover import memory_events, schedule_memory_persistence, session_tag
from worker.config import Settings
from worker.embedded.process import free_port
from worker.fleet import probe as fleet_probe
from worker.protocol import keys, lock, queue
from worker.protocol.keys import SessionRef
from worker.providers.factory import build_providers

CHAT = "/v1/chat/completions"
KEY = "fleet-test-key"


@pytest.fixture
def keyed(settings: Settings) -> Settings:
    return settings.model_copy(update={"telemetry_id_key": SecretStr(KEY)})


async def probe(redis: Redis, settings: Settings) -> fleet_probe.FleetSnapshot:
    return await fleet_probe.probe(redis, settings.queue_name)


async def test_lag_grows_while_a_handover_waits_and_ends_with_its_commit(
    keyed: Settings, redis: Redis, db: asyncpg.Connection,
) -> None:
    first = await schedule_memory_persistence(redis, "chat1", "u1", [user_msg("I use Zig.")],
                                              queue_name=keyed.queue_name)
    second = await schedule_memory_persistence(redis, "chat1", "u2", [user_msg("I use Go.")],
                                               queue_name=keyed.queue_name)
    before = await probe(redis, keyed)
    assert (before.ready, before.in_progress, before.sessions_waiting) == (2, 0, 2)

    async def lagging() -> bool:
        return (await probe(redis, keyed)).lag_s >= 0.3

    await eventually(lagging, 30)  # the lag grows while nothing is done
    later = await probe(redis, keyed)
    assert 0.3 <= later.lag_s < 30, "the lag counts from the oldest hand-over"

    await drain(keyed)
    after = await probe(redis, keyed)
    assert (after.ready, after.in_progress, after.sessions_waiting, after.lag_s) == (0, 0, 0, 0)

    published = await memory_events(redis, after="0", queue_name=keyed.queue_name)
    by_session = {event.session: event for event in published}
    for user, handover in (("u1", first), ("u2", second)):
        event = by_session[session_tag("chat1", user, KEY)]
        assert event.covers(handover.handover_id)
        assert (event.outcome, event.added) == ("committed", 1)
    # Nothing personal: no id and no text in any field of any entry.
    raw = await redis.xrange(keys.events_key(keyed.queue_name))
    assert len(raw) == 2
    for _entry_id, fields in raw:
        text = b" ".join([*fields.keys(), *fields.values()])
        for said in (b"u1", b"u2", b"chat1", b"Zig", b"Go"):
            assert said not in text


async def test_a_handover_made_during_a_run_keeps_the_session_waiting_from_its_own_time(
    keyed: Settings, redis: Redis,
) -> None:
    session = SessionRef("u1", "chat1")
    first = await schedule_memory_persistence(redis, "chat1", "u1", [user_msg("I use Zig.")],
                                              queue_name=keyed.queue_name)
    session_lock = lock.SessionLock(redis, session, 5_000, keyed.queue_name)
    claimed = await lock.claim(redis, session_lock, "job-1")
    assert claimed.locked

    async def a_later_millisecond() -> bool:  # on the Redis clock, which scores the set
        seconds, micros = await redis.time()
        return seconds * 1000 + micros // 1000 > first.handover_id // 1000

    await eventually(a_later_millisecond, 30)
    second = await schedule_memory_persistence(
        redis, "chat1", "u1", [user_msg("I use Zig."), user_msg("I like tea.")],
        queue_name=keyed.queue_name)
    # The run finished the list it claimed; the later hand-over still waits.
    await session_lock.release(latest_done=first.handover_id)
    score = await redis.zscore(keys.waiting_key(keyed.queue_name), session.key)
    assert score == second.handover_id // 1000, "scored from the later hand-over, not the first"
    assert await redis.hget(session.meta_key, "d") != str(second.handover_id).encode()


async def test_sessions_given_up_or_erased_stop_counting_as_waiting(
    keyed: Settings, redis: Redis,
) -> None:
    # A payload no job can read: its run is invalid, a dead letter, not waiting work.
    await queue.enqueue(redis, SessionRef("u1", "bad"), payload=b"not a hand-over",
                        queue_name=keyed.queue_name)
    await schedule_memory_persistence(redis, "chat1", "u2", [user_msg("I use Go.")],
                                      queue_name=keyed.queue_name)
    assert (await probe(redis, keyed)).sessions_waiting == 2
    await drain(keyed)
    assert (await probe(redis, keyed)).sessions_waiting == 0

    await schedule_memory_persistence(redis, "chat2", "u3", [user_msg("I use C.")],
                                      queue_name=keyed.queue_name)
    assert (await probe(redis, keyed)).sessions_waiting == 1
    await queue.erase_user(redis, "u3")  # the hand-over goes; so does its waiting entry
    snapshot = await probe(redis, keyed)
    assert (snapshot.sessions_waiting, snapshot.lag_s) == (0, 0)


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer(dim=TEST_EMBED_DIM) as server:
        yield server


async def test_a_job_whose_worker_was_killed_counts_as_orphaned(
    settings: Settings, redis: Redis, stub: StubServer, tmp_path: Path,
) -> None:
    env = worker_env(
        settings, llm_provider="openai", llm_base_url=stub.v1, embed_provider="hashing",
        extract_model="stub", consolidate_model="stub", job_timeout_s="300",
    )
    stub.add_fault("latency_ms", latency_ms=60_000, count=1, path=CHAT)  # the job hangs
    workers = WorkerProcesses(env, tmp_path, 1)
    try:
        async def one_worker() -> bool:
            return (await probe(redis, settings)).workers == 1

        await eventually(one_worker, 30)
        await schedule_memory_persistence(redis, "chat1", "u1", [user_msg("I use Zig.")],
                                          queue_name=settings.queue_name)

        async def in_flight() -> bool:
            return any(r["path"] == CHAT for r in stub.recorded())

        await eventually(in_flight, 30)

        job_id = (await redis.zrange(settings.queue_name, 0, 0))[0]

        async def named_by_a_beat() -> bool:  # a heartbeat since the job started names it
            entries = await redis.hvals(keys.workers_key(settings.queue_name))
            return any(job_id in entry for entry in entries)

        await eventually(named_by_a_beat, 30)
        alive = await probe(redis, settings)
        assert (alive.ready, alive.in_progress, alive.orphaned, alive.workers) == (0, 1, 0, 1)

        workers.procs[0].kill()  # SIGKILL mid-job: ARQ's in-progress key outlives it
        workers.procs[0].wait()

        async def orphaned() -> bool:
            return (await probe(redis, settings)).orphaned == 1

        await eventually(orphaned, fleet_probe.ORPHAN_SLACK_MS / 1000 + 10)
        dead = await probe(redis, settings)
        assert (dead.in_progress, dead.workers, dead.sessions_waiting) == (1, 0, 1)
    finally:
        workers.stop()


async def test_the_exporter_serves_the_fleets_numbers_once(
    settings: Settings, redis: Redis, tmp_path: Path,
) -> None:
    port = free_port()
    env = worker_env(settings, metrics_port=str(port), queue_probe_interval_s="0.2")
    exporter = start_exporter(env, tmp_path)
    try:
        await schedule_memory_persistence(redis, "chat1", "u1", [user_msg("I use Zig.")],
                                          queue_name=settings.queue_name)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            async def scraped() -> bool:
                try:
                    body = (await http.get("/metrics")).text
                except httpx.TransportError:
                    return False
                return 'memfleet_fleet_sessions_waiting{shard="default"} 1.0' in body

            await eventually(scraped, 30)
            body = (await http.get("/metrics")).text
            # One series per Redis shard: with MEMFLEET_REDIS_URL alone, `default`.
            assert 'memfleet_queue_depth{shard="default",state="ready"} 1.0' in body
            assert 'memfleet_queue_depth{shard="default",state="orphaned"} 0.0' in body
            assert "memfleet_fleet_lag_seconds" in body
            assert 'memfleet_fleet_workers{shard="default"} 0.0' in body
            assert "u1" not in body and "chat1" not in body
            # Every metric the dashboard reads from the exporter's job is served here.
            assert dashboard_metric_names("memfleet-exporter") <= set(exported(body)) | {"up"}
            assert (await http.get("/healthz")).status_code == 200
    finally:
        stop_process(exporter)


async def test_a_commit_whose_release_was_lost_is_published_by_the_next_job(
    keyed: Settings, redis: Redis, db: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker that dies between its commit and its release publishes nothing; the
    next job of the session finds the slice done, settles it and publishes then."""
    handover = await schedule_memory_persistence(redis, "chat1", "u1", [user_msg("I use Zig.")],
                                                 queue_name=keyed.queue_name)
    real_release = lock.SessionLock.release

    async def died_before_release(self: lock.SessionLock, **_: object) -> None:
        self._released = True  # the heartbeat stops, as with a dead process

    async with job_deps(keyed, redis, build_providers(keyed)) as deps:
        monkeypatch.setattr(lock.SessionLock, "release", died_before_release)
        first = await run_job(deps, "chat1", "job-1", user_id="u1")
        assert first["outcome"] == "committed"
        assert await memory_events(redis, after="0", queue_name=keyed.queue_name) == []
        assert (await probe(redis, keyed)).sessions_waiting == 1

        monkeypatch.setattr(lock.SessionLock, "release", real_release)
        await redis.delete(lock_key("u1", "chat1"))  # its lock expired
        await queue.enqueue(redis, SessionRef("u1", "chat1"), payload=None,
                            queue_name=keyed.queue_name)  # the recovery pass's job
        second = await run_job(deps, "chat1", "job-2", user_id="u1")
    assert second["outcome"] == "empty"
    (event,) = await memory_events(redis, after="0", queue_name=keyed.queue_name)
    assert event.covers(handover.handover_id) and event.outcome == "empty"
    assert (await probe(redis, keyed)).sessions_waiting == 0
    assert await db.fetchval("SELECT count(*) FROM memory_fact") == 1
