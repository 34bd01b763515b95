"""The right of access: a user's export holds everything of theirs and nothing of anyone
else's, over the API and the CLI, streamed."""

from __future__ import annotations

import json
from pathlib import Path

import asyncpg
import httpx
from redis.asyncio import Redis

from tests.acceptance.test_cli import memfleet
from tests.api_server import bearer
from tests.helpers import drain, job_deps, user_msg, worker_env
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.ops import privacy
from worker.ops.access_export import CHUNK_CHARS, export_user
from worker.providers.factory import build_providers
from worker.store.maintenance import PostgresMaintenanceStore
from worker.store.pool import create_pool


async def remembered(settings: Settings, redis: Redis) -> None:
    """ada: a fact changed (a chain of two rows) in session "1"; bob: session "1" too."""
    said = [user_msg("I live in Berlin.")]
    await schedule_memory_persistence(redis, "1", "ada", said, queue_name=settings.queue_name)
    await schedule_memory_persistence(redis, "1", "bob", [user_msg("I use Perl.")],
                                      queue_name=settings.queue_name)
    await drain(settings)
    said.append(user_msg("I live in Lisbon now."))
    await schedule_memory_persistence(redis, "1", "ada", said, queue_name=settings.queue_name)
    await drain(settings)


async def test_an_export_holds_every_row_of_the_user_and_nothing_of_another(
    api: httpx.AsyncClient, settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    await remembered(settings, redis)
    # A run that knew no user names no session either (schema/0008_run_owners.sql): no
    # export matches it, though ada and bob both have a session "1".
    await db.execute("INSERT INTO memory_run (job_id, outcome, started_at)"
                     " VALUES ('old', 'invalid', now())")
    async with job_deps(settings, redis, build_providers(settings)) as deps:
        await privacy.set_memory(redis, deps.store, "ada", enabled=True)
    resp = await api.get("/users/ada/export", headers=bearer("ada"))
    assert resp.status_code == 200 and resp.headers["content-type"] == "application/json"
    export = resp.json()
    assert export["user_id"] == "ada"
    assert export["consent"]["enabled"] is True and export["consent"]["chosen"] is True
    facts = {f["text"]: f for f in export["facts"]}
    assert set(facts) == {"Lives in Berlin", "Lives in Lisbon"}
    assert facts["Lives in Berlin"]["superseded_by"] == facts["Lives in Lisbon"]["id"]
    assert "embedding" not in facts["Lives in Berlin"]
    assert [s["session_id"] for s in export["sessions"]] == ["1"]
    assert [r["outcome"] for r in export["runs"]] == ["committed", "committed"]
    assert all(r["slice_len"] >= 0 and r["started_at"] for r in export["runs"])
    assert "Perl" not in resp.text and "bob" not in resp.text
    # Another user's token gets nothing.
    assert (await api.get("/users/ada/export", headers=bearer("bob"))).status_code == 403


async def test_a_user_memfleet_never_saw_gets_an_empty_export(api: httpx.AsyncClient) -> None:
    export = (await api.get("/users/nobody/export", headers=bearer("nobody"))).json()
    assert (export["facts"], export["sessions"], export["runs"]) == ([], [], [])
    assert export["consent"] == {"enabled": True, "chosen": False, "updated_at": None}


async def test_a_large_export_is_streamed_in_bounded_chunks(
    settings: Settings, db: asyncpg.Connection
) -> None:
    await db.execute(
        "INSERT INTO memory_fact (user_id, text, category, importance, embedding,"
        " embedding_model, observed_at)"
        " SELECT 'heavy', 'Fact number ' || n, 'fact', 5,"
        " array_fill(0.1::real, ARRAY[$1::int])::halfvec, 'test', now()"
        " FROM generate_series(1, 3000) AS n", settings.embed_dim)
    pool = await create_pool(settings.database_url or "", min_size=1, max_size=1)
    try:
        chunks = [c async for c in export_user(PostgresMaintenanceStore(pool), "heavy",
                                               memory_default=True)]
    finally:
        await pool.close()
    assert len(chunks) > 3 and max(len(c) for c in chunks) < 2 * CHUNK_CHARS
    assert len(json.loads("".join(chunks))["facts"]) == 3000


async def test_the_cli_prints_the_export(settings: Settings, redis: Redis, tmp_path: Path) -> None:
    await remembered(settings, redis)
    done = memfleet(worker_env(settings), "export", "--user", "ada")
    assert done.returncode == 0, done.stderr
    export = json.loads(done.stdout)
    assert sorted(f["text"] for f in export["facts"]) == ["Lives in Berlin", "Lives in Lisbon"]
    assert "Perl" not in done.stdout
