"""The expiry pass against the real servers: a fact past its expires_at is superseded,
never deleted; passes run together without doing a fact twice or waiting on a
commit, and never make an erased user's version row again."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from redis.asyncio import Redis

from tests.helpers import drain, eventually, fences_for_tests, user_msg
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.fleet.app import worker_options
from worker.ops.expiry import expire_due
from worker.providers.hashing import HashingEmbedder
from worker.read import known_facts
from worker.store.imports import ImportRow, ImportStore
from worker.store.maintenance import PostgresMaintenanceStore
from worker.store.pool import create_pool
from worker.store.postgres import PostgresStore
from worker.store.types import FactTerms


@pytest.fixture
async def pool(settings: Settings) -> AsyncIterator[Any]:
    made = await create_pool(settings.database_url or "", min_size=1, max_size=4)
    yield made
    await made.close()


async def seed(pool: Any, settings: Settings, user_id: str, texts: list[str],
               expires_at: datetime | None, valid_from: datetime | None = None) -> None:
    """Facts written as an import writes them (one transaction, the version bumped)."""
    embedder = HashingEmbedder(settings.embed_dim)
    rows = [ImportRow(user_id=user_id, text=t, category="event", importance=4,
                      observed_at=datetime.now(UTC) - timedelta(hours=1),
                      terms=FactTerms(valid_from=valid_from, expires_at=expires_at),
                      import_key=f"{user_id}:{t}") for t in texts]
    vectors = (await embedder.embed(texts)).value
    written = await ImportStore(pool, fences_for_tests()).write_user(
        user_id, rows, vectors, model=embedder.model, source_kind="imported", fences={},
        memory_default=True)
    assert written.imported == len(texts)


async def version(db: asyncpg.Connection, user_id: str) -> int | None:
    found: int | None = await db.fetchval(
        "SELECT version FROM user_memory_state WHERE user_id = $1", user_id)
    return found


async def test_an_expiring_fact_is_read_until_it_expires_then_superseded_as_expired(
    settings: Settings, db: asyncpg.Connection, redis: Redis, pool: Any,
) -> None:
    await schedule_memory_persistence(redis, "s1", "u1", [user_msg("I live in Porto.")],
                                      queue_name=settings.queue_name)
    await drain(settings)
    await schedule_memory_persistence(
        redis, "s1", "u1", [user_msg("I live in Porto."), user_msg("I moved to Braga.")],
        queue_name=settings.queue_name)
    await drain(settings)
    porto, braga = await db.fetch("SELECT id FROM memory_fact WHERE user_id = 'u1' ORDER BY id")
    expires_at: datetime = await db.fetchval(
        "UPDATE memory_fact SET expires_at = now() + interval '1.5 seconds' WHERE id = $1"
        " RETURNING expires_at", braga["id"])
    store = PostgresStore(pool, fences_for_tests())
    embedder = HashingEmbedder(settings.embed_dim)
    before = await version(db, "u1")
    assert [f.text for f in await known_facts(store, embedder, "u1")] == ["Lives in Braga"]
    assert await expire_due(PostgresMaintenanceStore(pool)) == 0  # not due yet

    await asyncio.sleep(max(0.0, (expires_at - datetime.now(UTC)).total_seconds()) + 0.2)
    assert await expire_due(PostgresMaintenanceStore(pool)) == 1
    row = await db.fetchrow("SELECT * FROM memory_fact WHERE id = $1", braga["id"])
    assert row is not None, "superseded, never deleted"
    assert row["superseded_reason"] == "expired" and row["superseded_by"] is None
    assert row["superseded_at"] == expires_at and row["valid_to"] == expires_at
    assert row["valid_from"] <= row["valid_to"]
    assert await known_facts(store, embedder, "u1") == []
    chain = await store.chain("u1", porto["id"])
    assert [f.id for f in chain] == [porto["id"], braga["id"]]
    assert chain[0].superseded_by == braga["id"] and chain[0].superseded_reason == "updated"
    assert await version(db, "u1") == (before or 0) + 1
    assert await expire_due(PostgresMaintenanceStore(pool)) == 0
    assert await version(db, "u1") == (before or 0) + 1


async def test_validity_never_ends_before_it_began(
    settings: Settings, db: asyncpg.Connection, pool: Any,
) -> None:
    now = datetime.now(UTC)
    await seed(pool, settings, "u2", ["Starts a course next month"], now - timedelta(seconds=1),
               valid_from=now + timedelta(days=30))
    assert await expire_due(PostgresMaintenanceStore(pool)) == 1
    row = await db.fetchrow("SELECT * FROM memory_fact WHERE user_id = 'u2'")
    assert row is not None and row["superseded_reason"] == "expired"
    assert row["valid_to"] == row["valid_from"] == now + timedelta(days=30)


async def test_passes_running_together_do_each_fact_once(
    settings: Settings, db: asyncpg.Connection, pool: Any,
) -> None:
    past = datetime.now(UTC) - timedelta(minutes=5)
    for n in range(30):
        await seed(pool, settings, f"user-{n}", [f"Trip {i}" for i in range(5)], past)
    await seed(pool, settings, "later", ["Trip next year"], past + timedelta(days=365))
    versions = dict(await db.fetch("SELECT user_id, version FROM user_memory_state"))

    pools = [await create_pool(settings.database_url or "", min_size=1, max_size=1)
             for _ in range(4)]
    try:
        counts = await asyncio.gather(*(
            expire_due(PostgresMaintenanceStore(p), users=3, facts=7) for p in pools))
    finally:
        for made in pools:
            await made.close()
    assert sum(counts) == 150, counts
    assert all(counts), f"every pass took a share: {counts}"
    reasons = await db.fetch("SELECT superseded_reason, count(*) FROM memory_fact"
                             " GROUP BY superseded_reason ORDER BY 1 NULLS LAST")
    assert [tuple(r) for r in reasons] == [("expired", 150), (None, 1)]
    bumped = dict(await db.fetch("SELECT user_id, version FROM user_memory_state"))
    assert all(bumped[u] > versions[u] for u in versions if u != "later")
    assert bumped["later"] == versions["later"]


async def test_a_pass_skips_what_a_commit_holds_and_never_makes_an_erased_user_again(
    settings: Settings, db: asyncpg.Connection, pool: Any,
) -> None:
    past = datetime.now(UTC) - timedelta(minutes=1)
    for user in ("busy", "erased", "free"):
        await seed(pool, settings, user, ["Visits Rome"], past)
    # A commit in flight holds busy's version row; an erase in flight has deleted
    # erased's rows and holds them, not committed yet.
    busy = await asyncpg.connect(settings.database_url)
    erase = await asyncpg.connect(settings.database_url)
    try:
        busy_tx, erase_tx = busy.transaction(), erase.transaction()
        await busy_tx.start()
        await busy.execute("SELECT 1 FROM user_memory_state WHERE user_id = 'busy' FOR UPDATE")
        await erase_tx.start()
        await erase.execute("SELECT pg_advisory_xact_lock(hashtextextended('memfleet:user:'"
                            " || 'erased', 0))")
        await erase.execute("DELETE FROM memory_fact WHERE user_id = 'erased'")
        await erase.execute("DELETE FROM user_memory_state WHERE user_id = 'erased'")
        started = time.monotonic()
        # free's, without waiting
        assert await asyncio.wait_for(expire_due(PostgresMaintenanceStore(pool)), 10) == 1
        assert time.monotonic() - started < 5
        await erase_tx.commit()
        await busy_tx.commit()
    finally:
        await busy.close()
        await erase.close()
    assert await version(db, "erased") is None
    assert await db.fetchval("SELECT count(*) FROM memory_fact WHERE user_id = 'erased'") == 0
    # busy's, once its commit is done
    assert await expire_due(PostgresMaintenanceStore(pool)) == 1
    assert await db.fetchval("SELECT count(*) FROM memory_fact WHERE superseded_reason ="
                             " 'expired'") == 2


async def test_every_worker_runs_the_pass(
    settings: Settings, db: asyncpg.Connection, redis: Redis, pool: Any,
) -> None:
    await seed(pool, settings, "u1", ["Visits Rome"], datetime.now(UTC) - timedelta(seconds=1))
    options = worker_options(settings.model_copy(update={"expiry_interval_s": 0.2}))
    ctx: dict[str, Any] = {"redis": redis}
    await options["on_startup"](ctx)
    try:
        async def expired() -> bool:
            return await db.fetchval("SELECT superseded_reason FROM memory_fact") == "expired"

        async def counted() -> bool:
            rendered = ctx["deps"].telemetry.render_metrics().decode()
            return "memfleet_facts_expired_total 1.0" in rendered

        await eventually(expired, 15, "a worker's pass expires the fact")
        # The pass counts after its transaction has committed and its connection is back
        # in the pool: on a loaded machine this test can read the commit before that.
        await eventually(counted, 5, "the pass counts it for the dashboard")
    finally:
        await options["on_shutdown"](ctx)
    assert ctx["expiry"].done()
    off = worker_options(settings.model_copy(update={"expiry_interval_s": 0}))
    ctx = {"redis": redis}
    await off["on_startup"](ctx)
    await off["on_shutdown"](ctx)
    assert "expiry" not in ctx
