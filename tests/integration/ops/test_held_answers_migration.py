"""0011: a database whose users have held proposals keeps every one of them, open,
and the schema refuses an answer that is only half recorded."""

from __future__ import annotations

import shutil
from pathlib import Path

import asyncpg
import pytest

from tests.conftest import TEST_EMBED_DIM
from tests.helpers import fences_for_tests
from worker.store.migrate import default_schema_dir, migrate
from worker.store.pool import create_pool
from worker.store.postgres import PostgresStore


async def test_proposals_held_before_0011_stay_open_and_answers_are_whole(
    empty_database_url: str, tmp_path: Path
) -> None:
    before = tmp_path / "schema"
    shutil.copytree(default_schema_dir(), before, ignore=shutil.ignore_patterns("__*"))
    for later in before.glob("0*.sql"):
        if later.name >= "0011":
            later.unlink()
    await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM, schema_dir=before)
    vector = "[" + ",".join(["0.5"] * TEST_EMBED_DIM) + "]"
    conn = await asyncpg.connect(empty_database_url)
    try:
        fact = await conn.fetchval(
            "INSERT INTO memory_fact (user_id, text, category, importance, embedding,"
            " embedding_model, observed_at, pinned) VALUES ('ann', 'Likes jazz', 'preference',"
            " 5, $1, 'm', now(), true) RETURNING id", vector)
        await conn.execute(
            "INSERT INTO memory_held_proposal (user_id, fact_id, event, reason, text)"
            " VALUES ('ann', $1, 'UPDATE', 'pinned', 'Likes blues')", fact)
        assert await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM) == [
            "0011_held_proposal_resolution", "0012_fact_text_inline", "0013_partition_by_user",
            "0014_held_additions", "0015_manual_fact_via", "0016_persons", "0017_notes",
            "0018_portraits", "0019_stable_order_index", "0020_held_person"]
        pool = await create_pool(empty_database_url, min_size=1, max_size=1)
        try:
            (held,) = await PostgresStore(pool, fences_for_tests()).held_proposals("ann")
        finally:
            await pool.close()
        assert (held["text"], held["resolution"], held["resolved_at"], held["stale"]) == (
            "Likes blues", None, None, False)
        for half in ("resolution = 'accepted'", "resolved_at = now()",
                     "resolution = 'dismissed', resolved_at = now()",
                     "resolution = 'dismissed', resolved_at = now(), resolved_by = 'user',"
                     f" result_fact_id = {fact}",
                     "resolution = 'ignored', resolved_at = now(), resolved_by = 'user'"):
            with pytest.raises(asyncpg.CheckViolationError):
                await conn.execute(f"UPDATE memory_held_proposal SET {half}")  # noqa: S608
    finally:
        await conn.close()
