"""PostgresNotePromotion: the statements of the notes' promotion job (docs/notes.md).

worker.ops.note_promotion decides what to promote; the pass's lock, the reads
and each promotion's transaction are here, with their SQL
(worker/store/sql/note_promotion.sql) and asyncpg's errors translated at this edge.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
from pgvector import HalfVector

from worker.memory_rules import confidence_for
from worker.store import halfvec, queries
from worker.store.note_types import PromotableNote, Promotion, PromotionResult
from worker.store.pool import PooledStore
from worker.store.translate import PG_ERRORS, translated
from worker.store.types import Vector

# A promoted fact is inferred from notes that the user said in several sessions.
PROMOTED_CONFIDENCE = confidence_for("extracted", "inferred")


class _Stale(Exception):
    """Internal: a cluster's notes or its covering fact changed; rolls back."""


class PostgresNotePromotion(PooledStore):
    """worker.store.base.NotePromotionStore on PostgreSQL."""

    def __init__(self, pool: Any) -> None:
        super().__init__(pool)
        self._sql = queries.load("note_promotion")

    @contextlib.asynccontextmanager
    async def claim_pass(self) -> AsyncIterator[bool]:
        """Whether this process runs the fleet's pass now (False: another does). The
        advisory lock is held on a connection of its own for the whole pass."""
        async with translated("starting the notes' promotion"), self._pool.acquire() as lock:
            if not await lock.fetchval(self._sql["try_lock"]):
                yield False
                return
            try:
                yield True
            finally:
                # A connection that broke took the lock with it.
                with contextlib.suppress(*PG_ERRORS):
                    await lock.execute(self._sql["unlock"])

    async def users_to_check(
        self, sessions: int, memory_default: bool, limit: int
    ) -> list[tuple[str, int]]:
        async with translated("listing users with notes"):
            rows = await self._pool.fetch(self._sql["users_to_check"], sessions, memory_default,
                                          limit)
        return [(row["user_id"], row["newest"]) for row in rows]

    async def user_notes(
        self, user_id: str, model: str, dim: int, limit: int
    ) -> list[PromotableNote]:
        async with translated("reading a user's notes"):
            rows = await self._pool.fetch(self._sql["user_notes"], user_id, model, dim, limit)
        return [PromotableNote(row["id"], row["text"], row["source_session_id"],
                               row["observed_at"],
                               np.asarray(row["embedding"].to_numpy(), dtype=np.float32))
                for row in rows]

    async def nearest_facts(
        self, user_id: str, embeddings: Vector, model: str
    ) -> list[tuple[int, float] | None]:
        """Per row, the user's nearest active profile fact (id, cosine distance)."""
        found: list[tuple[int, float] | None] = [None] * len(embeddings)
        if not len(embeddings):
            return found
        async with translated("reading a user's facts"):
            rows = await self._pool.fetch(self._sql["nearest_facts"], user_id,
                                          halfvec.encode_rows(embeddings), model,
                                          int(embeddings.shape[1]))
        for row in rows:
            found[row["ord"] - 1] = (row["id"], row["distance"])
        return found

    async def promote(
        self, user_id: str, promotion: Promotion, *, memory_default: bool
    ) -> PromotionResult | None:
        """One transaction: the fact written (or the covering one kept) and every note of
        the cluster linked to it, or nothing (None) when a note is no longer active,
        the covering fact is gone, or the user's memory is off."""
        sql = self._sql
        ids = sorted(promotion.note_ids)
        try:
            async with translated("promoting notes"), self._pool.acquire() as conn, \
                    conn.transaction():
                await conn.execute(sql["lock_user"], user_id)
                if not await conn.fetchval(sql["memory_on"], user_id, memory_default):
                    raise _Stale
                await conn.fetchval(sql["bump_user_version"], user_id)
                locked = await conn.fetch(sql["lock_notes"], user_id, ids)
                if len(locked) != len(ids):
                    raise _Stale
                if promotion.covered_by is not None:
                    if await conn.fetchval(sql["fact_active"], user_id,
                                           promotion.covered_by) is None:
                        raise _Stale
                    fact_id, added = promotion.covered_by, False
                else:
                    fact_id = await conn.fetchval(
                        sql["insert_fact"], user_id, promotion.text, promotion.category,
                        promotion.importance, HalfVector(promotion.embedding),
                        promotion.embedding_model, promotion.observed_at,
                        promotion.session_id, PROMOTED_CONFIDENCE)
                    added = True
                await conn.execute(sql["mark_promoted"], user_id, fact_id, ids)
        except _Stale:
            return None
        return PromotionResult(fact_id, added)

    async def mark_checked(self, user_id: str, newest_note: int) -> None:
        async with translated("recording the notes' check"), self._pool.acquire() as conn, \
                conn.transaction():
            await conn.execute(self._sql["lock_user"], user_id)
            await conn.execute(self._sql["mark_checked"], user_id, newest_note)
