"""No raw user or session id in any span when a job's persist loses a compare-and-set.

Two real jobs (ARQ's job function, Redis, PostgreSQL) race for one user's facts or
one session's cursor; the loser's persist meets UserVersionConflict or CursorFenced.
Every exported span (attributes, events with their exception messages, status) is
searched for the raw ids: spans show ids only as keyed stand-ins (worker.telemetry_ids).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import asyncpg
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from redis.asyncio import Redis

from tests.helpers import job_deps, lock_key, run_job, user_msg
from tests.integration.faults.test_faults import GatedExtractor, NeighborsBarrier
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.fleet.job import Deps
from worker.providers.factory import build_providers
from worker.telemetry import setup_telemetry

USER = "user-Rawid4417"
PHONE, LAPTOP = "session-Rawid9021", "session-Rawid3388"


def traced(deps: Deps, exporter: InMemorySpanExporter) -> Deps:
    return replace(deps, telemetry=setup_telemetry(deps.settings, span_exporter=exporter))


def assert_no_raw_id(exporter: InMemorySpanExporter, conflict: str) -> None:
    spans = exporter.get_finished_spans()
    assert any(s.attributes and s.attributes.get("memfleet.conflict") == conflict
               for s in spans), "the loser's persist met the conflict"
    for span in spans:
        text = span.to_json()
        for raw in (USER, PHONE, LAPTOP):
            assert raw not in text, text[max(0, text.find(raw) - 400):][:800]


async def test_a_user_version_conflict_leaves_no_raw_id_in_spans(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    said = [user_msg("I live in Lisbon.")]
    for session in (PHONE, LAPTOP):
        await schedule_memory_persistence(redis, session, USER, said,
                                          queue_name=settings.queue_name)
    barrier, exporter = asyncio.Barrier(2), InMemorySpanExporter()
    base = build_providers(settings)
    async with job_deps(settings, redis, base) as a, job_deps(settings, redis, base) as b:
        a = replace(a, store=NeighborsBarrier(a.store, barrier))
        b = replace(b, store=NeighborsBarrier(b.store, barrier))
        results = await asyncio.gather(run_job(traced(a, exporter), PHONE, "j1", USER),
                                       run_job(traced(b, exporter), LAPTOP, "j2", USER))
    assert {r["outcome"] for r in results} == {"committed"}
    assert_no_raw_id(exporter, "user_version")


async def test_a_fenced_cursor_leaves_no_raw_id_in_spans(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    await schedule_memory_persistence(redis, PHONE, USER, [user_msg("I live in Oslo.")],
                                      queue_name=settings.queue_name)
    gate, entered, exporter = asyncio.Event(), asyncio.Event(), InMemorySpanExporter()
    base = build_providers(settings)
    stalled = replace(base, extractor=GatedExtractor(base.extractor, gate, entered))
    async with job_deps(settings, redis, stalled) as slow, job_deps(settings, redis, base) as fast:
        first = asyncio.create_task(run_job(traced(slow, exporter), PHONE, "job-stalled", USER))
        await entered.wait()
        await redis.delete(lock_key(USER, PHONE))  # the stalled worker's lock expired
        assert (await run_job(traced(fast, exporter), PHONE, "job-fresh", USER))["outcome"] \
            == "committed"
        gate.set()
        assert (await first)["outcome"] == "fenced"
    assert_no_raw_id(exporter, "cursor")
