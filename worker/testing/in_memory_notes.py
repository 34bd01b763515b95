"""The in-memory store's notes (docs/notes.md), as a mixin of InMemoryStore: what
worker/store/notes.py does on PostgreSQL, in plain Python, for unit tests."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Protocol

import numpy as np

from worker.store import visibility
from worker.store.note_types import InsertNote, NoteNeighbor, NoteRecord, NoteState, RankedNote
from worker.store.types import ConsentGate, Vector

_WORD = re.compile(r"\w+")


@dataclass(slots=True)
class NoteRow:
    note: NoteRecord
    embedding: Vector  # float32 of the half-precision values


class _Host(Protocol):
    note_rows: dict[int, NoteRow]
    consents: dict[str, bool]


def _half(vector: Vector) -> Vector:
    return np.asarray(vector, dtype=np.float32).astype(np.float16).astype(np.float32)


def _distance(a: Vector, b: Vector) -> float:
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return 1.0 - float(a @ b) / norm if norm else 1.0


class InMemoryNotes:
    __slots__ = ()

    async def note_neighbors(
        self: _Host, user_id: str, session_id: str, embeddings: Vector, model: str,
    ) -> list[NoteNeighbor | None]:
        same = [r for r in self.note_rows.values()
                if r.note.user_id == user_id and r.note.active
                and r.note.source_session_id == session_id and r.note.embedding_model == model]
        found: list[NoteNeighbor | None] = []
        for query in (_half(row) for row in embeddings):
            ranked = sorted(((_distance(query, r.embedding), r.note.id, r) for r in same
                             if r.note.embedding_dim == len(query)), key=lambda t: t[:2])
            found.append(NoteNeighbor(ranked[0][2].note.id, ranked[0][2].note.text,
                                      ranked[0][0]) if ranked else None)
        return found

    def _commit_notes(self: _Host, user_id: str, notes: Sequence[InsertNote], *,
                      observed_at: datetime, session_id: str, first_id: int) -> int:
        """As notes.sql insert_notes; the next free id."""
        next_id = first_id
        for note in notes:
            vector = _half(np.asarray(note.embedding, dtype=np.float32))
            self.note_rows[next_id] = NoteRow(NoteRecord(
                id=next_id, user_id=user_id, text=note.text, observed_at=observed_at,
                source_session_id=session_id, created_at=datetime.now(UTC),
                embedding_model=note.embedding_model, embedding_dim=len(vector)), vector)
            old = self.note_rows.get(note.supersedes or 0)
            if old is not None and old.note.user_id == user_id and old.note.active:
                old.note = replace(old.note, superseded_at=observed_at, superseded_by=next_id,
                                   superseded_reason="updated")
            next_id += 1
        return next_id

    async def notes(
        self: _Host, user_id: str, *, state: NoteState = "active",
        consent_gate: ConsentGate | None = None,
    ) -> list[NoteRecord]:
        mine = [r.note for r in self.note_rows.values() if r.note.user_id == user_id]
        if state == "all":
            return sorted(mine, key=lambda n: n.id)
        if not visibility.consent_open(self.consents.get(user_id), consent_gate):
            return []
        return sorted((n for n in mine if n.active), key=lambda n: (n.observed_at, n.id))

    async def notes_of_fact(self: _Host, user_id: str, fact_id: int) -> list[NoteRecord]:
        return sorted((r.note for r in self.note_rows.values()
                       if r.note.user_id == user_id and r.note.promoted_to == fact_id),
                      key=lambda n: n.id)

    async def remove_note(self: _Host, user_id: str, note_id: int) -> NoteRecord | None:
        row = self.note_rows.get(note_id)
        if row is None or row.note.user_id != user_id or not row.note.active:
            return None
        row.note = replace(row.note, superseded_at=datetime.now(UTC),
                           superseded_reason="removed")
        return row.note

    async def search_notes(
        self: _Host, user_id: str, embedding: Vector, words_query: str, k: int, *,
        consent_gate: ConsentGate | None = None,
    ) -> list[RankedNote]:
        if not visibility.consent_open(self.consents.get(user_id), consent_gate):
            return []
        active = [r for r in self.note_rows.values()
                  if r.note.user_id == user_id and r.note.active]
        query = _half(np.asarray(embedding, dtype=np.float32))
        semantic = sorted((r for r in active if r.note.embedding_dim == len(query)),
                          key=lambda r: (_distance(query, r.embedding), r.note.id))[:k]
        words = {w.lower() for w in _WORD.findall(words_query) if w.lower() != "or"}
        scored = [(len(words & set(_WORD.findall(r.note.text.lower()))), r) for r in active]
        lexical = [r for score, r in sorted((t for t in scored if t[0]),
                                            key=lambda t: (-t[0], t[1].note.id))][:k]
        sem_rank = {r.note.id: i + 1 for i, r in enumerate(semantic)}
        lex_rank = {r.note.id: i + 1 for i, r in enumerate(lexical)}
        return [RankedNote(self.note_rows[i].note, sem_rank.get(i), lex_rank.get(i))
                for i in sorted(sem_rank.keys() | lex_rank.keys())]

    def _erase_notes(self: _Host, user_id: str) -> int:
        mine = [i for i, r in self.note_rows.items() if r.note.user_id == user_id]
        for note_id in mine:
            del self.note_rows[note_id]
        return len(mine)
