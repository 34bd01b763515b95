"""PostgresStore: the real store, on asyncpg with binary pgvector codecs.

Implements both store interfaces (worker.store.base). This module holds the
pipeline's statements, the runs' audit reads and the memory API's writes; the
reads of a user's facts (the read path's, the API's) are in worker.store.fact_reads,
the user's corrections (an edit, a held proposal's answer) in
worker.store.corrections, the compare-and-set of the API's writes in
worker.store.versioned; persons, portraits and notes each in a mixin of their own.
Every fact query takes the user id first, so a fact id of another user reads
exactly like an id that does not exist. asyncpg's errors are translated at the
store's edge (worker.store.translate).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, TypeAlias

import asyncpg
from pgvector import HalfVector

from worker.errors import ConfigurationError, MemoryOptedOut
from worker.outcomes import ATTEMPTS, CURSOR_MOVES, DEAD_LETTERS
from worker.store import halfvec, queries
from worker.store.base import MemoryStore
from worker.store.corrections import PostgresCorrections
from worker.store.fact_reads import PostgresFactReads
from worker.store.fence_key import FenceKeys
from worker.store.notes import PostgresNotes
from worker.store.persons import PostgresPersons
from worker.store.portraits import PostgresPortraits
from worker.store.run_commit import commit_arguments, flat_json
from worker.store.translate import PG_ERRORS, commit_error, status_count, store_error, translated
from worker.store.types import (
    ConsentGate,
    CursorState,
    DeadLetter,
    Erasure,
    FactRecord,
    NeighborRow,
    Neighbors,
    NewFact,
    RunCommit,
    RunRecord,
    SessionRead,
    Vector,
)
from worker.store.versioned import RowMissing, fact_of
from worker.store.visibility import consent_open

# An erase's fence outlives every hand-over it could meet (worker.protocol.queue's
# payload lifetime) and the job that holds one; then it protects nothing.
FENCE_LIFETIME_S = 8 * 86_400


# What the read path takes: a store, or an asyncpg pool.
StoreOrPool: TypeAlias = "MemoryStore | asyncpg.Pool"


def memory_store(store_or_pool: StoreOrPool) -> MemoryStore:
    """A store as it is; an asyncpg pool (what chat servers passed the read path
    before worker.read.MemoryReader) as a PostgresStore on it."""
    if isinstance(store_or_pool, asyncpg.Pool):
        return PostgresStore(store_or_pool)
    store: MemoryStore = store_or_pool
    return store


class PostgresStore(PostgresFactReads, PostgresPersons, PostgresCorrections, PostgresPortraits,
                    PostgresNotes):
    def __init__(self, pool: Any, fences: FenceKeys | None = None) -> None:
        """``fences``: MEMFLEET_ERASE_FENCE_KEY's (worker.store.fence_key); a store without
        them reads and writes facts by hand, and refuses to commit, record or erase."""
        super().__init__(pool)
        self._fences = fences
        self._pipeline = queries.load("pipeline")
        self._facts = queries.load("facts")
        self._api = queries.load("memory_api")

    # -- the pipeline (PipelineStore) --------------------------------------

    async def load_session(self, user_id: str, session_id: str) -> SessionRead:
        async with translated("loading the cursor"):
            row = dict(await self._pool.fetchrow(self._pipeline["load_session"], user_id,
                                                 session_id))
        enabled = row.pop("memory_enabled")
        return SessionRead(None if row["version"] is None else CursorState(**row), enabled)

    async def neighbors(
        self, user_id: str, embeddings: Vector, k: int, *,
        agents: Sequence[str | None] | None = None, model: str | None = None,
        persons: Sequence[int | None] | None = None,
    ) -> Neighbors:
        result: list[list[NeighborRow]] = [[] for _ in range(len(embeddings))]
        if not len(embeddings):
            return Neighbors(0, result)
        vectors = halfvec.encode_rows(embeddings)
        per_candidate = list(agents) if agents is not None else [None] * len(embeddings)
        about = list(persons) if persons is not None else [None] * len(embeddings)
        async with translated("the neighbour query"):
            rows = await self._pool.fetch(self._pipeline["neighbors"], user_id, vectors, k,
                                          per_candidate, model, int(embeddings.shape[1]),
                                          about)
        version = 0
        other: tuple[str, int] | None = None
        for row in rows:
            version = row["version"]
            if row["other_model"] is not None:
                other = (row["other_model"], row["other_dim"])
            if row["id"] is not None:
                result[row["ord"] - 1].append(NeighborRow(
                    row["id"], row["text"], row["observed_at"], row["distance"],
                    row["pinned"], row["confidence"]))
        return Neighbors(version, result, other)

    async def commit_run(self, commit: RunCommit) -> int:
        """Write one run atomically, in one round trip (memfleet_commit_run)."""
        cursor = commit.cursor
        fence_key = self._fence_key(cursor.user_id).hex()
        arguments = commit_arguments(commit, fence_key)
        run_id: int
        try:
            if commit.notes:
                run_id = await self._commit_with_notes(commit, arguments)
            else:
                run_id = await self._pool.fetchval(self._pipeline["commit_run"], *arguments)
        except asyncpg.PostgresError as exc:
            raise commit_error(exc) from exc
        except PG_ERRORS as exc:  # the server away: InterfaceError, OSError
            raise store_error("the persist transaction", exc) from exc
        return run_id

    async def _commit_with_notes(self, commit: RunCommit, arguments: tuple[Any, ...]) -> int:
        """A run with notes: memfleet_commit_run, then its notes, in one transaction. The
        routine's checks (fences, consent) and the user's advisory lock hold to its end."""
        async with self._pool.acquire() as conn, conn.transaction():
            run_id: int = await conn.fetchval(self._pipeline["commit_run"], *arguments)
            await self._insert_notes(conn, commit.cursor.user_id, commit.notes, run_id=run_id,
                                     observed_at=commit.observed_at,
                                     session_id=commit.source_session_id)
        return run_id

    async def record_run(self, run: RunRecord) -> int:
        extra = {} if run.user_id is None else {"fence_key": self._fence_key(run.user_id).hex()}
        async with translated("recording the run"):
            run_id: int = await self._pool.fetchval(self._pipeline["insert_run"],
                                                    flat_json(run, **extra))
        return run_id

    async def ping(self) -> None:
        """One round trip to the server (a health check); StoreUnavailable when away."""
        async with translated("the health check"):
            await self._pool.fetchval(self._pipeline["ping"])

    async def check_fence_key(self, conn: Any = None) -> None:
        """ConfigurationError unless this store's key is the one the database's fences
        are written with (the first key used is recorded: memory_erasure_fence_key)."""
        if self._fences is None:
            self._fence_key("")  # raises: no key
            return
        mine = self._fences.check_value()
        recorded = None
        async with translated("checking the erase fence key"):
            for _ in range(3):
                recorded = await (conn or self._pool).fetchval(self._api["fence_key_check"],
                                                               mine)
                if recorded is not None:
                    break
                # Another process recorded its key while this statement ran: its
                # snapshot saw neither; the next statement sees that row.
        if recorded is None or bytes(recorded) != mine:
            raise ConfigurationError(
                "MEMFLEET_ERASE_FENCE_KEY is not the key this database's erase fences are"
                " written with: every process of the fleet needs the same one"
                " (docs/operations.md)")

    def _fence_key(self, user_id: str) -> bytes:
        """The user's key in memory_erasure_fence; never an unkeyed hash."""
        if self._fences is None:
            raise ConfigurationError(
                "this store has no MEMFLEET_ERASE_FENCE_KEY: it cannot commit, record"
                " runs or erase")
        return self._fences.of(user_id)

    # -- the runs (MemoryStore) -------------------------------------------

    async def runs(
        self, user_id: str, *, session_id: str | None = None
    ) -> list[dict[str, Any]]:
        async with translated("reading runs"):
            if session_id is None:
                rows = await self._pool.fetch(self._facts["runs_for_user"], user_id)
            else:
                rows = await self._pool.fetch(self._facts["runs_for_session"], user_id,
                                              session_id)
        return [dict(row) for row in rows]

    async def dead_letters(
        self, outcomes: Sequence[str] = DEAD_LETTERS, *, include_resolved: bool = False,
        limit: int | None = None, session: tuple[str, str] | None = None,
    ) -> list[DeadLetter]:
        user_id, session_id = session if session is not None else (None, None)
        async with translated("reading dead letters"):
            rows = await self._pool.fetch(
                self._facts["dead_letters"], list(DEAD_LETTERS), list(CURSOR_MOVES),
                list(ATTEMPTS), list(outcomes), include_resolved, limit, user_id, session_id)
        return [DeadLetter(**dict(row)) for row in rows]

    # -- writing (MemoryStore) ---------------------------------------------

    async def add_fact(self, user_id: str, fact: NewFact, *,
                       if_memory_on: ConsentGate | None = None) -> FactRecord:
        observed_at = datetime.now(UTC)
        t = fact.terms

        async def write(conn: Any) -> FactRecord:
            if if_memory_on is not None and not consent_open(
                    await conn.fetchval(self._api["consent"], user_id), if_memory_on):
                raise MemoryOptedOut()
            row = await conn.fetchrow(
                self._api["insert_manual_fact"], user_id, fact.text, fact.category,
                fact.importance, HalfVector(fact.embedding), fact.embedding_model, observed_at,
                t.scope, t.agent_id, t.valid_from, t.valid_to, t.expires_at, fact.pinned,
                t.basis, t.confidence, fact.via,
            )
            return fact_of(row)

        result = await self._versioned("adding a fact", user_id, write,
                                       user_lock=if_memory_on is not None)
        assert result is not None  # an insert always returns its row
        return result

    async def remove_fact(self, user_id: str, fact_id: int) -> FactRecord | None:
        """Nothing is deleted, and a miss leaves the user's version untouched."""

        async def write(conn: Any) -> FactRecord:
            row = await conn.fetchrow(self._api["remove_fact"], user_id, fact_id)
            if row is None:
                raise RowMissing
            return fact_of(row)

        return await self._versioned("removing a fact", user_id, write)

    async def set_pinned(self, user_id: str, fact_id: int, pinned: bool) -> FactRecord | None:
        """Through the user-version compare-and-set: a consolidation that read the
        fact before the pin re-reads, and then holds its change for the user."""

        async def write(conn: Any) -> FactRecord:
            row = await conn.fetchrow(self._api["set_pinned"], user_id, fact_id, pinned)
            if row is None:
                raise RowMissing
            return fact_of(row)

        return await self._versioned("pinning a fact", user_id, write)

    async def erase_user(self, erasure: Erasure) -> dict[str, int]:
        """One transaction under the user's advisory lock: a commit in flight
        either lands before it (and is deleted) or meets the fence after it."""
        user_id = erasure.user_id
        fence_key = self._fence_key(user_id)
        counts: dict[str, int] = {}
        async with translated("erasing a user"), self._pool.acquire() as conn, conn.transaction():
            await conn.execute(self._api["lock_user"], user_id)
            await self.check_fence_key(conn)
            await conn.execute(self._api["fence_user"], fence_key, erasure.erased_seq,
                               FENCE_LIFETIME_S)
            for table, name, extra in (
                ("memory_held_proposal", "erase_held", ()),
                # Notes before facts: a promoted note names its fact.
                ("memory_note", "erase_notes", ()),
                ("memory_note_check", "erase_note_check", ()),
                ("memory_fact", "erase_facts", ()),
                # The people in the user's life, once no fact points at them.
                ("memory_person_label", "erase_person_labels", ()),
                ("memory_person", "erase_persons", ()),
                ("memory_run", "erase_runs", ()),
                ("session_cursor", "erase_cursors", ()),
                ("user_memory_state", "erase_state", ()),
                ("user_memory_consent", "erase_consent", (erasure.keep_opt_out,)),
                ("memory_portrait", "erase_portraits", ()),
                ("user_portrait_choice", "erase_portrait_choice", (erasure.keep_opt_out,)),
            ):
                sql = self._notes_sql if table.startswith("memory_note") else self._api
                status: str = await conn.execute(sql[name], user_id, *extra)
                counts[table] = status_count(status)
            await conn.execute(self._api["record_erasure"], json.dumps(counts))
        return counts

    async def set_consent(self, user_id: str, enabled: bool) -> None:
        async with translated("setting consent"), self._pool.acquire() as conn, \
                conn.transaction():
            await conn.execute(self._api["lock_user"], user_id)
            await conn.execute(self._api["set_consent"], user_id, enabled)
            if not enabled:  # a portrait is empty while memory is off (docs/portrait.md)
                await self._end_portrait_on(conn, user_id, "memory_off")

    async def consent(self, user_id: str) -> bool | None:
        async with translated("reading consent"):
            enabled: bool | None = await self._pool.fetchval(self._api["consent"], user_id)
        return enabled
