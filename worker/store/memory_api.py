"""MemoryApiStore: the memory API's and the read path's operations on one user's facts.

Every query takes the user id first, so a fact id of another user reads exactly
like an id that does not exist. Writes bump the user's version with the same
compare-and-set as the pipeline, so a manual write and a worker's
consolidation of the same user never both act on the same neighbours.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg
from pgvector import HalfVector

from worker.errors import StoreError, UserVersionConflict
from worker.store import queries
from worker.store.types import FactRecord, Vector

_PG_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError)
_FACT_COLUMNS = tuple(FactRecord.__dataclass_fields__)

# A lost compare-and-set only means a worker committed for this user a moment
# ago; trying again is cheap and almost always wins.
CAS_ATTEMPTS = 5


class _Missing(Exception):
    """Internal: the targeted row is not there; rolls the transaction back."""


@asynccontextmanager
async def _translated(what: str) -> AsyncIterator[None]:
    try:
        yield
    except _PG_ERRORS as exc:
        raise StoreError(f"{what} failed: {type(exc).__name__}") from exc


def _fact(row: Any) -> FactRecord:
    return FactRecord(**{name: row[name] for name in _FACT_COLUMNS})


@dataclass(frozen=True, slots=True)
class RankedFact:
    """A search hit: the fact and its 1-based rank in each list (None: not in that list)."""

    fact: FactRecord
    semantic_rank: int | None
    lexical_rank: int | None


@dataclass(frozen=True, slots=True)
class NewFact:
    text: str
    category: str
    importance: int
    embedding: Vector  # one row of the embedder's matrix
    embedding_model: str


class MemoryApiStore:
    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self._sql = queries.load("memory_api")
        self._facts_sql = queries.load("facts")

    # -- reading ---------------------------------------------------------

    async def active_facts(self, user_id: str) -> list[FactRecord]:
        """The user's active facts, oldest observation first."""
        async with _translated("reading facts"):
            rows = await self._pool.fetch(self._facts_sql["active_facts"], user_id)
        return [_fact(row) for row in rows]

    async def count_active(self, user_id: str) -> int:
        async with _translated("counting facts"):
            count: int = await self._pool.fetchval(self._sql["count_active"], user_id)
        return count

    async def get_fact(self, user_id: str, fact_id: int) -> FactRecord | None:
        async with _translated("reading a fact"):
            row = await self._pool.fetchrow(self._sql["get_fact"], user_id, fact_id)
        return None if row is None else _fact(row)

    async def chain(self, user_id: str, fact_id: int) -> list[FactRecord]:
        """Every version of the fact, oldest first; empty when the user has no such fact."""
        async with _translated("reading a chain"):
            rows = await self._pool.fetch(self._sql["chain"], user_id, fact_id)
        return [_fact(row) for row in rows]

    async def search(
        self, user_id: str, embedding: Vector, words_query: str, k: int
    ) -> list[RankedFact]:
        """Top-k active facts by meaning and by words, with their rank in each list.

        ``words_query`` is websearch_to_tsquery syntax; an empty one matches nothing.
        """
        async with _translated("searching facts"):
            rows = await self._pool.fetch(
                self._sql["search"], user_id, HalfVector(embedding), words_query, k
            )
        return [RankedFact(_fact(r), r["semantic_rank"], r["lexical_rank"]) for r in rows]

    # -- writing ---------------------------------------------------------

    async def add_fact(self, user_id: str, fact: NewFact) -> FactRecord:
        """Insert a fact written by hand (source_kind 'manual') and bump the user's version."""
        observed_at = datetime.now(UTC)

        async def write(conn: Any) -> FactRecord:
            row = await conn.fetchrow(
                self._sql["insert_manual_fact"], user_id, fact.text, fact.category,
                fact.importance, HalfVector(fact.embedding), fact.embedding_model, observed_at,
            )
            return _fact(row)

        result = await self._versioned("adding a fact", user_id, write)
        assert result is not None  # an insert always returns its row
        return result

    async def remove_fact(self, user_id: str, fact_id: int) -> FactRecord | None:
        """Supersede an active fact of the user (no successor); None if there is none.

        Nothing is deleted, and a miss leaves the user's version untouched.
        """

        async def write(conn: Any) -> FactRecord:
            row = await conn.fetchrow(self._sql["remove_fact"], user_id, fact_id)
            if row is None:
                raise _Missing
            return _fact(row)

        return await self._versioned("removing a fact", user_id, write)

    async def _versioned(self, what: str, user_id: str, write: Any) -> FactRecord | None:
        """Run ``write`` in a transaction that also wins the user-version compare-and-set."""
        for _ in range(CAS_ATTEMPTS):
            try:
                async with _translated(what), self._pool.acquire() as conn, conn.transaction():
                    version = await conn.fetchval(self._sql["user_version"], user_id)
                    bumped = await conn.fetchval(self._sql["bump_user_version"], user_id, version)
                    if bumped is None:
                        raise UserVersionConflict(user_id)
                    result: FactRecord = await write(conn)
                    return result
            except _Missing:
                return None
            except UserVersionConflict:
                continue
        raise UserVersionConflict(user_id)

    async def erase_user(self, user_id: str) -> dict[str, int]:
        """Delete everything stored about the user, history included; rows deleted per table.

        Also fences the user's in-flight jobs: with the session cursors gone, a
        run that read a cursor finds nothing to advance and writes nothing.
        """
        counts: dict[str, int] = {}
        async with _translated("erasing a user"), self._pool.acquire() as conn, conn.transaction():
            for table, name in (
                ("memory_fact", "erase_facts"),
                ("memory_run", "erase_runs"),
                ("session_cursor", "erase_cursors"),
                ("user_memory_state", "erase_state"),
            ):
                status: str = await conn.execute(self._sql[name], user_id)
                counts[table] = int(status.rsplit(" ", 1)[-1])
        return counts
