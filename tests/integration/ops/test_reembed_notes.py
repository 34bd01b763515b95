"""`memfleet reembed` moves the notes beside the facts (docs/notes.md, docs/operations.md),
on real servers: PostgreSQL with pgvector, valkey, a real burst worker with notes on
(the rules provider, hashing embeddings) writing the notes, and the real memory API.

- The CLI moves every active note with its user's facts (a user with notes alone
  too), counts them in its output and verifies them; a removed note (history) keeps
  its old embedding. Each moved note holds its own text's vector at the new
  dimension, and once the API rolled to it a search finds the note by meaning.
- A move that fails midway resumes where it stopped, notes included.
- A note removed between the move's read and its write rolls the user's move back:
  the user is read again and the removed note is left as it was.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import asyncpg
import httpx
import numpy as np
import pytest
from redis.asyncio import Redis

from tests.api_server import api_settings, bearer, running_api
from tests.conftest import TEST_EMBED_DIM
from tests.helpers import drain, fences_for_tests, user_msg, worker_env
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.errors import StoreUnavailable
from worker.ops.reembed import Target, reembed
from worker.providers.hashing import HashingEmbedder, hash_embed
from worker.read_notes import search_notes
from worker.store.maintenance import PostgresMaintenanceStore
from worker.store.pool import create_pool
from worker.store.postgres import PostgresStore
from worker.store.types import RowsToMove

MODEL, NEW_DIM = "hashing-v1", 64  # the hashing provider: only the dimension can change
PORTO = "The user is considering moving to Porto."


@pytest.fixture
def noting(settings: Settings) -> Settings:
    return settings.model_copy(update={"notes_enabled": True})


async def _say(settings: Settings, redis: Redis, user: str, session: str, *said: str) -> None:
    await schedule_memory_persistence(redis, session, user, [user_msg(t) for t in said],
                                      queue_name=settings.queue_name)
    assert (await drain(settings))["failed"] == 0


async def _notes(db: asyncpg.Connection, user: str) -> list[dict[str, Any]]:
    rows = await db.fetch(
        "SELECT id, text, superseded_reason, embedding_model, embedding_dim,"
        " embedding::text AS embedding FROM memory_note WHERE user_id = $1 ORDER BY id", user)
    return [dict(r) for r in rows]


def _holds_its_texts_vector(note: dict[str, Any], dim: int) -> bool:
    got = np.array(json.loads(note["embedding"]), dtype=np.float32)
    want = np.array(hash_embed(note["text"], dim), dtype=np.float32)
    return got.shape == want.shape and bool(np.allclose(got, want, atol=2e-3))


async def test_reembed_moves_the_active_notes_and_a_search_finds_them_after(
    noting: Settings, redis: Redis, db: asyncpg.Connection,
) -> None:
    await _say(noting, redis, "ada", "s1", "I live in Oslo.", "I'm considering moving to Porto.",
               "I'm thinking about a kitchen renovation, budget about $40k.")
    await _say(noting, redis, "bo", "s1", "I'm weighing a new job offer.")  # a note alone
    porto, kitchen = await _notes(db, "ada")
    assert porto["text"] == PORTO and (porto["embedding_model"], porto["embedding_dim"]) == (
        MODEL, TEST_EMBED_DIM)
    assert await db.fetchval("SELECT count(*) FROM memory_fact WHERE user_id = 'bo'") == 0
    # Before the move a query of the new dimension finds the note by its words alone:
    # meaning ranks only rows of the query's dimension.
    pool = await create_pool(noting.database_url or "", min_size=1, max_size=1)
    try:
        (before,) = await search_notes(PostgresStore(pool, fences_for_tests()),
                                       HashingEmbedder(NEW_DIM), "ada", "moving to Porto",
                                       top_k=5)
    finally:
        await pool.close()
    assert (before.note.id, before.semantic_rank, before.lexical_rank) == (porto["id"], None, 1)
    # The user removes one: history, never ranked, not moved.
    await db.execute("UPDATE memory_note SET superseded_at = now(),"
                     " superseded_reason = 'removed' WHERE user_id = 'ada' AND id = $1",
                     kitchen["id"])

    moved = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "worker.cli", "reembed", "--model", MODEL,
                         "--dim", str(NEW_DIM), "--batch", "2"],
        env=worker_env(noting), capture_output=True, text=True, check=False, timeout=120)
    assert moved.returncode == 0, moved.stderr
    assert "2 users moved, 1 facts and 2 notes re-embedded, 2 embedding calls" in moved.stdout
    assert (f"verified: 1 active facts and 2 active notes, all on {MODEL} at {NEW_DIM}"
            in moved.stdout)
    assert "1 facts, 2 notes" in moved.stderr  # the pass's progress line

    after = {n["id"]: n for n in [*await _notes(db, "ada"), *await _notes(db, "bo")]}
    assert len(after) == 3, "no note added or lost"
    for note in after.values():
        if note["superseded_reason"] is None:
            assert (note["embedding_model"], note["embedding_dim"]) == (MODEL, NEW_DIM)
            assert _holds_its_texts_vector(note, NEW_DIM), note["text"]
        else:
            assert note["embedding"] == kitchen["embedding"], "history keeps its embedding"
            assert note["embedding_dim"] == TEST_EMBED_DIM

    # The fleet rolled to the new dimension: the API's search embeds the query with it
    # and finds the note by meaning too.
    rolled = noting.model_copy(update={"embed_dim": NEW_DIM})
    async with running_api(api_settings(rolled)) as url, httpx.AsyncClient(
            base_url=url, timeout=30) as api:
        found = await api.get("/users/ada/search", params={"q": "moving to Porto"},
                              headers=bearer("ada"))
    assert found.status_code == 200, found.text
    (hit,) = found.json()["notes"]
    assert (hit["note"]["id"], hit["semantic_rank"]) == (porto["id"], 1)


class _FailsOnce(PostgresMaintenanceStore):
    """The move's store, its database going away after the first user's move."""

    moves = 0

    async def move_user(self, *args: Any, **kwargs: Any) -> bool:
        if self.moves == 1:
            raise StoreUnavailable("moving a user's facts failed: the server went away")
        self.moves += 1
        return await super().move_user(*args, **kwargs)


async def test_a_move_that_failed_midway_resumes_with_the_notes_left(
    noting: Settings, redis: Redis, db: asyncpg.Connection, database_url: str,
) -> None:
    for user in ("cy", "dee", "eve"):
        await _say(noting, redis, user, "s1", "I'm considering moving to Porto.")
    pool = await create_pool(database_url, min_size=1, max_size=3)
    try:
        target = Target(MODEL, NEW_DIM)
        with pytest.raises(StoreUnavailable):
            await reembed(_FailsOnce(pool), HashingEmbedder(NEW_DIM), target, batch=1)
        left = await db.fetchval("SELECT count(*) FROM memory_note WHERE embedding_dim = $1",
                                 TEST_EMBED_DIM)
        assert left == 2, "the first user's notes moved, the others' not yet"
        outcome = await reembed(PostgresMaintenanceStore(pool), HashingEmbedder(NEW_DIM),
                                target, batch=1)
    finally:
        await pool.close()
    assert (outcome.counts.users, outcome.counts.notes, outcome.active_notes) == (2, 2, 3)
    assert await db.fetchval("SELECT count(*) FROM memory_note WHERE embedding_dim = $1",
                             NEW_DIM) == 3


class _RemovesAfterRead(PostgresMaintenanceStore):
    """The move's store; the user removes their note after the move's first read of it."""

    def __init__(self, pool: Any) -> None:
        super().__init__(pool)
        self.reads = 0

    async def rows_to_move(self, user_id: str, model: str, dim: int) -> RowsToMove:
        rows = await super().rows_to_move(user_id, model, dim)
        self.reads += 1
        if self.reads == 1:
            await PostgresStore(self._pool, fences_for_tests()).remove_note(
                user_id, rows.note_ids[0])
        return rows


async def test_a_note_removed_during_the_move_rolls_the_users_move_back(
    noting: Settings, redis: Redis, db: asyncpg.Connection, database_url: str,
) -> None:
    await _say(noting, redis, "fay", "s1", "I live in Oslo.", "I'm considering moving to Porto.",
               "I'm weighing a new job offer.")
    pool = await create_pool(database_url, min_size=1, max_size=3)
    try:
        store = _RemovesAfterRead(pool)
        outcome = await reembed(store, HashingEmbedder(NEW_DIM), Target(MODEL, NEW_DIM),
                                batch=8)
    finally:
        await pool.close()
    assert (outcome.counts.reread, outcome.counts.notes, outcome.active_notes) == (1, 1, 1)
    removed, kept = await _notes(db, "fay")
    assert (removed["superseded_reason"], removed["embedding_dim"]) == ("removed",
                                                                       TEST_EMBED_DIM)
    assert (kept["superseded_reason"], kept["embedding_dim"]) == (None, NEW_DIM)
    # The facts moved in the same (second) transaction as the note.
    assert await db.fetchval("SELECT embedding_dim FROM memory_fact WHERE user_id = 'fay'"
                             " AND superseded_at IS NULL") == NEW_DIM
