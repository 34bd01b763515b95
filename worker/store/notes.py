"""Notes on PostgreSQL (docs/notes.md): the pipeline's same-session check, a run's note
writes inside its commit's transaction, the reads and the user's removal.

A mixin of ``PostgresStore`` (worker.store.postgres), its SQL in
worker/store/sql/notes.sql. Every statement names one user first, so a note id of
another user reads exactly like an id that does not exist.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pgvector import HalfVector

from worker.store import halfvec, queries
from worker.store.note_types import InsertNote, NoteNeighbor, NoteRecord, NoteState, RankedNote
from worker.store.pool import PooledStore
from worker.store.translate import translated
from worker.store.types import ConsentGate, Vector

_NOTE_COLUMNS = tuple(NoteRecord.__dataclass_fields__)


def note_of(row: Any) -> NoteRecord:
    return NoteRecord(**{name: row[name] for name in _NOTE_COLUMNS})


def _gate(consent_gate: ConsentGate | None) -> bool | None:
    return None if consent_gate is None else consent_gate.memory_default


class PostgresNotes(PooledStore):
    @property
    def _notes_sql(self) -> dict[str, str]:
        return queries.load("notes")

    # -- the pipeline ------------------------------------------------------

    async def note_neighbors(
        self, user_id: str, session_id: str, embeddings: Vector, model: str,
    ) -> list[NoteNeighbor | None]:
        """Per row of ``embeddings``, the nearest active note of the same session on the
        same model and dimension; None where the session has none."""
        found: list[NoteNeighbor | None] = [None] * len(embeddings)
        if not len(embeddings):
            return found
        async with translated("the notes' neighbour query"):
            rows = await self._pool.fetch(
                self._notes_sql["note_neighbors"], user_id, session_id,
                halfvec.encode_rows(embeddings), model, int(embeddings.shape[1]))
        for row in rows:
            found[row["ord"] - 1] = NoteNeighbor(row["id"], row["text"], row["distance"])
        return found

    async def _insert_notes(
        self, conn: Any, user_id: str, notes: Sequence[InsertNote], *, run_id: int,
        observed_at: Any, session_id: str,
    ) -> tuple[int, int]:
        """In the caller's transaction (the run's commit): (added, updated)."""
        row = await conn.fetchrow(
            self._notes_sql["insert_notes"], user_id, observed_at, session_id, run_id,
            [n.text for n in notes], halfvec.encode_each([n.embedding for n in notes]),
            [n.embedding_model for n in notes], [n.supersedes for n in notes])
        return int(row["added"]), int(row["updated"])

    # -- reading and the user's removal --------------------------------------

    async def notes(
        self, user_id: str, *, state: NoteState = "active",
        consent_gate: ConsentGate | None = None,
    ) -> list[NoteRecord]:
        """Active notes oldest first (behind ``consent_gate`` when given: a prompt's read),
        or every version by id (``state="all"``, the user's own view)."""
        async with translated("reading notes"):
            if state == "all":
                rows = await self._pool.fetch(self._notes_sql["all_notes"], user_id)
            else:
                rows = await self._pool.fetch(self._notes_sql["active_notes"], user_id,
                                              _gate(consent_gate))
        return [note_of(row) for row in rows]

    async def notes_of_fact(self, user_id: str, fact_id: int) -> list[NoteRecord]:
        """The notes the fact was promoted from, by id."""
        async with translated("reading notes"):
            rows = await self._pool.fetch(self._notes_sql["notes_of_fact"], user_id, fact_id)
        return [note_of(row) for row in rows]

    async def remove_note(self, user_id: str, note_id: int) -> NoteRecord | None:
        """Supersede an active note as 'removed'; None when the user has no such active note.
        Notes take no part in consolidation, so the user's version stays as it is."""
        async with translated("removing a note"):
            row = await self._pool.fetchrow(self._notes_sql["remove_note"], user_id, note_id)
        return None if row is None else note_of(row)

    async def search_notes(
        self, user_id: str, embedding: Vector, words_query: str, k: int, *,
        consent_gate: ConsentGate | None = None,
    ) -> list[RankedNote]:
        """Top-k active notes by meaning and by words, each with its rank in each list."""
        async with translated("searching notes"):
            rows = await self._pool.fetch(
                self._notes_sql["search_notes"], user_id, HalfVector(embedding), words_query,
                k, len(embedding), _gate(consent_gate))
        return [RankedNote(note_of(r), r["semantic_rank"], r["lexical_rank"]) for r in rows]
