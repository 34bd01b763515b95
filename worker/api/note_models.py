"""Bodies of the memory API's notes (docs/notes.md): a note as the API shows it, and the
notes a search finds. A note's JSON is NoteRecord.to_json less the user id and the
embedding's model, which the path and the fleet already say."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from worker.store.note_types import NoteRecord


class Note(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: int
    text: str = Field(description="Free-form context about the user: not one settled fact.")
    observed_at: datetime = Field(description="When it was said.")
    source_session_id: str | None
    created_at: datetime
    superseded_at: datetime | None
    superseded_by: int | None = Field(
        description="The later note of the same session that said it anew ('updated').")
    superseded_reason: Literal["updated", "removed", "promoted"] | None
    promoted_to: int | None = Field(
        description="The fact the promotion job made of it and similar notes ('promoted').")

    @classmethod
    def of(cls, record: NoteRecord) -> Note:
        return cls.model_validate(record.to_json())


class Notes(BaseModel):
    notes: list[Note]


class NoteHitBody(BaseModel):
    kind: Literal["note"] = Field(default="note", description="Marks a note, never a fact.")
    note: Note
    score: float = Field(description="Reciprocal Rank Fusion score (k = 60).")
    semantic_rank: int | None
    lexical_rank: int | None
