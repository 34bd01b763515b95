"""The store's vocabulary for notes (docs/notes.md): what it reads and writes of them.

Notes live beside facts in a table of their own (schema/0017_notes.sql). The
pipeline plans a run's note writes (``InsertNote``) and the store commits them in
the run's one transaction; the promotion job reads a user's notes
(``PromotableNote``) and writes a ``Promotion``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from worker.vectors import Vector

NoteReason = Literal["updated", "removed", "promoted"]
# Which notes a read lists: the active ones, or every version.
NoteState = Literal["active", "all"]


@dataclass(frozen=True, slots=True)
class NoteRecord:
    id: int
    user_id: str
    text: str
    observed_at: datetime
    source_session_id: str | None
    created_at: datetime
    superseded_at: datetime | None = None
    superseded_by: int | None = None
    superseded_reason: str | None = None
    promoted_to: int | None = None  # the fact it was promoted to
    embedding_model: str | None = None
    embedding_dim: int | None = None

    @property
    def active(self) -> bool:
        return self.superseded_at is None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "user_id": self.user_id, "text": self.text,
            "observed_at": self.observed_at.isoformat(),
            "source_session_id": self.source_session_id,
            "created_at": self.created_at.isoformat(),
            "superseded_at": self.superseded_at.isoformat() if self.superseded_at else None,
            "superseded_by": self.superseded_by, "superseded_reason": self.superseded_reason,
            "promoted_to": self.promoted_to, "embedding_model": self.embedding_model,
            "embedding_dim": self.embedding_dim,
        }


@dataclass(frozen=True, slots=True)
class NoteNeighbor:
    """An active note of the same session near a new one (the pipeline's check)."""

    id: int
    text: str
    distance: float


@dataclass(frozen=True, slots=True)
class InsertNote:
    """A note a run writes; ``supersedes``: an active note of the same session it
    replaces (left alone, without failing the run, if it ended meanwhile)."""

    text: str
    embedding: Vector  # one row of the embedder's matrix
    embedding_model: str
    supersedes: int | None = None


@dataclass(frozen=True, slots=True)
class RankedNote:
    """A search hit: the note and its 1-based rank in each list (None: not in that list)."""

    note: NoteRecord
    semantic_rank: int | None
    lexical_rank: int | None


@dataclass(frozen=True, slots=True)
class PromotableNote:
    """An active note as the promotion job clusters it."""

    id: int
    text: str
    session_id: str | None
    observed_at: datetime
    embedding: Vector


@dataclass(frozen=True, slots=True)
class Promotion:
    """One cluster made a fact: the notes ``note_ids`` end as promoted to it. With
    ``covered_by`` the user already has that active fact saying it: the notes are
    linked to it and no fact is written."""

    note_ids: tuple[int, ...]
    text: str
    category: str
    importance: int
    embedding: Vector
    embedding_model: str
    session_id: str | None  # the newest note's session: where the fact was last said
    observed_at: datetime  # the newest note's
    covered_by: int | None = None


@dataclass(frozen=True, slots=True)
class PromotionResult:
    """What a promotion wrote: the fact (new, or the covering one) and whether it was
    written now; None when the notes were no longer all active (another worker
    promoted them, the user removed one, an erase) or the user's memory is off."""

    fact_id: int
    added: bool
